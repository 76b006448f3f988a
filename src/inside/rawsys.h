/* SPDX-License-Identifier: Apache-2.0 */
/* Raw Linux system calls and the few string helpers of the fork template's freestanding pieces
 * (zygote.c, callinit.c, execshim.c): no libc, no errno (a call returns -errno). x86_64 only: the
 * numbers below are x86_64's. */
#ifndef SBX_INSIDE_RAWSYS_H
#define SBX_INSIDE_RAWSYS_H

#include "sandbox/contain_sys.h" /* the system calls themselves, and struct buf */

typedef unsigned long u64;
typedef long i64;

enum {
  NR_read = 0,
  NR_write = 1,
  NR_open = 2,
  NR_close = 3,
  NR_stat = 4,
  NR_mmap = 9,
  NR_mprotect = 10,
  NR_munmap = 11,
  NR_rt_sigaction = 13,
  NR_rt_sigprocmask = 14,
  NR_ioctl = 16,
  NR_socket = 41,
  NR_sendto = 44,
  NR_recvfrom = 45,
  NR_sendmsg = 46,
  NR_bind = 49,
  NR_listen = 50,
  NR_clone = 56,
  NR_execve = 59,
  NR_wait4 = 61,
  NR_kill = 62,
  NR_fcntl = 72,
  NR_chdir = 80,
  NR_mkdir = 83,
  NR_getrlimit = 97,
  NR_getrusage = 98,
  NR_setgroups = 116,
  NR_setresuid = 117,
  NR_setresgid = 119,
  NR_capset = 126,
  NR_rt_sigtimedwait = 128,
  NR_prctl = 157,
  NR_arch_prctl = 158,
  NR_setrlimit = 160,
  NR_mount = 165,
  NR_exit_group = 231,
  NR_newfstatat = 262,
  NR_unshare = 272,
  NR_set_robust_list = 273,
  NR_get_robust_list = 274,
  NR_dup3 = 292,
  NR_pipe2 = 293,
  NR_execveat = 322,
  NR_rseq = 334,
  NR_close_range = 436,
};

#define SYS(n, a, b, c, d, e, f)                                                                             \
  contain_sys6(n, (i64) (a), (i64) (b), (i64) (c), (i64) (d), (i64) (e), (i64) (f))
#define sys1(n, a) SYS(n, a, 0, 0, 0, 0, 0)
#define sys2(n, a, b) SYS(n, a, b, 0, 0, 0, 0)
#define sys3(n, a, b, c) SYS(n, a, b, c, 0, 0, 0)
#define sys4(n, a, b, c, d) SYS(n, a, b, c, d, 0, 0)
#define sys5(n, a, b, c, d, e) SYS(n, a, b, c, d, e, 0)

#define SIGHUP 1
#define SIGINT 2
#define SIGQUIT 3
#define SIGKILL 9
#define SIGUSR1 10
#define SIGUSR2 12
#define SIGTERM 15
#define SIGCHLD 17
#define MSG_NOSIGNAL 0x4000

/* The signals pid 1 relays to the code (template.py FORWARDED), and SIGCHLD. */
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
#define N_FORWARDED ((int) (sizeof forwarded / sizeof forwarded[0]))

struct timeval_k {
  i64 sec, usec;
};
struct rusage_k {
  struct timeval_k utime, stime;
  i64 maxrss, rest[13];
};

static inline u64 slen(const char *s)
{
  u64 n = 0;
  while (s[n])
    n++;
  return n;
}

/* callinit's part, a forked call's pid 1 once the code runs (as init.c's for a cold one): relay the forwarded
 * signals to the code, reap every child, and say the code's wait status, CPU time (µs, pid 1's and its waited
 * children's) and largest RSS on the sync socket, then exit. Every signal is blocked; these are taken with
 * sigtimedwait. */
__attribute__((noreturn)) static inline void relay_and_report(int sync, int code)
{
  u64 set = 1UL << (SIGCHLD - 1);
  for (int i = 0; i < N_FORWARDED; i++)
    set |= 1UL << (forwarded[i] - 1);
  int status = 0, done = 0;
  while (!done) {
    i64 sig = sys4(NR_rt_sigtimedwait, &set, 0, 0, 8);
    if (sig < 0)
      continue;
    if (sig != SIGCHLD) {
      sys2(NR_kill, code, sig);
      continue;
    }
    for (;;) {
      int st;
      i64 w = sys4(NR_wait4, -1, &st, 1 /* WNOHANG */, 0);
      if (w <= 0)
        break;
      if (w == code) {
        status = st;
        done = 1;
      }
    }
  }
  struct rusage_k self, kids;
  sys2(NR_getrusage, 0, &self);
  sys2(NR_getrusage, -1, &kids);
  u64 us = (u64) ((self.utime.sec + self.stime.sec + kids.utime.sec + kids.stime.sec) * 1000000 +
                  self.utime.usec + self.stime.usec + kids.utime.usec + kids.stime.usec);
  char msg[96];
  struct buf b = {msg, 0, sizeof msg};
  put(&b, "exit ");
  puti(&b, status);
  put(&b, " ");
  putu(&b, us);
  put(&b, " ");
  puti(&b, self.maxrss > kids.maxrss ? self.maxrss : kids.maxrss);
  sys4(NR_sendto, sync, msg, b.len, MSG_NOSIGNAL);
  sys1(NR_exit_group, 0);
  __builtin_unreachable();
}

#endif
