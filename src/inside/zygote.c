/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's call pid 1 in C (template.py loads this from a sealed memfd, fork_zygote.c).
 *
 * pid 1 shares the template's memory (CLONE_VM, as posix_spawn's child does) and runs only this
 * file's code and sandbox/contain.c's on a stack of its own, with raw system calls: no libc, no
 * errno, no write to any memory but its stack. It builds the call's sandbox with the steps every
 * sandbox takes (contain.c: the same code as a cold sandbox's pid 1, in the same order; the
 * timeline at the top of sandbox/sandbox.c has both paths), then forks the code process: the one
 * copy of the template per call. (A pid 1 that was a fork of the template would make two.)
 *
 * The template waits in zy_spawn until pid 1 has forked the code, so the copy is of a template at
 * rest. The code process starts on pid 1's stack in that copy, switches to the template's stack
 * where zy_spawn saved its registers (ctx_save, as setjmp) and returns 0 from zy_spawn to the
 * template's Python, which goes on as os.fork's child would (template.py _zcode). What glibc's
 * fork does for its child, this path does itself: the kernel writes the child's thread id where
 * libc caches it (CLONE_CHILD_SETTID at the address set_tid_address registered, which
 * PR_GET_TID_ADDRESS gives), and the robust futex list and the rseq area are registered again (a
 * CLONE_VM child has neither, so pid 1 has none to hand down).
 *
 * Before the code may run, pid 1 leaves the template's memory: it execs callinit (fd 7, a sealed
 * memfd), which relays signals, reaps and reports. The code process waits for that (an O_CLOEXEC
 * pipe's EOF). So no process the code can reach ever shares the template's memory, and the
 * template's memory keeps its dumpable flag (pid 1 never sets it: that flag is the memory's). The
 * code process also unmaps every pid 1 stack: other calls' pid 1s run on theirs while the copy is
 * taken.
 *
 * x86_64 only (the context switch and the system calls are assembly; elsewhere sandboxd has no
 * fork mode). With a shadow stack (the switch would break it), and with SANDBOXD_FORK_ZYGOTE=0,
 * pid 1 is a copy of the template instead (share_memory 0: a fork's child, on its copy of the
 * template's stack), which takes the same steps and execs callinit likewise.
 * Built -nostdlib -ffreestanding, so it works with any libc in the rootfs. */
#define EXPORT __attribute__((visibility("default")))

#if !defined(__x86_64__)
#error "zygote.c is x86_64 only (the Makefile builds it there only)"
#endif
#include "rawsys.h"
#include "sandbox/contain.h"

/* The callee-saved registers, the stack pointer and the return address: setjmp's, without the
 * signal mask or pointer mangling (nothing here is ever jumped to but by zy_spawn's own code). */
struct ctx {
  u64 rbx, rbp, r12, r13, r14, r15, rsp, rip;
};
__attribute__((returns_twice)) long ctx_save(struct ctx *c);
__attribute__((noreturn)) void ctx_resume(const struct ctx *c, long v);
/* clone(2) onto a new stack, the child calling fn(arg) and exiting with what it returns. */
long clone_on(u64 flags, void *stack_top, int (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl ctx_save\n.hidden ctx_save\n.type ctx_save,@function\n"
        "ctx_save:\n"
        "  endbr64\n"
        "  mov %rbx,0(%rdi)\n  mov %rbp,8(%rdi)\n  mov %r12,16(%rdi)\n  mov %r13,24(%rdi)\n"
        "  mov %r14,32(%rdi)\n  mov %r15,40(%rdi)\n"
        "  lea 8(%rsp),%rdx\n  mov %rdx,48(%rdi)\n  mov (%rsp),%rdx\n  mov %rdx,56(%rdi)\n"
        "  xor %eax,%eax\n  ret\n"
        ".size ctx_save, .-ctx_save\n"
        ".globl ctx_resume\n.hidden ctx_resume\n.type ctx_resume,@function\n"
        "ctx_resume:\n"
        "  endbr64\n"
        "  mov 0(%rdi),%rbx\n  mov 8(%rdi),%rbp\n  mov 16(%rdi),%r12\n  mov 24(%rdi),%r13\n"
        "  mov 32(%rdi),%r14\n  mov 40(%rdi),%r15\n  mov 48(%rdi),%rsp\n  mov %rsi,%rax\n"
        "  jmp *56(%rdi)\n"
        ".size ctx_resume, .-ctx_resume\n"
        ".globl clone_on\n.hidden clone_on\n.type clone_on,@function\n"
        "clone_on:\n"
        "  endbr64\n"
        "  and $-16,%rsi\n  sub $16,%rsi\n  mov %rdx,0(%rsi)\n  mov %rcx,8(%rsi)\n"
        "  mov $56,%eax\n  xor %edx,%edx\n  xor %r10d,%r10d\n  xor %r8d,%r8d\n  syscall\n"
        "  test %rax,%rax\n  jnz 1f\n"
        "  xor %ebp,%ebp\n  pop %rax\n  pop %rdi\n  call *%rax\n"
        "  mov %eax,%edi\n  mov $231,%eax\n  syscall\n  hlt\n"
        "1: ret\n"
        ".size clone_on, .-clone_on\n");

EXPORT i64 zy_init(const char *text, const void *main_prog, u64 main_len, const void *except_prog,
                   u64 except_len, i64 rseq_offset, u64 rseq_len, int init_fd);
struct zcall;
EXPORT i64 zy_spawn(u64 clone_flags, struct zcall *call);
EXPORT void zy_reaped(int pid);

/* Copy and fill bytes (no libc here). The compiler may also emit calls to memcpy and memset for a
 * struct copy or a zeroed array: those two symbols are aliases of these (hidden, not exported). */
static void *zy_copy(void *d, const void *s, u64 n)
{
  char *dc = d;
  const char *sc = s;
  while (n--)
    *dc++ = *sc++;
  return d;
}
static void *zy_fill(void *d, int c, u64 n)
{
  char *dc = d;
  while (n--)
    *dc++ = (char) c;
  return d;
}
__attribute__((visibility("hidden"), alias("zy_copy"), used)) void *memcpy(void *d, const void *s, u64 n);
__attribute__((visibility("hidden"), alias("zy_fill"), used)) void *memset(void *d, int c, u64 n);

static int seq(const char *a, const char *b)
{
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}

static u64 parse_u(const char **s)
{
  u64 v = 0;
  while (**s >= '0' && **s <= '9')
    v = v * 10 + (u64) (*(*s)++ - '0');
  return v;
}

/* strerror for what these steps can fail with; the number otherwise. */
static void put_errno(struct buf *b, long e)
{
  static const struct {
    int e;
    const char *s;
  } names[] = {{1, "Operation not permitted"},
               {2, "No such file or directory"},
               {4, "Interrupted system call"},
               {9, "Bad file descriptor"},
               {11, "Resource temporarily unavailable"},
               {12, "Cannot allocate memory"},
               {13, "Permission denied"},
               {16, "Device or resource busy"},
               {17, "File exists"},
               {20, "Not a directory"},
               {22, "Invalid argument"},
               {23, "Too many open files in system"},
               {24, "Too many open files"},
               {28, "No space left on device"},
               {30, "Read-only file system"},
               {38, "Function not implemented"},
               {40, "Too many levels of symbolic links"},
               {95, "Operation not supported"},
               {98, "Address already in use"},
               {99, "Cannot assign requested address"}};
  for (u64 i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].e == e) {
      put(b, names[i].s);
      return;
    }
  put(b, "errno ");
  puti(b, e);
}

/* ---- The setup, once (zy_init): template.py's cfg, as lines of text. ---- */

#define MAX_LIST 64
#define MAX_UNDER 16
#define N_FRESH 4
#define CONF_SIZE 65536
#define STACK_SIZE (128 * 1024)
#define MAX_STACKS 1024
#define MAX_FDS 16

struct fresh {
  struct contain_tmpfs t;
  struct contain_under under[MAX_UNDER];
};

static struct {
  char text[CONF_SIZE];
  u64 uid, gid, nofile, fsize, sigpending, msgqueue, memlock, memory, pids, proxy;
  u64 server_maps, mask_proc, degraded; /* 0 or 1 */
  u64 share_memory; /* 1: pid 1 shares the template's memory (CLONE_VM) and execs callinit */
  struct contain_budget budgets[MAX_LIST];
  int n_budgets;
  struct fresh fresh[N_FRESH];
  struct contain_tmpfs tmpfs[N_FRESH];
  int n_fresh;
  const char *mask[MAX_LIST], *ro[MAX_LIST];
  int n_mask, n_ro;
  const void *main_prog, *except_prog;
  u64 main_len, except_len;
  u64 tid_addr, robust_head, robust_len;
  u64 rseq_area, rseq_len;
  int init_fd; /* callinit, in the template */
  int ready;
} conf;

/* The pid 1 stacks: mapped by zy_spawn, unmapped by zy_reaped (the template) and in each code
 * process (zy_spawn's child return). Only the template writes this table. */
static struct {
  int pid;
  char *base;
} stacks[MAX_STACKS];

/* Where zy_spawn waits: the code process resumes here. */
static struct ctx tmpl_ctx;

static char *next_field(char **s)
{
  char *f = *s;
  while (**s && **s != ' ')
    (*s)++;
  if (**s)
    *(*s)++ = '\0';
  return f;
}

static i64 parse_line(char *line)
{
  char *rest = line;
  const char *k = next_field(&rest);
  const char *r = rest;
  /* The numbers: "KEY N". */
  static const struct {
    const char *key;
    u64 *v;
  } nums[] = {{"uid", &conf.uid},
              {"gid", &conf.gid},
              {"server_maps", &conf.server_maps},
              {"mask_proc", &conf.mask_proc},
              {"degraded", &conf.degraded},
              {"nofile", &conf.nofile},
              {"fsize", &conf.fsize},
              {"sigpending", &conf.sigpending},
              {"msgqueue", &conf.msgqueue},
              {"memlock", &conf.memlock},
              {"memory", &conf.memory},
              {"pids", &conf.pids},
              {"proxy", &conf.proxy},
              {"share_memory", &conf.share_memory}};
  for (u64 i = 0; i < sizeof nums / sizeof nums[0]; i++)
    if (seq(k, nums[i].key)) {
      *nums[i].v = parse_u(&r);
      return 0;
    }
  if (seq(k, "budget")) { /* budget NAME VALUE */
    if (conf.n_budgets == MAX_LIST)
      return -7;
    struct contain_budget *b = &conf.budgets[conf.n_budgets++];
    b->name = next_field(&rest);
    r = rest;
    b->value = parse_u(&r);
  } else if (seq(k, "fresh")) { /* fresh PATH FLAGS DATA (PATH relative to /) */
    if (conf.n_fresh == N_FRESH)
      return -7;
    struct fresh *f = &conf.fresh[conf.n_fresh++];
    f->t.path = next_field(&rest);
    r = next_field(&rest);
    f->t.flags = parse_u(&r);
    f->t.data = rest;
    f->t.under = f->under;
  } else if (seq(k, "under")) { /* under FLAGS ISDIR DST: below the last fresh */
    if (conf.n_fresh == 0 || conf.fresh[conf.n_fresh - 1].t.n_under == MAX_UNDER)
      return -7;
    struct fresh *f = &conf.fresh[conf.n_fresh - 1];
    struct contain_under *u = &f->under[f->t.n_under++];
    r = next_field(&rest);
    u->flags = parse_u(&r);
    r = next_field(&rest);
    u->dir = parse_u(&r) != 0;
    u->dst = rest;
  } else if (seq(k, "mask") || seq(k, "ro")) {
    int ro = k[0] == 'r';
    if ((ro ? conf.n_ro : conf.n_mask) == MAX_LIST)
      return -7;
    if (ro)
      conf.ro[conf.n_ro++] = rest;
    else
      conf.mask[conf.n_mask++] = rest;
  } else
    return -22;
  return 0;
}

/* conf: the lines above, NUL-terminated; the call policy's compiled filters (kept alive by the
 * template; lengths in bytes); libc's rseq area as an offset from the thread pointer and the size
 * it registered (0: none); callinit's fd. 0, or -errno (then the template
 * serves no call and says why). */
EXPORT i64 zy_init(const char *text, const void *main_prog, u64 main_len, const void *except_prog,
                   u64 except_len, i64 rseq_offset, u64 rseq_len, int init_fd)
{
  u64 n = slen(text);
  if (conf.ready)
    return -16;
  if (n >= CONF_SIZE)
    return -7;
  zy_copy(conf.text, text, n + 1);
  char *s = conf.text;
  while (*s) {
    char *line = s;
    while (*s && *s != '\n')
      s++;
    if (*s)
      *s++ = '\0';
    i64 r = parse_line(line);
    if (r < 0)
      return r;
  }
  for (int i = 0; i < conf.n_fresh; i++)
    conf.tmpfs[i] = conf.fresh[i].t;
  /* Sharing the memory needs no shadow stack (ARCH_SHSTK_STATUS: one would not follow
   * ctx_resume); else pid 1 is a copy of the template, as a fork's child. */
  u64 shstk = 0;
  if (sys2(NR_arch_prctl, 0x5005, &shstk) == 0 && (shstk & 1))
    conf.share_memory = 0;
  conf.main_prog = main_prog;
  conf.main_len = main_len / 8;
  conf.except_prog = except_prog;
  conf.except_len = except_len / 8;
  /* Where glibc (or musl) caches this thread's id, and its robust futex list. */
  i64 r = sys2(NR_prctl, 40 /* PR_GET_TID_ADDRESS */, &conf.tid_addr);
  if (r < 0)
    return r;
  if (!conf.tid_addr)
    return -95;
  r = sys3(NR_get_robust_list, 0, &conf.robust_head, &conf.robust_len);
  if (r < 0)
    return r;
  if (rseq_len) {
    u64 tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    conf.rseq_area = tp + (u64) rseq_offset;
    conf.rseq_len = rseq_len;
  }
  conf.init_fd = init_fd;
  conf.ready = 1;
  return 0;
}

/* ---- pid 1 ---- */

#define O_WRONLY 01
#define O_DIRECTORY 0200000
#define O_NOFOLLOW 0400000
#define O_CLOEXEC 02000000
#define O_PATH 010000000

struct kstat { /* struct stat, x86_64 */
  u64 st_dev, st_ino, st_nlink;
  unsigned st_mode, st_uid, st_gid, pad0;
  u64 st_rdev;
  i64 st_size, st_blksize, st_blocks;
  u64 times[6];
  i64 unused[3];
};
struct iovec {
  void *base;
  u64 len;
};
struct msghdr {
  void *name;
  unsigned namelen;
  struct iovec *iov;
  u64 iovlen;
  void *control;
  u64 controllen;
  int flags;
};
struct sigaction_k {
  u64 handler, flags, restorer, mask;
};

/* The call, as the template got it from sandboxd (copied to pid 1's stack first). */
struct zcall {
  int fds[MAX_FDS]; /* sync socket, stdout, stderr, fd 3, then cgroup v1 attach files */
  int n_fds;
  int pipe_w; /* pid 1 writes the code's pid here; its end (EOF) tells the template otherwise */
  u64 cpu_seconds;
};

struct pid1 {
  struct zcall call;
  int sync; /* the sync socket: 4 once the fds are in place */
  char msg[520];
};

/* Setup failed: say why on the sync socket (sandboxd shows it) and exit 125. */
__attribute__((noreturn)) static void fail(struct pid1 *p, const char *what, const char *arg, i64 r)
{
  struct buf b = {p->msg, 0, 500};
  put(&b, "error ");
  put(&b, what);
  if (arg) {
    put(&b, " `");
    put(&b, arg);
    put(&b, "`");
  }
  put(&b, ": ");
  put_errno(&b, -r);
  sys4(NR_sendto, p->sync, p->msg, b.len, 0x4000 /* MSG_NOSIGNAL */);
  sys1(NR_exit_group, 125);
  __builtin_unreachable();
}

#define CK(p, r, what, arg)                                                                                  \
  do {                                                                                                       \
    i64 r_ = (r);                                                                                            \
    if (r_ < 0)                                                                                              \
      fail(p, what, arg, r_);                                                                                \
  } while (0)
/* A step of contain.c's that failed. */
#define STEP(p, call)                                                                                        \
  do {                                                                                                       \
    struct contain_err ce_;                                                                                  \
    if ((call) < 0)                                                                                          \
      fail(p, ce_.what, ce_.arg, -(i64) ce_.errnum);                                                         \
  } while (0)
#define CE (&ce_)

/* The call's ids: its own maps to the template's (as root: sandboxd's, taken after the ack). */
static void ids(struct pid1 *p)
{
  if (!conf.server_maps)
    STEP(p, contain_map_self((unsigned) conf.uid, (unsigned) conf.gid, CE));
  CK(p, sys4(NR_sendto, p->sync, "hello", 5, 0x4000), "send", "hello");
  char ack[16];
  i64 n = sys4(NR_recvfrom, p->sync, ack, sizeof ack, 0);
  if (n != 3 || ack[0] != 'a' || ack[1] != 'c' || ack[2] != 'k')
    sys1(NR_exit_group, 125);
  if (conf.server_maps)
    STEP(p, contain_become((unsigned) conf.uid, (unsigned) conf.gid, true, CE));
}

static void loopback_up(struct pid1 *p)
{
  i64 s = sys3(NR_socket, 2 /* AF_INET */, 2 /* SOCK_DGRAM */ | O_CLOEXEC, 0);
  CK(p, s, "socket", 0);
  char ifr[40] = "lo";
  short flags = 0x41; /* IFF_UP | IFF_RUNNING */
  zy_copy(ifr + 16, &flags, sizeof flags);
  CK(p, sys3(NR_ioctl, s, 0x8914 /* SIOCSIFFLAGS */, ifr), "ioctl(SIOCSIFFLAGS)", "lo");
  sys1(NR_close, s);
}

/* stdio, the call's fd 3, the sync socket at 4, the workspace at 5, the template's pipe at 6,
 * callinit at 7; nothing else. */
static void fds(struct pid1 *p)
{
  i64 ws = sys3(NR_open, "/workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  CK(p, ws, "open", "/workspace");
  int from[7] = {p->call.fds[1], p->call.fds[2], p->call.fds[3], p->sync,
                 (int) ws,       p->call.pipe_w, conf.init_fd};
  int n = 7;
  int hi[7];
  for (int i = 0; i < n; i++) {
    i64 r = sys3(NR_fcntl, from[i], 1030 /* F_DUPFD_CLOEXEC */, 100);
    CK(p, r, "fcntl(F_DUPFD_CLOEXEC)", 0);
    hi[i] = (int) r;
  }
  for (int i = 0; i < n; i++)
    CK(p, sys3(NR_dup3, hi[i], i + 1, i < 3 ? 0 : O_CLOEXEC), "dup3", 0);
  p->sync = 4;
  p->call.pipe_w = 6;
  CK(p, sys3(NR_close_range, n + 1, ~0U, 0), "close_range", 0);
}

static void send_fds(struct pid1 *p, const char *text, u64 len, const int *fd, int n)
{
  union {
    char buf[64];
    u64 align;
  } u;
  struct iovec iov = {(void *) text, len};
  struct msghdr mh = {0, 0, &iov, 1, u.buf, 16 + 4 * (u64) n, 0};
  u64 cmsg_len = 16 + 4 * (u64) n;
  int lv[2] = {1 /* SOL_SOCKET */, 1 /* SCM_RIGHTS */};
  zy_fill(u.buf, 0, sizeof u.buf);
  zy_copy(u.buf, &cmsg_len, 8);
  zy_copy(u.buf + 8, lv, 8);
  zy_copy(u.buf + 16, fd, 4 * (u64) n);
  mh.controllen = (16 + 4 * (u64) n + 7) & ~7UL;
  CK(p, sys3(NR_sendmsg, p->sync, &mh, 0x4000), "send", "ready");
}

/* The code process, just forked: it waits until pid 1 has left this memory (its exec closes the
 * pipe's other end), then does what glibc's fork does for its child (see the head comment). Then,
 * sharing the template's memory, it resumes the template's context, where zy_spawn returns 0;
 * else it returns, up to zy_spawn, which returns 0. */
static void code_start(int exec_r, int exec_w)
{
  sys1(NR_close, 6); /* the template's pipe: its EOF must say pid 1's end, not ours */
  sys1(NR_close, exec_w);
  char c;
  while (sys3(NR_read, exec_r, &c, 1) == -4 /* EINTR */)
    ;
  sys1(NR_close, exec_r);
  sys2(NR_set_robust_list, conf.robust_head, conf.robust_len);
  if (conf.rseq_len && conf.share_memory)
    sys4(NR_rseq, conf.rseq_area, conf.rseq_len, 0, 0x53053053 /* RSEQ_SIG */);
  if (conf.share_memory)
    ctx_resume(&tmpl_ctx, 1);
}

/* pid 1 becomes callinit, out of the template's memory. Only if that fails does it return. */
static i64 exec_init(int code)
{
  char env[40];
  struct buf b = {env, 0, sizeof env};
  put(&b, "SANDBOXD_CODE_PID=");
  putu(&b, (u64) code);
  char name[] = "sandboxd-init";
  char *argv[] = {name, 0}, *envp[] = {env, 0};
  i64 r = sys3(NR_fcntl, 4, 2 /* F_SETFD */, 0); /* the sync socket goes on */
  if (r < 0)
    return r;
  r = sys5(NR_execveat, 7, "", argv, envp, 0x1000 /* AT_EMPTY_PATH */);
  if (r == -38 || r == -1) /* a policy without execveat: the same through /proc */
    r = sys3(NR_execve, "/proc/self/fd/7", argv, envp);
  return r;
}

/* The call's sandbox: the same steps as a cold sandbox's pid 1 (contain.c), in the same order
 * (sandbox.c's timeline has both), from the template's root, whose own binds, rootfs, /dev and
 * identity each call keeps. Returns only in the code process, without shared memory. */
static int pid1(struct pid1 *p)
{
  p->sync = p->call.fds[0];
  /* Every signal stays blocked (zy_spawn blocked them): none runs a handler of the template's in
   * this shared memory; the ones relayed are taken with sigtimedwait. The code gets SIG_DFL for
   * them, as _code sets. */
  struct sigaction_k dfl = {0, 0, 0, 0};
  for (u64 i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sys4(NR_rt_sigaction, forwarded[i], &dfl, 0, 8);
  sys4(NR_rt_sigaction, SIGCHLD, &dfl, 0, 8);
  /* cgroup v1: the call's cgroup, before anything else */
  STEP(p, contain_join_cgroup(p->call.fds + 4, p->call.n_fds - 4, CE));
  for (int i = 4; i < p->call.n_fds; i++)
    sys1(NR_close, p->call.fds[i]);
  ids(p);
  STEP(p, contain_private(CE));
  CK(p, sys1(NR_chdir, "/"), "chdir", "/");
  const struct contain_fs fs = {
      .tmpfs = conf.tmpfs,
      .n_tmpfs = conf.n_fresh,
      .budgets = conf.budgets,
      .n_budgets = conf.n_budgets,
      .mask_proc = conf.mask_proc != 0,
      .masked = conf.mask,
      .n_masked = conf.n_mask,
      .readonly = conf.ro,
      .n_readonly = conf.n_ro,
  };
  int sys_fd;
  STEP(p, contain_mounts(&fs, &sys_fd, CE));
  sys1(NR_close, sys_fd);
  loopback_up(p);
  CK(p, sys1(NR_unshare, 0x02000000 /* CLONE_NEWCGROUP */), "unshare(CLONE_NEWCGROUP)", 0);
  fds(p);
  struct kstat pidns;
  CK(p, sys2(NR_stat, "/proc/self/ns/pid", &pidns), "stat", "/proc/self/ns/pid");
  int pass[2] = {5, -1}, n_pass = 1;
  if (conf.proxy)
    STEP(p, (pass[n_pass++] = contain_listen((unsigned short) conf.proxy, CE)));
  const struct contain_limits lim = {
      .nofile = conf.nofile,
      .fsize = conf.fsize,
      .sigpending = conf.sigpending,
      .msgqueue = conf.msgqueue,
      .memlock = conf.memlock,
      .degraded = conf.degraded != 0,
      .as = conf.memory,
      .nproc = conf.pids,
      .cpu_seconds = p->call.cpu_seconds,
  };
  STEP(p, contain_rlimits(&lim, CE));
  /* Not dumpable when it shares the template's memory: that flag is the memory's (callinit sets
   * it for pid 1 after the exec, and the code process for itself). */
  const struct contain_privs privs = {
      .drop_caps = true,
      .no_new_privs = true,
      .undumpable = !conf.share_memory,
      .main_prog = conf.main_prog,
      .main_len = conf.main_len,
      .except_prog = conf.except_prog,
      .except_len = conf.except_len,
  };
  STEP(p, contain_drop_privileges(&privs, CE));
  struct buf b = {p->msg, 0, sizeof p->msg};
  put(&b, "ready ");
  putu(&b, pidns.st_ino);
  put(&b, " ");
  putu(&b, pidns.st_dev);
  send_fds(p, p->msg, b.len, pass, n_pass);
  for (int i = 0; i < n_pass; i++)
    sys1(NR_close, pass[i]);
  /* sandboxd holds a pidfd on this process once it says go: until then it cannot exit. */
  char go[16];
  i64 n = sys4(NR_recvfrom, p->sync, go, sizeof go, 0);
  if (n != 2 || go[0] != 'g' || go[1] != 'o')
    sys1(NR_exit_group, 125);
  int ex[2];
  CK(p, sys2(NR_pipe2, ex, O_CLOEXEC), "pipe", 0);
  i64 code = sys5(NR_clone, 0x01000000 /* CHILD_SETTID */ | 0x00200000 /* CHILD_CLEARTID */ | SIGCHLD, 0, 0,
                  conf.tid_addr, 0);
  if (code == 0) {
    code_start(ex[0], ex[1]);
    return 0;
  }
  if (code < 0)
    fail(p, "fork", 0, code);
  int c = (int) code;
  sys3(NR_write, p->call.pipe_w, &c, sizeof c); /* the template goes on */
  sys1(NR_close, p->call.pipe_w);
  sys1(NR_close, ex[0]);
  i64 r = exec_init(c);
  sys2(NR_kill, c, SIGKILL);
  fail(p, "exec", "sandboxd-init", r);
}

/* pid 1 on a stack of its own, sharing the template's memory. */
static int pid1_shared(void *arg)
{
  struct pid1 p;
  zy_copy(&p.call, arg, sizeof p.call); /* the template's copy may be gone once it goes on */
  pid1(&p);
  return 125; /* (never: the code process resumes the template's context) */
}

/* ---- The template's side ---- */

/* The call's pid 1 (clone_flags: its namespaces), sharing this memory or a copy of it (share_memory);
 * when it has forked the code process: its pid. In the code process: 0. -errno if no pid 1 could
 * be made. Called with Python's fork hooks around it, the GIL held (PyDLL). */
EXPORT i64 zy_spawn(u64 clone_flags, struct zcall *call)
{
  if (conf.share_memory && ctx_save(&tmpl_ctx)) { /* the code process */
    for (int i = 0; i < MAX_STACKS; i++)
      if (stacks[i].base) {
        sys2(NR_munmap, stacks[i].base, STACK_SIZE);
        stacks[i].base = 0;
      }
    return 0;
  }
  if (!conf.ready)
    return -22;
  int slot = 0;
  while (slot < MAX_STACKS && stacks[slot].base)
    slot++;
  if (slot == MAX_STACKS)
    return -11;
  i64 base = 0;
  if (conf.share_memory) {
    base = SYS(NR_mmap, 0, STACK_SIZE, 3 /* RW */, 0x22 | 0x20000 /* PRIVATE|ANON|STACK */, -1, 0);
    if (base < 0 && base > -4096)
      return base;
    sys3(NR_mprotect, base, 4096, 0); /* the guard page */
  }
  int pfd[2];
  i64 r = sys2(NR_pipe2, pfd, O_CLOEXEC);
  if (r < 0) {
    if (base)
      sys2(NR_munmap, base, STACK_SIZE);
    return r;
  }
  call->pipe_w = pfd[1];
  u64 all = ~0UL, old;
  sys4(NR_rt_sigprocmask, 2 /* SIG_SETMASK */, &all, &old, 8);
  i64 pid;
  if (conf.share_memory) {
    pid =
        clone_on(clone_flags | 0x100 /* CLONE_VM */ | SIGCHLD, (char *) base + STACK_SIZE, pid1_shared, call);
  } else {
    /* A copy, as fork's child: pid 1 goes on here, on its copy of this stack. */
    pid = sys5(NR_clone, clone_flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
      struct pid1 p;
      zy_copy(&p.call, call, sizeof p.call);
      sys1(NR_close, pfd[0]);
      pid1(&p);
      return 0; /* the code process */
    }
  }
  sys1(NR_close, pfd[1]);
  if (pid < 0) {
    sys4(NR_rt_sigprocmask, 2, &old, 0, 8);
    sys1(NR_close, pfd[0]);
    if (base)
      sys2(NR_munmap, base, STACK_SIZE);
    return pid;
  }
  if (base) {
    stacks[slot].pid = (int) pid;
    stacks[slot].base = (char *) base;
  }
  /* Until pid 1 has forked the code (its pid), or ended (EOF): then this memory may change again. */
  int code;
  while (sys3(NR_read, pfd[0], &code, sizeof code) == -4 /* EINTR */)
    ;
  sys1(NR_close, pfd[0]);
  sys4(NR_rt_sigprocmask, 2, &old, 0, 8); /* (a handler runs only now, after the copy) */
  return pid;
}

/* pid 1 was reaped: its stack goes. */
EXPORT void zy_reaped(int pid)
{
  for (int i = 0; i < MAX_STACKS; i++)
    if (stacks[i].base && stacks[i].pid == pid) {
      sys2(NR_munmap, stacks[i].base, STACK_SIZE);
      stacks[i].base = 0;
    }
}
