/* SPDX-License-Identifier: Apache-2.0 */
#include "base/hostfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

#define MAX_SYMLINKS 40 /* as the kernel's own path walk */

/* A refusal by the rules above: the message, and HOSTFILE_UNSAFE. */
static int unsafe(sbx_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int unsafe(sbx_error_t *err, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->errnum = 0;
  err->status = 125;
  return HOSTFILE_UNSAFE;
}

void hostfile_guard_add(struct hostfile_tree *trees, size_t *n, const char *path)
{
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    trees[(*n)++] = (struct hostfile_tree){.dev = st.st_dev, .ino = st.st_ino};
}

/* Walks `..` up to the root (`..` of the root is the root itself); each step crosses mount points
 * as the kernel does. */
int hostfile_in_tree(int dirfd, const struct hostfile_guard *g, bool *ret, sbx_error_t *err)
{
  *ret = false;
  if (!g || !g->n_trees)
    return 0;
  _cleanup_close_ int cur = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat st, up;
  if (cur < 0 || fstat(cur, &st) < 0)
    return sbx_error_errno(err, "open directory");
  for (;;) {
    for (size_t i = 0; i < g->n_trees; i++)
      if (g->trees[i].dev == st.st_dev && g->trees[i].ino == st.st_ino) {
        *ret = true;
        return 0;
      }
    int parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0 || fstat(parent, &up) < 0) {
      if (parent >= 0)
        close(parent);
      return sbx_error_errno(err, "open `..`");
    }
    close(cur);
    cur = parent;
    if (up.st_dev == st.st_dev && up.st_ino == st.st_ino)
      return 0;
    st = up;
  }
}

/* May the symlink `name` (link, described by st) in directory dirfd be followed? Reads its
 * target into target on success. */
static int judge_symlink(int dirfd, int link, const struct stat *st, const struct hostfile_guard *guard,
                         const char *display, const char *name, char *target, size_t size, sbx_error_t *err)
{
  /* Anyone else's symlink could point anywhere, including a sandbox's (in root mode its host
   * uid is not ours); ours cannot tell the user's from the sandbox's, so the tree decides. */
  if (st->st_uid != 0 && st->st_uid != geteuid())
    return unsafe(err, "`%s`: not following the symlink `%s`: it belongs to uid %u, not to you or root",
                  display, name, (unsigned) st->st_uid);
  bool guarded;
  if (hostfile_in_tree(dirfd, guard, &guarded, err) < 0)
    return sbx_error_prefix(err, "`%s`", display);
  if (guarded)
    return unsafe(err,
                  "`%s`: not following the symlink `%s`: it lies in a --bind-rw tree, which sandboxed code "
                  "can write",
                  display, name);
  ssize_t n = readlinkat(link, "", target, size - 1);
  if (n <= 0)
    return sbx_error_errno(err, "`%s`: readlink `%s`", display, name);
  target[n] = '\0';
  return 0;
}

/* Path resolution by hand, one component at a time, so each symlink can be judged before it is
 * followed (openat2's RESOLVE_NO_SYMLINKS would refuse every one, including /var/run -> /run). */
static int open_dir(const char *path, const char *display, const struct hostfile_guard *guard, unsigned flags,
                    int *ret_dirfd, sbx_error_t *err)
{
  char buf[PATH_MAX], next[PATH_MAX], target[PATH_MAX];
  if (!*path)
    return sbx_error_set(err, ENOENT, "`%s`", display);
  if (bufprintf(buf, sizeof buf, NULL, "%s", path) < 0)
    return sbx_error_set(err, ENAMETOOLONG, "`%s`", display);
  _cleanup_close_ int fd = open(buf[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "`%s`", display);
  int links = 0;
  char *p = buf;
  for (;;) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    char *end = strchrnul(p, '/');
    char *rest = *end ? end + 1 : end;
    *end = '\0';
    /* The common case, a directory, in one call; a symlink fails it with ENOTDIR. */
    _cleanup_close_ int nfd = openat(fd, p, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (nfd < 0 && errno == ENOENT && (flags & HOSTFILE_MKDIR)) {
      bool last = !rest[strspn(rest, "/")];
      if (mkdirat(fd, p, (flags & HOSTFILE_PRIVATE) || last ? 0700 : 0755) < 0 && errno != EEXIST)
        return sbx_error_errno(err, "`%s`: mkdir `%s`", display, p);
      nfd = openat(fd, p, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    }
    if (nfd >= 0) {
      close(fd);
      fd = TAKE_FD(nfd);
      p = rest;
      continue;
    }
    struct stat st;
    if (errno != ENOTDIR || (nfd = openat(fd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat(nfd, &st) < 0)
      return sbx_error_errno(err, "`%s`: `%s`", display, p);
    if (!S_ISLNK(st.st_mode) && (flags & HOSTFILE_ANY) && !rest[strspn(rest, "/")]) {
      close(fd);
      fd = TAKE_FD(nfd);
      break;
    }
    if (!S_ISLNK(st.st_mode))
      return sbx_error_set(err, ENOTDIR, "`%s`: `%s`", display, p);
    if (++links > MAX_SYMLINKS)
      return sbx_error_set(err, ELOOP, "`%s`", display);
    int rc = judge_symlink(fd, nfd, &st, guard, display, p, target, sizeof target, err);
    if (rc < 0)
      return rc;
    if (bufprintf(next, sizeof next, NULL, "%s/%s", target, rest) < 0)
      return sbx_error_set(err, ENAMETOOLONG, "`%s`", display);
    memcpy(buf, next, strlen(next) + 1);
    p = buf;
    if (target[0] == '/') {
      close(fd);
      if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return sbx_error_errno(err, "`/`");
    }
  }
  *ret_dirfd = TAKE_FD(fd);
  return 0;
}

int hostfile_open_nofollow(const char *path, int *ret_fd, sbx_error_t *err)
{
  if (path[0] != '/')
    return sbx_error_set(err, EINVAL, "`%s`: not an absolute path", path);
  _cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "`/`");
  char name[NAME_MAX + 1];
  for (const char *p = path;;) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    size_t len = strcspn(p, "/");
    if (len > NAME_MAX)
      return sbx_error_set(err, ENAMETOOLONG, "`%s`", path);
    memcpy(name, p, len);
    name[len] = '\0';
    p += len;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
      return sbx_error_set(err, EINVAL, "`%s`: not a canonical path", path);
    bool last = !p[strspn(p, "/")];
    /* O_NOFOLLOW on the last component opens a symlink itself; O_DIRECTORY before it fails on one. */
    _cleanup_close_ int nfd = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
    struct stat st;
    if ((nfd < 0 && errno == ENOTDIR && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISLNK(st.st_mode)) ||
        (nfd >= 0 && last && fstat(nfd, &st) == 0 && S_ISLNK(st.st_mode)))
      return sbx_error_set(err, ELOOP, "`%s`: `%s` is a symlink", path, name);
    if (nfd < 0)
      return sbx_error_errno(err, "`%s`: `%s`", path, name);
    close(fd);
    fd = TAKE_FD(nfd);
  }
  *ret_fd = TAKE_FD(fd);
  return 0;
}

int hostfile_open_dir(const char *path, const struct hostfile_guard *guard, unsigned flags, int *ret_dirfd,
                      sbx_error_t *err)
{
  return open_dir(path, path, guard, flags, ret_dirfd, err);
}

int hostfile_open_parent(const char *path, const struct hostfile_guard *guard, unsigned flags, int *ret_dirfd,
                         const char **ret_name, sbx_error_t *err)
{
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
    return sbx_error_set(err, EINVAL, "`%s` does not name a file", path);
  if (strlen(name) > NAME_MAX)
    return sbx_error_set(err, ENAMETOOLONG, "`%s`", path);
  char dir[PATH_MAX];
  if (!slash)
    memcpy(dir, ".", 2);
  else if (slash == path)
    memcpy(dir, "/", 2);
  else if ((size_t) (slash - path) >= sizeof dir)
    return sbx_error_set(err, ENAMETOOLONG, "`%s`", path);
  else {
    memcpy(dir, path, (size_t) (slash - path));
    dir[slash - path] = '\0';
  }
  /* Messages name the whole path the user gave. */
  int rc = open_dir(dir, path, guard, flags, ret_dirfd, err);
  if (rc < 0)
    return rc;
  *ret_name = name;
  return 0;
}

int hostfile_open_append(int dirfd, const char *name, const char *display, int *ret_fd, sbx_error_t *err)
{
  /* O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of blocking. */
  _cleanup_close_ int fd = openat(
      dirfd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ELOOP)
    return unsafe(err, "`%s` is a symlink; not following it", display);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return sbx_error_errno(err, "`%s`", display);
  uid_t me = geteuid();
  if (S_ISREG(st.st_mode)) {
    if (st.st_uid != me)
      return unsafe(err, "`%s` belongs to uid %u, not to you", display, (unsigned) st.st_uid);
    if (st.st_nlink != 1)
      return unsafe(err, "`%s` has %lu hard links; refusing to append to a file that is also elsewhere",
                    display, (unsigned long) st.st_nlink);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
      return unsafe(err, "`%s` is writable by group or others", display);
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    if (st.st_uid != me && st.st_uid != 0)
      return unsafe(err, "`%s` belongs to uid %u, not to you or root", display, (unsigned) st.st_uid);
  } else {
    return unsafe(err, "`%s` is not a regular file", display);
  }
  *ret_fd = TAKE_FD(fd);
  return 0;
}

int hostfile_open_trusted(int dirfd, const char *name, const char *display, int *ret_fd, struct stat *ret_st,
                          sbx_error_t *err)
{
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP)
    return unsafe(err, "`%s` is a symlink; not following it", display);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return sbx_error_errno(err, "`%s`", display);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
    return unsafe(err, "`%s` is not a regular file of yours that only you can write", display);
  *ret_st = st;
  *ret_fd = TAKE_FD(fd);
  return 0;
}

int hostfile_replace(int dirfd, const char *name, const char *display, const void *data, size_t len,
                     mode_t mode, sbx_error_t *err)
{
  char tmp[64];
  int fd = -1;
  for (int i = 0; i < 8 && fd < 0; i++) {
    unsigned long long r;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
      return sbx_error_errno(err, "`%s`: getrandom", display);
    if (bufprintf(tmp, sizeof tmp, err, ".sandboxd-%016llx.tmp", r) < 0)
      return -1;
    /* O_EXCL|O_NOFOLLOW: a fresh inode of ours, whatever else the directory holds. */
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST)
      return sbx_error_errno(err, "`%s`: create a temporary file", display);
  }
  if (fd < 0)
    return sbx_error_set(err, EEXIST, "`%s`: create a temporary file", display);
  const char *p = data;
  size_t left = len;
  while (left) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    p += n;
    left -= (size_t) n;
  }
  int e = left ? (errno ? errno : EIO) : 0;
  if (close(fd) < 0 && !e)
    e = errno;
  /* rename replaces whatever the name is now (a symlink, a hardlink) instead of following it. */
  if (!e && renameat(dirfd, tmp, dirfd, name) < 0)
    e = errno;
  if (e) {
    unlinkat(dirfd, tmp, 0);
    return sbx_error_set(err, e, "`%s`", display);
  }
  return 0;
}
