/* Unit tests for the sandbox's environment (sandbox_build_env in src/sandbox/sandbox.c): the image's Env
 * under the policy's under --env, and the policy's ${memory_mib} written in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"

static size_t count(char **env)
{
  size_t n = 0;
  while (env[n])
    n++;
  return n;
}

int main(void)
{
  char *pol_env[] = {"PATH=/usr/bin", "NODE_OPTIONS=--max-old-space-size=${memory_mib}",
                     "TWICE=${memory_mib}:${memory_mib}", "PLAIN=$HOME {memory_mib}"};
  struct sbx_policy p = {.env = pol_env, .n_env = 4};
  char *image[] = {"PATH=/image", "LANG=C.UTF-8", "NOEQUALS"};
  struct sbx_spec spec = {.policy = &p, .base_env = image, .n_base_env = 3};
  spec.limits.memory_bytes = 300ULL << 20;
  char **env = sandbox_build_env(&spec);
  CHECK(env && count(env) == 5);
  CHECK(env && !strcmp(env[0], "LANG=C.UTF-8") && !strcmp(env[1], "PATH=/usr/bin"));
  CHECK(env && !strcmp(env[2], "NODE_OPTIONS=--max-old-space-size=300"));
  CHECK(env && !strcmp(env[3], "TWICE=300:300") && !strcmp(env[4], "PLAIN=$HOME {memory_mib}"));
  free(env);

  /* --env replaces a policy value whole, variable and all; sizes round down to whole MiB. */
  char *extra[] = {"NODE_OPTIONS=--no-warnings"};
  spec.extra_env = extra;
  spec.n_extra_env = 1;
  spec.limits.memory_bytes = (4ULL << 30) + 1000;
  env = sandbox_build_env(&spec);
  CHECK(env && count(env) == 5 && !strcmp(env[2], "TWICE=4096:4096") &&
        !strcmp(env[4], "NODE_OPTIONS=--no-warnings"));
  free(env);
  return check_summary("test_env");
}
