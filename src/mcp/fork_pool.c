/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --warm-mode fork`, the server's side: which fork template serves its Python
 * calls, and the sandboxes forked from it for calls and for the warm pool (struct warm). The
 * mechanism, a template and each sandbox forked from it, is sandbox/fork_template.c.
 *
 * The str hash secret and the address-space layout are the template's, shared by every call it
 * serves; it is replaced after the policy's fork_template_calls, when it dies, and when the binds change
 * (the client's roots). Its successor starts in the background FORK_TEMPLATE_AHEAD calls before its
 * last; a retired one lives until the last call forked from it has ended. */
#include "mcp/fork_pool.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_runner.h"
#include "policy/policy.h"
#include "sandbox/fork_template.h"
#include "sandbox/sandbox.h"

/* Calls before its last when a template's successor is started. */
#define FORK_TEMPLATE_AHEAD 4

struct fork_pool_entry {
  struct fork_pool_entry *next; /* retired ones, waiting for their last call */
  struct fork_template *t;
  unsigned served, refs;
  size_t binds_hash;
};

/* The sources' inodes too: a root's directory made anew at the same path is a new bind. */
static size_t binds_hash(const struct server *srv)
{
  size_t h = 5381;
  for (size_t i = 0; i < srv->n_spec_binds; i++) {
    for (const char *parts[] = {srv->spec_binds[i].src, srv->spec_binds[i].dst}, **p = parts; p < parts + 2;
         p++)
      for (const char *s = *p; *s; s++)
        h = h * 33 + (unsigned char) *s;
    struct stat st;
    if (fstat(srv->spec_binds[i].fd, &st) == 0)
      h = h * 33 + (size_t) st.st_ino;
  }
  return h;
}

static void entry_free(struct fork_pool_entry *e)
{
  if (!e)
    return;
  fork_template_free(e->t);
  free(e);
}

/* A new template (wait: ready, else begun: fork_template_step finishes it) for the server's
 * Python calls: the spec of a cold one with the longest timeout a call may ask for. */
static int entry_new(struct server *srv, bool wait, struct fork_pool_entry **ret, sbx_error_t *err)
{
  struct fork_pool_entry *e = calloc(1, sizeof *e);
  if (!e)
    return sbx_error_set(err, ENOMEM, "fork template");
  struct sbx_limits req, limits;
  limits_unset(&req);
  req.timeout_ms = srv->policy->max.timeout_ms;
  if (policy_resolve_limits(srv->policy, &req, &limits, err) < 0) {
    free(e);
    return sbx_error_prefix(err, "fork template");
  }
  struct sbx_spec spec;
  base_spec(srv, MCP_LANG_PYTHON, &limits, -1, -1, -1, &spec); /* its own fds replace these */
  struct fork_template_config cfg = {.spec = &spec,
                                     .max_calls = srv->max_concurrent,
                                     .template_source = mcp_template_source,
                                     .runner_source = mcp_runner_source,
                                     .preload = srv->preload};
  if ((wait ? fork_template_start(&cfg, &e->t, err) : fork_template_begin(&cfg, &e->t, err)) < 0) {
    free(e);
    return -1;
  }
  e->binds_hash = binds_hash(srv);
  *ret = e;
  return 0;
}

bool fork_pool_alive(const struct fork_pool_entry *e)
{
  return fork_template_alive(e->t);
}

/* Say that e's template ended, and what it wrote. */
static void template_ended(struct fork_pool_entry *e)
{
  char buf[400];
  size_t n = fork_template_output(e->t, buf, sizeof buf);
  log_warn("the fork template ended%s%s; starting a new one", n ? ": " : "", buf);
}

/* Retire the current template: freed now if no call of it runs, else by its last call. */
static void template_retire(struct server *srv)
{
  struct fork_pool_entry *e = TAKE_PTR(srv->fork_tmpl);
  if (!e)
    return;
  if (!e->refs) {
    entry_free(e);
    return;
  }
  e->next = srv->fork_retired;
  srv->fork_retired = e;
}

/* The template for the next call: replaced when it has served its calls, died, or the binds
 * (the client's roots) changed. */
static int template_get(struct server *srv, struct fork_pool_entry **ret, sbx_error_t *err)
{
  struct fork_pool_entry *e = srv->fork_tmpl;
  if (e && !fork_pool_alive(e)) {
    template_ended(e);
    srv->fork_template_died(srv, e);
  }
  if (e && (!fork_pool_alive(e) || e->served >= srv->policy->fork_template_calls ||
            e->binds_hash != binds_hash(srv)))
    template_retire(srv);
  /* The one started in the background (fork_pool_dispatch), if it is for these binds. */
  if (!srv->fork_tmpl && srv->fork_next) {
    struct fork_pool_entry *next = TAKE_PTR(srv->fork_next);
    sbx_error_t why = {0};
    if (next->binds_hash != binds_hash(srv))
      entry_free(next); /* made for other roots */
    else if (fork_template_wait_ready(next->t, &why) == 0)
      srv->fork_tmpl = next;
    else {
      log_warn("the next fork template: %s", why.msg);
      entry_free(next);
    }
  }
  if (!srv->fork_tmpl && entry_new(srv, true, &srv->fork_tmpl, err) < 0)
    return -1;
  *ret = srv->fork_tmpl;
  return 0;
}

void fork_pool_release(struct server *srv, struct fork_pool_entry *e)
{
  if (!e || --e->refs)
    return;
  for (struct fork_pool_entry **p = &srv->fork_retired; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      entry_free(e);
      return;
    }
}

void fork_pool_clear(struct server *srv)
{
  entry_free(TAKE_PTR(srv->fork_tmpl));
  entry_free(TAKE_PTR(srv->fork_next));
  while (srv->fork_retired) {
    struct fork_pool_entry *e = srv->fork_retired;
    srv->fork_retired = e->next;
    entry_free(e);
  }
}

/* e served one more sandbox (a call's, or a ready one's, which counts from its fork): its
 * successor is started ahead so that the sandbox after its last finds it ready. */
static struct fork_pool_entry *template_served(struct server *srv, struct fork_pool_entry *e)
{
  e->served++;
  e->refs++;
  sbx_error_t why = {0};
  if (!srv->fork_next && e->served + FORK_TEMPLATE_AHEAD >= srv->policy->fork_template_calls &&
      entry_new(srv, false, &srv->fork_next, &why) < 0)
    log_warn("the next fork template: %s", why.msg);
  return e;
}

/* A forked sandbox, begun (its child's answers are collected by the loop: fork_warm_step), with
 * limits; not in the pool. It counts toward its template's fork_template_calls from now, and
 * holds a reference to it until its call ends. */
static int fork_warm_begin(struct server *srv, const struct sbx_limits *limits, struct warm **ret,
                           sbx_error_t *err)
{
  struct fork_pool_entry *e;
  if (template_get(srv, &e, err) < 0)
    return -1;
  _cleanup_sandbox_fds_ struct sandbox_fds f = SANDBOX_FDS_INIT;
  if (sandbox_fds_open(MCP_LANG_PYTHON, &f, err) < 0)
    return -1;
  struct warm *w = calloc(1, sizeof *w);
  if (!w)
    return sbx_error_set(err, ENOMEM, "forked sandbox");
  if (fork_pending_begin(e->t, limits, f.out_w, f.err_w, f.inside, &w->fork_pending, err) < 0) {
    free(w);
    return -1;
  }
  w->lang = MCP_LANG_PYTHON;
  w->fork_tmpl = template_served(srv, e);
  w->out_fd = TAKE_FD(f.out_r);
  w->err_fd = TAKE_FD(f.err_r);
  w->job_fd = TAKE_FD(f.job);
  *ret = w;
  return 0;
}

/* The call's own forked sandbox, begun: the call waits for it (c->pending, call_pending_ready)
 * while the loop serves everything else, so that several calls' sandboxes are set up at once. */
int fork_call_start(struct server *srv, struct call *c, sbx_error_t *err)
{
  struct warm *w;
  if (fork_warm_begin(srv, &c->limits, &w, err) < 0) {
    /* The template died just now (its init may outlive its Python by a moment): once more, with
     * a new one. */
    struct fork_pool_entry *e = srv->fork_tmpl;
    struct pollfd pfd = {.fd = e ? fork_template_pidfd(e->t) : -1, .events = POLLIN};
    if (!e || poll(&pfd, 1, 100) != 1)
      return -1;
    sbx_error_t why = {0};
    if (fork_warm_begin(srv, &c->limits, &w, &why) < 0)
      return (*err = why, -1);
  }
  w->for_call = true;
  c->pending = w;
  c->pending_until = fork_pending_deadline(w->fork_pending);
  return 0;
}

/* A ready forked sandbox for the pool (--warm): forked and set up all the way to reading its job,
 * as a call's is, with the longest timeout a call may ask for (its degraded RLIMIT_CPU); the call
 * sets its deadline at delivery (call_start_warm). */
int fork_warm_spawn(struct server *srv, sbx_error_t *err)
{
  struct sbx_limits req, limits;
  limits_unset(&req);
  req.timeout_ms = srv->policy->max.timeout_ms;
  if (policy_resolve_limits(srv->policy, &req, &limits, err) < 0)
    return -1;
  struct warm *w;
  if (fork_warm_begin(srv, &limits, &w, err) < 0)
    return sbx_error_prefix(err, "ready forked sandbox");
  slist_append(&srv->warm, w);
  srv->n_warm++;
  return 0;
}

int fork_warm_step(struct warm *w, sbx_error_t *err)
{
  int r = fork_pending_step(w->fork_pending, &w->sb, err);
  if (r == 0)
    return 0;
  w->fork_pending = NULL; /* freed */
  if (r < 0)
    return -1;
  /* No deadline while idle: the call's starts at delivery. */
  sandbox_set_deadline(w->sb, UINT64_MAX);
  w->ready = true;
  return 1;
}

/* At server start: the first template, and one sandbox forked from it all the way to its code
 * (which finds no job on fd 3 and ends), so that a kernel or policy the fork path cannot work
 * with fails here, with what failed, rather than at every call. */
int fork_pool_init(struct server *srv, void (*died)(struct server *srv, const struct fork_pool_entry *e),
                   sbx_error_t *err)
{
  srv->fork_template_died = died;
  if (entry_new(srv, true, &srv->fork_tmpl, err) < 0)
    return -1;
  struct sbx_limits req, limits;
  limits_unset(&req);
  struct sbx_sandbox *sb = NULL;
  struct fork_template *t = srv->fork_tmpl->t;
  if (policy_resolve_limits(srv->policy, &req, &limits, err) < 0 ||
      fork_template_fork(t, &limits, srv->devnull, srv->devnull, srv->devnull, &sb, err) < 0) {
    fork_pool_clear(srv); /* the server will not start: shutdown_server never runs */
    return sbx_error_prefix(err, "--warm-mode fork");
  }
  sandbox_free(sb);
  return 0;
}

/* One poll entry: the successor while it starts; else the current template's end, so that a
 * template that dies is replaced at once rather than by the next call. */
size_t fork_pool_pollfds(struct server *srv, struct pollfd *pfd)
{
  if (srv->fork_next && !fork_template_ready(srv->fork_next->t))
    *pfd = (struct pollfd){.fd = fork_template_wait_fd(srv->fork_next->t), .events = POLLIN};
  else if (srv->fork_tmpl && !srv->fork_next)
    *pfd = (struct pollfd){.fd = fork_template_pidfd(srv->fork_tmpl->t), .events = POLLIN};
  else
    return 0;
  return 1;
}

/* The entry of fork_pool_pollfds, nothing changed since. */
void fork_pool_dispatch(struct server *srv, const struct pollfd *pfd)
{
  sbx_error_t err = {0};
  if (!pfd->revents)
    return;
  if (srv->fork_next) {
    if (fork_template_step(srv->fork_next->t, &err) < 0) {
      log_warn("the next fork template: %s", err.msg);
      entry_free(TAKE_PTR(srv->fork_next));
    }
    return;
  }
  template_ended(srv->fork_tmpl);
  srv->fork_template_died(srv, srv->fork_tmpl); /* they died with it */
  template_retire(srv);
  if (entry_new(srv, false, &srv->fork_next, &err) < 0)
    log_warn("the next fork template: %s", err.msg);
}

unsigned long long fork_pool_template_bytes(const struct server *srv)
{
  return srv->fork_tmpl ? fork_template_bytes(srv->fork_tmpl->t) : 0;
}
