/* SPDX-License-Identifier: Apache-2.0 */
/* The sync socket between sandboxd and the sandbox it sets up (the timeline is at the top of
 * sandbox.c): a SOCK_SEQPACKET socketpair, so one message per send, never merged; fds travel by
 * SCM_RIGHTS. */
#ifndef SBX_SYNCSOCK_H
#define SBX_SYNCSOCK_H

#include <stdint.h>
#include <sys/resource.h>

#include "base/error.h"
#include "kernel/cgroup.h"

enum msg_type { MSG_GO = 1, MSG_READY, MSG_ERROR, MSG_EXIT, MSG_CGROUP, MSG_LEAVE, MSG_LEFT };
struct sync_msg {
  int type;
  int wait_status; /* MSG_EXIT: the code's wait status; MSG_LEFT: 0, or the errno of the move */
  /* MSG_EXIT: nothing else of the sandbox is left and pid 1 waits for MSG_LEAVE, whose fds
   * (cgroup_leave_fds; none: just exit) it moves itself out of the cgroups through before it
   * answers MSG_LEFT and exits; usage: pid 1's and its reaped children's, as wait4 gives it. */
  int alone;
  struct rusage usage;
  uint64_t pidns_ino, pidns_dev; /* MSG_READY: the sandbox's pid namespace (and maybe one fd) */
  sbx_error_t err;               /* MSG_ERROR */
};
/* Most fds one message carries: MSG_CGROUP one per hierarchy, MSG_READY the
 * egress proxy's listener (network proxy) and the workspace (when the spec asks for it). */
#define MSG_MAX_FDS CGROUP_MAX_ATTACH_FDS

void sync_send(int fd, const struct sync_msg *m);
/* A message with n fds attached (SCM_RIGHTS). */
void sync_send_fds(int sock, const struct sync_msg *m, const int *fds, int n);
/* The peer's next message; 0, or -1 when none came (the peer exited). */
int sync_recv(int fd, struct sync_msg *m, int flags);
/* One message with up to MSG_MAX_FDS fds (O_CLOEXEC); returns how many fds came, or -1. */
int sync_recv_fds(int sock, struct sync_msg *m, int fds[MSG_MAX_FDS]);
/* The sandbox side of a failed setup: MSG_ERROR to the parent, which reports it, then exit 125. */
_Noreturn void sync_fail(int sync_fd, const sbx_error_t *err);

#endif
