#include "mcp_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "util.h"

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
      return sbx_error_set(err, E2BIG, "`%.100s` is longer than %d bytes after expansion", in, MCP_CONFIG_MAX_VALUE);
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

#define ENTRY_FAIL(...) (sbx_error_set(err, 0, __VA_ARGS__), sbx_error_prefix(err, "%s: server `%s`", file, name))

static int parse_entry(const char *file, const char *name, const json_node_t *e, const char *self_exe,
                       struct mcp_server_config *s, bool *ret_skip, sbx_error_t *err)
{
  *ret_skip = false;
  if (json_type(e) != JSON_OBJECT)
    return ENTRY_FAIL("must be an object");
  const char *type = json_as_string(json_get(e, "type"), NULL);
  if ((type && strcmp(type, "stdio") != 0) || json_get(e, "url")) {
    log_warn("%s: server `%s`: skipped: only stdio servers are supported, not %s", file, name,
             type ? type : "url");
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
    log_warn("%s: server `%s`: skipped: it would start sandboxd's own MCP server", file, name);
    *ret_skip = true;
  }
  return 0;
}

int mcp_config_parse(const char *text, size_t len, const char *file, const char *self_exe, struct mcp_config *c,
                     sbx_error_t *err)
{
  json_node_t *root = NULL;
  if (json_parse(text, len, &root, err) < 0)
    return sbx_error_prefix(err, "%s", file);
  int rc = -1;
  const json_node_t *servers = json_get(root, "mcpServers");
  if (json_type(root) != JSON_OBJECT) {
    sbx_error_set(err, 0, "%s: expected an object with `mcpServers`", file);
    goto out;
  }
  if (servers && json_type(servers) != JSON_OBJECT) {
    sbx_error_set(err, 0, "%s: `mcpServers` must be an object", file);
    goto out;
  }
  for (size_t i = 0; i < json_object_len(servers); i++) {
    const char *name;
    json_node_t *e;
    json_object_at(servers, i, &name, &e);
    if (mcp_config_find(c, name))
      continue; /* an earlier source (or an earlier duplicate key) wins */
    if (c->n >= MCP_CONFIG_MAX_SERVERS) {
      sbx_error_set(err, 0, "%s: more than %d servers", file, MCP_CONFIG_MAX_SERVERS);
      goto out;
    }
    struct mcp_server_config *grown = realloc(c->servers, (c->n + 1) * sizeof *grown);
    if (!grown) {
      sbx_error_set(err, ENOMEM, "%s", file);
      goto out;
    }
    c->servers = grown;
    struct mcp_server_config s = {0};
    bool skip;
    if (parse_entry(file, name, e, self_exe, &s, &skip, err) < 0) {
      server_free(&s);
      goto out;
    }
    if (skip)
      server_free(&s);
    else
      c->servers[c->n++] = s;
  }
  rc = 0;
out:
  json_free(root);
  return rc;
}

static int load_file(const char *path, bool must_exist, size_t max, const char *self_exe, struct mcp_config *c,
                     sbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  size_t len;
  if (access(path, F_OK) < 0 && errno == ENOENT && !must_exist)
    return 0;
  if (read_file(path, max, &text, &len, err) < 0)
    return sbx_error_prefix(err, "MCP servers config `%s`", path);
  return mcp_config_parse(text, len, path, self_exe, c, err);
}

int mcp_config_load(const struct mcp_config_options *o, struct mcp_config **ret, sbx_error_t *err)
{
  struct mcp_config *c = calloc(1, sizeof *c);
  if (!c)
    return sbx_error_set(err, ENOMEM, "MCP config");
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = '\0';
  const char *self_exe = n > 0 ? self : NULL;
  const char *home = getenv("HOME");
  const char *env = getenv("SANDBOXD_MCP_CONFIG");
  char path[PATH_MAX];
  int r;
  if (o && o->path)
    r = load_file(o->path, true, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  else if (env && *env)
    r = load_file(env, true, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  else {
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg)
      snprintf(path, sizeof path, "%s/sandboxd/mcp.json", xdg);
    else
      snprintf(path, sizeof path, "%s/.config/sandboxd/mcp.json", home ? home : "/");
    r = load_file(path, false, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  }
  if (r == 0 && o && o->import_claude) {
    /* Claude Code's user scope, then the project's shared .mcp.json. */
    /* ~/.claude.json also holds Claude Code's history, so it may be large. */
    snprintf(path, sizeof path, "%s/.claude.json", home ? home : "/");
    r = load_file(path, false, MCP_CLAUDE_MAX_FILE, self_exe, c, err);
    if (r == 0)
      r = load_file(".mcp.json", false, MCP_CONFIG_MAX_FILE, self_exe, c, err);
  }
  if (r < 0) {
    mcp_config_free(c);
    return -1;
  }
  *ret = c;
  return 0;
}
