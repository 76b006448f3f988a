/* SPDX-License-Identifier: Apache-2.0 */
/* Layer extraction: one tar stream (plain, gzip or zstd) applied to a tree, safely (see
 * image_layer.h); and libarchive, loaded on first use. This is the one file that includes
 * <archive.h>. */
#include "image/image_layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "image/image_util.h"

#define CAPS_XATTR "security.capability"

/* libarchive is loaded on first use: linked normally, every sandboxd start (every `exec`) would
 * map it and its dependencies (ICU, libxml2, libstdc++, nettle...), about 2 ms each time. */
#define LIBARCHIVE_FUNCS(X)                                                                                  \
  X(archive_entry_atime)                                                                                     \
  X(archive_entry_atime_is_set)                                                                              \
  X(archive_entry_atime_nsec)                                                                                \
  X(archive_entry_filetype)                                                                                  \
  X(archive_entry_gid)                                                                                       \
  X(archive_entry_hardlink)                                                                                  \
  X(archive_entry_mtime)                                                                                     \
  X(archive_entry_mtime_nsec)                                                                                \
  X(archive_entry_pathname)                                                                                  \
  X(archive_entry_perm)                                                                                      \
  X(archive_entry_size)                                                                                      \
  X(archive_entry_size_is_set)                                                                               \
  X(archive_entry_symlink)                                                                                   \
  X(archive_entry_uid)                                                                                       \
  X(archive_entry_xattr_next)                                                                                \
  X(archive_entry_xattr_reset)                                                                               \
  X(archive_error_string)                                                                                    \
  X(archive_read_data_block)                                                                                 \
  X(archive_read_free)                                                                                       \
  X(archive_read_new)                                                                                        \
  X(archive_read_next_header)                                                                                \
  X(archive_read_open_memory)                                                                                \
  X(archive_read_support_filter_gzip)                                                                        \
  X(archive_read_support_filter_zstd)                                                                        \
  X(archive_read_support_format_tar)

static struct {
#define LA_MEMBER(f) __typeof__(&f) f;
  LIBARCHIVE_FUNCS(LA_MEMBER)
#undef LA_MEMBER
} la;

static int libarchive_load(sbx_error_t *err)
{
  static void *handle;
  if (handle)
    return 0;
  void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    sbx_error_set(err, ENOENT, "cannot load libarchive: %s", dlerror());
    return sbx_error_hint(err, "install libarchive13");
  }
#define LA_LOAD(f)                                                                                           \
  if (!(*(void **) &la.f = dlsym(h, #f))) {                                                                  \
    dlclose(h);                                                                                              \
    return sbx_error_set(err, ENOSYS, "libarchive lacks %s", #f);                                            \
  }
  LIBARCHIVE_FUNCS(LA_LOAD)
#undef LA_LOAD
  handle = h;
  return 0;
}

/* From here on, archive_*() calls go through the table. */
#define archive_entry_atime la.archive_entry_atime
#define archive_entry_atime_is_set la.archive_entry_atime_is_set
#define archive_entry_atime_nsec la.archive_entry_atime_nsec
#define archive_entry_filetype la.archive_entry_filetype
#define archive_entry_gid la.archive_entry_gid
#define archive_entry_hardlink la.archive_entry_hardlink
#define archive_entry_mtime la.archive_entry_mtime
#define archive_entry_mtime_nsec la.archive_entry_mtime_nsec
#define archive_entry_pathname la.archive_entry_pathname
#define archive_entry_perm la.archive_entry_perm
#define archive_entry_size la.archive_entry_size
#define archive_entry_size_is_set la.archive_entry_size_is_set
#define archive_entry_symlink la.archive_entry_symlink
#define archive_entry_uid la.archive_entry_uid
#define archive_entry_xattr_next la.archive_entry_xattr_next
#define archive_entry_xattr_reset la.archive_entry_xattr_reset
#define archive_error_string la.archive_error_string
#define archive_read_data_block la.archive_read_data_block
#define archive_read_free la.archive_read_free
#define archive_read_new la.archive_read_new
#define archive_read_next_header la.archive_read_next_header
#define archive_read_open_memory la.archive_read_open_memory
#define archive_read_support_filter_gzip la.archive_read_support_filter_gzip
#define archive_read_support_filter_zstd la.archive_read_support_filter_zstd
#define archive_read_support_format_tar la.archive_read_support_format_tar

int image_path_normalize(const char *in, char *out, size_t outlen, sbx_error_t *err)
{
  char b[160];
  size_t o = 0;
  if (strnlen(in, PATH_MAX) >= PATH_MAX)
    return sbx_error_set(err, ENAMETOOLONG, "name `%s`: longer than %d bytes", image_shown(in, b),
                         PATH_MAX - 1);
  for (const unsigned char *c = (const unsigned char *) in; *c; c++)
    if (*c < 0x20 || *c == 0x7f)
      return sbx_error_set(err, EINVAL, "name `%s`: contains a control character", image_shown(in, b));
  for (const char *p = in; *p;) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    const char *e = strchrnul(p, '/');
    size_t n = (size_t) (e - p);
    if (n == 1 && p[0] == '.') {
      p = e;
      continue;
    }
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return sbx_error_set(err, EINVAL, "name `%s`: `..` component", image_shown(in, b));
    if (n > NAME_MAX)
      return sbx_error_set(err, ENAMETOOLONG, "name `%s`: a component is longer than %d bytes",
                           image_shown(in, b), NAME_MAX);
    if (o + (o ? 1 : 0) + n + 1 > outlen)
      return sbx_error_set(err, ENAMETOOLONG, "name `%s`: too long", image_shown(in, b));
    if (o)
      out[o++] = '/';
    memcpy(out + o, p, n);
    o += n;
    p = e;
  }
  out[o] = '\0';
  return 0;
}

/* ------------------------------------------------------------------ the extractor */

struct dirfix {
  char *path;
  mode_t mode;
  uid_t uid;
  gid_t gid;
  struct timespec mtime;
};

void image_layer_free(struct extractor *x)
{
  strset_free(&x->layer_paths);
  for (size_t i = 0; i < x->nfix; i++)
    free(x->fix[i].path);
  free(x->fix);
  x->fix = NULL;
  x->nfix = x->capfix = 0;
}

static int note_written(struct extractor *x, const char *path)
{
  char buf[PATH_MAX];
  if (bufprintf(buf, sizeof buf, NULL, "%s", path) < 0)
    return -1;
  for (;;) {
    if (strset_add(&x->layer_paths, buf) < 0)
      return -1;
    char *slash = strrchr(buf, '/');
    if (!slash)
      return 0;
    *slash = '\0';
  }
}

static int add_dirfix(struct extractor *x, const char *path, struct archive_entry *e)
{
  if (x->nfix == x->capfix) {
    size_t cap = x->capfix ? x->capfix * 2 : 256;
    struct dirfix *f = realloc(x->fix, cap * sizeof *f);
    if (!f)
      return -1;
    x->fix = f;
    x->capfix = cap;
  }
  struct dirfix *f = &x->fix[x->nfix];
  if (!(f->path = strdup(path)))
    return -1;
  /* A setuid bit on a directory means nothing; setgid (group inheritance) and sticky stay. */
  f->mode = (mode_t) (archive_entry_perm(e) & 07777) & (mode_t) ~S_ISUID;
  if (x->plain)
    f->mode = 0755;
  f->uid = (uid_t) archive_entry_uid(e);
  f->gid = (gid_t) archive_entry_gid(e);
  f->mtime.tv_sec = archive_entry_mtime(e);
  f->mtime.tv_nsec = archive_entry_mtime_nsec(e);
  x->nfix++;
  return 0;
}

int image_layer_cancelled(const struct extractor *x, sbx_error_t *err)
{
  if (x->o->cancel && *x->o->cancel)
    return sbx_error_set(err, ECANCELED, "interrupted");
  return 0;
}

/* Owner, mode (without setuid/setgid unless kept), capabilities and times of a new file. */
static int set_attrs(struct extractor *x, int fd, struct archive_entry *e, const char *path, sbx_error_t *err)
{
  char b[160];
  mode_t mode = (mode_t) (archive_entry_perm(e) & 07777);
  if (x->plain) {
    mode = (mode & 0755) | 0600;
  } else {
    if (x->chown && fchown(fd, (uid_t) archive_entry_uid(e), (gid_t) archive_entry_gid(e)) < 0 &&
        errno != EINVAL) /* EINVAL: an id not mapped in our user namespace; keep ours */
      return sbx_error_errno(err, "entry `%s`: chown", image_shown(path, b));
    if ((mode & (S_ISUID | S_ISGID)) && !x->o->keep_privileges) {
      mode &= (mode_t) ~(S_ISUID | S_ISGID);
      x->st->setid_stripped++;
    }
    const char *xname;
    const void *xval;
    size_t xlen;
    archive_entry_xattr_reset(e);
    while (archive_entry_xattr_next(e, &xname, &xval, &xlen) == ARCHIVE_OK) {
      /* Other xattrs (user.*, security.selinux, trusted.*) are not applied: nothing in the sandbox
       * needs them and some would grant or label. File capabilities only when asked to keep them. */
      if (strcmp(xname, CAPS_XATTR))
        continue;
      if (!x->o->keep_privileges)
        x->st->caps_stripped++;
      else if (fsetxattr(fd, CAPS_XATTR, xval, xlen, 0) < 0)
        return sbx_error_errno(err, "entry `%s`: set file capabilities", image_shown(path, b));
    }
  }
  /* After fchown, which clears setuid bits. */
  if (fchmod(fd, mode) < 0)
    return sbx_error_errno(err, "entry `%s`: chmod", image_shown(path, b));
  struct timespec ts[2] = {
      {archive_entry_atime(e), archive_entry_atime_nsec(e)},
      {archive_entry_mtime(e), archive_entry_mtime_nsec(e)},
  };
  if (!archive_entry_atime_is_set(e))
    ts[0] = ts[1];
  if (futimens(fd, ts) < 0)
    return sbx_error_errno(err, "entry `%s`: set times", image_shown(path, b));
  return 0;
}

static int write_regular(struct extractor *x, struct archive *a, struct archive_entry *e, int pfd,
                         const char *base, const char *path, sbx_error_t *err)
{
  char b[160], sz[32];
  int64_t declared = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
  if (declared < 0)
    declared = 0;
  if ((uint64_t) declared > x->max_bytes - x->nbytes) {
    sbx_error_set(err, EFBIG, "entry `%s`: more than %s unpacked (size limit)", image_shown(path, b),
                  format_size(x->max_bytes, sz, sizeof sz));
    return sbx_error_hint(err, "see --max-size");
  }
  _cleanup_close_ int fd =
      openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0)
    return sbx_error_errno(err, "entry `%s`: create", image_shown(path, b));
  for (;;) {
    const void *buf;
    size_t len;
    la_int64_t off;
    int r = archive_read_data_block(a, &buf, &len, &off);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN)
      return sbx_error_set(err, EIO, "entry `%s`: %s", image_shown(path, b), archive_error_string(a));
    if (off < 0 || (uint64_t) off + len > (uint64_t) declared)
      return sbx_error_set(err, EINVAL, "entry `%s`: data beyond its declared size", image_shown(path, b));
    for (size_t done = 0; done < len;) {
      ssize_t n = pwrite(fd, (const char *) buf + done, len - done, off + (off_t) done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sbx_error_errno(err, "entry `%s`: write", image_shown(path, b));
      done += (size_t) n;
    }
    if (image_layer_cancelled(x, err) < 0)
      return -1;
  }
  /* Sparse files may end in a hole. */
  if (ftruncate(fd, declared) < 0)
    return sbx_error_errno(err, "entry `%s`: truncate", image_shown(path, b));
  x->nbytes += (uint64_t) declared;
  return set_attrs(x, fd, e, path, err);
}

static int check_link_target(const char *what, const char *path, const char *target, sbx_error_t *err)
{
  char b[160], c[160];
  if (!target || !*target)
    return sbx_error_set(err, EINVAL, "entry `%s`: empty %s target", image_shown(path, b), what);
  if (strlen(target) >= PATH_MAX)
    return sbx_error_set(err, ENAMETOOLONG, "entry `%s`: %s target longer than %d bytes",
                         image_shown(path, b), what, PATH_MAX - 1);
  for (const unsigned char *t = (const unsigned char *) target; *t; t++)
    if (*t < 0x20 || *t == 0x7f)
      return sbx_error_set(err, EINVAL, "entry `%s`: %s target `%s` contains a control character",
                           image_shown(path, b), what, image_shown(target, c));
  return 0;
}

/* D/.wh.NAME deletes D/NAME of the layers below; D/.wh..wh..opq empties D of them. */
static int apply_whiteout(struct extractor *x, const char *dir, const char *name, const char *path,
                          sbx_error_t *err)
{
  char b[160], target[PATH_MAX];
  x->st->whiteouts++;
  bool opaque = !strcmp(name, ".wh..opq");
  if (!opaque && (!*name || !strcmp(name, ".") || !strcmp(name, "..") || !strncmp(name, ".wh.", 4)))
    return sbx_error_set(err, EINVAL, "whiteout `%s`: names no removable file", image_shown(path, b));
  _cleanup_close_ int dfd = fs_root_resolve_dir(&x->root, dir);
  if (dfd < 0) /* nothing below to hide */
    return errno == ENOENT || errno == ENOTDIR ? 0
                                               : sbx_error_errno(err, "whiteout `%s`", image_shown(path, b));
  if (!opaque) {
    if (bufprintf(target, sizeof target, err, "%s%s%s", dir, *dir ? "/" : "", name) < 0)
      return sbx_error_prefix(err, "whiteout `%s`", image_shown(path, b));
    if (strset_has(&x->layer_paths, target)) /* from this very layer: stays */
      return 0;
    if (fs_root_rm_tree(&x->root, dfd, name) < 0 && errno != ENOENT)
      return sbx_error_errno(err, "whiteout `%s`: remove", image_shown(path, b));
    return 0;
  }
  char **names;
  size_t n;
  if (fs_list_dir(dfd, &names, &n) < 0)
    return sbx_error_errno(err, "opaque whiteout `%s`: list", image_shown(path, b));
  int ret = 0;
  for (size_t i = 0; i < n && ret == 0; i++) {
    if (bufprintf(target, sizeof target, err, "%s%s%s", dir, *dir ? "/" : "", names[i]) < 0)
      ret = sbx_error_prefix(err, "opaque whiteout `%s`", image_shown(path, b));
    else if (!strset_has(&x->layer_paths, target) && fs_root_rm_tree(&x->root, dfd, names[i]) < 0 &&
             errno != ENOENT)
      ret = sbx_error_errno(err, "opaque whiteout `%s`: remove `%s`", image_shown(path, b), names[i]);
  }
  fs_free_names(names, n);
  return ret;
}

/* The target must already be in the tree; its parent resolves inside the root, its last
 * component is not followed (linkat without AT_SYMLINK_FOLLOW). */
static int write_hardlink(struct extractor *x, int pfd, const char *base, const char *path,
                          const char *hardlink, sbx_error_t *err)
{
  char b[160], c[160];
  char tpath[PATH_MAX], tdir[PATH_MAX];
  const char *tbase;
  if (image_path_normalize(hardlink, tpath, sizeof tpath, err) < 0)
    return sbx_error_prefix(err, "hard link `%s`", image_shown(path, b));
  fs_split_path(tpath, tdir, &tbase);
  _cleanup_close_ int tfd = *tbase ? fs_root_resolve_dir(&x->root, tdir) : -1;
  if (!*tbase)
    errno = EISDIR;
  if (tfd < 0 || linkat(tfd, tbase, pfd, base, 0) < 0)
    return sbx_error_errno(err, "hard link `%s` to `%s`", image_shown(path, b), image_shown(hardlink, c));
  x->st->hardlinks++;
  return 0;
}

/* Stored as is; it is only ever resolved later inside the root (or inside the sandbox). */
static int write_symlink(struct extractor *x, struct archive_entry *e, int pfd, const char *base,
                         const char *path, sbx_error_t *err)
{
  char b[160];
  if (symlinkat(archive_entry_symlink(e), pfd, base) < 0)
    return sbx_error_errno(err, "entry `%s`: symlink", image_shown(path, b));
  if (x->chown && !x->plain &&
      fchownat(pfd, base, (uid_t) archive_entry_uid(e), (gid_t) archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) <
          0 &&
      errno != EINVAL)
    return sbx_error_errno(err, "entry `%s`: chown", image_shown(path, b));
  struct timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)},
                           {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
  if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
    return sbx_error_errno(err, "entry `%s`: set times", image_shown(path, b));
  return 0;
}

static int write_fifo(struct extractor *x, struct archive_entry *e, int pfd, const char *base,
                      const char *path, sbx_error_t *err)
{
  char b[160];
  if (mknodat(pfd, base, S_IFIFO | 0600, 0) < 0)
    return sbx_error_errno(err, "entry `%s`: mkfifo", image_shown(path, b));
  _cleanup_close_ int fd = openat(pfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  char proc[64];
  if (fd < 0)
    return sbx_error_errno(err, "entry `%s`: open", image_shown(path, b));
  /* fchmod/fchown/futimens do not work on O_PATH fds; go through the fd's own path. */
  if (bufprintf(proc, sizeof proc, err, "/proc/self/fd/%d", fd) < 0)
    return -1;
  _cleanup_close_ int rfd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (rfd < 0)
    return sbx_error_errno(err, "entry `%s`: open", image_shown(path, b));
  return set_attrs(x, rfd, e, path, err);
}

static int apply_entry(struct extractor *x, struct archive *a, struct archive_entry *e, sbx_error_t *err)
{
  char b[160], path[PATH_MAX], dir[PATH_MAX];
  const char *raw = archive_entry_pathname(e);
  if (!raw)
    return sbx_error_set(err, EINVAL, "an entry without a usable name");
  if (image_path_normalize(raw, path, sizeof path, err) < 0)
    return -1;
  if (++x->nentries > x->max_files) {
    sbx_error_set(err, EFBIG, "more than %llu entries (file-count limit)", (unsigned long long) x->max_files);
    return sbx_error_hint(err, "see --max-files");
  }
  x->st->entries++;
  const char *base;
  fs_split_path(path, dir, &base);
  if (!x->plain && !strncmp(base, ".wh.", 4))
    return apply_whiteout(x, dir, base + 4, path, err);

  mode_t type = archive_entry_filetype(e);
  const char *hardlink = archive_entry_hardlink(e);
  if (!*path) {
    if (type != AE_IFDIR || hardlink)
      return sbx_error_set(err, EINVAL, "entry `%s`: names the root but is not a directory",
                           image_shown(raw, b));
    return add_dirfix(x, "", e) < 0 ? sbx_error_set(err, ENOMEM, "entry `%s`", image_shown(raw, b)) : 0;
  }
  if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK)) {
    x->st->devices_skipped++;
    return 0;
  }
  if (!hardlink && type == AE_IFSOCK) /* a socket file is meaningless in an archive */
    return 0;
  if (x->plain && !hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
    return 0;
  if (hardlink && check_link_target("hard link", path, hardlink, err) < 0)
    return -1;
  if (!hardlink && type == AE_IFLNK && check_link_target("symlink", path, archive_entry_symlink(e), err) < 0)
    return -1;
  if (!hardlink && type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK && type != AE_IFIFO)
    return sbx_error_set(err, EINVAL, "entry `%s`: unknown file type 0%o", image_shown(path, b),
                         (unsigned) type);
  if (note_written(x, path) < 0)
    return sbx_error_set(err, ENOMEM, "entry `%s`", image_shown(path, b));

  _cleanup_close_ int pfd = fs_root_ensure_dir(&x->root, dir);
  if (pfd < 0)
    return sbx_error_errno(
        err, "entry `%s`: parent directory (missing, or a symlink that leads nowhere inside the image)",
        image_shown(path, b));
  /* Clear the way: whatever is there is replaced, never written through. Only a directory over a
   * directory merges. */
  struct stat old;
  bool merge = false;
  if (fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0) {
    merge = type == AE_IFDIR && !hardlink && S_ISDIR(old.st_mode);
    if (!merge && fs_root_rm_tree(&x->root, pfd, base) < 0)
      return sbx_error_errno(err, "entry `%s`: replace", image_shown(path, b));
  } else if (errno != ENOENT) {
    return sbx_error_errno(err, "entry `%s`: stat", image_shown(path, b));
  }

  if (hardlink)
    return write_hardlink(x, pfd, base, path, hardlink, err);
  switch (type) {
  case AE_IFDIR:
    if (!merge && mkdirat(pfd, base, 0700) < 0)
      return sbx_error_errno(err, "entry `%s`: mkdir", image_shown(path, b));
    /* Mode and times last: entries below change the mtime, and a read-only mode would stop them. */
    if (add_dirfix(x, path, e) < 0)
      return sbx_error_set(err, ENOMEM, "entry `%s`", image_shown(path, b));
    return 0;
  case AE_IFREG:
    return write_regular(x, a, e, pfd, base, path, err);
  case AE_IFLNK:
    return write_symlink(x, e, pfd, base, path, err);
  case AE_IFIFO:
    return write_fifo(x, e, pfd, base, path, err);
  }
  return 0;
}

int image_layer_finish(struct extractor *x, sbx_error_t *err)
{
  struct strset done = {0};
  int ret = 0;
  /* Last entry for a directory wins; children before parents. */
  for (size_t i = x->nfix; i-- > 0 && ret == 0;) {
    struct dirfix *f = &x->fix[i];
    char b[160], dir[PATH_MAX];
    int added = strset_add(&done, f->path);
    if (added < 0) {
      ret = sbx_error_set(err, ENOMEM, "directory attributes");
      break;
    }
    if (!added)
      continue;
    const char *base;
    fs_split_path(f->path, dir, &base);
    _cleanup_close_ int pfd = *f->path ? fs_root_resolve_dir(&x->root, dir) : -1;
    _cleanup_close_ int fd =
        *f->path ? (pfd < 0 ? -1 : openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
                 : openat(x->root.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) { /* replaced by a later entry or removed by a whiteout */
      if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
        ret = sbx_error_errno(err, "directory `%s`", image_shown(f->path, b));
      continue;
    }
    if (x->chown && !x->plain && fchown(fd, f->uid, f->gid) < 0 && errno != EINVAL)
      ret = sbx_error_errno(err, "directory `%s`: chown", image_shown(f->path, b));
    else if (fchmod(fd, f->mode) < 0)
      ret = sbx_error_errno(err, "directory `%s`: chmod", image_shown(f->path, b));
    else if (futimens(fd, (struct timespec[2]){f->mtime, f->mtime}) < 0)
      ret = sbx_error_errno(err, "directory `%s`: set times", image_shown(f->path, b));
  }
  strset_free(&done);
  return ret;
}

int image_layer_apply(struct extractor *x, const void *data, size_t len, sbx_error_t *err)
{
  if (libarchive_load(err) < 0)
    return -1;
  struct archive *a = archive_read_new();
  if (!a)
    return sbx_error_set(err, ENOMEM, "libarchive");
  int ret = -1;
  /* Only what an image layer can be: tar (ustar/pax/GNU), uncompressed, gzip or zstd. */
  if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
      archive_read_support_filter_gzip(a) < ARCHIVE_WARN ||
      archive_read_support_filter_zstd(a) < ARCHIVE_WARN) {
    sbx_error_set(err, ENOTSUP, "libarchive: %s", archive_error_string(a));
    goto out;
  }
  if (archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
    sbx_error_set(err, EINVAL, "not a tar archive (plain, gzip or zstd): %s", archive_error_string(a));
    goto out;
  }
  strset_free(&x->layer_paths);
  for (;;) {
    struct archive_entry *e;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN) {
      sbx_error_set(err, EINVAL, "read: %s", archive_error_string(a));
      goto out;
    }
    if (image_layer_cancelled(x, err) < 0 || apply_entry(x, a, e, err) < 0)
      goto out;
  }
  ret = 0;
out:
  archive_read_free(a);
  return ret;
}
