/* Sandboxes sandboxd did not clone itself: forks of `sandboxd mcp`'s template (fork_template.c,
 * inside/template.py). They are struct sbx_sandbox like any other, so a call's kill, deadline,
 * sampling, result and teardown are the cold path's (sandbox_proc.c); what differs is that pid 1
 * is not our child: its pidfd says when it has exited and it reports the code's status itself. */
#include "sandbox_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "util.h"

int sandbox_adopt(pid_t pid, int pidfd, int sync_fd, struct sbx_cgroup *cg, int workspace_fd,
                  unsigned long long pidns_ino, unsigned long long pidns_dev, const struct sbx_limits *limits,
                  struct sbx_sandbox **ret, sbx_error_t *err)
{
  struct sbx_sandbox *s = calloc(1, sizeof *s);
  if (!s) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
    close(sync_fd);
    close(workspace_fd);
    cgroup_destroy(cg);
    return sbx_error_set(err, ENOMEM, "sandbox");
  }
  uint64_t now = now_ns();
  *s = (struct sbx_sandbox){.pid = pid,
                            .pidfd = pidfd,
                            .sync_fd = sync_fd,
                            .start_ns = now,
                            .deadline_ns = now + limits->timeout_ms * 1000000ULL,
                            .code_status = -1,
                            .cgroup = cg,
                            .memory_limit = limits->memory_bytes,
                            .pidns_ino = pidns_ino,
                            .pidns_dev = pidns_dev,
                            .workspace_fd = workspace_fd,
                            .host_id_lock = -1,
                            .forked = true};
  *ret = s;
  return 0;
}

void sandbox_fork_wait(struct sbx_sandbox *s)
{
  struct pollfd pfd = {.fd = s->pidfd, .events = POLLIN};
  while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
    ;
  /* pid 1 sends it before it exits: a non-blocking read finds it or nothing (killed). */
  char buf[32];
  ssize_t n = recv(s->sync_fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  int st;
  if (n > 0 && (buf[n] = '\0', sscanf(buf, "exit %d", &st) == 1))
    s->code_status = st;
}
