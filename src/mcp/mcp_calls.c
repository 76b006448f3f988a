/* SPDX-License-Identifier: Apache-2.0 */
/* Tool calls (run_python, execute_code): the queue and its scheduling, starting a call's sandbox
 * (cold, or a warm one from warm_pool.c), deadlines and progress, output capture, and the result. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/slist.h"
#include "base/util.h"
#include "egress/egress_proxy.h"
#include "hostmcp/proxy.h"
#include "mcp/capture.h"
#include "mcp/fork_pool.h"
#include "mcp/mcp_internal.h"
#include "mcp/shape.h"
#include "policy/policy.h"
#include "run/audit.h"
#include "sandbox/fork_template.h"
#include "sandbox/sandbox.h"

void call_free(struct call *c)
{
  if (!c)
    return;
  if (!c->sess) /* a session's sandbox is the session's */
    sandbox_free(c->sb);
  free(c->sess_gone);
  fork_pool_release(c->srv, c->fork_tmpl);
  if (c->pending)
    warm_drop(c->srv, c->pending);
  job_free(&c->job);
  free(c->job_error);
  if (c->out_fd >= 0)
    close(c->out_fd);
  if (c->err_fd >= 0)
    close(c->err_fd);
  if (c->done_fd >= 0)
    close(c->done_fd);
  capture_free(&c->cap);
  artifacts_free(&c->arts);
  free(c->saved_dir);
  free(c->not_saved);
  if (c->srv) /* started: a host tool call may be waiting for the user */
    approval_forget_call(c->srv, c);
  if (c->task)
    tasks_call_gone(c->task);
  proxy_free(c->proxy);
  for (size_t i = 0; i < c->n_servers; i++)
    free(c->servers[i]);
  free(c->servers);
  free(c->id);
  free(c->progress_token);
  free(c->code);
  free(c);
}

void call_unlink(struct server *srv, struct call *c)
{
  slist_unlink(&srv->calls, c);
  srv->code_bytes -= c->code_len;
  if (c->state == CALL_RUNNING)
    srv->n_running--;
  else
    srv->n_queued--;
}

struct call *call_find(struct server *srv, const char *id)
{
  /* An answered call is over for the client, which may reuse its id; so is a task's (answered
   * with the task, and cancelled with tasks/cancel, never notifications/cancelled). */
  for (struct call *c = srv->calls; c; c = c->next)
    if (!c->answered && !c->detached && !c->task && c->client == srv->client && strcmp(c->id, id) == 0)
      return c;
  return NULL;
}

static void call_audit_free(struct server *srv, struct call *c, const struct sbx_result *res,
                            const char *error);

void call_cancel(struct server *srv, struct call *c)
{
  if (c->state == CALL_QUEUED || c->pending) {
    call_unlink(srv, c);
    call_free(c);
    return;
  }
  c->cancelled = true;
  if (c->sess) { /* interrupted, as at its time limit: the session lives on if it comes back */
    if (!c->interrupted) {
      c->interrupted = true;
      sandbox_signal(c->sb, SIGINT);
      sandbox_set_deadline(c->sb, now_ns() + SESSION_GRACE_NS);
    }
    return;
  }
  if (!c->killed) {
    c->killed = true;
    sandbox_kill(c->sb, false);
  }
}

/* The call's answer (w, taken): to its client, or, a task's, kept for the task (mcp_tasks.c). */
static void call_reply(struct server *srv, struct call *c, json_writer_t *w)
{
  if (c->task)
    tasks_settle(srv, c->task, w);
  else if (w)
    send_writer(srv, w);
}

/* Read what is in one pipe into the capture (capture.h: its head and its tail within the policy's
 * output_limit). 1 at EOF. */
int drain_pipe(struct call *c, int *fd, enum capture_stream_id id)
{
  char buf[MCP_READ_CHUNK];
  for (int rounds = 0; rounds < 16; rounds++) {
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return 0;
    if (n <= 0) {
      close(*fd);
      *fd = -1;
      return 1;
    }
    capture_add(&c->cap, id, buf, (size_t) n);
  }
  return 0;
}

static void write_text_block(json_writer_t *w, const char *text, size_t len)
{
  json_obj_begin(w);
  json_kv_str(w, "type", "text");
  json_kv_strn(w, "text", text, len);
  json_obj_end(w);
}

/* A result's text and the shaped streams it is made of. */
struct shaped {
  strbuf_t text, out, err;
  size_t replaced; /* bytes shown as U+FFFD */
  size_t cut;      /* characters left out to fit --text-limit */
};

/* The end of the text: what was replaced or cut, and how the run ended. */
static int result_footer(const struct call *c, const struct sbx_result *res, size_t replaced, strbuf_t *f)
{
  int r = 0;
  char size[32];
  if (replaced)
    r |= strbuf_printf(f, "--- %zu bytes of control characters or invalid UTF-8 shown as U+FFFD ---\n",
                       replaced);
  switch (res->status) {
  case SBX_STATUS_OK:
    break;
  case SBX_STATUS_ERROR:
    r |= strbuf_printf(f, "--- status: error, exit code %d ---", res->exit_code);
    break;
  case SBX_STATUS_TIMEOUT:
    if (c->interrupted && !c->sess_gone) {
      r |= strbuf_printf(
          f,
          "--- status: timeout, interrupted (SIGINT) at %llu.%03llu s (the limit); the session lives on ---",
          (unsigned long long) (c->limits.timeout_ms / 1000),
          (unsigned long long) (c->limits.timeout_ms % 1000));
      break;
    }
    r |= strbuf_printf(f, "--- status: timeout, killed after %llu.%03llu s (the limit) ---",
                       (unsigned long long) (c->limits.timeout_ms / 1000),
                       (unsigned long long) (c->limits.timeout_ms % 1000));
    break;
  case SBX_STATUS_MEMORY_LIMIT:
    r |= strbuf_printf(f, "--- status: memory_limit, killed at %s ---",
                       format_size(c->limits.memory_bytes, size, sizeof size));
    break;
  case SBX_STATUS_KILLED:
    r |= strbuf_printf(f, "--- status: killed by signal %d ---", res->signal);
    break;
  }
  if (c->sess_gone) /* the session ended during the call */
    r |= strbuf_printf(f, "%s--- %s ---", f->len ? "\n" : "", c->sess_gone);
  return r;
}

#define STDERR_HEADER "--- stderr ---\n"

/* One stream as captured, made valid UTF-8 into sb, described by st: its head and its tail are
 * repaired apart, as bytes were dropped between them when the capture was full (capture.h). */
static int repaired_stream(const struct call *c, enum capture_stream_id id, strbuf_t *sb,
                           struct shape_stream *st, size_t *replaced)
{
  struct capture_view v;
  if (capture_view(&c->cap, id, &v) < 0)
    return -1;
  int r = shape_repair(sb, v.buf.data, v.gap, replaced);
  size_t gap = sb->len;
  r |= shape_repair(sb, v.buf.data + v.gap, v.buf.len - v.gap, replaced);
  strbuf_free(&v.buf);
  st->s = sb->data ? sb->data : "";
  st->len = sb->len;
  st->gap = gap;
  st->dropped = v.dropped;
  return r;
}

/* The text a model reads: stdout, then stderr, then the footer, within --text-limit characters
 * (shape.h): each stream shaped on its own, the budget shared fairly (a stream that needs less
 * than half leaves the rest to the other). out and err get the shaped streams, which
 * structuredContent carries too; *replaced counts the bytes shown as U+FFFD. */
static int result_text(const struct server *srv, const struct call *c, const struct sbx_result *res,
                       struct shaped *sh)
{
  strbuf_t ro = {0}, re = {0}, foot = {0};
  struct shape_stream so = {
      .name = "stdout", .text_limit = srv->text_limit, .output_limit = c->limits.output_bytes};
  struct shape_stream se = so;
  se.name = "stderr";
  char out_path[PATH_MAX], err_path[PATH_MAX];
  if (c->saved_dir && c->saved_stdout &&
      bufprintf(out_path, sizeof out_path, NULL, "%s/stdout.txt", c->saved_dir) == 0)
    so.saved = out_path;
  if (c->saved_dir && c->saved_stderr &&
      bufprintf(err_path, sizeof err_path, NULL, "%s/stderr.txt", c->saved_dir) == 0)
    se.saved = err_path;
  int r = repaired_stream(c, CAPTURE_STDOUT, &ro, &so, &sh->replaced);
  r |= repaired_stream(c, CAPTURE_STDERR, &re, &se, &sh->replaced);
  r |= result_footer(c, res, sh->replaced, &foot);
  size_t oc, ec;
  if (r < 0 || shape_whole_chars(&so, &oc) < 0 || shape_whole_chars(&se, &ec) < 0) {
    r = -1;
    goto out;
  }

  size_t fixed = shape_chars(foot.data, foot.len) + (ec ? sizeof STDERR_HEADER : 0) + 2;
  size_t budget = srv->text_limit > fixed ? srv->text_limit - fixed : 0;
  size_t ob = oc, eb = ec;
  if (oc + ec > budget) {
    size_t half = budget / 2;
    ob = oc < half ? oc : ec < budget - half ? budget - ec : budget - half;
    eb = budget - ob;
  }
  r |= shape_stream(&sh->out, &so, ob, &sh->cut);
  size_t cut_err = 0;
  r |= shape_stream(&sh->err, &se, eb, &cut_err);
  sh->cut += cut_err;

  strbuf_t *text = &sh->text;
  r |= strbuf_append(text, sh->out.data, sh->out.len);
  if (sh->err.len) {
    if (text->len && text->data[text->len - 1] != '\n')
      r |= strbuf_append(text, "\n", 1);
    r |= strbuf_append(text, STDERR_HEADER, sizeof STDERR_HEADER - 1);
    r |= strbuf_append(text, sh->err.data, sh->err.len);
  }
  if (foot.len) {
    if (text->len && text->data[text->len - 1] != '\n')
      r |= strbuf_append(text, "\n", 1);
    r |= strbuf_append(text, foot.data, foot.len);
  }
  if (!text->len)
    r |= strbuf_printf(text, "(no output)");
out:
  strbuf_free(&ro);
  strbuf_free(&re);
  strbuf_free(&foot);
  return r;
}

static void shaped_free(struct shaped *sh)
{
  strbuf_free(&sh->text);
  strbuf_free(&sh->out);
  strbuf_free(&sh->err);
}

static void send_call_result(struct server *srv, struct call *c, const struct sbx_result *res)
{
  srv->route = c->route;
  struct shaped sh = {0};
  if (result_text(srv, c, res, &sh) < 0) {
    shaped_free(&sh);
    json_writer_t *e = json_writer_new();
    if (e)
      jsonrpc_write_error(e, c->id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    call_reply(srv, c, e);
    return;
  }

  json_writer_t *w = json_writer_new();
  if (!w) {
    shaped_free(&sh);
    return;
  }
  jsonrpc_begin_result(w, c->id);
  json_obj_begin(w);
  json_key(w, "content");
  json_arr_begin(w);
  write_text_block(w, sh.text.data, sh.text.len);
  call_write_file_blocks(srv, c, w);
  json_arr_end(w);
  json_key(w, "structuredContent");
  json_obj_begin(w);
  json_kv_bool(w, "success", res->status == SBX_STATUS_OK);
  json_kv_str(w, "status", sbx_status_name(res->status));
  json_kv_int(w, "exit_code", res->exit_code);
  /* The same shaped streams as the text block (never a second full copy), and the sizes of the
   * whole output. */
  json_kv_strn(w, "stdout", sh.out.data ? sh.out.data : "", sh.out.len);
  json_kv_strn(w, "stderr", sh.err.data ? sh.err.data : "", sh.err.len);
  json_kv_uint(w, "stdout_bytes", c->cap.s[CAPTURE_STDOUT].total);
  json_kv_uint(w, "stderr_bytes", c->cap.s[CAPTURE_STDERR].total);
  json_kv_uint(w, "replaced_bytes", sh.replaced);
  json_kv_uint(w, "cut_characters", sh.cut);
  json_kv_bool(w, "truncated", capture_dropped_any(&c->cap));
  json_kv_uint(w, "execution_time_ms", res->execution_time_ms);
  json_kv_uint(w, "memory_peak_bytes", res->memory_peak_bytes);
  json_kv_double(w, "memory_used_mb", (double) res->memory_peak_bytes / (1024.0 * 1024.0));
  /* How limits were enforced: "degraded" means rlimits only (no cgroup), as the policy allowed. */
  json_kv_str(w, "limits", res->limits ? res->limits : "none");
  artifacts_write_files(w, &c->arts);
  /* network proxy: what the code asked of the egress proxy (sandboxd.policy(5), "Network"). */
  const struct egress_log *egress = c->sb ? sandbox_egress(c->sb) : NULL;
  if (egress) {
    json_key(w, "egress");
    egress_log_write_json(egress, w, false);
  }
  json_obj_end(w);
  json_kv_bool(w, "isError", res->status != SBX_STATUS_OK);
  mcp_result_fields(c->protocol, w, -1);
  json_obj_end(w);
  jsonrpc_end(w);
  shaped_free(&sh);
  call_reply(srv, c, w);
}

/* The sandbox has ended: collect the rest of its output, reap it, answer. */
void call_finish(struct server *srv, struct call *c)
{
  /* Every process of the sandbox is gone, so the pipes are at EOF once drained. */
  while (c->out_fd >= 0 && drain_pipe(c, &c->out_fd, CAPTURE_STDOUT) == 0)
    if (c->out_fd >= 0 && poll(&(struct pollfd){.fd = c->out_fd, .events = POLLIN}, 1, 100) <= 0)
      break;
  while (c->err_fd >= 0 && drain_pipe(c, &c->err_fd, CAPTURE_STDERR) == 0)
    if (c->err_fd >= 0 && poll(&(struct pollfd){.fd = c->err_fd, .events = POLLIN}, 1, 100) <= 0)
      break;
  struct sbx_result res;
  sbx_error_t err = {0};
  int r = sandbox_wait(c->sb, &res, &err);
  if (c->interrupted && r == 0 && res.status == SBX_STATUS_KILLED)
    res.status = SBX_STATUS_TIMEOUT; /* killed after the interrupt's grace */
  if (c->sess)                       /* the session's interpreter died during the call: the session is over */
    session_call_lost(srv, c, r == 0 ? &res : &(struct sbx_result){.status = SBX_STATUS_KILLED});
  call_unlink(srv, c);
  srv->route = c->route;
  if (c->answered || c->collect) {
    /* Killed at its done byte (call_done): the record is what was (or is now) answered. */
    res = c->res;
    r = 0;
  }
  /* Every process is gone (pid 1 reaped: the kernel first waits for the rest of its pid
   * namespace): nothing writes to /workspace/out any more. */
  if (!c->cancelled && !c->answered && r == 0)
    call_collect_files(srv, c, true);
  /* The answer first; the audit record and removing the cgroup (call_free) come after it. */
  const char *protocol = srv->protocol; /* the call's, for what a result holds */
  srv->protocol = c->protocol;
  if (c->cancelled || c->answered || c->detached)
    ; /* the client cancelled, or no retry took the call back (mcp_approval.c): no answer */
  else if (c->job_error)
    call_reply(
        srv, c,
        tool_error_writer(srv, c->id, "sandboxd could not give the sandbox its code: %s", c->job_error));
  else if (r < 0)
    call_reply(srv, c, tool_error_writer(srv, c->id, "sandboxd: %s", err.msg));
  else
    send_call_result(srv, c, &res);
  srv->protocol = protocol;
  call_audit_free(srv, c, r < 0 ? NULL : &res, r < 0 ? err.msg : NULL);
}

/* The call's audit record (result, or the error), then the call is freed. */
static void call_audit_free(struct server *srv, struct call *c, const struct sbx_result *res,
                            const char *error)
{
  _cleanup_free_ char *calls = c->proxy ? proxy_calls_json(c->proxy) : NULL;
  const struct egress_log *egress = c->sb ? sandbox_egress(c->sb) : NULL;
  _cleanup_free_ char *egress_json = egress ? egress_log_json(egress, true) : NULL;
  struct audit_record rec = {
      .mode = "mcp",
      .code = c->code,
      .code_len = c->code_len,
      .language = c->lang != MCP_LANG_PYTHON ? mcp_lang_name(c->lang) : NULL,
      .request_id = c->request_id,
      .policy = srv->policy,
      .limits = &c->limits,
      .result = res,
      .error = error,
      .calls_json = calls,
      .client = c->client_name[0] ? c->client_name : NULL,
      .egress_json = egress_json,
      .task = c->task_id[0] ? c->task_id : NULL,
      .session = c->sess_hash[0] ? c->sess_hash : NULL,
  };
  audit_write(&rec);
  if (c->sess) /* answered, and its session waits for the next call */
    session_call_over(srv, c);
  /* A run that made sandboxd hold a lot (its output, or requests it sent over the bridge) gives
   * the memory back to the system when it ends, not only to malloc's free lists. */
  bool trim =
      capture_kept(&c->cap) + c->arts.bytes + (c->proxy ? proxy_bytes_read(c->proxy) : 0) >= TRIM_AFTER_BYTES;
  call_free(c);
  if (trim)
    malloc_trim(0);
}

static bool readable(int fd)
{
  return poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 0) > 0;
}

/* A session's call is over (the runner's done byte) and its interpreter waits for the next: the
 * output now in the pipes, /workspace/out's files (what the session's background processes write
 * there later is the next call's), the answer, the record. The session lives on. */
static void call_answer_session(struct server *srv, struct call *c, unsigned char status)
{
  struct sbx_result res;
  if (sandbox_result_now(c->sb, status, &res) < 0) /* no cgroup: rlimits only, as the policy allowed */
    res = (struct sbx_result){
        .status = status ? SBX_STATUS_ERROR : SBX_STATUS_OK,
        .exit_code = status,
        .limits = "degraded",
        .execution_time_ms = (now_ns() - c->queued_ns) / 1000000, /* started when queued */
    };
  if (c->interrupted) {
    res.status = SBX_STATUS_TIMEOUT;
    res.exit_code = 124;
  }
  session_call_output(c);
  call_unlink(srv, c);
  srv->route = c->route;
  if (!c->cancelled) {
    call_collect_files(srv, c, true);
    send_call_result(srv, c, &res);
  }
  call_audit_free(srv, c, &res, NULL);
}

/* The runner's done byte (or, with a bridge, its done frame): the run is over and all its output
 * is in the pipes. Answer now, from the cgroup's counters, and kill the sandbox (the runner is
 * exiting anyway; anything the code left running ends with it, as when the runner exits): the
 * answer does not wait for the processes to exit and the namespaces to be torn down, which is most
 * of a warm call's time. Code that writes to fd 3 itself ends its own run early, as os._exit()
 * would. Without a cgroup, or on EOF (the code closed fd 3, or the runner died), the call ends
 * when the sandbox has (call_finish). So does a run that left files in /workspace/out (one fstatat
 * tells): they are read once nothing can write them any more. */
static void call_answer_done(struct server *srv, struct call *c, unsigned char status)
{
  if (c->sess && !c->killed) { /* answered from the loop, once out of the handler that read it */
    c->sess_status = status;
    return;
  }
  if (c->killed || c->cancelled || c->answered)
    return;
  struct sbx_result res;
  if (sandbox_result_now(c->sb, status, &res) < 0)
    return;
  /* Everything the runner wrote is in the pipes: it flushed before the done byte. */
  while (c->out_fd >= 0 && drain_pipe(c, &c->out_fd, CAPTURE_STDOUT) == 0 && readable(c->out_fd))
    ;
  while (c->err_fd >= 0 && drain_pipe(c, &c->err_fd, CAPTURE_STDERR) == 0 && readable(c->err_fd))
    ;
  if (!artifacts_out_empty(sandbox_workspace_fd(c->sb))) {
    /* Files to return: what the code left running may still be writing them. Kill it all now,
     * and answer once the sandbox has ended (call_finish), from what the runner reported. */
    c->killed = true;
    c->collect = true;
    c->res = res;
    sandbox_kill(c->sb, false);
    return;
  }
  c->killed = true;
  sandbox_signal(c->sb, SIGKILL);
  c->answered = true;
  c->res = res;
  /* Only output too long to show: /workspace/out was empty at the done byte, and what the rest of
   * the sandbox writes there until the kill has reached it is never read (pid 1 is not reaped
   * yet, so processes of the sandbox may still run). */
  if (srv->output_dirfd >= 0)
    call_collect_files(srv, c, false);
  send_call_result(srv, c, &res);
}

void call_done(struct server *srv, struct call *c)
{
  unsigned char status;
  ssize_t n;
  do
    n = read(c->done_fd, &status, 1);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN)
    return;
  close(c->done_fd);
  c->done_fd = -1;
  if (n == 1)
    call_answer_done(srv, c, status);
}

/* The proxy's done frame (proxy_on_done). */
static void bridge_done(void *ctx, int status)
{
  struct call *c = ctx;
  call_answer_done(c->srv, c, (unsigned char) status);
}

/* One progress notification for the call's token: the next count, and what it is doing. */
static void notify_progress(struct server *srv, struct call *c, const char *msg)
{
  srv->route = c->route;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/progress");
  json_obj_begin(w);
  json_kv_raw(w, "progressToken", c->progress_token, strlen(c->progress_token));
  json_kv_uint(w, "progress", ++c->progress);
  json_kv_str(w, "message", msg);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* A host server's progress on a proxied call, relayed as progress of the run_python call. */
static void relay_progress(void *ctx, const char *server, const char *tool, const json_node_t *params)
{
  struct call *c = ctx;
  if (!c->progress_token || c->cancelled || c->answered)
    return;
  char msg[300];
  const char *m = json_as_string(json_get(params, "message"), NULL);
  const char *done = json_number_text(json_get(params, "progress"));
  const char *total = json_number_text(json_get(params, "total"));
  bufprintf_cut(msg, sizeof msg, "%.60s.%.60s: %s%s%s%s%.100s", server, tool, done ? done : "?",
                total ? "/" : "", total ? total : "", m ? " " : "", m ? m : "");
  notify_progress(c->srv, c, msg);
}

/* Give the call a warm sandbox. On failure the warm sandbox is gone and the call gets a cold one. */
int call_start_warm(struct call *c, struct warm *w, sbx_error_t *err)
{
  /* The call's clock and deadline start at delivery, as a cold one's start at its spawn. */
  sandbox_start_clock(w->sb);
  sandbox_set_deadline(w->sb, now_ns() + c->limits.timeout_ms * 1000000ULL);
  const char *kind = w->for_call ? "fork" : w->fork_tmpl ? "preforked" : "warm";
  if (call_deliver(c, TAKE_FD(w->job_fd), kind, err) < 0) {
    warm_drop(c->srv, w);
    return -1;
  }
  c->fork_tmpl = TAKE_PTR(w->fork_tmpl); /* released when the call ends (call_free) */
  c->sb = TAKE_PTR(w->sb);
  c->out_fd = TAKE_FD(w->out_fd);
  c->err_fd = TAKE_FD(w->err_fd);
  warm_free(w);
  return 0;
}

static int call_start_cold(struct server *srv, struct call *c, sbx_error_t *err);

static int call_start(struct server *srv, struct call *c, sbx_error_t *err)
{
  struct sbx_limits req;
  limits_unset(&req);
  if (c->timeout_ms != UINT64_MAX)
    req.timeout_ms = c->timeout_ms;
  if (policy_resolve_limits(srv->policy, &req, &c->limits, err) < 0)
    return -1;
  capture_init(&c->cap, c->limits.output_bytes);

  /* With servers, or any configured server to discover: fd 3 goes on as the bridge after the job,
   * which tells the runner the servers it may call (it then defines mcp_<alias> and friends). */
  c->srv = srv;
  if (c->lang == MCP_LANG_PYTHON && (c->n_servers || host_servers_discovery(&srv->hs))) {
    if (host_servers_proxy(&srv->hs, (const char *const *) c->servers, c->n_servers, NULL, &c->proxy, err) <
        0)
      return -1;
    proxy_on_progress(c->proxy, relay_progress, c);
    proxy_on_done(c->proxy, bridge_done, c);
    proxy_on_approval(c->proxy, srv->approve, approval_ask, c);
  }
  if (c->sess)
    return session_call_start(srv, c, err);

  /* --warm-mode fork: a ready forked sandbox (--warm), else one of the pool's still being set up
   * (further along than a fork begun now), else a fork of the template begun now; the call waits
   * for either without blocking the loop (call_pending_ready). Never a silent cold start. */
  if (c->lang == MCP_LANG_PYTHON && srv->warm_fork) {
    struct warm *f = srv->warm;
    while (f && (f->lang != MCP_LANG_PYTHON || !f->ready))
      f = f->next;
    for (struct warm *p = srv->warm; !f && p; p = p->next)
      if (p->lang == MCP_LANG_PYTHON && p->fork_pending)
        f = p;
    if (f && !f->ready) {
      warm_unlink(srv, f);
      c->pending = f;
      c->pending_until = fork_pending_deadline(f->fork_pending);
      return 0;
    }
    if (f) {
      sbx_error_t ferr = {0};
      warm_unlink(srv, f);
      if (call_start_warm(c, f, &ferr) == 0)
        return 0;
      log_warn("%s; forking the call's sandbox now", ferr.msg);
    }
    return fork_call_start(srv, c, err);
  }
  /* A ready warm sandbox if there is one. Else one still being built, which the call waits for
   * (call_pending_ready): it is further along than a cold one started now would be, and
   * building both would split the CPUs between them. Only an empty pool (a burst) starts cold. */
  struct warm *w = srv->warm;
  while (w && (!w->ready || w->lang != c->lang))
    w = w->next;
  for (struct warm *p = srv->warm; !w && p; p = p->next)
    if (p->lang == c->lang)
      w = p;
  if (w) {
    warm_unlink(srv, w);
    if (!w->ready) {
      c->pending = w;
      c->pending_until = now_ns() + PENDING_MAX_NS;
      return 0;
    }
    sbx_error_t werr = {0};
    if (call_start_warm(c, w, &werr) == 0)
      return 0;
    log_warn("%s; starting a cold sandbox instead", werr.msg);
  }
  return call_start_cold(srv, c, err);
}

/* A sandbox built for this call: the runner (or another language's interpreter) started without
 * code, which it then reads like a warm one (call_deliver). */
static int call_start_cold(struct server *srv, struct call *c, sbx_error_t *err)
{
  _cleanup_sandbox_fds_ struct sandbox_fds f = SANDBOX_FDS_INIT;
  if (sandbox_fds_open(c->lang, &f, err) < 0)
    return -1;
  struct sbx_spec spec;
  base_spec(srv, c->lang, &c->limits, f.inside, f.out_w, f.err_w, &spec);
  if (sandbox_spawn(&spec, &c->sb, err) < 0)
    return -1;
  /* Our copies of the write ends go with f, or the pipes would never reach EOF. */
  c->out_fd = TAKE_FD(f.out_r);
  c->err_fd = TAKE_FD(f.err_r);
  return call_deliver(c, TAKE_FD(f.job), "cold", err);
}

static void call_start_failed(struct server *srv, struct call *c, const sbx_error_t *err)
{
  srv->route = c->route;
  srv->client = c->client;
  const char *protocol = srv->protocol;
  struct mcp_modern_req req = srv->req;
  srv->protocol = c->protocol;
  srv->req = c->req;
  log_sbx_error(err);
  mcp_log(srv, 4, err->msg);
  call_unlink(srv, c);
  call_reply(srv, c, tool_error_writer(srv, c->id, "sandboxd could not start the sandbox: %s", err->msg));
  srv->protocol = protocol;
  srv->req = req;
  call_free(c);
}

/* --warm-mode fork: the forked sandbox a call waits for answered, or took too long (give_up):
 * wait on, deliver the job, or fork once more (a fork, never a cold start). */
static void call_fork_ready(struct server *srv, struct call *c, struct warm *w, bool give_up)
{
  sbx_error_t werr = {0}, err = {0};
  int r = give_up ? sbx_error_set(&werr, ETIMEDOUT, "its forked sandbox did not answer in time")
                  : fork_warm_step(w, &werr);
  if (r == 0) {
    c->pending = w;
    c->pending_until = fork_pending_deadline(w->fork_pending);
    return;
  }
  if (r == 1) {
    if (call_start_warm(c, w, &werr) == 0) /* (drops w when it fails) */
      return;
  } else {
    warm_drop(srv, w);
  }
  if (c->fork_retried) {
    call_start_failed(srv, c, &werr);
    return;
  }
  c->fork_retried = true;
  log_warn("%s; forking the call's sandbox again", werr.msg);
  if (fork_call_start(srv, c, &err) < 0)
    call_start_failed(srv, c, &err);
}

/* The warm sandbox a call waited for is built, or failed, or took too long (give_up): deliver
 * the job, or start cold. */
void call_pending_ready(struct server *srv, struct call *c, bool give_up)
{
  struct warm *w = TAKE_PTR(c->pending);
  if (w->fork_tmpl) {
    call_fork_ready(srv, c, w, give_up);
    return;
  }
  sbx_error_t werr = {0}, err = {0};
  if (give_up) {
    sbx_error_set(&werr, ETIMEDOUT, "a warm sandbox was not built in time");
    warm_free(w);
  } else if (sandbox_spawn_finish(w->sb, &werr) == 0) {
    w->ready = true;
    if (call_start_warm(c, w, &werr) == 0)
      return;
  } else {
    warm_free(w);
  }
  log_warn("%s; starting a cold sandbox instead", werr.msg);
  if (call_start_cold(srv, c, &err) < 0)
    call_start_failed(srv, c, &err);
}

/* Start queued calls while there is room. */
void start_queued(struct server *srv)
{
  /* A session's call starts at once: its sandbox runs already (and sessions are bounded). */
  for (struct call *c = srv->calls, *next; c; c = next) {
    next = c->next;
    if (c->state == CALL_QUEUED && (c->sess || srv->n_running < srv->max_concurrent)) {
      sbx_error_t err = {0};
      srv->n_queued--;
      c->state = CALL_RUNNING;
      srv->n_running++;
      srv->last_call_ns = now_ns();
      if (call_start(srv, c, &err) < 0)
        call_start_failed(srv, c, &err);
    }
  }
}

static void send_progress(struct server *srv, struct call *c, uint64_t now)
{
  char msg[64];
  uint64_t secs = (now - c->queued_ns) / 1000000000ULL;
  if (c->state == CALL_QUEUED)
    bufprintf_cut(msg, sizeof msg, "queued for %llus", (unsigned long long) secs);
  else
    bufprintf_cut(msg, sizeof msg, "running for %llus", (unsigned long long) secs);
  notify_progress(srv, c, msg);
}

/* Kill at deadlines, tick progress; returns the poll timeout until the next such event. */
int run_timers(struct server *srv)
{
  uint64_t now = now_ns();
  int timeout = -1;
  for (struct call *c = srv->calls, *next; c; c = next) {
    next = c->next;
    if (c->pending && now >= c->pending_until) {
      call_pending_ready(srv, c, true); /* may free c */
      continue;
    }
    if (c->pending) {
      int t = ms_until(c->pending_until, now);
      if (timeout < 0 || t < timeout)
        timeout = t;
    }
    if (c->job.fd >= 0 && now >= c->job.deadline_ns) {
      call_job_ready(srv, c, true);
    } else if (c->job.fd >= 0) {
      int t = ms_until(c->job.deadline_ns, now);
      if (timeout < 0 || t < timeout)
        timeout = t;
    }
    if (c->state == CALL_RUNNING && c->sb && !c->killed) {
      uint64_t deadline = sandbox_deadline_ns(c->sb);
      if (now >= deadline && c->sess && !c->interrupted) {
        /* A session's call is interrupted (KeyboardInterrupt), and killed, with its session, only
         * if it does not come back within the grace. */
        c->interrupted = true;
        sandbox_signal(c->sb, SIGINT);
        sandbox_set_deadline(c->sb, now + SESSION_GRACE_NS);
        timeout = timeout < 0 || ms_until(now + SESSION_GRACE_NS, now) < timeout
                      ? ms_until(now + SESSION_GRACE_NS, now)
                      : timeout;
      } else if (now >= deadline) {
        c->killed = true;
        sandbox_kill(c->sb, true);
      } else if (timeout < 0 || ms_until(deadline, now) < timeout)
        timeout = ms_until(deadline, now);
    }
    if (c->progress_token && !c->cancelled && !c->answered) {
      if (now >= c->next_progress_ns) {
        send_progress(srv, c, now);
        c->next_progress_ns = now + PROGRESS_INTERVAL_NS;
      }
      int t = ms_until(c->next_progress_ns, now);
      if (timeout < 0 || t < timeout)
        timeout = t;
    }
  }
  return timeout;
}

void calls_answer_sessions(struct server *srv)
{
  for (struct call *c = srv->calls, *next; c; c = next) {
    next = c->next;
    if (c->sess && !c->killed && c->sess_status >= 0)
      call_answer_session(srv, c, (unsigned char) c->sess_status);
  }
}

/* Whether some call is running or about to (answered calls only wait to be reaped). */
bool code_running(const struct server *srv)
{
  for (const struct call *c = srv->calls; c; c = c->next)
    if (c->state == CALL_RUNNING && !c->answered)
      return true;
  return false;
}

/* A new call at the end of the queue; start_queued() starts it when there is room. */
struct call *call_enqueue(struct server *srv, const char *id, const struct mcp_tool_args *a,
                          const json_node_t *progress_token, struct session *sess)
{
  struct call *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  /* Before anything can fail: call_free closes these, and 0 would be stdin. */
  c->out_fd = c->err_fd = c->done_fd = c->job.fd = -1;
  c->code_len = a->code_len;
  if (!(c->id = strdup(id)) || !(c->code = strndup(a->code, a->code_len))) {
    call_free(c);
    return NULL;
  }
  c->timeout_ms = a->timeout_ms;
  c->lang = a->lang;
  c->sess = sess;
  c->sess_status = -1;
  c->client = srv->client;
  c->route = srv->route;
  c->protocol = srv->protocol;
  c->req = srv->req;
  c->req.caps = NULL;
  bufprintf_cut(c->owner, sizeof c->owner, "%s", srv->owner ? srv->owner : "");
  approval_digest(a, c->digest);
  if (srv->req.modern) { /* 2025-11-25's form, or 2025-06-18's plain object (mcp_approval.c) */
    const json_node_t *e = json_get(srv->req.caps, "elicitation");
    c->elicit_form = json_type(e) == JSON_OBJECT && (json_get(e, "form") || !json_get(e, "url"));
  }
  c->session = srv->client_session;
  if (srv->client_name)
    bufprintf_cut(c->client_name, sizeof c->client_name, "%s", srv->client_name);
  audit_new_request_id(c->request_id);
  size_t ns = json_array_len(a->servers);
  if (ns && !(c->servers = calloc(ns, sizeof *c->servers))) {
    call_free(c);
    return NULL;
  }
  for (size_t i = 0; i < ns; i++)
    if ((c->servers[c->n_servers] = strdup(json_as_string(json_array_at(a->servers, i), NULL))))
      c->n_servers++;
  c->queued_ns = now_ns();
  c->next_progress_ns = c->queued_ns + PROGRESS_INTERVAL_NS;
  c->progress_token = jsonrpc_id_canonical(progress_token);
  c->state = CALL_QUEUED;
  slist_append(&srv->calls, c);
  srv->n_queued++;
  srv->code_bytes += c->code_len;
  return c;
}
