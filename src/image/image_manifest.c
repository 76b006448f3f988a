/* SPDX-License-Identifier: Apache-2.0 */
/* The file manifest (STORE/NAME.files): one line per file of a tree, written at import, compared
 * with the tree by `rootfs verify`. */
#include "image/image_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "image/fs_root.h"
#include "image/image_util.h"

#define WALK_MAX_DEPTH 256 /* a tree deeper than this is refused */

/* Escape a name for the line-oriented manifest: control bytes and backslash as \xHH. */
static char *escape_name(const char *s)
{
  size_t n = strlen(s);
  char *out = malloc(n * 4 + 1), *o = out;
  if (!out)
    return NULL;
  for (const unsigned char *c = (const unsigned char *) s; *c; c++)
    if (*c < 0x20 || *c == 0x7f || *c == '\\')
      o += sprintf(o, "\\x%02x", *c);
    else
      *o++ = (char) *c;
  *o = '\0';
  return out;
}

static int walk_line(struct image_manifest *w, const struct stat *st, char type, const char *digest,
                     const char *path)
{
  char size[32] = "-", mtime[32] = "-";
  if (type == 'f' && bufprintf(size, sizeof size, NULL, "%lld", (long long) st->st_size) < 0)
    return -1;
  /* the root's own mtime changes when it is renamed into place */
  if (*path && bufprintf(mtime, sizeof mtime, NULL, "%lld", (long long) st->st_mtim.tv_sec) < 0)
    return -1;
  return strbuf_printf(&w->out, "%c %04o %u %u %s %s %s /%s\n", type, (unsigned) (st->st_mode & 07777),
                       (unsigned) st->st_uid, (unsigned) st->st_gid, size, mtime, digest, path);
}

struct walk_item {
  char *name, *shown;
};

static int cmp_item(const void *a, const void *b)
{
  return strcmp(((const struct walk_item *) a)->shown, ((const struct walk_item *) b)->shown);
}

/* One line per file, depth first, names sorted within each directory (by their escaped form). */
static int walk_dir(struct image_manifest *w, int dfd, dev_t dev, const char *prefix, unsigned depth,
                    sbx_error_t *err)
{
  char b[160];
  if (depth > WALK_MAX_DEPTH)
    return sbx_error_set(err, ELOOP, "`%s`: tree deeper than %d levels", image_shown(prefix, b),
                         WALK_MAX_DEPTH);
  char **names;
  size_t n;
  if (fs_list_dir(dfd, &names, &n) < 0)
    return sbx_error_errno(err, "list `/%s`", image_shown(prefix, b));
  struct walk_item *items = calloc(n ? n : 1, sizeof *items);
  int ret = 0;
  if (!items)
    ret = sbx_error_set(err, ENOMEM, "walk");
  for (size_t i = 0; i < n && ret == 0; i++) {
    items[i].name = names[i];
    if (!(items[i].shown = escape_name(names[i])))
      ret = sbx_error_set(err, ENOMEM, "walk");
  }
  if (ret == 0)
    qsort(items, n, sizeof *items, cmp_item);
  for (size_t i = 0; i < n && ret == 0; i++) {
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s%s%s", prefix, *prefix ? "/" : "", items[i].shown) < 0) {
      path = NULL;
      ret = sbx_error_set(err, ENOMEM, "walk");
      break;
    }
    struct stat st;
    if (fstatat(dfd, items[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      ret = sbx_error_errno(err, "stat `/%s`", image_shown(path, b));
      break;
    }
    char digest[65] = "-";
    if (S_ISREG(st.st_mode)) {
      _cleanup_close_ int fd =
          openat(dfd, items[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      struct mapping m __attribute__((cleanup(image_unmapp))) = {0};
      struct stat fst;
      if (fd < 0 || fstat(fd, &fst) < 0 || image_map_fd(fd, (size_t) fst.st_size, &m) < 0) {
        ret = sbx_error_errno(err, "read `/%s`", image_shown(path, b));
        break;
      }
      sha256_hex(m.data ? m.data : "", m.len, digest);
      w->counts.files++;
      w->counts.bytes += (uint64_t) fst.st_size;
      ret = walk_line(w, &st, 'f', digest, path);
    } else if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t len = readlinkat(dfd, items[i].name, target, sizeof target);
      if (len < 0 || (size_t) len >= sizeof target) {
        ret = sbx_error_errno(err, "readlink `/%s`", image_shown(path, b));
        break;
      }
      sha256_hex(target, (size_t) len, digest);
      w->counts.symlinks++;
      ret = walk_line(w, &st, 'l', digest, path);
    } else if (S_ISDIR(st.st_mode)) {
      w->counts.dirs++;
      ret = walk_line(w, &st, 'd', digest, path);
      if (ret == 0 && st.st_dev != dev)
        ret = sbx_error_set(err, EXDEV, "`/%s`: another file system", image_shown(path, b));
      if (ret == 0) {
        _cleanup_close_ int cfd = openat(dfd, items[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cfd < 0)
          ret = sbx_error_errno(err, "open `/%s`", image_shown(path, b));
        else
          ret = walk_dir(w, cfd, dev, path, depth + 1, err);
      }
    } else {
      ret = walk_line(w, &st, S_ISFIFO(st.st_mode) ? 'p' : '?', digest, path);
    }
    if (ret < 0 && !err->msg[0])
      sbx_error_set(err, ENOMEM, "walk");
  }
  for (size_t i = 0; items && i < n; i++)
    free(items[i].shown);
  free(items);
  fs_free_names(names, n);
  return ret;
}

int image_manifest_walk(int rootfd, struct image_manifest *w, sbx_error_t *err)
{
  struct stat st;
  if (fstat(rootfd, &st) < 0)
    return sbx_error_errno(err, "stat the tree");
  w->counts.dirs++;
  if (walk_line(w, &st, 'd', "-", "") < 0)
    return sbx_error_set(err, ENOMEM, "walk");
  return walk_dir(w, rootfd, st.st_dev, "", 0, err);
}

/* ------------------------------------------------------------------ verify */

static const char *line_path(const char *line)
{
  /* TYPE MODE UID GID SIZE MTIME DIGEST PATH: the path is everything after the 7th space. */
  const char *p = line;
  for (int i = 0; i < 7 && p; i++)
    p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL;
  return p ? p : line;
}

/* Manifest order: component by component (a '/' sorts before any other byte). */
static int path_cmp(const char *a, const char *b)
{
  for (;; a++, b++) {
    unsigned char ca = *a == '\n' ? 0 : *a == '/' ? 1 : (unsigned char) *a;
    unsigned char cb = *b == '\n' ? 0 : *b == '/' ? 1 : (unsigned char) *b;
    if (ca != cb || !ca)
      return ca - cb;
  }
}

int image_manifest_diff(int rootfd, const char *want, void (*report)(const char *line, void *userdata),
                        void *userdata, uint64_t *ret_differences, sbx_error_t *err)
{
  struct image_manifest w = {0};
  if (image_manifest_walk(rootfd, &w, err) < 0) {
    strbuf_free(&w.out);
    return -1;
  }
  const char *g = w.out.data ? w.out.data : "", *h = want;
  uint64_t diffs = 0;
  char msg[PATH_MAX + 64];
  /* Merge the two sorted lists by path. */
  while (*g || *h) {
    const char *ge = strchrnul(g, '\n'), *he = strchrnul(h, '\n');
    int c = !*g ? 1 : !*h ? -1 : path_cmp(line_path(g), line_path(h));
    if (c == 0 && ge - g == he - h && !memcmp(g, h, (size_t) (ge - g))) {
      g = *ge ? ge + 1 : ge;
      h = *he ? he + 1 : he;
      continue;
    }
    diffs++;
    if (c < 0) {
      bufprintf_cut(msg, sizeof msg, "added:    %.*s", (int) (ge - g), g);
      g = *ge ? ge + 1 : ge;
    } else if (c > 0) {
      bufprintf_cut(msg, sizeof msg, "missing:  %.*s", (int) (he - h), h);
      h = *he ? he + 1 : he;
    } else {
      bufprintf_cut(msg, sizeof msg, "changed:  %.*s (was %.*s)", (int) (ge - g), g,
                    (int) (line_path(h) - h - 1), h);
      g = *ge ? ge + 1 : ge;
      h = *he ? he + 1 : he;
    }
    if (report)
      report(msg, userdata);
  }
  strbuf_free(&w.out);
  *ret_differences = diffs;
  return 0;
}
