/* SPDX-License-Identifier: Apache-2.0 */
/* Warnings from library code, which never prints: it reports each here, and the command that
 * uses it (main.c's default, cli_exec.c, the MCP server) sets the handler that decides what a
 * person sees. With no handler, warnings are dropped (unit tests set one to check them). */
#ifndef SBX_WARN_H
#define SBX_WARN_H

enum sbx_warning {
  SBX_WARN_DEGRADED,    /* limits fall back to rlimits, as the policy allows (sandbox.c) */
  SBX_WARN_CONFIG,      /* an MCP config entry is skipped (mcp_config.c) */
  SBX_WARN_HOST_SERVER, /* a host MCP server failed or exited (mcp_client.c) */
  SBX_WARN_AUDIT,       /* an audit record was dropped (audit.c) */
  SBX_WARN_LIMITS,      /* a limit is lower than the configuration needs (fork_policy.c) */
  SBX_WARN_FORK_COPY,   /* each forked call's pid 1 is a copy of the template (fork_template.c) */
};

/* msg is one line, without "sandboxd: " or "warning: ". */
typedef void (*sbx_warn_handler_t)(enum sbx_warning kind, const char *msg);

/* The handler for every later warning, process-wide; NULL drops them. Returns the previous one. */
sbx_warn_handler_t sbx_warn_set_handler(sbx_warn_handler_t handler);
void sbx_warn(enum sbx_warning kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
