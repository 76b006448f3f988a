/* run_python's tool definition (tools/list): its description, input and output schemas and
 * annotations. Pure: it writes JSON and makes no system calls. */
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "mcp_config.h"
#include "mcp_internal.h"
#include "policy.h"
#include "sandbox.h"
#include "util.h"

static const char tool_description[] =
    "Run Python 3 code in a fresh, disposable Linux sandbox and get back its stdout, stderr and exit "
    "status. Every call starts clean: files, variables and processes never carry over, so send "
    "complete programs. No host files; the network is loopback-only; time, memory, processes and "
    "output are limited (read resource " CAPABILITIES_URI " for the limits). Use print() for results; "
    "tracebacks go to stderr. Top-level `await` works. To use tools of host MCP servers, list them in "
    "`servers`; the code then calls them with `await mcp_<server>.<tool>(arg=...)` (helpers in "
    "`from mcp import runtime`).";

static void schema_prop(json_writer_t *w, const char *name, const char *type, const char *description)
{
  json_key(w, name);
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, type);
  if (description) {
    json_key(w, "description");
    json_str(w, description);
  }
  json_obj_end(w);
}

/* Append " a, b" to the string in buf, or " a, ..." where the rest does not fit. */
static void append_names(char *buf, size_t len, const struct mcp_config *cfg)
{
  if (strlen(buf) + 5 > len) /* no room even for " ..." */
    return;
  for (size_t i = 0; i < cfg->n; i++)
    if (bufcatf(buf, len - 4, NULL, "%s %s", i ? "," : "", cfg->servers[i].name) < 0) {
      strcat(buf, " ..."); /* fits: buf stays within len - 4 */
      return;
    }
}

void write_tool(struct server *srv, json_writer_t *w)
{
  char desc[160];
  json_obj_begin(w);
  json_key(w, "name");
  json_str(w, TOOL_NAME);
  json_key(w, "title");
  json_str(w, "Run Python in a sandbox");
  json_key(w, "description");
  if (srv->mcp_cfg->n) {
    /* Name the servers, within a budget: the description is read on every turn. */
    char desc_servers[sizeof tool_description + 256];
    bufprintf_cut(desc_servers, sizeof desc_servers, "%s Servers:", tool_description);
    append_names(desc_servers, sizeof desc_servers - 1, srv->mcp_cfg); /* and room for the "." */
    strcat(desc_servers, ".");
    json_str(w, desc_servers);
  } else
    json_str(w, tool_description);

  json_key(w, "inputSchema");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "object");
  json_key(w, "properties");
  json_obj_begin(w);
  schema_prop(w, "code", "string", "Python 3 source to run as a script; top-level await is allowed.");
  json_key(w, "servers");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "array");
  json_key(w, "items");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "string");
  json_obj_end(w);
  json_key(w, "description");
  json_str(w, "Host MCP servers the code may call, by name.");
  json_obj_end(w);
  bufprintf_cut(desc, sizeof desc, "Wall-clock limit in seconds (default %llu, at most %llu).",
                (unsigned long long) (srv->policy->limits.timeout_ms / 1000),
                (unsigned long long) (srv->policy->max.timeout_ms / 1000));
  json_key(w, "timeout");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "integer");
  json_key(w, "minimum");
  json_int(w, 1);
  json_key(w, "description");
  json_str(w, desc);
  json_obj_end(w);
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "code");
  json_arr_end(w);
  json_obj_end(w);

  json_key(w, "outputSchema");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_key(w, "status");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "string");
  json_key(w, "enum");
  json_arr_begin(w);
  for (int s = SBX_STATUS_OK; s <= SBX_STATUS_MEMORY_LIMIT; s++)
    json_str(w, sbx_status_name((enum sbx_status) s));
  json_arr_end(w);
  json_obj_end(w);
  schema_prop(w, "exit_code", "integer",
              "the code's exit status; 128+N if killed by signal N; 124 on timeout");
  schema_prop(w, "stdout_bytes", "integer", "bytes of standard output captured (the text is in content)");
  schema_prop(w, "stderr_bytes", "integer", "bytes of standard error captured (in content, after --- stderr ---)");
  schema_prop(w, "replaced_bytes", "integer", "control or non-UTF-8 bytes shown as U+FFFD in content");
  schema_prop(w, "truncated", "boolean", "output went over the limit and was cut");
  schema_prop(w, "execution_time_ms", "integer", NULL);
  schema_prop(w, "memory_peak_bytes", "integer", NULL);
  schema_prop(w, "limits", "string", "how limits were enforced: cgroup2, cgroup1, or degraded (rlimits only)");
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  static const char *const required[] = {"status",       "exit_code", "stdout_bytes",      "stderr_bytes",
                                         "replaced_bytes", "truncated", "execution_time_ms", "memory_peak_bytes"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    json_str(w, required[i]);
  json_arr_end(w);
  json_obj_end(w);

  json_key(w, "annotations");
  json_obj_begin(w);
  json_key(w, "title");
  json_str(w, "Run Python in a sandbox");
  json_key(w, "readOnlyHint");
  json_bool(w, false);
  /* Nothing on the host changes: each sandbox is thrown away. */
  json_key(w, "destructiveHint");
  json_bool(w, false);
  json_key(w, "idempotentHint");
  json_bool(w, false);
  /* The sandbox reaches nothing outside itself (loopback-only network). */
  json_key(w, "openWorldHint");
  json_bool(w, false);
  json_obj_end(w);
  json_obj_end(w);
}

/* "configured servers: a, b" (or that there are none), for messages. */
void server_names(const struct server *srv, char *buf, size_t len)
{
  bufprintf_cut(buf, len, "%s", srv->mcp_cfg->n ? "configured servers:" : "no host MCP servers are configured for sandboxd (see sandboxd(1), --config)");
  append_names(buf, len, srv->mcp_cfg);
}
