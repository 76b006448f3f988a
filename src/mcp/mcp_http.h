/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: MCP's Streamable HTTP transport (protocol 2025-11-25) on one endpoint,
 * /mcp, in the server's own poll loop (mcp_server.c), feeding its one dispatcher (handed over at
 * start: mcp_http_handlers). mcp_http.c the transport, mcp_http_request.c what a request asks,
 * mcp_http_exchange.c each request's answer and streams, mcp_http_daemon.c libmicrohttpd,
 * mcp_http_session.c the sessions, mcp_http_auth.c bearer tokens and origins. */
#ifndef SBX_MCP_HTTP_H
#define SBX_MCP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define MCP_HTTP_PATH "/mcp"
#define MCP_HTTP_HEALTH_PATH "/healthz"
#define MCP_HTTP_DEFAULT_ADDR "127.0.0.1"
#define MCP_HTTP_DEFAULT_MAX_CONNECTIONS 2048
#define MCP_HTTP_DEFAULT_MAX_REQUESTS 256
#define MCP_HTTP_DEFAULT_MAX_STREAMS 1024
#define MCP_HTTP_DEFAULT_MAX_SESSIONS 256
#define MCP_HTTP_DEFAULT_IDLE_S 60
/* A session with no request and no open stream this long is ended (its client must initialize
 * again: a request with its id gets 404, as the spec says). */
#define MCP_HTTP_SESSION_IDLE_S 3600
#define MCP_HTTP_MAX_ORIGINS 16

struct mcp_http_opts {
  char addr[64]; /* numeric IPv4 or IPv6 (without brackets) */
  uint16_t port; /* 0: the kernel picks one */
  bool loopback; /* addr is a loopback address */
  bool stateless;
  const char *token_file;
  const char *auth_server; /* RFC 9728 metadata names it */
  const char *origins[MCP_HTTP_MAX_ORIGINS];
  size_t n_origins;
  size_t max_connections, max_requests, max_streams, max_sessions;
  unsigned idle_s;
  /* --ring-file, --ring-name: the upstream of nginx's `hash ... consistent` this replica is one
   * of, and its name there (route_ring.h); session ids and handles are minted to route back. */
  const char *ring_file, *ring_name;
};

/* mcp_http_listen.c: "ADDR:PORT", "[ADDR6]:PORT" or "PORT" (on 127.0.0.1). */
int mcp_http_parse_listen(const char *arg, struct mcp_http_opts *o, sbx_error_t *err);
/* The listening socket (its fd); ret_url: http://ADDR:PORT/mcp with the port bound. */
int mcp_http_listen_socket(const struct mcp_http_opts *o, char *ret_url, size_t url_size, sbx_error_t *err);
/* Raise the soft open-file limit to the hard one; the connections that leaves room for, at most
 * want, beside the sandboxes; 0 (err set) if none. */
size_t mcp_http_connection_limit(size_t max_concurrent, size_t warm, size_t want, sbx_error_t *err);

struct server;
struct mcp_http;
struct pollfd;
struct jsonrpc_message;

/* What the transport hands the server (mcp_server.c), given at start: it never calls up by name. */
struct mcp_http_handlers {
  /* One parsed message, as if read from stdin, with srv->client, route and protocol set. */
  void (*dispatch)(struct server *srv, const struct jsonrpc_message *m);
  /* Cancel every call of client (its session ended), or every call routed to route (its exchange
   * ended) when route is not 0. */
  void (*cancel_calls)(struct server *srv, uint64_t client, uint64_t route);
  const char *const *protocol_versions; /* the versions implemented, newest first, NULL-ended */
};

/* Listen (refused: a non-loopback address without --token-file); *ret_url: where it listens
 * (http://ADDR:PORT/mcp, for the one line the command prints). */
int mcp_http_start(struct server *srv, const struct mcp_http_opts *o, const struct mcp_http_handlers *on,
                   struct mcp_http **ret, char *ret_url, size_t url_size, sbx_error_t *err);
size_t mcp_http_max_pollfds(const struct mcp_http *h);
size_t mcp_http_pollfds(struct mcp_http *h, struct pollfd *pfds);
/* ms until the transport must run again, or -1. */
int mcp_http_timeout(struct mcp_http *h);
void mcp_http_dispatch(struct mcp_http *h, const struct pollfd *pfds, size_t n);
/* One message from the server, to the exchange route (its answer, or a notification; a request
 * of the server's own is written as a notification is, "method" before "id", and goes as one). */
void mcp_http_send(struct mcp_http *h, uint64_t route, const char *msg, size_t len);
/* The HTTP status the answer sent next to route goes with (revision 2026-07-28's errors: 400,
 * 404), when that exchange is not a stream already. */
void mcp_http_status(struct mcp_http *h, uint64_t route, unsigned status);
/* The route of the open GET stream of the session whose client number is client, or 0: where a
 * message no request carries may reach that client (a task's status, mcp_tasks_legacy.c). */
uint64_t mcp_http_session_stream(struct mcp_http *h, uint64_t client);
/* Whether a request of the server's can reach the client on the exchange route, answered as an
 * SSE stream that is still open: NULL if so, else why not (a sentence for an error message). */
const char *mcp_http_stream_why_not(struct mcp_http *h, uint64_t route);
/* SIGHUP: read the token file again (a bad file keeps the tokens there were, and says why). */
void mcp_http_reload(struct mcp_http *h);
/* Close every connection and the listening socket. The calls are gone already. */
void mcp_http_stop(struct mcp_http *h);

/* mcp_http_auth.c: the bearer tokens of --token-file. */
struct http_tokens {
  char (*sha)[65]; /* each token's sha256 (compared, never the token) */
  size_t n;
};
/* The file: a regular file, not a link, owned by us or root, no group or other permission bits;
 * one token per line (blank lines and lines starting with # skipped), each 16 to 4096 visible
 * ASCII characters. */
int http_tokens_load(const char *path, struct http_tokens *ret, sbx_error_t *err);
void http_tokens_free(struct http_tokens *t);
/* The index of the token, in constant time over the tokens; -1 if none matches. */
int http_tokens_match(const struct http_tokens *t, const char *token, size_t len);
/* An Origin header's value is allowed: a loopback origin (http or https, localhost, 127.0.0.0/8,
 * [::1], any port) or one of allowed[] exactly (scheme://host[:port]). */
bool http_origin_allowed(const char *origin, const char *const *allowed, size_t n_allowed);

#endif
