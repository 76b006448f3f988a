/* SPDX-License-Identifier: Apache-2.0 */
/* The sync socket's messages: sending, receiving, and the sandbox side's error report. */
#include "sandbox/syncsock.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void sync_send(int fd, const struct sync_msg *m)
{
  ssize_t n;
  do
    n = send(fd, m, sizeof *m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
}

void sync_send_fds(int sock, const struct sync_msg *m, const int *fds, int n)
{
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int) * MSG_MAX_FDS)];
  } c = {0};
  struct iovec iov = {.iov_base = (void *) m, .iov_len = sizeof *m};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n > 0) {
    mh.msg_control = c.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) n);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) n);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t) n);
  }
  while (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
    ;
}

_Noreturn void sync_fail(int sync_fd, const sbx_error_t *err)
{
  struct sync_msg m = {.type = MSG_ERROR, .err = *err};
  sync_send(sync_fd, &m);
  _exit(SBX_EXIT_SETUP);
}

int sync_recv_fds(int sock, struct sync_msg *m, int fds[MSG_MAX_FDS])
{
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int) * MSG_MAX_FDS)];
  } c;
  struct iovec iov = {.iov_base = m, .iov_len = sizeof *m};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
  ssize_t n;
  do
    n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && (errno == EINTR || errno == ECONNRESET)); /* ECONNRESET: as in sync_recv */
  /* As many as the control buffer holds: its alignment padding has room for one more fd than
   * MSG_MAX_FDS, which the kernel fills without MSG_CTRUNC. */
  int got[sizeof c.buf / sizeof(int)];
  int nfds = 0;
  for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      nfds = (int) ((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      memcpy(got, CMSG_DATA(cm), sizeof(int) * (size_t) nfds);
    }
  if (n != sizeof *m || (mh.msg_flags & MSG_CTRUNC) || nfds > MSG_MAX_FDS) {
    while (nfds > 0)
      close(got[--nfds]);
    return -1;
  }
  memcpy(fds, got, sizeof(int) * (size_t) nfds);
  m->err.msg[sizeof m->err.msg - 1] = '\0';
  return nfds;
}

/* A child that exits with messages still unread in its queue (ours, when its setup failed
 * early) makes the kernel report ECONNRESET on our end once, before the messages it
 * did send, such as its MSG_ERROR: read on past it. */
int sync_recv(int fd, struct sync_msg *m, int flags)
{
  ssize_t n;
  do
    n = recv(fd, m, sizeof *m, flags);
  while (n < 0 && (errno == EINTR || errno == ECONNRESET));
  return n == sizeof *m ? 0 : -1;
}
