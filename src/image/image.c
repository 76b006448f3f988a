/* SPDX-License-Identifier: Apache-2.0 */
/* OCI image import, the sequence: lock the store, unpack an archive source, read the image
 * (image_source.c), apply its layers (image_layer.c) to a temporary tree, write its file manifest
 * (image_manifest.c) and metadata (image_meta.c), then swap it into place. */
#include "image/image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/util.h"
#include "image/fs_root.h"
#include "image/image_layer.h"
#include "image/image_manifest.h"
#include "image/image_meta.h"
#include "image/image_source.h"
#include "image/image_util.h"

#define MAX_LAYERS 256

bool image_name_valid(const char *name)
{
  size_t n = strlen(name);
  if (n == 0 || n > IMAGE_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
      return false;
  }
  return true;
}

/* ------------------------------------------------------------------ import */

static int write_all_at(int dirfd, const char *file, const char *data, size_t len, sbx_error_t *err)
{
  _cleanup_close_ int fd = openat(dirfd, file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return sbx_error_errno(err, "create `%s`", file);
  for (size_t done = 0; done < len;) {
    ssize_t n = write(fd, data + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return sbx_error_errno(err, "write `%s`", file);
    done += (size_t) n;
  }
  if (fsync(fd) < 0)
    return sbx_error_errno(err, "write `%s`", file);
  return 0;
}

/* Leftovers of an import or a removal that was killed: ".NAME.import-XXXXXX", ".NAME.src-XXXXXX"
 * and ".NAME.remove-XXXXXX". */
static void remove_stale(int storefd, const char *name)
{
  char **names;
  size_t n, nl = strlen(name);
  if (fs_list_dir(storefd, &names, &n) < 0)
    return;
  for (size_t i = 0; i < n; i++) {
    const char *s = names[i];
    size_t l = strlen(s);
    if (s[0] != '.' || strncmp(s + 1, name, nl) || s[1 + nl] != '.')
      continue;
    const char *kind = s + 2 + nl;
    if ((!strncmp(kind, "import-", 7) && l == 2 + nl + 7 + 6) ||
        (!strncmp(kind, "src-", 4) && l == 2 + nl + 4 + 6) ||
        (!strncmp(kind, "remove-", 7) && l == 2 + nl + 7 + 6))
      fs_remove_tree(storefd, s);
  }
  fs_free_names(names, n);
}

static int make_temp_dir(int storefd, const char *name, const char *kind, char out[NAME_MAX + 1],
                         sbx_error_t *err)
{
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int tries = 0; tries < 100; tries++) {
    uint64_t r = now_ns() ^ ((uint64_t) getpid() << 32) ^ (uint64_t) tries * 0x9e3779b97f4a7c15ULL;
    char suffix[7];
    for (int i = 0; i < 6; i++, r /= 36)
      suffix[i] = chars[r % 36];
    suffix[6] = '\0';
    if (bufprintf(out, NAME_MAX + 1, err, ".%s.%s-%s", name, kind, suffix) < 0)
      return -1;
    if (mkdirat(storefd, out, 0700) == 0)
      return 0;
    if (errno != EEXIST)
      return sbx_error_errno(err, "create a temporary directory in the store");
  }
  return sbx_error_set(err, EEXIST, "create a temporary directory in the store");
}

/* The layers, in order, onto x's tree. */
static int apply_layers(struct extractor *x, struct image_source *s, const struct image *im, sbx_error_t *err)
{
  size_t n = json_array_len(im->layers);
  if (n > MAX_LAYERS)
    return sbx_error_set(err, EFBIG, "`%s`: %zu layers (at most %d)", s->src, n, MAX_LAYERS);
  for (size_t i = 0; i < n; i++) {
    struct mapping m __attribute__((cleanup(image_unmapp))) = {0};
    char digest[72] = "";
    if (image_source_map_layer(s, im, i, &m, digest, err) < 0)
      return -1;
    if (image_layer_apply(x, m.data ? m.data : "", m.len, err) < 0)
      return sbx_error_prefix(err, "`%s`: layer %zu (%.19s)", s->src, i + 1, digest);
    x->st->layers++;
  }
  return 0;
}

struct import_state {
  int storefd;
  char tree[NAME_MAX + 1], src[NAME_MAX + 1]; /* temporary directories in the store */
  char json_tmp[NAME_MAX + 1], files_tmp[NAME_MAX + 1];
  struct extractor x;
  struct image_source s;
  struct image im;
};

static void import_state_free(struct import_state *is)
{
  image_layer_free(&is->x);
  image_free(&is->im);
  if (is->x.root.fd >= 0)
    close(is->x.root.fd);
  if (is->s.root.fd >= 0)
    close(is->s.root.fd);
  if (is->storefd >= 0) {
    int saved = errno;
    if (is->tree[0])
      fs_remove_tree(is->storefd, is->tree);
    if (is->src[0])
      fs_remove_tree(is->storefd, is->src);
    if (is->json_tmp[0])
      unlinkat(is->storefd, is->json_tmp, 0);
    if (is->files_tmp[0])
      unlinkat(is->storefd, is->files_tmp, 0);
    close(is->storefd);
    errno = saved;
  }
}

/* An archive SRC (oci-archive or docker-archive) is unpacked by the same safe extractor into a
 * directory of its own; a directory SRC is used in place. */
static int open_source(struct import_state *is, const struct image_import_options *o, sbx_error_t *err)
{
  struct stat st;
  char b[160];
  is->s.src = o->src;
  if (stat(o->src, &st) < 0)
    return sbx_error_errno(err, "import `%s`", image_shown(o->src, b));
  if (S_ISDIR(st.st_mode)) {
    _cleanup_close_ int fd = open(o->src, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0)
      return sbx_error_errno(err, "import `%s`", image_shown(o->src, b));
    is->s.root = (struct fs_root){.fd = TAKE_FD(fd), .dev = st.st_dev, .fallback = is->x.root.fallback};
  } else if (S_ISREG(st.st_mode)) {
    _cleanup_close_ int fd = open(o->src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct mapping m __attribute__((cleanup(image_unmapp))) = {0};
    if (fd < 0 || fstat(fd, &st) < 0 || image_map_fd(fd, (size_t) st.st_size, &m) < 0)
      return sbx_error_errno(err, "import `%s`", image_shown(o->src, b));
    if (make_temp_dir(is->storefd, o->name, "src", is->src, err) < 0 ||
        fs_root_open(is->storefd, is->src, &is->s.root, is->x.root.fallback, err) < 0)
      return -1;
    struct image_import_stats ignored = {0};
    struct extractor ox = {
        .root = is->s.root,
        .o = o,
        .st = &ignored,
        .plain = true,
        .max_bytes = is->x.max_bytes,
        .max_files = is->x.max_files,
    };
    int r = image_layer_apply(&ox, m.data ? m.data : "", m.len, err);
    image_layer_free(&ox);
    if (r < 0)
      return sbx_error_prefix(err, "import `%s`: unpack archive", image_shown(o->src, b));
  } else {
    return sbx_error_set(err, EINVAL, "import `%s`: not a directory or an archive file",
                         image_shown(o->src, b));
  }
  struct stat t;
  if (fstatat(is->s.root.fd, "index.json", &t, 0) == 0)
    is->s.docker = false;
  else if (fstatat(is->s.root.fd, "manifest.json", &t, 0) == 0)
    is->s.docker = true;
  else
    return sbx_error_set(
        err, EINVAL,
        "import `%s`: neither an OCI image layout nor a docker-archive (no index.json or manifest.json)",
        image_shown(o->src, b));
  return 0;
}

/* Put the new tree in place of STORE/NAME (exchanged atomically when one exists), then its
 * manifest and metadata. The replaced tree ends up under the temporary name, removed by the caller. */
static int swap_into_place(struct import_state *is, const char *name, sbx_error_t *err)
{
  char files[NAME_MAX + 1], json[NAME_MAX + 1];
  if (bufprintf(files, sizeof files, err, "%s.files", name) < 0 ||
      bufprintf(json, sizeof json, err, "%s.json", name) < 0)
    return -1;
  if (renameat2(is->storefd, is->tree, is->storefd, name, RENAME_EXCHANGE) < 0) {
    if (errno != ENOENT)
      return sbx_error_errno(err, "rename the new tree to `%s`", name);
    if (renameat2(is->storefd, is->tree, is->storefd, name, RENAME_NOREPLACE) < 0)
      return sbx_error_errno(err, "rename the new tree to `%s`", name);
    is->tree[0] = '\0'; /* nothing was replaced */
  }
  if (renameat(is->storefd, is->files_tmp, is->storefd, files) < 0 ||
      renameat(is->storefd, is->json_tmp, is->storefd, json) < 0)
    return sbx_error_errno(err, "rename metadata of `%s`", name);
  is->files_tmp[0] = is->json_tmp[0] = '\0';
  return 0;
}

int image_import(const struct image_import_options *o, struct image_import_stats *ret, sbx_error_t *err)
{
  char b[160];
  struct image_import_stats st = {0};
  __attribute__((cleanup(import_state_free))) struct import_state is = {
      .storefd = -1,
      .x.root.fd = -1,
      .s.root.fd = -1,
  };
  if (!image_name_valid(o->name))
    return sbx_error_set(err, EINVAL, "invalid rootfs name `%s` (letters, digits, `.`, `_`, `-`)",
                         image_shown(o->name, b));
  is.x.o = o;
  is.x.st = &st;
  is.x.max_bytes = o->max_bytes ? o->max_bytes : IMAGE_DEFAULT_MAX_BYTES;
  is.x.max_files = o->max_files ? o->max_files : IMAGE_DEFAULT_MAX_FILES;
  is.x.chown = geteuid() == 0;
  is.x.root.fallback = o->resolve_fallback;

  if (mkdir(o->store, 0755) < 0 && errno != EEXIST)
    return sbx_error_errno(err, "create rootfs store `%s`", image_shown(o->store, b));
  _cleanup_close_ int storefd = open(o->store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (storefd < 0)
    return sbx_error_errno(err, "open rootfs store `%s`", image_shown(o->store, b));
  /* One import at a time per store; then what a killed import left is safe to remove. */
  if (flock(storefd, LOCK_EX) < 0)
    return sbx_error_errno(err, "lock rootfs store `%s`", image_shown(o->store, b));
  remove_stale(storefd, o->name);
  is.storefd = TAKE_FD(storefd);

  /* The new tree lives next to the destination: same file system, so the final rename is atomic. */
  if (make_temp_dir(is.storefd, o->name, "import", is.tree, err) < 0 ||
      fs_root_open(is.storefd, is.tree, &is.x.root, o->resolve_fallback, err) < 0)
    return -1;
  if (open_source(&is, o, err) < 0)
    return -1;
  if (image_source_load(&is.s, &is.im, err) < 0 || image_source_check_platform(&is.im, &st, err) < 0)
    return sbx_error_prefix(err, "import `%s`", image_shown(o->src, b));
  /* The root directory itself: 0755 unless a layer says otherwise. */
  if (fchmodat(is.storefd, is.tree, 0755, 0) < 0)
    return sbx_error_errno(err, "chmod `%s`", is.tree);
  if (apply_layers(&is.x, &is.s, &is.im, err) < 0 || image_layer_finish(&is.x, err) < 0)
    return sbx_error_prefix(err, "import");

  /* The source directory is not needed any more. */
  if (is.src[0] && fs_remove_tree(is.storefd, is.src) == 0)
    is.src[0] = '\0';

  /* The manifest of the finished tree: what `rootfs verify` compares with. */
  struct image_manifest w = {0};
  _cleanup_close_ int treefd = openat(is.storefd, is.tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (treefd < 0)
    return sbx_error_errno(err, "open `%s`", is.tree);
  if (image_manifest_walk(treefd, &w, err) < 0) {
    strbuf_free(&w.out);
    return sbx_error_prefix(err, "import: file manifest");
  }
  st.files = w.counts.files;
  st.dirs = w.counts.dirs;
  st.symlinks = w.counts.symlinks;
  st.bytes = w.counts.bytes;
  char files_sha[65];
  sha256_hex(w.out.data ? w.out.data : "", w.out.len, files_sha);
  int r = bufprintf(is.files_tmp, sizeof is.files_tmp, err, ".%s.files.tmp", o->name);
  if (r == 0)
    r = bufprintf(is.json_tmp, sizeof is.json_tmp, err, ".%s.json.tmp", o->name);
  if (r == 0)
    r = write_all_at(is.storefd, is.files_tmp, w.out.data ? w.out.data : "", w.out.len, err);
  strbuf_free(&w.out);
  if (r < 0)
    return -1;
  _cleanup_free_ char *abs_src = realpath(o->src, NULL);
  memcpy(st.manifest_digest, is.im.manifest_digest, sizeof st.manifest_digest);
  if (image_meta_write(is.storefd, is.json_tmp, o,
                       o->source_ref ? o->source_ref
                       : abs_src     ? abs_src
                                     : o->src,
                       &is.im, &st, files_sha, err) < 0)
    return -1;
  if (image_layer_cancelled(&is.x, err) < 0 || swap_into_place(&is, o->name, err) < 0)
    return -1;
  /* is.tree now names the replaced tree (if any): removed by import_state_free. */
  *ret = st;
  return 0;
}

/* ------------------------------------------------------------------ remove */

/* The tree leaves its name in one rename, so an exec that looks it up finds the whole tree or
 * nothing; only then do its metadata, its manifest and what `rootfs build` left beside it go, and
 * is the renamed tree emptied. Under the store's lock: an import of the same name waits. */
int image_remove(const char *store, const char *name, sbx_error_t *err)
{
  char b[160], gone[NAME_MAX + 1] = "";
  if (!image_name_valid(name))
    return sbx_error_set(err, EINVAL, "invalid rootfs name `%s` (letters, digits, `.`, `_`, `-`)",
                         image_shown(name, b));
  _cleanup_close_ int storefd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (storefd < 0)
    return sbx_error_errno(err, "open rootfs store `%s`", image_shown(store, b));
  if (flock(storefd, LOCK_EX) < 0)
    return sbx_error_errno(err, "lock rootfs store `%s`", image_shown(store, b));
  remove_stale(storefd, name);
  struct stat st;
  if (fstatat(storefd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return sbx_error_errno(err, "remove rootfs `%s` from `%s`", name, image_shown(store, b));
  if (!S_ISDIR(st.st_mode))
    return sbx_error_set(err, ENOTDIR, "remove rootfs `%s`: not a tree in the store", name);
  /* make_temp_dir's name, free for the rename: take it, then give it back. */
  if (make_temp_dir(storefd, name, "remove", gone, err) < 0)
    return -1;
  if (unlinkat(storefd, gone, AT_REMOVEDIR) < 0 ||
      renameat2(storefd, name, storefd, gone, RENAME_NOREPLACE) < 0)
    return sbx_error_errno(err, "remove rootfs `%s`", name);
  static const char *const beside[] = {".json", ".files", ".build.log"};
  for (size_t i = 0; i < ARRAY_SIZE(beside); i++) {
    char f[NAME_MAX + 1];
    if (bufprintf(f, sizeof f, err, "%s%s", name, beside[i]) < 0)
      return -1;
    if (unlinkat(storefd, f, 0) < 0 && errno != ENOENT)
      return sbx_error_errno(err, "remove `%s`", f);
  }
  char oci[NAME_MAX + 1];
  if (bufprintf(oci, sizeof oci, err, "%s.oci", name) < 0)
    return -1;
  if (fs_remove_tree(storefd, oci) < 0)
    return sbx_error_errno(err, "remove `%s`", oci);
  if (fs_remove_tree(storefd, gone) < 0)
    return sbx_error_errno(err,
                           "remove the tree of `%s` (renamed to `%s`; the next import or removal "
                           "of that name finishes it)",
                           name, gone);
  return 0;
}

/* ------------------------------------------------------------------ verify */

int image_verify(const char *store, const char *name, image_report_fn report, void *userdata,
                 uint64_t *ret_differences, sbx_error_t *err)
{
  char b[160], path[PATH_MAX];
  if (!image_name_valid(name))
    return sbx_error_set(err, EINVAL, "invalid rootfs name `%s`", image_shown(name, b));
  if (bufprintf(path, sizeof path, err, "%s/%s.files", store, name) < 0)
    return sbx_error_prefix(err, "verify `%s`", name);
  _cleanup_free_ char *want = NULL;
  size_t wlen;
  if (read_file(path, 1u << 30, &want, &wlen, err) < 0)
    return sbx_error_prefix(err, "verify `%s`: no file manifest (import it with `sandboxd rootfs import`)",
                            name);
  if (bufprintf(path, sizeof path, err, "%s/%s", store, name) < 0)
    return sbx_error_prefix(err, "verify `%s`", name);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "verify `%s`", path);
  if (image_manifest_diff(fd, want, report, userdata, ret_differences, err) < 0)
    return sbx_error_prefix(err, "verify `%s`", path);
  return 0;
}
