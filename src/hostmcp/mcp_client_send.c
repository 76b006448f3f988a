/* SPDX-License-Identifier: Apache-2.0 */
/* What sandboxd writes to a host MCP server: each message's JSON (mcp_client_internal.h); the
 * queue to its stdin is mcp_client.c's. */
#include <string.h>

#include "base/version.h"
#include "hostmcp/mcp_client_internal.h"

#define PROTOCOL_VERSION "2025-06-18"

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

json_writer_t *mcp_client_msg_initialize(struct mcp_hosts *h, struct client *c)
{
  c->init_rpc = ++h->next_rpc;
  json_writer_t *w = begin_request(c->init_rpc, "initialize");
  if (!w)
    return NULL;
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
  return w;
}

json_writer_t *mcp_client_msg_list_page(struct mcp_hosts *h, struct client *c, const char *cursor)
{
  c->list_rpc = ++h->next_rpc;
  json_writer_t *w = begin_request(c->list_rpc, "tools/list");
  if (!w)
    return NULL;
  json_obj_begin(w);
  if (cursor)
    json_kv_str(w, "cursor", cursor);
  json_obj_end(w);
  json_obj_end(w);
  return w;
}

json_writer_t *mcp_client_msg_call_head(struct mcp_hosts *h, struct op *o)
{
  o->rpc_id = ++h->next_rpc;
  o->state = OP_SENT;
  json_writer_t *w = begin_request(o->rpc_id, "tools/call");
  if (!w)
    return NULL;
  json_obj_begin(w);
  json_kv_str(w, "name", o->tool);
  if (o->cb.progress) {
    /* Our request id doubles as the progress token: unique among our requests. */
    json_key(w, "_meta");
    json_obj_begin(w);
    json_kv_int(w, "progressToken", o->rpc_id);
    json_obj_end(w);
  }
  return w; /* open: the caller adds ,"arguments":ARGS}} */
}

json_writer_t *mcp_client_msg_cancelled(long long rpc, const char *reason)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return NULL;
  jsonrpc_begin_notification(w, "notifications/cancelled");
  json_obj_begin(w);
  json_kv_int(w, "requestId", rpc);
  json_kv_str(w, "reason", reason);
  json_obj_end(w);
  jsonrpc_end(w);
  return w;
}
