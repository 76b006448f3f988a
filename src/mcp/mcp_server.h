/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`: a Model Context Protocol server over stdio or HTTP with run_python and
 * execute_code. Every call runs in a fresh sandbox; calls run concurrently up to a limit and queue
 * beyond it. The command is cli_mcp.c's (cmd_mcp, cli.h). */
#ifndef SBX_MCP_SERVER_H
#define SBX_MCP_SERVER_H

/* The protocol versions an initialize may choose, newest first. */
extern const char *const mcp_protocol_versions[];
/* Every version served, newest first: 2026-07-28 (per-request _meta, no initialize: mcp_modern.c),
 * then those of mcp_protocol_versions. */
extern const char *const mcp_all_versions[];

/* The version to answer a client's initialize with: its own if we implement it, else our newest. */
const char *mcp_negotiate_version(const char *client_version);

#endif
