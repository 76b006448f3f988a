/* SPDX-License-Identifier: Apache-2.0 */
/* A tools/call made a task (sandboxd-mcp(7), TASKS): whether it asks for one and how the request
 * is answered with it, as its revision says: 2025-11-25's `task` (mcp_tasks_legacy.c) or the
 * 2026-07-28 extension (mcp_tasks_ext.c), over the store (mcp_tasks.c), which calls neither. */
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_tasks.h"

int tasks_for_call(struct server *srv, const char *id, const json_node_t *params, bool runs,
                   struct task **ret)
{
  *ret = NULL;
  int code;
  char msg[512];
  /* 2025-11-25: the client asks, with `task` (ignored by an earlier revision, "Task Support and
   * Handling"). An asked task the server cannot make is an error: the client waits for one. */
  const json_node_t *task = tasks_negotiated(srv) ? json_get(params, "task") : NULL;
  if (task && tasks_legacy_create(srv, task, &code, msg, sizeof msg, ret) < 0) {
    send_error(srv, id, code, msg);
    return -1;
  }
  /* 2026-07-28, SEP-2663 "Capability Negotiation": the server alone decides, for a client that
   * declared the extension on this request (`task` is no opt-in there), for a call that runs
   * (one refused is answered at once). A client at its max_tasks gets the call answered as
   * ever: a valid answer too. */
  if (!task && runs && tasks_ext_declared(srv))
    tasks_create(srv, TASK_TTL_DEFAULT_MS, &code, msg, sizeof msg, ret);
  return 0;
}

void tasks_created(struct server *srv, struct task *t, struct call *c, const char *id)
{
  t->ext = mcp_is_modern(srv->protocol);
  if (t->ext)
    tasks_ext_created(srv, t, id);
  else
    tasks_legacy_created(srv, t, id);
  if (!c)
    return;
  c->task = t;
  t->call = c;
  memcpy(c->task_id, t->id, sizeof c->task_id);
  /* The request is answered: what the call sends from now (progress) goes to no exchange of it. */
  c->route = 0;
}
