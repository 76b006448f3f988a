/* Unit tests for execute_code's argument checks and tool definition (src/mcp/mcp_tool.c), and the
 * language names and lists (src/mcp/mcp_lang.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "check.h"
#include "mcp/mcp_lang.h"
#include "mcp/mcp_tool.h"
#include "policy/policy.h"
#include "run/binds.h"

static struct sbx_policy policy;
static struct bind_opts no_binds;
static struct mcp_tool_args args;
static char msg[1024];
static const unsigned py_bash = MCP_LANG_BIT(MCP_LANG_PYTHON) | MCP_LANG_BIT(MCP_LANG_BASH);

/* Check the JSON text as execute_code's `arguments` with langs present; the tree stays in *tree. */
static int check_args(const char *text, unsigned langs, json_node_t **tree)
{
  sbx_error_t err;
  *tree = NULL;
  msg[0] = '\0';
  if (text && json_parse(text, strlen(text), tree, &err) < 0)
    return -2;
  return mcp_exec_parse_args(*tree, &policy, langs, &args, msg, sizeof msg);
}

static const char *refused(const char *text)
{
  json_node_t *t;
  int r = check_args(text, py_bash, &t);
  json_free(t);
  return r == -1 ? msg : "";
}

static void test_refused(void)
{
  CHECK(strstr(refused(NULL), "missing `language`: one of python, bash"));
  CHECK(strstr(refused("[1]"), "arguments must be an object with `language` (python, bash)"));
  CHECK(strstr(refused("{\"code\": \"echo\"}"), "missing `language`: one of python, bash"));
  CHECK(strstr(refused("{\"language\": 1, \"code\": \"echo\"}"), "`language` must be a string"));
  CHECK(strstr(refused("{\"language\": \"perl\", \"code\": \"1\"}"), "unknown `language` `perl`"));
  CHECK(strstr(refused("{\"language\": \"Python\", \"code\": \"1\"}"), "unknown `language` `Python`"));
  /* A language whose rootfs is absent is named as such, with those there are. */
  CHECK(strstr(
      refused("{\"language\": \"javascript\", \"code\": \"1\"}"),
      "`language` javascript is not available here (its rootfs is not installed): one of python, bash"));
  CHECK(strstr(refused("{\"language\": \"bash\"}"), "missing `code`: pass the bash source"));
  CHECK(strstr(refused("{\"language\": \"bash\", \"code\": \" \\n\"}"), "`code` is empty"));
  CHECK(strstr(refused("{\"language\": \"bash\", \"code\": \"a\\u0000b\"}"), "NUL character"));
  CHECK(strstr(refused("{\"language\": \"bash\", \"code\": \"1\", \"timeout\": 0}"),
               "`timeout` must be a positive whole number"));
}

static void test_accepted(void)
{
  json_node_t *t;
  CHECK(check_args("{\"language\": \"bash\", \"code\": \"echo hi\"}", py_bash, &t) == 0 &&
        args.lang == MCP_LANG_BASH && args.code_len == 7 && args.timeout_ms == UINT64_MAX && !args.servers);
  json_free(t);
  CHECK(check_args("{\"language\": \"python\", \"code\": \"1\", \"timeout\": 100000}", py_bash, &t) == 0 &&
        args.lang == MCP_LANG_PYTHON && args.timeout_ms == policy.max.timeout_ms);
  json_free(t);
  unsigned all = py_bash | MCP_LANG_BIT(MCP_LANG_JAVASCRIPT);
  CHECK(check_args("{\"language\": \"javascript\", \"code\": \"await 1\", \"timeout\": 3}", all, &t) == 0 &&
        args.lang == MCP_LANG_JAVASCRIPT && args.timeout_ms == 3000);
  json_free(t);
}

/* The exact schema: language (the enum of those present), code, timeout; language and code
 * required; the output schema run_python's, with success and memory_used_mb. */
static void test_write(void)
{
  json_writer_t *w = json_writer_new();
  mcp_exec_tool_write(w, &policy, py_bash, &no_binds, false, 40000, NULL);
  size_t n;
  const char *buf = json_writer_buf(w, &n);
  json_node_t *tool = NULL;
  sbx_error_t err;
  CHECK(buf && json_parse(buf, n, &tool, &err) == 0);
  CHECK(!strcmp(json_as_string(json_get(tool, "name"), NULL), EXEC_TOOL_NAME));
  const json_node_t *in = json_get(tool, "inputSchema");
  const json_node_t *props = json_get(in, "properties");
  CHECK(json_object_len(props) == 4 && json_get(props, "code") && json_get(props, "timeout"));
  /* session_id: optional, a session's handle (sandboxd-mcp(7), SESSIONS) */
  CHECK(!strcmp(json_as_string(json_get(json_get(props, "session_id"), "pattern"), NULL),
                "^sbx_[A-Za-z0-9_-]+$"));
  const json_node_t *e = json_get(json_get(props, "language"), "enum");
  CHECK(json_array_len(e) == 2 && !strcmp(json_as_string(json_array_at(e, 0), NULL), "python") &&
        !strcmp(json_as_string(json_array_at(e, 1), NULL), "bash"));
  CHECK(json_array_len(json_get(in, "required")) == 2);
  const json_node_t *out = json_get(json_get(tool, "outputSchema"), "properties");
  static const char *const fields[] = {
      "success",        "stdout", "stderr",    "exit_code", "execution_time_ms",
      "memory_used_mb", "status", "truncated", "files"};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    CHECK(json_get(out, fields[i]) != NULL);
  const char *desc = json_as_string(json_get(tool, "description"), NULL);
  CHECK(desc && strstr(desc, "`bash -c CODE`") && strstr(desc, "ES module") &&
        strstr(desc, "top-level `await`") && strstr(desc, "No host files."));
  json_free(tool);
  json_writer_free(w);
}

static void test_lang_list(void)
{
  unsigned m = 0;
  sbx_error_t err;
  CHECK(mcp_lang_parse_list("--warm-lang", "python,javascript", &m, &err) == 0 &&
        m == (MCP_LANG_BIT(MCP_LANG_PYTHON) | MCP_LANG_BIT(MCP_LANG_JAVASCRIPT)));
  CHECK(mcp_lang_parse_list("--warm-lang", "bash", &m, &err) == 0 && m == MCP_LANG_BIT(MCP_LANG_BASH));
  CHECK(mcp_lang_parse_list("--warm-lang", "bash,ruby", &m, &err) < 0 &&
        strstr(err.msg, "unknown language `ruby`"));
  CHECK(mcp_lang_parse_list("--warm-lang", "bash,", &m, &err) < 0 && strstr(err.msg, "separated by commas"));
  CHECK(mcp_lang_parse_list("--warm-lang", "", &m, &err) < 0);
  /* The code never goes through argv: each interpreter reads it from stdin. */
  for (int l = MCP_LANG_BASH; l < MCP_LANG_COUNT; l++) {
    char **argv = mcp_lang_argv((enum mcp_lang) l);
    CHECK(argv && argv[0][0] == '/');
  }
  CHECK(mcp_lang_argv(MCP_LANG_PYTHON) == NULL);
}

int main(void)
{
  policy.limits.timeout_ms = 30000;
  policy.max.timeout_ms = 120000;
  test_refused();
  test_accepted();
  test_write();
  test_lang_list();
  return check_summary("test_mcp_exec_tool");
}
