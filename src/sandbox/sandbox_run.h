/* SPDX-License-Identifier: Apache-2.0 */
/* Run a sandbox to completion (sandbox_run.c). */
#ifndef SBX_SANDBOX_RUN_H
#define SBX_SANDBOX_RUN_H

#include <stddef.h>

#include "base/error.h"
#include "sandbox/sandbox.h"

/* spawn + wait with the timeout; SIGINT/SIGTERM/SIGHUP are forwarded, then the sandbox is killed
 * after a grace period. For `sandboxd exec`. */
int sandbox_run(const struct sbx_spec *spec, struct sbx_result *res, sbx_error_t *err);

/* sandbox_run() that also serves other fds while the sandbox runs (the MCP proxy in `exec`).
 * fill() writes at most max pollfds and may lower *timeout_ms; dispatch() gets them back after
 * poll. Both run on the calling thread, between waits. */
#define SBX_RUN_MAX_HOOK_FDS 160
struct pollfd;
struct sbx_run_hooks {
  size_t (*fill)(void *ctx, struct pollfd *pfds, size_t max, int *timeout_ms); /* may be NULL */
  void (*dispatch)(void *ctx, const struct pollfd *pfds, size_t n);
  void *ctx;
  /* Once the sandbox has ended, before it is freed (its egress log, sandbox_egress); may be NULL. */
  void (*ended)(void *ended_ctx, const struct sbx_sandbox *s);
  void *ended_ctx;
};
int sandbox_run_hooks(const struct sbx_spec *spec, const struct sbx_run_hooks *hooks, struct sbx_result *res,
                      sbx_error_t *err);

#endif
