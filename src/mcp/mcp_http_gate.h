/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: the gate in front of libmicrohttpd (mcp_http_gate.c): connections are
 * held until their request head is complete, within a share of the slots, a per-address limit and
 * a deadline, then handed on. */
#ifndef SBX_MCP_HTTP_GATE_H
#define SBX_MCP_HTTP_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define GATE_MAX_PENDING 256 /* held connections at most (and an eighth of --max-connections) */
#define GATE_HEAD_S 5        /* to finish the head (or --idle-timeout, if shorter) */

struct gate_conn;
struct pollfd;

struct http_gate {
  int listen_fd;
  size_t max_pending; /* held, in all: an eighth of the connections, 1 to GATE_MAX_PENDING */
  size_t per_addr;    /* held, from one address: a quarter of that */
  size_t mhd_limit;   /* handed on in all: the connections not kept for held ones */
  uint64_t head_ns;
  struct gate_conn *pending; /* held, oldest first */
  size_t n_pending;
  size_t n_handed; /* handed on and still open (the owner counts them) */
};

struct http_gate_ops {
  /* Take fd (a connection with a whole head) and serve it. */
  void (*hand)(void *ctx, int fd, const struct sockaddr *addr, socklen_t addrlen);
  /* Let the owner finish closing the connections it is done with (n_handed), before a 503. */
  void (*settle)(void *ctx);
  void *ctx;
};

void http_gate_init(struct http_gate *g, int listen_fd, size_t conn_limit, unsigned idle_s);
/* The listening socket first, then each held connection: 1 + n_pending entries at most. */
size_t http_gate_pollfds(const struct http_gate *g, struct pollfd *pfds);
void http_gate_dispatch(struct http_gate *g, const struct pollfd *pfds, size_t n,
                        const struct http_gate_ops *ops);
/* ms until the oldest held connection's deadline, or -1. */
int http_gate_timeout(const struct http_gate *g);
/* Close the held connections (not the listening socket). */
void http_gate_free(struct http_gate *g);

#endif
