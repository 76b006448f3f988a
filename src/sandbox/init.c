/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's pid 1 once setup is done: it starts the code as its child, tells sandboxd the code
 * runs (MSG_READY), relays sandboxd's signals to it, reaps orphans, and reports the code's status
 * (MSG_EXIT) before it exits, which ends everything else in the pid namespace; for `exec`, when
 * nothing else is left, it says so (and first moves out of the v1 cgroups), so that sandboxd need
 * not wait for its exit. */
#include "sandbox/init.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "kernel/cgroup.h"
#include "sandbox/contain.h"
#include "sandbox/sandbox_internal.h"
#include "sandbox/syncsock.h"

static char *argv_area;
static size_t argv_area_len;

void sandbox_set_argv_area(char *start, size_t len)
{
  argv_area = start;
  argv_area_len = len;
}

/* /proc/1/cmdline would show the host command line (script paths, options); replace it. */
void init_hide_host_argv(void)
{
  static const char name[] = "sandboxd-init";
  if (!argv_area || argv_area_len < sizeof name)
    return;
  memset(argv_area, 0, argv_area_len);
  memcpy(argv_area, name, sizeof name);
}

/* Move fd to exactly `target`, closing what was there. */
static int move_fd(int fd, int target)
{
  if (fd == target)
    return fcntl(fd, F_SETFD, 0);
  return dup2(fd, target) < 0 ? -1 : 0;
}

/* Close every fd from 3 up except a, b and c (any may be -1). */
int close_fds_except(int a, int b, int c)
{
  int keep[3] = {a, b, c};
  for (int i = 0; i < 2; i++) /* sorted */
    for (int j = 0; j < 2 - i; j++)
      if (keep[j] > keep[j + 1]) {
        int t = keep[j];
        keep[j] = keep[j + 1], keep[j + 1] = t;
      }
  unsigned from = 3;
  for (int i = 0; i < 3; i++) {
    if (keep[i] < (int) from)
      continue;
    if (keep[i] > (int) from && syscall(SYS_close_range, from, (unsigned) keep[i] - 1, 0) < 0)
      return -1;
    from = (unsigned) keep[i] + 1;
  }
  return (int) syscall(SYS_close_range, from, ~0U, 0);
}

/* The code's process: a child of pid 1 that execs the interpreter. Never returns. It may share
 * pid 1's memory until the execve (spawn_code), so it only makes system calls and writes nothing
 * but its own stack: no allocation, no stdio.
 *
 * It is a fork of sandboxd: /proc/self/exe is sandboxd's binary until it execs. So it execs the
 * exec helper (shim_fd, exec_shim.h), whose execve resolves the code's path, #! line and ELF
 * interpreter: a link to /proc/self/exe leads there, never to sandboxd. The helper gets the
 * exec-error pipe at SBX_EXEC_ERR_FD, not close-on-exec, and marks it so itself. */
/* What failed on the code's way to its program, sent on the exec-error pipe as two ints, this and
 * the errno (the helper sends {EXEC_FAILED_PROGRAM, errno} itself: inside/execshim.c). */
enum { EXEC_FAILED_WORKDIR = 1, EXEC_FAILED_HELPER = 2, EXEC_FAILED_PROGRAM = 3 };

static _Noreturn void exec_failed(int pipe_fd, int what)
{
  int m[2] = {what, errno};
  (void) !write(pipe_fd, m, sizeof m);
  _exit(127);
}

static _Noreturn void exec_code(const struct sbx_spec *spec, char **envp, int bridge_fd, int shim_fd,
                                int exec_err_fd)
{
  sigset_t none;
  sigemptyset(&none);
  for (size_t i = 0; i < sizeof sandbox_forwarded_signals / sizeof *sandbox_forwarded_signals; i++)
    signal(sandbox_forwarded_signals[i], SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* A new session has no controlling terminal, so the code cannot push input into ours. */
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* The exec-error pipe and the helper go high (the pipe at its fixed number, open across the
   * helper's exec), the bridge to its fixed number, then everything else closes. */
  int high = shim_fd >= 0 ? dup3(exec_err_fd, SBX_EXEC_ERR_FD, 0) : fcntl(exec_err_fd, F_DUPFD_CLOEXEC, 100);
  int shim = shim_fd >= 0 ? fcntl(shim_fd, F_DUPFD_CLOEXEC, SBX_EXEC_ERR_FD + 1) : -1;
  if (high < 0 || (shim_fd >= 0 && shim < 0))
    _exit(127);
  if (bridge_fd >= 0 && move_fd(bridge_fd, SBX_BRIDGE_FD) < 0)
    _exit(127);
  if (close_fds_except(bridge_fd >= 0 ? SBX_BRIDGE_FD : -1, high, shim) < 0)
    _exit(127);
  /* A failed chdir or helper is a setup error (125), not the program's 126/127. */
  if (chdir(spec->workdir ? spec->workdir : "/workspace") < 0)
    exec_failed(high, EXEC_FAILED_WORKDIR);
  if (shim >= 0) {
    syscall(SYS_execveat, shim, "", spec->argv, envp, AT_EMPTY_PATH);
    /* A policy without execveat: the same file through /proc (the sandbox's own). */
    char path[32];
    bufprintf_cut(path, sizeof path, "/proc/self/fd/%d", shim);
    execve(path, spec->argv, envp);
    exec_failed(high, EXEC_FAILED_HELPER);
  }
  execve(spec->argv[0], spec->argv, envp);
  exec_failed(high, EXEC_FAILED_PROGRAM);
}

struct code_args {
  const struct sbx_spec *spec;
  char **envp;
  int bridge_fd, shim_fd, exec_err_fd, close_a, close_b;
};

static int code_main(void *arg)
{
  const struct code_args *a = arg;
  close(a->close_a);
  close(a->close_b);
  exec_code(a->spec, a->envp, a->bridge_fd, a->shim_fd, a->exec_err_fd);
}

#ifndef __SANITIZE_ADDRESS__
/* The code's stack until its execve: pid 1 is single-threaded and suspended meanwhile. */
static char code_stack[64 << 10] __attribute__((aligned(64)));
#endif

/* Start the code as a child that shares our memory until it execs, with us suspended meanwhile
 * (CLONE_VM | CLONE_VFORK, as posix_spawn does): no copy of our page tables, no copy-on-write
 * faults on either side, nothing to tear down at its exec; its file table, signal handlers and
 * credentials are its own, as after fork. A policy that refuses that clone with an errno gets a
 * plain fork, as before. */
static pid_t spawn_code(struct code_args *a)
{
  /* Not under AddressSanitizer: it takes the code's stack, which is not the one it knows, for an
   * error, and says so on the code's stderr (make asan then runs the fork). */
#ifndef __SANITIZE_ADDRESS__
  pid_t pid = clone(code_main, code_stack + sizeof code_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, a);
  if (pid >= 0)
    return pid;
#else
  pid_t pid;
#endif
  pid = fork();
  if (pid == 0)
    code_main(a);
  return pid;
}

/* pid 1's and its reaped children's usage, as the parent's wait4 would give it. */
static struct rusage own_usage(void)
{
  struct rusage self = {0}, kids = {0};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  timeradd(&self.ru_utime, &kids.ru_utime, &self.ru_utime);
  timeradd(&self.ru_stime, &kids.ru_stime, &self.ru_stime);
  if (kids.ru_maxrss > self.ru_maxrss)
    self.ru_maxrss = kids.ru_maxrss;
  return self;
}

/* The last of the sandbox (alone): take the files MSG_LEAVE brings and move out of the cgroups
 * through them, so that sandboxd can remove them while our exit (the namespaces' teardown, most
 * of it the mount namespace's) runs without it waiting. None: just exit. */
static void leave_cgroup(int sync_fd)
{
  struct sync_msg m;
  int fds[MSG_MAX_FDS];
  int n = sync_recv_fds(sync_fd, &m, fds);
  if (n <= 0 || m.type != MSG_LEAVE) {
    while (n > 0)
      close(fds[--n]);
    return;
  }
  struct contain_err ce;
  struct sync_msg left = {.type = MSG_LEFT};
  if (contain_join_cgroup(fds, n, &ce) < 0)
    left.wait_status = ce.errnum ? ce.errnum : EIO;
  while (n > 0)
    close(fds[--n]);
  sync_send(sync_fd, &left);
}

/* Wait for the code, relaying signals and reaping orphans. Reports the code's status; with
 * INIT_LEAVE_CGROUP and nothing else left, leaves the cgroup first (leave_cgroup). */
static _Noreturn void init_loop(int sync_fd, pid_t code_pid, const sigset_t *mask, enum init_leave leave)
{
  int code_status = -1;
  for (;;) {
    siginfo_t si;
    int sig = sigwaitinfo(mask, &si);
    if (sig < 0)
      continue;
    if (sig != SIGCHLD) {
      kill(code_pid, sig);
      continue;
    }
    for (;;) {
      int st;
      pid_t p = waitpid(-1, &st, WNOHANG);
      if (p <= 0)
        break;
      if (p == code_pid)
        code_status = st;
    }
    if (code_status != -1)
      break;
  }
  /* When pid 1 exits, the kernel kills every other process of the namespace, so nothing the
   * code left running (daemons, orphans) survives it. No child at all (ECHILD, not 0) means we
   * are the last process of the sandbox: no other can start one. */
  struct sync_msg m = {.type = MSG_EXIT, .wait_status = code_status};
  m.alone = leave != INIT_LEAVE_NEVER && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
  m.usage = own_usage();
  sync_send(sync_fd, &m);
  if (m.alone && leave == INIT_LEAVE_CGROUP)
    leave_cgroup(sync_fd);
  _exit(WIFEXITED(code_status) ? WEXITSTATUS(code_status) : 128 + WTERMSIG(code_status));
}

/* Signals: pid 1 gets only signals it has a handler for (pid_namespaces(7)), so install
 * no-op handlers and take them synchronously with sigwaitinfo. */
static void noop_handler(int sig)
{
  (void) sig;
}

void init_take_signals(sigset_t *mask)
{
  sigemptyset(mask);
  sigaddset(mask, SIGCHLD);
  for (size_t i = 0; i < sizeof sandbox_forwarded_signals / sizeof *sandbox_forwarded_signals; i++) {
    sigaddset(mask, sandbox_forwarded_signals[i]);
    signal(sandbox_forwarded_signals[i], noop_handler);
  }
  sigprocmask(SIG_BLOCK, mask, NULL);
}

_Noreturn void init_run(const struct sbx_spec *spec, char **envp, int sync_fd, int bridge_fd, int shim_fd,
                        int workspace_fd, int proxy_fd, const sigset_t *mask, enum init_leave leave)
{
  sbx_error_t err = {0};
  /* The code: a child, so pid 1 stays ours to reap orphans and relay signals. A CLOEXEC pipe
   * tells us whether execve worked. */
  int ep[2];
  if (pipe2(ep, O_CLOEXEC) < 0)
    sync_fail(sync_fd, (sbx_error_errno(&err, "pipe"), &err));
  struct code_args ca = {spec, envp, bridge_fd, shim_fd, ep[1], ep[0], sync_fd};
  pid_t code = spawn_code(&ca);
  if (code < 0)
    sync_fail(sync_fd, (sbx_error_errno(&err, "fork"), &err));
  close(ep[1]);
  if (bridge_fd >= 0)
    close(bridge_fd);
  if (shim_fd >= 0)
    close(shim_fd);
  /* Only the code needed the environment; this copy's owner (the parent's frame) never returns
   * here, so pid 1 frees it. */
  free(envp);
  int failed[2];
  ssize_t n;
  do
    n = read(ep[0], failed, sizeof failed);
  while (n < 0 && errno == EINTR);
  close(ep[0]);
  const char *workdir = spec->workdir ? spec->workdir : "/workspace";
  if (n == sizeof failed && failed[0] == EXEC_FAILED_WORKDIR)
    sync_fail(sync_fd, (sbx_error_set(&err, failed[1], "workdir `%s` in the sandbox", workdir), &err));
  if (n == sizeof failed && failed[0] == EXEC_FAILED_HELPER)
    sync_fail(sync_fd, (sbx_error_set(&err, failed[1], "exec the sandbox's exec helper"), &err));
  if (n == sizeof failed) {
    sbx_error_set(&err, failed[1], "exec `%s` in the sandbox (workdir `%s`)", spec->argv[0], workdir);
    /* As a shell says it: not there 127, there but not runnable 126. */
    err.status = failed[1] == ENOENT ? SBX_EXIT_NOT_FOUND : SBX_EXIT_CANNOT_EXEC;
    sync_fail(sync_fd, &err);
  }
  struct sync_msg m = {.type = MSG_READY};
  struct stat ns;
  if (stat("/proc/self/ns/pid", &ns) == 0) {
    m.pidns_ino = ns.st_ino;
    m.pidns_dev = ns.st_dev;
  }
  /* The proxy's listener and the workspace (each if there is one) with READY; the code never had
   * them (exec_code closes them). */
  int fds[2], n_fds = 0;
  if (proxy_fd >= 0)
    fds[n_fds++] = proxy_fd;
  if (workspace_fd >= 0)
    fds[n_fds++] = workspace_fd;
  sync_send_fds(sync_fd, &m, fds, n_fds);
  while (n_fds > 0)
    close(fds[--n_fds]);
  init_loop(sync_fd, code, mask, leave);
}
