/* SPDX-License-Identifier: Apache-2.0 */
/* The network part of a policy that is not parsing: the allowlist entries both the policy file and
 * --allow-host add, what the command line may ask (max_network), and the run-time check (policy.h).
 * A wildcard over a public suffix is refused here, for both (psl.h: the one file this reads). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "policy/policy.h"
#include "policy/psl.h"

/* Append one allowlist entry, refusing duplicates and more than `cap` (messages without a place). */
int policy_push_allow_host(struct sbx_policy *p, const char *pattern, const char *reason, size_t cap,
                           sbx_error_t *err)
{
  struct egress_rule r;
  if (egress_rule_parse(pattern, &r, err) < 0 ||
      (r.kind == EGRESS_WILDCARD && psl_check_wildcard(r.host, err) < 0))
    return sbx_error_prefix(err, "`%s`", pattern);
  if (reason && bufprintf(r.reason, sizeof r.reason, NULL, "%s", reason) < 0)
    return sbx_error_set(err, 0, "`%s`: the reason is longer than %d bytes", pattern, EGRESS_REASON_MAX);
  for (size_t i = 0; i < p->n_allow_hosts; i++)
    if (p->allow_hosts[i].kind == r.kind && p->allow_hosts[i].port == r.port &&
        !strcmp(p->allow_hosts[i].host, r.host))
      return sbx_error_set(err, 0, "`%s` is listed twice", pattern);
  if (p->n_allow_hosts >= cap)
    return sbx_error_set(err, 0, "`%s`: more than %zu hosts", pattern, cap);
  struct egress_rule *a = realloc(p->allow_hosts, (p->n_allow_hosts + 1) * sizeof *a);
  if (!a)
    return sbx_error_set(err, ENOMEM, "allow_host");
  p->allow_hosts = a;
  a[p->n_allow_hosts++] = r;
  return 0;
}

int policy_add_allow_host(struct sbx_policy *p, const char *option, const char *pattern, sbx_error_t *err)
{
  if (p->max_network == SBX_NET_NONE)
    return sbx_error_set(err, 0, "%s %s: policy `%s` allows no network (max_network none)", option, pattern,
                         p->name);
  if (policy_push_allow_host(p, pattern, NULL, SBX_POLICY_MAX_ALLOW_HOSTS + SBX_CLI_MAX_ALLOW_HOSTS, err) < 0)
    return sbx_error_prefix(err, "%s", option);
  p->network = SBX_NET_PROXY;
  return 0;
}

int policy_check_network(const struct sbx_policy *p, sbx_error_t *err)
{
  /* The egress proxy serves `network proxy`; an empty allowlist is allowed (every request is
   * refused, and audited). */
  (void) p;
  (void) err;
  return 0;
}

int policy_allow_opts_add(struct policy_allow_opts *o, const char *pattern, sbx_error_t *err)
{
  struct egress_rule r;
  if (egress_rule_parse(pattern, &r, err) < 0 ||
      (r.kind == EGRESS_WILDCARD && psl_check_wildcard(r.host, err) < 0))
    return sbx_error_prefix(err, "--allow-host `%s`", pattern);
  if (o->n >= SBX_CLI_MAX_ALLOW_HOSTS)
    return sbx_error_set(err, 0, "too many --allow-host options (at most %d)", SBX_CLI_MAX_ALLOW_HOSTS);
  o->patterns[o->n++] = pattern;
  return 0;
}

int policy_apply_network(struct sbx_policy *p, const struct policy_allow_opts *o, sbx_error_t *err)
{
  for (size_t i = 0; i < o->n; i++)
    if (policy_add_allow_host(p, "--allow-host", o->patterns[i], err) < 0)
      return -1;
  return policy_check_network(p, err);
}
