/* SPDX-License-Identifier: Apache-2.0 */
/* Programs inside the rootfs (exec_prog.h). Every lookup goes through fs_root, so a symlink in
 * the image (/usr/bin/python3 -> python3.14, /bin -> usr/bin, or a hostile /usr/bin/x -> /etc)
 * resolves inside the tree as it will inside the sandbox, never on the host. */
#include "run/exec_prog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "image/fs_root.h"

int shebang_parse(const char *buf, size_t len, struct shebang *ret, sbx_error_t *err)
{
  if (len < 2 || buf[0] != '#' || buf[1] != '!')
    return 0;
  const char *nl = memchr(buf, '\n', len);
  if (!nl) {
    if (len >= SHEBANG_MAX)
      goto too_long;
    nl = buf + len; /* a file that is only a #! line */
  }
  const char *p = buf + 2, *end = nl;
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  const char *i = p;
  while (p < end && *p != ' ' && *p != '\t' && *p != '\0')
    p++;
  if (p == i) {
    sbx_error_set(err, ENOEXEC, "the #! line names no interpreter");
    err->status = SBX_EXIT_CANNOT_EXEC;
    return -1;
  }
  memcpy(ret->interp, i, (size_t) (p - i));
  ret->interp[p - i] = '\0';
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  /* The rest of the line is one argument, as the kernel passes it (trailing blanks dropped). */
  while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\0'))
    end--;
  const char *z = memchr(p, '\0', (size_t) (end - p));
  if (z)
    end = z;
  memcpy(ret->arg, p, (size_t) (end - p));
  ret->arg[end - p] = '\0';
  return 1;

too_long:
  sbx_error_set(err, ENOEXEC, "the #! line is longer than %d bytes", SHEBANG_MAX - 1);
  err->status = SBX_EXIT_CANNOT_EXEC;
  return -1;
}

#define MAX_LINKS 40 /* like the kernel's own limit */

/* Whether rel (relative to the tree's root) lies in /proc, /sys or /dev: the sandbox mounts its
 * own there, so the tree cannot say what such a path is, and /proc's magic links (/proc/self/exe)
 * lead out of any tree. A program found there is refused (exec_prog.h). */
static bool in_kernel_dir(const char *rel)
{
  static const char *const dirs[] = {"proc", "sys", "dev"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    size_t l = strlen(dirs[i]);
    if (!strncmp(rel, dirs[i], l) && (rel[l] == '/' || rel[l] == '\0'))
      return true;
  }
  return false;
}

/* 1: an executable regular file at abs in r; 0: something else there (directory, device, no x
 * bit); -1 with errno: nothing there (ENOENT, ENOTDIR, ELOOP...), or EXDEV: the path or a link
 * on the way leads into /proc, /sys or /dev (in_kernel_dir). Nothing is opened but
 * directories (O_PATH): a device node an untrusted tree names is never opened on the host. */
static int probe(struct fs_root *r, const char *abs)
{
  char cur[PATH_MAX], dir[PATH_MAX];
  if (fs_join_in_root("", abs, cur) < 0) /* lexically, as every link's target below */
    return -1;
  for (int links = 0; links <= MAX_LINKS; links++) {
    const char *base;
    if (in_kernel_dir(cur)) {
      errno = EXDEV;
      return -1;
    }
    fs_split_path(cur, dir, &base);
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
      return 0; /* a directory */
    _cleanup_close_ int pfd = fs_root_resolve_dir(r, dir);
    struct stat st;
    if (pfd < 0 || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
      return errno == EACCES ? 0 : -1;
    if (!S_ISLNK(st.st_mode))
      /* Any x bit: the code's uid inside is root of its user namespace, as execve will check. */
      return S_ISREG(st.st_mode) && (st.st_mode & 0111) ? 1 : 0;
    /* Resolved as inside the sandbox: relative to its directory, absolute from the tree's root. */
    if (fs_follow_link(pfd, base, dir, cur) < 0)
      return -1;
  }
  errno = ELOOP;
  return -1;
}

static int open_root(const char *rootfs, struct fs_root *r, sbx_error_t *err)
{
  if (fs_root_open(AT_FDCWD, rootfs, r, false, err) < 0)
    return sbx_error_prefix(err, "rootfs");
  return 0;
}

static void fs_root_closep(struct fs_root *r)
{
  if (r->fd >= 0)
    close(r->fd);
}

int prog_find(const char *rootfs, const char *path, const char *name, char **ret_path, sbx_error_t *err)
{
  __attribute__((cleanup(fs_root_closep))) struct fs_root r = {.fd = -1};
  if (open_root(rootfs, &r, err) < 0)
    return -1;
  _cleanup_free_ char *dirs = strdup(path);
  if (!dirs)
    return sbx_error_set(err, ENOMEM, "exec");
  bool seen = false;
  char *save = NULL;
  for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char cand[PATH_MAX];
    /* Relative entries would name the workdir, which is not the rootfs: skipped. */
    if (dir[0] != '/' || bufprintf(cand, sizeof cand, NULL, "%s/%s", dir, name) < 0)
      continue;
    int k = probe(&r, cand);
    if (k < 0 && errno == EXDEV) {
      sbx_error_set(err, 0,
                    "`%s`: `%s` leads into /proc, /sys or /dev, which the image cannot provide: refused",
                    name, cand);
      err->status = SBX_EXIT_CANNOT_EXEC;
      return -1;
    }
    if (k == 1) {
      if (!(*ret_path = strdup(cand)))
        return sbx_error_set(err, ENOMEM, "exec");
      return 0;
    }
    seen = seen || k == 0;
  }
  if (seen) {
    sbx_error_set(err, EACCES, "`%s`: found along the sandbox's PATH (%s) but not an executable file", name,
                  path);
    err->status = SBX_EXIT_CANNOT_EXEC;
  } else {
    sbx_error_set(err, 0, "`%s`: not found along the sandbox's PATH (%s) in rootfs `%s`", name, path, rootfs);
    err->status = SBX_EXIT_NOT_FOUND;
  }
  return -1;
}

int prog_in_bind(const char *src, const char *sub, const char *name)
{
  /* The source itself is the invoker's, resolved on the host as the bind will be; only what is
   * below it is looked up inside it. */
  _cleanup_free_ char *real = realpath(src, NULL);
  __attribute__((cleanup(fs_root_closep))) struct fs_root r = {.fd = -1};
  sbx_error_t ignored;
  char cand[PATH_MAX];
  if (!real || fs_root_open(AT_FDCWD, real, &r, false, &ignored) < 0 ||
      bufprintf(cand, sizeof cand, NULL, "%s/%s", sub, name) < 0)
    return 0;
  return probe(&r, cand) == 1;
}
