/* SPDX-License-Identifier: Apache-2.0 */
/* Tasks on the wire of revision 2026-07-28: the extension io.modelcontextprotocol/tasks
 * (SEP-2663; docs/extensions/tasks). The server decides: a tools/call from a request that
 * declares the extension in its clientCapabilities is answered with a flat CreateTaskResult
 * (resultType "task"); tasks/get polls, with the call's result (or its JSON-RPC error) inline
 * once it has ended; tasks/update and tasks/cancel are acknowledged with an empty result. No
 * tasks/result, no tasks/list (-32601, as any method 2026-07-28 lacks). The machinery is
 * mcp_tasks.c's. */
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_tasks.h"

bool tasks_ext_declared(const struct server *srv)
{
  return srv->req.modern &&
         json_type(json_get(json_get(srv->req.caps, "extensions"), TASKS_EXTENSION)) == JSON_OBJECT;
}

void tasks_ext_write_capability(json_writer_t *w)
{
  json_key(w, "extensions");
  json_obj_begin(w);
  json_key(w, TASKS_EXTENSION);
  json_obj_begin(w);
  json_obj_end(w);
  json_obj_end(w);
}

/* SEP-2663, "Task Status": a tool result, isError or not, is completed; failed is a JSON-RPC
 * error alone; input_required while an approval of its call waits (its inputRequests: tasks/get). */
static const char *status_name(const struct task *t)
{
  switch (t->status) {
  case TASK_INPUT_REQUIRED:
    return "input_required";
  case TASK_WORKING:
    return "working";
  case TASK_ENDED:
    return t->result ? "completed" : "failed";
  case TASK_CANCELLED:
    break;
  }
  return "cancelled";
}

static void write_members(json_writer_t *w, const struct task *t)
{
  json_kv_str(w, "taskId", t->id);
  json_kv_str(w, "status", status_name(t));
  if (t->status_message)
    json_kv_str(w, "statusMessage", t->status_message);
  tasks_write_time(w, "createdAt", t->created_ms);
  tasks_write_time(w, "lastUpdatedAt", t->updated_ms);
  json_kv_uint(w, "ttlMs", t->ttl_ms);
  json_kv_uint(w, "pollIntervalMs", TASK_POLL_INTERVAL_MS);
}

void tasks_ext_created(struct server *srv, const struct task *t, const char *id)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  write_members(w, t); /* flat: Result & Task, no `task` wrapper */
  mcp_result_fields_typed(srv->protocol, w, -1, "task");
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* The request's task, or NULL with the error sent: a request without the extension gets -32021
 * (SEP-2663, "Protocol Errors"), an unknown task (or another client's) -32602. */
static struct task *method_task(struct server *srv, const char *id, const json_node_t *params)
{
  if (!tasks_ext_declared(srv)) {
    mcp_missing_extension(srv, id, TASKS_EXTENSION);
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

void m_tasks_ext_get(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (!t)
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  write_members(w, t);
  if (t->status == TASK_INPUT_REQUIRED)
    approval_task_question(srv, t->call, w);
  /* Inline, as the call would have answered; no related-task _meta (the taskId is beside it). */
  if (t->status == TASK_ENDED && t->result) {
    json_kv_raw(w, "result", t->result, t->result_len);
  } else if (t->status == TASK_ENDED) {
    json_key(w, "error");
    json_obj_begin(w);
    json_kv_int(w, "code", t->error_code);
    json_kv_str(w, "message", t->error_message ? t->error_message : "Internal error");
    json_obj_end(w);
  }
  mcp_result_fields(srv->protocol, w, -1);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* SEP-2663, "Task Update Requests": inputResponses to the task's inputRequests (its call's
 * approval: approval_task_answer); keys not outstanding are ignored. Acknowledged either way. */
void m_tasks_ext_update(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (!t)
    return;
  if (!task_ended(t))
    approval_task_answer(srv, t->call, json_get(params, "inputResponses"));
  send_empty_result(srv, id);
}

/* SEP-2663, "Task Cancellation": acknowledged, an ended task too (it stays as it ended). */
void m_tasks_ext_cancel(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (!t)
    return;
  tasks_cancel(srv, t);
  send_empty_result(srv, id);
}
