/* SPDX-License-Identifier: Apache-2.0 */
/* Host MCP servers config: `{"mcpServers": {NAME: {command, args, env, cwd, description}}}`, the
 * format Claude Code and Claude Desktop use. Pure apart from reading the files and the
 * environment: no processes are started here (that is mcp_client.c). */
#ifndef SBX_MCP_CONFIG_H
#define SBX_MCP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

#define MCP_CONFIG_MAX_SERVERS 64
#define MCP_CONFIG_MAX_NAME 64
#define MCP_CONFIG_MAX_ARGS 256
#define MCP_CONFIG_MAX_ENV 256
#define MCP_CONFIG_MAX_FILE (4u << 20)
#define MCP_CLAUDE_MAX_FILE (256u << 20)
#define MCP_CONFIG_MAX_VALUE 65536 /* any one string after ${VAR} expansion */

struct mcp_server_config {
  char *name;  /* [A-Za-z0-9_.-]{1,64} */
  char **argv; /* argv[0] is the command; NULL-terminated */
  size_t argc;
  char **env; /* NAME=VALUE, configured env only; NULL-terminated */
  size_t n_env;
  char *cwd;         /* NULL: sandboxd's own */
  char *description; /* never NULL ("" if none) */
  char *source;      /* the file it came from, for messages */
};

struct mcp_config {
  struct mcp_server_config *servers;
  size_t n;
};

struct mcp_config_options {
  const char *path;   /* --config FILE, or NULL: $SANDBOXD_MCP_CONFIG, else ~/.config/sandboxd/mcp.json */
  bool import_claude; /* also Claude Code's servers, those it would run here (local, approved project, user
                         scope) */
};

/* Load the config. A missing default file is an empty config; a missing explicit one is an error.
 * Skipped entries (HTTP/SSE servers, sandboxd's own MCP server) are reported as warnings (warn.h). */
int mcp_config_load(const struct mcp_config_options *o, struct mcp_config **ret, sbx_error_t *err);
/* Parse one document into c (appending; names already present are kept). `file` names it in
 * errors. `self_exe` is sandboxd's resolved path (to spot entries that would start it), or NULL. */
int mcp_config_parse(const char *text, size_t len, const char *file, const char *self_exe,
                     struct mcp_config *c, sbx_error_t *err);
/* Expand ${VAR} and ${VAR:-default} from the environment. An unset ${VAR} without a default fails. */
int mcp_config_expand(const char *in, char **ret, sbx_error_t *err);
const struct mcp_server_config *mcp_config_find(const struct mcp_config *c, const char *name);
void mcp_config_free(struct mcp_config *c);

#endif
