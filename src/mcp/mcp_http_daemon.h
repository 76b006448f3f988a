/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: libmicrohttpd (mcp_http_daemon.c, loaded at run time) behind the calls
 * the transport makes: the daemon, run from the server's loop; a request's headers; its answer,
 * whole or streamed; suspend and resume. It knows nothing of MCP: what a request means is the
 * handlers' it is given at start (mcp_http.c). */
#ifndef SBX_MCP_HTTP_DAEMON_H
#define SBX_MCP_HTTP_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/util.h"

struct MHD_Daemon;
struct MHD_Connection;

/* What the daemon calls. A false return closes the connection. */
struct http_daemon_handlers {
  /* Each call of a request: the first (*req_cls NULL: set it) once its head is in; one for each
   * piece of its body (*upload_size bytes at upload: set it to 0 once taken); then calls with none
   * until it is answered. */
  bool (*serve_request)(void *ctx, struct MHD_Connection *conn, const char *url, const char *method,
                        const char *upload, size_t *upload_size, void **req_cls);
  /* The request has ended, answered or not (*req_cls as serve_request set it). */
  void (*completed)(void *ctx, void **req_cls);
  /* A connection the daemon was handed (started), or one of those closed. */
  void (*connection)(void *ctx, bool started);
  void *ctx;
};

/* dlopen libmicrohttpd (once). */
int http_daemon_load(sbx_error_t *err);
/* A daemon with no listening socket (http_daemon_add hands it connections), at most
 * max_connections at once, each closed after idle_s idle; on outlives it. NULL if it cannot. */
struct MHD_Daemon *http_daemon_start(const struct http_daemon_handlers *on, unsigned max_connections,
                                     unsigned idle_s);
/* The fd to poll (readable: run the daemon), or -1. */
int http_daemon_epoll_fd(struct MHD_Daemon *d);
void http_daemon_run(struct MHD_Daemon *d);
/* Serve a connection (fd taken). */
void http_daemon_add(struct MHD_Daemon *d, int fd, const struct sockaddr *addr, socklen_t addrlen);
/* ms until the daemon must run (its timeouts), at most INT_MAX; -1 if none is due. */
int http_daemon_timeout(struct MHD_Daemon *d);
/* No connection may be suspended. */
void http_daemon_stop(struct MHD_Daemon *d);

/* A request header's value, or NULL. */
const char *http_conn_header(struct MHD_Connection *c, const char *name);
/* The connection's socket, or -1. */
int http_conn_fd(struct MHD_Connection *c);
/* The daemon stops serving the connection until it is resumed. */
void http_conn_suspend(struct MHD_Connection *c);
void http_conn_resume(struct MHD_Connection *c);

/* A stream's reader: up to max bytes into buf and their count; 0: none yet (suspend the
 * connection until there are); or one of these. */
#define HTTP_STREAM_END ((ssize_t) -1)   /* all sent */
#define HTTP_STREAM_ERROR ((ssize_t) -2) /* cut short: the connection closes */
typedef ssize_t http_stream_reader(void *cls, uint64_t pos, char *buf, size_t max);

/* The answer: status, n_headers name and value pairs (headers[2i], headers[2i + 1]) and body (NULL
 * or empty: none; else the daemon takes it and frees it). -1: no answer made (out of memory; body
 * is still the caller's); else 1 queued, 0 not. */
int http_conn_respond(struct MHD_Connection *c, unsigned status, const char *const *headers, size_t n_headers,
                      strbuf_t *body);
/* A 200 whose body, of unknown length, reader gives as it comes. -1, 0, 1 as above. */
int http_conn_stream(struct MHD_Connection *c, http_stream_reader *reader, void *cls,
                     const char *const *headers, size_t n_headers);

#endif
