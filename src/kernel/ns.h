/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's namespaces (ns.c). */
#ifndef SBX_NS_H
#define SBX_NS_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "base/error.h"
#include "policy/policy.h"

/* Clone the sandbox's pid 1 into new user, mount, pid, ipc, uts and cgroup namespaces, with a
 * pidfd, into cgroup_fd (v2; *ret_in_cgroup says whether that worked) unless it is -1. owner: the
 * host uid the user namespace belongs to (root: the sandbox's host id), or 0 for our own euid.
 * Returns the pid (0 in the child), or -1 with errno. */
pid_t ns_clone_sandbox(int cgroup_fd, unsigned owner, int *ret_pidfd, bool *ret_in_cgroup);
/* Map the policy's uid and gid to host_id (root), or to our own ids when host_id is 0. range (the
 * fork template's, as root): every other id of the policy's host_id_range to itself as well, for
 * the template's calls (ns_write_call_maps). */
int ns_write_id_maps(pid_t pid, const struct sbx_policy *p, unsigned host_id, bool range, sbx_error_t *err);
/* As root: map the policy's uid and gid in the user namespace of pid, a call forked by the
 * template whose user namespace userns_fd is, to host_id (an id of the template's range). */
int ns_write_call_maps(int userns_fd, pid_t pid, const struct sbx_policy *p, unsigned host_id,
                       sbx_error_t *err);
/* The sandbox's network namespace, made by a thread of its pid 1 while pid 1 sets up its mounts:
 * ns_net_start (pid 1 still single-threaded, /proc still the host's), ns_net_join (before pid 1
 * moves into its cgroup or installs its filter: single-threaded again after it). */
struct ns_net {
  pthread_t thread;
  int proc_fd;     /* /proc as it is when the thread starts, not as pid 1's mounts make it */
  int net_fd;      /* the thread's result, or -1 with err */
  int last_pid_fd; /* /proc/sys/kernel/ns_last_pid: the pid the thread and the code get */
  bool threaded;   /* false: no ns_last_pid, so made by ns_net_start itself */
  sbx_error_t err;
};
int ns_net_start(struct ns_net *n, sbx_error_t *err);
/* Wait for the thread, then join its network namespace and give the namespaces made from it a
 * TCP hash table of their own, through sys_fd (the sandbox's /proc/sys, contain_mounts). */
int ns_net_join(struct ns_net *n, int sys_fd, sbx_error_t *err);

#endif
