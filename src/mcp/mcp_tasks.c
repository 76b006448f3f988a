/* SPDX-License-Identifier: Apache-2.0 */
/* Tool calls run as tasks (sandboxd-mcp(7), TASKS): the machinery, the same for every revision.
 *
 *   client -> server: tools/call                          a 2025-11-25 client with `task`, or a
 *                                                         2026-07-28 one declaring the extension
 *   server -> client: the task, at once                   (mcp_tasks_legacy.c, mcp_tasks_ext.c)
 *                     the call is queued and runs as any other (mcp_calls.c): same queue, limits,
 *                     sandbox; its answer is kept here (tasks_settle) instead of sent
 *   client -> server: tasks/get, tasks/cancel (kills the sandbox), and each revision's own
 *   the timer (tasks_timers): a task whose ttl has ended is gone, running or not
 *
 * A task belongs to the client that made it: over stdio the one client, over HTTP its session
 * (2025-11-25), or else its bearer token (stateless, and every 2026-07-28 request; without
 * tokens, a loopback server's one user). Another client asking for it is told it does not exist,
 * as for an id never made (no oracle). A client holds at most the policy's max_tasks, running or
 * kept. */
#include "mcp/mcp_tasks.h"

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

/* ------------------------------------------------------------------ the store */

uint64_t tasks_owner(const struct server *srv)
{
  if (!srv->http)
    return 0; /* stdio: the one client */
  /* 2025-11-25 over HTTP binds a task to the session (its authorization context). Without one
   * (stateless; 2026-07-28 has no sessions) the token is all that names the caller: 60 bits of
   * its sha256 (srv->owner; not its line in the file, which a reload may move), the high bit
   * keeping those apart from session numbers. Without tokens, the one owner 1 << 63. */
  if (srv->client_session && !mcp_is_modern(srv->protocol))
    return srv->client;
  uint64_t key = 0;
  for (size_t i = 0; srv->owner && i < 15 && srv->owner[i]; i++)
    key =
        key << 4 | (uint64_t) (srv->owner[i] <= '9' ? srv->owner[i] - '0' : (srv->owner[i] | 32) - 'a' + 10);
  return (1ULL << 63) | key;
}

struct task *tasks_find(struct server *srv, const char *id)
{
  uint64_t owner = tasks_owner(srv);
  for (struct task *t = srv->tasks; id && t; t = t->next)
    if (t->owner == owner && strcmp(t->id, id) == 0)
      return t;
  return NULL;
}

bool task_ended(const struct task *t)
{
  return t->status == TASK_ENDED || t->status == TASK_CANCELLED;
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

void tasks_write_time(json_writer_t *w, const char *key, int64_t ms)
{
  time_t s = (time_t) (ms / 1000);
  struct tm tm;
  char buf[40];
  gmtime_r(&s, &tm);
  bufprintf_cut(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) (ms % 1000));
  json_kv_str(w, key, buf);
}

static void task_free(struct task *t)
{
  while (t->waiters) {
    struct task_waiter *x = t->waiters;
    t->waiters = x->next;
    free(x->id);
    free(x);
  }
  free(t->status_message);
  free(t->result);
  free(t->error_message);
  free(t);
}

int tasks_create(struct server *srv, uint64_t ttl_ms, int *code, char *msg, size_t msg_size,
                 struct task **ret)
{
  uint64_t owner = tasks_owner(srv);
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
  t->ttl_ms = ttl_ms > TASK_TTL_MAX_MS   ? TASK_TTL_MAX_MS
              : ttl_ms < TASK_TTL_MIN_MS ? TASK_TTL_MIN_MS
                                         : ttl_ms;
  t->expires_ns = now_ns() + t->ttl_ms * 1000000ULL;
  t->created_ms = wall_ms();
  set_status(t, TASK_WORKING, NULL);
  slist_append(&srv->tasks, t);
  *ret = t;
  return 0;
}

void tasks_abandon(struct server *srv, struct task *t)
{
  slist_unlink(&srv->tasks, t);
  task_free(t);
}

/* ------------------------------------------------------------------ the call's side */

void tasks_settle(struct server *srv, struct task *t, json_writer_t *w)
{
  size_t n = 0, off, len, eo, el;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  if (task_ended(t)) { /* cancelled meanwhile: it stays so (2025-11-25 tasks, "Task Cancellation") */
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
  set_status(t, TASK_ENDED,
             !t->result    ? t->error_message
             : t->is_error ? "The call ended in an error: its result says what happened (isError)"
                           : NULL);
  if (srv->tasks_on.ended)
    srv->tasks_on.ended(srv, t, NULL);
}

bool tasks_cancel(struct server *srv, struct task *t)
{
  if (task_ended(t))
    return false;
  set_status(t, TASK_CANCELLED, "The task was cancelled by request.");
  /* Killed as notifications/cancelled kills a call; never answered (it is the task's). A queued
   * call is gone at once (call_free: tasks_call_gone). */
  if (t->call)
    srv->tasks_on.cancel_call(srv, t->call);
  return true;
}

void tasks_call_gone(struct task *t)
{
  t->call = NULL;
}

void tasks_input_required(struct server *srv, struct task *t, bool waiting)
{
  if (task_ended(t) || (t->status == TASK_INPUT_REQUIRED) == waiting)
    return;
  set_status(t, waiting ? TASK_INPUT_REQUIRED : TASK_WORKING,
             waiting ? "Waiting for the user to approve a host tool call (elicitation/create)" : NULL);
  if (srv->tasks_on.status)
    srv->tasks_on.status(srv, t);
}

/* ------------------------------------------------------------------ ends */

/* t goes (its ttl ended, or its client did): its call is killed, never answered, and a
 * tasks/result waiting on it is told. */
static void task_drop(struct server *srv, struct task *t, const char *why)
{
  slist_unlink(&srv->tasks, t);
  struct call *c = TAKE_PTR(t->call);
  if (c) {
    c->task = NULL;
    srv->tasks_on.cancel_call(srv, c);
  }
  if (srv->tasks_on.ended)
    srv->tasks_on.ended(srv, t, why);
  task_free(t);
}

int tasks_timers(struct server *srv)
{
  uint64_t now = now_ns();
  int timeout = -1;
  for (struct task *t = srv->tasks, *next; t; t = next) {
    next = t->next;
    if (now >= t->expires_ns) {
      /* 2025-11-25 tasks, "TTL and Resource Management" (and SEP-2663, "Task Polling"): after its
       * ttl a task MAY be deleted, whatever its status. Gone now, not when someone next asks. */
      task_drop(srv, t, "Failed to retrieve task: Task has expired");
      next = srv->tasks; /* what the drop did to the list is not ours to know: start over */
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
      free(x->id);
      free(x);
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
