/* SPDX-License-Identifier: Apache-2.0 */
/* The code's first exe (exec_shim.c): pid 1's child, a fork of sandboxd, execs this program from
 * a sealed memfd, and this program execs the code. So the process whose execve resolves the
 * code's path, its #! line and its ELF interpreter is never sandboxd: a hostile image whose
 * python3 is a link to /proc/self/exe (runc's CVE-2019-5736) reaches this sealed copy, not the
 * host's binary.
 *
 * argv and envp are the code's. Fd EXEC_ERR_FD (sandbox.h's SBX_EXEC_ERR_FD) is the exec-error
 * pipe to pid 1, open and not close-on-exec; this program marks it close-on-exec, execs argv[0]
 * and, if that fails, says so there as init.c's exec_code would ({EXEC_FAILED_PROGRAM, errno}). Started any
 * other way (the code's path led back to /proc/self/exe, or a #! line names it), the pipe is gone: it
 * refuses, exit 126. A static, freestanding program: it runs in any rootfs. x86_64 only. */
#if !defined(__x86_64__)
#error "execshim.c is x86_64 only (the Makefile builds it there only)"
#endif
#include "rawsys.h"

#define EXEC_ERR_FD 100
#define F_GETFD 1
#define F_SETFD 2
#define FD_CLOEXEC 1

static const char refused[] = "sandboxd: refused: the program leads back to the sandbox's exec helper "
                              "(/proc/self/exe)\n";

__attribute__((noreturn, used)) static void shim_main(i64 *sp)
{
  i64 argc = sp[0];
  char **argv = (char **) (sp + 1);
  char **envp = argv + argc + 1;
  if (argc < 1 || sys3(NR_fcntl, EXEC_ERR_FD, F_GETFD, 0) != 0) {
    sys3(NR_write, 2, refused, sizeof refused - 1);
    sys1(NR_exit_group, 126);
  }
  sys3(NR_fcntl, EXEC_ERR_FD, F_SETFD, FD_CLOEXEC);
  int failed[2] = {3 /* init.c's EXEC_FAILED_PROGRAM */, (int) -sys3(NR_execve, argv[0], argv, envp)};
  sys3(NR_write, EXEC_ERR_FD, failed, sizeof failed);
  sys1(NR_exit_group, 127);
  __builtin_unreachable();
}

__asm__(".text\n"
        ".globl _start\n.type _start,@function\n"
        "_start:\n"
        "  xor %ebp,%ebp\n  mov %rsp,%rdi\n  and $-16,%rsp\n  call shim_main\n  hlt\n"
        ".size _start, .-_start\n");
