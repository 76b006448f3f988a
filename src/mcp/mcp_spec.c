/* SPDX-License-Identifier: Apache-2.0 */
/* Each sandbox of `sandboxd mcp`, cold, warm or forked: the spec it gets (base_spec) and its
 * channels (its stdout and stderr pipes, and where it takes its code). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "hostmcp/proxy.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_runner.h"
#include "sandbox/sandbox.h"

static int code_channel(enum mcp_lang lang, int *ret_ours, int *ret_inside, sbx_error_t *err)
{
  int p[2];
  if (lang == MCP_LANG_PYTHON) {
    /* The job socket at fd 3. Our end never blocks the loop; the runner's blocks in its read. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
      return sbx_error_errno(err, "job socketpair");
  } else if (pipe2(p, O_CLOEXEC) < 0) {
    /* Another interpreter reads its stdin, blocking, to EOF: only our end is non-blocking. */
    return sbx_error_errno(err, "code pipe");
  } else {
    int t = p[0]; /* pipe2 gives the read end first: ours is the write end */
    p[0] = p[1];
    p[1] = t;
  }
  if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return sbx_error_set(err, e, "code channel");
  }
  *ret_ours = p[0];
  *ret_inside = p[1];
  return 0;
}

int sandbox_fds_open(enum mcp_lang lang, struct sandbox_fds *f, sbx_error_t *err)
{
  if (open_pipe(&f->out_r, &f->out_w, err) < 0 || open_pipe(&f->err_r, &f->err_w, err) < 0 ||
      code_channel(lang, &f->job, &f->inside, err) < 0)
    return -1;
  return 0;
}

void sandbox_fds_close(struct sandbox_fds *f)
{
  int *fds[] = {&f->out_r, &f->out_w, &f->err_r, &f->err_w, &f->job, &f->inside};
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
    sbx_closep(fds[i]);
}

/* The spec every sandbox of this server gets for lang, cold or warm alike (what differs is in the
 * job). Python: the runner (python3 -c RUNNER, its job on fd 3 and stdin /dev/null), and the `mcp`
 * package mounted and on PYTHONPATH whenever it was found, so that `from mcp import runtime` (and
 * the package's matplotlib backend) works in every run. Another language: its interpreter, in its
 * rootfs, reading the code from stdin (mcp_lang.c); no package (it is Python's). The binds and
 * roots are every language's; the image's Env is its rootfs's. */
void base_spec(struct server *srv, enum mcp_lang lang, const struct sbx_limits *limits, int inside, int out_w,
               int err_w, struct sbx_spec *spec)
{
  static char *python_argv[] = {PYTHON, "-c", (char *) mcp_runner_source, NULL};
  bool python = lang == MCP_LANG_PYTHON;
  /* With the package bound (spec_binds[0], mcp_binds.c). */
  bool package = srv->n_spec_binds && strcmp(srv->spec_binds[0].dst, PROXY_PYTHON_DST) == 0;
  *spec = (struct sbx_spec){
      .policy = srv->policy,
      .limits = *limits,
      .rootfs = srv->lang_rootfs[lang],
      .base_env = srv->lang_image[lang].env, /* under the policy's env, as exec's */
      .n_base_env = srv->lang_image[lang].n_env,
      .argv = python ? python_argv : mcp_lang_argv(lang),
      .stdin_fd = python ? srv->devnull : inside,
      .stdout_fd = out_w,
      .stderr_fd = err_w,
      .bridge_fd = python ? inside : -1,
      .keep_workspace = true, /* for /workspace/out (call_collect_files) */
      /* The `mcp` package, --bind and the client's roots (mcp_binds.c). */
      .binds = srv->spec_binds + (package && !python),
      .n_binds = srv->n_spec_binds - (package && !python),
  };
  if (package && python) {
    spec->extra_env = srv->hs.package_env;
    spec->n_extra_env = HOST_SERVERS_N_PACKAGE_ENV;
  }
}
