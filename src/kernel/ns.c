/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's namespaces: clone3 into all but the network one (as root, with the sandbox's own
 * host id as the user namespace's owner), the uid/gid maps, the thread of pid 1 that makes the
 * network namespace, and the user namespace's kernel budgets. */
#include "kernel/ns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "kernel/netlink.h"

/* The network namespace is not among them: a thread of the child makes it (ns_net_start). */
#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

/* Network namespaces made from ours (a forked call's, from its template's) get a TCP hash table of
 * their own, of this many buckets, instead of sharing the host's (262144 on a host with 24 GiB): a
 * namespace that shares it has its TIME_WAIT sockets purged at its end by a walk of the whole host
 * table (cleanup_net, in a kworker); one with its own, by a walk of its own. Loopback connections
 * need few. Linux 5.19 and later; before, there is nothing to set. */
#define CHILD_TCP_EHASH "1024"

static void set_child_tcp_ehash(int sys_fd)
{
  int fd = openat(sys_fd, "net/ipv4/tcp_child_ehash_entries", O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  /* Best effort: only what the namespace's children cost. */
  (void) !write(fd, CHILD_TCP_EHASH, strlen(CHILD_TCP_EHASH));
  close(fd);
}

static int net_make(sbx_error_t *err)
{
  if (unshare(CLONE_NEWNET) < 0) {
    sbx_error_errno(err, "cannot create the network namespace");
    return sbx_error_hint(err, "see sandboxd doctor");
  }
  return netlink_loopback_up(err);
}

/* Creating a network namespace is most of what clone would cost (~0.3 ms in setup_net): this
 * thread makes it while pid 1 builds its mounts, in pid 1's user namespace, so the sandbox owns
 * it (it may configure its own loopback and nothing else). Only this thread enters it; pid 1 joins
 * once the thread is done. A thread, not a process: nothing is copied or torn down, and no
 * credentials are needed to enter the user namespace, which pid 1 is already in. */
static void *net_thread(void *arg)
{
  struct ns_net *n = arg;
  if (net_make(&n->err) == 0 &&
      (n->net_fd = openat(n->proc_fd, "thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
    sbx_error_errno(&n->err, "network namespace: open /proc/thread-self/ns/net");
  return NULL;
}

/* The code is pid 2 of the sandbox's pid namespace (sandboxd(1)), as in a forked call: the thread
 * takes a pid out of its way (ns_last_pid; ours to write as the namespace's owner, with its user
 * namespace's CAP_SYS_ADMIN), and the next one goes back to 2 once it has ended. A pid the
 * thread held could still be taken for a moment after it has gone. */
#define THREAD_PID "99"
#define CODE_PID "1"

static bool set_next_pid(int fd, const char *last)
{
  return pwrite(fd, last, strlen(last), 0) == (ssize_t) strlen(last);
}

int ns_net_start(struct ns_net *n, sbx_error_t *err)
{
  *n = (struct ns_net){.net_fd = -1, .last_pid_fd = -1};
  /* pivot_root and the read-only /proc/sys come while the thread runs: it works through this. */
  n->proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (n->proc_fd < 0)
    return sbx_error_errno(err, "network namespace: open /proc");
  n->last_pid_fd = openat(n->proc_fd, "sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
  /* Without ns_last_pid (a kernel without CONFIG_CHECKPOINT_RESTORE): made here, before the
   * mounts, so that the code is still pid 2. */
  if (n->last_pid_fd < 0 || !set_next_pid(n->last_pid_fd, THREAD_PID)) {
    net_thread(n);
    return 0;
  }
  int e = pthread_create(&n->thread, NULL, net_thread, n);
  if (e != 0) {
    close(n->last_pid_fd);
    close(n->proc_fd);
    return sbx_error_set(err, e, "network namespace: start its thread");
  }
  n->threaded = true;
  return 0;
}

int ns_net_join(struct ns_net *n, int sys_fd, sbx_error_t *err)
{
  int e = n->threaded ? pthread_join(n->thread, NULL) : 0;
  if (e == 0 && n->threaded && !set_next_pid(n->last_pid_fd, CODE_PID))
    e = errno;
  if (n->last_pid_fd >= 0)
    close(n->last_pid_fd);
  close(n->proc_fd);
  if (e != 0)
    return sbx_error_set(err, e, "network namespace: wait for its thread");
  if (n->net_fd < 0) {
    *err = n->err;
    return -1;
  }
  int r =
      setns(n->net_fd, CLONE_NEWNET) < 0 ? sbx_error_errno(err, "join the sandbox's network namespace") : 0;
  close(n->net_fd);
  /* /proc/sys/net shows the reader's network namespace: ours now. */
  if (r == 0)
    set_child_tcp_ehash(sys_fd);
  return r;
}

/* As root, this thread acts as the user namespace's owner for a moment (ns_clone_sandbox, the
 * maps): only this thread's euid changes (raw syscalls; glibc's setresuid would change every
 * thread's), SECBIT_NO_SETUID_FIXUP keeps our capabilities, and fsuid 0 opens host paths as root. */
struct as_owner {
  int secbits, dumpable;
};

static int become_owner(unsigned owner, struct as_owner *o)
{
  o->secbits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
  o->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  if (o->secbits < 0 || prctl(PR_SET_SECUREBITS, o->secbits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
    return -1;
  if (syscall(SYS_setresuid, -1, owner, -1) < 0) {
    int e = errno;
    prctl(PR_SET_SECUREBITS, o->secbits, 0, 0, 0);
    errno = e;
    return -1;
  }
  syscall(SYS_setfsuid, 0); /* allowed: our real uid is 0 */
  return 0;
}

static void back_to_root(const struct as_owner *o)
{
  int e = errno;
  /* Back to euid and fsuid 0. Cannot fail: the real and saved uids are 0. */
  syscall(SYS_setresuid, -1, 0, -1);
  prctl(PR_SET_SECUREBITS, o->secbits, 0, 0, 0);
  /* An euid change made us non-dumpable (fs.suid_dumpable); be what we were. */
  if (o->dumpable > 0)
    prctl(PR_SET_DUMPABLE, o->dumpable, 0, 0, 0);
  errno = e;
}

/* One map: inside to host_id, and with range (the fork template's) every other id of the policy's
 * host_id_range to itself, which inside must then be outside of. */
static int id_map(char *map, size_t size, unsigned inside, unsigned host_id, const struct sbx_policy *p,
                  bool range, sbx_error_t *err)
{
  if (bufprintf(map, size, err, "%u %u 1\n", inside, host_id) < 0)
    return -1;
  if (!range)
    return 0;
  unsigned start = p->host_id_start, end = p->host_id_start + p->host_id_count;
  if (inside >= start && inside < end)
    return sbx_error_set(err, EINVAL, "policy `%s`: uid/gid %u is inside its host_id_range %u %u", p->name,
                         inside, start, p->host_id_count);
  size_t n = strlen(map);
  if (host_id > start && bufprintf(map + n, size - n, err, "%u %u %u\n", start, start, host_id - start) < 0)
    return -1;
  n = strlen(map);
  if (host_id + 1 < end &&
      bufprintf(map + n, size - n, err, "%u %u %u\n", host_id + 1, host_id + 1, end - host_id - 1) < 0)
    return -1;
  return 0;
}

/* host_id: the sandbox's own host uid and gid (root), or 0: the invoking user's. As root, written
 * as the namespace's owner: a map of a namespace takes CAP_SYS_ADMIN over it, which root has only
 * through CAP_SYS_ADMIN outside, which a container's root lacks (Docker drops it). */
static int write_id_maps(pid_t pid, const struct sbx_policy *p, unsigned host_id, bool range,
                         sbx_error_t *err)
{
  char path[64], map[192];
  bool host_root = host_id != 0;
  unsigned host_uid = host_root ? host_id : (unsigned) geteuid();
  unsigned host_gid = host_root ? host_id : (unsigned) getegid();
  /* An unprivileged writer may map only its own ids, and must deny setgroups before writing
   * gid_map (user_namespaces(7)), so the sandbox cannot drop a group used to deny it access. */
  if (!host_root) {
    if (bufprintf(path, sizeof path, err, "/proc/%d/setgroups", pid) < 0 || write_file(path, "deny", err) < 0)
      return -1;
  }
  if (bufprintf(path, sizeof path, err, "/proc/%d/uid_map", pid) < 0 ||
      id_map(map, sizeof map, p->uid, host_uid, p, range && host_root, err) < 0 ||
      write_file(path, map, err) < 0 || bufprintf(path, sizeof path, err, "/proc/%d/gid_map", pid) < 0 ||
      id_map(map, sizeof map, p->gid, host_gid, p, range && host_root, err) < 0)
    return -1;
  return write_file(path, map, err);
}

int ns_write_id_maps(pid_t pid, const struct sbx_policy *p, unsigned host_id, bool range, sbx_error_t *err)
{
  struct as_owner o;
  if (host_id == 0)
    return write_id_maps(pid, p, host_id, false, err);
  if (become_owner(host_id, &o) < 0)
    return sbx_error_errno(err, "act as host id %u", host_id);
  int r = write_id_maps(pid, p, host_id, range, err);
  back_to_root(&o);
  return r;
}

/* ns_write_call_maps's helper: in the template's user namespace, the parent of the call's, the
 * only one whose processes may write the call's maps (user_namespaces(7)); it exits with 0 or an
 * errno. */
struct call_maps {
  int userns_fd;
  char path[2][64], map[2][32];
};

static int call_maps_main(void *arg)
{
  const struct call_maps *c = arg;
  if (setns(c->userns_fd, CLONE_NEWUSER) < 0)
    _exit(errno);
  for (int i = 0; i < 2; i++) {
    int fd = open(c->path[i], O_WRONLY | O_CLOEXEC);
    size_t len = strlen(c->map[i]);
    if (fd < 0 || write(fd, c->map[i], len) != (ssize_t) len)
      _exit(errno ? errno : EIO);
    close(fd);
  }
  _exit(0);
}

#ifndef __SANITIZE_ADDRESS__
/* The helper's stack: it shares our memory, and we are suspended until it exits. */
static char call_maps_stack[16 << 10] __attribute__((aligned(64)));
#endif

int ns_write_call_maps(int userns_fd, pid_t pid, const struct sbx_policy *p, unsigned host_id,
                       sbx_error_t *err)
{
  struct call_maps c = {.userns_fd = userns_fd};
  if (bufprintf(c.path[0], sizeof c.path[0], err, "/proc/%d/uid_map", pid) < 0 ||
      bufprintf(c.path[1], sizeof c.path[1], err, "/proc/%d/gid_map", pid) < 0 ||
      bufprintf(c.map[0], sizeof c.map[0], err, "%u %u 1\n", p->uid, host_id) < 0 ||
      bufprintf(c.map[1], sizeof c.map[1], err, "%u %u 1\n", p->gid, host_id) < 0)
    return -1;
    /* As init.c starts the code: CLONE_VM | CLONE_VFORK, no copy of our memory (not under
     * AddressSanitizer, which takes the helper's stack for an error). setns takes a process of its
     * own (no CLONE_THREAD) with a filesystem context of its own (no CLONE_FS). */
#ifndef __SANITIZE_ADDRESS__
  pid_t h =
      clone(call_maps_main, call_maps_stack + sizeof call_maps_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
#else
  pid_t h = fork();
  if (h == 0)
    call_maps_main(&c);
#endif
  if (h < 0)
    return sbx_error_errno(err, "map the call's ids: clone");
  int st;
  while (waitpid(h, &st, 0) < 0)
    if (errno != EINTR)
      return sbx_error_errno(err, "map the call's ids: waitpid");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return sbx_error_set(err, WIFEXITED(st) ? WEXITSTATUS(st) : EIO, "map the call's ids to host id %u: %s",
                         host_id, WIFEXITED(st) ? strerror(WEXITSTATUS(st)) : "its helper was killed");
  return 0;
}

/* clone3 with CLONE_INTO_CGROUP puts the child in its cgroup atomically (Linux 5.7); without it
 * the parent moves the child before letting it run (*ret_in_cgroup = false). */
static pid_t clone_namespaces(int cgroup_fd, int *ret_pidfd, bool *ret_in_cgroup)
{
  struct clone_args ca = {
      .flags = NS_FLAGS | CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0),
      .pidfd = (uint64_t) (uintptr_t) ret_pidfd,
      .exit_signal = SIGCHLD,
      .cgroup = (uint64_t) (cgroup_fd >= 0 ? cgroup_fd : 0),
  };
  *ret_in_cgroup = cgroup_fd >= 0;
  pid_t pid = (pid_t) syscall(SYS_clone3, &ca, sizeof ca);
  if (pid < 0 && cgroup_fd >= 0 && (errno == EINVAL || errno == E2BIG || errno == ENOSYS)) {
    *ret_in_cgroup = false;
    ca.flags &= ~(uint64_t) CLONE_INTO_CGROUP;
    ca.cgroup = 0;
    pid = (pid_t) syscall(SYS_clone3, &ca, sizeof ca);
  }
  if (pid < 0 && errno == ENOSYS)
    pid = (pid_t) syscall(SYS_clone, NS_FLAGS | CLONE_PIDFD | SIGCHLD, NULL, ret_pidfd, NULL, 0);
  return pid;
}

/* A user namespace is owned by its creator's euid, and whatever is counted per user inside it
 * (inotify instances, pending signals, message queue bytes, namespaces: kernel/ucount.c) is also
 * counted for the owner in the parent namespace. Created by root, every sandbox would spend
 * root's budgets; so as root the sandbox's host id creates it (owner != 0). Only this thread's
 * credentials change (raw syscalls; glibc's setresuid would change every thread's), and only
 * for the clone: SECBIT_NO_SETUID_FIXUP keeps our capabilities (CLONE_INTO_CGROUP's write check,
 * hosts that allow user namespaces only to CAP_SYS_ADMIN), and fsuid 0 lets the child open host
 * paths as root, as before. The child starts with a fresh set in the new namespace: all
 * capabilities there, default securebits (user_namespaces(7)). */
pid_t ns_clone_sandbox(int cgroup_fd, unsigned owner, int *ret_pidfd, bool *ret_in_cgroup)
{
  if (owner == 0)
    return clone_namespaces(cgroup_fd, ret_pidfd, ret_in_cgroup);
  struct as_owner o;
  if (become_owner(owner, &o) < 0)
    return -1;
  pid_t pid = clone_namespaces(cgroup_fd, ret_pidfd, ret_in_cgroup);
  if (pid == 0)
    return 0; /* the child: its credentials are its own now */
  back_to_root(&o);
  return pid;
}
