/* SPDX-License-Identifier: Apache-2.0 */
/* Sandboxes sandboxd did not clone itself: forks of `sandboxd mcp`'s template (fork_template.c,
 * inside/template.py). They are struct sbx_sandbox like any other, so a call's kill, deadline,
 * sampling, result and teardown are the cold path's (sandbox_proc.c); what differs is that pid 1
 * is not our child: its pidfd says when it has exited and it reports the code's status itself. */
#include "sandbox/sandbox_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "egress/egress_proxy.h"
#include "kernel/cgroup.h"
#include "policy/policy.h"

int sandbox_adopt(pid_t pid, int pidfd, int sync_fd, struct sbx_cgroup *cg, int workspace_fd,
                  unsigned long long pidns_ino, unsigned long long pidns_dev, const struct sbx_limits *limits,
                  const struct sbx_policy *policy, int listen_fd, unsigned host_id, int host_id_lock,
                  struct sbx_sandbox **ret, sbx_error_t *err)
{
  bool proxy = policy->network == SBX_NET_PROXY;
  struct sbx_sandbox *s = proxy && listen_fd < 0 ? NULL : calloc(1, sizeof *s);
  if (!s) {
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
    close(sync_fd);
    close(workspace_fd);
    if (listen_fd >= 0)
      close(listen_fd);
    if (host_id_lock >= 0)
      close(host_id_lock);
    cgroup_destroy(cg);
    return proxy && listen_fd < 0 ? sbx_error_set(err, 0, "fork: the call's sandbox sent no egress listener")
                                  : sbx_error_set(err, ENOMEM, "sandbox");
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
                            .host_id_lock = host_id_lock,
                            .host_id = host_id,
                            .policy = policy,
                            .forked = true};
  /* The proxy serves the listener from here (the host's network namespace) until pid 1 exits,
   * as the cold path's does (sandbox_spawn_finish); it takes listen_fd. */
  if (proxy &&
      egress_proxy_start(policy, listen_fd, s->pidfd, host_id, &s->egress, &s->egress_pid, err) < 0) {
    sandbox_free(s);
    return -1;
  }
  if (!proxy && listen_fd >= 0)
    close(listen_fd);
  *ret = s;
  return 0;
}

int sandbox_userns_fd(const struct sbx_sandbox *s, sbx_error_t *err)
{
  char path[64];
  if (bufprintf(path, sizeof path, err, "/proc/%d/ns/user", (int) s->pid) < 0)
    return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  return fd < 0 ? sbx_error_errno(err, "open `%s`", path) : fd;
}
