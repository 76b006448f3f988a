/* SPDX-License-Identifier: Apache-2.0 */
/* What the MCP server sends its client: the output queue (the only writer of protocol to stdout),
 * or the HTTP exchange a message goes to (mcp_http.c); replies, errors and log notifications. The
 * methods (mcp_server.c) and the calls (mcp_calls.c) send through these. */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/util.h"
#include "base/version.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_internal.h"

const char *const mcp_log_levels[MCP_LOG_LEVELS] = {"debug", "info",     "notice", "warning",
                                                    "error", "critical", "alert",  "emergency"};

void flush_output(struct server *srv)
{
  while (srv->outq_off < srv->outq.len) {
    ssize_t n = write(STDOUT_FILENO, srv->outq.data + srv->outq_off, srv->outq.len - srv->outq_off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        break;
      /* The client closed our stdout: nobody is listening any more. */
      log_error("write to stdout: %s", strerror(errno));
      srv->stop = true;
      srv->outq_off = srv->outq.len;
      break;
    }
    srv->outq_off += (size_t) n;
  }
  if (srv->outq_off < srv->outq.len) {
    /* Keep the pending bytes at the front, so a slow reader does not make the buffer creep. */
    if (srv->outq_off > srv->outq.len / 2) {
      memmove(srv->outq.data, srv->outq.data + srv->outq_off, srv->outq.len - srv->outq_off);
      srv->outq.len -= srv->outq_off;
      srv->outq_off = 0;
    }
    return;
  }
  srv->outq.len = srv->outq_off = 0;
  /* Do not keep the room a large reply needed once it is written. */
  if (srv->outq.cap > TRIM_AFTER_BYTES) {
    strbuf_free(&srv->outq);
    malloc_trim(0);
  } else if (srv->outq.data)
    srv->outq.data[0] = '\0';
}

/* Write what is queued, waiting up to timeout_ms for a slow reader (at exit). */
void flush_output_for(struct server *srv, int timeout_ms)
{
  uint64_t give_up = now_ns() + (uint64_t) timeout_ms * 1000000ULL;
  while (srv->outq_off < srv->outq.len && !srv->stop) {
    uint64_t now = now_ns();
    if (now >= give_up)
      break;
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    if (poll(&p, 1, ms_until(give_up, now)) <= 0)
      break;
    flush_output(srv);
  }
}

/* Queue one finished message (and free the writer). */
void send_writer(struct server *srv, json_writer_t *w)
{
  size_t n;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  if (srv->http) { /* to the exchange at srv->route (mcp_http_exchange.c) */
    if (buf)
      mcp_http_send(srv->http, srv->route, buf, n);
    json_writer_free(w);
    return;
  }
  if (!buf || strbuf_append(&srv->outq, buf, n) < 0 || strbuf_append(&srv->outq, "\n", 1) < 0)
    log_error("cannot build a reply: out of memory");
  json_writer_free(w);
  flush_output(srv);
}

void send_error(struct server *srv, const char *id, int code, const char *message)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_write_error(w, id, code, message);
  send_writer(srv, w);
}

void send_errorf(struct server *srv, const char *id, int code, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  send_error(srv, id, code, msg);
}

static struct client_level *client_level(const struct server *srv, uint64_t client)
{
  for (size_t i = 0; i < srv->n_client_levels; i++)
    if (srv->client_levels[i].client == client)
      return &srv->client_levels[i];
  return NULL;
}

int mcp_log_level(const struct server *srv)
{
  if (srv->req.modern) /* 2026-07-28: the request's own, or none (server/utilities/logging) */
    return srv->req.log_level;
  const struct client_level *cl = srv->http ? client_level(srv, srv->client) : NULL;
  return cl ? cl->level : srv->log_level;
}

int mcp_log_level_set(struct server *srv, int level)
{
  if (!srv->http) {
    srv->log_level = level;
    return 0;
  }
  /* A stateless request is a client of its own, gone with its answer: nothing to keep (under
   * 2025-11-25 it has no later request; the level is the server's). */
  if (!srv->client_session)
    return 0;
  struct client_level *cl = client_level(srv, srv->client);
  if (!cl) {
    struct client_level *a = realloc(srv->client_levels, (srv->n_client_levels + 1) * sizeof *a);
    if (!a)
      return -1;
    srv->client_levels = a;
    cl = &a[srv->n_client_levels++];
    cl->client = srv->client;
  }
  cl->level = level;
  return 0;
}

void mcp_log_level_forget(struct server *srv, uint64_t client)
{
  struct client_level *cl = client_level(srv, client);
  if (cl)
    *cl = srv->client_levels[--srv->n_client_levels];
}

void mcp_log(struct server *srv, int level, const char *msg)
{
  if (level < mcp_log_level(srv))
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/message");
  json_obj_begin(w);
  json_kv_str(w, "level", mcp_log_levels[level]);
  json_kv_str(w, "logger", "sandboxd");
  json_kv_str(w, "data", msg);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

void send_empty_result(struct server *srv, const char *id)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  mcp_result_fields(srv->protocol, w, -1);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* A tool result of one text block, and no structuredContent. */
static json_writer_t *text_result_writer(const struct server *srv, const char *id, bool is_error,
                                         const char *text)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return NULL;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "content");
  json_arr_begin(w);
  json_obj_begin(w);
  json_kv_str(w, "type", "text");
  json_kv_str(w, "text", text);
  json_obj_end(w);
  json_arr_end(w);
  json_kv_bool(w, "isError", is_error);
  mcp_result_fields(srv->protocol, w, -1);
  json_obj_end(w);
  jsonrpc_end(w);
  return w;
}

void send_text_result(struct server *srv, const char *id, bool is_error, const char *text)
{
  json_writer_t *w = text_result_writer(srv, id, is_error, text);
  if (w)
    send_writer(srv, w);
}

/* A tool result that is only an error message (bad arguments, setup failure): isError, text only.
 * No structuredContent: clients validate it against outputSchema, and there is no run to describe. */
static json_writer_t *tool_error_writerv(const struct server *srv, const char *id, const char *fmt,
                                         va_list ap) __attribute__((format(printf, 3, 0)));
static json_writer_t *tool_error_writerv(const struct server *srv, const char *id, const char *fmt,
                                         va_list ap)
{
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return text_result_writer(srv, id, true, msg);
}

json_writer_t *tool_error_writer(const struct server *srv, const char *id, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  json_writer_t *w = tool_error_writerv(srv, id, fmt, ap);
  va_end(ap);
  return w;
}

void send_tool_error(struct server *srv, const char *id, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  json_writer_t *w = tool_error_writerv(srv, id, fmt, ap);
  va_end(ap);
  if (w)
    send_writer(srv, w);
}

/* Revision 2026-07-28's fields of every result (mcp_modern.c; basic/index, "Per-response protocol
 * fields"; server/utilities/caching). */
void mcp_result_fields(const char *protocol, json_writer_t *w, int64_t ttl_ms)
{
  mcp_result_fields_typed(protocol, w, ttl_ms, "complete");
}

void mcp_result_fields_typed(const char *protocol, json_writer_t *w, int64_t ttl_ms, const char *result_type)
{
  if (!mcp_is_modern(protocol))
    return;
  json_kv_str(w, "resultType", result_type);
  if (ttl_ms >= 0) { /* server/utilities/caching: the same for every caller here */
    json_kv_int(w, "ttlMs", ttl_ms);
    json_kv_str(w, "cacheScope", "public");
  }
  json_key(w, "_meta");
  json_obj_begin(w);
  json_key(w, "io.modelcontextprotocol/serverInfo");
  json_obj_begin(w);
  json_kv_str(w, "name", "sandboxd");
  json_kv_str(w, "version", SANDBOXD_VERSION);
  json_obj_end(w);
  json_obj_end(w);
}
