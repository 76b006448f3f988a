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
#include <sys/random.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/sha256.h"
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
  /* Asked in the request's answer, or a task's in its inputRequests (tasks/get, answered by
   * tasks/update): no session or stream needed. */
  if (mcp_is_modern(c->protocol))
    return c->elicit_form ? NULL
                          : "the client has no elicitation (its request's "
                            "io.modelcontextprotocol/clientCapabilities does not declare it)";
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
    asked = a->call == c && (a->req || a->in_result);
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

/* ------------------------------------------------------------------ 2026-07-28: in the answer
 *
 * basic/patterns/mrtr: the server may not send requests of its own; it answers the tools/call
 * with an InputRequiredResult whose inputRequests hold the elicitation, and the client retries
 * the tools/call with inputResponses and the requestState. The code is still running, blocked on
 * its host call: the call is kept, detached from the answered request, under a requestState of
 * 256 random bits that names it here (nothing is encoded in it, so nothing in it can be
 * tampered with: an unknown value is refused). The retry must come with the same bearer token
 * and the same language and code ("Server Requirements" 4 and 5: principal, and the originating
 * request); its expiry is the approval's deadline, after which the call goes on denied and its
 * state is forgotten with it. One approval of a call is asked at a time. */

#define INPUT_KEY "sandboxd_approval"

void approval_digest(const struct mcp_tool_args *args, uint8_t out[32])
{
  struct sha256 h;
  sha256_init(&h);
  const char *lang = mcp_lang_name(args->lang);
  sha256_update(&h, lang, strlen(lang) + 1);
  sha256_update(&h, args->code, args->code_len);
  sha256_final(&h, out);
}

static int new_state(char out[48])
{
  uint8_t r[32];
  if (getrandom(r, sizeof r, 0) != (ssize_t) sizeof r)
    return -1;
  size_t n;
  _cleanup_free_ char *b = base64_encode(r, sizeof r, &n);
  if (!b)
    return -1;
  for (char *p = b; *p; p++) /* base64url, unpadded */
    *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
  bufprintf_cut(out, 48, "%.*s", (int) strcspn(b, "="), b);
  return 0;
}

/* An inputRequests entry: a form elicitation/create asking message, with nothing to fill in. */
static void write_elicit(json_writer_t *w, const char *message)
{
  json_obj_begin(w);
  json_kv_str(w, "method", "elicitation/create");
  json_key(w, "params");
  json_obj_begin(w);
  json_kv_str(w, "mode", "form");
  json_kv_str(w, "message", message);
  json_key(w, "requestedSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
}

/* Answer c's request with an InputRequiredResult asking a, and detach c until the retry. */
static bool approval_in_result(struct server *srv, struct approval *a)
{
  struct call *c = a->call;
  if (!c->req_state[0] && new_state(c->req_state) < 0)
    return false;
  json_writer_t *w = json_writer_new();
  if (!w)
    return false;
  jsonrpc_begin_result(w, c->id);
  json_obj_begin(w);
  json_kv_str(w, "resultType", "input_required");
  json_key(w, "inputRequests");
  json_obj_begin(w);
  json_key(w, INPUT_KEY);
  write_elicit(w, a->message);
  json_obj_end(w);
  json_kv_str(w, "requestState", c->req_state);
  json_obj_end(w);
  jsonrpc_end(w);
  uint64_t route = srv->route;
  srv->route = c->route;
  send_writer(srv, w);
  srv->route = route;
  /* Its request is answered: no progress to it, no cancel by its id or its exchange's end. */
  c->detached = true;
  c->route = 0;
  free(c->progress_token);
  c->progress_token = NULL;
  a->in_result = true;
  return true;
}

static bool call_asking(const struct server *srv, const struct call *c)
{
  for (const struct approval *a = srv->approvals; a; a = a->next)
    if (a->call == c && (a->in_result || a->req))
      return true;
  return false;
}

/* Ask those waiting, oldest first: a 2026-07-28 call's in its request's answer when it has one
 * and asks nothing else; the others' while request slots are free. */
static void approval_pump(struct server *srv)
{
  size_t asked = 0;
  for (const struct approval *a = srv->approvals; a; a = a->next)
    asked += a->req != NULL;
  for (struct approval *a = srv->approvals; a; a = a->next) {
    if (a->req || a->in_result)
      continue;
    if (mcp_is_modern(a->call->protocol) && a->call->task) {
      /* The tasks extension (SEP-2663, "Mid-flight input"): the task says input_required, its
       * tasks/get carries the question (approval_task_question), tasks/update the answer. */
      if (!call_asking(srv, a->call)) {
        a->in_result = true;
        task_input(srv, a->call);
      }
    } else if (mcp_is_modern(a->call->protocol)) {
      if (!a->call->detached && !call_asking(srv, a->call))
        approval_in_result(srv, a);
    } else if (asked < MAX_APPROVAL_REQUESTS && approval_send(srv, a))
      asked++;
  }
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

static struct call *call_by_state(struct server *srv, const char *state)
{
  size_t n = strlen(state);
  for (struct call *c = srv->calls; c; c = c->next) {
    /* Compared in time independent of where they differ. */
    size_t m = strlen(c->req_state);
    unsigned char diff = (unsigned char) (n != m);
    for (size_t i = 0; c->detached && i < m && i < n; i++)
      diff |= (unsigned char) (state[i] ^ c->req_state[i]);
    if (c->detached && m && !diff)
      return c;
  }
  return NULL;
}

void approval_retry(struct server *srv, const char *id, const json_node_t *params, const uint8_t digest[32])
{
  const char *state = json_as_string(json_get(params, "requestState"), NULL);
  struct call *c = state ? call_by_state(srv, state) : NULL;
  if (!c || strcmp(c->owner, srv->owner ? srv->owner : "") != 0 || memcmp(c->digest, digest, 32) != 0) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS,
               "Invalid params: `requestState` names no call waiting for this request (it ended, its "
               "approval timed out, or the state, the client or the code differ)");
    return;
  }
  char *nid = strdup(id);
  if (!nid) {
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  /* The call takes this request: its answer (or the next InputRequiredResult) goes to it. */
  free(c->id);
  c->id = nid;
  c->route = srv->route;
  c->client = srv->client;
  c->detached = false;
  c->progress_token = jsonrpc_id_canonical(json_get(json_get(params, "_meta"), "progressToken"));
  struct approval *a = srv->approvals;
  while (a && !(a->call == c && a->in_result))
    a = a->next;
  if (!a) { /* its approval timed out meanwhile: the code went on, and this gets its result */
    approval_pump(srv);
    return;
  }
  const json_node_t *r = json_get(json_get(params, "inputResponses"), INPUT_KEY);
  const char *action = json_as_string(json_get(r, "action"), NULL);
  if (!action) { /* not answered: asked again, in this request's answer (mrtr, "Error Handling") */
    a->in_result = false;
    approval_pump(srv);
    return;
  }
  enum proxy_verdict v = strcmp(action, "accept") == 0   ? PROXY_APPROVED
                         : strcmp(action, "cancel") == 0 ? PROXY_CANCELLED
                                                         : PROXY_DENIED;
  approval_finish(srv, a, v, NULL);
}

/* c's approval asked through its task (2026-07-28's tasks extension), or NULL. */
static struct approval *task_question(const struct server *srv, const struct call *c)
{
  struct approval *a = srv->approvals;
  while (a && !(a->call == c && a->in_result && c->task))
    a = a->next;
  return a;
}

bool approval_task_question(const struct server *srv, const struct call *c, json_writer_t *w)
{
  const struct approval *a = c ? task_question(srv, c) : NULL;
  if (!a)
    return false;
  json_key(w, "inputRequests");
  json_obj_begin(w);
  json_key(w, INPUT_KEY);
  write_elicit(w, a->message);
  json_obj_end(w);
  return true;
}

void approval_task_answer(struct server *srv, struct call *c, const json_node_t *responses)
{
  struct approval *a = c ? task_question(srv, c) : NULL;
  const char *action = json_as_string(json_get(json_get(responses, INPUT_KEY), "action"), NULL);
  if (!a || !action) /* SEP-2663: responses to unknown or satisfied keys are ignored */
    return;
  approval_finish(srv, a,
                  strcmp(action, "accept") == 0   ? PROXY_APPROVED
                  : strcmp(action, "cancel") == 0 ? PROXY_CANCELLED
                                                  : PROXY_DENIED,
                  NULL);
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
