/* SPDX-License-Identifier: Apache-2.0 */
/* Host MCP servers as child processes: the far side of the proxy. Each configured server is
 * spawned on first use (minimal environment plus its configured env), gets the client handshake
 * (capabilities {}), and then stays warm across sandboxes. Its tool list is cached, following
 * nextCursor, and refreshed after notifications/tools/list_changed. A server that dies is
 * restarted on its next use, with backoff. Server->client requests: ping gets {}, anything else
 * -32601. Shutdown follows the spec: close stdin, then SIGTERM, then SIGKILL.
 *
 * Everything is non-blocking and driven by the caller's poll loop: add mcp_hosts_pollfds() to the
 * poll set, then call mcp_hosts_dispatch() with the results and mcp_hosts_timers() each round.
 * Completion callbacks run only from those two, never from the call that started the operation. */
#ifndef SBX_MCP_CLIENT_H
#define SBX_MCP_CLIENT_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "hostmcp/mcp_config.h"

/* Largest message read from a host server (a tool result, a page of tools). */
#define MCP_CLIENT_MAX_MESSAGE (32u << 20)
/* Writes queued for one server that it has not read yet. */
#define MCP_CLIENT_MAX_OUTQ (64u << 20)
#define MCP_CLIENT_INIT_TIMEOUT_MS 30000

struct mcp_hosts;

struct mcp_op_cb {
  /* Exactly once, unless cancelled. On success result_json (valid JSON on one line: the
   * CallToolResult, as the server wrote it, or the array of tools) and code 0, or
   * MCP_RESULT_IS_ERROR for a CallToolResult whose isError is true (the tool's own failure); on
   * failure result_json NULL, a JSON-RPC-style code and a message. */
  void (*done)(void *ctx, const char *result_json, size_t len, int code, const char *message);
  /* notifications/progress for a tools/call (params node: progress, total, message); may be NULL. */
  void (*progress)(void *ctx, const json_node_t *params);
  void *ctx;
};

/* Error codes given to done() besides the server's own JSON-RPC errors. */
enum {
  MCP_RESULT_IS_ERROR = 1,      /* with a result: see mcp_op_cb */
  MCP_ERR_UNAVAILABLE = -32000, /* could not start, or exited */
  MCP_ERR_TIMEOUT = -32001,
  MCP_ERR_TOO_LARGE = -32002,
};

/* cfg must outlive the hosts. stderr_fd: where the servers' stderr goes (-1: /dev/null). */
int mcp_hosts_new(const struct mcp_config *cfg, int stderr_fd, struct mcp_hosts **ret, sbx_error_t *err);
/* Shut every server down (bounded: a few seconds at most), fail nothing (callbacks are dropped). */
void mcp_hosts_free(struct mcp_hosts *h);
const struct mcp_config *mcp_hosts_config(const struct mcp_hosts *h);

/* Start an operation; returns its id (> 0), or 0 with err set (unknown server). timeout_ms 0: none. */
uint64_t mcp_hosts_list_tools(struct mcp_hosts *h, const char *server, uint64_t timeout_ms,
                              const struct mcp_op_cb *cb, sbx_error_t *err);
/* args_json: a JSON object on one line (malloc'd, NUL-terminated; taken, whatever the outcome),
 * or NULL for {}. It is freed once the call's message is queued for the server, which then holds
 * the only copy. */
uint64_t mcp_hosts_call_tool(struct mcp_hosts *h, const char *server, const char *tool, char *args_json,
                             uint64_t timeout_ms, const struct mcp_op_cb *cb, sbx_error_t *err);
/* Drop an operation: its callbacks will not run; a call in flight is cancelled at the server.
 * Unknown or finished ids are fine. */
void mcp_hosts_cancel(struct mcp_hosts *h, uint64_t op);

/* The fds to poll (at most mcp_hosts_max_pollfds()); write them at pfds, return how many. */
size_t mcp_hosts_max_pollfds(const struct mcp_hosts *h);
size_t mcp_hosts_pollfds(struct mcp_hosts *h, struct pollfd *pfds);
/* After poll: the same pfds (with revents) as mcp_hosts_pollfds() filled. */
void mcp_hosts_dispatch(struct mcp_hosts *h, const struct pollfd *pfds, size_t n);
/* Deadlines, restarts, queued operations; returns the poll timeout in ms, or -1 for none. */
int mcp_hosts_timers(struct mcp_hosts *h);
/* Whether tools (a server's list as mcp_hosts_list_tools gives it; NULL if it could not be had)
 * says `readOnlyHint: true` of the tool: anything else, a tool it does not list too, is false. */
bool mcp_tools_read_only(const char *tools, size_t len, const char *tool);
/* The pid of a running server, or 0 (tests and diagnostics). */
int mcp_hosts_pid(const struct mcp_hosts *h, const char *server);

#endif
