/* SPDX-License-Identifier: Apache-2.0 */
/* THE setup sequence. sandbox_spawn_start() (the parent) and sandbox_child() (the sandbox's pid 1)
 * read top to bottom; every ordering constraint says why. The child's order follows
 * minijail_enter(): namespaces, identity, mounts, pivot_root, host identity, drop caps,
 * no_new_privs, seccomp last.
 *
 * Two processes build a sandbox, with a thread of pid 1's; a third process is the code. They
 * talk over one SOCK_SEQPACKET socketpair, the sync socket (syncsock.h): the parent holds one
 * end and pid 1 the other. Seven message types; time runs down:
 *
 *   parent (sandboxd)                  pid 1 (here, then init.c)         pid 1's net thread (ns.c)
 *   ---------------------------------  --------------------------------  -------------------------
 *   v2: create the cgroup
 *   clone3: new user, mnt, pid, ipc,   waits for GO
 *     uts, cgroup ns (v2: into the
 *     cgroup)
 *   write the uid/gid maps
 *   (v2 before 5.7: move it in)
 *   GO ------------------------------> stdio, fds; start the thread --->  new net ns, loopback up;
 *   v1: create the cgroup;             mounts; the sandbox uid; tmpfs,     ends
 *     CGROUP (its files) ------------>   /dev, /proc (through its own
 *   return (sandbox_spawn_start)         /proc/sys: the user ns budgets),
 *                                        binds; pivot_root, hostname
 *                                      join the thread and its net ns;
 *                                        v1: move self into the cgroup;
 *                                        network proxy: listen on
 *                                        127.0.0.1:3128
 *                                      rlimits, signals, caps,
 *                                        no_new_privs, seccomp
 *                                      clone: the code execs (through
 *                                        the exec helper, exec_shim.h)
 *   <------------------------------- READY (its pid namespace; the
 *                                      proxy's listener; the workspace
 *                                      tmpfs, if the spec asks)
 *   sweep stale cgroups (once); network proxy: fork the egress proxy
 *     on the listener (egress_proxy.c) (sandbox_spawn_finish)
 *   ... runs: signals go to pid 1, which relays them to the code; kill, sample (sandbox_proc.c)
 *   <------------------------------- EXIT (the code's wait status); pid 1 exits, the kernel kills
 *   reap pid 1 (sandbox_wait)          the rest of its pid namespace
 *   exec on v1, when EXIT says pid 1 is alone (no process left, it waits):
 *   LEAVE (the `tasks` files of the --> moves itself out through them
 *     cgroups' parents)
 *   <------------------------------- LEFT; exits (its namespaces' teardown,
 *   remove the cgroups, exit without     ~0.5 ms, beside our own exit)
 *     reaping pid 1
 *
 * Any step of pid 1's that fails, its thread's included, sends ERROR instead of READY and exits
 * 125; sandbox_spawn_finish() returns it to the caller.
 *
 * A forked call (`sandboxd mcp --warm-mode fork`) is built by the fork template's C pid 1
 * (inside/zygote.c) from the template's sandbox, whose rootfs, binds, /dev, hostname and identity
 * it keeps. Both paths take the steps of contain.c, the same code, in this order:
 *
 *   step (contain.c)            cold: pid 1 here (sandbox_child)   fork: the call's pid 1 (zygote.c)
 *   --------------------------  ---------------------------------  ---------------------------------
 *   namespaces                  clone3 by the parent               clone by the template (zy_spawn)
 *   cgroup: contain_join_cgroup v1, after the mounts (MSG_CGROUP)  v1, first (the call's fds)
 *   ids: contain_map_self,      maps by the parent; GO; become     its own maps (as root: the
 *     contain_become              the sandbox uid                    server's, after the ack)
 *   mounts                      private; rootfs (or skeleton),     private
 *                                 read-only; /dev
 *   contain_mounts              tmpfs tmp, workspace (out), run; /proc; budgets; masks
 *                               (fork: also dev/shm, and the template's binds under them again)
 *   (the rest of the root)      binds, pivot_root, hostname,       loopback up, cgroup namespace
 *                                 network namespace (a thread's)
 *   contain_listen              network proxy: 127.0.0.1:3128
 *   contain_rlimits             the spec's limits and the policy's budgets
 *   contain_drop_privileges     capabilities, no_new_privs, not dumpable (fork: only when it is a
 *                               copy of the template), the filters last
 *   then                        READY; init_run: the code through  READY, go; fork the code; exec
 *                                 the exec helper                    callinit (relays, reports)
 *
 * Why this shape:
 * - pid 1 has no identity in its new user namespace until its uid/gid maps are written from
 *   outside: the parent writes them, with its own credentials, then sends GO.
 * - A network namespace is most of what clone costs (~0.3 ms in setup_net): a thread of pid 1
 *   makes it while pid 1 mounts, inside pid 1's user namespace so the sandbox owns it, and pid 1
 *   joins it once the thread has ended (a forked helper cost a copy of the parent, its page
 *   faults and its exit, and could join the user namespace only with CAP_SYS_ADMIN and
 *   CAP_SYS_PTRACE, which a container's root lacks).
 * - cgroup v1 has no CLONE_INTO_CGROUP: the parent creates the cgroup while pid 1 mounts, off
 *   its path, and pid 1 moves itself in (single-threaded, which makes that cheap on v1) before
 *   the code starts.
 * - `exec` need not wait for pid 1's exit, which tears its namespaces down (the mount
 *   namespace's unmounts wait for an RCU grace period): bubblewrap's parent does not either. Only
 *   the cgroups must be gone first, and the last process of the sandbox leaves them itself, as it
 *   joined them (cheap on v1); the files come only then, so no host cgroup file is ever open in a
 *   sandbox that runs code. A process left running keeps the old path: pid 1 exits and is reaped.
 * - READY carries pid 1's pid namespace, which the parent cannot look up (pid 1 is not dumpable)
 *   and needs to sample a sandbox's usage without a cgroup; and with spec.keep_workspace the
 *   workspace tmpfs, opened by pid 1 before the code ran, so that reading /workspace/out after
 *   the run never walks a path the code controls (/proc/PID/root) and outlives the namespace; EXIT tells the
 * code's status apart from pid 1's own (a kill from outside). */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/hostfile.h"
#include "base/util.h"
#include "base/warn.h"
#include "egress/egress_proxy.h"
#include "kernel/caps.h"
#include "kernel/cgroup.h"
#include "kernel/hostid.h"
#include "kernel/keyring.h"
#include "kernel/mount.h"
#include "kernel/ns.h"
#include "kernel/seccomp.h"
#include "sandbox/contain.h"
#include "sandbox/exec_shim.h"
#include "sandbox/init.h"
#include "sandbox/syncsock.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND 1
#endif

/* ------------------------------------------------------------------ the child: pid 1 inside */

/* bench/parts only: a build of its own (make bench-parts, build-parts/, never installed) prices
 * a part by taking it away, SBX_BENCH_WITHOUT=cgroup,seccomp. Any other build has no such switch. */
#ifdef SBX_BENCH_PARTS
static bool bench_without(const char *part)
{
  const char *v = getenv("SBX_BENCH_WITHOUT");
  return v && strstr(v, part);
}
#else
static bool bench_without(const char *part)
{
  (void) part;
  return false;
}
#endif

/* How the child comes to be in its cgroup, which decides its own part in it. */
enum join_cgroup {
  JOIN_NONE,      /* no cgroup (policy `cgroup fallback-rlimit`): the limits are rlimits */
  JOIN_BY_CLONE,  /* v2: clone3(CLONE_INTO_CGROUP) puts it there */
  JOIN_BY_PARENT, /* v2 without CLONE_INTO_CGROUP (Linux < 5.7): the parent moves it in before GO */
  JOIN_BY_SELF,   /* v1: the parent creates the cgroup meanwhile; MSG_CGROUP brings the files to
                   * move itself in through */
};

/* A bind source as the parent holds it (sbx_bind.fd). */
struct bind_id {
  dev_t dev;
  ino_t ino;
};

/* Everything the child needs, prepared by the parent so the child allocates nothing it must
 * free and can report any failure as one message. */
struct child_args {
  const struct bind_id *bind_ids; /* spec->binds[i].fd's */
  enum join_cgroup join;
  const struct sbx_spec *spec;
  const struct sbx_bpf *bpf;
  char **envp;
  int sync_fd;
  bool host_root;
  bool own_keyring; /* the policy lets the code call keyctl: leave it no inherited keyring */
};

int sandbox_budgets(const struct sbx_budgets *b, struct contain_budget out[CONTAIN_N_BUDGETS])
{
  const struct contain_budget all[CONTAIN_N_BUDGETS] = {
      {"inotify_instances", b->inotify_instances}, {"inotify_watches", b->inotify_watches},
      {"fanotify_groups", b->fanotify_groups},     {"fanotify_marks", b->fanotify_marks},
      {"user_namespaces", b->namespaces},          {"mnt_namespaces", b->namespaces},
      {"pid_namespaces", b->namespaces},           {"net_namespaces", b->namespaces},
      {"ipc_namespaces", b->namespaces},           {"uts_namespaces", b->namespaces},
      {"cgroup_namespaces", b->namespaces},        {"time_namespaces", b->namespaces},
  };
  memcpy(out, all, sizeof all);
  return CONTAIN_N_BUDGETS;
}

/* A step of contain.c that failed, said as every other setup error is. */
static _Noreturn void contain_fail(int sync_fd, const struct contain_err *ce)
{
  sbx_error_t err = {0};
  if (ce->arg)
    sbx_error_set(&err, ce->errnum, "%s `%s`", ce->what, ce->arg);
  else
    sbx_error_set(&err, ce->errnum, "%s", ce->what);
  sync_fail(sync_fd, &err);
}

/* On cgroup v1, the files to move ourselves into our cgroup through: the parent creates it while
 * we set up the mounts, and sends them after GO. */
static int join_cgroup(int sync_fd, sbx_error_t *err)
{
  struct sync_msg m;
  int fds[MSG_MAX_FDS];
  int n = sync_recv_fds(sync_fd, &m, fds);
  if (n < 0)
    return sbx_error_set(err, 0, "sandbox setup: no answer from sandboxd");
  struct contain_err ce;
  int r = m.type != MSG_CGROUP ? sbx_error_set(err, 0, "sandbox setup: unexpected message %d", m.type)
          : contain_join_cgroup(fds, n, &ce) < 0 ? sbx_error_set(err, ce.errnum, "%s", ce.what)
                                                 : 0;
  /* As for JOIN_BY_PARENT in sandbox_child: a cgroup namespace rooted at our own cgroup. */
  if (r == 0 && unshare(CLONE_NEWCGROUP) < 0)
    r = sbx_error_errno(err, "unshare(CLONE_NEWCGROUP)");
  for (int i = 0; i < n; i++)
    close(fds[i]);
  return r;
}

/* Stdio to 0, 1, 2, the sync socket to 3 (*sync_fd says so after), the bridge to 4 (returned,
 * or -1), and nothing else. */
static int arrange_fds(const struct sbx_spec *spec, int *sync_fd)
{
  sbx_error_t err = {0};
  /* Stdio first, to fixed numbers. */
  int fds[3] = {spec->stdin_fd, spec->stdout_fd, spec->stderr_fd};
  int tmp[3];
  for (int i = 0; i < 3; i++)
    if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
      sync_fail(*sync_fd, (sbx_error_errno(&err, "dup stdio"), &err));
  for (int i = 0; i < 3; i++)
    if (dup2(tmp[i], i) < 0)
      sync_fail(*sync_fd, (sbx_error_errno(&err, "dup stdio"), &err));
  for (int i = 0; i < 3; i++)
    close(tmp[i]);

  /* Then keep only the sync socket (at 3) and the bridge (at 4). pid 1 never execs, so
   * O_CLOEXEC does not protect it: without this it would hold every fd sandboxd had open, such
   * as other sandboxes' pipes in `sandboxd mcp`, and keep their readers from seeing EOF. */
  int hi_sync = fcntl(*sync_fd, F_DUPFD_CLOEXEC, 10);
  int hi_bridge = spec->bridge_fd >= 0 ? fcntl(spec->bridge_fd, F_DUPFD_CLOEXEC, 10) : -1;
  if (hi_sync < 0 || (spec->bridge_fd >= 0 && hi_bridge < 0) || dup3(hi_sync, 3, O_CLOEXEC) < 0 ||
      (hi_bridge >= 0 && dup3(hi_bridge, 4, O_CLOEXEC) < 0))
    sync_fail(*sync_fd, (sbx_error_errno(&err, "arrange fds"), &err));
  *sync_fd = 3;
  int bridge_fd = hi_bridge >= 0 ? 4 : -1;
  if (syscall(SYS_close_range, bridge_fd >= 0 ? 5 : 4, ~0U, 0) < 0)
    sync_fail(*sync_fd, (sbx_error_errno(&err, "close inherited fds"), &err));
  return bridge_fd;
}

/* The bind destinations whose first component the rootfs lacks (into extra[], without the
 * leading "/"), and whether each is a directory (its source is): the skeleton root holds them. */
static size_t missing_tops(int rootfs_fd, const struct sbx_spec *spec, const int *bind_fds,
                           const char **extra, bool *dir)
{
  size_t n = 0;
  for (size_t i = 0; i < spec->n_binds; i++) {
    const char *d = spec->binds[i].dst + 1; /* absolute and normalised (check_spec) */
    char name[NAME_MAX + 1];
    size_t len = strcspn(d, "/");
    struct stat st;
    if (len > NAME_MAX || fstat(bind_fds[i], &st) < 0)
      continue; /* mount_bind_fd says what is wrong with it */
    memcpy(name, d, len);
    name[len] = '\0';
    if (faccessat(rootfs_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
      continue;
    extra[n] = d;
    dir[n++] = S_ISDIR(st.st_mode);
  }
  return n;
}

/* A bind source, opened again here: a bind must come from a mount of our own mount namespace,
 * which the parent's fd is not. Its canonical path (binds.c) is walked following no symlink, and
 * bound only if it is still the inode the parent holds: what sandboxed code did to a tree it could
 * write (a source swapped for a link to elsewhere) cannot change what a later sandbox binds. */
static int open_bind_source(const struct sbx_bind *b, const struct bind_id *id, int *ret_fd, sbx_error_t *err)
{
  sbx_error_t why = {0};
  _cleanup_close_ int fd = -1;
  struct stat st;
  if (hostfile_open_nofollow(b->src, &fd, &why) == 0 && fstat(fd, &st) == 0 && st.st_dev == id->dev &&
      st.st_ino == id->ino) {
    *ret_fd = TAKE_FD(fd);
    return 0;
  }
  return sbx_error_set(err, 0,
                       "bind `%s`: its source `%s` changed since sandboxd opened it (%s); not binding it",
                       b->dst, b->src, fd < 0 ? why.msg : "another file is at its path now");
}

/* pid 1's state through its setup (sandbox_child's phases). */
struct child {
  const struct child_args *a;
  const struct sbx_spec *spec;
  const struct sbx_policy *p;
  int sync_fd, bridge_fd;
  struct ns_net net;
  int bind_fds[SBX_MAX_BINDS];
  int sys_fd, workspace_fd, proxy_fd, shim_fd;
  sigset_t mask;
};

#define FAIL_ERRNO(c, ...) sync_fail((c)->sync_fd, (sbx_error_errno(&err, __VA_ARGS__), &err))

/* Die with sandboxd; wait for GO (the parent writes our uid/gid maps: until then we have no
 * identity to act with); the keyring and cgroup namespace; fds; the network namespace's thread. */
static void child_start(struct child *c)
{
  const struct child_args *a = c->a;
  sbx_error_t err = {0};
  struct sync_msg m;
  /* Set before waiting for GO, so a parent that dies before sending it is noticed (the read
   * below then returns 0). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
    FAIL_ERRNO(c, "prctl(PR_SET_PDEATHSIG)");
  if (sync_recv(c->sync_fd, &m, 0) < 0 || m.type != MSG_GO)
    _exit(SBX_EXIT_SETUP);
  init_hide_host_argv();
  /* A policy that allows keyctl must not hand the code our session keyring (a login's links the
   * user's keyring, where sandboxd's secret is). The shipped policies deny keyctl: no cost there. */
  if (a->own_keyring && keyring_join_anonymous(&err) < 0)
    sync_fail(c->sync_fd, &err);
  /* The cgroup namespace from clone is rooted where we were then (sandboxd's cgroup); root a new
   * one at our own, so the code sees itself at "/". (v1: after moving ourselves, child_join.) */
  if (a->join == JOIN_BY_PARENT && unshare(CLONE_NEWCGROUP) < 0)
    FAIL_ERRNO(c, "unshare(CLONE_NEWCGROUP)");
  /* Before any other fd is opened. */
  c->bridge_fd = arrange_fds(c->spec, &c->sync_fd);
  /* The network namespace, made beside the mounts below by a thread: before anything changes
   * /proc, and after the keyring and the cgroup namespace, which it shares. */
  if (ns_net_start(&c->net, &err) < 0)
    sync_fail(c->sync_fd, &err);
}

/* Into the root-to-be (the rootfs, or a skeleton for binds at new top-level directories) as the
 * sandbox uid; read-only. The bind sources are opened on the way (c->bind_fds). */
static void child_enter_root(struct child *c)
{
  const struct sbx_spec *spec = c->spec;
  const struct sbx_policy *p = c->p;
  sbx_error_t err = {0};
  struct contain_err ce;
  /* Nothing we mount may propagate back to the host. */
  if (contain_private(&ce) < 0)
    contain_fail(c->sync_fd, &ce);
  /* Open host paths while we still have the caller's host identity: after setresuid below, the
   * root case is the unprivileged host_uid and could not reach e.g. /root. O_PATH fds opened here
   * resolve in our new mount namespace, which is what bind mounts require. */
  _cleanup_close_ int rootfs_fd = open(spec->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfs_fd < 0)
    FAIL_ERRNO(c, "open rootfs `%s`", spec->rootfs);
  if (spec->n_binds > SBX_MAX_BINDS)
    sync_fail(c->sync_fd, (sbx_error_set(&err, E2BIG, "too many binds"), &err));
  for (size_t i = 0; i < spec->n_binds; i++)
    if (open_bind_source(&spec->binds[i], &c->a->bind_ids[i], &c->bind_fds[i], &err) < 0)
      sync_fail(c->sync_fd, &err);
  /* A bind at a new top-level directory (/data) needs a skeleton root to make it in; every other
   * sandbox enters the rootfs as it is, with one bind. */
  const char *extra[SBX_MAX_BINDS];
  bool extra_dir[SBX_MAX_BINDS];
  size_t n_extra = missing_tops(rootfs_fd, spec, c->bind_fds, extra, extra_dir);
  int skeleton_fd = -1;
  if ((n_extra ? mount_enter_skeleton(rootfs_fd, spec->rootfs, p->uid, p->gid, &skeleton_fd, &err)
               : mount_enter_rootfs(rootfs_fd, spec->rootfs, &err)) < 0)
    sync_fail(c->sync_fd, &err);

  /* Become the sandbox uid now, keeping our capabilities in the new user namespace: files the
   * setup creates in the tmpfs mounts must be owned by a mapped uid (else EOVERFLOW). From host
   * uid 0 (unmapped here) setresuid does not clear capabilities (capabilities(7)). This thread's
   * credentials only (contain_become): glibc's would stop the network namespace thread to change
   * its own, and wait for it to leave the kernel (setup_net, ~0.3 ms). As root, root's host
   * supplementary groups go too. */
  if (contain_become(p->uid, p->gid, c->a->host_root, &ce) < 0)
    contain_fail(c->sync_fd, &ce);
  /* Changing credentials clears the parent-death signal (prctl(2)): set it again, then check
   * the parent did not die in between (its end of the sync socket would be closed). */
  char peek;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
    FAIL_ERRNO(c, "prctl(PR_SET_PDEATHSIG)");
  if (recv(c->sync_fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
    _exit(SBX_EXIT_SETUP);

  if (skeleton_fd >= 0 &&
      mount_fill_skeleton(skeleton_fd, extra, extra_dir, n_extra, p->readonly_root, &err) < 0)
    sync_fail(c->sync_fd, &err);
  /* Read-only now, before the writable mounts go on top: every mount point they need exists
   * in the rootfs (or the skeleton), and binds are only created under the tmpfs mounts. */
  if (p->readonly_root && mount_root_readonly(&err) < 0)
    sync_fail(c->sync_fd, &err);
}

/* /dev (its nodes, the host's, bound), then the writable places and /proc with its budgets and
 * masks (contain.c), then binds into them; pivot_root; the hostname. */
static void child_mounts(struct child *c)
{
  const struct sbx_spec *spec = c->spec;
  const struct sbx_policy *p = c->p;
  sbx_error_t err = {0};
  struct contain_err ce;
  if (mount_dev(spec->limits.shm_bytes, &err) < 0)
    sync_fail(c->sync_fd, &err);
  char tmp_opts[64], ws_opts[64];
  if (bufprintf(tmp_opts, sizeof tmp_opts, &err, "size=%llu,mode=1777",
                (unsigned long long) spec->limits.tmp_bytes) < 0 ||
      bufprintf(ws_opts, sizeof ws_opts, &err, "size=%llu,mode=755",
                (unsigned long long) spec->limits.workspace_bytes) < 0)
    sync_fail(c->sync_fd, &err);
  const struct contain_tmpfs fresh[] = {
      {.path = "tmp", .flags = MS_NOSUID | MS_NODEV, .data = tmp_opts},
      {.path = "workspace", .flags = MS_NOSUID | MS_NODEV, .data = ws_opts},
      /* /run holds sandboxd's own files (the Python helpers at /run/sandboxd/python). */
      {.path = "run", .flags = MS_NOSUID | MS_NODEV | MS_NOEXEC, .data = "size=1048576,mode=755"},
  };
  struct contain_budget budget[CONTAIN_N_BUDGETS];
  const struct contain_fs fs = {
      .tmpfs = fresh,
      .n_tmpfs = sizeof fresh / sizeof *fresh,
      .budgets = budget,
      .n_budgets = sandbox_budgets(&p->budgets, budget),
      .mask_proc = p->mask_proc,
      .masked = (const char *const *) p->proc_masked,
      .n_masked = (int) p->n_proc_masked,
      .readonly = (const char *const *) p->proc_readonly,
      .n_readonly = (int) p->n_proc_readonly,
  };
  /* The user namespace's budgets are written while we hold CAP_SYS_RESOURCE in it: the code
   * starts long after, so never without them. */
  if (contain_mounts(&fs, &c->sys_fd, &ce) < 0)
    contain_fail(c->sync_fd, &ce);
  /* The workspace tmpfs goes to the parent with READY when it asks (it collects /workspace/out
   * after the run): opened here, before any code could put anything in the way. */
  c->workspace_fd =
      spec->keep_workspace ? open("workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (spec->keep_workspace && c->workspace_fd < 0)
    FAIL_ERRNO(c, "open `/workspace`");
  /* Bind destinations resolve inside the new root (the current directory), not on the host. */
  _cleanup_close_ int newroot_fd = spec->n_binds ? open(".", O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  if (spec->n_binds && newroot_fd < 0)
    FAIL_ERRNO(c, "open the new root");
  for (size_t i = 0; i < spec->n_binds; i++) {
    if (mount_bind_fd(newroot_fd, c->bind_fds[i], spec->binds[i].dst, spec->binds[i].rw, &err) < 0)
      sync_fail(c->sync_fd, &err);
    close(c->bind_fds[i]);
  }
  if (mount_pivot(&err) < 0)
    sync_fail(c->sync_fd, &err);
  if (sethostname(p->hostname, strlen(p->hostname)) < 0)
    FAIL_ERRNO(c, "sethostname");
}

/* Our network namespace, made by our thread, and on cgroup v1 our cgroup, made by the parent,
 * both while we set up the mounts. The thread has ended before we move ourselves (as a single
 * thread, which makes it cheap on v1; see cgroup_attach_fds) and before anything the limits are
 * for: the code has not started. */
static void child_join(struct child *c)
{
  sbx_error_t err = {0};
  if (ns_net_join(&c->net, c->sys_fd, &err) < 0 ||
      (c->a->join == JOIN_BY_SELF && join_cgroup(c->sync_fd, &err) < 0))
    sync_fail(c->sync_fd, &err);
  close(c->sys_fd);
}

/* The proxy's listener and the exec helper; signals; then the limits, and the privileges dropped,
 * the filter last (contain.c). */
static void child_lockdown(struct child *c)
{
  const struct sbx_spec *spec = c->spec;
  const struct sbx_policy *p = c->p;
  const struct child_args *a = c->a;
  sbx_error_t err = {0};
  struct contain_err ce;
  /* network proxy: the proxy's listener, in our network namespace (its loopback is up), before
   * any code could bind the port; it goes to the parent with READY (egress_proxy.h). */
  c->proxy_fd = p->network == SBX_NET_PROXY ? contain_listen(EGRESS_PROXY_PORT, &ce) : -1;
  if (p->network == SBX_NET_PROXY && c->proxy_fd < 0)
    contain_fail(c->sync_fd, &ce);
  /* The code's first exe, which execs it: the process whose execve resolves the code's path, #!
   * line and ELF interpreter must not have sandboxd's binary as its exe (a hostile image's link
   * to /proc/self/exe; exec_shim.h). Before the rlimits and the filter, which may refuse
   * memfds. */
  c->shim_fd = exec_shim_fd(&err);
  if (c->shim_fd < 0 && err.errnum != ENOSYS)
    sync_fail(c->sync_fd, &err);
  /* pid 1's signals (init.c): from here one that sandboxd forwards stays pending for the code
   * instead of being dropped (pid 1 gets only signals it handles). */
  init_take_signals(&c->mask);
  /* Without a cgroup, a CPU-seconds backstop one second past the timeout, so that a busy loop
   * reaching the timeout ends by the wall clock (status timeout, 124), not by the kernel's
   * SIGKILL racing it. */
  const struct contain_limits lim = {
      .nofile = spec->limits.nofile,
      .fsize = spec->limits.fsize_bytes,
      .sigpending = p->budgets.sigpending,
      .msgqueue = p->budgets.msgqueue_bytes,
      .memlock = p->budgets.memlock_bytes,
      .degraded = a->join == JOIN_NONE,
      .as = spec->limits.memory_bytes,
      .nproc = spec->limits.pids,
      .cpu_seconds = (spec->limits.timeout_ms + 999) / 1000 + 1,
#ifdef HAVE_VALGRIND
      /* valgrind keeps RLIMIT_NOFILE's hard limit for its own fds (a developer's memcheck run,
       * never the code's choice). */
      .nofile_soft_only = RUNNING_ON_VALGRIND,
#endif
  };
  const bool filter = !bench_without("seccomp");
  const struct contain_privs privs = {
      .drop_caps = p->drop_capabilities,
      .no_new_privs = p->no_new_privs,
      .undumpable = true,
      .main_prog = filter ? a->bpf->main_prog : NULL,
      .main_len = a->bpf->main_len,
      .except_prog = filter ? a->bpf->except_prog : NULL,
      .except_len = a->bpf->except_len,
  };
  if (contain_rlimits(&lim, &ce) < 0 || contain_drop_privileges(&privs, &ce) < 0)
    contain_fail(c->sync_fd, &ce);
}

/* pid 1: the phases in order (the timeline at the top says why this order), then init. */
static _Noreturn void sandbox_child(const struct child_args *a)
{
  struct child c = {.a = a, .spec = a->spec, .p = a->spec->policy, .sync_fd = a->sync_fd, .sys_fd = -1};
  child_start(&c);
  child_enter_root(&c);
  child_mounts(&c);
  child_join(&c);
  child_lockdown(&c);
  /* Become init proper: start the code, then relay signals and reap until it ends. */
  init_run(c.spec, a->envp, c.sync_fd, c.bridge_fd, c.shim_fd, c.workspace_fd, c.proxy_fd, &c.mask,
           !c.spec->leave_at_exit    ? INIT_LEAVE_NEVER
           : a->join == JOIN_BY_SELF ? INIT_LEAVE_CGROUP
           : a->join == JOIN_NONE    ? INIT_LEAVE_NOW
                                     : INIT_LEAVE_NEVER);
}

/* ------------------------------------------------------------------ the parent */

/* The compiled filter for the last policy and variant seen; policies do not change within a
 * process. */
static struct sbx_bpf bpf_cache;
static char bpf_cache_sha[65];
static unsigned bpf_cache_variant;

static int get_bpf(const struct sbx_policy *p, unsigned variant, const struct sbx_bpf **ret, sbx_error_t *err)
{
  if (!bpf_cache.main_prog || strcmp(bpf_cache_sha, p->sha256) != 0 || bpf_cache_variant != variant) {
    seccomp_bpf_free(&bpf_cache);
    if (seccomp_prepare(p, variant, &bpf_cache, err) < 0)
      return -1;
    memcpy(bpf_cache_sha, p->sha256, sizeof bpf_cache_sha);
    bpf_cache_variant = variant;
  }
  *ret = &bpf_cache;
  return 0;
}

/* A cgroup for the sandbox to be cloned into (JOIN_BY_CLONE); or JOIN_BY_SELF: v1, where the
 * sandbox cannot be cloned into its cgroup, so creating it waits until the child is busy setting
 * up (sandbox_spawn_start); or JOIN_NONE, when the policy allows running on rlimits. */
static int make_cgroup(const struct sbx_spec *spec, struct sbx_cgroup **ret, enum join_cgroup *ret_join,
                       sbx_error_t *err)
{
  enum cgroup_mode mode;
  sbx_error_t why = {0};
  *ret = NULL;
  *ret_join = JOIN_NONE;
  if (bench_without("cgroup"))
    return 0;
  if (cgroup_probe(&mode, &why) == 0) {
    if (mode == CGROUP_V1) {
      *ret_join = JOIN_BY_SELF;
      return 0;
    }
    *ret_join = JOIN_BY_CLONE;
    return cgroup_create(&spec->limits, ret, err);
  }
  if (spec->policy->cgroup == SBX_CGROUP_FALLBACK_RLIMIT) {
    /* The report and audit record say `degraded`; whether a person is told is the caller's. */
    sbx_warn(SBX_WARN_DEGRADED, "no cgroup for limits (%s); running with rlimits only, as policy `%s` allows",
             why.msg, spec->policy->name);
    return 0;
  }
  *err = why; /* its message already ends in the errno text */
  sbx_error_prefix(err, "no cgroup to enforce limits");
  return sbx_error_hint(err,
                        "run under `systemd-run --user --scope -p Delegate=yes sandboxd ...` or use a policy "
                        "with `cgroup fallback-rlimit` (see sandboxd doctor)");
}

/* What the child cannot check for itself before it acts on it. */
static int check_spec(const struct sbx_spec *spec, sbx_error_t *err)
{
  if (!spec->argv || !spec->argv[0] || spec->argv[0][0] != '/')
    return sbx_error_set(err, EINVAL, "sandbox: the command must be an absolute path");
  for (size_t i = 0; i < spec->n_binds; i++) {
    const char *d = spec->binds[i].dst;
    size_t dl = strlen(d);
    if (d[0] != '/' || strstr(d, "/..") || strstr(d, "/./") || (dl >= 2 && strcmp(d + dl - 2, "/.") == 0) ||
        strcmp(d, "/") == 0)
      return sbx_error_set(err, EINVAL, "bind destination `%s`: must be an absolute, normalised path", d);
  }
  if (spec->n_binds > SBX_MAX_BINDS)
    return sbx_error_set(err, E2BIG, "sandbox: too many binds");
  return 0;
}

/* What each bind source is (sbx_bind.fd), for the child to compare with what it opens. */
static int bind_identities(const struct sbx_spec *spec, struct bind_id *ids, sbx_error_t *err)
{
  for (size_t i = 0; i < spec->n_binds; i++) {
    struct stat st;
    if (spec->binds[i].fd < 0 || fstat(spec->binds[i].fd, &st) < 0)
      return sbx_error_set(err, EBADF, "bind source `%s`: not opened", spec->binds[i].src);
    ids[i] = (struct bind_id){.dev = st.st_dev, .ino = st.st_ino};
  }
  return 0;
}

/* Why the sandbox's clone failed (errno e). */
static int clone_error(int e, unsigned host_id, const struct sbx_policy *p, sbx_error_t *err)
{
  /* setresuid's EINVAL: sandboxd is "root" in a user namespace (a container) whose map lacks the id. */
  if (e == EINVAL && host_id) {
    sbx_error_set(err, e, "host id %u of policy `%s` host_id_range is not mapped where sandboxd runs",
                  host_id, p->name);
    return sbx_error_hint(err, "choose a host_id_range inside /proc/self/uid_map and gid_map");
  }
  if (e == EPERM || e == ENOSPC || e == EUSERS)
    sbx_error_set(err, e, "cannot create user namespace");
  else
    sbx_error_set(err, e, "cannot create sandbox namespaces");
  return sbx_error_hint(err, "see sandboxd doctor");
}

/* The parent's part while pid 1 waits for GO and then sets up: its maps, (v2 before Linux 5.7) its
 * cgroup, GO, and (v1) its cgroup made meanwhile and handed over. */
static int parent_handshake(const struct sbx_spec *spec, pid_t pid, unsigned host_id, enum join_cgroup join,
                            int parent_fd, struct sbx_cgroup **cg, sbx_error_t *err)
{
  /* Maps must be written before the child calls setresuid/setgroups. */
  if (ns_write_id_maps(pid, spec->policy, host_id, spec->map_host_range, err) < 0) {
    sbx_error_prefix(err, "write uid/gid maps");
    return sbx_error_hint(err, "see sandboxd doctor");
  }
  /* Before GO, while the child waits: with our credentials, which a kernel this old checks. */
  if (join == JOIN_BY_PARENT && cgroup_attach_pid(*cg, pid, err) < 0)
    return -1;
  sync_send(parent_fd, &(struct sync_msg){.type = MSG_GO});
  if (join != JOIN_BY_SELF)
    return 0;
  /* While the child sets up its mounts: create its cgroup (v1), and hand it the files to move
   * itself in through. */
  int fds[CGROUP_MAX_ATTACH_FDS];
  int n = cgroup_create(&spec->limits, cg, err) < 0 ? -1 : cgroup_attach_fds(*cg, fds, err);
  if (n < 0)
    return -1;
  sync_send_fds(parent_fd, &(struct sync_msg){.type = MSG_CGROUP}, fds, n);
  while (n > 0)
    close(fds[--n]);
  return 0;
}

int sandbox_spawn_start(const struct sbx_spec *spec, struct sbx_sandbox **ret, sbx_error_t *err)
{
  const struct sbx_policy *p = spec->policy;
  const struct sbx_bpf *bpf;
  uint64_t start = now_ns();

  struct bind_id bind_ids[SBX_MAX_BINDS];
  if (check_spec(spec, err) < 0 || bind_identities(spec, bind_ids, err) < 0)
    return -1;
  _cleanup_free_ char **envp = sandbox_build_env(spec);
  if (!envp)
    return sbx_error_set(err, ENOMEM, "sandbox: environment");

  /* As root: the sandbox's own host uid/gid, held until sandbox_free() has torn it all down. */
  bool host_root = geteuid() == 0;
  unsigned host_id = 0;
  _cleanup_close_ int id_lock = -1;
  if (host_root && hostid_acquire(p->host_id_start, p->host_id_count, &host_id, &id_lock, err) < 0)
    return -1;

  struct sbx_cgroup *cg = NULL;
  enum join_cgroup join;
  if (make_cgroup(spec, &cg, &join, err) < 0)
    return -1;
  /* The filter's variant follows from the cgroup: without one, RLIMIT_AS leaves out memory that
   * files hold (seccomp.h). */
  if (get_bpf(p, join == JOIN_NONE ? SBX_SECCOMP_RLIMIT : 0, &bpf, err) < 0) {
    cgroup_destroy(cg);
    return -1;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    cgroup_destroy(cg);
    return sbx_error_errno(err, "sandbox: socketpair");
  }
  _cleanup_close_ int parent_fd = sv[0];
  _cleanup_close_ int child_fd = sv[1];

  struct child_args a = {
      .bind_ids = bind_ids,
      .spec = spec,
      .bpf = bpf,
      .envp = envp,
      .sync_fd = child_fd,
      .host_root = host_root,
      .own_keyring = !seccomp_policy_denies_keyrings(p),
  };
  int pidfd = -1;
  bool in_cgroup;
  pid_t pid = ns_clone_sandbox(cgroup_clone_fd(cg), host_id, &pidfd, &in_cgroup);
  /* After the clone, in the parent and in the child alike: in_cgroup says whether clone3 took
   * CLONE_INTO_CGROUP. */
  a.join = join == JOIN_BY_CLONE && !in_cgroup ? JOIN_BY_PARENT : join;
  if (pid < 0) {
    int e = errno;
    cgroup_destroy(cg);
    return clone_error(e, host_id, p, err);
  }
  if (pid == 0) {
    close(parent_fd);
    sandbox_child(&a);
  }
  close(TAKE_FD(child_fd));
  /* The child has its copy (pid 1 frees it); ours goes now. */
  free(TAKE_PTR(envp));

  if (parent_handshake(spec, pid, host_id, a.join, parent_fd, &cg, err) < 0)
    goto fail;
  struct sbx_sandbox *s = calloc(1, sizeof *s);
  if (!s) {
    sbx_error_set(err, ENOMEM, "sandbox");
    goto fail;
  }
  *s = (struct sbx_sandbox){.pid = pid,
                            .pidfd = pidfd,
                            .sync_fd = TAKE_FD(parent_fd),
                            .start_ns = start,
                            .code_status = -1,
                            .cgroup = cg,
                            .memory_limit = spec->limits.memory_bytes,
                            .workspace_fd = -1,
                            .host_id_lock = TAKE_FD(id_lock),
                            .host_id = host_id,
                            .policy = p,
                            .leave = spec->leave_at_exit && (a.join == JOIN_BY_SELF || a.join == JOIN_NONE)};
  s->deadline_ns = start + spec->limits.timeout_ms * 1000000ULL;
  *ret = s;
  return 0;

fail:
  /* Not waited for yet, so its pid still names it. */
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  close(pidfd);
  cgroup_destroy(cg);
  return -1;
}

int sandbox_spawn_fd(const struct sbx_sandbox *s)
{
  return s->sync_fd;
}

int sandbox_spawn_finish(struct sbx_sandbox *s, sbx_error_t *err)
{
  struct sync_msg m;
  int fds[MSG_MAX_FDS];
  int nfds = sync_recv_fds(s->sync_fd, &m, fds);
  if (nfds < 0)
    return sbx_error_set(err, 0, "sandbox setup failed: the sandbox exited before it was ready");
  /* Only READY carries any: the proxy's listener (network proxy), then the workspace (if the
   * spec asked for it). */
  int listen_fd = -1, proxy = s->policy->network == SBX_NET_PROXY;
  for (int i = 0; i < nfds; i++)
    if (i == 0 && proxy && m.type == MSG_READY && listen_fd < 0)
      listen_fd = fds[i];
    else if (i == proxy && m.type == MSG_READY && s->workspace_fd < 0)
      s->workspace_fd = fds[i];
    else
      close(fds[i]);
  s->pidns_ino = m.pidns_ino;
  s->pidns_dev = m.pidns_dev;
  if (m.type == MSG_ERROR) {
    *err = m.err;
    err->msg[sizeof err->msg - 1] = '\0';
    /* pid 1 says 127/126 when the program was not there or could not run; all else is setup. */
    if (err->status != SBX_EXIT_NOT_FOUND && err->status != SBX_EXIT_CANNOT_EXEC)
      err->status = SBX_EXIT_SETUP;
    return -1;
  }
  if (m.type != MSG_READY)
    return sbx_error_set(err, 0, "sandbox setup failed: unexpected message %d", m.type);
  if (proxy && listen_fd < 0)
    return sbx_error_set(err, 0, "sandbox setup failed: no egress proxy listener");
  /* Cgroups left by a SIGKILLed sandboxd: once per process, while the code runs (on the other
   * CPU from it), not while pid 1, its thread and this process set the sandbox up. */
  static bool swept;
  if (s->cgroup && !swept) {
    swept = true;
    cgroup_cleanup_stale();
  }
  /* The proxy serves the listener from here (the host's network namespace) until pid 1 exits;
   * as root, as the sandbox's own host id. */
  if (proxy &&
      egress_proxy_start(s->policy, listen_fd, s->pidfd, s->host_id, &s->egress, &s->egress_pid, err) < 0)
    return -1;
  /* After the proxy's fork: no process but this one ever holds them. */
  sandbox_open_leave_fds(s);
  return 0;
}

int sandbox_spawn(const struct sbx_spec *spec, struct sbx_sandbox **ret, sbx_error_t *err)
{
  struct sbx_sandbox *s;
  if (sandbox_spawn_start(spec, &s, err) < 0)
    return -1;
  if (sandbox_spawn_finish(s, err) < 0) {
    sandbox_free(s);
    return -1;
  }
  *ret = s;
  return 0;
}
