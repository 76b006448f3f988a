/* SPDX-License-Identifier: Apache-2.0 */
/* The tools of `sandboxd mcp`, run_python and execute_code: their definitions for tools/list and the checks
 * of a call's arguments. Pure (JSON in, JSON or a message out), so unit-tested (tests/unit). */
#ifndef SBX_MCP_TOOL_H
#define SBX_MCP_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "mcp/mcp_lang.h"

struct bind_opts;
struct mcp_config;
struct sbx_policy;

#define TOOL_NAME "run_python"
#define EXEC_TOOL_NAME "execute_code"

/* What a result's text may hold besides the output: the notes in text blocks of their own (files
 * not returned, the output not saved under --output-dir), each a line of a few dozen characters.
 * With a client before protocol 2025-06-18 (no resource links) the note also lists the files
 * saved; Claude Code, for which the sum below is written, speaks a later one. */
#define MCP_TOOL_NOTES_CHARS 1024
/* _meta["anthropic/maxResultSizeChars"] of both tools: the most characters of text a result
 * holds, as Claude Code counts them (UTF-16 code units: a character outside the BMP is two), for
 * output shaped to text_limit characters (--text-limit). Claude Code writes a result longer than
 * this (100,000 when a tool says nothing; it takes at most 500,000) to a file the model must then
 * read; what sandboxd already shaped stays inline. */
size_t mcp_tool_result_chars(size_t text_limit);

/* A call's arguments once checked. Pointers are into the arguments' tree. */
struct mcp_tool_args {
  const char *code;
  size_t code_len;
  uint64_t timeout_ms;        /* clamped to the policy's ceiling; UINT64_MAX: the policy's default */
  const json_node_t *servers; /* an array of configured server names, or NULL */
  enum mcp_lang lang;         /* run_python: python */
  const char *session_id;     /* a session's handle (session_start), or NULL: a fresh sandbox */
};

/* Check tools/call's `arguments` (NULL if absent). 0 and *ret set, or -1 with what the model
 * should fix in msg (it is answered as an isError result). */
int mcp_tool_parse_args(const json_node_t *args, const struct sbx_policy *policy,
                        const struct mcp_config *cfg, struct mcp_tool_args *ret, char *msg, size_t msg_len);
/* execute_code's: `language` (one of langs, a mask of MCP_LANG_BIT), `code`, `timeout`. */
int mcp_exec_parse_args(const json_node_t *args, const struct sbx_policy *policy, unsigned langs,
                        struct mcp_tool_args *ret, char *msg, size_t msg_len);
/* What a call may do outside its sandbox in the server's configuration, for the tools' hints
 * (annotations): readOnlyHint is true only where none of the first four holds, so that a
 * client's plan mode and parallel calls treat the tools as what they are. */
struct mcp_tool_facts {
  bool rw_binds;   /* --bind-rw: the code may change and delete host files */
  bool output_dir; /* --output-dir: files out are written on the host */
  bool egress;     /* the egress proxy, with hosts allowed */
  bool host_tools; /* host MCP servers the code may call: sandboxd does not vouch for their tools */
  bool icons;      /* the client speaks 2025-11-25 or later, where tools and servers have icons */
  bool tasks;      /* the client may call the tools as tasks (2025-11-25: execution.taskSupport) */
};
/* The tool object of tools/list; the description names the host directories (--bind, and with
 * roots ROOTS_DIR) and the configured servers; _meta the longest result (text_limit); the hints
 * from fx (NULL: none of them holds). */
void mcp_tool_write(json_writer_t *w, const struct sbx_policy *policy, const struct mcp_config *cfg,
                    const struct bind_opts *binds, bool roots, size_t text_limit,
                    const struct mcp_tool_facts *fx);
/* execute_code's, the language enum being langs. */
void mcp_exec_tool_write(json_writer_t *w, const struct sbx_policy *policy, unsigned langs,
                         const struct bind_opts *binds, bool roots, size_t text_limit,
                         const struct mcp_tool_facts *fx);
/* "icons": sandboxd's (a 32x32 PNG, which every client that shows icons must take, and an SVG),
 * for serverInfo and each tool. */
void mcp_icons_write(json_writer_t *w);

/* Tool parameters a load balancer may route on: each is marked `x-mcp-header` in its tool's
 * inputSchema, and under revision 2026-07-28 a client mirrors it into the HTTP header
 * Mcp-Param-<header>, which the server checks against the body (mcp_modern.c). Ended by a NULL
 * tool. */
#define MCP_SESSION_HEADER "Session"
struct mcp_header_param {
  const char *tool, *param, *header;
};
extern const struct mcp_header_param mcp_tool_header_params[];
/* "configured servers: a, b" (or that there are none), for messages. */
void mcp_tool_server_names(const struct mcp_config *cfg, char *buf, size_t len);

#endif
