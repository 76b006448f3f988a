/* SPDX-License-Identifier: Apache-2.0 */
/* Approval of host tool calls (approve_host_calls, --approve; sandboxd-mcp(7), THE PROXY,
 * "Approval"). The proxy holds a tools/call that needs it and asks here (approval_ask, its
 * proxy_on_approval hook); this asks the user through the call's MCP client with a form
 * elicitation and answers the proxy (proxy_approval) with what came of it:
 *
 *   code -> proxy: tools/call          proxy -> approval_ask (held, in the proxy's budget)
 *   server -> client: elicitation/create {message, requestedSchema: {} }   (a request slot)
 *   client -> server: result.action accept | decline | cancel, or an error   (approval_answered)
 *   -> proxy_approval: approved (the call goes on) | denied | cancelled; no answer by the
 *      deadline: timeout; no way to ask: unavailable, at once, with the reason.
 *
 * An approval is asked once a request slot is free (MAX_APPROVAL_REQUESTS, one slot always left
 * for roots/list); until then it waits, oldest first, its deadline running. The deadline is
 * --approve-timeout from the code's request, and never past its run's own deadline (its sandbox is
 * killed then). A call that ends forgets its approvals: the client is told the request is
 * cancelled, and a late answer finds no request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "hostmcp/proxy.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_internal.h"
#include "sandbox/sandbox.h"

/* ------------------------------------------------------------------ what each client declared */

static struct client_caps *caps_find(const struct server *srv, uint64_t client)
{
  for (size_t i = 0; i < srv->n_client_caps; i++)
    if (srv->client_caps[i].client == client)
      return &srv->client_caps[i];
  return NULL;
}

void approval_client_init(struct server *srv, const json_node_t *capabilities)
{
  /* A stateless request is a client of its own, gone with its answer: nothing to keep. */
  if (srv->http && !srv->client_session)
    return;
  /* 2025-06-18: elicitation is an object; 2025-11-25: {form:{}} and/or {url:{}}, and an empty
   * object means form (schema.ts, ClientCapabilities.elicitation). */
  const json_node_t *e = json_get(capabilities, "elicitation");
  bool form = json_type(e) == JSON_OBJECT && (json_get(e, "form") || !json_get(e, "url"));
  struct client_caps *cc = caps_find(srv, srv->client);
  if (!cc) {
    struct client_caps *a = realloc(srv->client_caps, (srv->n_client_caps + 1) * sizeof *a);
    if (!a) {
      log_error("initialize: out of memory (the client's elicitation is not kept)");
      return;
    }
    srv->client_caps = a;
    cc = &a[srv->n_client_caps++];
    cc->client = srv->client;
  }
  cc->elicit_form = form;
}

void approval_forget_client(struct server *srv, uint64_t client)
{
  struct client_caps *cc = caps_find(srv, client);
  if (cc)
    *cc = srv->client_caps[--srv->n_client_caps];
}

/* ------------------------------------------------------------------ asking */

/* Elicitation came in 2025-06-18, its `mode` in 2025-11-25; the versions are dates. */
static bool protocol_at_least(const char *protocol, const char *version)
{
  return protocol && strcmp(protocol, version) >= 0;
}

/* NULL if c's client can be asked, else why not (in buf, or static). */
static const char *why_not(struct server *srv, const struct call *c, char *buf, size_t size)
{
  if (srv->http && !c->session)
    return "a stateless HTTP request has no session to take the client's answer";
  if (srv->http && c->task)
    return "a task's call over HTTP has no stream to ask on (its request was answered with the task; call "
           "the tool without a task, with a progressToken)";
  const struct client_caps *cc = caps_find(srv, c->client);
  if (!cc || !cc->elicit_form)
    return "the client has no elicitation (it did not declare the capability in initialize)";
  if (!protocol_at_least(c->protocol, "2025-06-18")) {
    bufprintf_cut(buf, size, "the client has no elicitation in protocol %s (it came in 2025-06-18)",
                  c->protocol ? c->protocol : "(none given)");
    return buf;
  }
  return srv->http ? mcp_http_stream_why_not(srv->http, c->route) : NULL;
}

/* A task's call waits for the user while an approval of it is asked: its task says
 * input_required (2025-11-25 tasks, "Input Required Status"), then working again. */
static void task_input(struct server *srv, struct call *c)
{
  bool asked = false;
  for (const struct approval *a = srv->approvals; a && !asked; a = a->next)
    asked = a->call == c && a->req;
  if (c->task)
    tasks_input_required(srv, c->task, asked);
}

static void approval_free(struct approval *a)
{
  if (!a)
    return;
  free(a->message);
  free(a);
}

/* Send elicitation/create for a in a free slot; false if none is free. */
static bool approval_send(struct server *srv, struct approval *a)
{
  char id[32];
  struct call *c = a->call;
  uint64_t client = srv->client, route = srv->route;
  srv->client = c->client; /* the request's owner, checked against the answer's sender */
  struct request *r = request_new(srv, REQUEST_ELICIT, "elicitation/create", id, sizeof id);
  json_writer_t *w = r ? json_writer_new() : NULL;
  if (!r || !w) {
    if (r)
      r->kind = REQUEST_NONE;
    srv->client = client;
    return false;
  }
  r->approval = a;
  a->req = r;
  /* "method" before "id": over HTTP the exchange takes it as a notification, not its answer. */
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_kv_str(w, "method", "elicitation/create");
  json_kv_str(w, "id", id);
  json_key(w, "params");
  json_obj_begin(w);
  if (protocol_at_least(c->protocol, "2025-11-25"))
    json_kv_str(w, "mode", "form");
  json_kv_str(w, "message", a->message);
  json_key(w, "requestedSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_obj_end(w);
  json_obj_end(w);
  if (c->task) { /* 2025-11-25 tasks, "Associating Task-Related Messages" */
    json_key(w, "_meta");
    json_obj_begin(w);
    json_key(w, "io.modelcontextprotocol/related-task");
    json_obj_begin(w);
    json_kv_str(w, "taskId", c->task->id);
    json_obj_end(w);
    json_obj_end(w);
  }
  json_obj_end(w);
  json_obj_end(w);
  srv->route = c->route;
  send_writer(srv, w);
  srv->client = client;
  srv->route = route;
  task_input(srv, c);
  return true;
}

/* Ask those waiting for a slot, oldest first, while slots are free. */
static void approval_pump(struct server *srv)
{
  size_t asked = 0;
  for (const struct approval *a = srv->approvals; a; a = a->next)
    asked += a->req != NULL;
  for (struct approval *a = srv->approvals; a && asked < MAX_APPROVAL_REQUESTS; a = a->next)
    if (!a->req && approval_send(srv, a))
      asked++;
}

/* Tell the client to drop a request it was sent (notifications/cancelled): its dialog closes. */
static void request_cancel(struct server *srv, struct approval *a, const char *reason)
{
  struct request *r = a->req;
  if (!r)
    return;
  json_writer_t *w = json_writer_new();
  if (w) {
    jsonrpc_begin_notification(w, "notifications/cancelled");
    json_obj_begin(w);
    json_kv_raw(w, "requestId", r->id, strlen(r->id));
    json_kv_str(w, "reason", reason);
    json_obj_end(w);
    jsonrpc_end(w);
    uint64_t route = srv->route;
    srv->route = a->call->route;
    send_writer(srv, w);
    srv->route = route;
  }
  r->kind = REQUEST_NONE;
  a->req = NULL;
}

/* a is answered: gone from the list and its slot, the proxy told, the next one asked. */
static void approval_finish(struct server *srv, struct approval *a, enum proxy_verdict v, const char *detail)
{
  slist_unlink(&srv->approvals, a);
  if (a->req) {
    a->req->kind = REQUEST_NONE;
    a->req = NULL;
  }
  struct call *c = a->call;
  /* A run that is over (answered, killed or cancelled) gets no host call from a late yes. */
  if (v == PROXY_APPROVED && (c->answered || c->killed || c->cancelled))
    v = PROXY_CANCELLED;
  if (c->proxy)
    proxy_approval(c->proxy, a->proxy_id, v, detail);
  approval_free(a);
  task_input(srv, c);
  approval_pump(srv);
}

void approval_ask(void *ctx, uint64_t id, const char *server, const char *tool, const char *args)
{
  struct call *c = ctx;
  struct server *srv = c->srv;
  char buf[128];
  const char *why = why_not(srv, c, buf, sizeof buf);
  if (why) {
    proxy_approval(c->proxy, id, PROXY_UNAVAILABLE, why);
    return;
  }
  struct approval *a = calloc(1, sizeof *a);
  char msg[1024];
  bufprintf_cut(msg, sizeof msg,
                "Code running in a sandboxd sandbox asks to call the tool `%.128s` of the host MCP server "
                "`%.100s`, with the arguments %s. Allow it?",
                tool, server, args);
  if (!a || !(a->message = strdup(msg))) {
    approval_free(a);
    proxy_approval(c->proxy, id, PROXY_UNAVAILABLE, "sandboxd: out of memory");
    return;
  }
  a->call = c;
  a->proxy_id = id;
  a->asked_ns = now_ns();
  a->deadline_ns = a->asked_ns + srv->approve_timeout_s * 1000000000ULL;
  /* Never past the run's own deadline: its sandbox is killed then. */
  if (c->sb && sandbox_deadline_ns(c->sb) < a->deadline_ns)
    a->deadline_ns = sandbox_deadline_ns(c->sb);
  slist_append(&srv->approvals, a);
  approval_pump(srv);
}

void approval_answered(struct server *srv, struct request *r, const struct jsonrpc_message *m)
{
  struct approval *a = r->approval;
  /* An error is no consent: denied. So is a result without a known action. */
  const char *action = json_as_string(json_get(json_get(m->root, "result"), "action"), NULL);
  enum proxy_verdict v = PROXY_DENIED;
  if (action && strcmp(action, "accept") == 0)
    v = PROXY_APPROVED;
  else if (action && strcmp(action, "cancel") == 0)
    v = PROXY_CANCELLED;
  approval_finish(srv, a, v, NULL);
}

int approval_timers(struct server *srv)
{
  uint64_t now = now_ns();
  int timeout = -1;
  for (struct approval *a = srv->approvals, *next; a; a = next) {
    next = a->next;
    if (now < a->deadline_ns) {
      int t = ms_until(a->deadline_ns, now);
      if (timeout < 0 || t < timeout)
        timeout = t;
      continue;
    }
    char msg[96];
    bufprintf_cut(msg, sizeof msg, "approval timed out after %llu s",
                  (unsigned long long) ((a->deadline_ns - a->asked_ns + 500000000ULL) / 1000000000ULL));
    request_cancel(srv, a, "timed out");
    approval_finish(srv, a, PROXY_APPROVAL_TIMEOUT, msg);
    next = srv->approvals; /* finish may have asked others: start over (none is past due twice) */
  }
  approval_pump(srv);
  return timeout;
}

void approval_forget_call(struct server *srv, struct call *c)
{
  for (struct approval *a = srv->approvals, *next; a; a = next) {
    next = a->next;
    if (a->call != c)
      continue;
    request_cancel(srv, a, "the call has ended");
    slist_unlink(&srv->approvals, a);
    approval_free(a);
  }
  approval_pump(srv);
}
