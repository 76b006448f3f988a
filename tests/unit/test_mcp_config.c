/* Unit tests for the host MCP servers config (src/hostmcp/mcp_config.c), and what a server's
 * tool list says of a tool (mcp_tools_read_only, src/hostmcp/mcp_client.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/warn.h"
#include "check.h"
#include "hostmcp/mcp_client.h"
#include "hostmcp/mcp_config.h"

/* Warnings reach the handler the caller set, never stderr. */
static char warnings[4096];
static int n_warnings, n_other_kind;

static void record_warning(enum sbx_warning kind, const char *msg)
{
  n_warnings++;
  n_other_kind += kind != SBX_WARN_CONFIG;
  size_t l = strlen(warnings);
  if (l + strlen(msg) + 2 < sizeof warnings)
    sprintf(warnings + l, "%s\n", msg);
}

/* The size of what was written to fd 2 while fn ran. */
static long stderr_bytes_during(void (*fn)(void))
{
  char tmpl[] = "/tmp/sandboxd-test-stderr.XXXXXX";
  int fd = mkstemp(tmpl), saved = dup(2);
  if (fd < 0 || saved < 0)
    return -1;
  unlink(tmpl);
  fflush(stderr);
  dup2(fd, 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long n = lseek(fd, 0, SEEK_END);
  close(fd);
  return n;
}

static int parse(const char *text, struct mcp_config *c, sbx_error_t *err)
{
  return mcp_config_parse(text, strlen(text), "f.json", "/opt/sandboxd/bin/sandboxd", c, err);
}

static void put(const char *path, const char *text)
{
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* --import-claude in a scratch HOME and project: the names it imports, comma-separated. */
static char home[PATH_MAX], proj[PATH_MAX], empty[PATH_MAX + 16];

static void claude_json(const char *project_entry)
{
  char path[PATH_MAX + 32], text[8192];
  snprintf(path, sizeof path, "%s/.claude.json", home);
  snprintf(text, sizeof text,
           "{\"numStartups\": 3, \"mcpServers\": {\"u\": {\"command\": \"user-u\"}, \"x\": {\"command\": "
           "\"user-x\"}},"
           " \"projects\": {\"/elsewhere\": {\"enableAllProjectMcpServers\": true, "
           "\"hasTrustDialogAccepted\": true},"
           " \"%s\": {%s}}}",
           proj, project_entry);
  put(path, text);
}

static const char *imported(struct mcp_config **ret)
{
  static char names[1024];
  struct mcp_config_options o = {.path = empty, .import_claude = true};
  sbx_error_t err;
  names[0] = '\0';
  if (mcp_config_load(&o, ret, &err) < 0) {
    snprintf(names, sizeof names, "error: %s", err.msg);
    *ret = NULL;
    return names;
  }
  for (size_t i = 0; i < (*ret)->n; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "",
             (*ret)->servers[i].name);
  return names;
}

static bool imports(const char *want)
{
  struct mcp_config *c = NULL;
  const char *got = imported(&c);
  bool ok = strcmp(got, want) == 0;
  if (!ok)
    fprintf(stderr, "  imported `%s`, want `%s`\n", got, want);
  mcp_config_free(c);
  return ok;
}

static void test_import_claude(void)
{
  char tmpl[] = "/tmp/sandboxd-test-claude.XXXXXX", path[PATH_MAX + 64];
  if (!mkdtemp(tmpl)) {
    CHECK(!"mkdtemp");
    return;
  }
  snprintf(home, sizeof home, "%s/home", tmpl);
  snprintf(path, sizeof path, "%s/proj", tmpl);
  mkdir(home, 0700);
  mkdir(path, 0700);
  snprintf(empty, sizeof empty, "%s/empty.json", tmpl);
  put(empty, "{}");
  char old_cwd[PATH_MAX];
  CHECK(getcwd(old_cwd, sizeof old_cwd) && chdir(path) == 0 && getcwd(proj, sizeof proj));
  setenv("HOME", home, 1);
  mkdir(".claude", 0700);
  snprintf(path, sizeof path, "%s/.claude", home);
  mkdir(path, 0700);
  /* The repository's .mcp.json: a, b, and x (which the local scope also has). */
  put(".mcp.json", "{\"mcpServers\": {\"a\": {\"command\": \"proj-a\"}, \"b\": {\"command\": \"proj-b\"},"
                   " \"x\": {\"command\": \"proj-x\"}, \"bad name\\u001b[2J\": {\"command\": \"c\"}}}");

  /* Nothing approved: user and local scope only; the local scope wins over the user's. */
  claude_json("\"mcpServers\": {\"l\": {\"command\": \"local-l\"}, \"x\": {\"command\": \"local-x\"}}");
  struct mcp_config *c = NULL;
  CHECK(strcmp(imported(&c), "l,x,u") == 0 && strcmp(mcp_config_find(c, "x")->argv[0], "local-x") == 0);
  mcp_config_free(c);
  /* Approved by name in ~/.claude.json projects[cwd]; a project server shadows the user's. */
  claude_json("\"enabledMcpjsonServers\": [\"a\", \"x\"]");
  CHECK(strcmp(imported(&c), "a,x,u") == 0 && strcmp(mcp_config_find(c, "x")->argv[0], "proj-x") == 0);
  mcp_config_free(c);
  /* All, from ~/.claude/settings.json, but disabled by name wins. */
  put(".mcp.json", "{\"mcpServers\": {\"a\": {\"command\": \"proj-a\"}, \"b\": {\"command\": \"proj-b\"},"
                   " \"x\": {\"command\": \"proj-x\"}}}");
  claude_json("\"disabledMcpjsonServers\": [\"b\"]");
  snprintf(path, sizeof path, "%s/.claude/settings.json", home);
  put(path, "{\"enableAllProjectMcpServers\": true}");
  CHECK(imports("a,x,u"));
  /* The most specific source that says enableAllProjectMcpServers decides it. */
  claude_json("\"enableAllProjectMcpServers\": false, \"hasTrustDialogAccepted\": true");
  put(".claude/settings.local.json", "{\"enableAllProjectMcpServers\": false}");
  CHECK(imports("u,x"));
  put(path, "{}");
  put(".claude/settings.local.json", "{}");

  /* The repository approving its own servers counts only once the user trusted the directory. */
  put(".claude/settings.json", "{\"enableAllProjectMcpServers\": true}");
  put(".claude/settings.local.json", "{\"enabledMcpjsonServers\": [\"a\", \"b\", \"x\"]}");
  claude_json("\"allowedTools\": []");
  CHECK(imports("u,x"));
  claude_json("\"hasTrustDialogAccepted\": false");
  CHECK(imports("u,x"));
  claude_json("\"hasTrustDialogAccepted\": true");
  CHECK(imports("a,b,x,u"));
  put(".claude/settings.json", "{}");
  claude_json("\"hasTrustDialogAccepted\": true, \"disabledMcpjsonServers\": [\"x\"]");
  CHECK(imports("a,b,u,x"));
  /* A broken settings file is an error naming it, once it counts. */
  put(".claude/settings.json", "{");
  CHECK(strstr(imported(&c), ".claude/settings.json") && !c);

  CHECK(chdir(old_cwd) == 0);
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
  CHECK(system(cmd) == 0);
}

static void parse_skips(void)
{
  struct mcp_config c = {0};
  sbx_error_t err;
  CHECK(parse("{\"mcpServers\": {\"web\": {\"type\": \"http\", \"url\": \"https://x\"}, \"sse\": {\"url\": "
              "\"https://x\"},"
              "\"self\": {\"command\": \"/usr/local/bin/sandboxd\", \"args\": [\"mcp\"]}}}",
              &c, &err) == 0);
  CHECK(c.n == 0);
  struct mcp_config *heap = malloc(sizeof *heap);
  *heap = c;
  mcp_config_free(heap);
}

/* approve_host_calls writes asks for every tool its server does not say is read-only. */
static void test_tools_read_only(void)
{
  static const char list[] =
      "[{\"name\":\"read\",\"annotations\":{\"readOnlyHint\":true}},"
      "{\"name\":\"write\",\"annotations\":{\"readOnlyHint\":false}},"
      "{\"name\":\"plain\"},{\"name\":\"odd\",\"annotations\":{\"readOnlyHint\":\"yes\"}}]";
  CHECK(mcp_tools_read_only(list, strlen(list), "read"));
  CHECK(!mcp_tools_read_only(list, strlen(list), "write"));
  CHECK(!mcp_tools_read_only(list, strlen(list), "plain"));
  CHECK(!mcp_tools_read_only(list, strlen(list), "odd"));
  CHECK(!mcp_tools_read_only(list, strlen(list), "absent"));
  CHECK(!mcp_tools_read_only(NULL, 0, "read"));
  CHECK(!mcp_tools_read_only("[", 1, "read"));
}

int main(void)
{
  test_tools_read_only();
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

  sbx_warn_set_handler(record_warning);
  CHECK(stderr_bytes_during(parse_skips) == 0);
  CHECK(strstr(warnings, "f.json: server `web`: skipped: only stdio servers are supported, not http\n") &&
        strstr(warnings, "f.json: server `sse`: skipped: only stdio servers are supported, not url\n") &&
        strstr(warnings, "f.json: server `self`: skipped: it would start sandboxd's own MCP server\n"));
  CHECK(n_warnings == 3 && n_other_kind == 0);

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
  CHECK(a && a->argc == 3 && strcmp(a->argv[0], "node") == 0 && strcmp(a->argv[1], "alpha") == 0 &&
        !a->argv[3]);
  CHECK(a && a->n_env == 1 && strcmp(a->env[0], "K=v") == 0 && strcmp(a->cwd, "/tmp") == 0 &&
        strcmp(a->description, "D") == 0);
  CHECK(mcp_config_find(&c, "selfexec") && !mcp_config_find(&c, "self") && !mcp_config_find(&c, "web"));
  /* A second source: existing names win, new ones are added. */
  CHECK(parse("{\"mcpServers\": {\"a-b.c\": {\"command\": \"other\"}, \"n\": {\"command\": \"n\"}}}", &c,
              &err) == 0);
  CHECK(c.n == 3 && strcmp(mcp_config_find(&c, "a-b.c")->argv[0], "node") == 0);

  static const char *const bad[][2] = {
      {"[1]", "f.json: expected an object"},
      {"{\"mcpServers\": []}", "`mcpServers` must be an object"},
      {"{\"mcpServers\": {\"x\": 1}}", "f.json: server `x`: must be an object"},
      {"{\"mcpServers\": {\"x\": {}}}", "server `x`: `command` must be a non-empty string"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"c\", \"args\": \"a\"}}}",
       "server `x`: `args` must be an array"},
      {"{\"mcpServers\": {\"x\": {\"command\": \"c\", \"args\": [1]}}}",
       "server `x`: `args` must be an array"},
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
  n_warnings = 0;
  warnings[0] = '\0';
  CHECK(stderr_bytes_during(test_import_claude) == 0);
  CHECK(n_warnings > 0 && n_other_kind == 0 && strstr(warnings, ".mcp.json: not importing project server"));
  return check_summary("test_mcp_config");
}
