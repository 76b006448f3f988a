/* SPDX-License-Identifier: Apache-2.0 */
/* The server's own requests to the client (roots/list: mcp_server.c; elicitation/create for
 * approvals: mcp_approval.c): their slots and ids, "sandboxd-N". At most MAX_REQUESTS are in
 * flight; a roots/list not answered within REQUEST_TIMEOUT_NS is forgotten (an approval has its
 * own deadline). Answers are routed by id in mcp_server.c. */
#include <stdint.h>

#include "base/log.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"

void requests_expire(struct server *srv, uint64_t now)
{
  for (size_t i = 0; i < MAX_REQUESTS; i++)
    if (srv->requests[i].kind == REQUEST_ROOTS_LIST && now - srv->requests[i].sent_ns >= REQUEST_TIMEOUT_NS) {
      log_warn("the client did not answer %s within %llus", srv->requests[i].method,
               (unsigned long long) (REQUEST_TIMEOUT_NS / 1000000000ULL));
      srv->roots.asking = false;
      srv->requests[i].kind = REQUEST_NONE;
    }
}

struct request *request_new(struct server *srv, enum request_kind kind, const char *method, char *id,
                            size_t id_size)
{
  uint64_t now = now_ns();
  requests_expire(srv, now);
  struct request *r = NULL;
  for (size_t i = 0; i < MAX_REQUESTS && !r; i++)
    if (srv->requests[i].kind == REQUEST_NONE)
      r = &srv->requests[i];
  if (!r)
    return NULL;
  bufprintf_cut(id, id_size, "sandboxd-%llu", (unsigned long long) ++srv->next_request_id);
  *r = (struct request){.kind = kind, .method = method, .sent_ns = now, .client = srv->client};
  bufprintf_cut(r->id, sizeof r->id, "\"%s\"", id); /* canonical, as jsonrpc_parse gives it */
  return r;
}
