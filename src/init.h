/* pid 1 of the sandbox (init.c): what sandbox_child() hands over to once setup is done. */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <signal.h>
#include <stdbool.h>

#include "sandbox.h"

/* Overwrite sandboxd's argv (sandbox_set_argv_area): /proc/1/cmdline must not show host paths. */
void init_hide_host_argv(void);
/* Install pid 1's no-op handlers and block SIGCHLD and the forwarded signals; mask gets them. */
void init_take_signals(sigset_t *mask);
/* Fork the code (execve of spec->argv with envp, freed here), report MSG_READY or the exec
 * error on sync_fd (READY carries proxy_fd then workspace_fd, each if >= 0, which the code never
 * gets), then relay signals and reap until the code ends; never returns. may_leave: pid 1 joined
 * v1 cgroups itself and spec.leave_at_exit holds (MSG_EXIT's alone). */
_Noreturn void init_run(const struct sbx_spec *spec, char **envp, int sync_fd, int bridge_fd,
                        int workspace_fd, int proxy_fd, const sigset_t *mask, bool may_leave);

#endif
