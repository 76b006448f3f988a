/* Unit tests for the host MCP servers config (src/mcp_config.c). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mcp_config.h"

static int parse(const char *text, struct mcp_config *c, sbx_error_t *err)
{
  return mcp_config_parse(text, strlen(text), "f.json", "/opt/sandboxd/bin/sandboxd", c, err);
}

int main(void)
{
  sbx_error_t err = {0};
  char *s = NULL;
  setenv("SBX_T_A", "alpha", 1);
  unsetenv("SBX_T_UNSET");
  setenv("SBX_T_EMPTY", "", 1);

  CHECK(mcp_config_expand("x-${SBX_T_A}-y", &s, &err) == 0 && strcmp(s, "x-alpha-y") == 0);
  free(s);
  CHECK(mcp_config_expand("${SBX_T_UNSET:-def}", &s, &err) == 0 && strcmp(s, "def") == 0);
  free(s);
  CHECK(mcp_config_expand("${SBX_T_EMPTY:-def}", &s, &err) == 0 && strcmp(s, "def") == 0);
  free(s);
  CHECK(mcp_config_expand("${SBX_T_A:-def}", &s, &err) == 0 && strcmp(s, "alpha") == 0);
  free(s);
  CHECK(mcp_config_expand("no vars $HOME", &s, &err) == 0 && strcmp(s, "no vars $HOME") == 0);
  free(s);
  CHECK(mcp_config_expand("${SBX_T_UNSET}", &s, &err) < 0 && strstr(err.msg, "`SBX_T_UNSET` is not set"));
  CHECK(mcp_config_expand("${SBX_T_A", &s, &err) < 0 && strstr(err.msg, "unterminated"));

  struct mcp_config c = {0};
  CHECK(parse("{\"mcpServers\": {\"a-b.c\": {\"command\": \"node\", \"args\": [\"${SBX_T_A}\", \"x\"], "
              "\"env\": {\"K\": \"${SBX_T_UNSET:-v}\"}, \"cwd\": \"/tmp\", \"description\": \"D\"},"
              "\"web\": {\"type\": \"http\", \"url\": \"https://x\"},"
              "\"sse\": {\"url\": \"https://x\"},"
              "\"self\": {\"command\": \"/usr/local/bin/sandboxd\", \"args\": [\"mcp\"]},"
              "\"selfexec\": {\"command\": \"sandboxd\", \"args\": [\"exec\", \"x.py\"]}}}",
              &c, &err) == 0);
  CHECK(c.n == 2);
  const struct mcp_server_config *a = mcp_config_find(&c, "a-b.c");
  CHECK(a && a->argc == 3 && strcmp(a->argv[0], "node") == 0 && strcmp(a->argv[1], "alpha") == 0 && !a->argv[3]);
  CHECK(a && a->n_env == 1 && strcmp(a->env[0], "K=v") == 0 && strcmp(a->cwd, "/tmp") == 0 &&
        strcmp(a->description, "D") == 0);
  CHECK(mcp_config_find(&c, "selfexec") && !mcp_config_find(&c, "self") && !mcp_config_find(&c, "web"));
  /* A second source: existing names win, new ones are added. */
  CHECK(parse("{\"mcpServers\": {\"a-b.c\": {\"command\": \"other\"}, \"n\": {\"command\": \"n\"}}}", &c, &err) == 0);
  CHECK(c.n == 3 && strcmp(mcp_config_find(&c, "a-b.c")->argv[0], "node") == 0);

  static const char *const bad[][2] = {
      {"[1]", "f.json: expected an object"},
      {"{\"mcpServers\": []}", "`mcpServers` must be an object"},
      {"{\"mcpServers\": {\"x\": 1}}", "f.json: server `x`: must be an object"},
      {"{\"mcpServers\": {\"x\": {}}}", "server `x`: `command` must be a non-empty string"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"c\", \"args\": \"a\"}}}", "server `x`: `args` must be an array"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"c\", \"args\": [1]}}}", "server `x`: `args` must be an array"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"c\", \"env\": {\"A\": 1}}}}", "server `x`: `env` must map"},
      {"{\"mcpServers\": {\"bad name\": {\"command\": \"c\"}}}", "server `bad name`: the name must be"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"${SBX_T_UNSET}\"}}}", "server `x`: command: variable"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"c\", \"cwd\": 3}}}", "server `x`: `cwd` must be a string"},
      {"{\"mcpServers\": ", "f.json"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    struct mcp_config *d = calloc(1, sizeof *d);
    int r = parse(bad[i][0], d, &err);
    CHECK(r < 0 && strstr(err.msg, bad[i][1]) && !strchr(err.msg, '\n'));
    if (r == 0 || !strstr(err.msg, bad[i][1]))
      fprintf(stderr, "  case %zu: %s\n", i, err.msg);
    mcp_config_free(d);
  }
  struct mcp_config *heap = malloc(sizeof *heap);
  *heap = c;
  mcp_config_free(heap);
  return check_summary("test_mcp_config");
}
