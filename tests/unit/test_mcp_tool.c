/* Unit tests for run_python's argument checks and tool definition (src/mcp_tool.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json.h"
#include "mcp_config.h"
#include "mcp_tool.h"
#include "policy.h"

static struct sbx_policy policy;
static struct mcp_server_config server_cfgs[2] = {{.name = "fs", .description = ""},
                                                  {.name = "memory", .description = ""}};
static struct mcp_config cfg = {.servers = server_cfgs, .n = 2};
static struct mcp_config no_servers = {.servers = NULL, .n = 0};

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
    mcp_tool_write(w, &policy, with ? &cfg : &no_servers);
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
    CHECK(json_array_len(json_get(json_get(tool, "outputSchema"), "required")) == 8);
    CHECK(json_type(json_get(json_get(tool, "annotations"), "openWorldHint")) == JSON_BOOL);
    json_free(tool);
    json_writer_free(w);
  }
}

int main(void)
{
  policy.limits.timeout_ms = 30000;
  policy.max.timeout_ms = 120000;
  test_refused();
  test_code_limit();
  test_accepted();
  test_write();
  return check_summary("test_mcp_tool");
}
