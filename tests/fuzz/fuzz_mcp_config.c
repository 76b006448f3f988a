/* libFuzzer target: the host MCP servers config parser, then the proxy set up for every server it
 * names (listed twice, as a caller might), which builds SANDBOXD_MCP_SERVERS from the names.
 * Nothing is started: host servers are spawned on first use, and no call is made. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostmcp/mcp_client.h"
#include "hostmcp/mcp_config.h"
#include "hostmcp/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_proxy(struct mcp_hosts *hosts, const struct mcp_config *c)
{
  const char *names[2 * MCP_CONFIG_MAX_SERVERS];
  size_t n = 0, want = strlen("SANDBOXD_MCP_SERVERS=");
  for (size_t i = 0; i < c->n; i++) {
    names[n++] = c->servers[i].name;
    want += strlen(c->servers[i].name) + (i ? 1 : 0);
  }
  for (size_t i = 0; i < c->n; i++)
    names[n++] = c->servers[i].name;
  struct proxy *p = NULL;
  int sandbox_fd = -1;
  sbx_error_t err;
  if (proxy_new(hosts, NULL, names, n, NULL, &sandbox_fd, &p, &err) < 0)
    return;
  /* Every name once, comma-separated, nothing cut. */
  const char *env = proxy_env(p);
  if (strncmp(env, "SANDBOXD_MCP_SERVERS=", 21) != 0 || strlen(env) != want)
    abort();
  close(sandbox_fd);
  proxy_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct mcp_config *c = calloc(1, sizeof *c);
  if (!c)
    return 0;
  sbx_error_t err;
  struct mcp_hosts *hosts = NULL;
  if (mcp_config_parse((const char *) data, size, "fuzz.json", "/usr/bin/sandboxd", c, &err) == 0 && c->n &&
      mcp_hosts_new(c, -1, &hosts, &err) == 0) {
    check_proxy(hosts, c);
    mcp_hosts_free(hosts);
  }
  mcp_config_free(c);
  return 0;
}
