/* SPDX-License-Identifier: Apache-2.0 */
/* The job a runner gets on fd 3 (runner.py), cold and warm alike: one frame, a 4-byte big-endian
 * length and then "MODE[ SERVERS]\n" and the code, where MODE is "bridge" (fd 3 goes on as the
 * bridge; SERVERS, "a,b", are the ones the code may call) or "done" (fd 3 goes on as the done
 * channel). The code never passes through argv (the kernel's limit on one argument is 128 KiB);
 * it is bound only by --max-message-size. Written without blocking: what the socket takes now,
 * the rest as the loop sees POLLOUT; a runner that takes none of it for JOB_SEND_TIMEOUT_MS is
 * given up (the call's own deadline bounds the whole). A language other than Python gets only the
 * code, on a pipe at its interpreter's stdin, which EOF ends (mcp_lang.c). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/util.h"
#include "hostmcp/bridge.h"
#include "hostmcp/proxy.h"
#include "mcp/mcp_internal.h"

int job_begin(struct job *j, int fd, const char *servers, const char *code, size_t code_len, sbx_error_t *err)
{
  const char *mode = servers ? "bridge" : "done";
  size_t slen = servers ? strlen(servers) : 0;
  *j = (struct job){.fd = fd, .code = code, .code_len = code_len};
  j->head = malloc(strlen(mode) + 1 + slen + 2);
  if (!j->head) {
    job_free(j);
    return sbx_error_set(err, ENOMEM, "job");
  }
  memcpy(j->head, mode, strlen(mode));
  j->head_len = strlen(mode);
  if (slen) {
    j->head[j->head_len++] = ' ';
    memcpy(j->head + j->head_len, servers, slen);
    j->head_len += slen;
  }
  j->head[j->head_len++] = '\n';
  /* The code is bound by the message that carried it (at most 1 GiB), far below a frame's 4 GiB. */
  if (bridge_header(j->head_len + code_len, UINT32_MAX, j->hdr, err) < 0) {
    job_free(j);
    return -1;
  }
  j->total = 4 + j->head_len + code_len;
  j->deadline_ns = now_ns() + JOB_SEND_TIMEOUT_MS * 1000000ULL;
  return 0;
}

void job_begin_raw(struct job *j, int fd, const char *code, size_t code_len)
{
  *j = (struct job){.fd = fd, .raw = true, .code = code, .code_len = code_len, .total = code_len};
  j->deadline_ns = now_ns() + JOB_SEND_TIMEOUT_MS * 1000000ULL;
}

int job_write(struct job *j, sbx_error_t *err)
{
  size_t before = j->sent;
  while (j->sent < j->total) {
    struct iovec iov[3] = {{.iov_base = j->hdr, .iov_len = j->raw ? 0 : 4},
                           {.iov_base = j->head, .iov_len = j->head_len},
                           {.iov_base = (void *) j->code, .iov_len = j->code_len}};
    struct iovec *v = iov;
    size_t skip = j->sent;
    while (skip >= v->iov_len) {
      skip -= v->iov_len;
      v++;
    }
    v->iov_base = (char *) v->iov_base + skip;
    v->iov_len -= skip;
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t) (iov + 3 - v)};
    /* A pipe (raw) is non-blocking on our side, and SIGPIPE is blocked (cli_mcp.c): EPIPE. */
    ssize_t n =
        j->raw ? writev(j->fd, v, (int) mh.msg_iovlen) : sendmsg(j->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      if (j->sent > before) /* the runner is reading: it gets the time again */
        j->deadline_ns = now_ns() + JOB_SEND_TIMEOUT_MS * 1000000ULL;
      return 0;
    }
    if (n < 0)
      return sbx_error_errno(err, "send the code to the sandbox");
    j->sent += (size_t) n;
  }
  return 1;
}

void job_free(struct job *j)
{
  if (j->fd >= 0)
    close(j->fd);
  free(j->head);
  *j = (struct job){.fd = -1};
}

/* ------------------------------------------------------------------ a call's job
 *
 * Given to the call's sandbox, cold, warm, forked or a session's (mcp_calls.c, mcp_sessions.c):
 * the job, then fd 3 as the bridge or the done channel. */

/* What fd 3 becomes once the job is written: the bridge, or the done channel. */
static void job_sent(struct call *c)
{
  if (c->job.raw)
    ; /* closed below: the interpreter's EOF */
  else if (c->proxy)
    proxy_adopt_fd(c->proxy, TAKE_FD(c->job.fd));
  else
    c->done_fd = TAKE_FD(c->job.fd);
  job_free(&c->job);
}

int call_deliver(struct call *c, int fd, const char *kind, sbx_error_t *err)
{
  const char *servers = c->proxy ? strchr(proxy_env(c->proxy), '=') + 1 : NULL;
  if (c->lang != MCP_LANG_PYTHON && !c->sess) /* (a session's loop takes the job frame) */
    job_begin_raw(&c->job, fd, c->code, c->code_len);
  else if (job_begin(&c->job, fd, servers, c->code, c->code_len, err) < 0)
    return -1;
  /* Nothing is written yet if this fails (a warm sandbox that died idle: EPIPE). */
  int r = job_write(&c->job, err);
  if (r < 0) {
    job_free(&c->job);
    return -1;
  }
  if (r == 1)
    job_sent(c);
  uint64_t client = c->srv->client; /* the call's client's level, from the loop too */
  struct mcp_modern_req req = c->srv->req;
  c->srv->client = c->client;
  c->srv->req = c->req;
  if (mcp_log_level(c->srv) == 0) { /* debug: which kind of sandbox served the call */
    char msg[200];
    bufprintf_cut(msg, sizeof msg, "call %.100s: its code went to a %s sandbox", c->id, kind);
    c->srv->route = c->route;
    mcp_log(c->srv, 0, msg);
  }
  c->srv->client = client;
  c->srv->req = req;
  return 0;
}

void call_job_ready(struct server *srv, struct call *c, bool timed_out)
{
  (void) srv;
  sbx_error_t err = {0};
  int r = timed_out ? sbx_error_set(&err, ETIMEDOUT, "it read %zu of %zu bytes, then nothing for %d ms",
                                    c->job.sent, c->job.total, JOB_SEND_TIMEOUT_MS)
                    : job_write(&c->job, &err);
  if (r == 1) {
    job_sent(c);
  } else if (r < 0) {
    /* The runner is stuck or gone: end the sandbox, and say so when it has ended (call_finish). */
    log_warn("a sandbox did not take its code: %s", err.msg);
    job_free(&c->job);
    c->job_error = strdup(err.msg);
    c->killed = true;
    sandbox_signal(c->sb, SIGKILL);
  }
}
