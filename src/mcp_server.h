/* `sandboxd mcp`: a Model Context Protocol server over stdio with one tool, run_python. Every call
 * runs in a fresh sandbox; calls run concurrently up to a limit and queue beyond it. This is the
 * only code that writes protocol to stdout. */
#ifndef SBX_MCP_SERVER_H
#define SBX_MCP_SERVER_H

/* The protocol versions we implement, newest first. */
extern const char *const mcp_protocol_versions[];

/* The version to answer a client's initialize with: its own if we implement it, else our newest. */
const char *mcp_negotiate_version(const char *client_version);

int cmd_mcp(int argc, char **argv);

#endif
