/* SPDX-License-Identifier: Apache-2.0 */
/* The warm pool (--warm, --warm-lang): sandboxes built ahead of the calls, the runner (or another
 * language's interpreter) started without code, each waiting for one job on its bridge socket (or
 * its stdin); a call of the same language takes one instead of building its own. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/fork_pool.h"
#include "mcp/mcp_internal.h"
#include "policy/policy.h"
#include "sandbox/fork_template.h"
#include "sandbox/sandbox.h"

void warm_free(struct warm *w)
{
  if (!w)
    return;
  sandbox_free(w->sb); /* kills and reaps */
  fork_pending_free(w->fork_pending);
  if (w->out_fd >= 0)
    close(w->out_fd);
  if (w->err_fd >= 0)
    close(w->err_fd);
  if (w->job_fd >= 0)
    close(w->job_fd);
  free(w);
}

/* Start building one warm sandbox and add it to the pool, not ready yet: the loop finishes it
 * when its spawn fd turns readable (sandbox_spawn_start/finish), so building never blocks the
 * loop for longer than creating the process takes. */
static int warm_spawn(struct server *srv, enum mcp_lang lang, sbx_error_t *err)
{
  /* Its limits are the policy's defaults, but with the longest timeout a call may ask for: the
   * call sets its own deadline at delivery. (Only a degraded sandbox, with no cgroup, sees the
   * difference: its RLIMIT_CPU is the maximum timeout rather than the call's.) */
  struct sbx_limits req, limits;
  limits_unset(&req);
  req.timeout_ms = srv->policy->max.timeout_ms;
  if (policy_resolve_limits(srv->policy, &req, &limits, err) < 0)
    return -1;
  /* Python's runner waits for its job on fd 3 (warm mode), another interpreter for its stdin. */
  _cleanup_sandbox_fds_ struct sandbox_fds f = SANDBOX_FDS_INIT;
  if (sandbox_fds_open(lang, &f, err) < 0)
    return -1;
  struct sbx_spec spec;
  base_spec(srv, lang, &limits, f.inside, f.out_w, f.err_w, &spec);
  struct warm *w = calloc(1, sizeof *w);
  if (!w)
    return sbx_error_set(err, ENOMEM, "warm sandbox");
  w->lang = lang;
  if (sandbox_spawn_start(&spec, &w->sb, err) < 0) {
    free(w);
    return -1;
  }
  /* No deadline while idle: the call's starts at delivery. */
  sandbox_set_deadline(w->sb, UINT64_MAX);
  w->out_fd = TAKE_FD(f.out_r);
  w->err_fd = TAKE_FD(f.err_r);
  w->job_fd = TAKE_FD(f.job);
  slist_append(&srv->warm, w);
  srv->n_warm++;
  return 0;
}

void warm_unlink(struct server *srv, struct warm *w)
{
  if (slist_unlink(&srv->warm, w))
    srv->n_warm--;
}

/* Kill and reap an idle one taken out of the pool, and let go of its fork template. */
void warm_drop(struct server *srv, struct warm *w)
{
  struct fork_pool_entry *e = TAKE_PTR(w->fork_tmpl);
  warm_free(w);
  fork_pool_release(srv, e);
}

/* A warm sandbox ended while idle (its Python failed to start, or something killed it): drop it,
 * and wait a while before the next, so a broken setup does not spin. */
static void warm_died(struct server *srv, struct warm *w, const char *why)
{
  /* A ready forked one dies with its template, which is replaced at once (fork_pool.c). */
  if (w->fork_tmpl && !fork_pool_alive(w->fork_tmpl)) {
    warm_unlink(srv, w);
    warm_drop(srv, w);
    return;
  }
  char buf[512];
  ssize_t n = why ? 0 : read(w->err_fd, buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  if (why)
    log_warn("a warm sandbox could not be built: %s", why);
  else
    log_warn("a warm sandbox ended before it got a job%s%s", n > 0 ? ": " : "", buf);
  warm_unlink(srv, w);
  warm_drop(srv, w);
  srv->warm_retry_ns = now_ns() + WARM_RETRY_NS;
}

/* The language kept warm (--warm-lang) with the fewest sandboxes in the pool, if it is short. */
static bool warm_short(const struct server *srv, enum mcp_lang *ret)
{
  size_t have[MCP_LANG_COUNT] = {0}, least = SIZE_MAX;
  for (const struct warm *w = srv->warm; w; w = w->next)
    have[w->lang]++;
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    if ((srv->warm_langs & MCP_LANG_BIT(l)) && have[l] < srv->warm_target && have[l] < least) {
      least = have[l];
      *ret = (enum mcp_lang) l;
    }
  return least != SIZE_MAX;
}

/* Top the pool up by one. */
static void warm_refill(struct server *srv, enum mcp_lang lang)
{
  sbx_error_t err = {0};
  /* --warm-mode fork: Python's are forks of the template, set up all the way to their job. */
  bool forked = lang == MCP_LANG_PYTHON && srv->warm_fork;
  if ((forked ? fork_warm_spawn(srv, &err) : warm_spawn(srv, lang, &err)) < 0) {
    log_warn("warm sandbox: %s", err.msg);
    srv->warm_retry_ns = now_ns() + WARM_RETRY_NS;
  }
}

/* Top the pool up by one when it is short, unless a call started moments ago; lowers *timeout to
 * when that is due. Starting one only creates the process (about a millisecond); the rest of its
 * setup runs concurrently (warm_pool_dispatch). */
void warm_pool_top_up(struct server *srv, bool code_running, int *timeout)
{
  enum mcp_lang lang;
  uint64_t now = now_ns();
  /* A forked one whose child does not answer in time (sandbox/fork_template.c's CHILD_STEP_MS) goes. */
  for (struct warm *w = srv->warm, *next; w; w = next) {
    next = w->next;
    if (!w->fork_pending)
      continue;
    int t = ms_until(fork_pending_deadline(w->fork_pending), now);
    if (t == 0)
      warm_died(srv, w, "a forked sandbox did not answer in time");
    else if (*timeout < 0 || t < *timeout)
      *timeout = t;
  }
  if (!warm_short(srv, &lang))
    return;
  uint64_t at = srv->warm_retry_ns;
  if (code_running && srv->last_call_ns + WARM_DEFER_NS > at)
    at = srv->last_call_ns + WARM_DEFER_NS;
  int t = ms_until(at, now);
  if (t == 0) {
    warm_refill(srv, lang);
    return;
  }
  if (*timeout < 0 || t < *timeout)
    *timeout = t;
}

/* One entry per warm sandbox, in pool order: its setup while it is built, then its end; then the
 * fork template's successor while it starts (fork_pool.c). */
size_t warm_pool_pollfds(struct server *srv, struct pollfd *pfds)
{
  size_t n = 0;
  for (struct warm *w = srv->warm; w; w = w->next)
    pfds[n++] = (struct pollfd){.fd = w->ready          ? sandbox_pidfd(w->sb)
                                      : w->fork_pending ? fork_pending_fd(w->fork_pending)
                                                        : sandbox_spawn_fd(w->sb),
                                .events = POLLIN};
  return n + fork_pool_pollfds(srv, pfds + n);
}

/* The n entries of warm_pool_pollfds, the pool unchanged since. */
void warm_pool_dispatch(struct server *srv, const struct pollfd *pfds, size_t n)
{
  struct warm *w = srv->warm;
  size_t i = 0;
  for (; i < n && w; i++) {
    struct warm *next = w->next;
    if (pfds[i].revents && w->fork_pending) {
      sbx_error_t werr = {0};
      if (fork_warm_step(w, &werr) < 0)
        warm_died(srv, w, werr.msg);
    } else if (pfds[i].revents && !w->ready) {
      sbx_error_t werr = {0};
      if (sandbox_spawn_finish(w->sb, &werr) == 0)
        w->ready = true;
      else
        warm_died(srv, w, werr.msg);
    } else if (pfds[i].revents) {
      warm_died(srv, w, NULL);
    }
    w = next;
  }
  if (i < n) /* after the pool's entries */
    fork_pool_dispatch(srv, &pfds[i]);
}

/* Kill and reap every idle warm sandbox. */
void warm_pool_clear(struct server *srv)
{
  while (srv->warm) {
    struct warm *w = srv->warm;
    warm_unlink(srv, w);
    warm_drop(srv, w);
  }
}

void warm_pool_drop_forked(struct server *srv, const struct fork_pool_entry *e)
{
  for (struct warm *w = srv->warm, *next; w; w = next) {
    next = w->next;
    if (w->fork_tmpl == e) {
      warm_unlink(srv, w);
      warm_drop(srv, w);
    }
  }
}
