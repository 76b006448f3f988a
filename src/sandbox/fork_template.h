/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template (fork_template.c): a trusted sandbox whose idle Python forks each call's
 * sandbox, which makes fresh namespaces of its own. Which template serves and when one is
 * replaced is its owner's to decide (`sandboxd mcp`: mcp/fork_pool.c). */
#ifndef SBX_FORK_TEMPLATE_H
#define SBX_FORK_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct sbx_limits;
struct sbx_sandbox;
struct sbx_spec;
struct fork_template;
struct fork_pending;

/* What a template is made from. */
struct fork_template_config {
  /* The sandbox a call would get cold (argv[0] the Python, the rootfs, binds, environment,
   * stdin), with the longest timeout a call may ask for: the template is that sandbox, with the
   * template's policy (fork_policy.c) and its own stdout, stderr and fd 3 in place of the
   * spec's. spec->policy is each call's, and must outlive the template and its calls. */
  const struct sbx_spec *spec;
  size_t max_calls;            /* calls in flight at most: its budgets have room for them */
  const char *template_source; /* inside/template.py, which its Python runs */
  const char *runner_source;   /* inside/runner.py, which each call's code process runs */
  const char *preload;         /* modules its Python imports before any call, "a,b.c" (or NULL) */
};

/* Start a template: its sandbox created and its setup sent; fork_template_step finishes it. */
int fork_template_begin(const struct fork_template_config *cfg, struct fork_template **ret, sbx_error_t *err);
/* The fd to wait on (POLLIN) before the next fork_template_step. */
int fork_template_wait_fd(const struct fork_template *t);
/* The next step of its start: 1 when it is ready, 0 when it is not yet, -1 when it failed. */
int fork_template_step(struct fork_template *t, sbx_error_t *err);
bool fork_template_ready(const struct fork_template *t);
/* The rest of its start, blocking (up to TEMPLATE_START_MS a step). */
int fork_template_wait_ready(struct fork_template *t, sbx_error_t *err);
/* begin, then wait_ready: a ready template, or none. */
int fork_template_start(const struct fork_template_config *cfg, struct fork_template **ret, sbx_error_t *err);
/* Its Python's size once ready (its preload and all), which each call's fork starts from. */
unsigned long long fork_template_bytes(const struct fork_template *t);
/* Its sandbox and its Python are alive (a call forked from it dies with them). */
bool fork_template_alive(const struct fork_template *t);
/* Readable (POLLIN) once its sandbox has ended. */
int fork_template_pidfd(const struct fork_template *t);
/* What it wrote to stdout and stderr (for saying why it ended), at most size - 1 bytes, in buf
 * NUL-terminated; returns their length. */
size_t fork_template_output(struct fork_template *t, char *buf, size_t size);
/* Kill it and free it. NULL is fine. The sandboxes forked from it die with it. */
void fork_template_free(struct fork_template *t);

/* Ask t for a call's sandbox, with limits, out_w and err_w its stdout and stderr and inside its
 * fd 3 (sent to the template, ours to close). The loop collects the call's pid 1's answers with
 * fork_pending_step when fork_pending_fd turns readable. */
int fork_pending_begin(struct fork_template *t, const struct sbx_limits *limits, int out_w, int err_w,
                       int inside, struct fork_pending **ret, sbx_error_t *err);
/* Its next answer: 1 when the sandbox is built (*ret, fp freed), 0 when another answer is due
 * (fork_pending_fd turns readable), -1 when it failed (fp freed). Blocks up to CHILD_STEP_MS. */
int fork_pending_step(struct fork_pending *fp, struct sbx_sandbox **ret, sbx_error_t *err);
int fork_pending_fd(const struct fork_pending *fp);
/* When its next answer is due (now_ns() clock). */
uint64_t fork_pending_deadline(const struct fork_pending *fp);
void fork_pending_free(struct fork_pending *fp);
/* fork_pending_begin, then its answers, blocking. */
int fork_template_fork(struct fork_template *t, const struct sbx_limits *limits, int out_w, int err_w,
                       int inside, struct sbx_sandbox **ret, sbx_error_t *err);

#endif
