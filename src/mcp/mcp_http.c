/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: MCP's Streamable HTTP transport (protocol 2025-11-25) on /mcp, with
 * libmicrohttpd in the server's own loop: no thread, no lock.
 *
 * One exchange per HTTP request. A POST carries one JSON-RPC message: a notification or a
 * response is taken (202); a request is dispatched (mcp_dispatch) with srv->route naming its
 * exchange, so its answer, and the notifications of its call, come back here (mcp_http_send).
 * The answer is one JSON body, or, for a tools/call with a progressToken, an SSE stream of the
 * progress and then the answer. While an exchange waits its connection is suspended and we poll
 * its socket for the client hanging up: then the calls it carried are cancelled (their sandboxes
 * killed and released), as when MHD reports the request ended early. A GET is the session's
 * stream for messages no request carries; DELETE ends a session and its calls.
 *
 * Sessions (mcp_http_session.c) are made at initialize and bound to the token that made them;
 * --stateless has none, and every request is on its own, so any replica may answer it. */
#include "mcp/mcp_http.h"

#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_http_gate.h"
#include "mcp/mcp_http_session.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_server.h"

#define WELL_KNOWN "/.well-known/oauth-protected-resource"
/* A stream whose client reads nothing gets no more notifications past this (its answer still). */
#define STREAM_NOTE_MAX (1u << 20)
/* An open GET stream gets a comment this often when nothing else is sent: proxies in front keep it
 * (nginx's proxy_read_timeout is 60 s), and a client that vanished without closing is found. */
#define KEEPALIVE_NS (25ULL * 1000000000ULL)

/* libmicrohttpd is loaded when --http starts: linked normally, every sandboxd start (every `exec`)
 * would map it and GnuTLS with its dependencies (p11-kit, nettle, gmp, ...), about 4.5 million
 * instructions each time. */
#define LIBMHD_FUNCS(X)                                                                                      \
  X(MHD_add_connection)                                                                                      \
  X(MHD_add_response_header)                                                                                 \
  X(MHD_create_response_from_buffer)                                                                         \
  X(MHD_create_response_from_buffer_with_free_callback)                                                      \
  X(MHD_create_response_from_callback)                                                                       \
  X(MHD_destroy_response)                                                                                    \
  X(MHD_get_connection_info)                                                                                 \
  X(MHD_get_daemon_info)                                                                                     \
  X(MHD_get_timeout)                                                                                         \
  X(MHD_lookup_connection_value)                                                                             \
  X(MHD_queue_response)                                                                                      \
  X(MHD_resume_connection)                                                                                   \
  X(MHD_run)                                                                                                 \
  X(MHD_start_daemon)                                                                                        \
  X(MHD_stop_daemon)                                                                                         \
  X(MHD_suspend_connection)

static struct {
#define MHD_MEMBER(f) __typeof__(&f) f;
  LIBMHD_FUNCS(MHD_MEMBER)
#undef MHD_MEMBER
} mhd;

static int libmhd_load(sbx_error_t *err)
{
  static void *handle;
  if (handle)
    return 0;
  void *h = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    sbx_error_set(err, ENOENT, "--http: cannot load libmicrohttpd: %s", dlerror());
    return sbx_error_hint(err, "install libmicrohttpd12");
  }
#define MHD_LOAD(f)                                                                                          \
  if (!(*(void **) &mhd.f = dlsym(h, #f))) {                                                                 \
    dlclose(h);                                                                                              \
    return sbx_error_set(err, ENOSYS, "--http: libmicrohttpd lacks %s", #f);                                 \
  }
  LIBMHD_FUNCS(MHD_LOAD)
#undef MHD_LOAD
  handle = h;
  return 0;
}

/* From here on, MHD_*() calls go through the table. */
#define MHD_add_connection mhd.MHD_add_connection
#define MHD_add_response_header mhd.MHD_add_response_header
#define MHD_create_response_from_buffer mhd.MHD_create_response_from_buffer
#define MHD_create_response_from_buffer_with_free_callback                                                   \
  mhd.MHD_create_response_from_buffer_with_free_callback
#define MHD_create_response_from_callback mhd.MHD_create_response_from_callback
#define MHD_destroy_response mhd.MHD_destroy_response
#define MHD_get_connection_info mhd.MHD_get_connection_info
#define MHD_get_daemon_info mhd.MHD_get_daemon_info
#define MHD_get_timeout mhd.MHD_get_timeout
#define MHD_lookup_connection_value mhd.MHD_lookup_connection_value
#define MHD_queue_response mhd.MHD_queue_response
#define MHD_resume_connection mhd.MHD_resume_connection
#define MHD_run mhd.MHD_run
#define MHD_start_daemon mhd.MHD_start_daemon
#define MHD_stop_daemon mhd.MHD_stop_daemon
#define MHD_suspend_connection mhd.MHD_suspend_connection

enum xstate { X_BODY, X_WAIT, X_STREAM, X_OVER };

struct exchange {
  struct exchange *next;
  uint64_t id; /* the route */
  struct mcp_http *h;
  struct MHD_Connection *conn;
  enum xstate state;
  bool get;       /* a session's GET stream */
  bool sse;       /* answered as a stream (counted in n_streams) */
  bool suspended; /* waits: MHD does not watch it, we poll its socket */
  bool gone;      /* the client hung up */
  bool done;      /* its answer (or the stream's last event) is in out */
  size_t held;    /* body bytes counted in body_bytes */
  bool new_session;
  struct http_session *sess; /* NULL: stateless, or the session has ended */
  int principal;
  char *req_id; /* the request it carries (canonical JSON), or NULL */
  strbuf_t body;
  strbuf_t out;
  size_t out_off;
  char name[48];    /* the client, for audit records */
  uint64_t sent_ns; /* a GET stream: when it was last given something */
};

struct mcp_http {
  struct server *srv;
  struct mcp_http_handlers on; /* the server's, given at start */
  struct MHD_Daemon *d;
  struct mcp_http_opts o;
  struct http_tokens tokens;
  bool auth;
  struct http_sessions sessions;
  struct exchange *xs;
  size_t n_xs, n_streams, n_suspended;
  /* Request bodies being read, together: many clients' uploads at once are bounded as the calls'
   * code is (CODE_HELD_MESSAGES messages). */
  size_t body_bytes, body_budget;
  uint64_t next_id;
  int epoll_fd;
  /* The listening socket is the gate's (mcp_http_gate.c): it hands MHD each connection whose
   * head is complete. */
  struct http_gate gate;
  size_t gate_nfds;    /* its poll entries, after MHD's epoll fd */
  bool kick;           /* MHD must run (a connection was resumed) */
  uint64_t mhd_due_ns; /* MHD must run by then (its timeouts), or 0 */
  uint64_t *polled;    /* the exchanges of the poll entries after the first */
  size_t polled_cap;
};

/* ------------------------------------------------------------------ exchanges */

static struct exchange *find_exchange(struct mcp_http *h, uint64_t id)
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
  MHD_suspend_connection(x->conn);
  x->suspended = true;
  x->h->n_suspended++;
}

static void wake(struct exchange *x)
{
  if (!x->suspended)
    return;
  x->suspended = false;
  x->h->n_suspended--;
  MHD_resume_connection(x->conn);
  x->h->kick = true;
}

static void exchange_free(struct mcp_http *h, struct exchange *x)
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

/* Our writer's notifications begin so (jsonrpc_begin_notification); answers have an id first. */
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
  wake(x);
  return 0;
}

void mcp_http_send(struct mcp_http *h, uint64_t route, const char *msg, size_t len)
{
  struct exchange *x = find_exchange(h, route);
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
      wake(x);
      return;
    }
  }
  /* A notification no request's stream takes: its session's GET stream, if one is open. */
  struct exchange *g = note && x && x->sess ? find_exchange(h, x->sess->get_route) : NULL;
  if (g && !g->gone && g->out.len - g->out_off <= STREAM_NOTE_MAX)
    stream_event(g, msg, len);
}

/* ------------------------------------------------------------------ responses */

static enum MHD_Result respond(struct exchange *x, unsigned status, const char *ctype, strbuf_t *body)
{
  struct MHD_Response *r;
  if (body && body->len)
    r = MHD_create_response_from_buffer_with_free_callback(body->len, body->data, free);
  else
    r = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
  if (!r)
    return MHD_NO;
  if (body && body->len)
    *body = (strbuf_t){0}; /* the response owns it now */
  if (ctype)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (x->new_session && x->sess)
    MHD_add_response_header(r, "Mcp-Session-Id", x->sess->id);
  enum MHD_Result ret = MHD_queue_response(x->conn, status, r);
  MHD_destroy_response(r);
  x->state = X_OVER;
  return ret;
}

/* An HTTP-level refusal: a JSON-RPC error with no id, as the SDK's server sends. */
static enum MHD_Result refuse(struct exchange *x, unsigned status, const char *header, const char *value,
                              const char *message)
{
  json_writer_t *w = json_writer_new();
  strbuf_t body = {0};
  size_t n;
  if (w) {
    jsonrpc_write_error(w, NULL, -32000, message);
    const char *buf = json_writer_buf(w, &n);
    if (buf)
      strbuf_append(&body, buf, n);
    json_writer_free(w);
  }
  struct MHD_Response *r = body.len
                               ? MHD_create_response_from_buffer_with_free_callback(body.len, body.data, free)
                               : MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
  if (!r) {
    strbuf_free(&body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (header)
    MHD_add_response_header(r, header, value);
  enum MHD_Result ret = MHD_queue_response(x->conn, status, r);
  MHD_destroy_response(r);
  x->state = X_OVER;
  return ret;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
  (void) pos;
  struct exchange *x = cls;
  if (x->gone)
    return MHD_CONTENT_READER_END_WITH_ERROR;
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
    return MHD_CONTENT_READER_END_OF_STREAM;
  suspend(x); /* until there is more (wake) */
  return 0;
}

static enum MHD_Result start_stream(struct exchange *x)
{
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, x, NULL);
  if (!r)
    return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  if (x->new_session && x->sess)
    MHD_add_response_header(r, "Mcp-Session-Id", x->sess->id);
  enum MHD_Result ret = MHD_queue_response(x->conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  x->state = X_STREAM;
  return ret;
}

/* The JSON answer, once it is there (else wait for it). */
static enum MHD_Result answer_or_wait(struct exchange *x)
{
  if (x->gone)
    return MHD_NO;
  if (!x->done) {
    suspend(x);
    return MHD_YES;
  }
  /* Ended without an answer (cancelled, or its session ended): nothing to say. */
  if (!x->out.len)
    return respond(x, MHD_HTTP_NO_CONTENT, NULL, NULL);
  return respond(x, MHD_HTTP_OK, "application/json", &x->out);
}

/* ------------------------------------------------------------------ checks */

static const char *header(struct exchange *x, const char *name)
{
  return MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, name);
}

static bool accepts(const char *accept, const char *type)
{
  return accept && (strcasestr(accept, type) != NULL);
}

/* http://HOST as the client named us (the reverse proxy's X-Forwarded-Proto for the scheme). */
static void public_base(struct exchange *x, char *buf, size_t size)
{
  const char *host = header(x, MHD_HTTP_HEADER_HOST);
  const char *proto = header(x, "X-Forwarded-Proto");
  if (!host || !*host || strpbrk(host, "\"\\ \t/"))
    host = "localhost";
  bufprintf_cut(buf, size, "%s://%s", proto && strcasecmp(proto, "https") == 0 ? "https" : "http", host);
}

static enum MHD_Result unauthorized(struct exchange *x, const char *why)
{
  char value[1200] = "Bearer realm=\"sandboxd\"";
  if (x->h->o.auth_server) {
    char base[600];
    public_base(x, base, sizeof base);
    bufprintf_cut(value, sizeof value,
                  "Bearer realm=\"sandboxd\", resource_metadata=\"%s" WELL_KNOWN MCP_HTTP_PATH "\"", base);
  }
  return refuse(x, MHD_HTTP_UNAUTHORIZED, MHD_HTTP_HEADER_WWW_AUTHENTICATE, value, why);
}

/* RFC 9728: the protected resource's metadata, naming --auth-server. */
static enum MHD_Result resource_metadata(struct exchange *x)
{
  char base[600];
  public_base(x, base, sizeof base);
  json_writer_t *w = json_writer_new();
  if (!w)
    return MHD_NO;
  char resource[700];
  bufprintf_cut(resource, sizeof resource, "%s" MCP_HTTP_PATH, base);
  json_obj_begin(w);
  json_kv_str(w, "resource", resource);
  json_key(w, "authorization_servers");
  json_arr_begin(w);
  json_str(w, x->h->o.auth_server);
  json_arr_end(w);
  json_key(w, "bearer_methods_supported");
  json_arr_begin(w);
  json_str(w, "header");
  json_arr_end(w);
  json_kv_str(w, "resource_name", "sandboxd");
  json_obj_end(w);
  size_t n;
  const char *buf = json_writer_buf(w, &n);
  strbuf_t body = {0};
  if (buf)
    strbuf_append(&body, buf, n);
  json_writer_free(w);
  return respond(x, MHD_HTTP_OK, "application/json", &body);
}

/* Who is calling: -1 without tokens; else the token's index, or -2 (refused). */
static int principal(struct exchange *x)
{
  if (!x->h->auth)
    return -1;
  const char *a = header(x, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!a || strncasecmp(a, "Bearer ", 7) != 0)
    return -2;
  a += 7;
  while (*a == ' ')
    a++;
  int i = http_tokens_match(&x->h->tokens, a, strlen(a));
  return i < 0 ? -2 : i;
}

static void name_client(struct exchange *x)
{
  char sess[24] = "";
  if (x->sess)
    bufprintf_cut(sess, sizeof sess, "session %.8s", x->sess->id);
  if (x->principal >= 0)
    bufprintf_cut(x->name, sizeof x->name, "token %d%s%s", x->principal, *sess ? " " : "", sess);
  else
    bufprintf_cut(x->name, sizeof x->name, "%s", *sess ? sess : "http");
}

/* Mcp-Session-Id: the session (stateful), checked against the caller. 0, or a refusal queued. */
static int find_session(struct exchange *x, bool required, enum MHD_Result *ret)
{
  if (x->h->o.stateless)
    return 0;
  const char *id = header(x, "Mcp-Session-Id");
  if (!id) {
    if (required) {
      *ret = refuse(x, MHD_HTTP_BAD_REQUEST, NULL, NULL, "Bad Request: Mcp-Session-Id header is required");
      return -1;
    }
    return 0;
  }
  x->sess = http_session_find(&x->h->sessions, id, x->principal);
  if (!x->sess) {
    *ret = refuse(x, MHD_HTTP_NOT_FOUND, NULL, NULL, "Session not found");
    return -1;
  }
  x->sess->open++;
  x->sess->used_ns = now_ns();
  return 0;
}

/* ------------------------------------------------------------------ methods */

static void end_session(struct mcp_http *h, struct http_session *s)
{
  /* Its calls are killed, never answered; its exchanges end. */
  h->on.cancel_calls(h->srv, s->num, 0);
  for (struct exchange *x = h->xs; x; x = x->next)
    if (x->sess == s) {
      x->sess = NULL;
      x->done = true;
      wake(x);
    }
  http_session_end(&h->sessions, s);
}

static enum MHD_Result on_get(struct exchange *x)
{
  struct mcp_http *h = x->h;
  if (h->o.stateless)
    return refuse(x, MHD_HTTP_METHOD_NOT_ALLOWED, MHD_HTTP_HEADER_ALLOW, "POST",
                  "Method Not Allowed: no server stream without a session (--stateless)");
  if (!accepts(header(x, MHD_HTTP_HEADER_ACCEPT), "text/event-stream"))
    return refuse(x, MHD_HTTP_NOT_ACCEPTABLE, NULL, NULL,
                  "Not Acceptable: Client must accept text/event-stream");
  enum MHD_Result ret;
  if (find_session(x, true, &ret) < 0)
    return ret;
  if (x->sess->get_route)
    return refuse(x, MHD_HTTP_CONFLICT, NULL, NULL, "Conflict: Only one SSE stream is allowed per session");
  if (h->n_streams >= h->o.max_streams)
    return refuse(x, MHD_HTTP_SERVICE_UNAVAILABLE, MHD_HTTP_HEADER_RETRY_AFTER, "5",
                  "Service Unavailable: too many open streams (--max-streams)");
  x->get = x->sse = true;
  x->sent_ns = now_ns();
  h->n_streams++;
  x->sess->get_route = x->id;
  return start_stream(x);
}

static enum MHD_Result on_delete(struct exchange *x)
{
  enum MHD_Result ret;
  if (x->h->o.stateless)
    return refuse(x, MHD_HTTP_METHOD_NOT_ALLOWED, MHD_HTTP_HEADER_ALLOW, "POST",
                  "Method Not Allowed: no sessions (--stateless)");
  if (find_session(x, true, &ret) < 0)
    return ret;
  struct http_session *s = x->sess;
  s->open--;
  x->sess = NULL;
  end_session(x->h, s);
  return respond(x, MHD_HTTP_OK, NULL, NULL);
}

/* The POST's headers, before its body is read. */
static enum MHD_Result on_post_begin(struct exchange *x)
{
  struct mcp_http *h = x->h;
  const char *accept = header(x, MHD_HTTP_HEADER_ACCEPT);
  if (!accepts(accept, "application/json") || !accepts(accept, "text/event-stream"))
    return refuse(x, MHD_HTTP_NOT_ACCEPTABLE, NULL, NULL,
                  "Not Acceptable: Client must accept both application/json and text/event-stream");
  const char *ctype = header(x, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (!ctype || strncasecmp(ctype, "application/json", 16) != 0)
    return refuse(x, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, NULL, NULL,
                  "Unsupported Media Type: Content-Type must be application/json");
  const char *clen = header(x, MHD_HTTP_HEADER_CONTENT_LENGTH);
  uint64_t v;
  if (clen && parse_u64(clen, &v) == 0 && v > h->srv->max_message) {
    char msg[160];
    bufprintf_cut(msg, sizeof msg, "Content Too Large: the limit is %zu bytes (--max-message-size)",
                  h->srv->max_message);
    return refuse(x, MHD_HTTP_CONTENT_TOO_LARGE, MHD_HTTP_HEADER_CONNECTION, "close", msg);
  }
  if (clen && parse_u64(clen, &v) == 0 && h->body_bytes + v > h->body_budget)
    return refuse(x, MHD_HTTP_SERVICE_UNAVAILABLE, MHD_HTTP_HEADER_RETRY_AFTER, "1",
                  "Service Unavailable: too many request bodies being read at once");
  enum MHD_Result ret;
  if (find_session(x, false, &ret) < 0)
    return ret;
  if (clen && parse_u64(clen, &v) == 0) { /* reserved before it is read */
    x->held = (size_t) v;
    h->body_bytes += x->held;
  }
  x->state = X_BODY;
  return MHD_YES;
}

static enum MHD_Result parse_failed(struct exchange *x, struct jsonrpc_failure *fail)
{
  json_writer_t *w = json_writer_new();
  strbuf_t body = {0};
  size_t n;
  if (w) {
    jsonrpc_write_error(w, fail->id, fail->code, fail->detail.msg);
    const char *buf = json_writer_buf(w, &n);
    if (buf)
      strbuf_append(&body, buf, n);
    json_writer_free(w);
  }
  jsonrpc_failure_clear(fail);
  return respond(x, MHD_HTTP_BAD_REQUEST, "application/json", &body);
}

/* A notifications/cancelled also ends the exchange that carried the request (no answer comes).
 * Without sessions the request is found among the caller's (same token) by its id; one that is
 * not the only match is left alone: it may be another client's. */
static void cancelled_exchange(struct mcp_http *h, struct exchange *from, const struct jsonrpc_message *m)
{
  _cleanup_free_ char *id = jsonrpc_id_canonical(json_get(m->params, "requestId"));
  struct exchange *found = NULL;
  size_t matches = 0;
  for (struct exchange *x = h->xs; id && x; x = x->next)
    if (x != from && x->sess == from->sess && x->principal == from->principal && x->req_id && !x->done &&
        !x->get && strcmp(x->req_id, id) == 0) {
      found = x;
      matches++;
    }
  if (matches != 1)
    return;
  if (!found->sess) /* stateless: its calls are keyed by the exchange, not by a client */
    h->on.cancel_calls(h->srv, 0, found->id);
  found->done = true;
  wake(found);
}

static void dispatch(struct mcp_http *h, struct exchange *x, const struct jsonrpc_message *m)
{
  struct server *srv = h->srv;
  name_client(x);
  /* Call ids are the client's own: a session's, or (stateless) this request's alone. */
  srv->client = x->sess ? x->sess->num : x->id;
  srv->route = x->id;
  srv->client_name = x->name;
  /* The version is each request's (MCP-Protocol-Version; absent, as before initialize), not the
   * latest initialize of any client. */
  const char *version = header(x, "MCP-Protocol-Version");
  srv->protocol = NULL;
  for (size_t i = 0; version && h->on.protocol_versions[i]; i++)
    if (strcmp(version, h->on.protocol_versions[i]) == 0)
      srv->protocol = h->on.protocol_versions[i];
  h->on.dispatch(srv, m);
  srv->client = srv->route = 0;
  srv->client_name = NULL;
}

/* The whole body is in. */
static enum MHD_Result on_post_body(struct exchange *x)
{
  struct mcp_http *h = x->h;
  struct jsonrpc_message m;
  struct jsonrpc_failure fail;
  if (jsonrpc_parse(x->body.data ? x->body.data : "", x->body.len, &m, &fail) < 0)
    return parse_failed(x, &fail);
  strbuf_free(&x->body);
  h->body_bytes -= x->held;
  x->held = 0;
  bool init = m.kind == JSONRPC_REQUEST && strcmp(m.method, "initialize") == 0;
  enum MHD_Result ret = MHD_YES;
  if (!h->o.stateless && !x->sess && !init) {
    ret = refuse(x, MHD_HTTP_BAD_REQUEST, NULL, NULL, "Bad Request: Mcp-Session-Id header is required");
  } else if (!h->o.stateless && !x->sess && h->sessions.n >= h->o.max_sessions) {
    ret = refuse(x, MHD_HTTP_SERVICE_UNAVAILABLE, MHD_HTTP_HEADER_RETRY_AFTER, "5",
                 "Service Unavailable: too many sessions (--max-sessions)");
  } else if (!h->o.stateless && !x->sess) {
    sbx_error_t err = {0};
    if (http_session_new(&h->sessions, ++h->next_id, x->principal, &x->sess, &err) < 0) {
      log_sbx_error(&err);
      ret = refuse(x, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, NULL, "Internal error");
    } else {
      x->sess->open++;
      x->new_session = true;
    }
  }
  if (x->state == X_OVER) {
    jsonrpc_message_clear(&m);
    return ret;
  }
  if (m.kind != JSONRPC_REQUEST) {
    dispatch(h, x, &m);
    if (m.kind == JSONRPC_NOTIFICATION && strcmp(m.method, "notifications/cancelled") == 0)
      cancelled_exchange(h, x, &m);
    jsonrpc_message_clear(&m);
    return respond(x, MHD_HTTP_ACCEPTED, NULL, NULL);
  }
  x->req_id = strdup(m.id);
  /* Progress is streamed: a tools/call with a progressToken is answered as SSE. */
  if (strcmp(m.method, "tools/call") == 0 && json_get(json_get(m.params, "_meta"), "progressToken") &&
      h->n_streams < h->o.max_streams) {
    x->sse = true;
    h->n_streams++;
  }
  x->state = X_WAIT;
  dispatch(h, x, &m);
  jsonrpc_message_clear(&m);
  if (!x->req_id)
    return MHD_NO;
  return x->sse ? start_stream(x) : answer_or_wait(x);
}

/* ------------------------------------------------------------------ MHD's callbacks */

static enum MHD_Result on_first(struct exchange *x, const char *url, const char *method)
{
  struct mcp_http *h = x->h;
  bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  if (get && (strcmp(url, WELL_KNOWN) == 0 || strcmp(url, WELL_KNOWN MCP_HTTP_PATH) == 0) && h->o.auth_server)
    return resource_metadata(x);
  /* Probes (Kubernetes liveness and readiness): answered from this loop, so a server that stopped
   * serving fails it where a TCP connect still succeeds (the kernel accepts into the backlog). No
   * token: an empty 200 tells nothing. */
  if (get && strcmp(url, MCP_HTTP_HEALTH_PATH) == 0)
    return respond(x, MHD_HTTP_OK, NULL, NULL);
  if (strcmp(url, MCP_HTTP_PATH) != 0)
    return refuse(x, MHD_HTTP_NOT_FOUND, NULL, NULL, "Not Found: the MCP endpoint is " MCP_HTTP_PATH);
  /* DNS rebinding: a web page's requests carry its Origin. */
  const char *origin = header(x, "Origin");
  if (origin && !http_origin_allowed(origin, h->o.origins, h->o.n_origins))
    return refuse(x, MHD_HTTP_FORBIDDEN, NULL, NULL, "Forbidden: Origin not allowed (--allow-origin)");
  x->principal = principal(x);
  if (x->principal == -2)
    return unauthorized(x, header(x, MHD_HTTP_HEADER_AUTHORIZATION)
                               ? "Unauthorized: invalid token"
                               : "Unauthorized: a bearer token is required");
  const char *version = header(x, "MCP-Protocol-Version");
  bool known = !version;
  for (size_t i = 0; version && h->on.protocol_versions[i]; i++)
    known |= strcmp(version, h->on.protocol_versions[i]) == 0;
  if (!known)
    return refuse(x, MHD_HTTP_BAD_REQUEST, NULL, NULL, "Bad Request: Unsupported protocol version");
  if (h->n_xs > h->o.max_requests)
    return refuse(x, MHD_HTTP_SERVICE_UNAVAILABLE, MHD_HTTP_HEADER_RETRY_AFTER, "1",
                  "Service Unavailable: too many requests in flight (--max-requests)");
  if (strcmp(method, MHD_HTTP_METHOD_POST) == 0)
    return on_post_begin(x);
  if (get)
    return on_get(x);
  if (strcmp(method, MHD_HTTP_METHOD_DELETE) == 0)
    return on_delete(x);
  return refuse(x, MHD_HTTP_METHOD_NOT_ALLOWED, MHD_HTTP_HEADER_ALLOW, "GET, POST, DELETE",
                "Method Not Allowed");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size,
                                  void **req_cls)
{
  (void) version;
  struct mcp_http *h = cls;
  struct exchange *x = *req_cls;
  if (!x) {
    if (!(x = calloc(1, sizeof *x)))
      return MHD_NO;
    x->h = h;
    x->conn = conn;
    x->id = ++h->next_id;
    x->principal = -1;
    x->state = X_OVER;
    slist_append(&h->xs, x);
    h->n_xs++;
    *req_cls = x;
    return on_first(x, url, method);
  }
  if (*upload_size) {
    if (x->state == X_BODY && x->body.len + *upload_size > h->srv->max_message)
      return MHD_NO; /* a body without a length that passes the limit: no more of it is read */
    if (x->state == X_BODY && x->body.len + *upload_size > x->held) {
      /* beyond its Content-Length (none, or chunked): counted as it comes */
      size_t more = x->body.len + *upload_size - x->held;
      if (h->body_bytes + more > h->body_budget)
        return MHD_NO;
      h->body_bytes += more;
      x->held += more;
    }
    if (x->state == X_BODY && strbuf_append(&x->body, upload, *upload_size) < 0)
      return MHD_NO;
    *upload_size = 0;
    return MHD_YES;
  }
  if (x->state == X_BODY)
    return on_post_body(x);
  if (x->state == X_WAIT && !x->sse)
    return answer_or_wait(x);
  return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
  (void) conn;
  (void) toe;
  struct mcp_http *h = cls;
  struct exchange *x = *req_cls;
  if (!x)
    return;
  *req_cls = NULL;
  /* Ended before its answer (the client went, or a timeout): its calls go too. */
  if (x->req_id && !x->done)
    h->on.cancel_calls(h->srv, 0, x->id);
  exchange_free(h, x);
}

/* ------------------------------------------------------------------ the loop */

/* The connections MHD holds, for the gate's room. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe)
{
  (void) conn;
  (void) socket_ctx;
  struct mcp_http *h = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED)
    h->gate.n_handed++;
  else if (h->gate.n_handed)
    h->gate.n_handed--;
}

static void hand_to_mhd(void *ctx, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
  struct mcp_http *h = ctx;
  MHD_add_connection(h->d, fd, addr, addrlen); /* on failure MHD closes fd */
  h->kick = true;                              /* its head is waiting: MHD reads it now */
}

static void settle_mhd(void *ctx)
{
  struct mcp_http *h = ctx;
  MHD_run(h->d);
}

size_t mcp_http_max_pollfds(const struct mcp_http *h)
{
  return 2 + h->gate.max_pending + h->n_suspended;
}

size_t mcp_http_pollfds(struct mcp_http *h, struct pollfd *pfds)
{
  if (h->polled_cap < h->n_suspended) {
    uint64_t *p = realloc(h->polled, h->n_suspended * sizeof *p);
    if (p) {
      h->polled = p;
      h->polled_cap = h->n_suspended;
    }
  }
  pfds[0] = (struct pollfd){.fd = h->epoll_fd, .events = POLLIN};
  h->gate_nfds = http_gate_pollfds(&h->gate, pfds + 1);
  size_t first = 1 + h->gate_nfds, n = first;
  for (struct exchange *x = h->xs; x && n - first < h->polled_cap; x = x->next) {
    if (!x->suspended)
      continue;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
      continue;
    h->polled[n - first] = x->id;
    pfds[n++] = (struct pollfd){.fd = ci->connect_fd, .events = POLLRDHUP};
  }
  return n;
}

/* Keepalives due now; the ms until the next one, or -1. */
static int keepalive(struct mcp_http *h)
{
  uint64_t now = now_ns();
  int timeout = -1;
  for (struct exchange *x = h->xs; x; x = x->next) {
    if (!x->get || x->gone || x->done)
      continue;
    if (now - x->sent_ns >= KEEPALIVE_NS) {
      x->sent_ns = now;
      if (strbuf_append(&x->out, ": keepalive\n\n", 14) == 0)
        wake(x);
    }
    int t = ms_until(x->sent_ns + KEEPALIVE_NS, now);
    if (timeout < 0 || t < timeout)
      timeout = t;
  }
  return timeout;
}

int mcp_http_timeout(struct mcp_http *h)
{
  int k = keepalive(h), g = http_gate_timeout(&h->gate);
  if (g >= 0 && (k < 0 || g < k))
    k = g;
  if (h->kick)
    return 0;
  MHD_UNSIGNED_LONG_LONG t;
  h->mhd_due_ns = 0;
  if (MHD_get_timeout(h->d, &t) != MHD_YES)
    return k;
  int m = t > INT_MAX ? INT_MAX : (int) t;
  h->mhd_due_ns = now_ns() + (uint64_t) m * 1000000ULL;
  return k >= 0 && k < m ? k : m;
}

/* Sessions nobody used for MCP_HTTP_SESSION_IDLE_S, with nothing open, end. */
static void expire_sessions(struct mcp_http *h)
{
  uint64_t now = now_ns();
  for (struct http_session *s = h->sessions.list, *next; s; s = next) {
    next = s->next;
    if (!s->open && now - s->used_ns > MCP_HTTP_SESSION_IDLE_S * 1000000000ULL)
      end_session(h, s);
  }
}

void mcp_http_dispatch(struct mcp_http *h, const struct pollfd *pfds, size_t n)
{
  size_t first = 1 + h->gate_nfds;
  for (size_t i = first; i < n; i++) {
    if (!pfds[i].revents)
      continue;
    struct exchange *x = find_exchange(h, h->polled[i - first]);
    if (!x || !x->suspended)
      continue;
    /* The client hung up while it waited: nobody takes the answer. */
    x->gone = true;
    if (x->req_id && !x->done)
      h->on.cancel_calls(h->srv, 0, x->id);
    wake(x);
  }
  /* MHD runs when its sockets say so, a connection was resumed, or a timeout of its is due: not
   * on every turn of the loop (a sandbox's output). */
  const struct http_gate_ops ops = {.hand = hand_to_mhd, .settle = settle_mhd, .ctx = h};
  http_gate_dispatch(&h->gate, pfds + 1, h->gate_nfds, &ops);
  bool due = h->mhd_due_ns && now_ns() >= h->mhd_due_ns;
  if (!pfds[0].revents && !h->kick && !due)
    return;
  h->kick = false;
  MHD_run(h->d);
  if (h->sessions.n)
    expire_sessions(h);
}

/* ------------------------------------------------------------------ setup */

int mcp_http_start(struct server *srv, const struct mcp_http_opts *o, const struct mcp_http_handlers *on,
                   struct mcp_http **ret, char *ret_url, size_t url_size, sbx_error_t *err)
{
  if (!o->loopback && !o->token_file)
    return sbx_error_set(err, 0,
                         "--http %s: listening beyond loopback needs --token-file (and TLS from a reverse "
                         "proxy; see sandboxd-mcp(7))",
                         o->addr);
  if (libmhd_load(err) < 0)
    return -1;
  struct mcp_http *h = calloc(1, sizeof *h);
  if (!h)
    return sbx_error_set(err, ENOMEM, "--http: out of memory");
  h->srv = srv;
  h->on = *on;
  h->o = *o;
  h->body_budget = CODE_HELD_MESSAGES * srv->max_message;
  h->epoll_fd = -1;
  h->gate.listen_fd = -1;
  if (o->token_file) {
    if (http_tokens_load(o->token_file, &h->tokens, err) < 0) {
      free(h);
      return -1;
    }
    h->auth = true;
  }
  size_t limit = mcp_http_connection_limit(srv->max_concurrent, srv->warm_target, o->max_connections, err);
  int fd = limit ? mcp_http_listen_socket(o, ret_url, url_size, err) : -1;
  if (fd < 0) {
    mcp_http_stop(h);
    return -1;
  }
  http_gate_init(&h->gate, fd, limit, o->idle_s);
  h->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL,
                          on_request, h, MHD_OPTION_CONNECTION_LIMIT, (unsigned) h->gate.mhd_limit,
                          MHD_OPTION_CONNECTION_TIMEOUT, o->idle_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                          h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_END);
  const union MHD_DaemonInfo *di = h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
  if (!di) {
    mcp_http_stop(h);
    return sbx_error_set(err, 0, "--http: cannot start the HTTP server (libmicrohttpd)");
  }
  h->epoll_fd = di->epoll_fd;
  *ret = h;
  return 0;
}

void mcp_http_reload(struct mcp_http *h)
{
  if (!h->auth)
    return;
  struct http_tokens t;
  sbx_error_t err = {0};
  if (http_tokens_load(h->o.token_file, &t, &err) < 0) {
    log_warn("%s; the tokens read before stay", err.msg);
    return;
  }
  http_tokens_free(&h->tokens);
  h->tokens = t;
}

void mcp_http_stop(struct mcp_http *h)
{
  if (!h)
    return;
  if (h->d) {
    /* MHD must not stop with connections suspended. */
    for (struct exchange *x = h->xs; x; x = x->next) {
      x->gone = true;
      wake(x);
    }
    MHD_run(h->d);
    MHD_stop_daemon(h->d);
  }
  while (h->xs)
    exchange_free(h, h->xs);
  http_gate_free(&h->gate);
  if (h->gate.listen_fd >= 0)
    close(h->gate.listen_fd);
  while (h->sessions.list)
    http_session_end(&h->sessions, h->sessions.list);
  http_tokens_free(&h->tokens);
  free(h->polled);
  free(h);
}
