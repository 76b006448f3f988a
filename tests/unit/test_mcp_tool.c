/* Unit tests for run_python's argument checks and tool definition (src/mcp/mcp_tool.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/util.h"
#include "check.h"
#include "hostmcp/mcp_config.h"
#include "mcp/mcp_tool.h"
#include "policy/policy.h"
#include "run/binds.h"

static struct sbx_policy policy;
static struct mcp_server_config server_cfgs[2] = {{.name = "fs", .description = ""},
                                                  {.name = "memory", .description = ""}};
static struct mcp_config cfg = {.servers = server_cfgs, .n = 2};
static struct mcp_config no_servers = {.servers = NULL, .n = 0};
static struct bind_opts no_binds;

static struct mcp_tool_args args;
static char msg[1024];

/* Parse the JSON text as `arguments` (NULL: absent) and check it; the tree stays in *tree. */
static int check_args(const char *text, const struct mcp_config *c, json_node_t **tree)
{
  sbx_error_t err;
  *tree = NULL;
  msg[0] = '\0';
  if (text && json_parse(text, strlen(text), tree, &err) < 0)
    return -2;
  return mcp_tool_parse_args(*tree, &policy, c, &args, msg, sizeof msg);
}

/* The message for arguments that must be refused ("" if they were accepted). */
static const char *refused(const char *text)
{
  json_node_t *t;
  int r = check_args(text, &cfg, &t);
  json_free(t);
  return r == -1 ? msg : "";
}

static void test_refused(void)
{
  CHECK(strstr(refused(NULL), "missing `code`"));
  CHECK(strstr(refused("[1]"), "arguments must be an object with `code` (string)"));
  CHECK(strstr(refused("\"x\""), "arguments must be an object"));
  CHECK(strstr(refused("{}"), "missing `code`"));
  CHECK(strstr(refused("{\"code\": 1}"), "`code` must be a string, not integer"));
  CHECK(strstr(refused("{\"code\": null}"), "`code` must be a string, not null"));
  CHECK(strstr(refused("{\"code\": \"\"}"), "`code` is empty"));
  CHECK(strstr(refused("{\"code\": \" \\t\\r\\n \"}"), "`code` is empty"));
  CHECK(strstr(refused("{\"code\": \"a\\u0000b\"}"), "`code` contains a NUL character"));
  CHECK(strstr(refused("{\"code\": \"1\", \"timeout\": 0}"), "`timeout` must be a positive whole number"));
  CHECK(strstr(refused("{\"code\": \"1\", \"timeout\": -3}"), "`timeout` must be a positive whole number"));
  CHECK(strstr(refused("{\"code\": \"1\", \"timeout\": 1.5}"), "`timeout` must be a positive whole number"));
  CHECK(
      strstr(refused("{\"code\": \"1\", \"timeout\": \"5\"}"), "`timeout` must be a positive whole number"));
  CHECK(strstr(refused("{\"code\": \"1\", \"servers\": \"fs\"}"),
               "`servers` must be an array of server names"));
  CHECK(strstr(refused("{\"code\": \"1\", \"servers\": [1]}"), "array of server names (strings)"));
  CHECK(strstr(refused("{\"code\": \"1\", \"servers\": [\"fs\", \"nope\"]}"),
               "unknown server `nope`: configured servers: fs, memory"));
  /* With none configured, the message says so rather than list nothing. */
  json_node_t *t;
  CHECK(check_args("{\"code\": \"1\", \"servers\": [\"fs\"]}", &no_servers, &t) == -1 &&
        strstr(msg, "unknown server `fs`: no host MCP servers are configured"));
  json_free(t);
}

/* session_id: absent, null, or a handle's shape (sbx_ and base64url); anything else is refused
 * before any lookup. */
static void test_session_id(void)
{
  json_node_t *t;
  CHECK(check_args("{\"code\": \"1\"}", &cfg, &t) == 0 && args.session_id == NULL);
  json_free(t);
  CHECK(check_args("{\"code\": \"1\", \"session_id\": null}", &cfg, &t) == 0 && args.session_id == NULL);
  json_free(t);
  CHECK(check_args("{\"code\": \"1\", \"session_id\": \"sbx_aZ09-_\"}", &cfg, &t) == 0 && args.session_id &&
        strcmp(args.session_id, "sbx_aZ09-_") == 0);
  json_free(t);
  static const char *const bad[] = {"1",          "\"\"",        "\"sbx_\"",    "\"sbx-abc\"",
                                    "\"abc\"",    "\"sbx_a b\"", "\"sbx_a/b\"", "\"sbx_a\\u0000b\"",
                                    "[\"sbx_a\"]"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[80];
    bufprintf_cut(text, sizeof text, "{\"code\": \"1\", \"session_id\": %s}", bad[i]);
    CHECK(strstr(refused(text), "`session_id` must be a session's handle from session_start"));
  }
}

/* No limit of the code's own (it was argv's 128 KiB): the message limit bounds it, in the framer.
 * 4 MiB of code, the default message limit, is accepted whole. */
static void test_code_limit(void)
{
  size_t len = 4u << 20;
  char *text = malloc(len + 32);
  if (!text) {
    CHECK(0);
    return;
  }
  memcpy(text, "{\"code\": \"", 10);
  memset(text + 10, 'x', len);
  strcpy(text + 10 + len, "\"}");
  json_node_t *t;
  CHECK(check_args(text, &cfg, &t) == 0 && args.code_len == len && args.code[len - 1] == 'x');
  json_free(t);
  free(text);
}

static void test_accepted(void)
{
  json_node_t *t;
  CHECK(check_args("{\"code\": \"print(1)\"}", &cfg, &t) == 0);
  CHECK(args.code && strcmp(args.code, "print(1)") == 0 && args.code_len == 8);
  CHECK(args.timeout_ms == UINT64_MAX && args.servers == NULL);
  json_free(t);

  /* A timeout within the ceiling is taken in seconds; above it, clamped (the model cannot know it). */
  CHECK(check_args("{\"code\": \"1\", \"timeout\": 7}", &cfg, &t) == 0 && args.timeout_ms == 7000);
  json_free(t);
  CHECK(check_args("{\"code\": \"1\", \"timeout\": 100000}", &cfg, &t) == 0 &&
        args.timeout_ms == policy.max.timeout_ms);
  json_free(t);
  CHECK(check_args("{\"code\": \"1\", \"timeout\": null, \"servers\": null}", &cfg, &t) == 0 &&
        args.timeout_ms == UINT64_MAX && args.servers == NULL);
  json_free(t);
  CHECK(check_args("{\"code\": \"1\", \"servers\": [\"memory\", \"fs\"]}", &cfg, &t) == 0 &&
        json_array_len(args.servers) == 2);
  json_free(t);
  CHECK(check_args("{\"code\": \"1\", \"servers\": []}", &cfg, &t) == 0 && json_array_len(args.servers) == 0);
  json_free(t);
}

/* The tool object is valid JSON, names the servers, and carries the policy's timeouts. */
static void test_write(void)
{
  for (int with = 0; with <= 1; with++) {
    json_writer_t *w = json_writer_new();
    mcp_tool_write(w, &policy, with ? &cfg : &no_servers, &no_binds, false, 40000, NULL);
    size_t n;
    const char *buf = json_writer_buf(w, &n);
    json_node_t *tool = NULL;
    sbx_error_t err;
    CHECK(buf && json_parse(buf, n, &tool, &err) == 0);
    CHECK(strcmp(json_as_string(json_get(tool, "name"), NULL), TOOL_NAME) == 0);
    const char *desc = json_as_string(json_get(tool, "description"), NULL);
    CHECK(desc && (with ? strstr(desc, " Servers: fs, memory.") != NULL : strstr(desc, "Servers:") == NULL));
    const json_node_t *timeout = json_get(json_get(json_get(tool, "inputSchema"), "properties"), "timeout");
    const char *td = json_as_string(json_get(timeout, "description"), NULL);
    CHECK(td && strstr(td, "(default 30, at most 120)"));
    CHECK(json_array_len(json_get(json_get(tool, "outputSchema"), "required")) == 13);
    /* structuredContent.files: one object per file, path and size always there. */
    const json_node_t *files = json_get(json_get(json_get(tool, "outputSchema"), "properties"), "files");
    CHECK(!strcmp(json_as_string(json_get(files, "type"), NULL), "array"));
    const json_node_t *item = json_get(files, "items");
    CHECK(json_object_len(json_get(item, "properties")) == 6 &&
          json_array_len(json_get(item, "required")) == 2);
    CHECK(json_get(json_get(item, "properties"), "omitted") &&
          json_get(json_get(item, "properties"), "sha256"));
    CHECK(desc && strstr(desc, "/workspace/out/"));
    CHECK(json_type(json_get(json_get(tool, "annotations"), "openWorldHint")) == JSON_BOOL);
    /* The longest result's text for Claude Code: 40,000 characters of two UTF-16 units, and notes. */
    long long most = 0;
    CHECK(json_as_int(json_get(json_get(tool, "_meta"), "anthropic/maxResultSizeChars"), &most) == 0 &&
          most == 2 * 40000 + MCP_TOOL_NOTES_CHARS);
    json_free(tool);
    json_writer_free(w);
  }
}

/* The description names each host directory, read-only or writable, and the roots' place; or
 * says there are none. */
static void test_write_binds(void)
{
  struct bind_opts b = {
      .n = 2, .binds = {{.src = "/home/u/data", .dst = "/data"}, {.src = "/o", .dst = "/out", .rw = true}}};
  const char *want[] = {
      "No host files.",
      "Host files, nothing else: /data: host directory, read-only; /out: host directory, writable; "
      "/roots/<name>: the client's roots, read-only. Servers: fs, memory.",
      "Host files, nothing else: /roots/<name>: the client's roots, read-only."};
  for (int i = 0; i < 3; i++) {
    json_writer_t *w = json_writer_new();
    mcp_tool_write(w, &policy, i == 1 ? &cfg : &no_servers, i == 1 ? &b : &no_binds, i > 0, 40000, NULL);
    size_t n;
    const char *buf = json_writer_buf(w, &n);
    json_node_t *tool = NULL;
    sbx_error_t err;
    CHECK(buf && json_parse(buf, n, &tool, &err) == 0);
    const char *desc = json_as_string(json_get(tool, "description"), NULL);
    CHECK(desc && strstr(desc, want[i]) && !strstr(desc, "/home/u"));
    json_free(tool);
    json_writer_free(w);
  }
  /* 32 long destinations: cut short with "...", the servers still named, the whole bounded. */
  static char dst[200];
  memset(dst, 'd', sizeof dst - 1);
  dst[0] = '/';
  b.n = BIND_OPTS_MAX;
  for (size_t i = 0; i < b.n; i++)
    b.binds[i] = (struct sbx_bind){.src = "/s", .dst = dst};
  json_writer_t *w = json_writer_new();
  mcp_tool_write(w, &policy, &cfg, &b, true, 40000, NULL);
  size_t n;
  const char *buf = json_writer_buf(w, &n);
  json_node_t *tool = NULL;
  sbx_error_t err;
  CHECK(buf && json_parse(buf, n, &tool, &err) == 0);
  const char *desc = json_as_string(json_get(tool, "description"), NULL);
  CHECK(desc && strstr(desc, "read-only ....") && strstr(desc, " Servers: fs, memory.") &&
        strlen(desc) < 2500);
  json_free(tool);
  json_writer_free(w);
}

static json_node_t *tool_with(const struct mcp_tool_facts *fx)
{
  json_writer_t *w = json_writer_new();
  mcp_tool_write(w, &policy, &no_servers, &no_binds, false, 40000, fx);
  size_t n;
  const char *buf = json_writer_buf(w, &n);
  json_node_t *tool = NULL;
  sbx_error_t err;
  CHECK(buf && json_parse(buf, n, &tool, &err) == 0);
  json_writer_free(w);
  return tool;
}

static bool hint(const json_node_t *tool, const char *name)
{
  bool v = false;
  CHECK(json_as_bool(json_get(json_get(tool, "annotations"), name), &v) == 0);
  return v;
}

/* readOnlyHint only where a call can change nothing outside its sandbox; destructive where it
 * may change what is there; an open world where it reaches hosts or host servers. */
static void test_annotations(void)
{
  static const struct {
    struct mcp_tool_facts fx;
    bool ro, destructive, open;
  } cases[] = {
      {{0}, true, false, false},
      {{.rw_binds = true}, false, true, false},
      {{.output_dir = true}, false, false, false},
      {{.egress = true}, false, true, true},
      {{.host_tools = true}, false, true, true},
      {{.output_dir = true, .host_tools = true}, false, true, true},
  };
  for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
    json_node_t *tool = tool_with(&cases[i].fx);
    CHECK(hint(tool, "readOnlyHint") == cases[i].ro);
    CHECK(hint(tool, "destructiveHint") == cases[i].destructive);
    CHECK(hint(tool, "openWorldHint") == cases[i].open);
    CHECK(!hint(tool, "idempotentHint"));
    CHECK(!json_get(tool, "icons"));
    json_free(tool);
  }
  json_node_t *tool = tool_with(NULL);
  CHECK(hint(tool, "readOnlyHint") && !json_get(tool, "icons"));
  json_free(tool);
  /* Icons (2025-11-25): a PNG every client that shows icons takes, and an SVG. */
  struct mcp_tool_facts fx = {.icons = true};
  tool = tool_with(&fx);
  const json_node_t *icons = json_get(tool, "icons");
  CHECK(json_array_len(icons) == 2);
  const char *png = json_as_string(json_get(json_array_at(icons, 0), "src"), NULL);
  CHECK(png && !strncmp(png, "data:image/png;base64,iVBORw0KGgo", 33)); /* the PNG signature */
  CHECK(!strcmp(json_as_string(json_get(json_array_at(icons, 0), "mimeType"), NULL), "image/png"));
  CHECK(!strcmp(json_as_string(json_array_at(json_get(json_array_at(icons, 1), "sizes"), 0), NULL), "any"));
  json_free(tool);
}

int main(void)
{
  policy.limits.timeout_ms = 30000;
  policy.max.timeout_ms = 120000;
  test_refused();
  test_session_id();
  test_code_limit();
  test_accepted();
  test_write();
  test_write_binds();
  test_annotations();
  return check_summary("test_mcp_tool");
}
