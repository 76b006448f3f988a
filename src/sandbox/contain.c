/* SPDX-License-Identifier: Apache-2.0 */
/* The steps that make a process a sandbox, once, for both paths (contain.h; the order and what
 * each path does between them: the timeline at the top of sandbox.c).
 *
 * The fork template's C pid 1 (inside/zygote.c) links this file as well as sandboxd does, and runs
 * it while it shares the template's memory: so nothing here has libc, errno, a global or a static
 * variable written; only raw system calls (contain_sys.h) and the caller's structs and stack.
 * Only kernel headers are included. Paths are relative to the current directory: the root being
 * built (the cold path's new root before pivot_root; the template's /, for a call). */
#include "sandbox/contain.h"

#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/filter.h>
#include <linux/in.h>
#include <linux/mount.h>
#include <linux/prctl.h>
#include <linux/resource.h>
#include <linux/seccomp.h>
#include <linux/stat.h>

#include "sandbox/contain_sys.h"

#define AF_INET_ 2
#define SOCK_STREAM_ 1
#define PATH_ROOM 4096

/* r < 0: say what failed, and fail. */
static int failed(struct contain_err *e, const char *what, const char *arg, long r)
{
  e->what = what;
  e->arg = arg;
  e->errnum = (int) -r;
  return -1;
}
#define CK(r, what, arg)                                                                                     \
  do {                                                                                                       \
    long r_ = (r);                                                                                           \
    if (r_ < 0)                                                                                              \
      return failed(e, what, arg, r_);                                                                       \
  } while (0)

static long write_at(int dirfd, const char *path, const char *text, uint64_t len)
{
  long fd = csys(__NR_openat, dirfd, path, O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return fd;
  long n = csys(__NR_write, fd, text, len);
  csys(__NR_close, fd);
  return n < 0 ? n : n == (long) len ? 0 : -EIO;
}

/* No libc: the string helpers the steps need. */
static bool same(const char *a, const char *b)
{
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}

/* 1 for a directory, 0 for anything else, -errno if it cannot be looked at. */
static long is_dir(const char *path, bool follow)
{
  struct statx st;
  long r = csys(__NR_statx, AT_FDCWD, path, follow ? 0 : AT_SYMLINK_NOFOLLOW, STATX_TYPE, &st);
  return r < 0 ? r : (st.stx_mode & 0170000) == 0040000 /* S_IFDIR */;
}

/* ------------------------------------------------------------------ identity */

int contain_join_cgroup(const int *fds, int n, struct contain_err *e)
{
  for (int i = 0; i < n; i++) {
    long r = csys(__NR_write, fds[i], "0", 1);
    CK(r == 1 ? 0 : r < 0 ? r : -EIO, "cgroup: move into the cgroup", 0);
  }
  return 0;
}

int contain_map_self(uint32_t uid, uint32_t gid, struct contain_err *e)
{
  char map[64];
  struct buf t = {map, 0, sizeof map};
  CK(write_at(AT_FDCWD, "/proc/self/setgroups", "deny", 4), "write", "/proc/self/setgroups");
  putu(&t, uid), put(&t, " "), putu(&t, uid), put(&t, " 1");
  CK(write_at(AT_FDCWD, "/proc/self/uid_map", map, t.len), "write", "/proc/self/uid_map");
  t.len = 0;
  putu(&t, gid), put(&t, " "), putu(&t, gid), put(&t, " 1");
  CK(write_at(AT_FDCWD, "/proc/self/gid_map", map, t.len), "write", "/proc/self/gid_map");
  return 0;
}

int contain_become(uint32_t uid, uint32_t gid, bool drop_groups, struct contain_err *e)
{
  /* This thread's credentials only (raw syscalls): glibc's would change every thread's, and
   * sandbox_child's network namespace thread may still run. */
  if (drop_groups)
    CK(csys(__NR_setgroups, 0, 0), "setgroups", 0);
  CK(csys(__NR_setresgid, gid, gid, gid), "set sandbox gid", 0);
  CK(csys(__NR_setresuid, uid, uid, uid), "set sandbox uid", 0);
  return 0;
}

/* ------------------------------------------------------------------ mounts */

int contain_private(struct contain_err *e)
{
  /* The filesystem type is ignored for a propagation change; "none" rather than NULL keeps
   * memory checkers (valgrind) from flagging the call. */
  CK(csys(__NR_mount, "none", "/", "none", MS_REC | MS_PRIVATE, 0), "make mounts private", 0);
  return 0;
}

#define MAX_UNDER 16

static long mkdir_parents(const char *path)
{
  char dir[PATH_ROOM];
  struct buf t = {dir, 0, sizeof dir};
  put(&t, path);
  for (char *s = dir + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      long r = csys(__NR_mkdirat, AT_FDCWD, dir, 0777);
      *s = '/';
      if (r < 0 && r != -EEXIST)
        return r;
    }
  return 0;
}

/* A fresh tmpfs at t->path and, over it, the mounts that were under the old one, bound again
 * from the fds held before it covered them. /workspace gets its out/ (a mount there stays). */
static int tmpfs(const struct contain_tmpfs *t, struct contain_err *e)
{
  int held[MAX_UNDER], n_held = 0;
  long r = t->n_under > MAX_UNDER ? -E2BIG : 0;
  const char *what = "mount tmpfs on", *arg = t->path;
  while (r >= 0 && n_held < t->n_under)
    if ((r = csys(__NR_openat, AT_FDCWD, t->under[n_held].dst, O_PATH | O_CLOEXEC, 0)) >= 0)
      held[n_held++] = (int) r;
    else
      what = "open", arg = t->under[n_held].dst;
  if (r >= 0)
    r = csys(__NR_mount, "tmpfs", t->path, "tmpfs", t->flags, t->data);
  for (int i = 0; r >= 0 && i < t->n_under; i++) {
    const struct contain_under *u = &t->under[i];
    char src[40];
    struct buf s = {src, 0, sizeof src};
    put(&s, "/proc/self/fd/"), putu(&s, (uint64_t) held[i]);
    what = "bind", arg = u->dst;
    if ((r = mkdir_parents(u->dst)) < 0)
      break;
    if (u->dir)
      r = csys(__NR_mkdirat, AT_FDCWD, u->dst, 0777);
    else if ((r = csys(__NR_openat, AT_FDCWD, u->dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) >= 0)
      r = csys(__NR_close, r);
    if (r >= 0)
      r = csys(__NR_mount, src, u->dst, 0, MS_BIND | MS_REC, 0);
    if (r >= 0 && u->flags)
      r = csys(__NR_mount, 0, u->dst, 0, MS_REMOUNT | MS_BIND | u->flags, 0);
  }
  for (int i = 0; i < n_held; i++)
    csys(__NR_close, held[i]);
  CK(r, what, arg);
  if (same(t->path, "workspace") && is_dir("workspace/out", true) != 1)
    CK(csys(__NR_mkdirat, AT_FDCWD, "workspace/out", 0755), "create", "/workspace/out");
  return 0;
}

/* Read-only, nosuid, nodev and noexec on the mount at path: one mount_setattr (which only adds
 * flags), or a remount: before Linux 5.12, and in a forked call, whose template's filter refuses
 * the new mount API as the policies do (EPERM; a remount that may not fails with it too). */
static long set_readonly(const char *path)
{
  struct mount_attr a = {.attr_set =
                             MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
  long r = csys(__NR_mount_setattr, AT_FDCWD, path, 0, &a, sizeof a);
  if (r != -ENOSYS && r != -EPERM)
    return r;
  return csys(__NR_mount, "none", path, "none",
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0);
}

/* A directory is covered by an empty read-only tmpfs, a file by /dev/null (the sandbox's: dev/null
 * here). Looked at first, not a bind of /dev/null that a directory refuses: the refused bind's
 * copy of the mount is unmounted again, which waits for an RCU grace period (0.45 ms while the
 * network namespace is being made on the other CPU). What this kernel lacks is left. */
static int mask(const char *rel, struct contain_err *e)
{
  long d = is_dir(rel, false);
  if (d == -ENOENT)
    return 0;
  CK(d, "stat", rel);
  if (d)
    CK(csys(__NR_mount, "tmpfs", rel, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=4k,mode=555"),
       "mask", rel);
  else
    CK(csys(__NR_mount, "dev/null", rel, "none", MS_BIND, 0), "mask", rel);
  return 0;
}

/* The path bound on itself, then that mount read-only (a mask below it stays as it is). */
static int readonly(const char *rel, struct contain_err *e)
{
  long r = csys(__NR_mount, rel, rel, "none", MS_BIND | MS_REC, 0);
  if (r == -ENOENT)
    return 0;
  CK(r, "bind", rel);
  CK(set_readonly(rel), "make read-only", rel);
  return 0;
}

/* The per-user-namespace budgets (policy: inotify_instances ... namespaces). A new user namespace
 * starts with INT_MAX for each; what is charged in it is charged to its owner outside as well.
 * Written from inside, where being the namespace's creator gave us CAP_SYS_RESOURCE, which
 * writing needs, through sys_fd: /proc/sys/user shows the reader's user namespace, whichever proc
 * mount it is read through, and this proc is a superblock of its own, in whose /proc/sys only
 * this sandbox's namespaces are ever looked up (in the host's, each lookup of a per-namespace
 * entry compares against every other namespace's entry of that name still cached, under the
 * sysctl lock: 20-30 us a file just after another sandbox had ended, 2 us here). A kernel without
 * a count (fanotify before 5.13, time before 5.6) has nothing to bound. */
static int budgets(int sys_fd, const struct contain_budget *b, int n, struct contain_err *e)
{
  for (int i = 0; i < n; i++) {
    char path[96], v[24];
    struct buf tp = {path, 0, sizeof path}, tv = {v, 0, sizeof v};
    put(&tp, "user/max_"), put(&tp, b[i].name), putu(&tv, b[i].value);
    long r = write_at(sys_fd, path, v, tv.len);
    if (r != -ENOENT)
      CK(r, "kernel budgets: write /proc/sys", path);
  }
  return 0;
}

int contain_mounts(const struct contain_fs *fs, int *ret_sys_fd, struct contain_err *e)
{
  for (int i = 0; i < fs->n_tmpfs; i++)
    if (tmpfs(&fs->tmpfs[i], e) < 0)
      return -1;
  /* The caller is pid 1 of a new pid namespace, so this proc shows only the sandbox. */
  CK(csys(__NR_mount, "proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0), "mount", "/proc");
  long sys_fd = csys(__NR_openat, AT_FDCWD, "proc/sys", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  CK(sys_fd, "open", "/proc/sys");
  /* Before the masks, which may cover /proc/sys. */
  if (budgets((int) sys_fd, fs->budgets, fs->n_budgets, e) < 0)
    goto fail;
  for (int i = 0; fs->mask_proc && i < fs->n_masked; i++)
    if (mask(fs->masked[i] + (fs->masked[i][0] == '/'), e) < 0)
      goto fail;
  for (int i = 0; fs->mask_proc && i < fs->n_readonly; i++)
    if (readonly(fs->readonly[i] + (fs->readonly[i][0] == '/'), e) < 0)
      goto fail;
  *ret_sys_fd = (int) sys_fd;
  return 0;
fail:
  csys(__NR_close, sys_fd);
  return -1;
}

/* ------------------------------------------------------------------ limits and privileges */

int contain_listen(uint16_t port, struct contain_err *e)
{
  /* No SO_REUSEPORT: nothing else in the sandbox can bind this port while the listener lives. */
  long fd = csys(__NR_socket, AF_INET_, SOCK_STREAM_ | O_NONBLOCK | O_CLOEXEC, 0);
  CK(fd, "egress proxy: socket", 0);
  struct sockaddr_in a = {.sin_family = AF_INET_,
                          .sin_port = (uint16_t) ((port >> 8) | (port << 8)),
                          .sin_addr = {.s_addr = __builtin_bswap32(0x7f000001)}};
  long r = csys(__NR_bind, fd, &a, sizeof a);
  if (r == 0)
    r = csys(__NR_listen, fd, 64);
  if (r < 0) {
    csys(__NR_close, fd);
    return failed(e, "egress proxy: listen on", "127.0.0.1", r);
  }
  return (int) fd;
}

static long set_rlimit(int res, uint64_t v, bool ceiling, bool soft_only_ok)
{
  struct rlimit64 rl;
  if (ceiling && csys(__NR_prlimit64, 0, res, 0, &rl) == 0 && rl.rlim_max != RLIM64_INFINITY &&
      rl.rlim_max < v)
    v = rl.rlim_max; /* raising it would need CAP_SYS_RESOURCE (an unprivileged MEMLOCK: 64K) */
  rl.rlim_cur = rl.rlim_max = v;
  long r = csys(__NR_prlimit64, 0, res, &rl, 0);
  if (r < 0 && soft_only_ok && csys(__NR_prlimit64, 0, res, 0, &rl) == 0 && v <= rl.rlim_max) {
    rl.rlim_cur = v;
    r = csys(__NR_prlimit64, 0, res, &rl, 0);
  }
  return r;
}

int contain_rlimits(const struct contain_limits *l, struct contain_err *e)
{
  /* Pending signals (and POSIX timers, which hold one each), message queue bytes and SHM_LOCKed
   * bytes are counted per user in the sandbox's user namespace and again for its owner outside
   * (kernel/ucount.c); these limits bound the sandbox's count, and the code cannot raise a hard
   * limit. */
  CK(set_rlimit(RLIMIT_CORE, 0, false, false), "setrlimit", "core");
  CK(set_rlimit(RLIMIT_NOFILE, l->nofile, false, l->nofile_soft_only), "setrlimit", "nofile");
  CK(set_rlimit(RLIMIT_FSIZE, l->fsize, false, false), "setrlimit", "fsize");
  CK(set_rlimit(RLIMIT_SIGPENDING, l->sigpending, true, false), "setrlimit", "sigpending");
  CK(set_rlimit(RLIMIT_MSGQUEUE, l->msgqueue, true, false), "setrlimit", "msgqueue");
  CK(set_rlimit(RLIMIT_MEMLOCK, l->memlock, true, false), "setrlimit", "memlock");
  /* Without a cgroup: address space per process, and processes of the sandbox uid (counted per
   * user namespace since Linux 5.14, so only the sandbox's own), and CPU seconds (the caller's
   * backstop past the timeout). */
  if (l->degraded) {
    CK(set_rlimit(RLIMIT_AS, l->as, false, false), "setrlimit", "as");
    CK(set_rlimit(RLIMIT_NPROC, l->nproc, false, false), "setrlimit", "nproc");
    CK(set_rlimit(RLIMIT_CPU, l->cpu_seconds, false, false), "setrlimit", "cpu");
  }
  return 0;
}

/* Whether the kernel says every set is empty: effective, permitted and inheritable (capget) and
 * the bounding set up to the kernel's last capability. The ambient set follows: the kernel keeps
 * it within permitted and inheritable. */
static bool no_capability_left(void)
{
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};
  if (csys(__NR_capget, &h, d) < 0)
    return false;
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
    if (d[i].effective || d[i].permitted || d[i].inheritable)
      return false;
  long c, r = 0;
  for (c = 0; (r = csys(__NR_prctl, PR_CAPBSET_READ, c, 0, 0, 0)) == 0; c++)
    ;
  /* The loop ends at the first capability past the kernel's last (EINVAL), or at one still held. */
  return r == -EINVAL && c > 0;
}

static int drop_capabilities(struct contain_err *e)
{
  /* Ambient first: it may only hold what is permitted and inheritable. */
  long r = csys(__NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (r != -EINVAL)
    CK(r, "clear ambient capabilities", 0);
  /* The bounding set: every capability the kernel has, found by asking (PR_CAPBSET_READ fails
   * with EINVAL past the last), not a list built in. */
  long c;
  for (c = 0; (r = csys(__NR_prctl, PR_CAPBSET_READ, c, 0, 0, 0)) >= 0; c++)
    CK(csys(__NR_prctl, PR_CAPBSET_DROP, c, 0, 0, 0), "drop a capability from the bounding set", 0);
  if (r != -EINVAL)
    CK(r, "read the bounding set", 0);
  /* Effective, permitted and inheritable: one capset. */
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};
  CK(csys(__NR_capset, &h, d), "drop capabilities: capset", 0);
  if (!no_capability_left())
    return failed(e, "drop capabilities: some remain", 0, -EPERM);
  return 0;
}

/* Exceptions first: the main filter does not allow seccomp(2) itself, so it goes last. Order does
 * not change the verdict; the kernel takes the most restrictive of the two. By prctl, the older
 * interface to the same operation (seccomp(2) with flags 0): the policies allow prctl, which a
 * forked call's pid 1 runs under (its template's filter), and valgrind knows it. */
static int install_filters(const struct contain_privs *p, struct contain_err *e)
{
  const void *prog[2] = {p->except_prog, p->main_prog};
  uint64_t len[2] = {p->except_len, p->main_len};
  for (int i = 0; i < 2; i++) {
    if (!prog[i])
      continue;
    struct sock_fprog fp = {.len = (unsigned short) len[i], .filter = (struct sock_filter *) prog[i]};
    CK(csys(__NR_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0), "install seccomp filter", 0);
  }
  return 0;
}

int contain_drop_privileges(const struct contain_privs *p, struct contain_err *e)
{
  /* Bounding set and capabilities need CAP_SETPCAP, so before no_new_privs and seccomp; seccomp
   * last so the filter need not allow these calls. Without no_new_privs (test policies only),
   * installing a filter needs CAP_SYS_ADMIN, so it goes before the drop. */
  if (!p->no_new_privs && install_filters(p, e) < 0)
    return -1;
  if (p->drop_caps && drop_capabilities(e) < 0)
    return -1;
  if (p->no_new_privs)
    CK(csys(__NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)", 0);
  /* Not dumpable: the code (same uid) cannot ptrace pid 1 or open its /proc files. */
  if (p->undumpable)
    csys(__NR_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (p->no_new_privs && install_filters(p, e) < 0)
    return -1;
  return 0;
}
