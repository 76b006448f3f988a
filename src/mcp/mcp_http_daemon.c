/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: libmicrohttpd behind the few calls the transport makes
 * (mcp_http_daemon.h). The daemon has no listening socket (the gate hands it each connection)
 * and no thread: the server's loop polls its epoll fd and runs it. What a request means is the
 * handlers' (mcp_http.c), given at start. */
#include "mcp/mcp_http_daemon.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdlib.h>

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

int http_daemon_load(sbx_error_t *err)
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

_Static_assert(HTTP_STREAM_END == MHD_CONTENT_READER_END_OF_STREAM, "a stream reader's end");
_Static_assert(HTTP_STREAM_ERROR == MHD_CONTENT_READER_END_WITH_ERROR, "a stream reader's error");

/* ------------------------------------------------------------------ the daemon */

static enum MHD_Result mhd_request(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version, const char *upload,
                                   size_t *upload_size, void **req_cls)
{
  (void) version;
  const struct http_daemon_handlers *on = cls;
  return on->serve_request(on->ctx, conn, url, method, upload, upload_size, req_cls) ? MHD_YES : MHD_NO;
}

static void mhd_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                          enum MHD_RequestTerminationCode toe)
{
  (void) conn;
  (void) toe;
  const struct http_daemon_handlers *on = cls;
  on->completed(on->ctx, req_cls);
}

static void mhd_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                           enum MHD_ConnectionNotificationCode toe)
{
  (void) conn;
  (void) socket_ctx;
  const struct http_daemon_handlers *on = cls;
  on->connection(on->ctx, toe == MHD_CONNECTION_NOTIFY_STARTED);
}

struct MHD_Daemon *http_daemon_start(const struct http_daemon_handlers *on, unsigned max_connections,
                                     unsigned idle_s)
{
  void *cls = (void *) on;
  return MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL,
                          mhd_request, cls, MHD_OPTION_CONNECTION_LIMIT, max_connections,
                          MHD_OPTION_CONNECTION_TIMEOUT, idle_s, MHD_OPTION_NOTIFY_COMPLETED, mhd_completed,
                          cls, MHD_OPTION_NOTIFY_CONNECTION, mhd_connection, cls, MHD_OPTION_END);
}

int http_daemon_epoll_fd(struct MHD_Daemon *d)
{
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
  return di ? di->epoll_fd : -1;
}

void http_daemon_run(struct MHD_Daemon *d)
{
  MHD_run(d);
}

void http_daemon_add(struct MHD_Daemon *d, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
  MHD_add_connection(d, fd, addr, addrlen);
}

int http_daemon_timeout(struct MHD_Daemon *d)
{
  MHD_UNSIGNED_LONG_LONG t;
  if (MHD_get_timeout(d, &t) != MHD_YES)
    return -1;
  return t > INT_MAX ? INT_MAX : (int) t;
}

void http_daemon_stop(struct MHD_Daemon *d)
{
  MHD_stop_daemon(d);
}

/* ------------------------------------------------------------------ a connection */

const char *http_conn_header(struct MHD_Connection *c, const char *name)
{
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

int http_conn_fd(struct MHD_Connection *c)
{
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  return ci ? ci->connect_fd : -1;
}

void http_conn_suspend(struct MHD_Connection *c)
{
  MHD_suspend_connection(c);
}

void http_conn_resume(struct MHD_Connection *c)
{
  MHD_resume_connection(c);
}

/* The response's headers, then it is queued. */
static int queue_response(struct MHD_Connection *c, unsigned status, struct MHD_Response *r,
                          const char *const *headers, size_t n_headers)
{
  for (size_t i = 0; i < n_headers; i++)
    MHD_add_response_header(r, headers[2 * i], headers[2 * i + 1]);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret == MHD_YES;
}

int http_conn_respond(struct MHD_Connection *c, unsigned status, const char *const *headers, size_t n_headers,
                      strbuf_t *body)
{
  struct MHD_Response *r;
  if (body && body->len)
    r = MHD_create_response_from_buffer_with_free_callback(body->len, body->data, free);
  else
    r = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
  if (!r)
    return -1;
  if (body && body->len)
    *body = (strbuf_t){0}; /* the response owns it now */
  return queue_response(c, status, r, headers, n_headers);
}

int http_conn_stream(struct MHD_Connection *c, http_stream_reader *reader, void *cls,
                     const char *const *headers, size_t n_headers)
{
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, cls, NULL);
  if (!r)
    return -1;
  return queue_response(c, MHD_HTTP_OK, r, headers, n_headers);
}
