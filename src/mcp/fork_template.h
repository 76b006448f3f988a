/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template of `sandboxd mcp --warm-mode fork` (fork_template.c): each run_python call's
 * sandbox is a fork of one trusted, idle Python that makes the call's namespaces itself. */
#ifndef SBX_FORK_TEMPLATE_H
#define SBX_FORK_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Calls one template serves before it is replaced: they share its str hash secret and its
 * address-space layout (sandboxd-mcp(7)). */
#define FORK_TEMPLATE_CALLS 32

struct server;
struct call;
struct fork_template;

/* At server start: the first template, or why the fork path cannot work here. died: what to do
 * when a template has died (the pool drops the sandboxes forked from it, which died with it). */
int fork_template_init(struct server *srv, void (*died)(struct server *srv, const struct fork_template *t),
                       sbx_error_t *err);
/* Begin the call's sandbox as a fork of the template: the call waits for it (c->pending, which
 * call_pending_ready steps with fork_warm_step, then hands it its code). */
int fork_call_start(struct server *srv, struct call *c, sbx_error_t *err);
/* A forked sandbox added to the pool (--warm in fork mode), not ready yet: the loop collects its
 * child's answers on fork_pending_fd with fork_warm_step (1: ready, 0: not yet, -1: failed). */
struct warm;
struct fork_pending;
int fork_warm_spawn(struct server *srv, sbx_error_t *err);
int fork_warm_step(struct warm *w, sbx_error_t *err);
int fork_pending_fd(const struct fork_pending *fp);
uint64_t fork_pending_deadline(const struct fork_pending *fp); /* now_ns() clock */
void fork_pending_free(struct fork_pending *fp);
/* The current template's size once ready (its preload and all), which each call's fork starts
 * from; 0 without one. */
unsigned long long fork_template_rss_bytes(const struct server *srv);
/* t's sandbox and its Python are alive (a ready forked sandbox dies with them). */
bool fork_template_alive(const struct fork_template *t);
/* The call of t has ended (call_free). NULL is fine. */
void fork_template_release(struct server *srv, struct fork_template *t);
/* The successor being started in the background: at most one poll entry, then what it says. */
struct pollfd;
size_t fork_template_pollfds(struct server *srv, struct pollfd *pfd);
void fork_template_dispatch(struct server *srv, const struct pollfd *pfd);
/* Kill every template (at shutdown, after the calls). */
void fork_template_clear(struct server *srv);

#endif
