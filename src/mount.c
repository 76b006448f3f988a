#include "mount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

/* The filesystem type is ignored for binds, remounts and propagation changes; "none" rather than
 * NULL keeps memory checkers (valgrind) from flagging the call. */
#define NO_FSTYPE "none"

static void fd_path(int fd, char buf[32])
{
  /* At most 25 bytes; were it cut, buf would be "" and the mount that uses it would fail. */
  if (bufprintf(buf, 32, NULL, "/proc/self/fd/%d", fd) < 0)
    return;
}

int mount_make_private(sbx_error_t *err)
{
  if (mount("none", "/", NO_FSTYPE, MS_REC | MS_PRIVATE, NULL) < 0)
    return sbx_error_errno(err, "make mounts private");
  return 0;
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
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
struct sbx_mount_attr {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* Read-only (plus nosuid, nodev) on a mount and everything below it. A bind of a tree that holds
 * mounts must be recursive in a user namespace (the kernel refuses to reveal what they cover),
 * and a plain remount would leave those submounts writable. */
static int make_readonly_tree(const char *path, unsigned long extra, sbx_error_t *err)
{
  struct sbx_mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
  if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof a) == 0)
    return 0;
  if (errno != ENOSYS)
    return sbx_error_errno(err, "make `%s` read-only", path);
  return remount_bind(path, MS_RDONLY | MS_NOSUID | MS_NODEV | extra, err); /* Linux < 5.12 */
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

int mount_tmpfs(const char *rel, uint64_t size, unsigned mode, bool noexec, sbx_error_t *err)
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
  if (bufprintf(src, sizeof src, err, "/dev/%s", name) < 0 || bufprintf(dst, sizeof dst, err, "dev/%s", name) < 0)
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
  static const char *nodes[] = { "null", "zero", "full", "random", "urandom" };
  static const struct { const char *target, *link; } links[] = {
    { "/proc/self/fd", "dev/fd" },
    { "/proc/self/fd/0", "dev/stdin" },
    { "/proc/self/fd/1", "dev/stdout" },
    { "/proc/self/fd/2", "dev/stderr" },
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
  /* Nothing else may be created in /dev. */
  return remount_bind("dev", MS_RDONLY | MS_NOSUID | MS_NOEXEC, err);
}

static int mask_path(const char *rel, sbx_error_t *err)
{
  struct stat st;
  if (lstat(rel, &st) < 0)
    return errno == ENOENT ? 0 : sbx_error_errno(err, "stat `/%s`", rel);
  if (S_ISDIR(st.st_mode)) {
    if (mount("tmpfs", rel, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555") < 0)
      return sbx_error_errno(err, "mask `/%s`", rel);
    return 0;
  }
  if (mount("dev/null", rel, NO_FSTYPE, MS_BIND, NULL) < 0)
    return sbx_error_errno(err, "mask `/%s`", rel);
  return 0;
}

static int readonly_path(const char *rel, sbx_error_t *err)
{
  struct stat st;
  if (lstat(rel, &st) < 0)
    return errno == ENOENT ? 0 : sbx_error_errno(err, "stat `/%s`", rel);
  if (mount(rel, rel, NO_FSTYPE, MS_BIND | MS_REC, NULL) < 0)
    return sbx_error_errno(err, "bind `/%s`", rel);
  return remount_bind(rel, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, err);
}

int mount_proc(const struct sbx_policy *p, sbx_error_t *err)
{
  /* The caller is pid 1 of a new pid namespace, so this proc shows only the sandbox. */
  if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return sbx_error_errno(err, "mount `/proc`");
  if (!p->mask_proc)
    return 0;
  for (size_t i = 0; i < p->n_proc_masked; i++)
    if (mask_path(p->proc_masked[i] + 1, err) < 0)
      return -1;
  for (size_t i = 0; i < p->n_proc_readonly; i++)
    if (readonly_path(p->proc_readonly[i] + 1, err) < 0)
      return -1;
  return 0;
}

static int missing_target(const char *rel, sbx_error_t *err)
{
  if (errno == EROFS)
    return sbx_error_set(err, ENOENT,
                         "bind target `/%s` does not exist in the read-only rootfs: bind below /workspace, "
                         "/tmp or /mnt, or onto an existing path", rel);
  return sbx_error_errno(err, "create bind target `/%s`", rel);
}

/* Create the mount point for a bind: a file or directory like the source. Only missing leaves
 * under writable places are created; the rootfs itself is read-only. */
static int make_mountpoint(const char *rel, bool dir, sbx_error_t *err)
{
  struct stat st;
  if (lstat(rel, &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return sbx_error_set(err, ELOOP, "bind target `/%s` is a symlink", rel);
    if (dir != !!S_ISDIR(st.st_mode))
      return sbx_error_set(err, dir ? ENOTDIR : EISDIR, "bind target `/%s`", rel);
    return 0;
  }
  /* mkdir -p for the parents */
  char buf[4096];
  if (bufprintf(buf, sizeof buf, err, "%s", rel) < 0)
    return sbx_error_prefix(err, "bind target");
  for (char *s = strchr(buf, '/'); s; s = strchr(s + 1, '/')) {
    *s = '\0';
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
      return missing_target(rel, err);
    *s = '/';
  }
  if (dir) {
    if (mkdir(rel, 0755) < 0)
      return missing_target(rel, err);
    return 0;
  }
  int fd = open(rel, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0)
    return missing_target(rel, err);
  close(fd);
  return 0;
}

int mount_bind_fd(int src_fd, const char *rel, bool rw, sbx_error_t *err)
{
  char src[32];
  struct stat st;
  fd_path(src_fd, src);
  if (fstat(src_fd, &st) < 0)
    return sbx_error_errno(err, "stat bind source for `/%s`", rel);
  if (make_mountpoint(rel, S_ISDIR(st.st_mode), err) < 0)
    return -1;
  if (mount(src, rel, NO_FSTYPE, MS_BIND | MS_REC, NULL) < 0)
    return sbx_error_errno(err, "bind `/%s`", rel);
  if (rw)
    return remount_bind(rel, MS_NOSUID | MS_NODEV, err);
  return make_readonly_tree(rel, 0, err);
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
