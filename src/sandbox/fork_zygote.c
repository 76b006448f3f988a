/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's C pid 1 (inside/zygote.c) and the init it execs (inside/callinit.c): built
 * freestanding for x86_64 (Makefile), assembled into this object and handed to each template as
 * sealed memfds with its setup, which it loads (dlopen) and execs from. A template without them
 * keeps the Python pid 1 (template.py _call and _pid1): same sandbox, more CPU per call.
 *
 * SANDBOXD_FORK_ZYGOTE=0 leaves them out (the tests run the Python pid 1 that way too). */
#include "sandbox/fork_zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/util.h"
#include "kernel/seccomp.h"
#include "sandbox/exec_shim.h"

#if defined(__x86_64__) && defined(ZYGOTE_BUILD)
__asm__(".section .rodata\n"
        ".balign 16\n"
        "fork_zygote_so:\n"
        ".incbin \"" ZYGOTE_BUILD "/zygote.so\"\n"
        "fork_zygote_so_end:\n"
        ".balign 16\n"
        "fork_callinit:\n"
        ".incbin \"" ZYGOTE_BUILD "/callinit\"\n"
        "fork_callinit_end:\n"
        ".previous\n");
extern const char fork_zygote_so[], fork_zygote_so_end[], fork_callinit[], fork_callinit_end[];
#define HAVE_ZYGOTE 1
#else
#define HAVE_ZYGOTE 0
#endif

int fork_zygote_fds(const struct sbx_policy *p, int ret[2], const char **why, sbx_error_t *err)
{
  ret[0] = ret[1] = -1;
  *why = NULL;
  const char *env = getenv("SANDBOXD_FORK_ZYGOTE");
  if (env && strcmp(env, "0") == 0) {
    *why = "SANDBOXD_FORK_ZYGOTE=0";
    return 0;
  }
#if HAVE_ZYGOTE
  /* pid 1 leaves the template's memory by an exec under the call's filter (zygote.c). */
  if (!seccomp_policy_allows(p, "execveat") && !seccomp_policy_allows(p, "execve")) {
    *why = "the policy allows neither execve nor execveat, by which it leaves the template's memory";
    return 0;
  }
  static char said[300];
  if ((ret[0] = memfd_sealed("sandboxd-zygote", fork_zygote_so,
                             (size_t) (fork_zygote_so_end - fork_zygote_so), err)) < 0 ||
      (ret[1] = memfd_sealed("sandboxd-init", fork_callinit, (size_t) (fork_callinit_end - fork_callinit),
                             err)) < 0) {
    if (ret[0] >= 0)
      close(ret[0]);
    ret[0] = -1;
    bufprintf_cut(said, sizeof said, "%s", err->msg);
    *why = said;
  }
  return 0;
#else
  (void) p, (void) err;
  *why = "not built for this architecture";
  return 0;
#endif
}
