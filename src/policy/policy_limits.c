/* SPDX-License-Identifier: Apache-2.0 */
/* What a run gets: the limits a command line or a tool call asks for (--timeout, --memory, ...),
 * resolved against the policy's defaults and capped by its max_* keys. Apart from policy.c, which
 * parses the policy. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "policy/policy.h"

void limits_unset(struct sbx_limits *l)
{
  memset(l, 0xff, sizeof *l);
}

int policy_resolve_limits(const struct sbx_policy *p, const struct sbx_limits *req, struct sbx_limits *ret,
                          sbx_error_t *err)
{
  static const struct {
    const char *opt, *key;
    size_t off;
  } f[] = {
      {"--timeout", "timeout", offsetof(struct sbx_limits, timeout_ms)},
      {"--memory", "memory", offsetof(struct sbx_limits, memory_bytes)},
      {"--pids", "pids", offsetof(struct sbx_limits, pids)},
      {"--cpus", "cpus", offsetof(struct sbx_limits, cpus_milli)},
      {"--tmp-size", "tmp_size", offsetof(struct sbx_limits, tmp_bytes)},
      {"--workspace-size", "workspace_size", offsetof(struct sbx_limits, workspace_bytes)},
      {"--shm-size", "shm_size", offsetof(struct sbx_limits, shm_bytes)},
      {"--nofile", "nofile", offsetof(struct sbx_limits, nofile)},
      {"--fsize", "fsize", offsetof(struct sbx_limits, fsize_bytes)},
      {"--output-limit", "output_limit", offsetof(struct sbx_limits, output_bytes)},
  };
  struct sbx_limits out = p->limits;
  for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
    uint64_t want = *(const uint64_t *) ((const char *) req + f[i].off);
    uint64_t max = *(const uint64_t *) ((const char *) &p->max + f[i].off);
    if (want == UINT64_MAX)
      continue;
    if (want == 0)
      return sbx_error_set(err, 0, "%s must be greater than 0", f[i].opt);
    if (want > max)
      return sbx_error_set(err, 0,
                           "%s is above the policy `%s` maximum (max_%s); use a policy that allows more",
                           f[i].opt, p->name, f[i].key);
    *(uint64_t *) ((char *) &out + f[i].off) = want;
  }
  *ret = out;
  return 0;
}
