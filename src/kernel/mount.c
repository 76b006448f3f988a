/* SPDX-License-Identifier: Apache-2.0 */
#include "kernel/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"

/* The filesystem type is ignored for binds, remounts and propagation changes; "none" rather than
 * NULL keeps memory checkers (valgrind) from flagging the call. */
#define NO_FSTYPE "none"

static void fd_path(int fd, char buf[32])
{
  /* At most 25 bytes; were it cut, buf would be "" and the mount that uses it would fail. */
  if (bufprintf(buf, 32, NULL, "/proc/self/fd/%d", fd) < 0)
    return;
}

/* Flags a bind remount must keep: in a user namespace the kernel locks the flags inherited from
 * a more privileged mount and refuses a remount that would clear them (mount(2), EPERM). */
static unsigned long locked_flags(const char *path)
{
  struct statvfs sv;
  unsigned long f = 0;
  if (statvfs(path, &sv) < 0)
    return 0;
  if (sv.f_flag & ST_NOSUID)
    f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV)
    f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC)
    f |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME)
    f |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME)
    f |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME)
    f |= MS_RELATIME;
  if (sv.f_flag & ST_RDONLY)
    f |= MS_RDONLY;
  return f;
}

static int remount_bind(const char *path, unsigned long flags, sbx_error_t *err)
{
  if (mount("none", path, NO_FSTYPE, MS_BIND | MS_REMOUNT | locked_flags(path) | flags, NULL) < 0)
    return sbx_error_errno(err, "remount `%s` read-only", path);
  return 0;
}

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
struct sbx_mount_attr {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* Read-only, nosuid and nodev (and noexec with MS_NOEXEC in extra) on the mount at path and, with
 * AT_RECURSIVE in at_flags, everything below it: one mount_setattr, which only adds flags (no
 * statvfs for the locked ones a remount must repeat). A bind of a tree that holds mounts must be
 * recursive in a user namespace (the kernel refuses to reveal what they cover), and a plain
 * remount would leave those submounts writable. */
static int set_readonly(const char *path, unsigned at_flags, unsigned long extra, sbx_error_t *err)
{
  struct sbx_mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                         (extra & MS_NOEXEC ? MOUNT_ATTR_NOEXEC : 0)};
  if (syscall(SYS_mount_setattr, AT_FDCWD, path, at_flags, &a, sizeof a) == 0)
    return 0;
  if (errno != ENOSYS)
    return sbx_error_errno(err, "make `%s` read-only", path);
  return remount_bind(path, MS_RDONLY | MS_NOSUID | MS_NODEV | extra, err); /* Linux < 5.12 */
}

static int make_readonly_tree(const char *path, unsigned long extra, sbx_error_t *err)
{
  return set_readonly(path, AT_RECURSIVE, extra, err);
}

int mount_enter_rootfs(int rootfs_fd, const char *path, sbx_error_t *err)
{
  char src[32];
  fd_path(rootfs_fd, src);
  if (mount(src, path, NO_FSTYPE, MS_BIND | MS_REC, NULL) < 0)
    return sbx_error_errno(err, "bind rootfs `%s`", path);
  /* By path, not by fd: the fd still names the directory under the new mount. */
  if (chdir(path) < 0)
    return sbx_error_errno(err, "enter rootfs `%s`", path);
  return 0;
}

/* One top-level entry of the rootfs (dfd) into the skeleton root (the current directory): a
 * directory or file is bound (recursively: a user namespace may not reveal what submounts cover),
 * a symlink copied; anything else is left out, as a device node in an image would be unusable. */
static int skeleton_entry(int dfd, const char *name, bool readonly, sbx_error_t *err)
{
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return sbx_error_errno(err, "rootfs `/%s`", name);
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(dfd, name, target, sizeof target - 1);
    if (n < 0)
      return sbx_error_errno(err, "rootfs `/%s`", name);
    target[n] = '\0';
    if (symlinkat(target, AT_FDCWD, name) < 0)
      return sbx_error_errno(err, "root skeleton `/%s`", name);
    return 0;
  }
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return 0;
  if (S_ISDIR(st.st_mode) ? mkdirat(AT_FDCWD, name, 0755) < 0
                          : mknodat(AT_FDCWD, name, S_IFREG | 0444, 0) < 0)
    return sbx_error_errno(err, "root skeleton `/%s`", name);
  _cleanup_close_ int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  char src[32];
  struct stat fst;
  if (fd < 0 || fstat(fd, &fst) < 0)
    return sbx_error_errno(err, "rootfs `/%s`", name);
  if ((fst.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) /* replaced meanwhile */
    return sbx_error_set(err, EBUSY, "rootfs `/%s` changed while the sandbox was built", name);
  fd_path(fd, src);
  if (mount(src, name, NO_FSTYPE, MS_BIND | MS_REC, NULL) < 0)
    return sbx_error_errno(err, "bind rootfs `/%s`", name);
  /* Linux < 5.12 has no recursive mount_setattr: each bind made read-only on its own. */
  return readonly ? make_readonly_tree(name, 0, err) : 0;
}

/* A destination's directories and its leaf (a directory, or a file for a file's bind) in the
 * skeleton, which is read-only by the time the bind is made. Each directory is opened with
 * O_NOFOLLOW before the next is made in it: nothing here follows a link (the rootfs could have
 * gained one under that name since it was looked at). */
static int skeleton_path(const char *rel, bool dir, sbx_error_t *err)
{
  _cleanup_close_ int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  char name[NAME_MAX + 1];
  for (const char *c = rel; fd >= 0;) {
    size_t n = strcspn(c, "/");
    if (n > NAME_MAX)
      return sbx_error_set(err, ENAMETOOLONG, "root skeleton `/%s`", rel);
    memcpy(name, c, n);
    name[n] = '\0';
    bool leaf = !c[n];
    int r = !leaf || dir ? mkdirat(fd, name, 0755) : mknodat(fd, name, S_IFREG | 0444, 0);
    if (r < 0 && errno != EEXIST)
      break;
    if (leaf)
      return 0;
    int next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
    c += n + 1;
  }
  return sbx_error_errno(err, "root skeleton `/%s`", rel);
}

int mount_enter_skeleton(int rootfs_fd, const char *path, unsigned uid, unsigned gid, int *ret_dirfd,
                         sbx_error_t *err)
{
  /* Owned by the uid the rest of the setup runs as, which fills it in (not by us: our host uid
   * may be unmapped here, and then nobody could write it). */
  char opts[96];
  if (bufprintf(opts, sizeof opts, err, "size=1M,mode=0755,uid=%u,gid=%u", uid, gid) < 0)
    return -1;
  /* Opened before the tmpfs covers path: it still names the rootfs below. */
  _cleanup_close_ int dfd = openat(rootfs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return sbx_error_errno(err, "open rootfs `%s`", path);
  if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
    return sbx_error_errno(err, "mount the root skeleton on `%s`", path);
  if (chdir(path) < 0)
    return sbx_error_errno(err, "enter the root skeleton `%s`", path);
  *ret_dirfd = TAKE_FD(dfd);
  return 0;
}

int mount_fill_skeleton(int dirfd, const char *const *extra, const bool *dir, size_t n_extra, bool readonly,
                        sbx_error_t *err)
{
  DIR *d = fdopendir(dirfd);
  if (!d) {
    close(dirfd);
    return sbx_error_errno(err, "read rootfs");
  }
  int r = -1;
  struct dirent *e;
  errno = 0;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (skeleton_entry(dirfd, e->d_name, readonly, err) < 0)
      goto out;
    errno = 0;
  }
  if (errno) {
    sbx_error_errno(err, "read rootfs");
    goto out;
  }
  for (size_t i = 0; i < n_extra; i++)
    if (skeleton_path(extra[i], dir[i], err) < 0)
      goto out;
  r = 0;
out:
  closedir(d);
  return r;
}

static int mount_tmpfs(const char *rel, uint64_t size, unsigned mode, bool noexec, sbx_error_t *err)
{
  char opts[96];
  if (bufprintf(opts, sizeof opts, err, "size=%llu,mode=%o", (unsigned long long) size, mode) < 0)
    return -1;
  unsigned long flags = MS_NOSUID | MS_NODEV | (noexec ? MS_NOEXEC : 0);
  if (mount("tmpfs", rel, "tmpfs", flags, opts) < 0)
    return sbx_error_errno(err, "mount tmpfs on `/%s`", rel);
  return 0;
}

static int bind_dev_node(const char *name, sbx_error_t *err)
{
  char src[64], dst[64];
  if (bufprintf(src, sizeof src, err, "/dev/%s", name) < 0 ||
      bufprintf(dst, sizeof dst, err, "dev/%s", name) < 0)
    return -1;
  int fd = open(dst, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (fd < 0)
    return sbx_error_errno(err, "create `/%s`", dst);
  close(fd);
  /* Device nodes cannot be created in a user namespace; bind the host's (bubblewrap does too). */
  if (mount(src, dst, NO_FSTYPE, MS_BIND, NULL) < 0)
    return sbx_error_errno(err, "bind `%s`", src);
  return 0;
}

int mount_dev(uint64_t shm_bytes, sbx_error_t *err)
{
  static const char *nodes[] = {"null", "zero", "full", "random", "urandom"};
  static const struct {
    const char *target, *link;
  } links[] = {
      {"/proc/self/fd", "dev/fd"},
      {"/proc/self/fd/0", "dev/stdin"},
      {"/proc/self/fd/1", "dev/stdout"},
      {"/proc/self/fd/2", "dev/stderr"},
  };
  if (mount_tmpfs("dev", 1 << 20, 0755, true, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
    if (bind_dev_node(nodes[i], err) < 0)
      return -1;
  for (size_t i = 0; i < sizeof links / sizeof *links; i++)
    if (symlink(links[i].target, links[i].link) < 0)
      return sbx_error_errno(err, "symlink `/%s`", links[i].link);
  if (mkdir("dev/shm", 01777) < 0)
    return sbx_error_errno(err, "mkdir `/dev/shm`");
  if (mount_tmpfs("dev/shm", shm_bytes, 01777, true, err) < 0)
    return -1;
  /* Nothing else may be created in /dev: this mount only, /dev/shm stays writable. */
  return set_readonly("dev", 0, MS_NOEXEC, err);
}

/* ------------------------------------------------------------------ bind destinations
 *
 * A destination is resolved inside the new root, never on the host: the rootfs is untrusted
 * content (an imported image), and a symlink in it such as /var/lock -> /run/lock or
 * /data -> ../../../etc must lead where it leads for the code, inside the sandbox. openat2 with
 * RESOLVE_IN_ROOT resolves absolute symlinks from the new root and stops ".." at it, as the
 * kernel will once we have pivoted. Missing mount points are created relative to the fds it
 * returns, and the bind is attached to the resolved fd (move_mount), so no path is looked up
 * twice (crun does the same through /proc/self/fd). Without openat2 and the new mount API (Linux
 * < 5.6, < 5.2; valgrind) a component walk and mount(2) through /proc/self/fd do the same. */

#define MAX_SYMLINKS 40 /* the kernel's limit for one lookup */
/* Open the real directory `canon` (no symlinks, "." or "..", as walk_in_root builds it) below
 * root_fd, every component with O_NOFOLLOW: if one was replaced by a symlink meanwhile, fail. */
static int reopen_canonical(int root_fd, const char *canon)
{
  int fd = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  char name[NAME_MAX + 1];
  for (const char *c = canon; fd >= 0 && *c;) {
    size_t n = strcspn(c, "/");
    if (n >= sizeof name || bufprintf(name, sizeof name, NULL, "%.*s", (int) n, c) < 0) {
      close(fd);
      return errno = ENAMETOOLONG, -1;
    }
    int next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
    c += n + (c[n] == '/');
  }
  return fd;
}

/* The fallback for open_in_root: each component is opened with O_NOFOLLOW relative to the one
 * before, and a symlink's target spliced into the rest of the path (an absolute one restarting
 * at the root). ".." never goes through the file system's "..", which could climb above the
 * root: the walk keeps the real path it has reached and reopens its parent from the root.
 * Symlinks on /proc are refused, as RESOLVE_NO_MAGICLINKS refuses its magic links. */
static int walk_in_root(int root_fd, const char *path)
{
  char bufs[2][PATH_MAX], target[PATH_MAX], canon[PATH_MAX] = "";
  size_t clen = 0;
  int links = 0, which = 0;
  if (bufprintf(bufs[0], sizeof bufs[0], NULL, "%s", path) < 0)
    return errno = ENAMETOOLONG, -1;
  _cleanup_close_ int cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (char *p = bufs[0]; cur >= 0;) {
    while (*p == '/')
      p++;
    if (!*p)
      return TAKE_FD(cur);
    char *end = strchrnul(p, '/');
    const char *name = p;
    p = *end ? end + 1 : end;
    *end = '\0';
    if (!strcmp(name, "."))
      continue;
    if (!strcmp(name, "..")) {
      while (clen > 0 && canon[clen - 1] != '/')
        clen--;
      clen -= clen > 0;
      canon[clen] = '\0';
      close(cur);
      cur = reopen_canonical(root_fd, canon);
      continue;
    }
    _cleanup_close_ int fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
      return -1;
    if (S_ISLNK(st.st_mode)) {
      struct statfs sf;
      if (++links > MAX_SYMLINKS || (fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC))
        return errno = ELOOP, -1;
      ssize_t n = readlinkat(fd, "", target, sizeof target - 1);
      if (n < 0)
        return -1;
      target[n] = '\0';
      which = !which;
      if (bufprintf(bufs[which], sizeof bufs[which], NULL, "%s/%s", target, p) < 0)
        return errno = ENAMETOOLONG, -1;
      p = bufs[which];
      if (target[0] == '/') {
        clen = 0;
        canon[0] = '\0';
        close(cur);
        cur = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode))
      return errno = ENOTDIR, -1;
    if (bufcatf(canon, sizeof canon, NULL, "%s%s", clen ? "/" : "", name) < 0)
      return errno = ENAMETOOLONG, -1;
    clen = strlen(canon);
    close(cur);
    cur = TAKE_FD(fd);
  }
  return -1;
}

/* An O_PATH fd for directory `path` inside the tree root_fd names, following symlinks as if
 * root_fd were "/". -1 with errno (ENOENT: something on the way is missing). */
static int open_in_root(int root_fd, const char *path)
{
  static bool no_openat2;
  struct open_how how = {
      .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
      /* Magic links (/proc/self/root, /proc/self/fd/N) would jump out of the root. */
      .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  for (int i = 0; !no_openat2; i++) {
    int fd = (int) syscall(SYS_openat2, root_fd, *path ? path : ".", &how, sizeof how);
    /* EAGAIN: a concurrent rename (in a --bind-rw directory); the kernel asks us to retry. */
    if (fd >= 0 || (errno != EAGAIN && errno != EINTR && errno != ENOSYS) || i == 16)
      return fd;
    no_openat2 = errno == ENOSYS;
  }
  return walk_in_root(root_fd, path);
}

/* An O_PATH fd for directory `path` (relative to the new root), creating what is missing
 * (0755) like mkdir -p. A dangling symlink on the way is followed inside the root and what it
 * names is created: /var/lock -> /run/lock, where /run is the sandbox's fresh tmpfs. Creating
 * anything outside the writable places fails (EROFS). -1 with errno on failure. */
static int ensure_dir(int root_fd, const char *path)
{
  char cur[PATH_MAX];
  if (bufprintf(cur, sizeof cur, NULL, "%s", path) < 0)
    return errno = ENAMETOOLONG, -1;
  for (int round = 0; round <= MAX_SYMLINKS; round++) {
    int fd = open_in_root(root_fd, cur);
    if (fd >= 0 || errno != ENOENT)
      return fd;
    /* Walk the prefixes: pfd is the directory cur[0, at) resolves to. */
    _cleanup_close_ int pfd = open_in_root(root_fd, "");
    if (pfd < 0)
      return -1;
    size_t at = 0;
    for (;;) {
      while (cur[at] == '/')
        at++;
      size_t end = at + strcspn(cur + at, "/");
      if (end == at) /* every prefix resolved: the path appeared meanwhile; look again */
        break;
      char saved = cur[end];
      cur[end] = '\0';
      fd = open_in_root(root_fd, cur);
      const char *name = cur + at;
      if (fd < 0 && errno == ENOENT && strcmp(name, ".") && strcmp(name, "..")) {
        if (mkdirat(pfd, name, 0755) == 0)
          fd = openat(pfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else if (errno != EEXIST)
          return -1;
        else
          errno = ENOENT; /* it exists but does not resolve: a dangling symlink */
      }
      if (fd >= 0) {
        cur[end] = saved;
        close(pfd);
        pfd = fd;
        at = end;
        continue;
      }
      if (errno != ENOENT)
        return -1;
      char target[PATH_MAX], next[PATH_MAX];
      ssize_t n = readlinkat(pfd, name, target, sizeof target - 1);
      if (n < 0)
        return errno = errno == EINVAL ? ENOENT : errno, -1;
      target[n] = '\0';
      /* Splice the target in: relative to the directory holding the link, or to the root. */
      cur[end] = saved;
      if (bufprintf(next, sizeof next, NULL, "%.*s%s%s", target[0] == '/' ? 0 : (int) at, cur, target,
                    cur + end) < 0)
        return errno = ENAMETOOLONG, -1;
      memcpy(cur, next, strlen(next) + 1);
      break;
    }
  }
  return errno = ELOOP, -1;
}

static int bind_target_error(const char *dst, sbx_error_t *err)
{
  if (errno == EROFS)
    return sbx_error_set(err, ENOENT,
                         "bind target `%s` does not exist in the read-only rootfs: bind onto an existing "
                         "path, below /workspace or /tmp, or at a new top-level directory such as /data",
                         dst);
  return sbx_error_errno(err, "bind target `%s`", dst);
}

/* The mount point `leaf` in directory pfd (the resolved parent of dst), created if missing: an
 * O_PATH fd of a directory or a file like the source. The leaf itself is never followed. */
static int bind_target(int pfd, const char *leaf, const char *dst, bool dir, sbx_error_t *err)
{
  _cleanup_close_ int fd = openat(pfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno != ENOENT)
    return bind_target_error(dst, err);
  if (fd < 0) {
    if (dir) {
      if (mkdirat(pfd, leaf, 0755) < 0)
        return bind_target_error(dst, err);
    } else {
      int cfd = openat(pfd, leaf, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444);
      if (cfd < 0)
        return bind_target_error(dst, err);
      close(cfd);
    }
    /* Checked below all the same: in a --bind-rw directory a host process could swap it. */
    if ((fd = openat(pfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
      return bind_target_error(dst, err);
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return sbx_error_errno(err, "stat bind target `%s`", dst);
  if (S_ISLNK(st.st_mode))
    return sbx_error_set(err, ELOOP, "bind target `%s` is a symlink", dst);
  if (dir != !!S_ISDIR(st.st_mode))
    return sbx_error_set(err, dir ? ENOTDIR : EISDIR, "bind target `%s`", dst);
  return TAKE_FD(fd);
}

/* Remount the bind whose root `mnt_path` names: Linux < 5.12, where the attributes could not be
 * set on the detached tree (not recursive, as mount(2) cannot be). */
static int remount_attached(const char *mnt_path, const char *dst, bool rw, sbx_error_t *err)
{
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY);
  if (mount("none", mnt_path, NO_FSTYPE, flags | locked_flags(mnt_path), NULL) < 0)
    return sbx_error_errno(err, "make bind `%s` %s", dst, rw ? "nosuid" : "read-only");
  return 0;
}

/* mount(2) instead of the new mount API (Linux < 5.2, valgrind): bind onto the target's fd,
 * then find the new mount on top of it by name in the parent, check it is the source, and
 * remount it. */
static int bind_legacy(int src_fd, int pfd, const char *leaf, int target, const char *dst, bool rw,
                       sbx_error_t *err)
{
  char src[32], dst_fd[32];
  fd_path(src_fd, src);
  fd_path(target, dst_fd);
  if (mount(src, dst_fd, NO_FSTYPE, MS_BIND | MS_REC, NULL) < 0)
    return sbx_error_errno(err, "bind `%s`", dst);
  _cleanup_close_ int top = openat(pfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat a, b;
  if (top < 0 || fstat(top, &a) < 0 || fstat(src_fd, &b) < 0)
    return sbx_error_errno(err, "bind `%s`", dst);
  if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return sbx_error_set(err, EBUSY, "bind `%s`: replaced while it was being mounted", dst);
  char path[32];
  fd_path(top, path);
  struct sbx_mount_attr attr = {.attr_set =
                                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY)};
  if (syscall(SYS_mount_setattr, top, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) == 0)
    return 0;
  if (errno != ENOSYS)
    return sbx_error_errno(err, "make bind `%s` %s", dst, rw ? "nosuid" : "read-only");
  return remount_attached(path, dst, rw, err);
}

int mount_bind_fd(int root_fd, int src_fd, const char *dst, bool rw, sbx_error_t *err)
{
  struct stat st;
  if (fstat(src_fd, &st) < 0)
    return sbx_error_errno(err, "stat bind source for `%s`", dst);
  /* The parent resolved (and made) inside the root; the leaf looked up in it, not followed. */
  char parent[PATH_MAX];
  const char *rel = dst + strspn(dst, "/");
  const char *slash = strrchr(rel, '/');
  if (bufprintf(parent, sizeof parent, err, "%.*s", slash ? (int) (slash - rel) : 0, rel) < 0)
    return sbx_error_prefix(err, "bind target");
  const char *leaf = slash ? slash + 1 : rel;
  _cleanup_close_ int pfd = ensure_dir(root_fd, parent);
  if (pfd < 0)
    return bind_target_error(dst, err);
  _cleanup_close_ int target = bind_target(pfd, leaf, dst, S_ISDIR(st.st_mode), err);
  if (target < 0)
    return -1;
  /* A detached copy of the source, recursive (a user namespace may not reveal what its submounts
   * cover), made read-only (or just nosuid, nodev) before it becomes visible, then attached. */
  _cleanup_close_ int tree = (int) syscall(
      SYS_open_tree, src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (tree < 0 && errno == ENOSYS)
    return bind_legacy(src_fd, pfd, leaf, target, dst, rw, err);
  if (tree < 0)
    return sbx_error_errno(err, "bind `%s`", dst);
  struct sbx_mount_attr a = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (rw ? 0 : MOUNT_ATTR_RDONLY)};
  bool set = syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) == 0;
  if (!set && errno != ENOSYS)
    return sbx_error_errno(err, "make bind `%s` %s", dst, rw ? "nosuid" : "read-only");
  if (syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return sbx_error_errno(err, "bind `%s`", dst);
  if (set)
    return 0;
  /* The fd of the attached tree names the bind's root. */
  char path[32];
  fd_path(tree, path);
  return remount_attached(path, dst, rw, err);
}

int mount_root_readonly(sbx_error_t *err)
{
  return make_readonly_tree(".", 0, err);
}

int mount_pivot(sbx_error_t *err)
{
  /* pivot_root(".", ".") stacks the old root on top of the new one at "/", so detaching "."
   * afterwards removes the old root without needing a put_old directory (pivot_root(2) NOTES). */
  if (syscall(SYS_pivot_root, ".", ".") < 0)
    return sbx_error_errno(err, "pivot_root");
  if (umount2(".", MNT_DETACH) < 0)
    return sbx_error_errno(err, "detach old root");
  if (chdir("/") < 0)
    return sbx_error_errno(err, "chdir `/`");
  return 0;
}
