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
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hostmcp/bridge.h"
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
