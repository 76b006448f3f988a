/* SPDX-License-Identifier: Apache-2.0 */
/* Host MCP servers for a sandbox, wired the same way for `sandboxd exec` and `sandboxd mcp`: the
 * configuration, the clients that run the servers, the `mcp` package mounted inside, and for each
 * run a proxy (the bridge) with the environment that names its servers. */
#ifndef SBX_HOST_SERVERS_H
#define SBX_HOST_SERVERS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "hostmcp/mcp_config.h"

struct mcp_hosts;
struct proxy;
struct sbx_bind;
struct sbx_policy;

/* The environment entries of a sandbox with the `mcp` package (package_env below). */
#define HOST_SERVERS_N_PACKAGE_ENV 2

struct host_servers {
  struct mcp_config *cfg;  /* the configured servers (n may be 0), once loaded */
  struct mcp_hosts *hosts; /* their clients (each server starts on first use), once started */
  char *python_dir;        /* the `mcp` package for inside, once found, or NULL */
  int python_fd;           /* with python_dir: it, held (sbx_bind.fd) */
  /* The policy whose proxy_servers every proxy checks (not owned), once started. */
  const struct sbx_policy *policy;
  /* What every sandbox with the `mcp` package gets in its environment, once started: PYTHONPATH,
   * and the largest request the package may send (the policy's proxy_request_limit). */
  char *package_env[HOST_SERVERS_N_PACKAGE_ENV];
  char max_request_env[48];
};

/* The environment entries a run with servers gets (host_servers_env): the package's, and the
 * servers it has. */
#define HOST_SERVERS_N_ENV (HOST_SERVERS_N_PACKAGE_ENV + 1)

/* Read the configuration (opts: --config, --import-claude). */
int host_servers_load(struct host_servers *hs, const struct mcp_config_options *opts, sbx_error_t *err);
/* Find the `mcp` package the code imports (paths_python_dir). */
int host_servers_find_helpers(struct host_servers *hs, sbx_error_t *err);
/* Ready the clients (the servers' stderr goes to log_fd; -1: nowhere) and have every proxy check
 * the policy's proxy_servers (policy must outlive hs). */
int host_servers_start(struct host_servers *hs, const struct sbx_policy *policy, int log_fd,
                       sbx_error_t *err);
/* The bridge for one run that may call the n named servers (n may be 0: discovery only):
 * *ret_sandbox_fd is the sandbox's end (sbx_spec.bridge_fd); with ret_sandbox_fd NULL the caller
 * brings the socket (proxy_adopt_fd). Fails if the `mcp` package was not found. */
int host_servers_proxy(const struct host_servers *hs, const char *const *names, size_t n, int *ret_sandbox_fd,
                       struct proxy **ret, sbx_error_t *err);
/* Write what a run with proxy adds to its environment (package_env, the servers it has) to
 * env[0..HOST_SERVERS_N_ENV); returns HOST_SERVERS_N_ENV. */
size_t host_servers_env(const struct host_servers *hs, const struct proxy *proxy, char **env);
/* Whether a run that lists no servers still gets a bridge, for discovery: some configured server
 * is allowed by the policy and the `mcp` package was found. */
bool host_servers_discovery(const struct host_servers *hs);
/* The `mcp` package's read-only bind at PROXY_PYTHON_DST in *bind: 1, or 0 if it was not found. */
size_t host_servers_bind(const struct host_servers *hs, struct sbx_bind *bind);
/* Stops the servers (after the proxies using them are gone). */
void host_servers_free(struct host_servers *hs);

#endif
