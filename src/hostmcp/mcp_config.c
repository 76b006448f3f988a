/* SPDX-License-Identifier: Apache-2.0 */
#include "hostmcp/mcp_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/paths.h"
#include "base/util.h"
#include "base/warn.h"

static bool name_ok(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > MCP_CONFIG_MAX_NAME)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
          *s == '-' || *s == '.'))
      return false;
  return true;
}

int mcp_config_expand(const char *in, char **ret, sbx_error_t *err)
{
  strbuf_t out = {0};
  int r = strbuf_append(&out, "", 0);
  for (const char *p = in; *p && r == 0;) {
    const char *start = strstr(p, "${");
    if (!start) {
      r = strbuf_append(&out, p, strlen(p));
      break;
    }
    r = strbuf_append(&out, p, (size_t) (start - p));
    const char *end = strchr(start + 2, '}');
    if (!end) {
      strbuf_free(&out);
      return sbx_error_set(err, 0, "unterminated `${` in `%.100s`", in);
    }
    size_t inner = (size_t) (end - start - 2);
    char var[256];
    if (inner == 0 || inner >= sizeof var) {
      strbuf_free(&out);
      return sbx_error_set(err, 0, "bad variable reference in `%.100s`", in);
    }
    memcpy(var, start + 2, inner);
    var[inner] = '\0';
    char *def = strstr(var, ":-");
    if (def) {
      *def = '\0';
      def += 2;
    }
    const char *val = getenv(var);
    if (!val || (def && !*val))
      val = def;
    if (!val) {
      strbuf_free(&out);
      return sbx_error_set(err, 0, "variable `%s` is not set (use ${%s:-default} for a default)", var, var);
    }
    r = strbuf_append(&out, val, strlen(val));
    p = end + 1;
    if (out.len > MCP_CONFIG_MAX_VALUE) {
      strbuf_free(&out);
      return sbx_error_set(err, E2BIG, "`%.100s` is longer than %d bytes after expansion", in,
                           MCP_CONFIG_MAX_VALUE);
    }
  }
  if (r < 0) {
    strbuf_free(&out);
    return sbx_error_set(err, ENOMEM, "expand");
  }
  *ret = out.data;
  return 0;
}

static void server_free(struct mcp_server_config *s)
{
  for (size_t i = 0; s->argv && i < s->argc; i++)
    free(s->argv[i]);
  for (size_t i = 0; s->env && i < s->n_env; i++)
    free(s->env[i]);
  free(s->argv);
  free(s->env);
  free(s->name);
  free(s->cwd);
  free(s->description);
  free(s->source);
}

void mcp_config_free(struct mcp_config *c)
{
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    server_free(&c->servers[i]);
  free(c->servers);
  free(c);
}

const struct mcp_server_config *mcp_config_find(const struct mcp_config *c, const char *name)
{
  for (size_t i = 0; c && i < c->n; i++)
    if (strcmp(c->servers[i].name, name) == 0)
      return &c->servers[i];
  return NULL;
}

/* Would this entry start sandboxd's own MCP server (and so recurse)? */
static bool is_self(const struct mcp_server_config *s, const char *self_exe)
{
  const char *base = strrchr(s->argv[0], '/');
  base = base ? base + 1 : s->argv[0];
  bool self = strcmp(base, "sandboxd") == 0;
  if (!self && self_exe && strchr(s->argv[0], '/')) {
    char real[PATH_MAX];
    self = realpath(s->argv[0], real) && strcmp(real, self_exe) == 0;
  }
  if (!self)
    return false;
  for (size_t i = 1; i < s->argc; i++)
    if (strcmp(s->argv[i], "mcp") == 0)
      return true;
  return false;
}

#define ENTRY_FAIL(...)                                                                                      \
  (sbx_error_set(err, 0, __VA_ARGS__), sbx_error_prefix(err, "%s: server `%s`", file, name))

static int parse_entry(const char *file, const char *name, const json_node_t *e, const char *self_exe,
                       struct mcp_server_config *s, bool *ret_skip, sbx_error_t *err)
{
  *ret_skip = false;
  if (json_type(e) != JSON_OBJECT)
    return ENTRY_FAIL("must be an object");
  const char *type = json_as_string(json_get(e, "type"), NULL);
  if ((type && strcmp(type, "stdio") != 0) || json_get(e, "url")) {
    sbx_warn(SBX_WARN_CONFIG, "%s: server `%s`: skipped: only stdio servers are supported, not %s", file,
             name, type ? type : "url");
    *ret_skip = true;
    return 0;
  }
  if (!name_ok(name))
    return ENTRY_FAIL("the name must be 1 to %d of A-Z a-z 0-9 _ - .", MCP_CONFIG_MAX_NAME);
  const json_node_t *cmd = json_get(e, "command");
  if (!json_as_string(cmd, NULL) || !*json_as_string(cmd, NULL))
    return ENTRY_FAIL("`command` must be a non-empty string");
  const json_node_t *args = json_get(e, "args");
  if (args && json_type(args) != JSON_ARRAY && json_type(args) != JSON_NULL)
    return ENTRY_FAIL("`args` must be an array of strings");
  size_t nargs = json_array_len(args);
  if (nargs > MCP_CONFIG_MAX_ARGS)
    return ENTRY_FAIL("more than %d `args`", MCP_CONFIG_MAX_ARGS);
  const json_node_t *env = json_get(e, "env");
  if (env && json_type(env) != JSON_OBJECT && json_type(env) != JSON_NULL)
    return ENTRY_FAIL("`env` must be an object of strings");
  size_t nenv = json_object_len(env);
  if (nenv > MCP_CONFIG_MAX_ENV)
    return ENTRY_FAIL("more than %d `env` entries", MCP_CONFIG_MAX_ENV);
  const json_node_t *cwd = json_get(e, "cwd"), *desc = json_get(e, "description");
  if (cwd && json_type(cwd) != JSON_NULL && !json_as_string(cwd, NULL))
    return ENTRY_FAIL("`cwd` must be a string");
  if (desc && json_type(desc) != JSON_NULL && !json_as_string(desc, NULL))
    return ENTRY_FAIL("`description` must be a string");

  if (!(s->name = strdup(name)) || !(s->source = strdup(file)) ||
      !(s->description = strdup(json_as_string(desc, NULL) ? json_as_string(desc, NULL) : "")) ||
      !(s->argv = calloc(nargs + 2, sizeof *s->argv)) || !(s->env = calloc(nenv + 1, sizeof *s->env)))
    return sbx_error_set(err, ENOMEM, "%s", file);
  if (mcp_config_expand(json_as_string(cmd, NULL), &s->argv[0], err) < 0)
    return sbx_error_prefix(err, "%s: server `%s`: command", file, name);
  s->argc = 1;
  for (size_t i = 0; i < nargs; i++) {
    const char *a = json_as_string(json_array_at(args, i), NULL);
    if (!a)
      return ENTRY_FAIL("`args` must be an array of strings");
    if (mcp_config_expand(a, &s->argv[s->argc], err) < 0)
      return sbx_error_prefix(err, "%s: server `%s`: args", file, name);
    s->argc++;
  }
  for (size_t i = 0; i < nenv; i++) {
    const char *k;
    json_node_t *v;
    json_object_at(env, i, &k, &v);
    size_t vlen;
    const char *vs = json_as_string(v, &vlen);
    if (!vs || !*k || strchr(k, '=') || strlen(vs) != vlen)
      return ENTRY_FAIL("`env` must map names to strings");
    _cleanup_free_ char *val = NULL;
    if (mcp_config_expand(vs, &val, err) < 0)
      return sbx_error_prefix(err, "%s: server `%s`: env `%s`", file, name, k);
    if (asprintf(&s->env[s->n_env], "%s=%s", k, val) < 0) {
      s->env[s->n_env] = NULL;
      return sbx_error_set(err, ENOMEM, "%s", file);
    }
    s->n_env++;
  }
  if (json_as_string(cwd, NULL) && mcp_config_expand(json_as_string(cwd, NULL), &s->cwd, err) < 0)
    return sbx_error_prefix(err, "%s: server `%s`: cwd", file, name);
  if (is_self(s, self_exe)) {
    sbx_warn(SBX_WARN_CONFIG, "%s: server `%s`: skipped: it would start sandboxd's own MCP server", file,
             name);
    *ret_skip = true;
  }
  return 0;
}

/* Which of a project's .mcp.json servers Claude Code would start (see import_claude). Each source is
 * an object holding Claude Code's approval keys, or NULL; later sources are the more specific. */
enum {
  APPROVE_PROJECT_ENTRY,
  APPROVE_USER_SETTINGS,
  APPROVE_PROJECT_SETTINGS,
  APPROVE_LOCAL_SETTINGS,
  N_APPROVE
};
struct approvals {
  const json_node_t *src[N_APPROVE];
  strbuf_t skipped; /* "`a`, `b`": the names not approved, for one warning */
  size_t n_skipped, n_named;
};

static bool listed(const json_node_t *arr, const char *name)
{
  for (size_t i = 0; i < json_array_len(arr); i++) {
    const char *s = json_as_string(json_array_at(arr, i), NULL);
    if (s && strcmp(s, name) == 0)
      return true;
  }
  return false;
}

/* As Claude Code decides: disabled anywhere wins, then enabled by name anywhere, then
 * enableAllProjectMcpServers from the most specific source that sets it. */
static bool approved(const struct approvals *a, const char *name)
{
  for (size_t i = 0; i < N_APPROVE; i++)
    if (listed(json_get(a->src[i], "disabledMcpjsonServers"), name))
      return false;
  for (size_t i = 0; i < N_APPROVE; i++)
    if (listed(json_get(a->src[i], "enabledMcpjsonServers"), name))
      return true;
  for (size_t i = N_APPROVE; i-- > 0;) {
    bool all;
    if (json_as_bool(json_get(a->src[i], "enableAllProjectMcpServers"), &all) == 0)
      return all;
  }
  return false;
}

#define MAX_SKIPPED_NAMED 8

static void note_skipped(struct approvals *a, const char *name)
{
  /* Only names that are names reach stderr: this is repository text. */
  a->n_skipped++;
  if (a->n_named < MAX_SKIPPED_NAMED && name_ok(name) &&
      strbuf_printf(&a->skipped, "%s`%s`", a->n_named ? ", " : "", name) == 0)
    a->n_named++;
}

/* Add the servers of one `mcpServers` object; with gate, only the approved ones. */
static int add_servers(const json_node_t *servers, const char *file, const char *self_exe,
                       struct approvals *gate, struct mcp_config *c, sbx_error_t *err)
{
  if (servers && json_type(servers) != JSON_OBJECT)
    return sbx_error_set(err, 0, "%s: `mcpServers` must be an object", file);
  for (size_t i = 0; i < json_object_len(servers); i++) {
    const char *name;
    json_node_t *e;
    json_object_at(servers, i, &name, &e);
    if (mcp_config_find(c, name))
      continue; /* an earlier source (or an earlier duplicate key) wins */
    if (gate && !approved(gate, name)) {
      note_skipped(gate, name);
      continue;
    }
    if (c->n >= MCP_CONFIG_MAX_SERVERS)
      return sbx_error_set(err, 0, "%s: more than %d servers", file, MCP_CONFIG_MAX_SERVERS);
    struct mcp_server_config *grown = realloc(c->servers, (c->n + 1) * sizeof *grown);
    if (!grown)
      return sbx_error_set(err, ENOMEM, "%s", file);
    c->servers = grown;
    struct mcp_server_config s = {0};
    bool skip;
    if (parse_entry(file, name, e, self_exe, &s, &skip, err) < 0) {
      server_free(&s);
      return -1;
    }
    if (skip)
      server_free(&s);
    else
      c->servers[c->n++] = s;
  }
  return 0;
}

int mcp_config_parse(const char *text, size_t len, const char *file, const char *self_exe,
                     struct mcp_config *c, sbx_error_t *err)
{
  json_node_t *root = NULL;
  if (json_parse(text, len, &root, err) < 0)
    return sbx_error_prefix(err, "%s", file);
  int rc = json_type(root) != JSON_OBJECT
               ? sbx_error_set(err, 0, "%s: expected an object with `mcpServers`", file)
               : add_servers(json_get(root, "mcpServers"), file, self_exe, NULL, c, err);
  json_free(root);
  return rc;
}

/* A JSON file, or *ret NULL when it does not exist (and must_exist is false). */
static int load_json(const char *path, bool must_exist, size_t max, json_node_t **ret, sbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  size_t len;
  *ret = NULL;
  if (!must_exist && access(path, F_OK) < 0 && errno == ENOENT)
    return 0;
  if (read_file(path, max, &text, &len, err) < 0 || json_parse(text, len, ret, err) < 0)
    return sbx_error_prefix(err, "MCP servers config `%s`", path);
  if (json_type(*ret) != JSON_OBJECT) {
    json_free(*ret);
    *ret = NULL;
    return sbx_error_set(err, 0, "%s: expected an object", path);
  }
  return 0;
}

static int load_file(const char *path, bool must_exist, size_t max, const char *self_exe,
                     struct mcp_config *c, sbx_error_t *err)
{
  json_node_t *root;
  if (load_json(path, must_exist, max, &root, err) < 0)
    return -1;
  int rc = add_servers(json_get(root, "mcpServers"), path, self_exe, NULL, c, err);
  json_free(root);
  return rc;
}

/* --import-claude: Claude Code's servers, but only those Claude Code itself would start here.
 *
 * ~/.claude.json holds the user scope (`mcpServers`) and, under `projects[<cwd>]`, the local scope
 * (this user in this directory): both are the user's own. ./.mcp.json is the project scope, and it is
 * repository content: Claude Code starts its servers only once the user approved them, by name
 * (`enabledMcpjsonServers`) or all (`enableAllProjectMcpServers`), unless `disabledMcpjsonServers`
 * names them. Approvals are read from projects[<cwd>] and ~/.claude/settings.json, and from the
 * project's own .claude/settings.json and .claude/settings.local.json only once the user accepted
 * Claude Code's trust dialog for this directory (projects[<cwd>].hasTrustDialogAccepted), since those
 * are repository content too: a repository approving its own servers is CVE-2025-59536.
 * Precedence is Claude Code's: local, then project, then user scope. */
static int import_claude(const char *home, const char *self_exe, struct mcp_config *c, sbx_error_t *err)
{
  char path[PATH_MAX], cwd[PATH_MAX];
  json_node_t *claude = NULL, *user_settings = NULL, *project_settings = NULL, *local_settings = NULL;
  struct approvals gate = {0};
  int rc = -1;
  /* ~/.claude.json also holds Claude Code's history, so it may be large. */
  if (bufprintf(path, sizeof path, err, "%s/.claude.json", home) < 0) {
    sbx_error_prefix(err, "--import-claude");
    goto out;
  }
  if (load_json(path, false, MCP_CLAUDE_MAX_FILE, &claude, err) < 0)
    goto out;
  /* Claude Code keys a project by the directory it was started in. */
  const json_node_t *project = getcwd(cwd, sizeof cwd) ? json_get(json_get(claude, "projects"), cwd) : NULL;
  bool trusted = false;
  if (json_as_bool(json_get(project, "hasTrustDialogAccepted"), &trusted) < 0)
    trusted = false;
  if (bufprintf(path, sizeof path, err, "%s/.claude/settings.json", home) < 0 ||
      load_json(path, false, MCP_CONFIG_MAX_FILE, &user_settings, err) < 0)
    goto out;
  if (trusted &&
      (load_json(".claude/settings.json", false, MCP_CONFIG_MAX_FILE, &project_settings, err) < 0 ||
       load_json(".claude/settings.local.json", false, MCP_CONFIG_MAX_FILE, &local_settings, err) < 0))
    goto out;
  gate.src[APPROVE_PROJECT_ENTRY] = project;
  gate.src[APPROVE_USER_SETTINGS] = user_settings;
  gate.src[APPROVE_PROJECT_SETTINGS] = project_settings;
  gate.src[APPROVE_LOCAL_SETTINGS] = local_settings;

  json_node_t *mcp_json = NULL;
  if (bufprintf(path, sizeof path, err, "%s/.claude.json", home) < 0 ||
      add_servers(json_get(project, "mcpServers"), path, self_exe, NULL, c, err) < 0 ||
      load_json(".mcp.json", false, MCP_CONFIG_MAX_FILE, &mcp_json, err) < 0)
    goto out;
  rc = add_servers(json_get(mcp_json, "mcpServers"), ".mcp.json", self_exe, &gate, c, err);
  json_free(mcp_json);
  if (rc < 0)
    goto out;
  rc = add_servers(json_get(claude, "mcpServers"), path, self_exe, NULL, c, err);
  if (rc == 0 && gate.n_skipped) {
    if (gate.n_skipped > gate.n_named)
      strbuf_printf(&gate.skipped, "%s%zu more", gate.n_named ? " and " : "", gate.n_skipped - gate.n_named);
    sbx_warn(
        SBX_WARN_CONFIG,
        ".mcp.json: not importing project server%s %s: Claude Code has not approved %s for this directory "
        "(approve in Claude Code, or list in `enabledMcpjsonServers` in ~/.claude/settings.json)",
        gate.n_skipped > 1 ? "s" : "", gate.skipped.data, gate.n_skipped > 1 ? "them" : "it");
  }
out:
  strbuf_free(&gate.skipped);
  json_free(local_settings);
  json_free(project_settings);
  json_free(user_settings);
  json_free(claude);
  return rc;
}

int mcp_config_load(const struct mcp_config_options *o, struct mcp_config **ret, sbx_error_t *err)
{
  struct mcp_config *c = calloc(1, sizeof *c);
  if (!c)
    return sbx_error_set(err, ENOMEM, "MCP config");
  char self[PATH_MAX];
  const char *self_exe = paths_exe(self, NULL) == 0 ? self : NULL;
  const char *home = getenv("HOME");
  const char *env = getenv("SANDBOXD_MCP_CONFIG");
  char path[PATH_MAX];
  int r;
  if (o && o->path)
    r = load_file(o->path, true, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  else if (env && *env)
    r = load_file(env, true, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  else {
    char dir[PATH_MAX];
    r = paths_config_dir(dir, err) < 0 ? -1 : bufprintf(path, sizeof path, err, "%s/mcp.json", dir);
    if (r < 0)
      sbx_error_prefix(err, "MCP servers config");
    else
      r = load_file(path, false, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  }
  if (r == 0 && o && o->import_claude)
    r = import_claude(home ? home : "/", self_exe, c, err);
  if (r < 0) {
    mcp_config_free(c);
    return -1;
  }
  *ret = c;
  return 0;
}
