/* SPDX-License-Identifier: Apache-2.0 */
/* pid 1 of the sandbox (init.c): what sandbox_child() hands over to once setup is done. */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <signal.h>

#include "sandbox/sandbox.h"

/* Overwrite sandboxd's argv (sandbox_set_argv_area): /proc/1/cmdline must not show host paths. */
void init_hide_host_argv(void);
/* Install pid 1's no-op handlers and block SIGCHLD and the forwarded signals; mask gets them. */
void init_take_signals(sigset_t *mask);
/* With spec.leave_at_exit, what pid 1 does when the code has ended and nothing else of the
 * sandbox is left (it says so in MSG_EXIT's alone): on v1, where it joined its cgroups itself,
 * moves out of them through the files MSG_LEAVE brings and answers MSG_LEFT; without a cgroup,
 * nothing; then it exits, and sandboxd does not wait for that. */
enum init_leave { INIT_LEAVE_NEVER, INIT_LEAVE_CGROUP, INIT_LEAVE_NOW };
/* Fork the code (execve of spec->argv with envp, freed here; through the exec helper shim_fd,
 * exec_shim.h, unless it is -1), report MSG_READY or the exec
 * error on sync_fd (READY carries proxy_fd then workspace_fd, each if >= 0, which the code never
 * gets), then relay signals and reap until the code ends; never returns. */
_Noreturn void init_run(const struct sbx_spec *spec, char **envp, int sync_fd, int bridge_fd, int shim_fd,
                        int workspace_fd, int proxy_fd, const sigset_t *mask, enum init_leave leave);

#endif
