/* The sandbox's namespaces (ns.c). */
#ifndef SBX_NS_H
#define SBX_NS_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"

/* Clone the sandbox's pid 1 into new user, mount, pid, ipc, uts and cgroup namespaces, with a
 * pidfd, into cgroup_fd (v2; *ret_in_cgroup says whether that worked) unless it is -1. owner: the
 * host uid the user namespace belongs to (root: the sandbox's host id), or 0 for our own euid.
 * Returns the pid (0 in the child), or -1 with errno. */
pid_t ns_clone_sandbox(int cgroup_fd, unsigned owner, int *ret_pidfd, bool *ret_in_cgroup);
/* Map the policy's uid and gid to host_id (root), or to our own ids when host_id is 0. */
int ns_write_id_maps(pid_t pid, const struct sbx_policy *p, unsigned host_id, sbx_error_t *err);
/* From inside the sandbox's user namespace: a new network namespace with loopback up, and the
 * user namespace's kernel budgets (through any /proc mount not yet read-only). */
int ns_net_make(const struct sbx_budgets *budgets, sbx_error_t *err);
/* The network namespace helper, in a fork of the parent: never returns. */
_Noreturn void ns_net_helper(pid_t pid, int pidfd, int sync_fd, const struct sbx_budgets *budgets);

#endif
