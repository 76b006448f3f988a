/* What sandboxd writes to a host MCP server: the queue to its stdin and each request's JSON
 * (mcp_client_internal.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "mcp_client_internal.h"
#include "version.h"

#define PROTOCOL_VERSION "2025-06-18"

void mcp_client_flush(struct mcp_hosts *h, struct client *c)
{
  while (c->in_fd >= 0 && c->outq_off < c->outq.len) {
    ssize_t n = write(c->in_fd, c->outq.data + c->outq_off, c->outq.len - c->outq_off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n < 0) {
      mcp_client_down(h, c, "closed its stdin");
      return;
    }
    c->outq_off += (size_t) n;
  }
  c->outq.len = c->outq_off = 0;
  /* A burst of large requests (bounded by the proxy's budget) does not keep its room. */
  if (c->outq.cap > (1u << 20))
    strbuf_free(&c->outq);
}

/* Queue one message (the writer is freed). Fails when the server is not reading. */
int mcp_client_send_msg(struct mcp_hosts *h, struct client *c, json_writer_t *w)
{
  size_t n;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  int r = -1;
  if (buf && c->outq.len - c->outq_off + n <= MCP_CLIENT_MAX_OUTQ && strbuf_append(&c->outq, buf, n) == 0 &&
      strbuf_append(&c->outq, "\n", 1) == 0)
    r = 0;
  json_writer_free(w);
  if (r == 0)
    mcp_client_flush(h, c);
  return r;
}

static json_writer_t *begin_request(long long id, const char *method)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return NULL;
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_kv_int(w, "id", id);
  json_kv_str(w, "method", method);
  json_key(w, "params");
  return w;
}

int mcp_client_send_initialize(struct mcp_hosts *h, struct client *c)
{
  c->init_rpc = ++h->next_rpc;
  json_writer_t *w = begin_request(c->init_rpc, "initialize");
  if (!w)
    return -1;
  json_obj_begin(w);
  json_kv_str(w, "protocolVersion", PROTOCOL_VERSION);
  json_key(w, "capabilities");
  json_obj_begin(w);
  json_obj_end(w);
  json_key(w, "clientInfo");
  json_obj_begin(w);
  json_kv_str(w, "name", "sandboxd");
  json_kv_str(w, "version", SANDBOXD_VERSION);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
  return mcp_client_send_msg(h, c, w);
}

int mcp_client_send_list_page(struct mcp_hosts *h, struct client *c, const char *cursor)
{
  c->list_rpc = ++h->next_rpc;
  json_writer_t *w = begin_request(c->list_rpc, "tools/list");
  if (!w)
    return -1;
  json_obj_begin(w);
  if (cursor)
    json_kv_str(w, "cursor", cursor);
  json_obj_end(w);
  json_obj_end(w);
  return mcp_client_send_msg(h, c, w);
}

int mcp_client_send_call(struct mcp_hosts *h, struct client *c, struct op *o)
{
  o->rpc_id = ++h->next_rpc;
  json_writer_t *w = begin_request(o->rpc_id, "tools/call");
  if (!w)
    return -1;
  json_obj_begin(w);
  json_kv_str(w, "name", o->tool);
  json_key(w, "arguments");
  if (o->args)
    json_raw(w, o->args, strlen(o->args));
  else {
    json_obj_begin(w);
    json_obj_end(w);
  }
  if (o->cb.progress) {
    /* Our request id doubles as the progress token: unique among our requests. */
    json_key(w, "_meta");
    json_obj_begin(w);
    json_kv_int(w, "progressToken", o->rpc_id);
    json_obj_end(w);
  }
  json_obj_end(w);
  json_obj_end(w);
  o->state = OP_SENT;
  return mcp_client_send_msg(h, c, w);
}

void mcp_client_send_cancelled(struct mcp_hosts *h, struct client *c, long long rpc, const char *reason)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/cancelled");
  json_obj_begin(w);
  json_kv_int(w, "requestId", rpc);
  json_kv_str(w, "reason", reason);
  json_obj_end(w);
  jsonrpc_end(w);
  mcp_client_send_msg(h, c, w);
}
