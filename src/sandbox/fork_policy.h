/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's policy and the limits derived for it (fork_policy.c). */
#ifndef SBX_FORK_POLICY_H
#define SBX_FORK_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct sbx_policy;
struct sbx_rule;

/* The template's policy, into *ret, from p, the policy of the calls it serves, at most max_calls
 * of them at once (`sandboxd mcp --max-concurrent`, which its warnings name); its rules in
 * *ret_rules (the caller frees them, also on failure). */
int fork_policy_make(const struct sbx_policy *p, size_t max_calls, struct sbx_policy *ret,
                     struct sbx_rule **ret_rules, sbx_error_t *err);
/* Without a cgroup, the template's pids (its RLIMIT_NPROC): room for max_calls calls at per_call,
 * within sandboxd's own hard limit. */
uint64_t fork_policy_pids(size_t max_calls, uint64_t per_call);

#endif
