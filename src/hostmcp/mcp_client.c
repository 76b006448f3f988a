/* SPDX-License-Identifier: Apache-2.0 */
/* Host MCP servers: the operations, each connection's state and what the servers send
 * (mcp_client.h) and the queue to their stdin. Their processes are in mcp_client_proc.c, the
 * messages we send them in mcp_client_send.c. */
#include "hostmcp/mcp_client.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/jsonrpc.h"
#include "base/slist.h"
#include "base/util.h"
#include "base/warn.h"
#include "hostmcp/mcp_client_internal.h"

#define CLIENT_READ_CHUNK 65536
#define MAX_TOOL_PAGES 100
/* The most of a string a host message's tree holds (jsonrpc_parse_cut): progress and error
 * messages, and the `isError` of a result, are read from it; a result goes on as written. */
#define CLIENT_TREE_STRING 4096
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 30000

/* ------------------------------------------------------------------ operations */

static void op_free(struct op *o)
{
  if (!o)
    return;
  free(o->tool);
  free(o->args);
  free(o);
}

static void op_unlink(struct client *c, struct op *o)
{
  slist_unlink(&c->ops, o);
}

static void op_finish(struct client *c, struct op *o, const char *json, size_t len, int code, const char *msg)
{
  op_unlink(c, o);
  struct mcp_op_cb cb = o->cb;
  op_free(o);
  cb.done(cb.ctx, json, len, code, msg);
}

static void op_failf(struct client *c, struct op *o, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void op_failf(struct client *c, struct op *o, int code, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  op_finish(c, o, NULL, 0, code, msg);
}

static struct op *op_by_rpc(struct client *c, long long rpc)
{
  for (struct op *o = c->ops; o; o = o->next)
    if (o->state == OP_SENT && o->rpc_id == rpc)
      return o;
  return NULL;
}

/* ------------------------------------------------------------------ state changes */

/* The server is gone (or must go): close its pipes, let it be reaped, fail what it had. */
void mcp_client_down(struct mcp_hosts *h, struct client *c, const char *why)
{
  if (c->state == C_DOWN)
    return;
  char reason[160];
  int st;
  /* A crash usually has already happened when its stdout closes: say how it ended. */
  if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
    if (WIFSIGNALED(st))
      bufprintf_cut(reason, sizeof reason, "was killed by signal %d", WTERMSIG(st));
    else
      bufprintf_cut(reason, sizeof reason, "exited with status %d", WEXITSTATUS(st));
  } else {
    bufprintf_cut(reason, sizeof reason, "%s", why);
    mcp_client_add_dying(h, c->pid, 0);
  }
  close(c->in_fd);
  close(c->out_fd);
  c->in_fd = c->out_fd = -1;
  c->pid = 0;
  c->state = C_DOWN;
  c->outq.len = c->outq_off = 0;
  c->list_rpc = 0;
  json_writer_free(c->list_acc);
  c->list_acc = NULL;
  c->failures++;
  unsigned shift = c->failures - 1 < 8 ? c->failures - 1 : 8;
  uint64_t backoff = (uint64_t) BACKOFF_FIRST_MS << shift;
  if (backoff > BACKOFF_MAX_MS)
    backoff = BACKOFF_MAX_MS;
  c->restart_at_ns = now_ns() + backoff * 1000000ULL;
  sbx_warn(SBX_WARN_HOST_SERVER, "host MCP server `%s` %s; restarting it on next use", c->cfg->name, reason);
  /* Everything it had fails: a call may have had effects, so it is never silently retried. */
  while (c->ops)
    op_failf(c, c->ops, MCP_ERR_UNAVAILABLE, "host MCP server `%s` %s", c->cfg->name, reason);
}

/* ------------------------------------------------------------------ the queue to its stdin */

/* Write what the server's stdin takes now; the rest waits for POLLOUT. */
static void client_flush(struct mcp_hosts *h, struct client *c)
{
  while (c->in_fd >= 0 && c->outq_off < c->outq.len) {
    ssize_t n = write(c->in_fd, c->outq.data + c->outq_off, c->outq.len - c->outq_off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n < 0) {
      mcp_client_down(h, c, "closed its stdin");
      return;
    }
    c->outq_off += (size_t) n;
  }
  c->outq.len = c->outq_off = 0;
  /* A burst of large requests (bounded by the proxy's budget) does not keep its room. */
  if (c->outq.cap > (1u << 20))
    strbuf_free(&c->outq);
}

/* Queue one message (the writer is freed; NULL: out of memory, fails). Fails when the server is
 * not reading. */
static int client_send(struct mcp_hosts *h, struct client *c, json_writer_t *w)
{
  size_t n;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  int r = -1;
  if (buf && c->outq.len - c->outq_off + n <= MCP_CLIENT_MAX_OUTQ && strbuf_append(&c->outq, buf, n) == 0 &&
      strbuf_append(&c->outq, "\n", 1) == 0)
    r = 0;
  json_writer_free(w);
  if (r == 0)
    client_flush(h, c);
  return r;
}

/* Queue o's tools/call, its arguments (often the bulk of it) copied once, straight into the queue;
 * they are freed either way: a call that could not be queued is not tried again. */
static int client_send_call(struct mcp_hosts *h, struct client *c, struct op *o)
{
  json_writer_t *w = mcp_client_msg_call_head(h, o);
  size_t hn = 0;
  const char *head = w ? json_writer_buf(w, &hn) : NULL;
  _cleanup_free_ char *args = TAKE_PTR(o->args);
  const char *a = args ? args : "{}";
  size_t an = strlen(a), before = c->outq.len;
  static const char key[] = ",\"arguments\":", end[] = "}}\n";
  bool ok = head && c->outq.len - c->outq_off + hn + sizeof key + an + sizeof end <= MCP_CLIENT_MAX_OUTQ &&
            strbuf_append(&c->outq, head, hn) == 0 && strbuf_append(&c->outq, key, sizeof key - 1) == 0 &&
            strbuf_append(&c->outq, a, an) == 0 && strbuf_append(&c->outq, end, sizeof end - 1) == 0;
  if (!ok) /* no half message */
    c->outq.len = before;
  json_writer_free(w);
  if (!ok)
    return -1;
  client_flush(h, c);
  return 0;
}

static void client_start(struct mcp_hosts *h, struct client *c)
{
  sbx_error_t err = {0};
  if (mcp_client_spawn_server(h, c, &err) < 0) {
    c->failures++;
    c->restart_at_ns = now_ns() + (uint64_t) BACKOFF_FIRST_MS * 1000000ULL;
    sbx_warn(SBX_WARN_HOST_SERVER, "%s", err.msg);
    while (c->ops)
      op_failf(c, c->ops, MCP_ERR_UNAVAILABLE, "%s", err.msg);
    return;
  }
  c->state = C_INIT;
  c->init_deadline_ns = now_ns() + MCP_CLIENT_INIT_TIMEOUT_MS * 1000000ULL;
  if (client_send(h, c, mcp_client_msg_initialize(h, c)) < 0)
    mcp_client_down(h, c, "could not be sent initialize");
}

/* Move queued operations forward. Runs from timers and after state changes; may complete ops. */
static void pump(struct mcp_hosts *h, struct client *c, uint64_t now)
{
  if (c->state == C_DOWN) {
    if (c->ops && now >= c->restart_at_ns)
      client_start(h, c);
    return;
  }
  if (c->state != C_UP)
    return;
  bool want_list = false;
  for (struct op *o = c->ops, *next; o; o = next) {
    next = o->next;
    if (o->state != OP_WAITING && o->state != OP_UNQUEUED)
      continue;
    if (o->kind == OP_CALL) {
      if (o->state == OP_UNQUEUED || client_send_call(h, c, o) < 0) {
        op_failf(c, o, MCP_ERR_UNAVAILABLE, "host MCP server `%s` is not reading its input", c->cfg->name);
        next = c->ops; /* the list changed under us: rescan */
      }
    } else if (c->tools_json) {
      op_finish(c, o, c->tools_json, c->tools_len, 0, NULL);
      next = c->ops;
    } else
      want_list = true;
    if (c->state != C_UP)
      return;
  }
  if (want_list && !c->list_rpc) {
    c->list_pages = 0;
    c->list_stale = false;
    json_writer_free(c->list_acc);
    c->list_acc = json_writer_new();
    if (c->list_acc)
      json_arr_begin(c->list_acc);
    if (!c->list_acc || client_send(h, c, mcp_client_msg_list_page(h, c, NULL)) < 0)
      mcp_client_down(h, c, "could not be asked for its tools");
  }
}

/* ------------------------------------------------------------------ reading */

static void fail_waiting_lists(struct client *c, int code, const char *msg)
{
  for (struct op *o = c->ops, *next; o; o = next) {
    next = o->next;
    if (o->kind == OP_LIST) {
      op_finish(c, o, NULL, 0, code, msg);
      next = c->ops;
    }
  }
}

static void on_list_page(struct mcp_hosts *h, struct client *c, const json_node_t *result,
                         const json_node_t *error)
{
  c->list_rpc = 0;
  const json_node_t *tools = json_get(result, "tools");
  if (error || json_type(tools) != JSON_ARRAY) {
    char msg[300];
    bufprintf_cut(msg, sizeof msg, "host MCP server `%s` did not list its tools: %.200s", c->cfg->name,
                  error ? (json_as_string(json_get(error, "message"), NULL) ?: "error") : "no `tools` array");
    json_writer_free(c->list_acc);
    c->list_acc = NULL;
    fail_waiting_lists(c, MCP_ERR_UNAVAILABLE, msg);
    return;
  }
  for (size_t i = 0; i < json_array_len(tools); i++)
    json_write_node(c->list_acc, json_array_at(tools, i));
  const char *cursor = json_as_string(json_get(result, "nextCursor"), NULL);
  if (cursor && *cursor && ++c->list_pages < MAX_TOOL_PAGES) {
    if (client_send(h, c, mcp_client_msg_list_page(h, c, cursor)) < 0)
      mcp_client_down(h, c, "could not be asked for its tools");
    return;
  }
  json_arr_end(c->list_acc);
  size_t n;
  const char *buf = json_writer_buf(c->list_acc, &n);
  free(c->tools_json);
  c->tools_json = buf ? strndup(buf, n) : NULL;
  c->tools_len = c->tools_json ? n : 0;
  json_writer_free(c->list_acc);
  c->list_acc = NULL;
  c->failures = 0;
  if (!c->tools_json) {
    fail_waiting_lists(c, JSONRPC_INTERNAL_ERROR, "out of memory");
    return;
  }
  /* Answer the waiting lists with this one; if the list changed meanwhile, the next asks again. */
  for (struct op *o = c->ops, *next; o; o = next) {
    next = o->next;
    if (o->kind == OP_LIST) {
      op_finish(c, o, c->tools_json, c->tools_len, 0, NULL);
      next = c->ops;
    }
  }
}

/* *root: the tree of line[0..len) (strings cut to CLIENT_TREE_STRING, but for initialize and a
 * page of tools), freed here before a call's result goes on (the result is then held once, in the
 * line, while the caller takes it). */
static void answer_reply(struct mcp_hosts *h, struct client *c, long long rpc, json_node_t **root,
                         const char *line, size_t len)
{
  const json_node_t *result = json_get(*root, "result"), *error = json_get(*root, "error");
  if (rpc == c->init_rpc && c->state == C_INIT) {
    if (error || json_type(result) != JSON_OBJECT) {
      mcp_client_down(h, c, "refused initialize");
      return;
    }
    json_writer_t *w = json_writer_new();
    if (w) {
      jsonrpc_begin_notification(w, "notifications/initialized");
      json_obj_begin(w);
      json_obj_end(w);
      jsonrpc_end(w);
    }
    c->state = C_UP;
    if (client_send(h, c, w) < 0)
      mcp_client_down(h, c, "could not be sent notifications/initialized");
    else
      pump(h, c, now_ns());
    return;
  }
  if (rpc == c->list_rpc) {
    on_list_page(h, c, result, error);
    if (c->list_stale) {
      free(c->tools_json);
      c->tools_json = NULL;
    }
    pump(h, c, now_ns());
    return;
  }
  struct op *o = op_by_rpc(c, rpc);
  if (!o)
    return; /* cancelled or timed out: the late answer has nobody to go to */
  if (error) {
    long long code = JSONRPC_INTERNAL_ERROR;
    json_as_int(json_get(error, "code"), &code);
    const char *msg = json_as_string(json_get(error, "message"), NULL);
    op_finish(c, o, NULL, 0, (int) code, msg ? msg : "error");
    return;
  }
  c->failures = 0;
  bool is_error = false;
  json_as_bool(json_get(result, "isError"), &is_error);
  int code = is_error ? MCP_RESULT_IS_ERROR : 0;
  /* The result as the server wrote it (parsed already, so valid), not written again; from the
   * tree only where it cannot be found as written. */
  size_t off, rlen;
  if (json_member_span(line, len, "result", &off, &rlen) == 0) {
    json_free(*root);
    *root = NULL;
    op_finish(c, o, line + off, rlen, code, NULL);
    return;
  }
  /* Written again from a whole tree of the line (*root's strings are cut). */
  json_free(*root);
  *root = NULL;
  json_node_t *whole = NULL;
  sbx_error_t err;
  json_writer_t *w = json_parse(line, len, &whole, &err) == 0 ? json_writer_new() : NULL;
  size_t n = 0;
  const char *buf = NULL;
  if (w) {
    json_write_node(w, json_get(whole, "result"));
    buf = json_writer_buf(w, &n);
  }
  json_free(whole);
  if (buf)
    op_finish(c, o, buf, n, code, NULL);
  else
    op_finish(c, o, NULL, 0, JSONRPC_INTERNAL_ERROR, "out of memory");
  json_writer_free(w);
}

static void answer_server_request(struct mcp_hosts *h, struct client *c, const struct jsonrpc_message *m)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  if (strcmp(m->method, "ping") == 0) {
    jsonrpc_begin_result(w, m->id);
    json_obj_begin(w);
    json_obj_end(w);
    jsonrpc_end(w);
  } else {
    char msg[300];
    bufprintf_cut(msg, sizeof msg, "Method not found: %.200s (sandboxd offers no client capabilities)",
                  m->method);
    jsonrpc_write_error(w, m->id, JSONRPC_METHOD_NOT_FOUND, msg);
  }
  client_send(h, c, w);
}

static void on_notification(struct client *c, const struct jsonrpc_message *m)
{
  if (strcmp(m->method, "notifications/tools/list_changed") == 0) {
    free(c->tools_json);
    c->tools_json = NULL;
    if (c->list_rpc)
      c->list_stale = true;
  } else if (strcmp(m->method, "notifications/progress") == 0) {
    long long tok;
    if (json_as_int(json_get(m->params, "progressToken"), &tok) < 0)
      return;
    struct op *o = op_by_rpc(c, tok);
    if (o && o->cb.progress)
      o->cb.progress(o->cb.ctx, m->params);
  }
  /* notifications/message and the rest: nothing to do. */
}

static void handle_line(struct mcp_hosts *h, struct client *c, const char *line, size_t len)
{
  struct jsonrpc_message m;
  struct jsonrpc_failure fail;
  /* A call's result goes on as the server wrote it (answer_reply), so the tree need not hold a
   * large string; the answers whose tree is read whole (initialize, a page of tools) are parsed
   * again, whole. */
  if (jsonrpc_parse_cut(line, len, CLIENT_TREE_STRING, &m, &fail) < 0) {
    jsonrpc_failure_clear(&fail);
    return; /* not JSON-RPC: servers sometimes print junk to stdout; ignore it */
  }
  if (m.kind == JSONRPC_RESPONSE) {
    char *end;
    long long rpc = strtoll(m.id, &end, 10);
    bool ours = *end == '\0'; /* m.id: before m is parsed again */
    if (ours && rpc && (rpc == c->init_rpc || rpc == c->list_rpc)) {
      jsonrpc_message_clear(&m);
      if (jsonrpc_parse(line, len, &m, &fail) < 0) {
        jsonrpc_failure_clear(&fail);
        return;
      }
    }
    if (ours)
      answer_reply(h, c, rpc, &m.root, line, len);
  } else if (m.kind == JSONRPC_REQUEST)
    answer_server_request(h, c, &m);
  else
    on_notification(c, &m);
  jsonrpc_message_clear(&m);
}

static void read_client(struct mcp_hosts *h, struct client *c)
{
  char buf[CLIENT_READ_CHUNK];
  for (int rounds = 0; rounds < 64 && c->state != C_DOWN; rounds++) {
    ssize_t n = read(c->out_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0) {
      mcp_client_down(h, c, n == 0 ? "closed its stdout" : "could not be read");
      return;
    }
    sbx_error_t err;
    if (jsonrpc_framer_push(&c->framer, buf, (size_t) n, &err) < 0) {
      mcp_client_down(h, c, "sent more than sandboxd can buffer");
      return;
    }
    const char *line;
    size_t len;
    enum jsonrpc_frame f;
    while (c->state != C_DOWN && (f = jsonrpc_framer_next(&c->framer, &line, &len)) != JSONRPC_FRAME_NONE) {
      if (f == JSONRPC_FRAME_MESSAGE) {
        handle_line(h, c, line, len);
        continue;
      }
      /* Too large to take: fail the request it answers, if it says which. */
      _cleanup_free_ char *id = NULL;
      long long rpc;
      struct op *o = NULL;
      if (json_peek_member(line, len, "id", &id) == 0 && sscanf(id, "%lld", &rpc) == 1)
        o = op_by_rpc(c, rpc);
      if (o)
        op_failf(c, o, MCP_ERR_TOO_LARGE, "the result from `%s` is larger than %u bytes", c->cfg->name,
                 MCP_CLIENT_MAX_MESSAGE);
    }
    /* A large result does not keep its room for the server's life (as the queue to it, above). */
    if (c->state != C_DOWN)
      jsonrpc_framer_trim(&c->framer, 1u << 20);
  }
}

/* ------------------------------------------------------------------ API */

int mcp_hosts_new(const struct mcp_config *cfg, int stderr_fd, struct mcp_hosts **ret, sbx_error_t *err)
{
  struct mcp_hosts *h = calloc(1, sizeof *h);
  if (!h || !(h->clients = calloc(cfg->n ? cfg->n : 1, sizeof *h->clients))) {
    free(h);
    return sbx_error_set(err, ENOMEM, "MCP hosts");
  }
  h->cfg = cfg;
  h->n = cfg->n;
  h->stderr_fd = stderr_fd;
  for (size_t i = 0; i < h->n; i++) {
    struct client *c = &h->clients[i];
    c->cfg = &cfg->servers[i];
    c->in_fd = c->out_fd = -1;
    jsonrpc_framer_init(&c->framer, MCP_CLIENT_MAX_MESSAGE);
  }
  /* Writing to a server that just died must give EPIPE, not kill sandboxd. Blocked, not ignored:
   * the sandbox and the servers start with an empty mask. */
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigprocmask(SIG_BLOCK, &pipe_set, NULL);
  *ret = h;
  return 0;
}

void mcp_hosts_free(struct mcp_hosts *h)
{
  if (!h)
    return;
  for (size_t i = 0; i < h->n; i++) {
    struct client *c = &h->clients[i];
    while (c->ops) {
      struct op *o = c->ops;
      c->ops = o->next;
      op_free(o);
    }
    if (c->pid > 0) {
      /* The spec's order: close its stdin and let it exit; SIGTERM, then SIGKILL, if it does not. */
      close(c->in_fd);
      close(c->out_fd);
      mcp_client_add_dying(h, c->pid, TERM_AFTER_MS);
    }
    jsonrpc_framer_free(&c->framer);
    strbuf_free(&c->outq);
    json_writer_free(c->list_acc);
    free(c->tools_json);
  }
  while (h->n_dying) {
    mcp_client_reap_dying(h, now_ns());
    if (h->n_dying)
      usleep(REAP_POLL_MS * 1000 / 5);
  }
  free(h->clients);
  free(h);
}

const struct mcp_config *mcp_hosts_config(const struct mcp_hosts *h)
{
  return h->cfg;
}

static struct client *find_client(struct mcp_hosts *h, const char *server)
{
  for (size_t i = 0; i < h->n; i++)
    if (strcmp(h->clients[i].cfg->name, server) == 0)
      return &h->clients[i];
  return NULL;
}

static uint64_t add_op(struct mcp_hosts *h, const char *server, enum op_kind kind, const char *tool,
                       char *args, uint64_t timeout_ms, const struct mcp_op_cb *cb, sbx_error_t *err)
{
  _cleanup_free_ char *owned = args;
  struct client *c = find_client(h, server);
  if (!c) {
    sbx_error_set(err, 0, "no host MCP server `%.100s` is configured", server);
    return 0;
  }
  struct op *o = calloc(1, sizeof *o);
  if (!o || (tool && !(o->tool = strdup(tool)))) {
    op_free(o);
    sbx_error_set(err, ENOMEM, "MCP operation");
    return 0;
  }
  o->args = TAKE_PTR(owned);
  o->id = ++h->next_op;
  o->kind = kind;
  o->cb = *cb;
  o->deadline_ns = timeout_ms ? now_ns() + timeout_ms * 1000000ULL : 0;
  slist_append(&c->ops, o);
  /* The common case goes out at once; the rest waits for mcp_hosts_timers(), which also fails a
   * call that could not be queued (not from here: callbacks never run from the call that starts
   * an operation). */
  if (kind == OP_CALL && c->state == C_UP && client_send_call(h, c, o) < 0)
    o->state = OP_UNQUEUED;
  return o->id;
}

uint64_t mcp_hosts_list_tools(struct mcp_hosts *h, const char *server, uint64_t timeout_ms,
                              const struct mcp_op_cb *cb, sbx_error_t *err)
{
  return add_op(h, server, OP_LIST, NULL, NULL, timeout_ms, cb, err);
}

uint64_t mcp_hosts_call_tool(struct mcp_hosts *h, const char *server, const char *tool, char *args_json,
                             uint64_t timeout_ms, const struct mcp_op_cb *cb, sbx_error_t *err)
{
  return add_op(h, server, OP_CALL, tool, args_json, timeout_ms, cb, err);
}

void mcp_hosts_cancel(struct mcp_hosts *h, uint64_t id)
{
  for (size_t i = 0; id && i < h->n; i++) {
    struct client *c = &h->clients[i];
    for (struct op *o = c->ops; o; o = o->next)
      if (o->id == id) {
        op_unlink(c, o);
        if (o->state == OP_SENT && o->kind == OP_CALL && c->state == C_UP)
          client_send(h, c, mcp_client_msg_cancelled(o->rpc_id, "the sandbox that made the call has ended"));
        op_free(o);
        return;
      }
  }
}

size_t mcp_hosts_max_pollfds(const struct mcp_hosts *h)
{
  return 2 * h->n;
}

size_t mcp_hosts_pollfds(struct mcp_hosts *h, struct pollfd *pfds)
{
  for (size_t i = 0; i < h->n; i++) {
    struct client *c = &h->clients[i];
    pfds[2 * i] = (struct pollfd){.fd = c->out_fd, .events = POLLIN};
    pfds[2 * i + 1] = (struct pollfd){.fd = c->outq_off < c->outq.len ? c->in_fd : -1, .events = POLLOUT};
  }
  return 2 * h->n;
}

void mcp_hosts_dispatch(struct mcp_hosts *h, const struct pollfd *pfds, size_t n)
{
  for (size_t i = 0; i < h->n && 2 * i + 1 < n; i++) {
    struct client *c = &h->clients[i];
    if (pfds[2 * i + 1].revents && pfds[2 * i + 1].fd == c->in_fd && c->in_fd >= 0)
      client_flush(h, c);
    if (pfds[2 * i].revents && pfds[2 * i].fd == c->out_fd && c->out_fd >= 0)
      read_client(h, c);
  }
}

static void min_timeout(int *t, int v)
{
  if (*t < 0 || v < *t)
    *t = v;
}

int mcp_hosts_timers(struct mcp_hosts *h)
{
  uint64_t now = now_ns();
  int timeout = -1;
  mcp_client_reap_dying(h, now);
  if (h->n_dying)
    min_timeout(&timeout, REAP_POLL_MS);
  for (size_t i = 0; i < h->n; i++) {
    struct client *c = &h->clients[i];
    if (c->state == C_INIT && now >= c->init_deadline_ns)
      mcp_client_down(h, c, "did not answer initialize in time");
    for (struct op *o = c->ops, *next; o; o = next) {
      next = o->next;
      if (!o->deadline_ns)
        continue;
      if (now < o->deadline_ns) {
        min_timeout(&timeout, ms_until(o->deadline_ns, now));
        continue;
      }
      if (o->state == OP_SENT && o->kind == OP_CALL && c->state == C_UP)
        client_send(h, c, mcp_client_msg_cancelled(o->rpc_id, "timed out"));
      op_failf(c, o, MCP_ERR_TIMEOUT, "host MCP server `%s` did not answer in time", c->cfg->name);
      next = c->ops;
    }
    pump(h, c, now);
    if (c->state == C_INIT)
      min_timeout(&timeout, ms_until(c->init_deadline_ns, now));
    if (c->state == C_DOWN && c->ops)
      min_timeout(&timeout, ms_until(c->restart_at_ns, now));
    /* Lists answerable from the cache go at the next round. */
    if (c->state == C_UP && c->tools_json)
      for (struct op *o = c->ops; o; o = o->next)
        if (o->kind == OP_LIST)
          min_timeout(&timeout, 0);
  }
  return timeout;
}

int mcp_hosts_pid(const struct mcp_hosts *h, const char *server)
{
  for (size_t i = 0; i < h->n; i++)
    if (strcmp(h->clients[i].cfg->name, server) == 0)
      return h->clients[i].pid;
  return 0;
}

bool mcp_tools_read_only(const char *tools, size_t len, const char *tool)
{
  json_node_t *root = NULL;
  sbx_error_t err;
  /* The list is the host server's (trusted as its config is); names longer than MCP's 128 are cut
   * and then match no tool the proxy lets through. */
  if (!tools || json_parse_cut(tools, len, SIZE_MAX, 256, &root, &err) < 0)
    return false;
  bool ro = false;
  for (size_t i = 0; i < json_array_len(root); i++) {
    const json_node_t *t = json_array_at(root, i);
    const char *name = json_as_string(json_get(t, "name"), NULL);
    if (name && strcmp(name, tool) == 0) {
      if (json_as_bool(json_get(json_get(t, "annotations"), "readOnlyHint"), &ro) < 0)
        ro = false;
      break;
    }
  }
  json_free(root);
  return ro;
}
