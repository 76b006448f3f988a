/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of the host MCP client share (mcp_client.c: operations, the connection's state,
 * what servers send and the queue to them; mcp_client_proc.c: their processes; mcp_client_send.c:
 * the messages sandboxd sends them); not for callers, who use mcp_client.h. */
#ifndef SBX_MCP_CLIENT_INTERNAL_H
#define SBX_MCP_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/jsonrpc.h"
#include "base/util.h"
#include "hostmcp/mcp_client.h"

/* Shutdown: after stdin is closed, SIGTERM at this point, SIGKILL at the next. */
#define TERM_AFTER_MS 1000
#define KILL_AFTER_MS 3000
#define REAP_POLL_MS 50

enum op_kind { OP_LIST, OP_CALL };
/* OP_UNQUEUED: a call whose message could not be queued (the server is not reading); its
 * arguments went with the message, so it is not tried again: it fails at the next round. */
enum op_state { OP_WAITING, OP_SENT, OP_UNQUEUED };

struct op {
  struct op *next;
  uint64_t id;
  enum op_kind kind;
  enum op_state state;
  char *tool;
  char *args; /* JSON object text on one line, until the queue holds it (or NULL: {}) */
  long long rpc_id;
  uint64_t deadline_ns; /* 0: none */
  struct mcp_op_cb cb;
};

enum client_state { C_DOWN, C_INIT, C_UP };

struct client {
  const struct mcp_server_config *cfg;
  enum client_state state;
  pid_t pid;
  int in_fd, out_fd; /* our ends of its stdin and stdout */
  strbuf_t outq;
  size_t outq_off;
  jsonrpc_framer_t framer;
  long long init_rpc;
  uint64_t init_deadline_ns;
  struct op *ops; /* in arrival order */

  char *tools_json; /* the cached array, or NULL */
  size_t tools_len;
  long long list_rpc; /* a tools/list page in flight, or 0 */
  json_writer_t *list_acc;
  unsigned list_pages;
  bool list_stale; /* list_changed arrived while fetching */

  unsigned failures; /* consecutive; reset by a successful answer */
  uint64_t restart_at_ns;
};

struct dying {
  pid_t pid;
  uint64_t term_at_ns, kill_at_ns;
  bool termed;
};

struct mcp_hosts {
  const struct mcp_config *cfg;
  struct client *clients;
  size_t n;
  int stderr_fd;
  long long next_rpc;
  uint64_t next_op;
  struct dying dying[2 * MCP_CONFIG_MAX_SERVERS];
  size_t n_dying;
};

/* ---- mcp_client.c */
/* The server is gone (or must go): close its pipes, let it be reaped, fail what it had. */
void mcp_client_down(struct mcp_hosts *h, struct client *c, const char *why);

/* ---- mcp_client_proc.c: the servers' processes */
/* Reap the processes being shut down; signal those past their time. */
void mcp_client_reap_dying(struct mcp_hosts *h, uint64_t now);
/* Hand a process over to be shut down: its stdin is already closed. */
void mcp_client_add_dying(struct mcp_hosts *h, pid_t pid, uint64_t term_after_ms);
/* Start c's server with pipes for its stdin and stdout (non-blocking on our side). */
int mcp_client_spawn_server(struct mcp_hosts *h, struct client *c, sbx_error_t *err);

/* ---- mcp_client_send.c: the messages sandboxd writes to a server (NULL: out of memory) */
json_writer_t *mcp_client_msg_initialize(struct mcp_hosts *h, struct client *c);
json_writer_t *mcp_client_msg_list_page(struct mcp_hosts *h, struct client *c, const char *cursor);
/* The tools/call for o up to its arguments, {"jsonrpc":"2.0","id":N,"method":"tools/call",
 * "params":{"name":T[,"_meta":{...}], left open (o becomes OP_SENT): the caller adds
 * ,"arguments":ARGS}} in the queue itself, so that the arguments are copied once. */
json_writer_t *mcp_client_msg_call_head(struct mcp_hosts *h, struct op *o);
json_writer_t *mcp_client_msg_cancelled(long long rpc, const char *reason);

#endif
