/* Unit tests for the sync socket's messages (src/sandbox/syncsock.c), over a real SOCK_SEQPACKET pair. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "sandbox/syncsock.h"

static int open_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d)
    return -1;
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

static void pair(int sv[2])
{
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
}

/* Raw sendmsg with n fds, as a peer that does not follow the protocol would. */
static void send_raw(int sock, const void *data, size_t len, const int *fds, int n)
{
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int) * 16)];
  } c = {0};
  struct iovec iov = {.iov_base = (void *) data, .iov_len = len};
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
  if (sendmsg(sock, &mh, 0) < 0)
    abort();
}

int main(void)
{
  int sv[2];
  struct sync_msg m;
  int fds[MSG_MAX_FDS];

  /* A message and its error text arrive whole; a message's text always ends in NUL. */
  pair(sv);
  struct sync_msg out = {.type = MSG_ERROR};
  memset(out.err.msg, 'x', sizeof out.err.msg);
  sync_send(sv[0], &out);
  CHECK(sync_recv_fds(sv[1], &m, fds) == 0 && m.type == MSG_ERROR);
  CHECK(m.err.msg[sizeof m.err.msg - 1] == '\0' && m.err.msg[0] == 'x');

  /* fds travel with a message, and arrive close-on-exec. */
  int p[2];
  if (pipe(p) < 0)
    abort();
  sync_send_fds(sv[0], &(struct sync_msg){.type = MSG_CGROUP}, p, 2);
  int n = sync_recv_fds(sv[1], &m, fds);
  CHECK(n == 2 && m.type == MSG_CGROUP);
  for (int i = 0; i < n && i < MSG_MAX_FDS; i++) {
    CHECK(fcntl(fds[i], F_GETFD) == FD_CLOEXEC);
    close(fds[i]);
  }

  /* More fds than any message carries: refused, and none of them stays open here. One more
   * still fits the control buffer's padding (the kernel does not truncate); two more do not. */
  int many[MSG_MAX_FDS + 2];
  for (int i = 0; i < MSG_MAX_FDS + 2; i++)
    many[i] = p[i % 2];
  int before = open_fds();
  for (int extra = 1; extra <= 2; extra++) {
    send_raw(sv[0], &(struct sync_msg){.type = MSG_CGROUP}, sizeof(struct sync_msg), many,
             MSG_MAX_FDS + extra);
    CHECK(sync_recv_fds(sv[1], &m, fds) == -1);
    CHECK(open_fds() == before);
  }

  /* A message of the wrong size is no message, with or without fds. */
  send_raw(sv[0], "abcd", 4, p, 1);
  CHECK(sync_recv_fds(sv[1], &m, fds) == -1);
  CHECK(open_fds() == before);
  send_raw(sv[0], "abcd", 4, NULL, 0);
  CHECK(sync_recv(sv[1], &m, 0) == -1);
  close(p[0]);
  close(p[1]);

  /* Nothing queued: MSG_DONTWAIT returns at once. */
  CHECK(sync_recv(sv[1], &m, MSG_DONTWAIT) == -1);

  /* A peer that exits with our messages unread makes the kernel report ECONNRESET once, before
   * the message it did send (a child's MSG_ERROR): that message is still read. */
  sync_send(sv[1], &(struct sync_msg){.type = MSG_GO});
  sync_send(sv[0], &(struct sync_msg){.type = MSG_ERROR});
  close(sv[0]);
  CHECK(sync_recv(sv[1], &m, 0) == 0 && m.type == MSG_ERROR);
  /* Then the end of the stream. */
  CHECK(sync_recv(sv[1], &m, 0) == -1);
  close(sv[1]);

  return check_summary("test_syncsock");
}
