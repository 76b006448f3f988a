/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --warm-mode fork` (fork_pool.c): which fork template (sandbox/fork_template.h)
 * serves the server's Python calls, when one is replaced, and the forked sandboxes of calls and
 * of the warm pool. */
#ifndef SBX_FORK_POOL_H
#define SBX_FORK_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

struct server;
struct call;
struct warm;
struct pollfd;
/* A template as the server holds it: its calls served, the calls that hold it, the binds it was
 * made with (fork_pool.c). */
struct fork_pool_entry;

/* At server start: the first template, or why the fork path cannot work here. died: what to do
 * when a template has died (the pool drops the sandboxes forked from it, which died with it). */
int fork_pool_init(struct server *srv, void (*died)(struct server *srv, const struct fork_pool_entry *e),
                   sbx_error_t *err);
/* Begin the call's sandbox as a fork of the template: the call waits for it (c->pending, which
 * call_pending_ready steps with fork_warm_step, then hands it its code). */
int fork_call_start(struct server *srv, struct call *c, sbx_error_t *err);
/* A forked sandbox added to the pool (--warm in fork mode), not ready yet: the loop collects its
 * child's answers on fork_pending_fd with fork_warm_step (1: ready, 0: not yet, -1: failed). */
int fork_warm_spawn(struct server *srv, sbx_error_t *err);
int fork_warm_step(struct warm *w, sbx_error_t *err);
/* e's template is alive (a ready forked sandbox dies with it). */
bool fork_pool_alive(const struct fork_pool_entry *e);
/* The call of e has ended (call_free). NULL is fine. */
void fork_pool_release(struct server *srv, struct fork_pool_entry *e);
/* The current template's size once ready (its preload and all), which each call's fork starts
 * from; 0 without one. */
unsigned long long fork_pool_template_bytes(const struct server *srv);
/* The successor being started in the background: at most one poll entry, then what it says. */
size_t fork_pool_pollfds(struct server *srv, struct pollfd *pfd);
void fork_pool_dispatch(struct server *srv, const struct pollfd *pfd);
/* Kill every template (at shutdown, after the calls). */
void fork_pool_clear(struct server *srv);

#endif
