/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's C pid 1 (inside/zygote.c) and the init it execs (inside/callinit.c), linked
 * into this binary and handed to each template as sealed memfds (fork_zygote.c). */
#ifndef SBX_FORK_ZYGOTE_H
#define SBX_FORK_ZYGOTE_H

#include "base/error.h"

struct sbx_policy;

/* ret[0]: zygote.so, ret[1]: callinit, both sealed memfds (O_CLOEXEC), for a template whose calls
 * run under p. Both -1 and *why set when this build, p or the host rules the C pid 1 out (the
 * template keeps the Python one). Always 0. */
int fork_zygote_fds(const struct sbx_policy *p, int ret[2], const char **why, sbx_error_t *err);

#endif
