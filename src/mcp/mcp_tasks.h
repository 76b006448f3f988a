/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`: tool calls run as tasks (MCP 2025-11-25 basic/utilities/tasks; sandboxd-mcp(7),
 * TASKS). The task machinery is the same whatever the revision: a task wraps one call of the call
 * queue (mcp_calls.c), keeps its result until its ttl ends, belongs to one client, and a client
 * holds at most the policy's max_tasks. What goes on the wire is each revision's (the adapters at
 * the end of mcp_tasks.c). Internal to the MCP server. */
#ifndef SBX_MCP_TASKS_H
#define SBX_MCP_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* The ttl a task gets without asking, and the most one may ask (a client's is capped there). */
#define TASK_TTL_DEFAULT_MS 3600000ULL
#define TASK_TTL_MAX_MS 3600000ULL
/* The least: a shorter one is raised to it (2025-11-25: the receiver MAY override the ttl). */
#define TASK_TTL_MIN_MS 1000ULL
/* The polling interval a task suggests. */
#define TASK_POLL_INTERVAL_MS 500
/* tasks/list: tasks per page. */
#define TASKS_PAGE 8
/* tasks/result requests that may wait on one task at once. */
#define TASK_MAX_WAITERS 4

enum task_status { TASK_WORKING, TASK_INPUT_REQUIRED, TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED };

/* A tasks/result waiting for its task to end: answered then, on its own exchange. */
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
  /* Once it has ended: the call's result (a CallToolResult object, as sent) and whether it says
   * isError; or else a JSON-RPC error. */
  char *result;
  size_t result_len;
  bool is_error;
  int error_code;
  char *error_message;
  struct task_waiter *waiters;
  size_t n_waiters;
};

/* Whether a tools/call from srv->client may be made a task: its protocol is 2025-11-25, where the
 * server declares tasks (a client of an earlier revision gets the call run as ever, its `task`
 * ignored: 2025-11-25 tasks, "Task Support and Handling"). */
bool tasks_negotiated(const struct server *srv);
/* The capability for initialize's result ("tasks"), under 2025-11-25. */
void tasks_write_capability(const struct server *srv, json_writer_t *w);
/* A new task for srv->client's request id, which the call c (just enqueued) will serve; params
 * is the request's `task`. The CreateTaskResult is sent. -1 (nothing sent, nothing kept): the
 * client holds max_tasks already, or a bad `task`; msg says which, and *code is the error. */
int tasks_create(struct server *srv, const json_node_t *params, int *code, char *msg, size_t msg_size,
                 struct task **ret);
/* The task's call is started (c->task set), answered now with its CreateTaskResult. */
void tasks_created(struct server *srv, struct task *t, const char *id);
/* Drop a task made by tasks_create whose call could not be queued. */
void tasks_abandon(struct server *srv, struct task *t);
/* The call of t has its answer (a whole JSON-RPC response in w, taken): t ends with it. */
void tasks_settle(struct server *srv, struct task *t, json_writer_t *w);
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

/* The methods. */
void m_tasks_get(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_result(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_list(struct server *srv, const char *id, const json_node_t *params);
void m_tasks_cancel(struct server *srv, const char *id, const json_node_t *params);

#endif
