/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`: MCP over stdio (https://modelcontextprotocol.io/specification), two tools.
 * The methods and the loop; what is written to the client goes through mcp_output.c.
 *
 * One thread, one poll loop. It watches stdin (requests), stdout (when replies are waiting for a
 * slow reader), a signalfd (SIGTERM/SIGINT/SIGHUP), and for every running call its sandbox's pidfd
 * and its stdout/stderr pipes. Deadlines and progress ticks become the poll timeout. Nothing here
 * blocks for long except sandbox_spawn() while it builds a sandbox, so ping is always answered. */
#include "mcp/mcp_server.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/util.h"
#include "base/version.h"
#include "hostmcp/mcp_client.h"
#include "hostmcp/mcp_config.h"
#include "hostmcp/proxy.h"
#include "mcp/fork_pool.h"
#include "mcp/mcp_binds.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_internal.h"
#include "policy/policy.h"
#include "run/audit.h"
#include "sandbox/fork_template.h"
#include "sandbox/sandbox.h"

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};

/* ------------------------------------------------------------------ replies */

/* initialize's and server/discover's instructions. */
static const char *instructions(const struct server *srv)
{
  return (srv->tools & TOOL_SESSIONS) && srv->max_sessions
             ? "Use run_python to execute Python code, or execute_code for Python, bash or JavaScript, "
               "in a fresh, isolated sandbox per call. Nothing persists between calls, unless they "
               "pass the session_id of a session_start (its state lasts until it ends). Limits are in "
               "resource " CAPABILITIES_URI "."
             : "Use run_python to execute Python code, or execute_code for Python, bash or JavaScript, "
               "in a fresh, isolated sandbox per call. "
               "Nothing persists between calls. Limits are in resource " CAPABILITIES_URI ".";
}

/* ------------------------------------------------------------------ methods */

const char *mcp_negotiate_version(const char *client_version)
{
  for (size_t i = 0; client_version && mcp_protocol_versions[i]; i++)
    if (strcmp(client_version, mcp_protocol_versions[i]) == 0)
      return mcp_protocol_versions[i];
  return mcp_protocol_versions[0];
}

/* Icons came in 2025-11-25; the versions are dates, so they compare as strings. */
static bool protocol_has_icons(const char *protocol)
{
  return protocol && strcmp(protocol, "2025-11-25") >= 0;
}

static void m_initialize(struct server *srv, const char *id, const json_node_t *params)
{
  /* Asked for once the client says it is initialized (roots_ask), and only with --roots. */
  srv->roots.client_has = json_type(json_get(json_get(params, "capabilities"), "roots")) == JSON_OBJECT;
  approval_client_init(srv, json_get(params, "capabilities"));
  const char *version = mcp_negotiate_version(json_as_string(json_get(params, "protocolVersion"), NULL));
  srv->protocol = version; /* what a result may hold (resource_link: mcp_files.c) */
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_kv_str(w, "protocolVersion", version);
  json_key(w, "capabilities");
  json_obj_begin(w);
  json_key(w, "tools");
  json_obj_begin(w);
  json_kv_bool(w, "listChanged", false);
  json_obj_end(w);
  json_key(w, "resources");
  json_obj_begin(w);
  json_kv_bool(w, "listChanged", false);
  json_kv_bool(w, "subscribe", false);
  json_obj_end(w);
  json_key(w, "logging");
  json_obj_begin(w);
  json_obj_end(w);
  tasks_write_capability(srv, w);
  json_obj_end(w);
  json_key(w, "serverInfo");
  json_obj_begin(w);
  json_kv_str(w, "name", "sandboxd");
  json_kv_str(w, "title", "sandboxd Python sandbox");
  json_kv_str(w, "version", SANDBOXD_VERSION);
  if (protocol_has_icons(srv->protocol))
    mcp_icons_write(w);
  json_obj_end(w);
  json_kv_str(w, "instructions", instructions(srv));
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* server/discover (2026-07-28, server/discover): the versions, capabilities and identity, and
 * caching hints like a list's. No listChanged and no subscribe: there are no change notifications
 * under 2026-07-28 here, so subscriptions/listen is -32601 (basic/patterns/subscriptions). */
static void m_server_discover(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "supportedVersions");
  json_arr_begin(w);
  for (size_t i = 0; mcp_all_versions[i]; i++)
    json_str(w, mcp_all_versions[i]);
  json_arr_end(w);
  json_key(w, "capabilities");
  json_obj_begin(w);
  json_key(w, "tools");
  json_obj_begin(w);
  json_obj_end(w);
  json_key(w, "resources");
  json_obj_begin(w);
  json_obj_end(w);
  json_key(w, "logging");
  json_obj_begin(w);
  json_obj_end(w);
  tasks_ext_write_capability(w);
  json_obj_end(w);
  json_kv_str(w, "instructions", instructions(srv));
  mcp_result_fields(srv->protocol, w, LIST_TTL_MS);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* What a call may do outside its sandbox here (mcp_tool.h). */
static struct mcp_tool_facts tool_facts(const struct server *srv)
{
  struct mcp_tool_facts fx = {.output_dir = srv->output_dir != NULL,
                              .egress =
                                  srv->policy->network == SBX_NET_PROXY && srv->policy->n_allow_hosts > 0,
                              .icons = protocol_has_icons(srv->protocol),
                              .tasks = tasks_negotiated(srv)};
  for (size_t i = 0; i < srv->binds.n; i++)
    fx.rw_binds |= srv->binds.binds[i].rw;
  for (size_t i = 0; srv->hs.cfg && i < srv->hs.cfg->n; i++)
    fx.host_tools |= policy_allows_server(srv->policy, srv->hs.cfg->servers[i].name);
  return fx;
}

static void m_tools_list(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "tools");
  json_arr_begin(w);
  /* 2026-07-28 has no roots/list outside a request (MRTR): its tools never name roots. */
  bool roots = srv->roots.enabled && srv->roots.client_has && !srv->req.modern;
  struct mcp_tool_facts fx = tool_facts(srv);
  if (srv->tools & TOOL_RUN_PYTHON)
    mcp_tool_write(w, srv->policy, srv->hs.cfg, &srv->binds, roots, srv->text_limit, &fx);
  if (srv->tools & TOOL_EXECUTE_CODE)
    mcp_exec_tool_write(w, srv->policy, srv->langs, &srv->binds, roots, srv->text_limit, &fx);
  if ((srv->tools & TOOL_SESSIONS) && srv->max_sessions)
    session_tools_write(srv, w, fx.icons);
  json_arr_end(w);
  mcp_result_fields(srv->protocol, w, LIST_TTL_MS);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* A tool error before any call (bad arguments, busy): the answer, or, with a task (which the
 * client may wait for), a task that has ended with it. */
static void refuse_call(struct server *srv, const char *id, struct task *t, json_writer_t *w)
{
  if (!t) {
    if (w)
      send_writer(srv, w);
    return;
  }
  tasks_created(srv, t, NULL, id);
  tasks_settle(srv, t, w);
}

static void m_tools_call(struct server *srv, const char *id, const json_node_t *params)
{
  const char *name = json_as_string(json_get(params, "name"), NULL);
  if (!name) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Invalid params: `name` must be a string");
    return;
  }
  /* Sessions' tools, unless the policy allows none (max_sessions 0). Never tasks (they declare no
   * execution.taskSupport: 2025-11-25 tasks, "Tool-Level Negotiation", -32601 for one asked). */
  bool session_tool = (srv->tools & TOOL_SESSIONS) && srv->max_sessions &&
                      (strcmp(name, "session_start") == 0 || strcmp(name, "session_end") == 0);
  if (session_tool && tasks_negotiated(srv) && json_get(params, "task")) {
    send_errorf(srv, id, JSONRPC_METHOD_NOT_FOUND, "Method not found: %s does not run as a task", name);
    return;
  }
  if ((srv->tools & TOOL_SESSIONS) && srv->max_sessions && strcmp(name, "session_start") == 0) {
    session_tool_start(srv, id, json_get(params, "arguments"));
    return;
  }
  if ((srv->tools & TOOL_SESSIONS) && srv->max_sessions && strcmp(name, "session_end") == 0) {
    session_tool_end(srv, id, json_get(params, "arguments"));
    return;
  }
  /* A tool left out by --tools is unknown, as to tools/list. */
  bool run_python = (srv->tools & TOOL_RUN_PYTHON) && strcmp(name, TOOL_NAME) == 0;
  if (!run_python && !((srv->tools & TOOL_EXECUTE_CODE) && strcmp(name, EXEC_TOOL_NAME) == 0)) {
    send_errorf(srv, id, JSONRPC_INVALID_PARAMS, "Unknown tool: %.200s", name);
    return;
  }
  /* Bad arguments are the model's to fix: answer with an isError result it can read (in a task
   * that has ended with it, when the client asked for one: it waits for a task). */
  struct mcp_tool_args args;
  char msg[1024];
  struct task *t = NULL;
  const json_node_t *a = json_get(params, "arguments");
  if ((run_python ? mcp_tool_parse_args(a, srv->policy, srv->hs.cfg, &args, msg, sizeof msg)
                  : mcp_exec_parse_args(a, srv->policy, srv->langs, &args, msg, sizeof msg)) < 0) {
    if (tasks_for_call(srv, id, params, false, &t) == 0)
      refuse_call(srv, id, t, tool_error_writer(srv, id, "%s", msg));
    return;
  }
  if (srv->req.modern && json_get(params, "requestState")) { /* a retry (mcp_approval.c) */
    uint8_t digest[32];
    approval_digest(&args, digest);
    approval_retry(srv, id, params, digest);
    return;
  }
  if (call_find(srv, id)) {
    send_errorf(srv, id, JSONRPC_INVALID_REQUEST, "Invalid Request: id %.100s is already in use", id);
    return;
  }
  /* A task (mcp_tasks.c) where the client asked for one (2025-11-25) or may get one (2026-07-28):
   * answered now, the call queued as any other. */
  if (tasks_for_call(srv, id, params, true, &t) < 0)
    return;
  struct session *sess = NULL;
  if (args.session_id && !(sess = session_for_call(srv, args.session_id, args.lang, msg, sizeof msg))) {
    refuse_call(srv, id, t, tool_error_writer(srv, id, "%s", msg));
    return;
  }
  if (!sess && srv->n_running >= srv->max_concurrent && srv->n_queued >= srv->max_queue) {
    refuse_call(srv, id, t,
                tool_error_writer(srv, id,
                                  "sandboxd is busy: %zu calls running and %zu queued (--max-queue); try "
                                  "again later",
                                  srv->n_running, srv->n_queued));
    return;
  }
  if (srv->code_bytes + args.code_len > CODE_HELD_MESSAGES * srv->max_message) {
    refuse_call(srv, id, t,
                tool_error_writer(srv, id,
                                  "sandboxd is busy: the calls running and queued hold %zu bytes of code, "
                                  "and this one (%zu bytes) would pass the limit of %zu; try again later",
                                  srv->code_bytes, args.code_len, CODE_HELD_MESSAGES * srv->max_message));
    return;
  }
  struct call *c = call_enqueue(srv, id, &args, json_get(json_get(params, "_meta"), "progressToken"), sess);
  if (!c) {
    if (t)
      tasks_abandon(srv, t);
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  if (t)
    tasks_created(srv, t, c, id);
  start_queued(srv);
}

static void m_logging_set_level(struct server *srv, const char *id, const json_node_t *params)
{
  const char *level = json_as_string(json_get(params, "level"), NULL);
  for (size_t i = 0; level && i < MCP_LOG_LEVELS; i++)
    if (strcmp(level, mcp_log_levels[i]) == 0) {
      if (mcp_log_level_set(srv, (int) i) < 0)
        send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
      else
        send_empty_result(srv, id);
      return;
    }
  send_error(srv, id, JSONRPC_INVALID_PARAMS,
             "Invalid params: `level` must be one of debug, info, notice, "
             "warning, error, critical, alert, emergency");
}

static void m_ping(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  send_empty_result(srv, id);
}

static const struct method {
  const char *name;
  void (*run)(struct server *srv, const char *id, const json_node_t *params);
} methods[] = {
    {"initialize", m_initialize},         {"ping", m_ping},
    {"tools/list", m_tools_list},         {"tools/call", m_tools_call},
    {"resources/list", m_resources_list}, {"resources/templates/list", m_resources_templates_list},
    {"resources/read", m_resources_read}, {"logging/setLevel", m_logging_set_level},
    {"tasks/get", m_tasks_get},           {"tasks/result", m_tasks_result},
    {"tasks/list", m_tasks_list},         {"tasks/cancel", m_tasks_cancel},
    /* Not here, so answered -32601: prompts/list, completion/complete. */
};

/* Revision 2026-07-28's (mcp_modern.c): no initialize, ping or logging/setLevel (basic/versioning;
 * the changelog's "Major changes" 2 and 5); unknown ones are -32601 with HTTP 404. */
static const struct method modern_methods[] = {
    {"server/discover", m_server_discover},
    {"tools/list", m_tools_list},
    {"tools/call", m_tools_call},
    {"resources/list", m_resources_list},
    {"resources/templates/list", m_resources_templates_list},
    {"resources/read", m_resources_read},
    {"tasks/get", m_tasks_ext_get},
    {"tasks/update", m_tasks_ext_update},
    {"tasks/cancel", m_tasks_ext_cancel},
};

/* ------------------------------------------------------------------ requests to the client
 *
 * The server's own requests (roots/list, and elicitation/create for approvals: mcp_approval.c)
 * have ids of their own, "sandboxd-N", and at most MAX_REQUESTS are in flight (their slots:
 * mcp_requests.c); a roots/list not answered within REQUEST_TIMEOUT_NS is forgotten (an approval
 * has its own deadline). An answer
 * (a message with an id and a result or error but no method) is routed by its id; one to no
 * request of ours is ignored, as the spec allows. Nothing waits for a roots/list answer: a call
 * made meanwhile runs with what the server knows already. */

static int send_request(struct server *srv, const char *method, enum request_kind kind)
{
  char id[32];
  if (!request_new(srv, kind, method, id, sizeof id)) {
    log_warn("%s not sent: %d requests to the client are unanswered", method, MAX_REQUESTS);
    return -1;
  }
  json_writer_t *w = json_writer_new();
  if (!w)
    return -1;
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_kv_str(w, "id", id);
  json_kv_str(w, "method", method);
  json_obj_end(w);
  send_writer(srv, w);
  return 0;
}

/* roots/list, with --roots and a client that has roots; while one is in flight, once more when
 * it is answered (the list may have changed after the client read it). */
static void roots_ask(struct server *srv)
{
  if (!srv->roots.enabled || !srv->roots.client_has)
    return;
  requests_expire(srv, now_ns());
  if (srv->roots.asking) {
    srv->roots.stale = true;
    return;
  }
  if (send_request(srv, "roots/list", REQUEST_ROOTS_LIST) == 0) {
    srv->roots.asking = true;
    srv->roots.stale = false;
  }
}

static void on_response(struct server *srv, const struct jsonrpc_message *m)
{
  struct request *r = NULL;
  for (size_t i = 0; i < MAX_REQUESTS && !r; i++)
    if (srv->requests[i].kind != REQUEST_NONE && strcmp(srv->requests[i].id, m->id) == 0)
      r = &srv->requests[i];
  if (!r)
    return;
  if (r->kind == REQUEST_ELICIT) { /* only from the client that was asked */
    if (r->client == srv->client)
      approval_answered(srv, r, m);
    return;
  }
  enum request_kind kind = r->kind;
  r->kind = REQUEST_NONE;
  if (kind == REQUEST_ROOTS_LIST) {
    srv->roots.asking = false;
    /* Idle warm sandboxes were built with the old set: the next calls get sandboxes with the new. */
    if (mcp_roots_update(srv, json_get(m->root, "result"), json_get(m->root, "error")))
      warm_pool_clear(srv);
    if (srv->roots.stale)
      roots_ask(srv);
  }
}

static void on_cancelled(struct server *srv, const json_node_t *params)
{
  _cleanup_free_ char *id = jsonrpc_id_canonical(json_get(params, "requestId"));
  struct call *c = id ? call_find(srv, id) : NULL;
  if (c)
    call_cancel(srv, c); /* else already answered, or never ours: nothing to do */
  else if (id)
    tasks_request_cancelled(srv, id); /* a tasks/result that waits */
}

void mcp_cancel_calls(struct server *srv, uint64_t client, uint64_t route)
{
  if (!route) { /* the session ended: its tasks too */
    mcp_log_level_forget(srv, client);
    approval_forget_client(srv, client);
    tasks_forget_client(srv, client);
  } else {
    tasks_forget_route(srv, route);
  }
  for (struct call *c = srv->calls, *next; c; c = next) {
    next = c->next;
    if (!c->answered && !c->cancelled && (route ? c->route == route : c->client == client))
      call_cancel(srv, c);
  }
}

/* A request, of either era: a 2026-07-28 one (its _meta, and over HTTP its headers, checked) is
 * served under that version whatever an initialize said, and leaves nothing behind. */
static void dispatch_request(struct server *srv, const struct jsonrpc_message *m)
{
  struct mcp_modern_req req;
  int era = mcp_modern_request(srv, m, &req);
  if (era < 0 || (era == 0 && mcp_version_refused(srv, m)))
    return;
  const struct method *table = era ? modern_methods : methods;
  size_t n = era ? ARRAY_SIZE(modern_methods) : ARRAY_SIZE(methods), i = 0;
  while (i < n && strcmp(table[i].name, m->method) != 0)
    i++;
  if (i == n) {
    if (era)
      mcp_method_not_found(srv, m->id, m->method);
    else
      send_errorf(srv, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found: %.200s", m->method);
    return;
  }
  if (!era) {
    table[i].run(srv, m->id, m->params); /* initialize sets srv->protocol for the stdio client */
    return;
  }
  const char *protocol = srv->protocol;
  srv->protocol = MCP_MODERN_VERSION;
  srv->req = req;
  table[i].run(srv, m->id, m->params);
  srv->protocol = protocol;
  srv->req = (struct mcp_modern_req){0};
}

void mcp_dispatch(struct server *srv, const struct jsonrpc_message *m)
{
  if (m->kind == JSONRPC_RESPONSE) {
    on_response(srv, m);
  } else if (m->kind == JSONRPC_NOTIFICATION) {
    if (strcmp(m->method, "notifications/cancelled") == 0)
      on_cancelled(srv, m->params);
    else if (strcmp(m->method, "notifications/initialized") == 0 ||
             strcmp(m->method, "notifications/roots/list_changed") == 0)
      roots_ask(srv);
    /* Anything else: nothing to do, never answered. */
  } else if (m->params && json_type(m->params) != JSON_OBJECT) {
    send_error(srv, m->id, JSONRPC_INVALID_PARAMS, "Invalid params: `params` must be an object");
  } else {
    dispatch_request(srv, m);
  }
}

static void handle_message(struct server *srv, const char *line, size_t len)
{
  struct jsonrpc_message m;
  struct jsonrpc_failure fail;
  if (jsonrpc_parse(line, len, &m, &fail) < 0) {
    send_error(srv, fail.id, fail.code, fail.detail.msg);
    jsonrpc_failure_clear(&fail);
    return;
  }
  mcp_dispatch(srv, &m);
  jsonrpc_message_clear(&m);
}

/* ------------------------------------------------------------------ the loop */

static void read_stdin(struct server *srv)
{
  char buf[MCP_READ_CHUNK];
  ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  const char *line;
  size_t len;
  enum jsonrpc_frame f;
  if (n <= 0) {
    if (n < 0)
      log_error("read stdin: %s", strerror(errno));
    srv->stdin_eof = true;
    while ((f = jsonrpc_framer_finish(&srv->framer, &line, &len)) != JSONRPC_FRAME_NONE)
      if (f == JSONRPC_FRAME_MESSAGE)
        handle_message(srv, line, len);
    return;
  }
  sbx_error_t err;
  if (jsonrpc_framer_push(&srv->framer, buf, (size_t) n, &err) < 0) {
    log_sbx_error(&err);
    return;
  }
  while ((f = jsonrpc_framer_next(&srv->framer, &line, &len)) != JSONRPC_FRAME_NONE) {
    if (f == JSONRPC_FRAME_MESSAGE) {
      handle_message(srv, line, len);
    } else {
      struct jsonrpc_failure fail;
      size_t tail_len;
      const char *tail = jsonrpc_framer_tail(&srv->framer, &tail_len);
      jsonrpc_oversize(line, len, tail, tail_len, srv->max_message, &fail);
      log_warn("dropped a message larger than %zu bytes (--max-message-size)", srv->max_message);
      send_error(srv, fail.id, fail.code, fail.detail.msg);
      jsonrpc_failure_clear(&fail);
    }
  }
}

enum { FD_SIGNAL, FD_STDIN, FD_STDOUT, FD_FIXED };
/* Per running call: its pidfd, stdout, stderr and bridge. */
#define FDS_PER_CALL 4

/* A stop signal, or SIGHUP. true: stop. */
static bool on_signal(struct server *srv)
{
  struct signalfd_siginfo si;
  if (read(srv->sigfd, &si, sizeof si) == sizeof si && si.ssi_signo == SIGHUP) {
    /* logrotate moved the audit log: the next record opens the file anew. */
    audit_reopen();
    if (srv->http) /* and the bearer tokens may have changed */
      mcp_http_reload(srv->http);
    return false;
  }
  log_warn("signal %u: stopping", si.ssi_signo);
  srv->stop = true;
  return true;
}

/* FDS_PER_CALL entries per running call, each owned by its call. */
static size_t call_pollfds(struct server *srv, struct pollfd *pfds, struct call **owners)
{
  size_t n = 0;
  for (struct call *c = srv->calls; c; c = c->next) {
    if (c->state != CALL_RUNNING)
      continue;
    /* Waiting for its warm sandbox: that sandbox's setup, instead of an end. */
    int fds[3] = {c->pending && c->pending->fork_pending ? fork_pending_fd(c->pending->fork_pending)
                  : c->pending                           ? sandbox_spawn_fd(c->pending->sb)
                                                         : sandbox_pidfd(c->sb),
                  c->out_fd, c->err_fd};
    for (int i = 0; i < 3; i++) {
      owners[n] = c;
      pfds[n++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    }
    /* The job while it is written, then the bridge, or else the done channel. */
    owners[n] = c;
    pfds[n++] = c->job.fd >= 0 ? (struct pollfd){.fd = c->job.fd, .events = POLLOUT}
                : c->proxy     ? (struct pollfd){.fd = proxy_fd(c->proxy), .events = proxy_events(c->proxy)}
                               : (struct pollfd){.fd = c->done_fd, .events = POLLIN};
  }
  return n;
}

static void calls_dispatch(struct server *srv, const struct pollfd *pfds, struct call *const *owners,
                           size_t n)
{
  /* Output and bridges, then ends: a call may finish (and be freed) below. */
  for (size_t i = 0; i < n; i += FDS_PER_CALL) {
    struct call *c = owners[i];
    if (pfds[i + 1].revents && c->out_fd >= 0)
      drain_pipe(c, &c->out_fd, CAPTURE_STDOUT);
    if (pfds[i + 2].revents && c->err_fd >= 0)
      drain_pipe(c, &c->err_fd, CAPTURE_STDERR);
    if (pfds[i + 3].revents && c->job.fd >= 0 && pfds[i + 3].fd == c->job.fd)
      call_job_ready(srv, c, false);
    else if (pfds[i + 3].revents && c->proxy && pfds[i + 3].fd == proxy_fd(c->proxy))
      proxy_handle(c->proxy, pfds[i + 3].revents);
    else if (pfds[i + 3].revents && !c->proxy && c->done_fd >= 0 && pfds[i + 3].fd == c->done_fd)
      call_done(srv, c);
  }
  for (size_t i = 0; i < n; i += FDS_PER_CALL)
    if (pfds[i].revents && owners[i]->pending)
      call_pending_ready(srv, owners[i], false);
    else if (pfds[i].revents)
      call_finish(srv, owners[i]);
}

void serve(struct server *srv)
{
  struct pollfd *pfds = NULL;
  struct call **owners = NULL;
  size_t cap = 0;
  while (!srv->stop && !srv->stdin_eof) {
    start_queued(srv);
    int timeout = run_timers(srv);
    int approval_timeout = approval_timers(srv);
    if (approval_timeout >= 0 && (timeout < 0 || approval_timeout < timeout))
      timeout = approval_timeout;
    int task_timeout = tasks_timers(srv); /* ttls: reaped on time, not when next asked */
    if (task_timeout >= 0 && (timeout < 0 || task_timeout < timeout))
      timeout = task_timeout;
    int session_timeout = session_timers(srv);
    if (session_timeout >= 0 && (timeout < 0 || session_timeout < timeout))
      timeout = session_timeout;
    int host_timeout = mcp_hosts_timers(srv->hs.hosts);
    if (host_timeout >= 0 && (timeout < 0 || host_timeout < timeout))
      timeout = host_timeout;
    /* One sandbox per turn of the loop; the rest of its setup is collected below. */
    warm_pool_top_up(srv, code_running(srv), &timeout);

    size_t n_hosts = mcp_hosts_max_pollfds(srv->hs.hosts);
    size_t n_http = srv->http ? mcp_http_max_pollfds(srv->http) : 0;
    size_t need = FD_FIXED + n_hosts + FDS_PER_CALL * srv->n_running + srv->n_warm + srv->n_sessions +
                  n_http + 1; /* + fork_next */
    if (need > cap) {
      struct pollfd *p = realloc(pfds, need * sizeof *p);
      if (p)
        pfds = p;
      struct call **o = realloc(owners, need * sizeof *o);
      if (o)
        owners = o;
      if (!p || !o) {
        log_error("poll set: out of memory");
        break;
      }
      cap = need;
    }
    bool backlog = srv->outq.len - srv->outq_off > OUTQ_HIGH_WATER;
    pfds[FD_SIGNAL] = (struct pollfd){.fd = srv->sigfd, .events = POLLIN};
    /* A client that does not read our replies gets no more of its requests read. */
    pfds[FD_STDIN] = (struct pollfd){.fd = backlog || srv->http ? -1 : STDIN_FILENO, .events = POLLIN};
    pfds[FD_STDOUT] =
        (struct pollfd){.fd = srv->outq_off < srv->outq.len ? STDOUT_FILENO : -1, .events = POLLOUT};
    size_t n = FD_FIXED + mcp_hosts_pollfds(srv->hs.hosts, pfds + FD_FIXED);
    size_t first_call = n;
    n += call_pollfds(srv, pfds + n, owners + n);
    size_t first_warm = n;
    n += warm_pool_pollfds(srv, pfds + n);
    size_t first_session = n;
    n += session_pollfds(srv, pfds + n);
    size_t first_http = n;
    if (srv->http) {
      n += mcp_http_pollfds(srv->http, pfds + n);
      int t = mcp_http_timeout(srv->http);
      if (t >= 0 && (timeout < 0 || t < timeout))
        timeout = t;
    }
    int r = poll(pfds, n, timeout);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      log_error("poll: %s", strerror(errno));
      break;
    }
    if (pfds[FD_SIGNAL].revents) {
      if (on_signal(srv))
        break;
      continue;
    }
    if (pfds[FD_STDOUT].revents)
      flush_output(srv);
    /* Host servers' answers first: they go to bridges that are still open. */
    mcp_hosts_dispatch(srv->hs.hosts, pfds + FD_FIXED, first_call - FD_FIXED);
    calls_dispatch(srv, pfds + first_call, owners + first_call, first_warm - first_call);
    calls_answer_sessions(srv);
    /* In pool order, which nothing above changed: calls take warm sandboxes only in read_stdin. */
    warm_pool_dispatch(srv, pfds + first_warm, first_session - first_warm);
    session_dispatch(srv, pfds + first_session, first_http - first_session);
    if (srv->http)
      mcp_http_dispatch(srv->http, pfds + first_http, n - first_http);
    if (pfds[FD_STDIN].revents)
      read_stdin(srv);
  }
  free(pfds);
  free(owners);
}
