/* SPDX-License-Identifier: Apache-2.0 */
/* Tasks on the wire of revision 2025-11-25 (basic/utilities/tasks, experimental there): the
 * client asks with `task` in tools/call and gets {task: Task}; tasks/get, tasks/result (waits
 * until the task has ended, then the call's own answer with the related-task _meta), tasks/list,
 * tasks/cancel (answered with the task); notifications/tasks/status. The machinery is
 * mcp_tasks.c's. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_tasks.h"

bool tasks_negotiated(const struct server *srv)
{
  return srv->protocol && strcmp(srv->protocol, "2025-11-25") == 0;
}

/* tasks/list is declared only where the caller is known (2025-11-25 tasks, "Task Isolation and
 * Access Control": a receiver that cannot identify requestors SHOULD NOT declare it). */
static bool can_list(const struct server *srv)
{
  return !srv->http || srv->client_session || srv->principal >= 0;
}

void tasks_write_capability(const struct server *srv, json_writer_t *w)
{
  if (!tasks_negotiated(srv))
    return;
  json_key(w, "tasks");
  json_obj_begin(w);
  if (can_list(srv)) {
    json_key(w, "list");
    json_obj_begin(w);
    json_obj_end(w);
  }
  json_key(w, "cancel");
  json_obj_begin(w);
  json_obj_end(w);
  json_key(w, "requests");
  json_obj_begin(w);
  json_key(w, "tools");
  json_obj_begin(w);
  json_key(w, "call");
  json_obj_begin(w);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
}

int tasks_legacy_create(struct server *srv, const json_node_t *params, int *code, char *msg, size_t msg_size,
                        struct task **ret)
{
  *code = JSONRPC_INVALID_PARAMS;
  if (json_type(params) != JSON_OBJECT) {
    bufprintf_cut(msg, msg_size, "Invalid params: `task` must be an object");
    return -1;
  }
  const json_node_t *ttl = json_get(params, "ttl");
  long long want = (long long) TASK_TTL_DEFAULT_MS;
  if (ttl && json_type(ttl) != JSON_NULL && (json_as_int(ttl, &want) < 0 || want < 0)) {
    bufprintf_cut(msg, msg_size, "Invalid params: `task.ttl` must be a whole number of milliseconds");
    return -1;
  }
  return tasks_create(srv, (uint64_t) want, code, msg, msg_size, ret);
}

/* ------------------------------------------------------------------ the Task */

/* 2025-11-25 tasks, "Task Execution Errors": a tool result with isError is a failed task. */
static const char *status_name(const struct task *t)
{
  switch (t->status) {
  case TASK_WORKING:
    return "working";
  case TASK_INPUT_REQUIRED:
    return "input_required";
  case TASK_ENDED:
    return t->result && !t->is_error ? "completed" : "failed";
  case TASK_CANCELLED:
    break;
  }
  return "cancelled";
}

/* The Task's members (schema.ts, Task). */
static void write_task_members(json_writer_t *w, const struct task *t)
{
  json_kv_str(w, "taskId", t->id);
  json_kv_str(w, "status", status_name(t));
  if (t->status_message)
    json_kv_str(w, "statusMessage", t->status_message);
  tasks_write_time(w, "createdAt", t->created_ms);
  tasks_write_time(w, "lastUpdatedAt", t->updated_ms);
  json_kv_uint(w, "ttl", t->ttl_ms);
  json_kv_uint(w, "pollInterval", TASK_POLL_INTERVAL_MS);
}

/* A result that is the task itself (tasks/get, tasks/cancel), or {task: Task} (CreateTaskResult). */
static void send_task(struct server *srv, const char *id, const struct task *t, bool wrapped)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  if (wrapped) {
    json_key(w, "task");
    json_obj_begin(w);
  }
  write_task_members(w, t);
  if (wrapped)
    json_obj_end(w);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

void tasks_legacy_created(struct server *srv, const struct task *t, const char *id)
{
  send_task(srv, id, t, true);
}

/* tasks/result's answer for an ended task: exactly what the call would have answered, with the
 * related-task _meta in a result (2025-11-25 tasks, "Result Retrieval"). */
static void send_task_payload(struct server *srv, const char *id, const struct task *t)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  if (t->status == TASK_CANCELLED) {
    jsonrpc_write_error(w, id, JSONRPC_INTERNAL_ERROR, "The task was cancelled: its call has no result");
  } else if (!t->result) {
    jsonrpc_write_error(w, id, t->error_code, t->error_message ? t->error_message : "Internal error");
  } else {
    /* The result is an object we wrote, never empty ("content" first): its closing brace gives
     * way to the _meta member. */
    strbuf_t sb = {0};
    int r = strbuf_append(&sb, t->result, t->result_len - 1);
    r |= strbuf_printf(&sb, ",\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"%s\"}}}",
                       t->id);
    jsonrpc_begin_result(w, id);
    if (r == 0)
      json_raw(w, sb.data, sb.len);
    else
      json_null(w);
    jsonrpc_end(w);
    strbuf_free(&sb);
  }
  send_writer(srv, w);
}

/* notifications/tasks/status: over stdio; over HTTP on its session's GET stream when one is open
 * (2025-11-25 tasks, "Input Required Status": messages may come on any stream, the GET stream
 * too), since the request that made the task is over. Else none: the client polls, as it must
 * anyway. */
void tasks_legacy_status(struct server *srv, const struct task *t)
{
  uint64_t route = 0;
  if (t->ext)
    return;
  if (srv->http && (t->owner >> 63 || !(route = mcp_http_session_stream(srv->http, t->owner))))
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/tasks/status");
  json_obj_begin(w);
  write_task_members(w, t);
  json_obj_end(w);
  jsonrpc_end(w);
  uint64_t was = srv->route;
  if (srv->http)
    srv->route = route;
  send_writer(srv, w);
  srv->route = was;
}

void tasks_legacy_ended(struct server *srv, struct task *t, const char *gone_msg)
{
  uint64_t client = srv->client, route = srv->route;
  while (t->waiters) {
    struct task_waiter *x = t->waiters;
    t->waiters = x->next;
    srv->client = x->client;
    srv->route = x->route;
    if (gone_msg)
      send_error(srv, x->id, JSONRPC_INVALID_PARAMS, gone_msg);
    else
      send_task_payload(srv, x->id, t);
    free(x->id);
    free(x);
  }
  t->n_waiters = 0;
  srv->client = client;
  srv->route = route;
  if (!gone_msg)
    tasks_legacy_status(srv, t);
}

/* ------------------------------------------------------------------ methods */

/* The task params name, or NULL with the error sent (2025-11-25 tasks, "Protocol Errors": an
 * unknown task, another client's, one whose ttl ended: -32602, the same for each). */
static struct task *method_task(struct server *srv, const char *id, const json_node_t *params)
{
  if (!tasks_negotiated(srv)) {
    send_error(srv, id, JSONRPC_METHOD_NOT_FOUND, "Method not found: tasks came in protocol 2025-11-25");
    return NULL;
  }
  const char *task_id = json_as_string(json_get(params, "taskId"), NULL);
  if (!task_id) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Invalid params: `taskId` must be a string");
    return NULL;
  }
  struct task *t = tasks_find(srv, task_id);
  if (!t)
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Failed to retrieve task: Task not found");
  return t;
}

void m_tasks_get(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (t)
    send_task(srv, id, t, false);
}

void m_tasks_result(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (!t)
    return;
  if (task_ended(t)) {
    send_task_payload(srv, id, t);
    return;
  }
  /* 2025-11-25 tasks, "Result Retrieval": it blocks until the task has ended. */
  if (t->n_waiters >= TASK_MAX_WAITERS) {
    send_errorf(srv, id, TASKS_TOO_MANY, "Too many tasks/result requests wait on task %s (at most %d)", t->id,
                TASK_MAX_WAITERS);
    return;
  }
  struct task_waiter *x = calloc(1, sizeof *x);
  if (!x || !(x->id = strdup(id))) {
    free(x);
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  x->client = srv->client;
  x->route = srv->route;
  slist_append(&t->waiters, x);
  t->n_waiters++;
}

void m_tasks_list(struct server *srv, const char *id, const json_node_t *params)
{
  if (!tasks_negotiated(srv) || !can_list(srv)) {
    send_error(srv, id, JSONRPC_METHOD_NOT_FOUND, "Method not found: tasks/list");
    return;
  }
  /* The cursor is "after-N", N a creation number we gave; anything else is refused. */
  const json_node_t *cj = json_get(params, "cursor");
  const char *cursor = json_as_string(cj, NULL);
  uint64_t after = 0;
  if ((cj && json_type(cj) != JSON_NULL && !cursor) ||
      (cursor && (strncmp(cursor, "after-", 6) != 0 || parse_u64(cursor + 6, &after) < 0))) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Invalid params: not a cursor of tasks/list");
    return;
  }
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  uint64_t owner = tasks_owner(srv), last = 0;
  size_t n = 0;
  bool more = false;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "tasks");
  json_arr_begin(w);
  for (const struct task *t = srv->tasks; t; t = t->next) {
    if (t->owner != owner || t->seq <= after)
      continue;
    if (n == TASKS_PAGE) {
      more = true;
      break;
    }
    json_obj_begin(w);
    write_task_members(w, t);
    json_obj_end(w);
    last = t->seq;
    n++;
  }
  json_arr_end(w);
  if (more) {
    char next[32];
    bufprintf_cut(next, sizeof next, "after-%llu", (unsigned long long) last);
    json_kv_str(w, "nextCursor", next);
  }
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

void m_tasks_cancel(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (!t)
    return;
  /* 2025-11-25 tasks, "Task Cancellation": an ended task cannot be cancelled (-32602); a
   * cancelled one is cancelled before the answer, and stays so whatever its call does. */
  if (!tasks_cancel(srv, t)) {
    send_errorf(srv, id, JSONRPC_INVALID_PARAMS, "Cannot cancel task: already in terminal status '%s'",
                status_name(t));
    return;
  }
  send_task(srv, id, t, false);
  tasks_legacy_ended(srv, t, NULL);
}
