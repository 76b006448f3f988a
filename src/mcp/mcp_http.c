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
 * --stateless has none, and every request is on its own, so any replica may answer it.
 *
 * Here the transport's calls from the server and the daemon's handlers; what a request asks is
 * mcp_http_request.c, the exchanges and their answers mcp_http_exchange.c, libmicrohttpd
 * itself mcp_http_daemon.c. Calls go down that list: the daemon calls up only through the
 * handlers it is given. */
#include "mcp/mcp_http.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_http_internal.h"
#include "mcp/mcp_internal.h"

/* ------------------------------------------------------------------ the daemon's handlers */

static bool on_request(void *ctx, struct MHD_Connection *conn, const char *url, const char *method,
                       const char *upload, size_t *upload_size, void **req_cls)
{
  struct mcp_http *h = ctx;
  struct exchange *x = *req_cls;
  if (!x) {
    if (!(x = calloc(1, sizeof *x)))
      return false;
    x->h = h;
    x->conn = conn;
    x->id = ++h->next_id;
    x->principal = -1;
    x->state = X_OVER;
    slist_append(&h->xs, x);
    h->n_xs++;
    *req_cls = x;
    return http_request_head(x, url, method);
  }
  if (*upload_size) {
    if (x->state == X_BODY && x->body.len + *upload_size > h->srv->max_message)
      return false; /* a body without a length that passes the limit: no more of it is read */
    if (x->state == X_BODY && x->body.len + *upload_size > x->held) {
      /* beyond its Content-Length (none, or chunked): counted as it comes */
      size_t more = x->body.len + *upload_size - x->held;
      if (h->body_bytes + more > h->body_budget)
        return false;
      h->body_bytes += more;
      x->held += more;
    }
    if (x->state == X_BODY && strbuf_append(&x->body, upload, *upload_size) < 0)
      return false;
    *upload_size = 0;
    return true;
  }
  if (x->state == X_BODY)
    return http_request_body(x);
  if (x->state == X_WAIT && !x->sse)
    return http_answer_or_wait(x);
  return true;
}

static void on_completed(void *ctx, void **req_cls)
{
  struct mcp_http *h = ctx;
  struct exchange *x = *req_cls;
  if (!x)
    return;
  *req_cls = NULL;
  /* Ended before its answer (the client went, or a timeout): its calls go too. */
  if (x->req_id && !x->done)
    h->on.cancel_calls(h->srv, 0, x->id);
  http_exchange_free(h, x);
}

/* The connections MHD holds, for the gate's room. */
static void on_connection(void *ctx, bool started)
{
  struct mcp_http *h = ctx;
  if (started)
    h->gate.n_handed++;
  else if (h->gate.n_handed)
    h->gate.n_handed--;
}

/* ------------------------------------------------------------------ the loop */

static void hand_to_mhd(void *ctx, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
  struct mcp_http *h = ctx;
  http_daemon_add(h->d, fd, addr, addrlen); /* on failure MHD closes fd */
  h->kick = true;                           /* its head is waiting: MHD reads it now */
}

static void settle_mhd(void *ctx)
{
  struct mcp_http *h = ctx;
  http_daemon_run(h->d);
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
    int fd = http_conn_fd(x->conn);
    if (fd < 0)
      continue;
    h->polled[n - first] = x->id;
    pfds[n++] = (struct pollfd){.fd = fd, .events = POLLRDHUP};
  }
  return n;
}

int mcp_http_timeout(struct mcp_http *h)
{
  int k = http_keepalive(h), g = http_gate_timeout(&h->gate);
  if (g >= 0 && (k < 0 || g < k))
    k = g;
  if (h->kick)
    return 0;
  h->mhd_due_ns = 0;
  int m = http_daemon_timeout(h->d);
  if (m < 0)
    return k;
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
      http_end_session(h, s);
  }
}

void mcp_http_dispatch(struct mcp_http *h, const struct pollfd *pfds, size_t n)
{
  size_t first = 1 + h->gate_nfds;
  for (size_t i = first; i < n; i++) {
    if (!pfds[i].revents)
      continue;
    struct exchange *x = http_exchange_find(h, h->polled[i - first]);
    if (!x || !x->suspended)
      continue;
    /* The client hung up while it waited: nobody takes the answer. */
    x->gone = true;
    if (x->req_id && !x->done)
      h->on.cancel_calls(h->srv, 0, x->id);
    http_wake(x);
  }
  /* MHD runs when its sockets say so, a connection was resumed, or a timeout of its is due: not
   * on every turn of the loop (a sandbox's output). */
  const struct http_gate_ops ops = {.hand = hand_to_mhd, .settle = settle_mhd, .ctx = h};
  http_gate_dispatch(&h->gate, pfds + 1, h->gate_nfds, &ops);
  bool due = h->mhd_due_ns && now_ns() >= h->mhd_due_ns;
  if (!pfds[0].revents && !h->kick && !due)
    return;
  h->kick = false;
  http_daemon_run(h->d);
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
  if (http_daemon_load(err) < 0)
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
  h->daemon_on = (struct http_daemon_handlers){
      .serve_request = on_request, .completed = on_completed, .connection = on_connection, .ctx = h};
  h->d = http_daemon_start(&h->daemon_on, (unsigned) h->gate.mhd_limit, o->idle_s);
  int epoll_fd = h->d ? http_daemon_epoll_fd(h->d) : -1;
  if (epoll_fd < 0) {
    mcp_http_stop(h);
    return sbx_error_set(err, 0, "--http: cannot start the HTTP server (libmicrohttpd)");
  }
  h->epoll_fd = epoll_fd;
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
      http_wake(x);
    }
    http_daemon_run(h->d);
    http_daemon_stop(h->d);
  }
  while (h->xs)
    http_exchange_free(h, h->xs);
  http_gate_free(&h->gate);
  if (h->gate.listen_fd >= 0)
    close(h->gate.listen_fd);
  while (h->sessions.list)
    http_session_end(&h->sessions, h->sessions.list);
  http_tokens_free(&h->tokens);
  free(h->polled);
  free(h);
}
