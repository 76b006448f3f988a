/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --output-dir`'s budget: the call directories it made there (DIR/<request_id>/,
 * found again at start, oldest first) take at most --output-max-size bytes and are kept at most
 * --output-max-age seconds. Old ones go first; a call that alone would not fit saves nothing and
 * says so. Only directories named like a request id (32 lowercase hex digits) and owned by our
 * user are counted or removed: anything else in DIR is the user's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "image/fs_root.h"
#include "mcp/mcp_internal.h"
#include "run/artifacts.h"

#define SCAN_MAX_ENTRIES 100000 /* entries looked at in one call directory at start */

static bool is_request_id(const char *name)
{
  size_t n = 0;
  for (; name[n]; n++)
    if (!((name[n] >= '0' && name[n] <= '9') || (name[n] >= 'a' && name[n] <= 'f')))
      return false;
  return n == 32;
}

/* Bytes of the regular files under dirfd/name (a directory of ours: saved files and
 * subdirectories, never links we made), within depth and a count of entries. */
static uint64_t tree_bytes(int dirfd, const char *name, int depth, size_t *budget)
{
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  char **names = NULL;
  size_t n = 0;
  uint64_t sum = 0;
  if (fd < 0 || fs_list_dir(fd, &names, &n) < 0)
    return 0;
  for (size_t i = 0; i < n && *budget; i++, (*budget)--) {
    struct stat st;
    if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (S_ISREG(st.st_mode))
      sum += (uint64_t) st.st_size;
    else if (S_ISDIR(st.st_mode) && depth < ARTIFACT_MAX_DEPTH + 1)
      sum += tree_bytes(fd, names[i], depth + 1, budget);
  }
  fs_free_names(names, n);
  return sum;
}

static int add(struct output_budget *b, const char *name, uint64_t bytes, int64_t when)
{
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 16;
    struct saved_call *v = realloc(b->v, cap * sizeof *v);
    if (!v)
      return -1;
    b->v = v;
    b->cap = cap;
  }
  struct saved_call *e = &b->v[b->n++];
  memcpy(e->name, name, sizeof e->name - 1);
  e->name[sizeof e->name - 1] = '\0';
  e->bytes = bytes;
  e->when = when;
  b->bytes += bytes;
  return 0;
}

static int by_time(const void *a, const void *b)
{
  const struct saved_call *x = a, *y = b;
  return x->when < y->when ? -1 : x->when > y->when;
}

/* Remove the oldest: its tree, and its entry. */
static void drop_oldest(struct server *srv)
{
  struct output_budget *b = &srv->output_budget;
  struct saved_call *e = &b->v[0];
  if (fs_remove_tree(srv->output_dirfd, e->name) < 0)
    log_warn("--output-dir `%s`: remove `%s`: %s", srv->output_dir, e->name, strerror(errno));
  b->bytes -= e->bytes;
  memmove(b->v, b->v + 1, --b->n * sizeof *b->v);
}

static void drop_expired(struct server *srv)
{
  struct output_budget *b = &srv->output_budget;
  int64_t now = (int64_t) time(NULL);
  while (b->n && now - b->v[0].when > (int64_t) b->max_age_s)
    drop_oldest(srv);
}

int output_budget_start(struct server *srv, sbx_error_t *err)
{
  struct output_budget *b = &srv->output_budget;
  char **names = NULL;
  size_t n = 0;
  if (fs_list_dir(srv->output_dirfd, &names, &n) < 0)
    return sbx_error_errno(err, "--output-dir `%s`: list", srv->output_dir);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    struct stat st;
    if (!is_request_id(names[i]) || fstatat(srv->output_dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      continue;
    size_t budget = SCAN_MAX_ENTRIES;
    if (add(b, names[i], tree_bytes(srv->output_dirfd, names[i], 0, &budget), (int64_t) st.st_mtime) < 0)
      rc = sbx_error_set(err, ENOMEM, "--output-dir");
  }
  fs_free_names(names, n);
  if (rc < 0)
    return -1;
  if (b->n)
    qsort(b->v, b->n, sizeof *b->v, by_time);
  drop_expired(srv);
  while (b->n && b->bytes > b->max_bytes)
    drop_oldest(srv);
  return 0;
}

int output_budget_reserve(struct server *srv, uint64_t need)
{
  struct output_budget *b = &srv->output_budget;
  drop_expired(srv);
  if (need > b->max_bytes)
    return -1;
  while (b->n && b->bytes + need > b->max_bytes)
    drop_oldest(srv);
  return 0;
}

void output_budget_add(struct server *srv, const char *name, uint64_t bytes)
{
  if (add(&srv->output_budget, name, bytes, (int64_t) time(NULL)) < 0)
    log_warn("--output-dir: out of memory: `%s` is not counted", name);
}

void output_budget_free(struct output_budget *b)
{
  free(b->v);
  *b = (struct output_budget){0};
}
