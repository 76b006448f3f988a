/* SPDX-License-Identifier: Apache-2.0 */
/* The host directories of `sandboxd mcp`'s sandboxes (mcp_binds.h): the server's --bind options and
 * the client's roots. A root comes from the client, so everything about it is checked here before
 * it becomes a bind: its URI, its path, what is there on the host, and the name it gets. */
#include "mcp/mcp_binds.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"
#include "run/binds.h"

static int hexval(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int root_uri_path(const char *uri, char *path, size_t len, const char **why)
{
  if (strncasecmp(uri, "file://", 7) != 0)
    return *why = "not a file:// URI", -1;
  const char *p = uri + 7, *slash = strchr(p, '/');
  if (!slash)
    return *why = "no path", -1;
  size_t host = (size_t) (slash - p);
  if (host && !(host == 9 && strncasecmp(p, "localhost", 9) == 0))
    return *why = "not a local file (a host in the URI)", -1;
  if (strpbrk(slash, "?#"))
    return *why = "a query or fragment in the URI", -1;
  size_t n = 0;
  for (const char *c = slash; *c; c++) {
    char ch = *c;
    if (ch == '%') {
      int hi = hexval(c[1]), lo = hi < 0 ? -1 : hexval(c[2]);
      if (lo < 0)
        return *why = "a bad percent-escape", -1;
      ch = (char) (hi << 4 | lo);
      if (ch == '\0' || ch == '/')
        return *why = "an escaped NUL or slash", -1;
      c += 2;
    }
    if (n + 1 >= len)
      return *why = "the path is too long", -1;
    path[n++] = ch;
  }
  path[n] = '\0';
  /* A trailing slash is allowed ("file:///p/"); "/" itself is the whole host. */
  while (n > 1 && path[n - 1] == '/')
    path[--n] = '\0';
  if (!path_is_clean_abs(path))
    return *why = strcmp(path, "/") == 0 ? "the host's / is never bound" : "`.`, `..` or an empty component",
           -1;
  return 0;
}

static bool name_taken(const char *name, const struct mcp_root *taken, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(taken[i].name, name) == 0)
      return true;
  return false;
}

void root_name(const char *path, const struct mcp_root *taken, size_t n, char name[ROOT_NAME_MAX + 8])
{
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t k = 0;
  for (; base[k] && k < ROOT_NAME_MAX; k++) {
    char c = base[k];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || (c == '.' && k > 0);
    name[k] = ok ? c : '_';
  }
  name[k] = '\0';
  if (!k)
    memcpy(name, "root", 5);
  char stem[ROOT_NAME_MAX + 1];
  memcpy(stem, name, strlen(name) + 1);
  /* ROOTS_MAX names: one of name, name-2 .. name-ROOTS_MAX is free. */
  for (unsigned i = 2; name_taken(name, taken, n) && i <= ROOTS_MAX + 1; i++)
    bufprintf_cut(name, ROOT_NAME_MAX + 8, "%s-%u", stem, i);
}

static void root_free(struct mcp_root *r)
{
  if (r->src)
    close(r->fd);
  free(r->src);
  free(r->dst);
  *r = (struct mcp_root){0};
}

void mcp_roots_free(struct mcp_roots *roots)
{
  for (size_t i = 0; i < roots->n; i++)
    root_free(&roots->r[i]);
  roots->n = 0;
}

void mcp_binds_rebuild(struct server *srv)
{
  size_t n = host_servers_bind(&srv->hs, &srv->spec_binds[0]);
  for (size_t i = 0; i < srv->binds.n; i++)
    srv->spec_binds[n++] = srv->binds.binds[i];
  for (size_t i = 0; i < srv->roots.n; i++)
    srv->spec_binds[n++] =
        (struct sbx_bind){.src = srv->roots.r[i].src, .dst = srv->roots.r[i].dst, .fd = srv->roots.r[i].fd};
  srv->n_spec_binds = n;
}

/* Log lines are ours: a URI's control characters (a newline could forge a line) become `?`. */
static void shown(const char *s, char *buf, size_t len)
{
  bufprintf_cut(buf, len, "%s", s);
  for (char *c = buf; *c; c++)
    if ((unsigned char) *c < 0x20 || *c == 0x7f)
      *c = '?';
}

static void roots_log(struct server *srv, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void roots_log(struct server *srv, int level, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level >= 3)
    log_warn("%s", msg);
  mcp_log(srv, level, msg);
}

/* A root's directory, opened once and held as every bind source is (binds.h), and refused inside a
 * --bind-rw tree: roots come and go while sandboxes run, and one could have swapped it. */
static int root_open(const char *path, const struct hostfile_guard *rw, char **ret_src, int *ret_fd,
                     sbx_error_t *e)
{
  _cleanup_free_ char *src = NULL;
  _cleanup_close_ int fd = -1;
  if (bind_source_open("its directory", path, rw, &src, &fd, e) < 0 ||
      bind_source_outside("its directory", src, rw, e) < 0)
    return -1;
  *ret_src = TAKE_PTR(src);
  *ret_fd = TAKE_FD(fd);
  return 0;
}

/* One root of the client's list into r (src, name, dst), or -1 and why it is skipped (in e's
 * message, or a constant). */
static int root_check(const json_node_t *root, const struct mcp_root *taken, size_t n, struct mcp_root *r,
                      const struct hostfile_guard *rw, char *uri_shown, size_t shown_len, sbx_error_t *e,
                      const char **why)
{
  size_t ulen;
  const char *uri = json_as_string(json_get(root, "uri"), &ulen);
  shown(uri ? uri : "", uri_shown, shown_len);
  if (!uri || strlen(uri) != ulen)
    return *why = "`uri` is not a string", -1;
  char path[PATH_MAX];
  if (root_uri_path(uri, path, sizeof path, why) < 0)
    return -1;
  struct stat st;
  if (lstat(path, &st) < 0)
    return *why = errno == ENOENT ? "no such directory" : strerror(errno), -1;
  if (S_ISLNK(st.st_mode))
    return *why = "a symbolic link", -1;
  if (!S_ISDIR(st.st_mode))
    return *why = "not a directory", -1;
  _cleanup_free_ char *src = NULL;
  _cleanup_close_ int fd = -1;
  if (root_open(path, rw, &src, &fd, e) < 0)
    return *why = e->msg, -1;
  if ((*why = bind_source_refusal(src, fd)))
    return -1;
  for (size_t i = 0; i < n; i++)
    if (strcmp(taken[i].src, src) == 0)
      return *why = "the same directory as another root", -1;
  root_name(path, taken, n, r->name);
  if (asprintf(&r->dst, ROOTS_DIR "/%s", r->name) < 0) {
    r->dst = NULL;
    return *why = "out of memory", -1;
  }
  r->src = TAKE_PTR(src);
  r->fd = TAKE_FD(fd);
  return 0;
}

static bool same_inode(int a, int b)
{
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Equal paths are not enough: a directory made anew at a root's path is bound anew. */
static bool roots_equal(const struct mcp_roots *a, const struct mcp_root *b, size_t n)
{
  if (a->n != n)
    return false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(a->r[i].src, b[i].src) != 0 || strcmp(a->r[i].name, b[i].name) != 0 ||
        !same_inode(a->r[i].fd, b[i].fd))
      return false;
  return true;
}

bool mcp_roots_update(struct server *srv, const json_node_t *result, const json_node_t *error)
{
  if (error || !result) {
    const char *msg = json_as_string(json_get(error, "message"), NULL);
    char m[200];
    shown(msg ? msg : "no result", m, sizeof m);
    roots_log(srv, 3, "roots/list: the client answered with an error (%s); the roots stay as they were", m);
    return false;
  }
  const json_node_t *list = json_get(result, "roots");
  if (json_type(list) != JSON_ARRAY) {
    roots_log(srv, 3, "roots/list: the answer has no `roots` array; the roots stay as they were");
    return false;
  }
  struct mcp_root next[ROOTS_MAX] = {0};
  size_t n = 0, total = json_array_len(list), i = 0, skipped = 0;
  struct hostfile_guard rw = bind_opts_guard(&srv->binds);
  /* Bounded work and log lines, whatever the client sends. */
  for (; i < total && i < ROOTS_EXAMINED_MAX && n < ROOTS_MAX; i++) {
    char u[256];
    const char *why = NULL;
    sbx_error_t e = {0};
    if (root_check(json_array_at(list, i), next, n, &next[n], &rw, u, sizeof u, &e, &why) == 0)
      n++;
    else if (++skipped <= ROOTS_LOGGED_MAX)
      roots_log(srv, 3, "root `%s` skipped: %s", u, why);
  }
  if (skipped > ROOTS_LOGGED_MAX)
    roots_log(srv, 3, "roots/list: %zu more roots skipped", skipped - ROOTS_LOGGED_MAX);
  if (i < total)
    roots_log(srv, 3, "roots/list: %zu roots; only the first %d usable ones (of the first %d) are bound",
              total, ROOTS_MAX, ROOTS_EXAMINED_MAX);
  if (roots_equal(&srv->roots, next, n)) {
    for (size_t k = 0; k < n; k++)
      root_free(&next[k]);
    return false;
  }
  mcp_roots_free(&srv->roots);
  memcpy(srv->roots.r, next, n * sizeof *next);
  srv->roots.n = n;
  mcp_binds_rebuild(srv);
  roots_log(srv, 1, "%zu roots bound read-only under " ROOTS_DIR, n);
  return true;
}

void mcp_binds_write_capabilities(const struct server *srv, json_writer_t *w)
{
  /* Destinations only: the host paths behind them say nothing the code needs, and would tell
   * the model (and whatever steers it) the host's layout and the user's name. */
  json_key(w, "binds");
  json_arr_begin(w);
  for (size_t i = 0; i < srv->binds.n; i++) {
    json_obj_begin(w);
    json_kv_str(w, "destination", srv->binds.binds[i].dst);
    json_kv_bool(w, "writable", srv->binds.binds[i].rw);
    json_obj_end(w);
  }
  json_arr_end(w);
  json_key(w, "roots");
  json_obj_begin(w);
  json_kv_bool(w, "enabled", srv->roots.enabled);
  json_kv_bool(w, "client_supports", srv->roots.client_has);
  json_kv_str(w, "directory", ROOTS_DIR);
  json_key(w, "mounted");
  json_arr_begin(w);
  for (size_t i = 0; i < srv->roots.n; i++) {
    json_obj_begin(w);
    json_kv_str(w, "name", srv->roots.r[i].name);
    json_kv_str(w, "destination", srv->roots.r[i].dst);
    json_kv_bool(w, "writable", false);
    json_obj_end(w);
  }
  json_arr_end(w);
  json_obj_end(w);
}
