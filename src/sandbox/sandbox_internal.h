/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of the sandbox share (sandbox.c, sandbox_proc.c, sandbox_fork.c, sandbox_run.c,
 * init.c, ns.c); not for callers. */
#ifndef SBX_SANDBOX_INTERNAL_H
#define SBX_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "egress/egress_proxy.h"
#include "kernel/cgroup.h"
#include "sandbox/sandbox.h"

/* Signals sandboxd forwards to the code; the sandbox's init relays them (sandbox_proc.c). */
#define SBX_N_FORWARDED_SIGNALS 6
extern const int sandbox_forwarded_signals[SBX_N_FORWARDED_SIGNALS];

struct sbx_sandbox {
  pid_t pid; /* the sandbox's init, in our pid namespace */
  int pidfd;
  int sync_fd; /* our end of the sync socket */
  uint64_t start_ns, deadline_ns;
  uint64_t cpu_base_usec; /* cgroup CPU time before sandbox_start_clock(), excluded from results */
  bool timed_out, reaped;
  bool killed;   /* sandbox_kill() was called */
  bool leave;    /* spec.leave_at_exit, v1 or no cgroup: pid 1 may report MSG_EXIT alone */
  bool detached; /* pid 1 left the cgroups and exits on its own: never waited for */
  /* leave with a cgroup: the files pid 1 leaves it through, opened while the code runs, not on
   * its way out (n_leave_fds 0: none). */
  int leave_fds[CGROUP_MAX_ATTACH_FDS], n_leave_fds;
  int code_status;           /* from MSG_EXIT; -1 if none arrived */
  struct sbx_cgroup *cgroup; /* NULL when degraded to rlimits */
  uint64_t memory_limit;
  uint64_t sampled_cpu_ms, sampled_peak; /* degraded: usage read from /proc before a kill */
  uint64_t pidns_ino, pidns_dev;
  int workspace_fd; /* spec.keep_workspace: the workspace tmpfs, from MSG_READY; else -1 */
  int host_id_lock; /* root: holds the sandbox's host id (hostid.h) until it is torn down; else -1 */
  unsigned host_id; /* root: the sandbox's host uid and gid (hostid.h); else 0 */
  const struct sbx_policy *policy; /* network proxy: the allowlist and limits its proxy serves */
  struct egress_log *egress;       /* network proxy: the proxy's log, from READY on; else NULL */
  pid_t egress_pid;                /* the proxy process until reaped, else 0 */
  /* Forked from a template (sandbox_adopt): pid 1 is not our child; it says how the code ended
   * ("exit STATUS CPU_US MAXRSS_KIB") on sync_fd, and its pidfd turns readable when it has
   * exited; fork_ru: the usage it reported, what wait4 gives for a cold sandbox's pid 1. */
  bool forked;
  struct rusage fork_ru;
};

/* leave with a cgroup: open the files pid 1 will leave it through, once the code runs
 * (sandbox_proc.c). None on failure: pid 1 then exits in the cgroup and is waited for. */
void sandbox_open_leave_fds(struct sbx_sandbox *s);

/* Close every fd from 3 up except a, b and c (any may be -1) (init.c). */
int close_fds_except(int a, int b, int c);

/* A forked sandbox's end: wait for pid 1 to exit, read the code's status (sandbox_proc.c). */
void sandbox_fork_wait(struct sbx_sandbox *s);

#endif
