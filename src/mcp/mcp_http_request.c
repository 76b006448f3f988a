/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: what one request asks, checked and done. The endpoint's checks (its path,
 * the Origin, the bearer token, the protocol version, the requests in flight), then its method:
 * a POST's JSON-RPC message is dispatched into the server (mcp_dispatch, handed over at start)
 * with its session made or found; a GET opens the session's stream; DELETE ends the session.
 * Beside /mcp: /healthz, and RFC 9728's metadata when there is an --auth-server. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/util.h"
#include "mcp/mcp_http_internal.h"
#include "mcp/mcp_internal.h"

#define WELL_KNOWN "/.well-known/oauth-protected-resource"

/* ------------------------------------------------------------------ checks */

static const char *header(struct exchange *x, const char *name)
{
  return http_conn_header(x->conn, name);
}

static bool accepts(const char *accept, const char *type)
{
  return accept && (strcasestr(accept, type) != NULL);
}

/* http://HOST as the client named us (the reverse proxy's X-Forwarded-Proto for the scheme). */
static void public_base(struct exchange *x, char *buf, size_t size)
{
  const char *host = header(x, "Host");
  const char *proto = header(x, "X-Forwarded-Proto");
  if (!host || !*host || strpbrk(host, "\"\\ \t/"))
    host = "localhost";
  bufprintf_cut(buf, size, "%s://%s", proto && strcasecmp(proto, "https") == 0 ? "https" : "http", host);
}

static bool unauthorized(struct exchange *x, const char *why)
{
  char value[1200] = "Bearer realm=\"sandboxd\"";
  if (x->h->o.auth_server) {
    char base[600];
    public_base(x, base, sizeof base);
    bufprintf_cut(value, sizeof value,
                  "Bearer realm=\"sandboxd\", resource_metadata=\"%s" WELL_KNOWN MCP_HTTP_PATH "\"", base);
  }
  return http_refuse(x, 401, "WWW-Authenticate", value, why);
}

/* RFC 9728: the protected resource's metadata, naming --auth-server. */
static bool resource_metadata(struct exchange *x)
{
  char base[600];
  public_base(x, base, sizeof base);
  json_writer_t *w = json_writer_new();
  if (!w)
    return false;
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
  return http_respond(x, 200, "application/json", &body);
}

/* Who is calling: -1 without tokens; else the token's index, or -2 (refused). */
static int principal(struct exchange *x)
{
  if (!x->h->auth)
    return -1;
  const char *a = header(x, "Authorization");
  if (!a || strncasecmp(a, "Bearer ", 7) != 0)
    return -2;
  a += 7;
  while (*a == ' ')
    a++;
  int i = http_tokens_match(&x->h->tokens, a, strlen(a));
  return i < 0 ? -2 : i;
}

/* The caller's token as what owns sessions, tasks and approvals: its sha256 (the same token
 * after a reload that moved its line is the same owner), or NULL without tokens. */
static const char *token_sha(const struct exchange *x)
{
  const struct http_tokens *t = &x->h->tokens;
  return x->principal >= 0 && (size_t) x->principal < t->n ? t->sha[x->principal] : NULL;
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

/* Mcp-Session-Id: the session (stateful), checked against the caller. 0, or a refusal queued
 * (a POST's unknown session: 0, and the refusal waits for the body, http_request_body). */
static int find_session(struct exchange *x, bool required, bool *ret)
{
  if (x->h->o.stateless)
    return 0;
  const char *id = header(x, "Mcp-Session-Id");
  if (!id) {
    if (required) {
      *ret = http_refuse(x, 400, NULL, NULL, "Bad Request: Mcp-Session-Id header is required");
      return -1;
    }
    return 0;
  }
  x->sess = http_session_find(&x->h->sessions, id, token_sha(x));
  if (!x->sess && !required) {
    x->refuse_status = 404;
    x->refuse_msg = "Session not found";
    return 0;
  }
  if (!x->sess) {
    *ret = http_refuse(x, 404, NULL, NULL, "Session not found");
    return -1;
  }
  x->sess->open++;
  x->sess->used_ns = now_ns();
  return 0;
}

/* ------------------------------------------------------------------ methods */

static bool on_get(struct exchange *x)
{
  struct mcp_http *h = x->h;
  if (h->o.stateless)
    return http_refuse(x, 405, "Allow", "POST",
                       "Method Not Allowed: no server stream without a session (--stateless)");
  if (!accepts(header(x, "Accept"), "text/event-stream"))
    return http_refuse(x, 406, NULL, NULL, "Not Acceptable: Client must accept text/event-stream");
  bool ret;
  if (find_session(x, true, &ret) < 0)
    return ret;
  if (x->sess->get_route)
    return http_refuse(x, 409, NULL, NULL, "Conflict: Only one SSE stream is allowed per session");
  if (h->n_streams >= h->o.max_streams)
    return http_refuse(x, 503, "Retry-After", "5",
                       "Service Unavailable: too many open streams (--max-streams)");
  x->get = x->sse = true;
  x->sent_ns = now_ns();
  h->n_streams++;
  x->sess->get_route = x->id;
  return http_start_stream(x);
}

static bool on_delete(struct exchange *x)
{
  bool ret;
  if (x->h->o.stateless)
    return http_refuse(x, 405, "Allow", "POST", "Method Not Allowed: no sessions (--stateless)");
  if (find_session(x, true, &ret) < 0)
    return ret;
  struct http_session *s = x->sess;
  s->open--;
  x->sess = NULL;
  http_end_session(x->h, s);
  return http_respond(x, 200, NULL, NULL);
}

/* The POST's headers, before its body is read. */
static bool on_post_begin(struct exchange *x)
{
  struct mcp_http *h = x->h;
  const char *accept = header(x, "Accept");
  if (!accepts(accept, "application/json") || !accepts(accept, "text/event-stream"))
    return http_refuse(x, 406, NULL, NULL,
                       "Not Acceptable: Client must accept both application/json and text/event-stream");
  const char *ctype = header(x, "Content-Type");
  if (!ctype || strncasecmp(ctype, "application/json", 16) != 0)
    return http_refuse(x, 415, NULL, NULL, "Unsupported Media Type: Content-Type must be application/json");
  const char *clen = header(x, "Content-Length");
  uint64_t v;
  if (clen && parse_u64(clen, &v) == 0 && v > h->srv->max_message) {
    char msg[160];
    bufprintf_cut(msg, sizeof msg, "Content Too Large: the limit is %zu bytes (--max-message-size)",
                  h->srv->max_message);
    return http_refuse(x, 413, "Connection", "close", msg);
  }
  if (clen && parse_u64(clen, &v) == 0 && h->body_bytes + v > h->body_budget)
    return http_refuse(x, 503, "Retry-After", "1",
                       "Service Unavailable: too many request bodies being read at once");
  bool ret;
  if (find_session(x, false, &ret) < 0)
    return ret;
  if (clen && parse_u64(clen, &v) == 0) { /* reserved before it is read */
    x->held = (size_t) v;
    h->body_bytes += x->held;
  }
  x->state = X_BODY;
  return true;
}

static bool parse_failed(struct exchange *x, struct jsonrpc_failure *fail)
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
  return http_respond(x, 400, "application/json", &body);
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
  http_wake(found);
}

static const char *request_header(void *ctx, const char *name)
{
  return header(ctx, name);
}

static void dispatch(struct mcp_http *h, struct exchange *x, const struct jsonrpc_message *m)
{
  struct server *srv = h->srv;
  srv->req_header = request_header;
  srv->req_ctx = x;
  name_client(x);
  /* Call ids are the client's own: a session's, or (stateless) this request's alone. */
  srv->client = x->sess ? x->sess->num : x->id;
  srv->client_session = x->sess != NULL;
  srv->principal = x->principal;
  srv->route = x->id;
  srv->client_name = x->name;
  /* A session's owner (mcp_sessions.c): the token itself, not its place in the file. */
  srv->owner = token_sha(x);
  /* The version is each request's (MCP-Protocol-Version; absent, as before initialize), not the
   * latest initialize of any client. */
  const char *version = header(x, "MCP-Protocol-Version");
  srv->protocol = NULL;
  for (size_t i = 0; version && h->on.protocol_versions[i]; i++)
    if (strcmp(version, h->on.protocol_versions[i]) == 0)
      srv->protocol = h->on.protocol_versions[i];
  h->on.dispatch(srv, m);
  srv->req_header = NULL;
  srv->req_ctx = NULL;
  srv->client = srv->route = 0;
  srv->principal = 0;
  srv->client_session = false;
  srv->client_name = NULL;
  srv->owner = NULL;
}

bool http_request_body(struct exchange *x)
{
  struct mcp_http *h = x->h;
  struct jsonrpc_message m;
  struct jsonrpc_failure fail;
  if (jsonrpc_parse(x->body.data ? x->body.data : "", x->body.len, &m, &fail) < 0) {
    if (!x->refuse_status && !x->bad_version)
      return parse_failed(x, &fail);
    jsonrpc_failure_clear(&fail);
    return x->bad_version ? http_refuse(x, 400, NULL, NULL, "Bad Request: Unsupported protocol version")
                          : http_refuse(x, x->refuse_status, NULL, NULL, x->refuse_msg);
  }
  strbuf_free(&x->body);
  h->body_bytes -= x->held;
  x->held = 0;
  /* Revision 2026-07-28 has no sessions: an Mcp-Session-Id on its request is ignored, neither
   * required nor checked (transports/streamable-http, "Earlier Streamable HTTP Revisions"). Its
   * version and headers are checked as it is dispatched (mcp_modern.c). */
  bool modern = mcp_request_is_modern(&m, header(x, "MCP-Protocol-Version"));
  if (modern) {
    if (x->sess)
      x->sess->open--;
    x->sess = NULL;
    x->refuse_status = 0;
  } else if (x->bad_version && m.kind != JSONRPC_REQUEST) {
    jsonrpc_message_clear(&m);
    return http_refuse(x, 400, NULL, NULL, "Bad Request: Unsupported protocol version");
  }
  if (x->refuse_status) { /* decided from the head; now it can name the request */
    bool r = http_refuse_id(x, m.kind == JSONRPC_REQUEST ? m.id : NULL, x->refuse_status, NULL, NULL,
                            x->refuse_msg);
    jsonrpc_message_clear(&m);
    return r;
  }
  bool init = m.kind == JSONRPC_REQUEST && strcmp(m.method, "initialize") == 0;
  bool ret = true;
  /* The body is read: a refusal names the request it refuses (its id; a notification has none). */
  const char *id = m.kind == JSONRPC_REQUEST ? m.id : NULL;
  if (modern || (x->bad_version && m.kind == JSONRPC_REQUEST)) {
    /* stateless: answered with -32022 (mcp_version_refused) or as 2026-07-28 */
  } else if (!h->o.stateless && !x->sess && !init) {
    ret = http_refuse_id(x, id, 400, NULL, NULL, "Bad Request: Mcp-Session-Id header is required");
  } else if (!h->o.stateless && !x->sess && h->sessions.n >= h->o.max_sessions) {
    ret = http_refuse_id(x, id, 503, "Retry-After", "5",
                         "Service Unavailable: too many sessions (--max-http-sessions)");
  } else if (!h->o.stateless && !x->sess) {
    sbx_error_t err = {0};
    if (http_session_new(&h->sessions, &h->srv->ring, ++h->next_id, token_sha(x), &x->sess, &err) < 0) {
      log_sbx_error(&err);
      ret = http_refuse_id(x, id, 500, NULL, NULL, "Internal error");
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
    return http_respond(x, 202, NULL, NULL);
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
    return false;
  if (x->sse && x->status) { /* refused as it was dispatched: a plain answer with its status */
    x->sse = false;
    h->n_streams--;
  }
  return x->sse ? http_start_stream(x) : http_answer_or_wait(x);
}

bool http_request_head(struct exchange *x, const char *url, const char *method)
{
  struct mcp_http *h = x->h;
  bool get = strcmp(method, "GET") == 0;
  if (get && (strcmp(url, WELL_KNOWN) == 0 || strcmp(url, WELL_KNOWN MCP_HTTP_PATH) == 0) && h->o.auth_server)
    return resource_metadata(x);
  /* Probes (Kubernetes liveness and readiness): answered from this loop, so a server that stopped
   * serving fails it where a TCP connect still succeeds (the kernel accepts into the backlog). No
   * token: an empty 200 tells nothing. */
  if (get && strcmp(url, MCP_HTTP_HEALTH_PATH) == 0)
    return http_respond(x, 200, NULL, NULL);
  if (strcmp(url, MCP_HTTP_PATH) != 0)
    return http_refuse(x, 404, NULL, NULL, "Not Found: the MCP endpoint is " MCP_HTTP_PATH);
  /* DNS rebinding: a web page's requests carry its Origin. */
  const char *origin = header(x, "Origin");
  if (origin && !http_origin_allowed(origin, h->o.origins, h->o.n_origins))
    return http_refuse(x, 403, NULL, NULL, "Forbidden: Origin not allowed (--allow-origin)");
  x->principal = principal(x);
  if (x->principal == -2)
    return unauthorized(x, header(x, "Authorization") ? "Unauthorized: invalid token"
                                                      : "Unauthorized: a bearer token is required");
  const char *version = header(x, "MCP-Protocol-Version");
  bool known = !version;
  for (size_t i = 0; version && h->on.protocol_versions[i]; i++)
    known |= strcmp(version, h->on.protocol_versions[i]) == 0;
  if (!known && strcmp(method, "POST") != 0)
    return http_refuse(x, 400, NULL, NULL, "Bad Request: Unsupported protocol version");
  x->bad_version = !known; /* a POST: answered once the body is read, with the request's id */
  /* 2026-07-28 has neither the GET stream nor sessions to DELETE. */
  if (version && strcmp(version, h->on.protocol_versions[0]) == 0 && strcmp(method, "POST") != 0)
    return http_refuse(x, 405, "Allow", "POST", "Method Not Allowed: revision 2026-07-28 uses POST only");
  if (h->n_xs > h->o.max_requests)
    return http_refuse(x, 503, "Retry-After", "1",
                       "Service Unavailable: too many requests in flight (--max-requests)");
  if (strcmp(method, "POST") == 0)
    return on_post_begin(x);
  if (get)
    return on_get(x);
  if (strcmp(method, "DELETE") == 0)
    return on_delete(x);
  return http_refuse(x, 405, "Allow", "GET, POST, DELETE", "Method Not Allowed");
}
