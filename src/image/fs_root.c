/* SPDX-License-Identifier: Apache-2.0 */
/* Paths inside an untrusted tree: see fs_root.h. */
#include "image/fs_root.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

#define MAX_SYMLINKS 40 /* like the kernel's own limit */
#define RM_MAX_DEPTH 64 /* deeper subtrees are moved up before removal (bounded fds/stack) */

static void closedirp(DIR **d)
{
  if (*d)
    closedir(*d);
}

void fs_free_names(char **names, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

/* Names in a directory (not . and ..), unsorted. The fd is not consumed. */
int fs_list_dir(int fd, char ***ret_names, size_t *ret_n)
{
  int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return -1;
  __attribute__((cleanup(closedirp))) DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  errno = 0;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn)
        goto nomem;
      names = nn;
    }
    if (!(names[n] = strdup(de->d_name)))
      goto nomem;
    n++;
    errno = 0;
  }
  if (errno) {
    int e = errno;
    fs_free_names(names, n);
    errno = e;
    return -1;
  }
  *ret_names = names;
  *ret_n = n;
  return 0;
nomem:
  fs_free_names(names, n);
  errno = ENOMEM;
  return -1;
}

/* Split "a/b/c" into "a/b" and "c" (dir "" for a top-level name). */
void fs_split_path(const char *path, char dir[PATH_MAX], const char **ret_base)
{
  const char *slash = strrchr(path, '/');
  if (!slash) {
    dir[0] = '\0';
    *ret_base = path;
    return;
  }
  size_t n = (size_t) (slash - path);
  memcpy(dir, path, n);
  dir[n] = '\0';
  *ret_base = slash + 1;
}

static int resolve_openat2(const struct fs_root *r, const char *path)
{
  /* RESOLVE_IN_ROOT: symlinks (and "..") are resolved as if r->fd were "/", so nothing resolves
   * outside it; no magic links (/proc/self/fd/N) and no crossing into another mount. */
  struct open_how how = {
      .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  for (int i = 0;; i++) {
    int fd = (int) syscall(SYS_openat2, r->fd, *path ? path : ".", &how, sizeof how);
    /* EAGAIN: a concurrent rename somewhere; the kernel asks us to retry. */
    if (fd >= 0 || (errno != EAGAIN && errno != EINTR) || i == 16)
      return fd;
  }
}

/* The fallback, with the same semantics as RESOLVE_IN_ROOT: each component is opened with
 * O_NOFOLLOW; a symlink's target is spliced into the remaining path, an absolute one restarting at
 * the root; ".." never climbs above the root. */
static int resolve_walk(const struct fs_root *r, const char *path)
{
  _cleanup_free_ char *rem = strdup(path);
  _cleanup_free_ int *stack = NULL;
  size_t depth = 0, cap = 0;
  int links = 0, ret = -1;
  if (!rem) {
    errno = ENOMEM;
    return -1;
  }
  char *p = rem;
  for (;;) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    char *e = strchrnul(p, '/');
    const char *name = p;
    p = *e ? e + 1 : e;
    *e = '\0';
    if (!strcmp(name, "."))
      continue;
    if (!strcmp(name, "..")) {
      if (depth)
        close(stack[--depth]);
      continue;
    }
    int fd = openat(depth ? stack[depth - 1] : r->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
      goto out;
    if (fstat(fd, &st) < 0) {
      close(fd);
      goto out;
    }
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ++links > MAX_SYMLINKS ? (errno = ELOOP, -1) : readlinkat(fd, "", target, sizeof target);
      close(fd);
      if (n < 0)
        goto out;
      if ((size_t) n >= sizeof target) {
        errno = ENAMETOOLONG;
        goto out;
      }
      size_t rest = strlen(p);
      char *nr = malloc((size_t) n + 1 + rest + 1);
      if (!nr) {
        errno = ENOMEM;
        goto out;
      }
      memcpy(nr, target, (size_t) n);
      nr[n] = '/';
      memcpy(nr + n + 1, p, rest + 1);
      free(rem);
      rem = p = nr;
      if (target[0] == '/')
        while (depth)
          close(stack[--depth]);
      continue;
    }
    if (!S_ISDIR(st.st_mode) || st.st_dev != r->dev) {
      close(fd);
      errno = S_ISDIR(st.st_mode) ? EXDEV : ENOTDIR;
      goto out;
    }
    if (depth == cap) {
      cap = cap ? cap * 2 : 16;
      int *ns = realloc(stack, cap * sizeof *ns);
      if (!ns) {
        close(fd);
        errno = ENOMEM;
        goto out;
      }
      stack = ns;
    }
    stack[depth++] = fd;
  }
  ret = depth ? stack[--depth] : openat(r->fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
out:;
  int saved = errno;
  while (depth)
    close(stack[--depth]);
  errno = saved;
  return ret;
}

/* An O_PATH fd for directory `path` (relative to the root; "" is the root), or -1 with errno. */
int fs_root_resolve_dir(struct fs_root *r, const char *path)
{
  if (!r->fallback) {
    int fd = resolve_openat2(r, path);
    if (fd >= 0 || errno != ENOSYS)
      return fd;
    r->fallback = true; /* kernel older than 5.6 */
  }
  return resolve_walk(r, path);
}

/* Like resolve_dir, creating missing directories (0755) on the way. A dangling symlink in the way
 * is an error (ENOENT), not something to create a directory through. */
int fs_root_ensure_dir(struct fs_root *r, const char *path)
{
  int fd = fs_root_resolve_dir(r, path);
  if (fd >= 0 || errno != ENOENT || !*path)
    return fd;
  _cleanup_free_ char *parent = strdup(path);
  if (!parent) {
    errno = ENOMEM;
    return -1;
  }
  char *slash = strrchr(parent, '/');
  const char *base = slash ? slash + 1 : parent;
  if (slash)
    *slash = '\0';
  _cleanup_close_ int pfd = fs_root_ensure_dir(r, slash ? parent : "");
  if (pfd < 0)
    return -1;
  if (mkdirat(pfd, base, 0755) == 0) {
    if (fchmodat(pfd, base, 0755, 0) < 0) /* whatever the umask */
      return -1;
  } else if (errno != EEXIST) {
    return -1;
  }
  return fs_root_resolve_dir(r, path);
}

/* Lexically join a symlink's target onto the directory holding it, clamped at the root. */
int fs_join_in_root(const char *dir, const char *target, char out[PATH_MAX])
{
  char tmp[2 * PATH_MAX + 2];
  if (bufprintf(tmp, sizeof tmp, NULL, "%s/%s", target[0] == '/' ? "" : dir, target) < 0 ||
      strlen(tmp) >= PATH_MAX)
    return -1;
  size_t o = 0;
  for (char *save = NULL, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
    if (!strcmp(c, "."))
      continue;
    if (!strcmp(c, "..")) {
      while (o > 0 && out[o - 1] != '/')
        o--;
      if (o > 0)
        o--;
      continue;
    }
    if (o)
      out[o++] = '/';
    size_t l = strlen(c);
    memcpy(out + o, c, l);
    o += l;
  }
  out[o] = '\0';
  return 0;
}

int fs_follow_link(int pfd, const char *base, const char *dir, char cur[PATH_MAX])
{
  char target[PATH_MAX];
  ssize_t n = readlinkat(pfd, base, target, sizeof target - 1);
  if (n < 0)
    return -1;
  target[n] = '\0';
  if (fs_join_in_root(dir, target, cur) < 0) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return 0;
}

/* Open a regular file inside the root for reading, following symlinks only within the root. */
int fs_root_open_file(struct fs_root *r, const char *path)
{
  char cur[PATH_MAX], dir[PATH_MAX];
  if (bufprintf(cur, sizeof cur, NULL, "%s", path) < 0)
    return -1;
  for (int links = 0; links <= MAX_SYMLINKS; links++) {
    const char *base;
    fs_split_path(cur, dir, &base);
    /* openat(pfd, "..") would be the parent even of the root: resolve_dir clamps only dir. */
    if (!strcmp(base, ".") || !strcmp(base, "..")) {
      errno = EISDIR;
      return -1;
    }
    _cleanup_close_ int pfd = fs_root_resolve_dir(r, dir);
    if (pfd < 0)
      return -1;
    /* O_NONBLOCK: a FIFO must not hang us; the caller checks for a regular file. */
    int fd = openat(pfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0 || errno != ELOOP)
      return fd;
    if (fs_follow_link(pfd, base, dir, cur) < 0)
      return -1;
  }
  errno = ELOOP;
  return -1;
}

/* Subtrees rm_children moved to the top of the root (".sandboxd-rm.SEQ"), to be removed once the
 * walk that found them has closed its directory fds. */
struct rm_pending {
  unsigned *seq;
  size_t n, cap;
};

static int rm_children(struct fs_root *r, int fd, unsigned depth, struct rm_pending *p);

static int rm_entry(struct fs_root *r, int dirfd, const char *name, struct rm_pending *p)
{
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return -1;
  if (!S_ISDIR(st.st_mode))
    return unlinkat(dirfd, name, 0);
  if (st.st_dev != r->dev) {
    errno = EXDEV;
    return -1;
  }
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || rm_children(r, fd, 1, p) < 0)
    return -1;
  return unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Move fd/name to the top of the root under a fresh name, for rm_finish. */
static int rm_defer(struct fs_root *r, int fd, const char *name, struct rm_pending *p)
{
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    unsigned *seq = realloc(p->seq, cap * sizeof *seq);
    if (!seq) {
      errno = ENOMEM;
      return -1;
    }
    p->seq = seq;
    p->cap = cap;
  }
  for (;;) {
    char tmp[64];
    unsigned seq = r->rm_seq++;
    if (bufprintf(tmp, sizeof tmp, NULL, ".sandboxd-rm.%u", seq) < 0)
      return -1;
    if (renameat2(fd, name, r->fd, tmp, RENAME_NOREPLACE) == 0) {
      p->seq[p->n++] = seq;
      return 0;
    }
    if (errno != EEXIST) /* EEXIST: the tree's own file of that name, left alone */
      return -1;
  }
}

/* Remove the deferred subtrees one at a time (each may defer more): however deep the tree, no more
 * than RM_MAX_DEPTH directories are open at once. ret: the result so far, kept with its errno. */
static int rm_finish(struct fs_root *r, struct rm_pending *p, int ret)
{
  int saved = errno;
  while (p->n) {
    char tmp[64];
    if (bufprintf(tmp, sizeof tmp, NULL, ".sandboxd-rm.%u", p->seq[--p->n]) < 0 ||
        rm_entry(r, r->fd, tmp, p) < 0) {
      if (ret == 0)
        saved = errno;
      ret = -1;
    }
  }
  free(p->seq);
  errno = saved;
  return ret;
}

/* Remove dirfd/name and everything below it, never following a symlink, never leaving the root's
 * file system. Subtrees deeper than RM_MAX_DEPTH are first renamed to the top of the root. */
int fs_root_rm_tree(struct fs_root *r, int dirfd, const char *name)
{
  struct rm_pending p = {0};
  return rm_finish(r, &p, rm_entry(r, dirfd, name, &p));
}

static int rm_children(struct fs_root *r, int fd, unsigned depth, struct rm_pending *p)
{
  char **names;
  size_t n;
  struct stat st;
  /* Without CAP_DAC_OVERRIDE we need write and search permission on our own directory. */
  if (geteuid() != 0 && fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700 &&
      fchmod(fd, (st.st_mode & 07777) | 0700) < 0)
    return -1;
  if (fs_list_dir(fd, &names, &n) < 0)
    return -1;
  int ret = 0;
  for (size_t i = 0; i < n && ret == 0; i++) {
    if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
      ret = errno == ENOENT ? 0 : -1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      ret = unlinkat(fd, names[i], 0) < 0 && errno != ENOENT ? -1 : 0;
      continue;
    }
    if (depth >= RM_MAX_DEPTH) {
      ret = rm_defer(r, fd, names[i], p);
      continue;
    }
    if (st.st_dev != r->dev) {
      errno = EXDEV;
      ret = -1;
      continue;
    }
    int cfd = openat(fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0 || rm_children(r, cfd, depth + 1, p) < 0 || unlinkat(fd, names[i], AT_REMOVEDIR) < 0)
      ret = -1;
    if (cfd >= 0) {
      int e = errno;
      close(cfd);
      errno = e;
    }
  }
  int e = errno;
  fs_free_names(names, n);
  errno = e;
  return ret;
}

/* Remove STORE/name (a temporary or replaced tree) as a root of its own. */
int fs_remove_tree(int storefd, const char *name)
{
  struct stat st;
  if (fstatat(storefd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : -1;
  if (!S_ISDIR(st.st_mode))
    return unlinkat(storefd, name, 0);
  _cleanup_close_ int fd = openat(storefd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct fs_root r = {.fd = fd, .dev = st.st_dev};
  struct rm_pending p = {0};
  if (rm_finish(&r, &p, rm_children(&r, fd, 1, &p)) < 0)
    return -1;
  return unlinkat(storefd, name, AT_REMOVEDIR);
}

int fs_root_open(int storefd, const char *name, struct fs_root *r, bool fallback, sbx_error_t *err)
{
  struct stat st;
  r->fd = openat(storefd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (r->fd < 0 || fstat(r->fd, &st) < 0)
    return sbx_error_errno(err, "open `%s`", name);
  r->dev = st.st_dev;
  r->fallback = fallback;
  return 0;
}
