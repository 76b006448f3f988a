/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`'s resources: resources/list, resources/templates/list and resources/read of its
 * one resource, sandboxd://capabilities (the policy, limits, concurrency, languages, sessions,
 * tasks, host servers and binds a call runs with: enough for a model or a user to plan within
 * them). Resource not found is -32002 up to 2025-11-25 and -32602 with data.uri from 2026-07-28. */
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/version.h"
#include "mcp/fork_pool.h"
#include "mcp/mcp_binds.h"
#include "mcp/mcp_internal.h"
#include "policy/policy.h"

static void write_limits(json_writer_t *w, const struct sbx_limits *l)
{
  json_obj_begin(w);
  json_kv_uint(w, "timeout_ms", l->timeout_ms);
  json_kv_uint(w, "memory_bytes", l->memory_bytes);
  json_kv_uint(w, "pids", l->pids);
  json_kv_double(w, "cpus", (double) l->cpus_milli / 1000.0);
  json_kv_uint(w, "tmp_bytes", l->tmp_bytes);
  json_kv_uint(w, "workspace_bytes", l->workspace_bytes);
  json_kv_uint(w, "shm_bytes", l->shm_bytes);
  json_kv_uint(w, "nofile", l->nofile);
  json_kv_uint(w, "fsize_bytes", l->fsize_bytes);
  json_kv_uint(w, "output_bytes", l->output_bytes);
  json_obj_end(w);
}

/* What the capabilities resource says: enough for a model or a user to plan within the limits. */
static void write_capabilities(struct server *srv, json_writer_t *w)
{
  const struct sbx_policy *p = srv->policy;
  json_obj_begin(w);
  json_key(w, "server");
  json_obj_begin(w);
  json_kv_str(w, "name", "sandboxd");
  json_kv_str(w, "version", SANDBOXD_VERSION);
  json_obj_end(w);
  json_kv_str(w, "python", PYTHON);
  json_kv_str(w, "rootfs", srv->rootfs);
  /* execute_code's languages: each one's interpreter and rootfs, and whether it is kept warm. */
  json_key(w, "languages");
  json_obj_begin(w);
  for (int l = 0; l < MCP_LANG_COUNT; l++) {
    if (!srv->lang_rootfs[l])
      continue;
    json_key(w, mcp_lang_name((enum mcp_lang) l));
    json_obj_begin(w);
    json_kv_str(w, "program", l == MCP_LANG_PYTHON ? PYTHON : mcp_lang_argv((enum mcp_lang) l)[0]);
    json_kv_str(w, "rootfs", srv->lang_rootfs[l]);
    json_kv_bool(w, "warm", (srv->warm_langs & MCP_LANG_BIT(l)) && srv->warm_target);
    json_obj_end(w);
  }
  json_obj_end(w);
  json_key(w, "policy");
  json_obj_begin(w);
  json_kv_str(w, "name", p->name ? p->name : "");
  json_kv_str(w, "description", p->description ? p->description : "");
  json_kv_str(w, "sha256", p->sha256);
  json_kv_bool(w, "readonly_root", p->readonly_root);
  json_kv_bool(w, "no_new_privs", p->no_new_privs);
  json_kv_bool(w, "drop_capabilities", p->drop_capabilities);
  json_kv_uint(w, "uid", p->uid);
  json_kv_uint(w, "syscall_rules", p->n_rules);
  /* Host tool calls that wait for the user (the policy's, or --approve's higher). */
  json_kv_str(w, "approve_host_calls", policy_approve_name(srv->approve));
  json_obj_end(w);
  json_kv_str(w, "network", "loopback only");
  json_kv_str(w, "persistence",
              srv->max_sessions
                  ? "none without a session: every call runs in a fresh sandbox with an empty "
                    "/workspace and /tmp; a session (session_start) keeps its state until it ends"
                  : "none: every call runs in a fresh sandbox with an empty /workspace and /tmp");
  /* Sessions' bounds (mcp_sessions.c), and how many are alive. */
  json_key(w, "sessions");
  json_obj_begin(w);
  json_kv_uint(w, "max_sessions", srv->max_sessions);
  json_kv_uint(w, "max_sessions_per_token", srv->max_sessions_per_token);
  json_kv_uint(w, "idle_ttl_s", srv->session_idle_s);
  json_kv_uint(w, "max_life_s", srv->session_max_life_s);
  json_kv_uint(w, "live", srv->n_sessions);
  json_obj_end(w);
  json_key(w, "limits");
  write_limits(w, &p->limits);
  /* Files out (mcp_files.c): where to write them, how many come back, and where they are saved. */
  json_key(w, "files");
  json_obj_begin(w);
  json_kv_str(w, "dir", "/workspace/out");
  json_kv_uint(w, "max_artifacts", p->limits.artifacts);
  json_kv_uint(w, "artifact_limit_bytes", p->limits.artifact_bytes);
  json_kv_str_or_null(w, "output_dir", srv->output_dir);
  json_obj_end(w);
  json_key(w, "max_limits");
  write_limits(w, &p->max);
  json_key(w, "concurrency");
  json_obj_begin(w);
  json_kv_uint(w, "max_concurrent", srv->max_concurrent);
  json_kv_uint(w, "max_queue", srv->max_queue);
  /* Calls as tasks (sandboxd-mcp(7), TASKS): how many a client holds, and the longest ttl. */
  json_kv_uint(w, "max_tasks", p->max_tasks);
  json_kv_uint(w, "task_ttl_max_ms", TASK_TTL_MAX_MS);
  /* The code has no limit of its own: the request that carries it does (mcp_job.c). */
  json_kv_uint(w, "max_code_bytes", srv->max_message);
  json_kv_uint(w, "max_message_bytes", srv->max_message);
  /* Sandboxes built ahead of the calls (--warm); each still serves exactly one call. */
  json_kv_uint(w, "warm_pool", srv->warm_target);
  /* --warm-mode: fork, where Python calls fork from a template instead of the pool. */
  json_kv_str(w, "warm_mode", srv->warm_fork ? "fork" : "prestart");
  if (srv->warm_fork) {
    /* What its template imported before any call (--preload), and its size, which each call's
     * fork starts from (a call's cgroup is charged for the pages it touches). */
    json_kv_str(w, "preload", srv->preload ? srv->preload : "");
    json_kv_uint(w, "fork_template_bytes", fork_pool_template_bytes(srv));
  }
  json_obj_end(w);
  json_key(w, "servers");
  json_arr_begin(w);
  for (size_t i = 0; i < srv->hs.cfg->n; i++) {
    json_obj_begin(w);
    json_kv_str(w, "name", srv->hs.cfg->servers[i].name);
    json_kv_str(w, "description", srv->hs.cfg->servers[i].description);
    json_obj_end(w);
  }
  json_arr_end(w);
  mcp_binds_write_capabilities(srv, w);
  json_obj_end(w);
}

void m_resources_list(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "resources");
  json_arr_begin(w);
  json_obj_begin(w);
  json_kv_str(w, "uri", CAPABILITIES_URI);
  json_kv_str(w, "name", "capabilities");
  json_kv_str(w, "title", "Sandbox capabilities and limits");
  json_kv_str(w, "description", "The policy, limits and concurrency run_python enforces.");
  json_kv_str(w, "mimeType", "application/json");
  json_obj_end(w);
  json_arr_end(w);
  mcp_result_fields(srv->protocol, w, LIST_TTL_MS);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

void m_resources_templates_list(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "resourceTemplates");
  json_arr_begin(w);
  json_arr_end(w);
  mcp_result_fields(srv->protocol, w, LIST_TTL_MS);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* Resource not found: -32002 up to 2025-11-25; -32602 with data.uri from 2026-07-28 (SEP-2164;
 * server/resources, "Error Handling"). */
static void resource_not_found(struct server *srv, const char *id, const char *uri)
{
  char msg[300];
  bufprintf_cut(msg, sizeof msg, "Resource not found: %.200s", uri);
  if (!srv->req.modern) {
    send_error(srv, id, -32002, msg);
    return;
  }
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_write_error_data(w, id, JSONRPC_INVALID_PARAMS, msg);
  json_obj_begin(w);
  json_kv_str(w, "uri", uri);
  json_obj_end(w);
  jsonrpc_end_error_data(w);
  send_writer(srv, w);
}

void m_resources_read(struct server *srv, const char *id, const json_node_t *params)
{
  const char *uri = json_as_string(json_get(params, "uri"), NULL);
  if (!uri) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Invalid params: `uri` must be a string");
    return;
  }
  if (strcmp(uri, CAPABILITIES_URI) != 0) {
    resource_not_found(srv, id, uri);
    return;
  }
  json_writer_t *doc = json_writer_new();
  json_writer_t *w = json_writer_new();
  size_t n = 0;
  const char *text = NULL;
  if (doc) {
    write_capabilities(srv, doc);
    text = json_writer_buf(doc, &n);
  }
  if (!w || !text) {
    json_writer_free(doc);
    json_writer_free(w);
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "contents");
  json_arr_begin(w);
  json_obj_begin(w);
  json_kv_str(w, "uri", CAPABILITIES_URI);
  json_kv_str(w, "mimeType", "application/json");
  json_kv_strn(w, "text", text, n);
  json_obj_end(w);
  json_arr_end(w);
  mcp_result_fields(srv->protocol, w, 0); /* its counts change as calls run: fetch it anew */
  json_obj_end(w);
  jsonrpc_end(w);
  json_writer_free(doc);
  send_writer(srv, w);
}
