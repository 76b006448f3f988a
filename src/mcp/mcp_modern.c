/* SPDX-License-Identifier: Apache-2.0 */
/* Revision 2026-07-28 beside the initialize-based ones (2025-11-25 and older): which era a request
 * is of, its per-request `_meta` checked, the HTTP headers that mirror its body checked, and the
 * fields every modern result carries.
 *
 * The spec's words (https://modelcontextprotocol.io/specification/2026-07-28):
 * - basic/index, "Per-request protocol fields": a modern request carries
 *   `io.modelcontextprotocol/protocolVersion` and `.../clientCapabilities` in `_meta`; missing
 *   either is -32602 (HTTP 400). `.../clientInfo` is optional; `.../logLevel` sets the level of
 *   this request alone.
 * - basic/versioning, "Backward Compatibility": a dual-era server serves a request carrying modern
 *   `_meta` statelessly, and an `initialize` selects legacy semantics for the stdio process or the
 *   HTTP session. A version we do not implement is UnsupportedProtocolVersionError (-32022) with
 *   `data.supported` and `data.requested`.
 * - transports/streamable-http, "Request Metadata" and "Server Validation": MCP-Protocol-Version,
 *   Mcp-Method and (tools/call, resources/read, prompts/get) Mcp-Name are required on a modern
 *   POST and must equal the body's values (Mcp-Name and Mcp-Param-* may be Base64 in the
 *   `=?base64?...?=` sentinel, decoded before comparing); any failure is HeaderMismatch (-32020),
 *   HTTP 400. An unknown method is -32601 with HTTP 404. */
#include <string.h>
#include <strings.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/util.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_server.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_LEVEL "io.modelcontextprotocol/logLevel"

/* Every version served, the modern one first: server/discover's supportedVersions and the
 * -32022 error's data.supported. */
const char *const mcp_all_versions[] = {MCP_MODERN_VERSION, "2025-11-25", "2025-06-18",
                                        "2025-03-26",       "2024-11-05", NULL};

static bool legacy_version(const char *v)
{
  for (size_t i = 1; v && mcp_all_versions[i]; i++)
    if (strcmp(v, mcp_all_versions[i]) == 0)
      return true;
  return false;
}

bool mcp_request_is_modern(const struct jsonrpc_message *m, const char *header_version)
{
  if (m->kind != JSONRPC_REQUEST)
    return false;
  if (mcp_is_modern(header_version) || strcmp(m->method, "server/discover") == 0)
    return true;
  /* No header (stdio, or an HTTP client that left it out): the body's _meta says. A legacy
   * version there is a legacy request that happens to carry the key. */
  const json_node_t *v = json_get(json_get(m->params, "_meta"), META_VERSION);
  return v && !legacy_version(json_as_string(v, NULL));
}

/* An error the HTTP transport answers with status (400, 404) instead of 200. */
static void refuse(struct server *srv, const char *id, unsigned status, int code, const char *msg)
{
  if (srv->http)
    mcp_http_status(srv->http, srv->route, status);
  send_error(srv, id, code, msg);
}

static void refuse_version(struct server *srv, const char *id, const char *requested)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_write_error_data(w, id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version");
  json_obj_begin(w);
  json_key(w, "supported");
  json_arr_begin(w);
  for (size_t i = 0; mcp_all_versions[i]; i++)
    json_str(w, mcp_all_versions[i]);
  json_arr_end(w);
  json_kv_str_or_null(w, "requested", requested);
  json_obj_end(w);
  jsonrpc_end_error_data(w);
  if (srv->http)
    mcp_http_status(srv->http, srv->route, 400);
  send_writer(srv, w);
}

/* ------------------------------------------------------------------ HTTP headers */

/* "=?base64?...?=" decoded (NUL-terminated, malloc'd), a plain value copied; NULL if the value
 * has characters a header may not carry or its Base64 is bad. */
static char *header_value(const char *v)
{
  for (const unsigned char *p = (const unsigned char *) v; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p >= 0x7f)
      return NULL;
  size_t n = strlen(v);
  if (n >= 11 && strncmp(v, "=?base64?", 9) == 0 && strcmp(v + n - 2, "?=") == 0) {
    size_t len;
    if ((n - 11) % 4) /* padded, as RFC 4648 writes it (the suite's SEP-2243 cases) */
      return NULL;
    char *d = base64_decode(v + 9, n - 11, &len);
    if (d && memchr(d, '\0', len)) { /* a name or value with a NUL compares with nothing */
      free(d);
      return NULL;
    }
    return d;
  }
  /* RFC 9110: optional whitespace around a field value is not part of it. */
  while (*v == ' ' || *v == '\t')
    v++;
  n = strlen(v);
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
    n--;
  return strndup(v, n);
}

/* Whether the header `name` carries body value want (a string, or an integer's decimal). */
static bool header_matches(const struct server *srv, const char *name, const char *want, char *why,
                           size_t size)
{
  const char *raw = srv->req_header(srv->req_ctx, name);
  if (!raw) {
    bufprintf_cut(why, size, "Header mismatch: the %s header is required", name);
    return false;
  }
  _cleanup_free_ char *v = header_value(raw);
  if (!v) {
    bufprintf_cut(why, size, "Header mismatch: the %s header has characters it may not carry", name);
    return false;
  }
  if (strcmp(v, want) != 0) {
    bufprintf_cut(why, size, "Header mismatch: %s header value '%.100s' does not match body value '%.100s'",
                  name, v, want);
    return false;
  }
  return true;
}

/* The tool parameters mirrored into Mcp-Param-* (x-mcp-header, mcp_tool.c): present in the body,
 * the header must carry the same; absent (or null), the header must be absent too, or a load
 * balancer could route on a value the server never sees. */
static bool params_match(const struct server *srv, const json_node_t *params, char *why, size_t size)
{
  const char *tool = json_as_string(json_get(params, "name"), NULL);
  const json_node_t *args = json_get(params, "arguments");
  for (const struct mcp_header_param *hp = mcp_tool_header_params; tool && hp->tool; hp++) {
    if (strcmp(hp->tool, tool) != 0)
      continue;
    char name[80], num[32];
    bufprintf_cut(name, sizeof name, "Mcp-Param-%s", hp->header);
    const json_node_t *v = json_get(args, hp->param);
    const char *want = NULL;
    if (json_type(v) == JSON_STRING)
      want = json_as_string(v, NULL);
    long long iv;
    bool bv;
    if (json_type(v) == JSON_INTEGER && json_as_int(v, &iv) == 0) {
      bufprintf_cut(num, sizeof num, "%lld", iv);
      want = num;
    } else if (json_type(v) == JSON_BOOL && json_as_bool(v, &bv) == 0)
      want = bv ? "true" : "false";
    if (!want && srv->req_header(srv->req_ctx, name)) {
      bufprintf_cut(why, size, "Header mismatch: %s is sent but the body has no `%s`", name, hp->param);
      return false;
    }
    if (want && !header_matches(srv, name, want, why, size))
      return false;
  }
  return true;
}

/* transports/streamable-http, "Server Validation". */
static bool headers_match(const struct server *srv, const struct jsonrpc_message *m, const char *version,
                          char *why, size_t size)
{
  if (!header_matches(srv, "MCP-Protocol-Version", version, why, size) ||
      !header_matches(srv, "Mcp-Method", m->method, why, size))
    return false;
  const char *name = NULL;
  if (strcmp(m->method, "tools/call") == 0 || strcmp(m->method, "prompts/get") == 0)
    name = json_as_string(json_get(m->params, "name"), NULL);
  else if (strcmp(m->method, "resources/read") == 0)
    name = json_as_string(json_get(m->params, "uri"), NULL);
  /* SEP-2663, "Streamable HTTP: Routing Headers": Mcp-Name is the task's id. */
  else if (strcmp(m->method, "tasks/get") == 0 || strcmp(m->method, "tasks/update") == 0 ||
           strcmp(m->method, "tasks/cancel") == 0)
    name = json_as_string(json_get(m->params, "taskId"), NULL);
  if (name && !header_matches(srv, "Mcp-Name", name, why, size))
    return false;
  return strcmp(m->method, "tools/call") != 0 || params_match(srv, m->params, why, size);
}

/* ------------------------------------------------------------------ requests */

int mcp_modern_request(struct server *srv, const struct jsonrpc_message *m, struct mcp_modern_req *req)
{
  *req = (struct mcp_modern_req){.log_level = -1};
  const char *header = srv->req_header ? srv->req_header(srv->req_ctx, "MCP-Protocol-Version") : NULL;
  if (!mcp_request_is_modern(m, header))
    return 0;
  const json_node_t *meta = json_get(m->params, "_meta");
  const char *version = json_as_string(json_get(meta, META_VERSION), NULL);
  const json_node_t *caps = json_get(meta, META_CAPS);
  if (!version || json_type(caps) != JSON_OBJECT) {
    refuse(srv, m->id, 400, JSONRPC_INVALID_PARAMS,
           json_type(meta) != JSON_OBJECT ? "Invalid params: a " MCP_MODERN_VERSION
                                            " request carries `_meta` (protocolVersion, "
                                            "clientCapabilities)"
           : !version ? "Invalid params: `_meta` lacks " META_VERSION
                      : "Invalid params: `_meta` lacks " META_CAPS " (an object)");
    return -1;
  }
  /* The header is checked against the body first: a version both name but we lack is -32022,
   * a disagreement between them -32020 (the conformance suite's sep-2575 cases 301 and 302). */
  char why[300];
  if (srv->req_header && header && strcmp(header, version) != 0) {
    bufprintf_cut(why, sizeof why,
                  "Header mismatch: MCP-Protocol-Version header value '%.60s' does not match body value "
                  "'%.60s'",
                  header, version);
    refuse(srv, m->id, 400, MCP_HEADER_MISMATCH, why);
    return -1;
  }
  if (!mcp_is_modern(version)) {
    refuse_version(srv, m->id, version);
    return -1;
  }
  if (srv->req_header && !headers_match(srv, m, version, why, sizeof why)) {
    refuse(srv, m->id, 400, MCP_HEADER_MISMATCH, why);
    return -1;
  }
  const char *level = json_as_string(json_get(meta, META_LEVEL), NULL);
  req->log_level = MCP_LOG_LEVELS; /* none asked: no notifications/message at all */
  for (int i = 0; level && i < MCP_LOG_LEVELS; i++)
    if (strcmp(level, mcp_log_levels[i]) == 0)
      req->log_level = i;
  req->caps = caps;
  req->modern = true;
  return 1;
}

bool mcp_version_refused(struct server *srv, const struct jsonrpc_message *m)
{
  const char *header = srv->req_header ? srv->req_header(srv->req_ctx, "MCP-Protocol-Version") : NULL;
  for (size_t i = 0; header && mcp_all_versions[i]; i++)
    if (strcmp(header, mcp_all_versions[i]) == 0)
      return false;
  if (!header)
    return false;
  refuse_version(srv, m->id, header);
  return true;
}

void mcp_missing_extension(struct server *srv, const char *id, const char *extension)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_write_error_data(w, id, MCP_MISSING_CAPABILITY, "Missing required client capability");
  json_obj_begin(w);
  json_key(w, "requiredCapabilities");
  json_obj_begin(w);
  json_key(w, "extensions");
  json_obj_begin(w);
  json_key(w, extension);
  json_obj_begin(w);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
  json_obj_end(w);
  jsonrpc_end_error_data(w);
  if (srv->http)
    mcp_http_status(srv->http, srv->route, 400);
  send_writer(srv, w);
}

void mcp_method_not_found(struct server *srv, const char *id, const char *method)
{
  char msg[300];
  bufprintf_cut(msg, sizeof msg, "Method not found: %.200s", method);
  refuse(srv, id, 404, JSONRPC_METHOD_NOT_FOUND, msg);
}
