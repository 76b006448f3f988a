/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's C pid 1 (inside/zygote.c, which links sandbox/contain.c: the steps of every
 * sandbox) and the init it execs (inside/callinit.c): built freestanding for x86_64 (Makefile),
 * assembled into this object and handed to each template as sealed memfds with its setup, which
 * it loads (dlopen) and execs from. Elsewhere there is no fork mode.
 *
 * pid 1 shares the template's memory while it builds the call's sandbox and leaves it by exec'ing
 * callinit (every policy that runs code allows an exec: the code is exec'd under its filter),
 * unless SANDBOXD_FORK_ZYGOTE=0 (the tests run that way too): then it is a copy of the template,
 * as a fork's child, which costs more CPU per call. */
#include "sandbox/fork_zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/util.h"
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

int fork_zygote_fds(int ret[2], struct fork_zygote_mode *mode, sbx_error_t *err)
{
  ret[0] = ret[1] = -1;
  *mode = (struct fork_zygote_mode){.share_memory = true};
#if HAVE_ZYGOTE
  const char *env = getenv("SANDBOXD_FORK_ZYGOTE");
  if (env && strcmp(env, "0") == 0)
    mode->share_memory = false, mode->why = "SANDBOXD_FORK_ZYGOTE=0";
  if ((ret[0] = memfd_sealed("sandboxd-zygote", fork_zygote_so,
                             (size_t) (fork_zygote_so_end - fork_zygote_so), err)) < 0 ||
      (ret[1] = memfd_sealed("sandboxd-init", fork_callinit, (size_t) (fork_callinit_end - fork_callinit),
                             err)) < 0) {
    if (ret[0] >= 0)
      close(ret[0]);
    ret[0] = -1;
    return sbx_error_prefix(err, "fork template: its C pid 1");
  }
  return 0;
#else

  return sbx_error_set(err, ENOSYS,
                       "fork template: no C pid 1 in this build (x86_64 only): use --warm-mode prestart");
#endif
}
