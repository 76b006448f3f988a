/* SPDX-License-Identifier: Apache-2.0 */
/* The languages of `sandboxd mcp` (mcp_lang.h). Python runs the runner (runner.py); the others
 * read their code from stdin, written there by the server (mcp_job.c) and then closed:
 *  - bash: `bash -c 'eval "$(/usr/bin/cat)"'`: the code is read whole, then run as `bash -c CODE`
 *    runs it (the same parser, $0, exit status, traps, line numbers), except that
 *    $BASH_EXECUTION_STRING is this line and a syntax error says `eval:` where -c says `-c:`.
 *    cat, not `$(</dev/stdin)`: reopening the pipe through /proc is refused inside (the pipe is
 *    sandboxd's, on the host), and bash's own `read`/`mapfile` read a pipe a byte per syscall;
 *  - javascript: `node --input-type=module -`: the code is an ES module (top-level await).
 * Either way the code's own stdin is then at EOF, as run_python's /dev/null is. */
#include "mcp/mcp_lang.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/paths.h"
#include "base/util.h"
#include "run/lang.h"

static const char *const names[MCP_LANG_COUNT] = {"python", "bash", "javascript"};

static char *bash_argv[] = {"/usr/bin/bash", "-c", "eval \"$(/usr/bin/cat)\"", NULL};
static char *node_argv[] = {"/usr/bin/node", "--input-type=module", "-", NULL};

const char *mcp_lang_name(enum mcp_lang l)
{
  return l < MCP_LANG_COUNT ? names[l] : "?";
}

int mcp_lang_parse(const char *s, enum mcp_lang *ret)
{
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    if (strcmp(s, names[l]) == 0) {
      *ret = (enum mcp_lang) l;
      return 0;
    }
  return -1;
}

int mcp_lang_parse_list(const char *opt, const char *list, unsigned *ret_mask, sbx_error_t *err)
{
  unsigned mask = 0;
  const char *p = list;
  for (;;) {
    size_t n = strcspn(p, ",");
    char name[32];
    enum mcp_lang l;
    if (n == 0 || n >= sizeof name)
      return sbx_error_set(
          err, 0, "%s `%s`: expected languages separated by commas (python, bash, javascript)", opt, list);
    memcpy(name, p, n);
    name[n] = '\0';
    if (mcp_lang_parse(name, &l) < 0)
      return sbx_error_set(err, 0, "%s `%s`: unknown language `%s` (python, bash, javascript)", opt, list,
                           name);
    mask |= MCP_LANG_BIT(l);
    if (!p[n])
      break;
    p += n + 1;
  }
  *ret_mask = mask;
  return 0;
}

char **mcp_lang_argv(enum mcp_lang l)
{
  return l == MCP_LANG_BASH ? bash_argv : l == MCP_LANG_JAVASCRIPT ? node_argv : NULL;
}

/* Whether root holds the interpreter of argv[0] (a link, as /usr/bin/node often is, counts). */
static bool has_program(const char *root, const char *program)
{
  char p[PATH_MAX];
  struct stat st;
  return bufprintf(p, sizeof p, NULL, "%s%s", root, program) == 0 && lstat(p, &st) == 0;
}

int mcp_lang_rootfs(enum mcp_lang l, const char *server_rootfs, char **ret_path, sbx_error_t *err)
{
  /* The rootfs of each language is lang.c's (the one table, exec's too): its own tree in the
   * store, or none (the server's). */
  const struct sbx_lang *sl = lang_by_name(names[l]);
  char *path = NULL;
  if (sl && sl->rootfs) {
    sbx_error_t e = {0};
    if (rootfs_find_for(NULL, sl->rootfs, sl->program, &path, &e) < 0) {
      *ret_path = NULL; /* not built: the tool does not offer it */
      return 0;
    }
  } else if (!(path = strdup(server_rootfs))) {
    return sbx_error_set(err, ENOMEM, "rootfs");
  }
  if (l != MCP_LANG_PYTHON && (!has_program(path, mcp_lang_argv(l)[0]) ||
                               (l == MCP_LANG_BASH && !has_program(path, "/usr/bin/cat")))) {
    free(path);
    path = NULL;
  }
  *ret_path = path;
  return 0;
}

const char *mcp_lang_hint(enum mcp_lang l)
{
  const struct sbx_lang *sl = lang_by_name(names[l]);
  return sl && sl->build_hint ? (paths_build_tree() ? sl->build_hint : sl->installed_hint)
                              : "the server's --rootfs";
}
