/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: the gate in front of libmicrohttpd. Connections are accepted here and
 * held until their request head is complete (peeked, never read: MHD reads it again), then
 * handed to MHD (MHD_add_connection). Until then nobody is authenticated: the bearer token is in
 * the head. A whole head without a valid token is answered (401, 404, a probe's 200) and its
 * connection closed by MHD at once, so only token holders stay in MHD's slots.
 *
 * Held connections are bounded three ways: at most max_pending in all, at most per_addr from one
 * address, and head_ns to finish their head. A new connection past either count closes the
 * oldest held one (of its address, or of all) instead of waiting: slow or silent connections can
 * only push each other out, never a client that sends its head at once. What is left: a client
 * that cannot send its head before max_pending newer connections arrive (one address: per_addr)
 * can be pushed out; such a rate is for a proxy with rate limits in front (sandboxd-mcp(7)). */
#include "mcp/mcp_http_gate.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/slist.h"
#include "base/util.h"

#define HEAD_MAX 8192       /* a request head bigger than this is not waited for */
#define ACCEPT_PER_TURN 256 /* then the rest of the loop runs */

struct gate_conn {
  struct gate_conn *next;
  int fd;
  struct sockaddr_storage addr;
  socklen_t addrlen;
  uint64_t deadline_ns;
};

void http_gate_init(struct http_gate *g, int listen_fd, size_t conn_limit, unsigned idle_s)
{
  *g = (struct http_gate){.listen_fd = listen_fd};
  size_t share = conn_limit / 8;
  g->max_pending = share < 1 ? 1 : share > GATE_MAX_PENDING ? GATE_MAX_PENDING : share;
  g->per_addr = g->max_pending / 4 ? g->max_pending / 4 : 1;
  g->mhd_limit = conn_limit > g->max_pending ? conn_limit - g->max_pending : 1;
  g->head_ns = (uint64_t) (idle_s < GATE_HEAD_S ? idle_s : GATE_HEAD_S) * 1000000000ULL;
}

static void drop(struct http_gate *g, struct gate_conn *c)
{
  (void) slist_unlink(&g->pending, c);
  close(c->fd);
  free(c);
  g->n_pending--;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
  if (a->ss_family != b->ss_family)
    return false;
  if (a->ss_family == AF_INET)
    return ((const struct sockaddr_in *) a)->sin_addr.s_addr ==
           ((const struct sockaddr_in *) b)->sin_addr.s_addr;
  if (a->ss_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr,
                  &((const struct sockaddr_in6 *) b)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return true;
}

/* Room for one more held connection from addr: past a limit, the oldest of the address, or of all,
 * goes. */
static void make_room(struct http_gate *g, const struct sockaddr_storage *addr)
{
  struct gate_conn *oldest_here = NULL;
  size_t here = 0;
  for (struct gate_conn *c = g->pending; c; c = c->next)
    if (same_addr(&c->addr, addr) && here++ == 0)
      oldest_here = c;
  if (here >= g->per_addr)
    drop(g, oldest_here);
  else if (g->n_pending >= g->max_pending)
    drop(g, g->pending);
}

/* A held connection is readable: hand it on once its head is complete. */
static void look(struct http_gate *g, struct gate_conn *c, const struct http_gate_ops *ops)
{
  char head[HEAD_MAX];
  ssize_t n = recv(c->fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  bool whole = n > 0 && memmem(head, (size_t) n, "\r\n\r\n", 4) != NULL;
  if (!whole && n > 0 && (size_t) n < sizeof head)
    return; /* more to come, until its deadline */
  if (!whole) {
    drop(g, c); /* it hung up, failed, or sent a head larger than HEAD_MAX */
    return;
  }
  /* MHD counts a connection as gone only when it next runs, after the client saw it close. */
  if (g->n_handed >= g->mhd_limit && ops->settle)
    ops->settle(ops->ctx);
  if (g->n_handed >= g->mhd_limit) {
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
                               "Content-Length: 0\r\n\r\n";
    /* What the client sent is read first: a close with unread data sends a reset, which can
     * destroy the 503 before the client reads it. */
    for (size_t got = 0; got < 16 * sizeof head && (n = recv(c->fd, head, sizeof head, MSG_DONTWAIT)) > 0;)
      got += (size_t) n;
    ssize_t ignored = send(c->fd, busy, sizeof busy - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void) ignored;
    shutdown(c->fd, SHUT_WR);
    drop(g, c);
    return;
  }
  int fd = c->fd;
  struct sockaddr_storage addr = c->addr;
  socklen_t addrlen = c->addrlen;
  (void) slist_unlink(&g->pending, c);
  free(c);
  g->n_pending--;
  ops->hand(ops->ctx, fd, (const struct sockaddr *) &addr, addrlen); /* it takes fd */
}

/* A connection that sent its head before it was accepted (it waited in the backlog) is handed on
 * at once: a flood of newer ones cannot push it out before it is looked at. */
static void accept_some(struct http_gate *g, const struct http_gate_ops *ops)
{
  for (int i = 0; i < ACCEPT_PER_TURN; i++) {
    struct gate_conn *c = calloc(1, sizeof *c);
    if (!c)
      return;
    c->addrlen = sizeof c->addr;
    c->fd = accept4(g->listen_fd, (struct sockaddr *) &c->addr, &c->addrlen, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c->fd < 0) {
      free(c);
      return; /* EAGAIN, or out of fds (EMFILE): the kernel's backlog holds the rest */
    }
    make_room(g, &c->addr);
    c->deadline_ns = now_ns() + g->head_ns;
    slist_append(&g->pending, c);
    g->n_pending++;
    look(g, c, ops);
  }
}

size_t http_gate_pollfds(const struct http_gate *g, struct pollfd *pfds)
{
  size_t n = 0;
  pfds[n++] = (struct pollfd){.fd = g->listen_fd, .events = POLLIN};
  for (struct gate_conn *c = g->pending; c; c = c->next)
    pfds[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN | POLLRDHUP};
  return n;
}

void http_gate_dispatch(struct http_gate *g, const struct pollfd *pfds, size_t n,
                        const struct http_gate_ops *ops)
{
  /* The held connections polled (in pending's order then): a fd is only looked at if it is still
   * the one polled, since one handed on or dropped may be reused by accept below. */
  for (size_t i = 1; i < n; i++) {
    if (!pfds[i].revents)
      continue;
    for (struct gate_conn *c = g->pending; c; c = c->next)
      if (c->fd == pfds[i].fd) {
        look(g, c, ops);
        break;
      }
  }
  uint64_t now = now_ns();
  for (struct gate_conn *c = g->pending, *next; c; c = next) {
    next = c->next;
    if (now >= c->deadline_ns)
      drop(g, c);
  }
  if (n && pfds[0].revents)
    accept_some(g, ops);
}

int http_gate_timeout(const struct http_gate *g)
{
  /* pending is in arrival order: the first is due first. */
  if (!g->pending)
    return -1;
  uint64_t now = now_ns();
  return now >= g->pending->deadline_ns ? 0 : (int) ((g->pending->deadline_ns - now + 999999) / 1000000);
}

void http_gate_free(struct http_gate *g)
{
  while (g->pending)
    drop(g, g->pending);
}
