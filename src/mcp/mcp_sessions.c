/* SPDX-License-Identifier: Apache-2.0 */
/* Sessions (sandboxd-mcp(7), SESSIONS): opt-in state across calls behind an expiring handle.
 *
 *   session_start   a sandbox spawned as a cold call's (base_spec: the same policy, namespaces,
 *                   seccomp, cgroup; the session's memory limit covers all its calls), running
 *                   inside/session.py: the runner in a loop, on its control socket (fd 3 inside);
 *                   a javascript one, in javascript's rootfs, node running inside/session.js, with
 *                   the session's own stdout/stderr pipes.
 *   a call          sandboxd makes the call's stdout/stderr pipes and job socket, as a one-shot
 *                   call's, and sends their inside ends over the control socket (SCM_RIGHTS); then
 *                   it delivers the job and reads the output and the done byte as for any call
 *                   (mcp_calls.c). Node takes no fds: a javascript call's job and done byte go
 *                   over the control socket itself, its output is what the session's pipes hold
 *                   (js_call_fds). At the call's time limit: SIGINT, and SESSION_GRACE_NS later
 *                   the sandbox is killed (the session is over).
 *   the end         session_end, idle TTL or maximum life (session_timers, from the poll loop),
 *                   the interpreter's death, or the server's exit: the sandbox is killed and
 *                   reaped, an audit record says why, and the handle is remembered with that
 *                   reason (SESSION_TOMBS) so that a later call is told what was lost.
 *
 * Handles are 256 random bits; a session belongs to the token that made it (over HTTP), and any
 * other token is told "unknown session", word for word as for a handle that never existed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/sha256.h"
#include "base/slist.h"
#include "base/util.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_runner.h"
#include "policy/policy.h"
#include "run/audit.h"
#include "sandbox/sandbox.h"

#define START_TOOL "session_start"
#define END_TOOL "session_end"

/* ------------------------------------------------------------------ handles */

static void new_handle(char out[SESSION_ID_LEN + 1])
{
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  unsigned char r[33] = {0};
  size_t got = 0;
  while (got < 32) { /* blocks only before the pool is initialized, never after boot */
    ssize_t n = getrandom(r + got, 32 - got, 0);
    if (n > 0)
      got += (size_t) n;
    else if (errno != EINTR)
      abort(); /* no randomness: never hand out a guessable handle */
  }
  memcpy(out, SESSION_ID_PREFIX, 4);
  /* 256 bits: 42 groups of 6 and 4 bits left (r[32] is zero). */
  for (size_t i = 0; i < 43; i++) {
    size_t bit = i * 6, byte = bit / 8, shift = bit % 8;
    unsigned v = ((unsigned) r[byte] << 8 | r[byte + 1]) >> (10 - shift);
    out[4 + i] = b64[v & 63];
  }
  out[SESSION_ID_LEN] = '\0';
  explicit_bzero(r, sizeof r);
}

/* The handle compared in constant time (its length is not secret: every handle has the same). */
static bool same_handle(const char *a, const char *b)
{
  if (strlen(b) != SESSION_ID_LEN)
    return false;
  unsigned char d = 0;
  for (size_t i = 0; i < SESSION_ID_LEN; i++)
    d |= (unsigned char) (a[i] ^ b[i]);
  return d == 0;
}

/* Whether owner (a token's sha256, or "") is the caller's, in constant time. */
static bool same_owner(const char *owner, const struct server *srv)
{
  const char *mine = srv->owner ? srv->owner : "";
  size_t n = strlen(owner);
  if (n != strlen(mine))
    return false;
  unsigned char d = 0;
  for (size_t i = 0; i < n; i++)
    d |= (unsigned char) (owner[i] ^ mine[i]);
  return d == 0;
}

/* "15 min", "2 h", "40 s". */
static const char *duration(uint64_t s, char *buf, size_t len)
{
  if (s && s % 3600 == 0)
    bufprintf_cut(buf, len, "%llu h", (unsigned long long) (s / 3600));
  else if (s && s % 60 == 0)
    bufprintf_cut(buf, len, "%llu min", (unsigned long long) (s / 60));
  else
    bufprintf_cut(buf, len, "%llu s", (unsigned long long) s);
  return buf;
}

static void unknown_session(const char *sid, char *msg, size_t len)
{
  bufprintf_cut(msg, len,
                "unknown session %.60s: no session with this handle exists here (sessions end when idle "
                "or old, and none survives a restart of the server); call " START_TOOL " for a new one",
                sid);
}

/* The live session sid of the caller, or NULL; else, in msg, what the caller is told. */
static struct session *session_find(struct server *srv, const char *sid, char *msg, size_t len)
{
  struct session *found = NULL;
  for (struct session *s = srv->sessions; s; s = s->next)
    if (same_handle(s->id, sid) && same_owner(s->owner, srv))
      found = s;
  if (found)
    return found;
  const struct session_tomb *tomb = NULL;
  for (size_t i = 0; i < SESSION_TOMBS; i++)
    if (srv->tombs[i].why && same_handle(srv->tombs[i].id, sid) && same_owner(srv->tombs[i].owner, srv))
      tomb = &srv->tombs[i];
  if (tomb)
    bufprintf_cut(msg, len, "%s", tomb->why);
  else
    unknown_session(sid, msg, len);
  return NULL;
}

/* ------------------------------------------------------------------ the end */

static void audit_session(struct server *srv, const struct session *s, const char *event, const char *reason,
                          const char *why)
{
  (void) srv;
  struct audit_session rec = {
      .event = event,
      .session = s->hash,
      .client = s->client[0] ? s->client : NULL,
      .language = mcp_lang_name(s->lang),
      .limits = &s->limits,
      .idle_s = s->idle_s,
      .max_life_s = s->max_life_s,
      .calls = s->calls,
      .reason = reason,
      .message = why,
  };
  audit_write_session(&rec);
}

/* Remember why s ended, for its owner's later calls. */
static void bury(struct server *srv, const struct session *s, const char *why)
{
  struct session_tomb *t = &srv->tombs[srv->tomb_next];
  srv->tomb_next = (srv->tomb_next + 1) % SESSION_TOMBS;
  free(t->why);
  memcpy(t->id, s->id, sizeof t->id);
  memcpy(t->owner, s->owner, sizeof t->owner);
  t->why = strdup(why);
}

static void gone_msg(const struct session *s, const char *what, char *buf, size_t len)
{
  bufprintf_cut(buf, len, "session %s %s; its variables and files are gone; call " START_TOOL, s->id, what);
}

/* End s: recorded (reason: ended, idle, max_life, died, server_exit; what: what happened, which
 * a later call is told with the handle, and the audit log without it), its sandbox killed and
 * reaped (or, while a call runs on it, left to that call, which reaps it and says why), s freed. */
static void session_destroy(struct server *srv, struct session *s, const char *reason, const char *what)
{
  char why[400];
  gone_msg(s, what, why, sizeof why);
  audit_session(srv, s, "session_end", reason, what);
  bury(srv, s, why);
  slist_unlink(&srv->sessions, s);
  srv->n_sessions--;
  int *fds[] = {&s->ctl_fd, &s->out_fd, &s->err_fd};
  for (size_t i = 0; i < 3; i++)
    sbx_closep(fds[i]);
  if (s->busy) {
    struct call *c = s->busy;
    c->sess = NULL; /* the call owns the sandbox now, and ends with it */
    free(c->sess_gone);
    c->sess_gone = strdup(why);
    if (!c->killed && s->sb) {
      c->killed = true;
      sandbox_kill(s->sb, false);
    }
  } else if (s->sb) {
    sandbox_kill(s->sb, false);
    struct sbx_result res;
    sbx_error_t err = {0};
    sandbox_wait(s->sb, &res, &err);
    sandbox_free(s->sb);
  }
  free(s);
}

/* What the end of an interpreter says, from its sandbox's result. */
static void death_msg(const struct session *s, const struct sbx_result *res, bool interrupted, char *what,
                      size_t len)
{
  char size[32];
  if (res->status == SBX_STATUS_MEMORY_LIMIT)
    bufprintf_cut(what, len, "is over: its interpreter was killed at the memory limit (%s for the session)",
                  format_size(s->limits.memory_bytes, size, sizeof size));
  else if (interrupted)
    bufprintf_cut(what, len,
                  "is over: its interpreter did not stop within %llu s of the interrupt at a call's time "
                  "limit and was killed",
                  SESSION_GRACE_NS / 1000000000ULL);
  else if (res->signal)
    bufprintf_cut(what, len, "is over: its interpreter was killed by signal %d", res->signal);
  else
    bufprintf_cut(what, len, "is over: its interpreter exited (status %d)", res->exit_code);
}

void session_call_lost(struct server *srv, struct call *c, const struct sbx_result *res)
{
  struct session *s = c->sess;
  char what[200];
  death_msg(s, res, c->interrupted, what, sizeof what);
  s->sb = NULL; /* reaped already: the call's now (session_destroy), freed with it */
  session_destroy(srv, s, "died", what);
}

/* ------------------------------------------------------------------ calls */

struct session *session_for_call(struct server *srv, const char *sid, enum mcp_lang lang, char *msg,
                                 size_t msg_len)
{
  struct session *s = session_find(srv, sid, msg, msg_len);
  if (!s)
    return NULL;
  if (s->lang != lang) {
    bufprintf_cut(msg, msg_len, "session %s runs %s, not %s", s->id, mcp_lang_name(s->lang),
                  mcp_lang_name(lang));
    return NULL;
  }
  if (s->busy) {
    bufprintf_cut(msg, msg_len,
                  "session busy: session %s is running another call (calls on one session run one at a "
                  "time); wait for its result, then call again",
                  s->id);
    return NULL;
  }
  return s;
}

/* What is in one of the session's pipes now, and no more: into the call's capture, or dropped
 * (c NULL). Never to EOF: a javascript session's pipes outlive the call, and what its background
 * work writes from now on must not keep the loop reading. */
static void take_queued(int fd, struct call *c, enum capture_stream_id id)
{
  char buf[MCP_READ_CHUNK];
  int queued = 0;
  if (fd < 0 || ioctl(fd, FIONREAD, &queued) < 0)
    return;
  while (queued > 0) {
    ssize_t n = read(fd, buf, (size_t) queued < sizeof buf ? (size_t) queued : sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    if (c)
      capture_add(&c->cap, id, buf, (size_t) n);
    queued -= (int) n;
  }
}

void session_call_output(struct call *c)
{
  take_queued(c->out_fd, c, CAPTURE_STDOUT);
  take_queued(c->err_fd, c, CAPTURE_STDERR);
}

/* A javascript call's channels (Node takes no fds over SCM_RIGHTS; inside/session.js): what its
 * background work wrote since the last call dropped, then dups of the session's pipes and of its
 * control socket, which takes the job and gives the done byte. */
static int js_call_fds(struct session *s, struct call *c, int *ret_job, sbx_error_t *err)
{
  take_queued(s->out_fd, NULL, CAPTURE_STDOUT);
  take_queued(s->err_fd, NULL, CAPTURE_STDERR);
  _cleanup_close_ int out = fcntl(s->out_fd, F_DUPFD_CLOEXEC, 3);
  _cleanup_close_ int errfd = fcntl(s->err_fd, F_DUPFD_CLOEXEC, 3);
  int job = fcntl(s->ctl_fd, F_DUPFD_CLOEXEC, 3);
  if (out < 0 || errfd < 0 || job < 0) {
    if (job >= 0)
      close(job);
    return sbx_error_errno(err, "session %.12s...: its pipes", s->id);
  }
  c->out_fd = TAKE_FD(out);
  c->err_fd = TAKE_FD(errfd);
  *ret_job = job;
  return 0;
}

/* A Python or bash call's channels: its own pipes and job socket, their inside ends sent to the
 * session's loop (inside/session.py). */
static int py_call_fds(struct session *s, struct call *c, int *ret_job, sbx_error_t *err)
{
  _cleanup_sandbox_fds_ struct sandbox_fds f = SANDBOX_FDS_INIT;
  if (sandbox_fds_open(MCP_LANG_PYTHON, &f, err) < 0)
    return -1;
  int fds[3] = {f.out_w, f.err_w, f.inside};
  char cbuf[CMSG_SPACE(sizeof fds)] = {0};
  struct iovec iov = {.iov_base = "c", .iov_len = 1};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(cm), fds, sizeof fds);
  ssize_t n;
  do
    n = sendmsg(s->ctl_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    return sbx_error_errno(err, "session %.12s...: hand the call to its interpreter", s->id);
  c->out_fd = TAKE_FD(f.out_r);
  c->err_fd = TAKE_FD(f.err_r);
  *ret_job = TAKE_FD(f.job);
  return 0;
}

int session_call_start(struct server *srv, struct call *c, sbx_error_t *err)
{
  (void) srv;
  struct session *s = c->sess;
  int job = -1;
  if ((s->lang == MCP_LANG_JAVASCRIPT ? js_call_fds : py_call_fds)(s, c, &job, err) < 0)
    return -1;
  uint64_t timeout_ms = c->limits.timeout_ms;
  c->limits = s->limits;
  c->limits.timeout_ms = timeout_ms;
  c->sb = s->sb; /* the session's: not the call's to free */
  memcpy(c->sess_hash, s->hash, sizeof c->sess_hash);
  s->busy = c;
  s->calls++;
  s->used_ns = now_ns();
  sandbox_start_clock(s->sb);
  sandbox_set_deadline(s->sb, s->used_ns + timeout_ms * 1000000ULL);
  if (call_deliver(c, job, "session", err) < 0) {
    s->busy = NULL;
    c->sb = NULL;
    return -1;
  }
  return 0;
}

void session_call_over(struct server *srv, struct call *c)
{
  (void) srv;
  struct session *s = c->sess;
  s->busy = NULL;
  s->used_ns = now_ns();
  c->sess = NULL;
  c->sb = NULL;
}

/* ------------------------------------------------------------------ timers and deaths */

int session_timers(struct server *srv)
{
  uint64_t now = now_ns();
  int timeout = -1;
  char what[120], d[32];
  for (struct session *s = srv->sessions, *next; s; s = next) {
    next = s->next;
    uint64_t idle_at = s->used_ns + s->idle_s * 1000000000ULL;
    uint64_t end_at = s->started_ns + s->max_life_s * 1000000000ULL;
    if (now >= end_at) {
      bufprintf_cut(what, sizeof what, "reached its maximum life of %s and was ended",
                    duration(s->max_life_s, d, sizeof d));
      session_destroy(srv, s, "max_life", what);
      continue;
    }
    if (!s->busy && now >= idle_at) {
      bufprintf_cut(what, sizeof what, "expired after %s idle", duration(s->idle_s, d, sizeof d));
      session_destroy(srv, s, "idle", what);
      continue;
    }
    int t = ms_until(s->busy ? end_at : idle_at < end_at ? idle_at : end_at, now);
    if (timeout < 0 || t < timeout)
      timeout = t;
  }
  return timeout;
}

size_t session_pollfds(struct server *srv, struct pollfd *pfds)
{
  size_t n = 0;
  for (struct session *s = srv->sessions; s; s = s->next)
    pfds[n++] = (struct pollfd){.fd = s->busy ? -1 : sandbox_pidfd(s->sb), .events = POLLIN};
  return n;
}

void session_dispatch(struct server *srv, const struct pollfd *pfds, size_t n)
{
  struct session *s = srv->sessions;
  for (size_t i = 0; i < n && s; i++) {
    struct session *next = s->next;
    if (pfds[i].revents && !s->busy && pfds[i].fd == sandbox_pidfd(s->sb)) {
      struct sbx_result res;
      sbx_error_t err = {0};
      char what[200];
      if (sandbox_wait(s->sb, &res, &err) < 0)
        res = (struct sbx_result){.status = SBX_STATUS_KILLED};
      death_msg(s, &res, false, what, sizeof what);
      session_destroy(srv, s, "died", what);
    }
    s = next;
  }
}

void sessions_clear(struct server *srv)
{
  while (srv->sessions)
    session_destroy(srv, srv->sessions, "server_exit", "was ended: the server stopped");
  for (size_t i = 0; i < SESSION_TOMBS; i++)
    free(TAKE_PTR(srv->tombs[i].why));
}

/* ------------------------------------------------------------------ the tools */

/* A whole number of seconds in args[key], from 1 to max (default def). -1 with msg set. */
static int arg_seconds(const json_node_t *args, const char *key, uint64_t def, uint64_t max, uint64_t *ret,
                       char *msg, size_t len)
{
  const json_node_t *n = json_get(args, key);
  long long v;
  *ret = def;
  if (!n || json_type(n) == JSON_NULL)
    return 0;
  if (json_as_int(n, &v) < 0 || v <= 0) {
    bufprintf_cut(msg, len, "`%s` must be a positive whole number of seconds", key);
    return -1;
  }
  if ((uint64_t) v > max) {
    bufprintf_cut(msg, len, "`%s` %lld is above this server's limit of %llu s", key, v,
                  (unsigned long long) max);
    return -1;
  }
  *ret = (uint64_t) v;
  return 0;
}

/* The languages a session may run: python; bash where it is in python's rootfs (a bash
 * session's shell is kept by the Python loop, inside/session.py); javascript where the server
 * offers it (its own rootfs: inside/session.js is its loop). */
static unsigned session_langs(const struct server *srv)
{
  unsigned langs = MCP_LANG_BIT(MCP_LANG_PYTHON);
  if ((srv->langs & MCP_LANG_BIT(MCP_LANG_BASH)) && srv->lang_rootfs[MCP_LANG_BASH] && srv->rootfs &&
      strcmp(srv->lang_rootfs[MCP_LANG_BASH], srv->rootfs) == 0)
    langs |= MCP_LANG_BIT(MCP_LANG_BASH);
  if ((srv->langs & MCP_LANG_BIT(MCP_LANG_JAVASCRIPT)) && srv->lang_rootfs[MCP_LANG_JAVASCRIPT])
    langs |= MCP_LANG_BIT(MCP_LANG_JAVASCRIPT);
  return langs;
}

/* "python only", "python or bash", "python, bash or javascript". */
static const char *session_langs_text(unsigned langs, char *buf, size_t len)
{
  size_t n = 0, k = 0;
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    n += !!(langs & MCP_LANG_BIT(l));
  buf[0] = '\0';
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    if (langs & MCP_LANG_BIT(l)) {
      k++;
      bufprintf_cut(buf + strlen(buf), len - strlen(buf), "%s%s",
                    k == 1   ? ""
                    : k == n ? " or "
                             : ", ",
                    mcp_lang_name((enum mcp_lang) l));
    }
  if (n == 1)
    bufprintf_cut(buf + strlen(buf), len - strlen(buf), " only");
  return buf;
}

/* session_start's arguments: language, idle_timeout, max_life, memory_mb. */
static int start_args(struct server *srv, const json_node_t *args, struct session *s, char *msg, size_t len)
{
  if (args && json_type(args) != JSON_OBJECT) {
    bufprintf_cut(msg, len, "arguments must be an object");
    return -1;
  }
  const char *lang = json_as_string(json_get(args, "language"), NULL);
  s->lang = MCP_LANG_PYTHON;
  if (json_get(args, "language") && json_type(json_get(args, "language")) != JSON_NULL &&
      (!lang || mcp_lang_parse(lang, &s->lang) < 0 || !(session_langs(srv) & MCP_LANG_BIT(s->lang)))) {
    char langs[64];
    bufprintf_cut(msg, len, "`language` %.40s is not supported in a session: sessions run %s",
                  lang ? lang : "(not a string)",
                  session_langs_text(session_langs(srv), langs, sizeof langs));
    return -1;
  }
  if (arg_seconds(args, "idle_timeout", srv->session_idle_s, srv->session_idle_s, &s->idle_s, msg, len) < 0 ||
      arg_seconds(args, "max_life", srv->session_max_life_s, srv->session_max_life_s, &s->max_life_s, msg,
                  len) < 0)
    return -1;
  struct sbx_limits req;
  limits_unset(&req);
  const json_node_t *mem = json_get(args, "memory_mb");
  long long mb;
  if (mem && json_type(mem) != JSON_NULL) {
    if (json_as_int(mem, &mb) < 0 || mb <= 0) {
      bufprintf_cut(msg, len, "`memory_mb` must be a positive whole number of MiB");
      return -1;
    }
    if ((uint64_t) mb > srv->policy->max.memory_bytes >> 20) {
      bufprintf_cut(msg, len, "`memory_mb` %lld is above the policy's maximum of %llu MiB", mb,
                    (unsigned long long) (srv->policy->max.memory_bytes >> 20));
      return -1;
    }
    req.memory_bytes = (uint64_t) mb << 20;
  }
  /* The interpreter's CPU-time rlimit follows the timeout (sandbox.c): the session's life. */
  req.timeout_ms = s->max_life_s * 1000;
  sbx_error_t err = {0};
  struct sbx_policy loose = *srv->policy;
  if (loose.max.timeout_ms < req.timeout_ms)
    loose.max.timeout_ms = req.timeout_ms;
  if (policy_resolve_limits(&loose, &req, &s->limits, &err) < 0) {
    bufprintf_cut(msg, len, "%s", err.msg);
    return -1;
  }
  return 0;
}

/* How many live sessions the caller holds. */
static size_t sessions_of_caller(const struct server *srv)
{
  size_t n = 0;
  for (const struct session *s = srv->sessions; s; s = s->next)
    n += same_owner(s->owner, srv);
  return n;
}

/* The session's sandbox: a one-shot call's of its language (base_spec: rootfs, policy, limits),
 * running the session's loop instead, its control socket at fd 3 (the bridge's place). */
static int session_spawn(struct server *srv, struct session *s, sbx_error_t *err)
{
  static char *argv[] = {PYTHON, "-c", (char *) mcp_session_source, NULL, NULL};
  static char *js_argv[] = {"/usr/bin/node", "-e", (char *) mcp_session_js_source, NULL};
  bool js = s->lang == MCP_LANG_JAVASCRIPT;
  argv[3] = s->lang == MCP_LANG_BASH ? "bash" : NULL; /* (session.py keeps a bash) */
  _cleanup_sandbox_fds_ struct sandbox_fds f = SANDBOX_FDS_INIT;
  if (sandbox_fds_open(MCP_LANG_PYTHON, &f, err) < 0) /* (a socket at fd 3, whatever the language) */
    return -1;
  struct sbx_spec spec;
  /* Python's stdout and stderr are /dev/null: each call brings its own. Node's are the session's
   * pipes, each call's output in turn (js_call_fds). */
  base_spec(srv, js ? MCP_LANG_JAVASCRIPT : MCP_LANG_PYTHON, &s->limits, f.inside,
            js ? f.out_w : srv->devnull, js ? f.err_w : srv->devnull, &spec);
  spec.argv = js ? js_argv : argv;
  spec.stdin_fd = srv->devnull;
  spec.bridge_fd = f.inside;
  if (sandbox_spawn(&spec, &s->sb, err) < 0)
    return -1;
  s->ctl_fd = TAKE_FD(f.job);
  if (js) {
    s->out_fd = TAKE_FD(f.out_r);
    s->err_fd = TAKE_FD(f.err_r);
  }
  return 0;
}

static void write_start_result(struct server *srv, const char *id, const struct session *s)
{
  static const char *const tools[MCP_LANG_COUNT] = {
      "run_python or execute_code", "execute_code (language bash)", "execute_code (language javascript)"};
  static const char *const kept[MCP_LANG_COUNT] = {
      "imports and", "functions, the working directory and",
      "top-level declarations, modules from `await import()` (static import is not available), timers and"};
  char expires[32], text[800], d1[32], d2[32], size[32];
  int y, mo, d, h, mi, sec;
  int64_t idle_end = s->started_wall + (int64_t) s->idle_s,
          life_end = s->started_wall + (int64_t) s->max_life_s;
  utc_time(idle_end < life_end ? idle_end : life_end, &y, &mo, &d, &h, &mi, &sec);
  bufprintf_cut(expires, sizeof expires, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, h, mi, sec);
  bufprintf_cut(text, sizeof text,
                "Session %s started (%s). Pass it as session_id to %s: variables, %s files in /tmp and "
                "/workspace stay across its calls. It ends after "
                "%s without a call, or %s after its start, or at " END_TOOL "; its memory limit (%s) covers "
                "all its calls; nothing of it survives a restart of the server.",
                s->id, mcp_lang_name(s->lang), tools[s->lang], kept[s->lang],
                duration(s->idle_s, d1, sizeof d1), duration(s->max_life_s, d2, sizeof d2),
                format_size(s->limits.memory_bytes, size, sizeof size));
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  srv->route = srv->route;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "content");
  json_arr_begin(w);
  json_obj_begin(w);
  json_kv_str(w, "type", "text");
  json_kv_str(w, "text", text);
  json_obj_end(w);
  json_arr_end(w);
  json_key(w, "structuredContent");
  json_obj_begin(w);
  json_kv_str(w, "session_id", s->id);
  json_kv_str(w, "expires_at", expires);
  json_kv_uint(w, "idle_ttl_s", s->idle_s);
  json_kv_uint(w, "max_life_s", s->max_life_s);
  json_kv_str(w, "language", mcp_lang_name(s->lang));
  json_kv_uint(w, "memory_bytes", s->limits.memory_bytes);
  json_obj_end(w);
  json_kv_bool(w, "isError", false);
  mcp_result_fields(srv->protocol, w, -1);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

void session_tool_start(struct server *srv, const char *id, const json_node_t *args)
{
  char msg[400];
  if (srv->n_sessions >= srv->max_sessions) {
    send_tool_error(srv, id,
                    "too many sessions: this server holds at most %llu at once (max_sessions); end one "
                    "with " END_TOOL " or use run_python without session_id",
                    (unsigned long long) srv->max_sessions);
    return;
  }
  if (sessions_of_caller(srv) >= srv->max_sessions_per_token) {
    send_tool_error(srv, id,
                    "too many sessions: a client holds at most %llu at once (max_sessions_per_token); end "
                    "one with " END_TOOL " or use run_python without session_id",
                    (unsigned long long) srv->max_sessions_per_token);
    return;
  }
  struct session *s = calloc(1, sizeof *s);
  if (!s) {
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  s->ctl_fd = s->out_fd = s->err_fd = -1;
  if (start_args(srv, args, s, msg, sizeof msg) < 0) {
    free(s);
    send_tool_error(srv, id, "%s", msg);
    return;
  }
  /* Behind nginx's `hash $http_mcp_param_session consistent`: one that routes here (with n
   * replicas of equal weight, n draws on average; each is still 256 random bits). */
  do
    new_handle(s->id);
  while (!route_ring_mine(&srv->ring, s->id, SESSION_ID_LEN));
  char hex[65];
  sha256_hex(s->id, SESSION_ID_LEN, hex);
  memcpy(s->hash, hex, 16);
  bufprintf_cut(s->owner, sizeof s->owner, "%s", srv->owner ? srv->owner : "");
  if (srv->client_name)
    bufprintf_cut(s->client, sizeof s->client, "%s", srv->client_name);
  sbx_error_t err = {0};
  if (session_spawn(srv, s, &err) < 0) {
    log_sbx_error(&err);
    free(s);
    send_tool_error(srv, id, "sandboxd could not start the session's sandbox: %s", err.msg);
    return;
  }
  s->started_ns = s->used_ns = now_ns();
  s->started_wall = (int64_t) time(NULL);
  slist_append(&srv->sessions, s);
  srv->n_sessions++;
  audit_session(srv, s, "session_start", NULL, NULL);
  write_start_result(srv, id, s);
}

void session_tool_end(struct server *srv, const char *id, const json_node_t *args)
{
  const char *sid = json_as_string(json_get(args, "session_id"), NULL);
  char msg[400];
  if (!sid) {
    send_tool_error(srv, id, "missing `session_id`: the handle session_start returned");
    return;
  }
  struct session *s = session_find(srv, sid, msg, sizeof msg);
  if (!s) {
    send_tool_error(srv, id, "%s", msg);
    return;
  }
  char text[500];
  bufprintf_cut(text, sizeof text, "Session %s ended%s; its variables and files are gone.", s->id,
                s->busy ? " (its running call was killed)" : "");
  session_destroy(srv, s, "ended", "was ended by " END_TOOL);
  send_text_result(srv, id, false, text);
}

static void prop(json_writer_t *w, const char *name, const char *type, const char *desc)
{
  json_key(w, name);
  json_obj_begin(w);
  json_kv_str(w, "type", type);
  json_kv_str(w, "description", desc);
  json_obj_end(w);
}

/* Neither reads nor writes anything outside sandboxd's own sandboxes: not read-only (a session is
 * made or ended, and its state with it), destructive for session_end (the session's state is
 * lost), closed world. */
static void annotations(json_writer_t *w, const char *title, bool destructive, bool idempotent, bool icons)
{
  json_key(w, "annotations");
  json_obj_begin(w);
  json_kv_str(w, "title", title);
  json_kv_bool(w, "readOnlyHint", false);
  json_kv_bool(w, "destructiveHint", destructive);
  json_kv_bool(w, "idempotentHint", idempotent);
  json_kv_bool(w, "openWorldHint", false);
  json_obj_end(w);
  if (icons)
    mcp_icons_write(w);
}

void session_tools_write(struct server *srv, json_writer_t *w, bool icons)
{
  char desc[1200], d1[32], d2[32];
  bool js = session_langs(srv) & MCP_LANG_BIT(MCP_LANG_JAVASCRIPT);
  bufprintf_cut(desc, sizeof desc,
                "Start a session: one sandbox whose Python interpreter (or %s, with language) keeps its "
                "variables, imports, files (/tmp, /workspace) and background processes across calls. Returns "
                "session_id; pass it to run_python or execute_code. Calls on a session run one at a time.%s "
                "It ends after %s "
                "without a call (idle_timeout) or %s after its start (max_life), at " END_TOOL
                ", or when its interpreter is killed (memory limit, or a call that does not stop at its "
                "time limit); then its state is gone and calls say why. Nothing survives a restart of the "
                "server. Without a session every call runs in a fresh sandbox.",
                session_langs(srv) & MCP_LANG_BIT(MCP_LANG_BASH) ? (js ? "bash or Node.js" : "bash")
                                                                 : (js ? "Node.js" : "bash"),
                js ? " A javascript session runs each call as Node's REPL does: top-level let, const, "
                     "function and class stay for the next call and top-level await works, but static "
                     "import is not available (use `await import()`); output its background timers write "
                     "between calls is dropped."
                   : "",
                duration(srv->session_idle_s, d1, sizeof d1),
                duration(srv->session_max_life_s, d2, sizeof d2));
  json_obj_begin(w);
  json_kv_str(w, "name", START_TOOL);
  json_kv_str(w, "title", "Start a sandbox session");
  json_kv_str(w, "description", desc);
  json_key(w, "inputSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_key(w, "language");
  json_obj_begin(w);
  json_kv_str(w, "type", "string");
  json_key(w, "enum");
  json_arr_begin(w);
  json_str(w, "python");
  if (session_langs(srv) & MCP_LANG_BIT(MCP_LANG_BASH))
    json_str(w, "bash");
  if (js)
    json_str(w, "javascript");
  json_arr_end(w);
  json_kv_str(w, "description",
              "The session's interpreter: python (the default), bash (one shell: its variables, "
              "functions and working directory last; `exit` ends the session) or javascript (one Node.js: "
              "top-level declarations and globalThis last; process.exit() ends the session), as the "
              "server offers them.");
  json_obj_end(w);
  prop(w, "idle_timeout", "integer", "Seconds without a call before it ends (at most the server's).");
  prop(w, "max_life", "integer", "Seconds from its start before it ends (at most the server's).");
  prop(w, "memory_mb", "integer", "Memory for the whole session, MiB (within the policy's maximum).");
  json_obj_end(w);
  json_obj_end(w);
  json_key(w, "outputSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  prop(w, "session_id", "string", "the handle: sbx_ and 256 random bits");
  prop(w, "expires_at", "string", "when it ends if no call comes (UTC, ISO 8601)");
  prop(w, "idle_ttl_s", "integer", "seconds without a call before it ends");
  prop(w, "max_life_s", "integer", "seconds from its start before it ends");
  prop(w, "language", "string", "its interpreter");
  prop(w, "memory_bytes", "integer", "its memory limit, for all its calls");
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "session_id");
  json_str(w, "expires_at");
  json_str(w, "idle_ttl_s");
  json_str(w, "max_life_s");
  json_arr_end(w);
  json_obj_end(w);
  annotations(w, "Start a sandbox session", false, false, icons);
  json_obj_end(w);

  json_obj_begin(w);
  json_kv_str(w, "name", END_TOOL);
  json_kv_str(w, "title", "End a sandbox session");
  json_kv_str(w, "description",
              "End a session now: its sandbox, interpreter, variables, files and processes are gone (a "
              "call running on it is killed). Later calls with its session_id say it was ended.");
  json_key(w, "inputSchema");
  json_obj_begin(w);
  json_kv_str(w, "type", "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_key(w, "session_id"); /* mirrored into Mcp-Param-Session (mcp_tool_header_params) */
  json_obj_begin(w);
  json_kv_str(w, "type", "string");
  json_kv_str(w, "description", "the handle session_start returned");
  json_kv_str(w, "x-mcp-header", MCP_SESSION_HEADER);
  json_obj_end(w);
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "session_id");
  json_arr_end(w);
  json_obj_end(w);
  annotations(w, "End a sandbox session", true, false, icons);
  json_obj_end(w);
}
