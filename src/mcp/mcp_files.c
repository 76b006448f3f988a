/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`'s files out: the --output-dir held open from the start, and for each call what
 * its /workspace/out held (artifacts.h) and its captured output (capture.h), saved in a fresh
 * DIR/<request_id>/ and written into the result. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/hostfile.h"
#include "base/log.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"
#include "mcp/shape.h"
#include "run/artifacts.h"
#include "sandbox/sandbox.h"

int output_dir_open(const char *path, const struct hostfile_guard *guard, int *ret_fd, char **ret_path,
                    sbx_error_t *err)
{
  /* The directory part is walked as for every host file sandboxd writes (hostfile.h); the last
   * component must be the directory itself, not a link to one. */
  char buf[PATH_MAX];
  if (bufprintf(buf, sizeof buf, NULL, "%s", path) < 0)
    return sbx_error_set(err, ENAMETOOLONG, "--output-dir `%s`: too long", path);
  for (size_t l = strlen(buf); l > 1 && buf[l - 1] == '/'; l--)
    buf[l - 1] = '\0';
  _cleanup_close_ int parent = -1;
  const char *name;
  if (!strcmp(buf, "/"))
    return sbx_error_set(err, EINVAL, "--output-dir `%s`: give a directory of its own, not /", path);
  int rc = hostfile_open_parent(buf, guard, 0, &parent, &name, err);
  if (rc < 0) {
    sbx_error_prefix(err, "--output-dir");
    err->status = SBX_EXIT_SETUP;
    return -1;
  }
  _cleanup_close_ int fd = openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 && fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    return sbx_error_set(err, ELOOP, "--output-dir `%s` is a symlink; give the directory itself", path);
  if (fd < 0)
    return sbx_error_errno(err, "--output-dir `%s`", path);
  /* A later sandbox could replace what an earlier call saved before the client reads it. The
   * same check as every bind source's (binds.c). */
  bool inside;
  if (hostfile_in_tree(fd, guard, &inside, err) < 0)
    return sbx_error_prefix(err, "--output-dir `%s`", path);
  if (inside)
    return sbx_error_set(
        err, EPERM, "--output-dir `%s` is inside a --bind-rw tree; the sandboxes could change saved files",
        path);
  if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0)
    return sbx_error_errno(err, "--output-dir `%s`: not writable", path);
  /* Its absolute path, for the file:// URIs: what the kernel says the fd is, not what we were told. */
  char self[64], abs[PATH_MAX];
  if (bufprintf(self, sizeof self, err, "/proc/self/fd/%d", fd) < 0)
    return -1;
  ssize_t n = readlink(self, abs, sizeof abs - 1);
  if (n <= 0 || abs[0] != '/')
    return sbx_error_errno(err, "--output-dir `%s`: its absolute path", path);
  abs[n] = '\0';
  if (!(*ret_path = strdup(abs)))
    return sbx_error_set(err, ENOMEM, "--output-dir");
  *ret_fd = TAKE_FD(fd);
  return 0;
}

/* DIR/<request_id>: fresh (mkdirat fails if anything has the name), ours, opened without links. */
static int make_call_dir(struct server *srv, struct call *c, int *ret_fd)
{
  if (mkdirat(srv->output_dirfd, c->request_id, 0755) < 0)
    return -1;
  int fd = openat(srv->output_dirfd, c->request_id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  strbuf_t p = {0};
  if (strbuf_printf(&p, "%s/%s", srv->output_dir, c->request_id) < 0) {
    close(fd);
    strbuf_free(&p);
    errno = ENOMEM;
    return -1;
  }
  c->saved_dir = p.data;
  *ret_fd = fd;
  return 0;
}

/* A stream as it is saved: what was captured of it (capture.h), and when bytes were dropped
 * between its head and its tail, the line that says so where they were. */
static int saved_stream(const struct call *c, enum capture_stream_id id, strbuf_t *sb)
{
  struct capture_view v;
  if (capture_view(&c->cap, id, &v) < 0)
    return -1;
  if (!v.dropped || !v.buf.len) {
    *sb = v.buf;
    return 0;
  }
  struct shape_stream st = {.name = id == CAPTURE_STDOUT ? "stdout" : "stderr",
                            .dropped = v.dropped,
                            .output_limit = c->limits.output_bytes};
  int r = strbuf_append(sb, v.buf.data, v.gap);
  r |= shape_cut_line(sb, &st, 0, false);
  r |= strbuf_append(sb, v.buf.data + v.gap, v.buf.len - v.gap);
  strbuf_free(&v.buf);
  return r;
}

void call_collect_files(struct server *srv, struct call *c, bool ended)
{
  int wfd = c->sb ? sandbox_workspace_fd(c->sb) : -1;
  sbx_error_t err = {0};
  if (ended && !artifacts_out_empty(wfd) &&
      artifacts_collect(wfd, c->limits.artifacts, c->limits.artifact_bytes, &c->arts, &err) < 0)
    log_sbx_error(&err);
  /* A call gets a directory for its files, or for output longer than the text can show (more
   * bytes than --text-limit characters: a superset of the output that shaping cuts), so that
   * the marker can say where the whole of it is. print(1) writes nothing on the host. */
  bool long_output = capture_kept(&c->cap) > srv->text_limit;
  if (srv->output_dirfd < 0 || (!c->arts.returned && !long_output))
    return;
  strbuf_t out = {0}, errs = {0};
  _cleanup_close_ int dfd = -1;
  if (saved_stream(c, CAPTURE_STDOUT, &out) < 0 || saved_stream(c, CAPTURE_STDERR, &errs) < 0) {
    log_warn("--output-dir `%s`: %s", srv->output_dir, strerror(ENOMEM));
    goto out;
  }
  /* Within the budget: older call directories go first; a call that alone is over it saves
   * nothing, and its result says so. */
  uint64_t need = out.len + errs.len + c->arts.bytes;
  if (output_budget_reserve(srv, need) < 0) {
    strbuf_t why = {0};
    if (strbuf_printf(&why,
                      "Not saved under --output-dir: this call's files and output (%llu bytes) are more than "
                      "its budget, --output-max-size %llu bytes.",
                      (unsigned long long) need, (unsigned long long) srv->output_budget.max_bytes) == 0)
      c->not_saved = why.data;
    else
      strbuf_free(&why);
    goto out;
  }
  if (make_call_dir(srv, c, &dfd) < 0) {
    log_warn("--output-dir `%s`: create `%s`: %s", srv->output_dir, c->request_id, strerror(errno));
    goto out;
  }
  /* The output first: these names are sandboxd's, never a file of the code's. */
  c->saved_stdout = out.len && artifacts_write_new(dfd, "stdout.txt", out.data, out.len) == 0;
  c->saved_stderr = errs.len && artifacts_write_new(dfd, "stderr.txt", errs.data, errs.len) == 0;
  artifacts_save(&c->arts, dfd, c->saved_dir);
  output_budget_add(srv, c->request_id, need);
out:
  strbuf_free(&out);
  strbuf_free(&errs);
}

void call_write_file_blocks(struct server *srv, struct call *c, json_writer_t *w)
{
  /* resource_link came with 2025-06-18; before it, the text says where the files are. */
  (void) srv;
  bool links = !c->protocol || strcmp(c->protocol, "2025-06-18") >= 0;
  if (c->not_saved) {
    json_obj_begin(w);
    json_kv_str(w, "type", "text");
    json_kv_str(w, "text", c->not_saved);
    json_obj_end(w);
  }
  strbuf_t note = {0};
  if (artifacts_note(&c->arts, c->saved_dir, !links, &note) == 0 && note.len) {
    json_obj_begin(w);
    json_kv_str(w, "type", "text");
    json_kv_strn(w, "text", note.data, note.len);
    json_obj_end(w);
  }
  strbuf_free(&note);
  artifacts_write_blocks(w, &c->arts, links);
}
