/* SPDX-License-Identifier: Apache-2.0 */
/* The files a run returns (artifacts.h): the walk, its limits, sniffing, the host copy, the JSON. */
#include "run/artifacts.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "sandbox/sandbox.h"

/* ------------------------------------------------------------------ pure helpers */

static bool has_suffix(const char *s, const char *suffix)
{
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

const char *artifact_sniff(const char *name, const unsigned char *d, size_t len, bool *image, bool *text)
{
  *image = *text = false;
  static const struct {
    const char *magic;
    size_t off, len;
    const char *mime;
  } images[] = {
      {"\x89PNG\r\n\x1a\n", 0, 8, "image/png"},
      {"\xff\xd8\xff", 0, 3, "image/jpeg"},
      {"GIF87a", 0, 6, "image/gif"},
      {"GIF89a", 0, 6, "image/gif"},
      {"WEBP", 8, 4, "image/webp"}, /* after "RIFF" and the size */
  };
  for (size_t i = 0; i < sizeof images / sizeof *images; i++)
    if (len >= images[i].off + images[i].len &&
        memcmp(d + images[i].off, images[i].magic, images[i].len) == 0 &&
        (images[i].off == 0 || memcmp(d, "RIFF", 4) == 0)) {
      *image = true;
      return images[i].mime;
    }
  if (len >= 5 && memcmp(d, "%PDF-", 5) == 0)
    return "application/pdf";
  for (size_t i = 0; i < len;) {
    size_t l = d[i] ? json_utf8_len(d + i, len - i) : 0;
    if (!l)
      return "application/octet-stream";
    i += l;
  }
  *text = true;
  static const struct {
    const char *ext, *mime;
  } texts[] = {
      {".csv", "text/csv"},          {".tsv", "text/tab-separated-values"},
      {".json", "application/json"}, {".md", "text/markdown"},
      {".html", "text/html"},        {".htm", "text/html"},
      {".xml", "application/xml"},   {".svg", "image/svg+xml"},
      {".py", "text/x-python"},      {".yaml", "application/yaml"},
      {".yml", "application/yaml"},  {".js", "text/javascript"},
      {".css", "text/css"},
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
    if (has_suffix(name, texts[i].ext))
      return texts[i].mime;
  return "text/plain";
}

const char *artifact_name_problem(const char *name, size_t len)
{
  const unsigned char *u = (const unsigned char *) name;
  if (len == 0 || (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
    return "name is `.` or `..`";
  for (size_t i = 0; i < len;) {
    size_t l = json_utf8_len(u + i, len - i);
    if (!l)
      return "name is not valid UTF-8";
    if (l == 1 && (u[i] < 0x20 || u[i] == 0x7f))
      return "name holds a control character";
    i += l;
  }
  return NULL;
}

int artifact_uri_append(strbuf_t *sb, const char *path)
{
  static const char hex[] = "0123456789ABCDEF";
  int r = 0;
  for (const unsigned char *p = (const unsigned char *) path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
        strchr("-._~/", *p))
      r |= strbuf_append(sb, (const char *) p, 1);
    else
      r |= strbuf_append(sb, (char[]){'%', hex[*p >> 4], hex[*p & 15]}, 3);
  }
  return r;
}

/* ------------------------------------------------------------------ the walk */

bool artifacts_out_empty(int workspace_fd)
{
  /* tmpfs gives a directory 20 bytes of size (BOGO_DIRENT_SIZE, mm/shmem.c) per entry, `.` and
   * `..` included: an empty one is exactly 40. Any other answer takes the careful way. */
  struct stat st;
  return workspace_fd < 0 || (fstatat(workspace_fd, SBX_OUT_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                              S_ISDIR(st.st_mode) && st.st_size == 40);
}

/* One name in dirfd, never through a link, a magic link or a mount (the code cannot mount, but
 * nothing here depends on that). Before Linux 5.6: O_NOFOLLOW on a single component, and the
 * caller's fstat compares the device. */
static int open_beneath(int dirfd, const char *name, int flags)
{
  struct open_how how = {
      .flags = (uint64_t) (flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC),
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  static bool no_openat2;
  if (!no_openat2) {
    int fd = (int) syscall(SYS_openat2, dirfd, name, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS)
      return fd;
    no_openat2 = true;
  }
  return openat(dirfd, name, (int) how.flags);
}

struct walk {
  struct artifacts *a;
  uint64_t max_files, max_bytes;
  dev_t dev; /* the workspace tmpfs */
  sbx_error_t *err;
};

/* A new entry (NULL: out of memory). */
static struct artifact *add(struct walk *wk, const char *path, const char *omitted)
{
  struct artifacts *a = wk->a;
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 16;
    struct artifact *v = realloc(a->v, cap * sizeof *v);
    if (!v)
      return NULL;
    a->v = v;
    a->cap = cap;
  }
  struct artifact *e = &a->v[a->n];
  *e = (struct artifact){.omitted = omitted};
  if (!(e->path = strdup(path)))
    return NULL;
  a->n++;
  return e;
}

static int oom(struct walk *wk)
{
  return sbx_error_set(wk->err, ENOMEM, "/workspace/out: out of memory");
}

/* Read the regular file `name` (st from the walk) into e, or say why not. */
static int read_one(struct walk *wk, int dirfd, const char *name, const struct stat *st, struct artifact *e)
{
  struct artifacts *a = wk->a;
  e->size = (uint64_t) st->st_size;
  _cleanup_close_ int fd = open_beneath(dirfd, name, O_RDONLY);
  struct stat now;
  if (fd < 0 || fstat(fd, &now) < 0) {
    e->omitted = "could not be opened";
    return 0;
  }
  if (!S_ISREG(now.st_mode) || now.st_ino != st->st_ino || now.st_dev != wk->dev) {
    e->omitted = "changed while it was read";
    return 0;
  }
  /* st_size from the walk bounds the read, whatever the file holds now. */
  size_t want = (size_t) e->size, got = 0;
  char *buf = malloc(want + 1);
  if (!buf)
    return oom(wk);
  while (got < want) {
    ssize_t n = read(fd, buf + got, want - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t) n;
  }
  buf[got] = '\0';
  e->data = buf;
  e->size = got;
  a->bytes += got;
  a->returned++;
  sha256_hex(buf, got, e->sha256);
  e->mime = artifact_sniff(name, (const unsigned char *) buf, got, &e->image, &e->text);
  return 0;
}

static int cmp_names(const void *x, const void *y)
{
  return strcmp(*(char *const *) x, *(char *const *) y);
}

/* The names in dirfd (not `.`, `..`), sorted, at most what is left of ARTIFACT_MAX_SCAN. */
static int list_dir(struct walk *wk, int dirfd, char ***ret, size_t *ret_n)
{
  *ret = NULL;
  *ret_n = 0;
  char buf[32768];
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    long got = syscall(SYS_getdents64, dirfd, buf, sizeof buf);
    if (got <= 0)
      break;
    for (long off = 0; off < got;) {
      struct {
        uint64_t ino;
        int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[];
      } *d = (void *) (buf + off);
      off += d->reclen;
      if (!strcmp(d->name, ".") || !strcmp(d->name, ".."))
        continue;
      if (wk->a->scanned >= ARTIFACT_MAX_SCAN) {
        wk->a->scan_stopped = true;
        goto done;
      }
      wk->a->scanned++;
      if (n == cap) {
        cap = cap ? cap * 2 : 32;
        char **v = realloc(names, cap * sizeof *v);
        if (!v)
          goto fail;
        names = v;
      }
      if (!(names[n] = strdup(d->name)))
        goto fail;
      n++;
    }
  }
done:
  if (n) /* qsort(NULL, 0) is undefined */
    qsort(names, n, sizeof *names, cmp_names);
  *ret = names;
  *ret_n = n;
  return 0;
fail:
  while (n)
    free(names[--n]);
  free(names);
  return oom(wk);
}

static const char *kind_omitted(mode_t m)
{
  return S_ISLNK(m)                 ? "symlink, not followed"
         : S_ISFIFO(m)              ? "FIFO, not read"
         : S_ISSOCK(m)              ? "socket, not read"
         : S_ISCHR(m) || S_ISBLK(m) ? "device, not read"
                                    : "not a regular file";
}

static int walk_dir(struct walk *wk, int dirfd, const char *prefix, int depth)
{
  struct artifacts *a = wk->a;
  char **names;
  size_t n;
  if (list_dir(wk, dirfd, &names, &n) < 0)
    return -1;
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++) {
    char path[ARTIFACT_MAX_PATH + 1];
    const char *name = names[i];
    bool fits = bufprintf(path, sizeof path, NULL, "%s%s%s", prefix, *prefix ? "/" : "", name) == 0;
    if (!fits)
      bufprintf_cut(path, sizeof path, "%s/%s", prefix, name);
    const char *why = fits ? artifact_name_problem(name, strlen(name)) : "path too long";
    struct stat st = {0};
    if (!why && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      why = "could not be looked at";
    else if (!why && st.st_dev != wk->dev)
      why = "on another file system";
    else if (!why && S_ISDIR(st.st_mode) && depth >= ARTIFACT_MAX_DEPTH)
      why = "directory too deep, not looked into";
    else if (!why && S_ISDIR(st.st_mode)) {
      _cleanup_close_ int sub = open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
      struct stat now;
      if (sub < 0 || fstat(sub, &now) < 0 || now.st_ino != st.st_ino || now.st_dev != wk->dev)
        why = "directory could not be opened";
      else
        r = walk_dir(wk, sub, path, depth + 1);
      if (!why)
        continue;
    } else if (!why && !S_ISREG(st.st_mode))
      why = kind_omitted(st.st_mode);
    else if (!why && a->returned >= wk->max_files)
      why = "max_artifacts";
    else if (!why && (uint64_t) st.st_size > wk->max_bytes - a->bytes)
      why = "artifact_limit"; /* by its size: a sparse terabyte is never read */
    if (why && a->n - a->returned >= ARTIFACT_MAX_OMITTED) {
      a->not_listed++;
      continue;
    }
    struct artifact *e = add(wk, path, why);
    if (!e)
      r = oom(wk);
    else if (S_ISREG(st.st_mode))
      e->size = (uint64_t) st.st_size;
    if (e && !why)
      r = read_one(wk, dirfd, name, &st, e);
  }
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return r;
}

int artifacts_collect(int workspace_fd, uint64_t max_files, uint64_t max_bytes, struct artifacts *ret,
                      sbx_error_t *err)
{
  *ret = (struct artifacts){0};
  struct walk wk = {.a = ret, .max_files = max_files, .max_bytes = max_bytes, .err = err};
  struct stat ws, st;
  if (workspace_fd < 0 || fstat(workspace_fd, &ws) < 0)
    return 0;
  wk.dev = ws.st_dev;
  _cleanup_close_ int out = open_beneath(workspace_fd, SBX_OUT_DIR, O_RDONLY | O_DIRECTORY);
  if (out < 0 || fstat(out, &st) < 0 || st.st_dev != wk.dev) {
    ret->problem = "/workspace/out is not a directory (the code replaced it); nothing collected";
    return 0;
  }
  if (walk_dir(&wk, out, "", 0) < 0) {
    artifacts_free(ret);
    return -1;
  }
  return 0;
}

void artifacts_free(struct artifacts *a)
{
  for (size_t i = 0; i < a->n; i++) {
    free(a->v[i].path);
    free(a->v[i].data);
    free(a->v[i].uri);
  }
  free(a->v);
  *a = (struct artifacts){0};
}

/* ------------------------------------------------------------------ the host copy */

/* The directory for path's parent under dirfd, each component made (0755) or opened without
 * following links. Returns a new fd (dirfd itself dup'ed when path has no '/'), or -1. */
static int make_parents(int dirfd, const char *path)
{
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  char comp[ARTIFACT_MAX_PATH + 1];
  for (const char *p = path, *slash; fd >= 0 && (slash = strchr(p, '/')); p = slash + 1) {
    size_t l = (size_t) (slash - p);
    memcpy(comp, p, l);
    comp[l] = '\0';
    if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
      close(fd);
      return -1;
    }
    int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
  }
  return fd;
}

static int write_all(int fd, const char *p, size_t left)
{
  while (left) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    left -= (size_t) n;
  }
  return 0;
}

int artifacts_write_new(int dirfd, const char *name, const void *data, size_t len)
{
  _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  return fd < 0 || write_all(fd, data, len) < 0 ? -1 : 0;
}

void artifacts_save(struct artifacts *a, int dirfd, const char *dir_path)
{
  for (size_t i = 0; i < a->n; i++) {
    struct artifact *e = &a->v[i];
    if (!e->data)
      continue;
    /* Every component was checked (artifact_name_problem) and the tree is ours and fresh. */
    _cleanup_close_ int parent = make_parents(dirfd, e->path);
    const char *base = strrchr(e->path, '/');
    base = base ? base + 1 : e->path;
    if (parent < 0 || artifacts_write_new(parent, base, e->data, e->size) < 0) {
      e->omitted = errno == EEXIST ? "a file of that name is already saved (stdout.txt, stderr.txt)"
                                   : "could not be saved under --output-dir";
      free(TAKE_PTR(e->data)); /* not returned at all: the output dir is where files go */
      a->returned--;
      continue;
    }
    strbuf_t uri = {0};
    if (strbuf_append(&uri, "file://", 7) < 0 || artifact_uri_append(&uri, dir_path) < 0 ||
        strbuf_append(&uri, "/", 1) < 0 || artifact_uri_append(&uri, e->path) < 0) {
      strbuf_free(&uri);
      continue;
    }
    e->uri = uri.data;
  }
}

/* ------------------------------------------------------------------ the result */

void artifacts_write_blocks(json_writer_t *w, const struct artifacts *a, bool links)
{
  for (size_t i = 0; i < a->n; i++) {
    const struct artifact *e = &a->v[i];
    if (!e->data)
      continue;
    if (e->image) {
      size_t n;
      _cleanup_free_ char *b64 = base64_encode(e->data, e->size, &n);
      if (b64) {
        json_obj_begin(w);
        json_kv_str(w, "type", "image");
        json_kv_strn(w, "data", b64, n);
        json_kv_str(w, "mimeType", e->mime);
        json_obj_end(w);
      }
    }
    if (e->uri && links) {
      json_obj_begin(w);
      json_kv_str(w, "type", "resource_link");
      json_kv_str(w, "uri", e->uri);
      json_kv_str(w, "name", e->path);
      json_kv_str(w, "mimeType", e->mime);
      json_kv_uint(w, "size", e->size);
      json_obj_end(w);
    } else if (!e->uri && e->text && !e->image && e->size <= ARTIFACT_EMBED_TEXT) {
      strbuf_t uri = {0};
      if (strbuf_append(&uri, "sandboxd://workspace/out/", 25) < 0 ||
          artifact_uri_append(&uri, e->path) < 0) {
        strbuf_free(&uri);
        continue;
      }
      json_obj_begin(w);
      json_kv_str(w, "type", "resource");
      json_key(w, "resource");
      json_obj_begin(w);
      json_kv_str(w, "uri", uri.data);
      json_kv_str(w, "mimeType", e->mime);
      json_kv_strn(w, "text", e->data, e->size);
      json_obj_end(w);
      json_obj_end(w);
      strbuf_free(&uri);
    }
  }
}

void artifacts_write_files(json_writer_t *w, const struct artifacts *a)
{
  json_key(w, "files");
  json_arr_begin(w);
  for (size_t i = 0; i < a->n; i++) {
    const struct artifact *e = &a->v[i];
    json_obj_begin(w);
    json_kv_str(w, "path", e->path);
    json_kv_uint(w, "size", e->size);
    if (e->data) {
      json_kv_str(w, "mime_type", e->mime);
      json_kv_str(w, "sha256", e->sha256);
    }
    if (e->uri)
      json_kv_str(w, "uri", e->uri);
    if (e->omitted)
      json_kv_str(w, "omitted", e->omitted);
    json_obj_end(w);
  }
  json_arr_end(w);
}

int artifacts_note(const struct artifacts *a, const char *saved_dir, bool list_saved, strbuf_t *sb)
{
  int r = 0;
  size_t omitted = a->n - a->returned + a->not_listed, saved = 0;
  for (size_t i = 0; i < a->n; i++)
    saved += a->v[i].uri != NULL;
  if (a->problem)
    r |= strbuf_printf(sb, "--- %s ---\n", a->problem);
  if (saved && list_saved) {
    r |= strbuf_printf(sb, "--- %zu file%s from /workspace/out saved in %s/:", saved, saved == 1 ? "" : "s",
                       saved_dir);
    for (size_t i = 0; i < a->n; i++)
      if (a->v[i].uri)
        r |= strbuf_printf(sb, " %s", a->v[i].path);
    r |= strbuf_printf(sb, " ---\n");
  }
  if (omitted)
    r |= strbuf_printf(
        sb, "--- %zu file%s in /workspace/out not returned (structuredContent.files says why) ---\n", omitted,
        omitted == 1 ? "" : "s");
  if (a->scan_stopped)
    r |= strbuf_printf(sb, "--- stopped looking in /workspace/out after %d entries ---\n", ARTIFACT_MAX_SCAN);
  return r;
}
