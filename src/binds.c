/* --bind and --bind-rw, shared by `sandboxd exec` and `sandboxd mcp` (binds.h). Where a
 * destination lands and what it may be is decided inside the sandbox (mount.c); this is the
 * command-line side: the syntax, the limits, and the host source. */
#include "binds.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hostfile.h"

bool path_is_clean_abs(const char *p)
{
  if (p[0] != '/' || !p[1])
    return false;
  for (const char *c = p; *c;) {
    const char *next = strchr(c + 1, '/');
    size_t len = next ? (size_t) (next - c - 1) : strlen(c + 1);
    if (len == 0 && next)
      return false;
    if ((len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
      return false;
    if (!next)
      break;
    c = next;
  }
  return true;
}

int bind_opts_add(struct bind_opts *b, const char *arg, bool rw, sbx_error_t *err)
{
  if (b->n >= BIND_OPTS_MAX)
    return sbx_error_set(err, 0, "too many --bind options (at most %d)", BIND_OPTS_MAX);
  const char *colon = strrchr(arg, ':');
  if (!colon || colon == arg || !colon[1])
    return sbx_error_set(err, 0, "--bind%s `%s`: expected SRC:DST", rw ? "-rw" : "", arg);
  const char *dst = colon + 1;
  if (!path_is_clean_abs(dst))
    return sbx_error_set(err, 0, "--bind `%s`: DST must be an absolute path without `..`, and not `/`", arg);
  size_t slen = (size_t) (colon - arg), dlen = strlen(dst);
  if (slen >= PATH_MAX || dlen >= PATH_MAX)
    return sbx_error_set(err, ENAMETOOLONG, "--bind `%s`", arg);
  while (dlen > 1 && dst[dlen - 1] == '/')
    dlen--;
  char *s = strndup(arg, slen), *d = strndup(dst, dlen);
  if (!s || !d) {
    free(s);
    free(d);
    return sbx_error_set(err, ENOMEM, "--bind");
  }
  b->binds[b->n++] = (struct sbx_bind){.src = s, .dst = d, .rw = rw};
  return 0;
}

int bind_opts_resolve(struct bind_opts *b, sbx_error_t *err)
{
  /* Bind sources must exist; they are opened by the sandbox itself. */
  for (size_t i = 0; i < b->n; i++) {
    char *real = realpath(b->binds[i].src, NULL);
    if (!real)
      return sbx_error_errno(err, "--bind source `%s`", b->binds[i].src);
    free((char *) b->binds[i].src);
    b->binds[i].src = real;
  }
  return 0;
}

void bind_opts_writable_trees(const struct bind_opts *b, struct hostfile_tree *trees, size_t *n_trees)
{
  for (size_t i = 0; i < b->n; i++)
    if (b->binds[i].rw)
      hostfile_guard_add(trees, n_trees, b->binds[i].src);
}

void bind_opts_free(struct bind_opts *b)
{
  for (size_t i = 0; i < b->n; i++) {
    free((char *) b->binds[i].src);
    free((char *) b->binds[i].dst);
  }
  b->n = 0;
}
