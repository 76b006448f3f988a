/* SPDX-License-Identifier: Apache-2.0 */
/* Host MCP servers for a sandbox: one wiring shared by exec and mcp (host_servers.h). */
#include "run/host_servers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/paths.h"
#include "base/util.h"
#include "hostmcp/mcp_client.h"
#include "hostmcp/proxy.h"
#include "policy/policy.h"
#include "run/binds.h"
#include "sandbox/sandbox.h"

int host_servers_load(struct host_servers *hs, const struct mcp_config_options *opts, sbx_error_t *err)
{
  return mcp_config_load(opts, &hs->cfg, err);
}

int host_servers_find_helpers(struct host_servers *hs, sbx_error_t *err)
{
  _cleanup_free_ char *dir = NULL;
  if (paths_python_dir(&dir, err) < 0)
    return -1;
  /* Held and checked in each sandbox, as every bind source is (binds.h). */
  return bind_source_open("the Python helpers", dir, NULL, &hs->python_dir, &hs->python_fd, err) < 0 ? -1 : 0;
}

int host_servers_start(struct host_servers *hs, const struct sbx_policy *policy, int log_fd, sbx_error_t *err)
{
  if (mcp_hosts_new(hs->cfg, log_fd, &hs->hosts, err) < 0)
    return -1;
  hs->policy = policy;
  bufprintf_cut(hs->max_request_env, sizeof hs->max_request_env, PROXY_MAX_REQUEST_ENV "=%u",
                proxy_max_request(policy));
  hs->package_env[0] = "PYTHONPATH=" PROXY_PYTHON_DST;
  hs->package_env[1] = hs->max_request_env;
  return 0;
}

int host_servers_proxy(const struct host_servers *hs, const char *const *names, size_t n, int *ret_sandbox_fd,
                       struct proxy **ret, sbx_error_t *err)
{
  if (!hs->python_dir)
    return sbx_error_set(err, ENOENT,
                         "the sandbox's Python helpers (mcp package) were not found next to sandboxd");
  return proxy_new(hs->hosts, hs->policy, names, n, NULL, ret_sandbox_fd, ret, err);
}

size_t host_servers_env(const struct host_servers *hs, const struct proxy *proxy, char **env)
{
  memcpy(env, hs->package_env, sizeof hs->package_env);
  env[HOST_SERVERS_N_PACKAGE_ENV] = (char *) proxy_env(proxy);
  return HOST_SERVERS_N_ENV;
}

bool host_servers_discovery(const struct host_servers *hs)
{
  for (size_t i = 0; hs->python_dir && hs->cfg && i < hs->cfg->n; i++)
    if (!hs->policy || policy_allows_server(hs->policy, hs->cfg->servers[i].name))
      return true;
  return false;
}

size_t host_servers_bind(const struct host_servers *hs, struct sbx_bind *bind)
{
  if (!hs->python_dir)
    return 0;
  *bind = (struct sbx_bind){.src = hs->python_dir, .dst = PROXY_PYTHON_DST, .rw = false, .fd = hs->python_fd};
  return 1;
}

void host_servers_free(struct host_servers *hs)
{
  mcp_hosts_free(hs->hosts);
  mcp_config_free(hs->cfg);
  if (hs->python_dir)
    close(hs->python_fd);
  free(hs->python_dir);
  *hs = (struct host_servers){0};
}
