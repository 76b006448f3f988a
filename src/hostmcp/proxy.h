/* SPDX-License-Identifier: Apache-2.0 */
/* The sandboxd side of the bridge, for one execution: reads requests that the code inside sends
 * over its end of a socketpair (fd SBX_BRIDGE_FD inside, frames from bridge.h), checks them
 * against the servers this run may use, forwards them to the host servers (mcp_client.h), and
 * frames the answers back. Every tools/call is recorded for the audit record.
 *
 * Requests (JSON-RPC 2.0 shapes; `jsonrpc` is optional):
 *   {"id":I,"method":"servers/list"}                        ->
 * {"servers":[{"name","description","callable"}]}
 *   {"id":I,"method":"tools/list","params":{"server":S}}     -> {"tools":[...]} (the server's own list)
 *   {"method":"sandboxd/done","params":{"status":N}}        (no answer: the run is over, see proxy_on_done)
 * servers/list and tools/list cover every configured server the policy allows (discovery);
 * tools/call only the run's own servers (`callable`).
 *   {"id":I,"method":"tools/call","params":{"server":S,"name":T,"arguments":{...},"progress":true}}
 *                                                             -> the CallToolResult, unchanged
 * Answers are {"id":I,"result":R} or {"id":I,"error":{"code","message"}}; with "progress":true, the
 * call's notifications/progress arrive first as {"method":"notifications/progress","params":{"id":I,
 * "progress","total","message"}}. A malformed frame gets an error (id null if it has none) and
 * fails only itself; an oversize frame is skipped and answered the same way. */
#ifndef SBX_PROXY_H
#define SBX_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/json.h"
#include "hostmcp/mcp_client.h"
#include "policy/policy.h"

#define PROXY_DEFAULT_CALL_TIMEOUT_MS 60000
#define PROXY_DEFAULT_MAX_CALLS 1000
#define PROXY_MAX_INFLIGHT 64
/* Answers waiting for the code to read them, beyond which a result is replaced by an error. */
#define PROXY_MAX_OUTQ (64u << 20)

/* The budget of what one sandbox's requests may make sandboxd hold and parse, all checked before
 * anything is allocated for a request; a request beyond it is answered with MCP_ERR_TOO_LARGE
 * (MCPError inside) (sandboxd-mcp(7), THE PROXY, "Limits"):
 * - a request frame: at most the policy's proxy_request_limit (16 MiB in default.policy), so
 *   that a file's content handed to a host server's tool fits. One request of N bytes makes
 *   sandboxd hold at most 2N at any moment while it is read, parsed and forwarded (the frame, whose
 *   tree holds at most 4 KiB of a string, proxy.c; the frame, which becomes the arguments
 *   as written; those and the queue to the server), then N until the server has read it. Answers
 *   (host results, up to BRIDGE_DEFAULT_MAX_FRAME) are not bound by it.
 * The others protect sandboxd itself, the same for every policy, so they are constants:
 * - JSON values in one request (each costs sandboxd about 100 bytes): parse time and the tree
 *   stay small even for a frame of `[0,0,0,...]`; 16384 still holds an embedding vector. A
 *   frame's first bytes are checked against it as they arrive (proxy.c, PROXY_CHECK_PREFIX), so
 *   such a frame is skipped, never held whole. */
#define PROXY_MAX_VALUES 16384
/* - the requests of the calls waiting for host servers, together (each counted at its frame's
 *   size: it bounds the copies sandboxd and the host side keep until the answer); a request
 *   larger than this goes when it is the only one waiting, so they hold at most the larger of
 *   this and proxy_request_limit. */
#define PROXY_MAX_INFLIGHT_BYTES (4u << 20)
/* - what one run may send over the bridge in all: sandboxd's CPU for a sandbox's requests
 *   (reading, skipping, parsing) is spent outside the sandbox's cgroup, so it has a budget too.
 *   1000 calls (PROXY_DEFAULT_MAX_CALLS) of 256 KiB fit. Past it sandboxd sends a last error
 *   and closes the bridge: the code's requests fail (MCPError), the run goes on without it. */
#define PROXY_MAX_RUN_BYTES (256u << 20)
/* - a request id (as canonical JSON) and a tool name (MCP's own bound, 1 to 128 characters);
 *   server names are at most MCP_CONFIG_MAX_NAME, so a longer one is simply not available.
 *   The audit record keeps names up to PROXY_RECORD_NAME bytes, cut with "...". */
#define PROXY_MAX_ID 128
#define PROXY_MAX_TOOL_NAME 128
#define PROXY_RECORD_NAME 128

struct proxy_limits {
  uint32_t max_frame;       /* answers; 0: BRIDGE_DEFAULT_MAX_FRAME (requests: proxy_request_limit) */
  uint64_t call_timeout_ms; /* 0: PROXY_DEFAULT_CALL_TIMEOUT_MS */
  size_t max_calls;         /* tools/call per execution; 0: PROXY_DEFAULT_MAX_CALLS */
};

struct proxy;

struct sbx_policy;

/* servers: the names this run may call (each must be configured in hosts and, unless policy is
 * NULL, allowed by the policy's proxy_servers); its requests are at most proxy_max_request(policy).
 * On success *ret_sandbox_fd is the other end of the socketpair, for sbx_spec.bridge_fd: close it
 * once the sandbox is spawned. With ret_sandbox_fd NULL no socketpair is made: the caller brings
 * its socket with proxy_adopt_fd(). */
int proxy_new(struct mcp_hosts *hosts, const struct sbx_policy *policy, const char *const *servers,
              size_t n_servers, const struct proxy_limits *lim, int *ret_sandbox_fd, struct proxy **ret,
              sbx_error_t *err);
/* Serve the bridge over fd (a connected SOCK_STREAM socket, taken over and made non-blocking)
 * instead of the socketpair proxy_new() made, whose sandbox end the caller then just closes: a
 * warm sandbox (`sandboxd mcp --warm`) already has its socket at SBX_BRIDGE_FD. */
void proxy_adopt_fd(struct proxy *p, int fd);
/* Cancels every call still in flight. NULL is fine. */
void proxy_free(struct proxy *p);
/* Also tell the owner about host progress (e.g. to relay it to the MCP client). */
void proxy_on_progress(struct proxy *p,
                       void (*fn)(void *ctx, const char *server, const char *tool, const json_node_t *params),
                       void *ctx);
/* Approval of host tool calls (approve_host_calls, sandboxd-mcp(7), THE PROXY, "Approval"): a
 * tools/call that needs it is held (still in flight, in the budget) until its owner answers with
 * proxy_approval(); only an approved one goes on, to its server, with its whole call timeout.
 * Under `writes` the proxy first gets the server's tool list (the host client's cache) to see
 * whether the tool says `readOnlyHint: true`. Any other verdict is an error for the code
 * (PROXY_ERR_NOT_APPROVED, MCPError inside) and the call's audit record says it ("approval"). */
enum proxy_verdict {
  PROXY_APPROVED,
  PROXY_DENIED,
  PROXY_CANCELLED,
  PROXY_APPROVAL_TIMEOUT,
  PROXY_UNAVAILABLE
};
#define PROXY_ERR_NOT_APPROVED (-32003)
/* fn is asked for each call that needs approval (the arguments as an excerpt of at most a few
 * hundred bytes, cut with "..."); it must answer every one, possibly from within. level: at
 * least the policy's (raised, never lowered). Without fn such a call is unavailable. */
typedef void (*proxy_approval_fn)(void *ctx, uint64_t approval, const char *server, const char *tool,
                                  const char *args_excerpt);
void proxy_on_approval(struct proxy *p, enum sbx_approve level, proxy_approval_fn fn, void *ctx);
/* detail: for PROXY_APPROVAL_TIMEOUT the whole message ("approval timed out after 120 s"), for
 * PROXY_UNAVAILABLE why ("the client has no elicitation"). An unknown id is ignored. */
void proxy_approval(struct proxy *p, uint64_t approval, enum proxy_verdict v, const char *detail);
/* The runner's last frame (PROXY_DONE_METHOD): its exit status, once the run is over and its
 * output flushed. The bridge is closed before fn is called. Without fn the frame is an error. */
#define PROXY_DONE_METHOD "sandboxd/done"
void proxy_on_done(struct proxy *p, void (*fn)(void *ctx, int status), void *ctx);
/* The fd and events to poll; fd -1 once the sandbox has closed its end. */
int proxy_fd(const struct proxy *p);
short proxy_events(const struct proxy *p);
void proxy_handle(struct proxy *p, short revents);
/* "SANDBOXD_MCP_SERVERS=a,b": the environment entry that tells the code which servers it has. */
const char *proxy_env(const struct proxy *p);
/* The largest request frame under policy: its proxy_request_limit (without one,
 * BRIDGE_DEFAULT_MAX_FRAME). The `mcp` package refuses larger ones itself, before sending, from
 * PROXY_MAX_REQUEST_ENV=N in the sandbox's environment. */
uint32_t proxy_max_request(const struct sbx_policy *policy);
#define PROXY_MAX_REQUEST_ENV "SANDBOXD_MCP_MAX_REQUEST"
/* Bytes read from the code so far (its owner may give memory back after a busy run). */
size_t proxy_bytes_read(const struct proxy *p);
/* The calls so far as a JSON array ([{server, tool, duration_ms, outcome[, approval]}...]),
 * malloc'd; approval (approved, denied, cancelled, timeout, unavailable) when the user was asked. */
char *proxy_calls_json(const struct proxy *p);
/* The directory holding the `mcp` package the code imports (paths_python_dir) is mounted
 * read-only here. */
#define PROXY_PYTHON_DST "/run/sandboxd/python"

#endif
