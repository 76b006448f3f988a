/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's policy and the limits derived for it (fork_policy.c). */
#ifndef SBX_FORK_POLICY_H
#define SBX_FORK_POLICY_H

#include <stdint.h>

#include "base/error.h"

struct server;
struct sbx_policy;
struct sbx_rule;

/* The template's policy from the server's, into *ret; its rules in *ret_rules (the caller frees
 * them, also on failure). */
int fork_policy_make(const struct server *srv, struct sbx_policy *ret, struct sbx_rule **ret_rules,
                     sbx_error_t *err);
/* Without a cgroup, the template's pids (its RLIMIT_NPROC): room for every call in flight at
 * per_call, within sandboxd's own hard limit. */
uint64_t fork_policy_pids(const struct server *srv, uint64_t per_call);

#endif
