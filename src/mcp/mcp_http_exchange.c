/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: the exchanges, one per HTTP request (mcp_http_internal.h): its answer
 * (one JSON body; or an SSE stream of a call's progress and then its answer; or a refusal, a
 * JSON-RPC error), what the server sends it (mcp_http_send), a session's GET stream and its
 * keepalives, and a session's end. While an exchange waits, its connection is suspended. */
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_http_internal.h"

/* A stream whose client reads nothing gets no more notifications past this (its answer still). */
#define STREAM_NOTE_MAX (1u << 20)
/* An open GET stream gets a comment this often when nothing else is sent: proxies in front keep it
 * (nginx's proxy_read_timeout is 60 s), and a client that vanished without closing is found. */
#define KEEPALIVE_NS (25ULL * 1000000000ULL)

struct exchange *http_exchange_find(struct mcp_http *h, uint64_t id)
{
  for (struct exchange *x = h->xs; id && x; x = x->next)
    if (x->id == id)
      return x;
  return NULL;
}

static void suspend(struct exchange *x)
{
  if (x->suspended)
    return;
  http_conn_suspend(x->conn);
  x->suspended = true;
  x->h->n_suspended++;
}

void http_wake(struct exchange *x)
{
  if (!x->suspended)
    return;
  x->suspended = false;
  x->h->n_suspended--;
  http_conn_resume(x->conn);
  x->h->kick = true;
}

void http_exchange_free(struct mcp_http *h, struct exchange *x)
{
  slist_unlink(&h->xs, x);
  h->n_xs--;
  if (x->sse)
    h->n_streams--;
  if (x->sess) {
    x->sess->open--;
    x->sess->used_ns = now_ns();
    if (x->get)
      x->sess->get_route = 0;
  }
  free(x->req_id);
  h->body_bytes -= x->held;
  strbuf_free(&x->body);
  strbuf_free(&x->out);
  free(x);
}

/* Our writer's notifications begin so (jsonrpc_begin_notification), and so do the server's own
 * requests (mcp_approval.c): neither is the exchange's answer. Answers have an id first. */
static bool is_notification(const char *msg, size_t len)
{
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"method\"";
  return len >= sizeof head - 1 && memcmp(msg, head, sizeof head - 1) == 0;
}

static int stream_event(struct exchange *x, const char *msg, size_t len)
{
  x->sent_ns = now_ns();
  if (strbuf_append(&x->out, "event: message\ndata: ", 21) < 0 || strbuf_append(&x->out, msg, len) < 0 ||
      strbuf_append(&x->out, "\n\n", 2) < 0)
    return -1;
  http_wake(x);
  return 0;
}

void mcp_http_send(struct mcp_http *h, uint64_t route, const char *msg, size_t len)
{
  struct exchange *x = http_exchange_find(h, route);
  bool note = is_notification(msg, len);
  if (x && !x->gone && !x->done && !x->get) {
    if (x->sse && note && x->out.len - x->out_off > STREAM_NOTE_MAX)
      return;
    if (x->sse) {
      if (stream_event(x, msg, len) < 0)
        log_error("cannot queue a message: out of memory");
      x->done = !note;
      return;
    }
    if (!note) {
      if (strbuf_append(&x->out, msg, len) < 0)
        log_error("cannot queue an answer: out of memory");
      x->done = true;
      http_wake(x);
      return;
    }
  }
  /* A notification no request's stream takes: its session's GET stream, if one is open. */
  struct exchange *g = note && x && x->sess ? http_exchange_find(h, x->sess->get_route) : NULL;
  if (g && !g->gone && g->out.len - g->out_off <= STREAM_NOTE_MAX)
    stream_event(g, msg, len);
}

void mcp_http_status(struct mcp_http *h, uint64_t route, unsigned status)
{
  struct exchange *x = http_exchange_find(h, route);
  if (x && x->state != X_STREAM)
    x->status = status;
}

uint64_t mcp_http_session_stream(struct mcp_http *h, uint64_t client)
{
  for (const struct http_session *s = h->sessions.list; s; s = s->next)
    if (s->num == client)
      return s->get_route;
  return 0;
}

const char *mcp_http_stream_why_not(struct mcp_http *h, uint64_t route)
{
  const struct exchange *x = http_exchange_find(h, route);
  if (!x || x->gone || x->done)
    return "the HTTP request that made the call has ended";
  if (!x->sse)
    return "the call's HTTP response is not an SSE stream, so sandboxd cannot ask on it (send the "
           "tools/call with a progressToken)";
  if (x->out.len - x->out_off > STREAM_NOTE_MAX)
    return "the call's SSE stream is not being read";
  return NULL;
}

/* ------------------------------------------------------------------ answers */

bool http_respond(struct exchange *x, unsigned status, const char *ctype, strbuf_t *body)
{
  const char *headers[4];
  size_t n = 0;
  if (ctype) {
    headers[2 * n] = "Content-Type";
    headers[2 * n++ + 1] = ctype;
  }
  if (x->new_session && x->sess) {
    headers[2 * n] = "Mcp-Session-Id";
    headers[2 * n++ + 1] = x->sess->id;
  }
  int ret = http_conn_respond(x->conn, status, headers, n, body);
  if (ret < 0)
    return false;
  x->state = X_OVER;
  return ret;
}

bool http_refuse(struct exchange *x, unsigned status, const char *header, const char *value,
                 const char *message)
{
  return http_refuse_id(x, NULL, status, header, value, message);
}

bool http_refuse_id(struct exchange *x, const char *id, unsigned status, const char *header,
                    const char *value, const char *message)
{
  json_writer_t *w = json_writer_new();
  strbuf_t body = {0};
  size_t n;
  if (w) {
    jsonrpc_write_error(w, id, -32000, message);
    const char *buf = json_writer_buf(w, &n);
    if (buf)
      strbuf_append(&body, buf, n);
    json_writer_free(w);
  }
  const char *headers[] = {"Content-Type", "application/json", header, value};
  int ret = http_conn_respond(x->conn, status, headers, header ? 2 : 1, &body);
  if (ret < 0) {
    strbuf_free(&body);
    return false;
  }
  x->state = X_OVER;
  return ret;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  (void) pos;
  struct exchange *x = cls;
  if (x->gone)
    return HTTP_STREAM_ERROR;
  size_t avail = x->out.len - x->out_off;
  if (avail) {
    size_t n = avail < max ? avail : max;
    memcpy(buf, x->out.data + x->out_off, n);
    x->out_off += n;
    if (x->out_off == x->out.len)
      x->out.len = x->out_off = 0;
    return (ssize_t) n;
  }
  if (x->done)
    return HTTP_STREAM_END;
  suspend(x); /* until there is more (wake) */
  return 0;
}

bool http_start_stream(struct exchange *x)
{
  const char *headers[6] = {"Content-Type", "text/event-stream", "Cache-Control", "no-cache"};
  size_t n = 2;
  if (x->new_session && x->sess) {
    headers[4] = "Mcp-Session-Id";
    headers[5] = x->sess->id;
    n++;
  }
  int ret = http_conn_stream(x->conn, stream_read, x, headers, n);
  if (ret < 0)
    return false;
  x->state = X_STREAM;
  return ret;
}

bool http_answer_or_wait(struct exchange *x)
{
  if (x->gone)
    return false;
  if (!x->done) {
    suspend(x);
    return true;
  }
  /* Ended without an answer (cancelled, or its session ended): nothing to say. */
  if (!x->out.len)
    return http_respond(x, 204, NULL, NULL);
  return http_respond(x, x->status ? x->status : 200, "application/json", &x->out);
}

/* ------------------------------------------------------------------ sessions and streams */

void http_end_session(struct mcp_http *h, struct http_session *s)
{
  /* Its calls are killed, never answered; its exchanges end. */
  h->on.cancel_calls(h->srv, s->num, 0);
  for (struct exchange *x = h->xs; x; x = x->next)
    if (x->sess == s) {
      x->sess = NULL;
      x->done = true;
      http_wake(x);
    }
  http_session_end(&h->sessions, s);
}

int http_keepalive(struct mcp_http *h)
{
  uint64_t now = now_ns();
  int timeout = -1;
  for (struct exchange *x = h->xs; x; x = x->next) {
    if (!x->get || x->gone || x->done)
      continue;
    if (now - x->sent_ns >= KEEPALIVE_NS) {
      x->sent_ns = now;
      if (strbuf_append(&x->out, ": keepalive\n\n", 14) == 0)
        http_wake(x);
    }
    int t = ms_until(x->sent_ns + KEEPALIVE_NS, now);
    if (timeout < 0 || t < timeout)
      timeout = t;
  }
  return timeout;
}
