/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`: tool calls run as tasks (sandboxd-mcp(7), TASKS). The machinery is the same
 * whatever the revision (mcp_tasks.c): a task wraps one call of the call queue (mcp_calls.c),
 * keeps its answer until its ttl ends, belongs to one client, and a client holds at most the
 * policy's max_tasks. What goes on the wire is each revision's: 2025-11-25's utilities/tasks
 * (mcp_tasks_legacy.c) and 2026-07-28's extension io.modelcontextprotocol/tasks, SEP-2663
 * (mcp_tasks_ext.c). Internal to the MCP server. */
#ifndef SBX_MCP_TASKS_H
#define SBX_MCP_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* The ttl a task gets without asking (and always under 2026-07-28, where the client cannot ask),
 * and the most one may ask (a client's is capped there). */
#define TASK_TTL_DEFAULT_MS 3600000ULL
#define TASK_TTL_MAX_MS 3600000ULL
/* The least: a shorter one is raised to it (2025-11-25: the receiver MAY override the ttl). */
#define TASK_TTL_MIN_MS 1000ULL
/* The polling interval a task suggests. */
#define TASK_POLL_INTERVAL_MS 500
/* tasks/list (2025-11-25): tasks per page. */
#define TASKS_PAGE 8
/* tasks/result (2025-11-25) requests that may wait on one task at once. */
#define TASK_MAX_WAITERS 4
/* -32000, JSON-RPC's first implementation-defined server error: the client holds max_tasks, or
 * too many tasks/result wait on a task. */
#define TASKS_TOO_MANY -32000

/* What the revisions' statuses are made of: ended holds a result (completed, or under 2025-11-25
 * failed when it says isError) or a JSON-RPC error (failed). */
enum task_status { TASK_WORKING, TASK_INPUT_REQUIRED, TASK_ENDED, TASK_CANCELLED };

/* A tasks/result (2025-11-25) waiting for its task to end: answered then, on its own exchange. */
struct task_waiter {
  struct task_waiter *next;
  char *id; /* the request's id, canonical JSON */
  uint64_t client, route;
};

struct call;
struct server;

struct task {
  struct task *next;
  char id[33];    /* 128 random bits, hex */
  uint64_t owner; /* tasks_owner() of the client that made it */
  uint64_t seq;   /* creation order: tasks/list's cursor */
  enum task_status status;
  char *status_message;
  int64_t created_ms, updated_ms; /* wall clock, ms since the epoch */
  uint64_t ttl_ms;
  uint64_t expires_ns; /* now_ns clock: reaped then, whatever its status */
  struct call *call;   /* while its call is queued or runs */
  /* Once ended: the call's result (a CallToolResult object, as written) and whether it says
   * isError; or else a JSON-RPC error. */
  char *result;
  size_t result_len;
  bool is_error;
  int error_code;
  char *error_message;
  struct task_waiter *waiters;
  size_t n_waiters;
  bool ext; /* made by a 2026-07-28 request: no 2025-11-25 notification of it */
};

/* ------------------------------------------------------------------ mcp_tasks.c: the machinery */

/* Whose tasks srv->client's are (the request being dispatched). */
uint64_t tasks_owner(const struct server *srv);
/* srv->client's task of this id, or NULL (another client's is NULL too). */
struct task *tasks_find(struct server *srv, const char *id);
bool task_ended(const struct task *t);
/* A new task for srv->client, ttl_ms capped and raised into range; not yet on the wire. -1:
 * the client holds max_tasks already (or no memory): *code and msg say so, nothing kept. */
int tasks_create(struct server *srv, uint64_t ttl_ms, int *code, char *msg, size_t msg_size,
                 struct task **ret);
/* Drop a task made by tasks_create whose call could not be queued. */
void tasks_abandon(struct server *srv, struct task *t);
/* The call of t has its answer (a whole JSON-RPC response in w, taken): t ends with it. */
void tasks_settle(struct server *srv, struct task *t, json_writer_t *w);
/* tasks/cancel: t is cancelled (it stays so) and its call killed as notifications/cancelled
 * kills one, never answered. false: it had ended already. */
bool tasks_cancel(struct server *srv, struct task *t);
/* The call of t is gone (freed). */
void tasks_call_gone(struct task *t);
/* Whether the call of t waits for the user (an approval asked): input_required. */
void tasks_input_required(struct server *srv, struct task *t, bool waiting);
/* Reap the tasks whose ttl has ended; the poll timeout until the next, or -1. */
int tasks_timers(struct server *srv);
/* A session ended (its tasks go, their calls killed), or an exchange (route: its tasks/result
 * waits no more). */
void tasks_forget_client(struct server *srv, uint64_t client);
void tasks_forget_route(struct server *srv, uint64_t route);
/* notifications/cancelled for a request of srv->client that is no call: a tasks/result. */
void tasks_request_cancelled(struct server *srv, const char *id);
/* At exit (the calls are gone). */
void tasks_free_all(struct server *srv);
/* "2026-12-06T10:30:00.123Z" */
void tasks_write_time(json_writer_t *w, const char *key, int64_t ms);

/* ------------------------------------------------------------------ mcp_tasks_call.c: the call's side */

/* The task a tools/call gets, if any (mcp_server.c): with params' `task` under 2025-11-25, or
 * whenever the client declared the extension under 2026-07-28 and the call runs (runs: it is not
 * refused before it is queued). 0 and *ret NULL: none, run it as
 * ever; 0 and *ret: the task (send tasks_created once its call is queued); -1: the error is
 * sent. */
int tasks_for_call(struct server *srv, const char *id, const json_node_t *params, bool runs,
                   struct task **ret);
/* The request answered with the task t, as its revision says, and t's call c linked (NULL: a
 * call refused before it was queued, whose answer tasks_settle takes next). */
void tasks_created(struct server *srv, struct task *t, struct call *c, const char *id);

/* ------------------------------------------------------------------ mcp_tasks_legacy.c */

/* Whether srv->client speaks 2025-11-25, where the server declares tasks (a client of an earlier
 * revision gets the call run as ever, its `task` ignored: 2025-11-25 tasks, "Task Support and
 * Handling"). */
bool tasks_negotiated(const struct server *srv);
/* The capability for initialize's result ("tasks"), under 2025-11-25. */
void tasks_write_capability(const struct server *srv, json_writer_t *w);
/* A task from a 2025-11-25 request's `task` (params): tasks_create's, or -1 for a bad one. */
int tasks_legacy_create(struct server *srv, const json_node_t *params, int *code, char *msg, size_t msg_size,
                        struct task **ret);
void tasks_legacy_created(struct server *srv, const struct task *t, const char *id);
/* t has ended or is gone (gone_msg): its waiting tasks/result answered, its status notified. */
void tasks_legacy_ended(struct server *srv, struct task *t, const char *gone_msg);
void tasks_legacy_status(struct server *srv, const struct task *t);
void m_tasks_get(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_result(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_list(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_cancel(struct server *srv, const char *id, const json_node_t *params);

/* ------------------------------------------------------------------ mcp_tasks_ext.c */

#define TASKS_EXTENSION "io.modelcontextprotocol/tasks"
/* Whether the request being dispatched is of 2026-07-28 and declares the extension. */
bool tasks_ext_declared(const struct server *srv);
/* server/discover's capabilities: "extensions": {"io.modelcontextprotocol/tasks": {}}. */
void tasks_ext_write_capability(json_writer_t *w);
void tasks_ext_created(struct server *srv, const struct task *t, const char *id);
void m_tasks_ext_get(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_ext_update(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_ext_cancel(struct server *srv, const char *id, const json_node_t *params);

#endif
