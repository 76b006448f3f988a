/* SPDX-License-Identifier: Apache-2.0 */
/* A forked call's pid 1 once the code runs (zygote.c execs it): it leaves the template's memory,
 * which pid 1 shared while it built the sandbox, before the code process may run. It relays
 * signals to the code, reaps, and reports the code's status on the sync socket (fd 4), as a cold
 * sandbox's init does (sandbox/init.c). Every signal is blocked across the exec; the code's pid is in
 * SANDBOXD_CODE_PID. A static, freestanding program: it runs in any rootfs. x86_64 only. */
#if !defined(__x86_64__)
#error "callinit.c is x86_64 only (the Makefile builds it there only)"
#endif
#include "rawsys.h"

#define SYNC_FD 4

__attribute__((noreturn, used)) static void init_main(i64 *sp)
{
  i64 argc = sp[0];
  char **envp = (char **) (sp + 1 + argc + 1);
  int code = 0;
  for (char **e = envp; *e; e++) {
    const char *k = "SANDBOXD_CODE_PID=", *s = *e;
    while (*k && *k == *s)
      k++, s++;
    if (*k)
      continue;
    while (*s >= '0' && *s <= '9')
      code = code * 10 + (*s++ - '0');
  }
  if (code <= 0)
    sys1(NR_exit_group, 125);
  /* Not dumpable, as sandboxd's init: the code cannot trace it or open its
   * memory (it holds the sync socket). */
  sys2(NR_prctl, 4 /* PR_SET_DUMPABLE */, 0);
  sys2(NR_prctl, 15 /* PR_SET_NAME */, "sandboxd"); /* as a cold sandbox's pid 1 (not the memfd's name) */
  relay_and_report(SYNC_FD, code);
}

__asm__(".text\n"
        ".globl _start\n.type _start,@function\n"
        "_start:\n"
        "  xor %ebp,%ebp\n  mov %rsp,%rdi\n  and $-16,%rsp\n  call init_main\n  hlt\n"
        ".size _start, .-_start\n");
