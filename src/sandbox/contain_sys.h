/* SPDX-License-Identifier: Apache-2.0 */
/* Raw system calls for the setup steps (contain.c). A call returns the result or -errno; it
 * touches no errno and no memory but what its arguments point to. That is what lets the same
 * steps run in sandboxd's child (the cold path) and in the fork template's C pid 1
 * (inside/zygote.c), which shares the template's memory and has no libc.
 *
 * Only the kernel's own headers (<asm/unistd.h> and <linux/...>) may be included with this one:
 * no libc header, so the file builds freestanding as well as in sandboxd. */
#ifndef SBX_SANDBOX_CONTAIN_SYS_H
#define SBX_SANDBOX_CONTAIN_SYS_H

#include <asm/unistd.h>

#if defined(__x86_64__)
static inline long contain_sys6(long n, long a, long b, long c, long d, long e, long f)
{
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#elif defined(__aarch64__)
static inline long contain_sys6(long n, long a, long b, long c, long d, long e, long f)
{
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  register long x5 __asm__("x5") = f;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory", "cc");
  return x0;
}
#elif !defined(SBX_FREESTANDING)
/* Elsewhere, in sandboxd only (the fork template's C pid 1 is built for x86_64): libc's. */
extern long syscall(long, ...);
extern int *__errno_location(void);
static inline long contain_sys6(long n, long a, long b, long c, long d, long e, long f)
{
  long r = syscall(n, a, b, c, d, e, f);
  return r == -1 ? -*__errno_location() : r;
}
#else
#error "contain_sys.h: no raw system calls for this architecture"
#endif

#define CONTAIN_SYS_(n, a, b, c, d, e, f, ...)                                                               \
  contain_sys6((n), (long) (a), (long) (b), (long) (c), (long) (d), (long) (e), (long) (f))
/* csys(__NR_x, args...): up to six arguments, the rest zero. */
#define csys(...) CONTAIN_SYS_(__VA_ARGS__, 0, 0, 0, 0, 0, 0)

/* No libc: a bounded string being built (messages, file contents, paths), cut to fit. */
struct buf {
  char *p;
  unsigned long len, cap;
};
static inline void put(struct buf *b, const char *s)
{
  while (*s && b->len + 1 < b->cap)
    b->p[b->len++] = *s++;
  b->p[b->len] = '\0';
}
static inline void putu(struct buf *b, unsigned long v)
{
  char t[24];
  int i = 23;
  t[i] = '\0';
  do
    t[--i] = (char) ('0' + v % 10);
  while (v /= 10);
  put(b, t + i);
}
static inline void puti(struct buf *b, long v)
{
  if (v < 0) {
    put(b, "-");
    v = -v;
  }
  putu(b, (unsigned long) v);
}

#endif
