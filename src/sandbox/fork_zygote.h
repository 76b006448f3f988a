/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's C pid 1 (inside/zygote.c) and the init it execs (inside/callinit.c), linked
 * into this binary and handed to each template as sealed memfds (fork_zygote.c). */
#ifndef SBX_FORK_ZYGOTE_H
#define SBX_FORK_ZYGOTE_H

#include <stdbool.h>

#include "base/error.h"

/* How each call's pid 1 runs. */
struct fork_zygote_mode {
  bool share_memory; /* it shares the template's memory (CLONE_VM) until it execs callinit */
  const char *why;   /* why not shared (NULL when it is) */
};

/* ret[0]: zygote.so, ret[1]: callinit, both sealed memfds (O_CLOEXEC), for a template, and
 * *mode. -1 when this build has no C pid 1 (x86_64 only): then there is no fork
 * mode. */
int fork_zygote_fds(int ret[2], struct fork_zygote_mode *mode, sbx_error_t *err);

#endif
