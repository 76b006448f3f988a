/* SPDX-License-Identifier: Apache-2.0 */
/* The environment the code gets: the image's, overridden by the policy's (with the memory limit
 * named where the policy asks), the network proxy's variables, and --env last. */
#include "sandbox/sandbox.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "egress/egress_proxy.h"
#include "policy/policy.h"

static bool env_has(char *const *env, size_t n, const char *entry)
{
  size_t klen = strcspn(entry, "=");
  for (size_t i = 0; i < n; i++)
    if (strncmp(env[i], entry, klen) == 0 && env[i][klen] == '=')
      return true;
  return false;
}

/* src with every POLICY_ENV_MEMORY_MIB replaced by mib, written at out (room: env_room). */
static char *env_expand(const char *src, const char *mib, char **out)
{
  char *start = *out, *o = start;
  size_t tl = strlen(POLICY_ENV_MEMORY_MIB), ml = strlen(mib);
  for (const char *s = src; *s;) {
    if (!strncmp(s, POLICY_ENV_MEMORY_MIB, tl)) {
      memcpy(o, mib, ml), o += ml, s += tl;
    } else {
      *o++ = *s++;
    }
  }
  *o++ = '\0';
  *out = o;
  return start;
}

static size_t env_room(const char *src, size_t mib_len)
{
  size_t n = strlen(src) + 1;
  for (const char *v = strstr(src, POLICY_ENV_MEMORY_MIB); v; v = strstr(v + 1, POLICY_ENV_MEMORY_MIB))
    n += mib_len;
  return n;
}

char **sandbox_build_env(const struct sbx_spec *spec)
{
  const struct sbx_policy *p = spec->policy;
  /* network proxy: the proxy's variables, below --env (egress_proxy.h). */
  size_t n_proxy = p->network == SBX_NET_PROXY ? EGRESS_N_ENV : 0;
  size_t n = spec->n_base_env + p->n_env + n_proxy + spec->n_extra_env;
  /* The policy's values that name the memory limit are expanded into one block after the
   * pointers, so that the caller's free() releases all of it. */
  char mib[24];
  if (bufprintf(mib, sizeof mib, NULL, "%llu", (unsigned long long) (spec->limits.memory_bytes >> 20)) < 0)
    return NULL;
  size_t room = 0;
  for (size_t i = 0; i < p->n_env; i++)
    if (strstr(p->env[i], POLICY_ENV_MEMORY_MIB))
      room += env_room(p->env[i], strlen(mib));
  char **env = calloc(1, (n + 1) * sizeof *env + room);
  if (!env)
    return NULL;
  char *store = (char *) (env + n + 1);
  size_t k = 0;
  for (size_t i = 0; i < spec->n_base_env; i++)
    if (!env_has(p->env, p->n_env, spec->base_env[i]) &&
        !env_has(spec->extra_env, spec->n_extra_env, spec->base_env[i]) && strchr(spec->base_env[i], '='))
      env[k++] = spec->base_env[i];
  for (size_t i = 0; i < p->n_env; i++)
    if (!env_has(spec->extra_env, spec->n_extra_env, p->env[i]))
      env[k++] = strstr(p->env[i], POLICY_ENV_MEMORY_MIB) ? env_expand(p->env[i], mib, &store) : p->env[i];
  for (size_t i = 0; i < n_proxy; i++)
    if (!env_has(spec->extra_env, spec->n_extra_env, egress_proxy_env[i]) &&
        !env_has(p->env, p->n_env, egress_proxy_env[i]))
      env[k++] = egress_proxy_env[i];
  for (size_t j = 0; j < spec->n_extra_env; j++)
    env[k++] = spec->extra_env[j];
  env[k] = NULL;
  return env;
}
