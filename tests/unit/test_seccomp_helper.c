/* Unit tests for the host-side helpers' seccomp filter (seccomp_helper_compile, src/kernel/seccomp.c),
 * installed for real in a child: what the egress proxy needs works, what it must not reach fails
 * with the filter's errno. Each probe runs in a fork of the filtered child (which inherits the
 * filter, as the proxy's connections do) and reports its errno (0: the call worked) through a
 * pipe. */
#include <errno.h>
#include <linux/sched.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kernel/seccomp.h"

enum probe {
  P_EXECVE,
  P_UNSHARE,
  P_CLONE_NEWNET,
  P_CLONE3,
  P_PTRACE,
  P_SETUID,
  P_KEYCTL,
  P_MOUNT,
  P_SOCKET_NETLINK,
  P_SOCKET_PACKET,
  P_SOCKET_BIG,
  P_SOCKET_INET,
  P_SOCKET_INET6,
  P_SOCKET_UNIX,
  P_FORK,
  P_RESOLVE,
  P_COUNT
};

static int sock(int domain, int type)
{
  int fd = socket(domain, type | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  close(fd);
  return 0;
}

/* In the filtered child: 0 if the call worked, else its errno. */
static int run_probe(enum probe p)
{
  switch (p) {
  case P_EXECVE: {
    char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
    execve("/bin/true", argv, envp);
    return errno;
  }
  case P_UNSHARE:
    return unshare(CLONE_NEWUSER) < 0 ? errno : 0;
  case P_CLONE_NEWNET: {
    long pid = syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
      _exit(0);
    if (pid < 0)
      return errno;
    waitpid((pid_t) pid, NULL, 0);
    return 0;
  }
  case P_CLONE3: {
    struct clone_args a = {.exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &a, sizeof a);
    if (pid == 0)
      _exit(0);
    if (pid < 0)
      return errno;
    waitpid((pid_t) pid, NULL, 0);
    return 0;
  }
  case P_PTRACE:
    return ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0 ? errno : 0;
  case P_SETUID:
    return setuid(getuid()) < 0 ? errno : 0;
  case P_KEYCTL:
    return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0) < 0 ? errno : 0;
  case P_MOUNT:
    /* A target that does not exist: ENOENT without the filter, which must not mount anything. */
    return syscall(SYS_mount, NULL, "/nonexistent-sandboxd-probe", NULL, MS_REMOUNT, NULL) < 0 ? errno : 0;
  case P_SOCKET_NETLINK:
    return sock(AF_NETLINK, SOCK_RAW);
  case P_SOCKET_PACKET:
    return sock(AF_PACKET, SOCK_DGRAM);
  case P_SOCKET_BIG:
    return sock(AF_VSOCK, SOCK_STREAM);
  case P_SOCKET_INET:
    return sock(AF_INET, SOCK_STREAM);
  case P_SOCKET_INET6:
    return sock(AF_INET6, SOCK_DGRAM) == EAFNOSUPPORT ? 0 : sock(AF_INET6, SOCK_DGRAM); /* (no IPv6 here) */
  case P_SOCKET_UNIX:
    return sock(AF_UNIX, SOCK_STREAM);
  case P_FORK: {
    pid_t pid = fork();
    if (pid == 0)
      _exit(7);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
      return pid < 0 ? errno : ECHILD;
    return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : EIO;
  }
  case P_RESOLVE: {
    struct addrinfo *ai = NULL, hints = {.ai_socktype = SOCK_STREAM};
    int r = getaddrinfo("localhost", "80", &hints, &ai);
    if (ai)
      freeaddrinfo(ai);
    return r == 0 ? 0 : EHOSTUNREACH;
  }
  case P_COUNT:
    break;
  }
  return EINVAL;
}

/* One probe in a fork of the filtered child: 0 if the call worked (or exec'd: nothing comes back),
 * else its errno. */
static int probe_one(enum probe p)
{
  int pfd[2];
  if (pipe(pfd) < 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    int r = run_probe(p);
    _exit(write(pfd[1], &r, sizeof r) == (ssize_t) sizeof r ? 0 : 3);
  }
  close(pfd[1]);
  int r = 0;
  ssize_t n = pid < 0 ? -1 : read(pfd[0], &r, sizeof r);
  close(pfd[0]);
  if (pid > 0)
    waitpid(pid, NULL, 0);
  return n == 0 ? 0 : n == (ssize_t) sizeof r ? r : -1;
}

/* Every probe's result, from one child under the filter (and no_new_privs, as the proxy). */
static int probe_all(const struct sbx_bpf *bpf, int results[P_COUNT])
{
  int pfd[2];
  if (pipe(pfd) < 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    sbx_error_t err = {0};
    int out[P_COUNT];
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(bpf, &err) < 0)
      _exit(2);
    for (int p = 0; p < P_COUNT; p++)
      out[p] = probe_one((enum probe) p);
    _exit(write(pfd[1], out, sizeof out) == (ssize_t) sizeof out ? 0 : 3);
  }
  close(pfd[1]);
  ssize_t n = pid < 0 ? -1 : read(pfd[0], results, sizeof(int) * P_COUNT);
  close(pfd[0]);
  int st = 0;
  if (pid > 0)
    waitpid(pid, &st, 0);
  return n == (ssize_t) (sizeof(int) * P_COUNT) && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(void)
{
  struct sbx_bpf bpf;
  sbx_error_t err = {0};
  CHECK(seccomp_helper_compile(&bpf, &err) == 0);
  CHECK(bpf.main_prog && bpf.main_len > 0 && !bpf.except_prog);
  int r[P_COUNT];
  CHECK(probe_all(&bpf, r) == 0);
  /* Refused */
  CHECK(r[P_EXECVE] == EPERM);
  CHECK(r[P_UNSHARE] == EPERM);
  CHECK(r[P_CLONE_NEWNET] == EPERM);
  CHECK(r[P_CLONE3] == ENOSYS);
  CHECK(r[P_PTRACE] == EPERM);
  CHECK(r[P_SETUID] == EPERM);
  CHECK(r[P_KEYCTL] == EPERM);
  CHECK(r[P_MOUNT] == EPERM);
  CHECK(r[P_SOCKET_NETLINK] == EAFNOSUPPORT);
  CHECK(r[P_SOCKET_PACKET] == EAFNOSUPPORT);
  CHECK(r[P_SOCKET_BIG] == EAFNOSUPPORT);
  /* What relaying and the resolver use */
  CHECK(r[P_SOCKET_INET] == 0);
  CHECK(r[P_SOCKET_INET6] == 0);
  CHECK(r[P_SOCKET_UNIX] == 0);
  CHECK(r[P_FORK] == 0);
  CHECK(r[P_RESOLVE] == 0);
  /* Without the filter the same child reaches what the filter refuses (the probes can fail);
   * none of them changes the host (a grandchild's own namespaces, a mount that cannot be). */
  struct sbx_bpf none = {0};
  static const unsigned char allow_all[8] = {0x06, 0, 0, 0, 0, 0, 0xff, 0x7f}; /* RET ALLOW */
  none.main_prog = (void *) allow_all;
  none.main_len = 1;
  CHECK(probe_all(&none, r) == 0);
  CHECK(r[P_SOCKET_NETLINK] == 0);
  CHECK(r[P_CLONE3] == 0);
  CHECK(r[P_EXECVE] == 0);
  CHECK(r[P_UNSHARE] == 0);
  CHECK(r[P_MOUNT] == ENOENT);
  seccomp_bpf_free(&bpf);
  return check_summary("test_seccomp_helper");
}
