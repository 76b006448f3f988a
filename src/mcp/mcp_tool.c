/* SPDX-License-Identifier: Apache-2.0 */
/* The tool definitions, run_python's and execute_code's (tools/list: their descriptions, input and
 * output schemas and annotations), and the checks of a call's arguments. Pure: JSON in and out, no system
 * calls. */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "hostmcp/mcp_config.h"
#include "mcp/mcp_binds.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_tool.h"
#include "policy/policy.h"
#include "run/binds.h"
#include "sandbox/sandbox.h"

static const char tool_description[] =
    "Run Python 3 code in a fresh, disposable Linux sandbox and get back its stdout, stderr and exit "
    "status. Every call starts clean: files, variables and processes never carry over, so send "
    "complete programs. The network is loopback-only; time, memory, processes and "
    "output are limited (read resource " CAPABILITIES_URI " for the limits). Use print() for results; "
    "files written to /workspace/out/ come back (images as images). "
    "tracebacks go to stderr. Top-level `await` works. To use tools of host MCP servers, list them in "
    "`servers`; the code then calls them with `await mcp_<server>.<tool>(arg=...)` (helpers in "
    "`from mcp import runtime`; its discovered_servers() and search_tool_docs() work without `servers`).";

static void schema_prop(json_writer_t *w, const char *name, const char *type, const char *description)
{
  json_key(w, name);
  json_obj_begin(w);
  json_kv_str(w, "type", type);
  if (description)
    json_kv_str(w, "description", description);
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

/* What run_python takes: code, servers, timeout (its default and ceiling from the policy). */

/* The `session_id` argument of both tools (sandboxd-mcp(7), SESSIONS). */
static void write_session_prop(json_writer_t *w)
{
  json_key(w, "session_id");
  json_obj_begin(w);
  json_kv_str(w, "type", "string");
  json_kv_str(w, "pattern", "^sbx_[A-Za-z0-9_-]+$");
  /* Under 2026-07-28 over HTTP, mirrored into Mcp-Param-Session: a load balancer routes a
   * session's calls on it (sandboxd-mcp(7), DEPLOYMENT). */
  json_kv_str(w, "x-mcp-header", MCP_SESSION_HEADER);
  json_kv_str(w, "description",
              "Run in this session (from session_start): its variables, imports and files stay across "
              "calls. Omit for a fresh sandbox.");
  json_obj_end(w);
}

/* The `timeout` argument of both tools: seconds, with the policy's default and ceiling. */
static void write_timeout_prop(json_writer_t *w, const struct sbx_policy *policy)
{
  char desc[160];
  bufprintf_cut(desc, sizeof desc, "Wall-clock limit in seconds (default %llu, at most %llu).",
                (unsigned long long) (policy->limits.timeout_ms / 1000),
                (unsigned long long) (policy->max.timeout_ms / 1000));
  json_key(w, "timeout");
  json_obj_begin(w);
  json_kv_str(w, "type", "integer");
  json_kv_int(w, "minimum", 1);
  json_kv_str(w, "description", desc);
  json_obj_end(w);
}

static void write_input_schema(json_writer_t *w, const struct sbx_policy *policy)
{
  json_key(w, "inputSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  schema_prop(w, "code", "string", "Python 3 source to run as a script; top-level await is allowed.");
  json_key(w, "servers");
  json_obj_begin(w);
  json_kv_str(w, "type", "array");
  json_key(w, "items");
  json_obj_begin(w);
  json_kv_str(w, "type", "string");
  json_obj_end(w);
  json_kv_str(w, "description", "Host MCP servers the code may call, by name.");
  json_obj_end(w);
  write_timeout_prop(w, policy);
  write_session_prop(w);
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "code");
  json_arr_end(w);
  json_obj_end(w);
}

/* structuredContent.files: what /workspace/out held (artifacts.h). */
static void write_files_schema(json_writer_t *w)
{
  json_key(w, "files");
  json_obj_begin(w);
  json_kv_str(w, "type", "array");
  json_kv_str(w, "description",
              "the files the code left in /workspace/out (regular files, recursively), each returned "
              "(images as image content, saved files as resource_link, small text embedded) or omitted");
  json_key(w, "items");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  schema_prop(w, "path", "string", "below /workspace/out");
  schema_prop(w, "size", "integer", "bytes");
  schema_prop(w, "mime_type", "string", "by content (images) or by name (text)");
  schema_prop(w, "sha256", "string", "of the bytes returned");
  schema_prop(w, "uri", "string", "file:// of the copy on the host (with --output-dir)");
  schema_prop(
      w, "omitted", "string",
      "why it was not returned: max_artifacts, artifact_limit, symlink, not a regular file, bad name...");
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "path");
  json_str(w, "size");
  json_arr_end(w);
  json_obj_end(w);
  json_obj_end(w);
}

/* What a result's structuredContent holds (send_call_result in mcp_calls.c). */
static void write_output_schema(json_writer_t *w)
{
  json_key(w, "outputSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  schema_prop(w, "success", "boolean", "the code ran and exited 0 (status ok)");
  json_key(w, "status");
  json_obj_begin(w);
  json_kv_str(w, "type", "string");
  json_key(w, "enum");
  json_arr_begin(w);
  for (int s = SBX_STATUS_OK; s <= SBX_STATUS_MEMORY_LIMIT; s++)
    json_str(w, sbx_status_name((enum sbx_status) s));
  json_arr_end(w);
  json_obj_end(w);
  schema_prop(w, "exit_code", "integer",
              "the code's exit status; 128+N if killed by signal N; 124 on timeout");
  schema_prop(w, "stdout", "string",
              "standard output as the text block shows it: valid UTF-8, its head and tail if it was long");
  schema_prop(w, "stderr", "string", "standard error, shaped the same way");
  schema_prop(w, "stdout_bytes", "integer", "bytes the code wrote to standard output, all of them");
  schema_prop(w, "stderr_bytes", "integer", "bytes the code wrote to standard error, all of them");
  schema_prop(w, "replaced_bytes", "integer", "control or non-UTF-8 bytes shown as U+FFFD");
  schema_prop(w, "cut_characters", "integer", "characters left out between head and tail (the text limit)");
  schema_prop(w, "truncated", "boolean", "output_limit: bytes between a stream's head and tail were dropped");
  schema_prop(w, "execution_time_ms", "integer", NULL);
  schema_prop(w, "memory_peak_bytes", "integer", NULL);
  schema_prop(w, "memory_used_mb", "number", "memory_peak_bytes in MiB");
  schema_prop(w, "limits", "string",
              "how limits were enforced: cgroup2, cgroup1, or degraded (rlimits only)");
  write_files_schema(w);
  schema_prop(w, "egress", "object",
              "with network proxy only: connections, allowed, refused, bytes_up, bytes_down, limits_hit "
              "(sandboxd.policy(5), Network)");
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  static const char *const required[] = {"status",
                                         "exit_code",
                                         "stdout",
                                         "stderr",
                                         "stdout_bytes",
                                         "stderr_bytes",
                                         "replaced_bytes",
                                         "cut_characters",
                                         "truncated",
                                         "execution_time_ms",
                                         "memory_peak_bytes",
                                         "success",
                                         "memory_used_mb"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    json_str(w, required[i]);
  json_arr_end(w);
  json_obj_end(w);
}

/* MCP's hints (2025-11-25, "ToolAnnotations"): read-only where a call cannot change anything
 * outside its sandbox, which is thrown away; destructive where the code may change or delete
 * what is there (a writable host directory; an allowed host or a host server's tool, which
 * sandboxd cannot vouch for), not where it only adds files (--output-dir); an open world where
 * it reaches hosts or host servers. */
static void write_annotations(json_writer_t *w, const char *title, const struct mcp_tool_facts *fx)
{
  static const struct mcp_tool_facts none;
  if (!fx)
    fx = &none;
  json_key(w, "annotations");
  json_obj_begin(w);
  json_kv_str(w, "title", title);
  json_kv_bool(w, "readOnlyHint", !fx->rw_binds && !fx->output_dir && !fx->egress && !fx->host_tools);
  json_kv_bool(w, "destructiveHint", fx->rw_binds || fx->egress || fx->host_tools);
  json_kv_bool(w, "idempotentHint", false);
  json_kv_bool(w, "openWorldHint", fx->egress || fx->host_tools);
  json_obj_end(w);
  if (fx->icons)
    mcp_icons_write(w);
  if (fx->tasks) { /* a task or not, as the client likes (2025-11-25 tasks, "Tool-Level Negotiation") */
    json_key(w, "execution");
    json_obj_begin(w);
    json_kv_str(w, "taskSupport", "optional");
    json_obj_end(w);
  }
}

/* 32x32, a prompt on a blue ground; the SVG draws the same. */
#define ICON_PNG                                                                                             \
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAYAAABzenr0AAAAc0lEQVR42u3WwQ1AIQgDUNdwUQd1Ib"     \
  "16MYChFiNN/pmXfDAtJZPZpLY+PD/aYBMEPVxEUAG3hm8RIQFr6ABvxBHAE6HeARTCtIQIxNEVeCLeAlB/AXUJ6WcoDdcG9hTDAd"     \
  "aruA54thPErWT0Uhqilme+ywQ2/XRTDyBj7wAAAABJRU5ErkJggg=="
#define ICON_SVG                                                                                             \
  "data:image/"                                                                                              \
  "svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAyNCAyNCI+"          \
  "PHJlY3QgeD0iMiIgeT0iMyIgd2lkdGg9IjIwIiBoZWlnaHQ9IjE4IiByeD0iMyIgZmlsbD0iIzE5NzZkMiIvPjxwYXRoIGQ9Ik02IDls" \
  "NCAzLTQgM00xMiAxNmg2IiBzdHJva2U9IiNmZmYiIHN0cm9rZS13aWR0aD0iMiIgZmlsbD0ibm9uZSIgc3Ryb2tlLWxpbmVjYXA9InJv" \
  "dW5kIiBzdHJva2UtbGluZWpvaW49InJvdW5kIi8+PC9zdmc+"

const struct mcp_header_param mcp_tool_header_params[] = {{TOOL_NAME, "session_id", MCP_SESSION_HEADER},
                                                          {EXEC_TOOL_NAME, "session_id", MCP_SESSION_HEADER},
                                                          {"session_end", "session_id", MCP_SESSION_HEADER},
                                                          {NULL, NULL, NULL}};

void mcp_icons_write(json_writer_t *w)
{
  static const struct {
    const char *src, *mime, *sizes;
  } icons[] = {{ICON_PNG, "image/png", "32x32"}, {ICON_SVG, "image/svg+xml", "any"}};
  json_key(w, "icons");
  json_arr_begin(w);
  for (size_t i = 0; i < ARRAY_SIZE(icons); i++) {
    json_obj_begin(w);
    json_kv_str(w, "src", icons[i].src);
    json_kv_str(w, "mimeType", icons[i].mime);
    json_key(w, "sizes");
    json_arr_begin(w);
    json_str(w, icons[i].sizes);
    json_arr_end(w);
    json_obj_end(w);
  }
  json_arr_end(w);
}

size_t mcp_tool_result_chars(size_t text_limit)
{
  return 2 * text_limit + MCP_TOOL_NOTES_CHARS;
}

static void write_meta(json_writer_t *w, size_t text_limit)
{
  json_key(w, "_meta");
  json_obj_begin(w);
  json_kv_uint(w, "anthropic/maxResultSizeChars", mcp_tool_result_chars(text_limit));
  json_obj_end(w);
}

/* " Host files, nothing else: /data: host directory, read-only; ...", or that there are none:
 * the model learns here, on every turn, what of the host it can reach, within len (a part that
 * does not fit, and all after it, become " ..."). */
static void append_host_files(char *buf, size_t len, const struct bind_opts *binds, bool roots)
{
  if (!binds->n && !roots) {
    bufprintf_cut(buf + strlen(buf), len - strlen(buf), " No host files.");
    return;
  }
  bufprintf_cut(buf + strlen(buf), len - strlen(buf), " Host files, nothing else:");
  for (size_t i = 0; i < binds->n + roots; i++) {
    int r = i < binds->n ? bufcatf(buf, len - 5, NULL, "%s %.200s: host directory, %s", i ? ";" : "",
                                   binds->binds[i].dst, binds->binds[i].rw ? "writable" : "read-only")
                         : bufcatf(buf, len - 5, NULL,
                                   "%s " ROOTS_DIR "/<name>: the client's roots, read-only", i ? ";" : "");
    if (r < 0) {
      strcat(buf, " ..."); /* fits: buf stays within len - 5, and the "." below */
      break;
    }
  }
  strcat(buf, ".");
}

void mcp_tool_write(json_writer_t *w, const struct sbx_policy *policy, const struct mcp_config *cfg,
                    const struct bind_opts *binds, bool roots, size_t text_limit,
                    const struct mcp_tool_facts *fx)
{
  json_obj_begin(w);
  json_kv_str(w, "name", TOOL_NAME);
  json_kv_str(w, "title", "Run Python in a sandbox");
  char desc[sizeof tool_description + 1536];
  bufprintf_cut(desc, sizeof desc, "%s", tool_description);
  append_host_files(desc, sizeof desc - 256, binds, roots);
  if (cfg->n) {
    /* Name the servers, within a budget: the description is read on every turn. */
    bufprintf_cut(desc + strlen(desc), sizeof desc - strlen(desc), " Servers:");
    append_names(desc, sizeof desc - 1, cfg); /* and room for the "." */
    strcat(desc, ".");
  }
  json_kv_str(w, "description", desc);

  write_input_schema(w, policy);
  write_output_schema(w);
  write_annotations(w, "Run Python in a sandbox", fx);
  write_meta(w, text_limit);
  json_obj_end(w);
}

static const char exec_description[] =
    "Run code in a fresh, disposable Linux sandbox and get back its stdout, stderr, exit_code and "
    "success. `language`: python (Python 3, top-level `await` works), bash (run as `bash -c CODE`, "
    "like a user's shell), javascript (Node.js; the code runs as an ES module: `import`, not "
    "`require`, and top-level `await` works). Every language gets the same sandbox, policy and "
    "limits: every call starts clean (files, variables and processes never carry over), the network "
    "is loopback-only, and time, memory, processes and output are limited (read resource " CAPABILITIES_URI
    " for the limits). Files written to /workspace/out/ come back (images as images).";

/* execute_code takes exactly language, code and timeout. */
static void write_exec_input_schema(json_writer_t *w, const struct sbx_policy *policy, unsigned langs)
{
  json_key(w, "inputSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_key(w, "language");
  json_obj_begin(w);
  json_kv_str(w, "type", "string");
  json_key(w, "enum");
  json_arr_begin(w);
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    if (langs & MCP_LANG_BIT(l))
      json_str(w, mcp_lang_name((enum mcp_lang) l));
  json_arr_end(w);
  json_kv_str(w, "description", "The language of `code` (those whose rootfs is installed here).");
  json_obj_end(w);
  schema_prop(w, "code", "string",
              "The program: a Python script, a bash command string, or a JavaScript ES module.");
  write_timeout_prop(w, policy);
  write_session_prop(w);
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "language");
  json_str(w, "code");
  json_arr_end(w);
  json_obj_end(w);
}

void mcp_exec_tool_write(json_writer_t *w, const struct sbx_policy *policy, unsigned langs,
                         const struct bind_opts *binds, bool roots, size_t text_limit,
                         const struct mcp_tool_facts *fx)
{
  json_obj_begin(w);
  json_kv_str(w, "name", EXEC_TOOL_NAME);
  json_kv_str(w, "title", "Run code in a sandbox");
  char desc[sizeof exec_description + 1536];
  bufprintf_cut(desc, sizeof desc, "%s", exec_description);
  append_host_files(desc, sizeof desc - 256, binds, roots);
  json_kv_str(w, "description", desc);
  write_exec_input_schema(w, policy, langs);
  write_output_schema(w);
  write_annotations(w, "Run code in a sandbox", fx);
  write_meta(w, text_limit);
  json_obj_end(w);
}

/* "configured servers: a, b" (or that there are none), for messages. */
void mcp_tool_server_names(const struct mcp_config *cfg, char *buf, size_t len)
{
  bufprintf_cut(buf, len, "%s",
                cfg->n ? "configured servers:"
                       : "no host MCP servers are configured for sandboxd (see sandboxd(1), --config)");
  append_names(buf, len, cfg);
}

/* `code` (what = the language's name for messages) and `timeout`, shared by both tools. */
static int parse_code_timeout(const json_node_t *args, const struct sbx_policy *policy, const char *what,
                              struct mcp_tool_args *ret, char *msg, size_t msg_len)
{
  const json_node_t *coden = json_get(args, "code");
  size_t code_len = 0;
  const char *code = json_as_string(coden, &code_len);
  if (!coden) {
    bufprintf_cut(msg, msg_len, "missing `code`: pass the %s source to run as a string", what);
    return -1;
  }
  if (!code) {
    bufprintf_cut(msg, msg_len, "`code` must be a string, not %s", json_type_name(json_type(coden)));
    return -1;
  }
  if (code_len == 0 || strspn(code, " \t\r\n") == code_len) {
    bufprintf_cut(msg, msg_len, "`code` is empty: pass the %s source to run", what);
    return -1;
  }
  if (strlen(code) != code_len) {
    bufprintf_cut(msg, msg_len, "`code` contains a NUL character, which %s source cannot hold", what);
    return -1;
  }
  /* No limit of its own: the code is bound by the message that carries it (--max-message-size),
   * and reaches the sandbox on fd 3 or stdin, not in argv (mcp_job.c). */
  uint64_t timeout_ms = UINT64_MAX;
  const json_node_t *tn = json_get(args, "timeout");
  if (tn && json_type(tn) != JSON_NULL) {
    long long t;
    if (json_as_int(tn, &t) < 0 || t <= 0) {
      bufprintf_cut(msg, msg_len, "`timeout` must be a positive whole number of seconds");
      return -1;
    }
    /* Clamp to the policy's ceiling rather than refuse: the model cannot know it. */
    uint64_t max = policy->max.timeout_ms;
    timeout_ms = (uint64_t) t > max / 1000 ? max : (uint64_t) t * 1000;
  }
  const json_node_t *sn = json_get(args, "session_id");
  const char *sid = NULL;
  if (sn && json_type(sn) != JSON_NULL) {
    size_t len = 0;
    sid = json_as_string(sn, &len);
    if (!sid || len <= 4 || strncmp(sid, "sbx_", 4) != 0 || strlen(sid) != len ||
        strspn(sid + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != len - 4) {
      bufprintf_cut(msg, msg_len, "`session_id` must be a session's handle from session_start (sbx_...)");
      return -1;
    }
  }
  *ret =
      (struct mcp_tool_args){.code = code, .code_len = code_len, .timeout_ms = timeout_ms, .session_id = sid};
  return 0;
}

int mcp_tool_parse_args(const json_node_t *args, const struct sbx_policy *policy,
                        const struct mcp_config *cfg, struct mcp_tool_args *ret, char *msg, size_t msg_len)
{
  if (args && json_type(args) != JSON_OBJECT) {
    bufprintf_cut(msg, msg_len, "arguments must be an object with `code` (string)");
    return -1;
  }
  struct mcp_tool_args a;
  if (parse_code_timeout(args, policy, "Python", &a, msg, msg_len) < 0)
    return -1;
  const json_node_t *servers = json_get(args, "servers");
  if (servers && json_type(servers) != JSON_NULL) {
    if (json_type(servers) != JSON_ARRAY) {
      bufprintf_cut(msg, msg_len, "`servers` must be an array of server names");
      return -1;
    }
    for (size_t i = 0; i < json_array_len(servers); i++) {
      const char *s = json_as_string(json_array_at(servers, i), NULL);
      if (!s) {
        bufprintf_cut(msg, msg_len, "`servers` must be an array of server names (strings)");
        return -1;
      }
      if (!mcp_config_find(cfg, s)) {
        char names[400];
        mcp_tool_server_names(cfg, names, sizeof names);
        bufprintf_cut(msg, msg_len, "unknown server `%.100s`: %s", s, names);
        return -1;
      }
    }
  }
  a.lang = MCP_LANG_PYTHON;
  a.servers = servers && json_type(servers) != JSON_NULL ? servers : NULL;
  *ret = a;
  return 0;
}

/* "python, bash" for messages: the languages in mask. */
static void lang_names(unsigned langs, char *buf, size_t len)
{
  buf[0] = '\0';
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    if (langs & MCP_LANG_BIT(l))
      if (bufcatf(buf, len, NULL, "%s%s", buf[0] ? ", " : "", mcp_lang_name((enum mcp_lang) l)) < 0)
        return; /* 64 bytes hold all three */
}

int mcp_exec_parse_args(const json_node_t *args, const struct sbx_policy *policy, unsigned langs,
                        struct mcp_tool_args *ret, char *msg, size_t msg_len)
{
  char have[64];
  lang_names(langs, have, sizeof have);
  if (args && json_type(args) != JSON_OBJECT) {
    bufprintf_cut(msg, msg_len, "arguments must be an object with `language` (%s) and `code` (string)", have);
    return -1;
  }
  const json_node_t *ln = json_get(args, "language");
  const char *lang = json_as_string(ln, NULL);
  enum mcp_lang l;
  if (!ln) {
    bufprintf_cut(msg, msg_len, "missing `language`: one of %s", have);
    return -1;
  }
  if (!lang) {
    bufprintf_cut(msg, msg_len, "`language` must be a string (one of %s), not %s", have,
                  json_type_name(json_type(ln)));
    return -1;
  }
  if (mcp_lang_parse(lang, &l) < 0) {
    bufprintf_cut(msg, msg_len, "unknown `language` `%.40s`: one of %s", lang, have);
    return -1;
  }
  if (!(langs & MCP_LANG_BIT(l))) {
    bufprintf_cut(msg, msg_len,
                  "`language` %s is not available here (its rootfs is not installed): one of %s", lang, have);
    return -1;
  }
  static const char *const what[MCP_LANG_COUNT] = {"Python", "bash", "JavaScript"};
  struct mcp_tool_args a;
  if (parse_code_timeout(args, policy, what[l], &a, msg, msg_len) < 0)
    return -1;
  a.lang = l;
  *ret = a;
  return 0;
}
