/* SPDX-License-Identifier: Apache-2.0 */
/* Tool calls run as tasks (sandboxd-mcp(7), TASKS; MCP 2025-11-25 basic/utilities/tasks):
 *
 *   client -> server: tools/call {..., task: {ttl}}      (a client that negotiated tasks)
 *   server -> client: CreateTaskResult {task: {taskId, status: working, ttl, pollInterval}}, at once
 *                     the call is queued and runs as any other (mcp_calls.c): same queue, limits,
 *                     sandbox; its answer is kept here (tasks_settle) instead of sent
 *   client -> server: tasks/get (the status), tasks/result (waits until the task has ended, then
 *                     the call's own answer), tasks/list, tasks/cancel (kills the sandbox)
 *   the timer (tasks_timers): a task whose ttl has ended is gone, running or not
 *
 * A task belongs to the client that made it: over stdio the one client, over HTTP its session,
 * or, stateless, its bearer token (without tokens, a loopback server's one user). Another client
 * asking for it is told it does not exist, as for an id never made (no oracle). A client holds at
 * most the policy's max_tasks, running or kept. The machinery here does not depend on the
 * revision; what goes on the wire does (the adapters at the end). */
#include "mcp/mcp_tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"

/* -32000, JSON-RPC's first implementation-defined server error: the client holds max_tasks. */
#define TASKS_TOO_MANY -32000

/* ------------------------------------------------------------------ the store */

/* Whose tasks srv->client's are. Over HTTP without a session (stateless) the token is all that
 * names the caller; the high bit keeps those apart from session numbers. */
static uint64_t owner_of(const struct server *srv)
{
  if (!srv->http || srv->client_session)
    return srv->client; /* stdio: 0 */
  return (1ULL << 63) | (uint64_t) (srv->principal + 1);
}

/* tasks/list is declared only where the caller is known (2025-11-25 tasks, "Task Isolation and
 * Access Control": a receiver that cannot identify requestors SHOULD NOT declare it). */
static bool can_list(const struct server *srv)
{
  return !srv->http || srv->client_session || srv->principal >= 0;
}

static struct task *task_find(struct server *srv, const char *id)
{
  uint64_t owner = owner_of(srv);
  for (struct task *t = srv->tasks; id && t; t = t->next)
    if (t->owner == owner && strcmp(t->id, id) == 0)
      return t;
  return NULL;
}

static bool terminal(const struct task *t)
{
  return t->status == TASK_COMPLETED || t->status == TASK_FAILED || t->status == TASK_CANCELLED;
}

static int64_t wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_status(struct task *t, enum task_status s, const char *message)
{
  t->status = s;
  free(t->status_message);
  t->status_message = message ? strdup(message) : NULL;
  t->updated_ms = wall_ms();
}

static void waiter_free(struct task_waiter *x)
{
  free(x->id);
  free(x);
}

static void task_free(struct task *t)
{
  while (t->waiters) {
    struct task_waiter *x = t->waiters;
    t->waiters = x->next;
    waiter_free(x);
  }
  free(t->status_message);
  free(t->result);
  free(t->error_message);
  free(t);
}

bool tasks_negotiated(const struct server *srv)
{
  return srv->protocol && strcmp(srv->protocol, "2025-11-25") == 0;
}

int tasks_create(struct server *srv, const json_node_t *params, int *code, char *msg, size_t msg_size,
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
  uint64_t owner = owner_of(srv);
  size_t held = 0;
  for (const struct task *t = srv->tasks; t; t = t->next)
    held += t->owner == owner;
  /* 2025-11-25 tasks, "Resource Management": limits on concurrent tasks per requestor. A kept
   * result counts until its ttl ends, so a client that needs many asks for a short ttl. */
  if (held >= srv->policy->max_tasks) {
    *code = TASKS_TOO_MANY;
    bufprintf_cut(
        msg, msg_size,
        "Too many tasks: this client holds %zu (the policy's max_tasks), running or kept until their "
        "ttl ends; wait for one to end, cancel one (tasks/cancel), or ask shorter ttls",
        held);
    return -1;
  }
  struct task *t = calloc(1, sizeof *t);
  unsigned char b[16];
  if (!t || getrandom(b, sizeof b, 0) != sizeof b) {
    free(t);
    *code = JSONRPC_INTERNAL_ERROR;
    bufprintf_cut(msg, msg_size, "Internal error: %s", t ? "getrandom failed" : "out of memory");
    return -1;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof b; i++) {
    t->id[2 * i] = hex[b[i] >> 4];
    t->id[2 * i + 1] = hex[b[i] & 15];
  }
  t->owner = owner;
  t->seq = ++srv->task_seq;
  /* 2025-11-25 tasks, "TTL and Resource Management": the receiver MAY override the ttl asked. */
  t->ttl_ms = (uint64_t) want;
  if (t->ttl_ms > TASK_TTL_MAX_MS)
    t->ttl_ms = TASK_TTL_MAX_MS;
  if (t->ttl_ms < TASK_TTL_MIN_MS)
    t->ttl_ms = TASK_TTL_MIN_MS;
  t->expires_ns = now_ns() + t->ttl_ms * 1000000ULL;
  t->created_ms = wall_ms();
  set_status(t, TASK_WORKING, NULL);
  slist_append(&srv->tasks, t);
  *ret = t;
  return 0;
}

/* ------------------------------------------------------------------ the wire (2025-11-25) */

static const char *status_name(const struct task *t)
{
  static const char *const names[] = {"working", "input_required", "completed", "failed", "cancelled"};
  return names[t->status];
}

static void write_time(json_writer_t *w, const char *key, int64_t ms)
{
  time_t s = (time_t) (ms / 1000);
  struct tm tm;
  char buf[40];
  gmtime_r(&s, &tm);
  bufprintf_cut(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) (ms % 1000));
  json_kv_str(w, key, buf);
}

/* The Task's members (schema.ts, Task). */
static void write_task_members(json_writer_t *w, const struct task *t)
{
  json_kv_str(w, "taskId", t->id);
  json_kv_str(w, "status", status_name(t));
  if (t->status_message)
    json_kv_str(w, "statusMessage", t->status_message);
  write_time(w, "createdAt", t->created_ms);
  write_time(w, "lastUpdatedAt", t->updated_ms);
  json_kv_uint(w, "ttl", t->ttl_ms);
  json_kv_uint(w, "pollInterval", TASK_POLL_INTERVAL_MS);
}

/* A result that is the task itself (tasks/get, tasks/cancel). */
static void send_task(struct server *srv, const char *id, const struct task *t)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  write_task_members(w, t);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
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

void tasks_created(struct server *srv, struct task *t, const char *id)
{
  json_writer_t *w = json_writer_new();
  if (w) {
    jsonrpc_begin_result(w, id);
    json_obj_begin(w);
    json_key(w, "task");
    json_obj_begin(w);
    write_task_members(w, t);
    json_obj_end(w);
    json_obj_end(w);
    jsonrpc_end(w);
    send_writer(srv, w);
  }
  /* The request is answered: what the call sends from now (progress) goes to no exchange of it. */
  if (t->call)
    t->call->route = 0;
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

/* notifications/tasks/status: over stdio, where it reaches the client (over HTTP the request
 * that made the task is over; the client polls, as it must anyway). */
static void notify_status(struct server *srv, const struct task *t)
{
  if (srv->http)
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/tasks/status");
  json_obj_begin(w);
  write_task_members(w, t);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* ------------------------------------------------------------------ ends */

/* Answer the tasks/result requests that wait on t (it has ended, or it is gone: gone_msg). */
static void answer_waiters(struct server *srv, struct task *t, const char *gone_msg)
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
    waiter_free(x);
  }
  t->n_waiters = 0;
  srv->client = client;
  srv->route = route;
}

void tasks_settle(struct server *srv, struct task *t, json_writer_t *w)
{
  size_t n = 0, off, len, eo, el;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  if (terminal(t)) { /* cancelled meanwhile: it stays cancelled (2025-11-25 tasks, "Task Cancellation") */
    json_writer_free(w);
    return;
  }
  if (buf && json_member_span(buf, n, "result", &off, &len) == 0 && len >= 2 && (t->result = malloc(len))) {
    memcpy(t->result, buf + off, len);
    t->result_len = len;
    t->is_error = json_member_span(t->result, len, "isError", &eo, &el) == 0 && el == 4 &&
                  memcmp(t->result + eo, "true", 4) == 0;
  } else {
    json_node_t *root = NULL;
    long long code = JSONRPC_INTERNAL_ERROR;
    sbx_error_t err;
    if (buf && json_parse(buf, n, &root, &err) == 0)
      json_as_int(json_get(json_get(root, "error"), "code"), &code);
    const char *m = json_as_string(json_get(json_get(root, "error"), "message"), NULL);
    t->error_code = (int) code;
    t->error_message = strdup(m ? m : "Internal error: out of memory");
    json_free(root);
  }
  json_writer_free(w);
  /* 2025-11-25 tasks, "Task Execution Errors": a tool result with isError is a failed task. */
  if (t->is_error || !t->result)
    set_status(t, TASK_FAILED,
               t->result ? "The call ended in an error (isError): its result says what happened"
                         : t->error_message);
  else
    set_status(t, TASK_COMPLETED, NULL);
  answer_waiters(srv, t, NULL);
  notify_status(srv, t);
}

void tasks_call_gone(struct task *t)
{
  t->call = NULL;
}

void tasks_input_required(struct server *srv, struct task *t, bool waiting)
{
  if (terminal(t) || (t->status == TASK_INPUT_REQUIRED) == waiting)
    return;
  set_status(t, waiting ? TASK_INPUT_REQUIRED : TASK_WORKING,
             waiting ? "Waiting for the user to approve a host tool call (elicitation/create)" : NULL);
  notify_status(srv, t);
}

/* t goes (its ttl ended, or its client did): its call is killed, never answered, and a
 * tasks/result waiting on it is told. */
static void task_drop(struct server *srv, struct task *t, const char *why)
{
  slist_unlink(&srv->tasks, t);
  struct call *c = TAKE_PTR(t->call);
  if (c) {
    c->task = NULL;
    call_cancel(srv, c);
  }
  answer_waiters(srv, t, why);
  task_free(t);
}

void tasks_abandon(struct server *srv, struct task *t)
{
  slist_unlink(&srv->tasks, t);
  task_free(t);
}

int tasks_timers(struct server *srv)
{
  uint64_t now = now_ns();
  int timeout = -1;
  for (struct task *t = srv->tasks, *next; t; t = next) {
    next = t->next;
    if (now >= t->expires_ns) {
      /* 2025-11-25 tasks, "TTL and Resource Management": after its ttl a task MAY be deleted,
       * whatever its status. Gone now, not when someone next asks. */
      task_drop(srv, t, "Failed to retrieve task: Task has expired");
      next = srv->tasks; /* a dropped call may not have touched the list, but start over: cheap */
      continue;
    }
    int ms = ms_until(t->expires_ns, now);
    if (timeout < 0 || ms < timeout)
      timeout = ms;
  }
  return timeout;
}

void tasks_forget_client(struct server *srv, uint64_t client)
{
  for (struct task *t = srv->tasks, *next; t; t = next) {
    next = t->next;
    if (t->owner == client)
      task_drop(srv, t, "Failed to retrieve task: its session has ended");
  }
}

static void drop_waiters(struct task *t, uint64_t client, uint64_t route, const char *id)
{
  for (struct task_waiter **p = &t->waiters; *p;) {
    struct task_waiter *x = *p;
    if (route ? x->route == route : x->client == client && strcmp(x->id, id) == 0) {
      *p = x->next;
      waiter_free(x);
      t->n_waiters--;
    } else {
      p = &x->next;
    }
  }
}

void tasks_forget_route(struct server *srv, uint64_t route)
{
  for (struct task *t = srv->tasks; t; t = t->next)
    drop_waiters(t, 0, route, NULL);
}

void tasks_request_cancelled(struct server *srv, const char *id)
{
  for (struct task *t = srv->tasks; t; t = t->next)
    drop_waiters(t, srv->client, 0, id);
}

void tasks_free_all(struct server *srv)
{
  while (srv->tasks) {
    struct task *t = srv->tasks;
    srv->tasks = t->next;
    if (t->call)
      t->call->task = NULL;
    task_free(t);
  }
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
  struct task *t = task_find(srv, task_id);
  if (!t)
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Failed to retrieve task: Task not found");
  return t;
}

void m_tasks_get(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (t)
    send_task(srv, id, t);
}

void m_tasks_result(struct server *srv, const char *id, const json_node_t *params)
{
  struct task *t = method_task(srv, id, params);
  if (!t)
    return;
  if (terminal(t)) {
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
  /* The cursor is "after N", N a creation number we gave; anything else is refused. */
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
  uint64_t owner = owner_of(srv), last = 0;
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
  if (terminal(t)) {
    send_errorf(srv, id, JSONRPC_INVALID_PARAMS, "Cannot cancel task: already in terminal status '%s'",
                status_name(t));
    return;
  }
  set_status(t, TASK_CANCELLED, "The task was cancelled by request.");
  /* Killed as notifications/cancelled kills a call; never answered (it is the task's). */
  if (t->call)
    call_cancel(srv, t->call);
  send_task(srv, id, t);
  answer_waiters(srv, t, NULL);
  notify_status(srv, t);
}
