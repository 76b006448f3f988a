/* `sandboxd mcp`: MCP over stdio (https://modelcontextprotocol.io/specification), one tool.
 *
 * One thread, one poll loop. It watches stdin (requests), stdout (when replies are waiting for a
 * slow reader), a signalfd (SIGTERM/SIGINT/SIGHUP), and for every running call its sandbox's pidfd
 * and its stdout/stderr pipes. Deadlines and progress ticks become the poll timeout. Nothing here
 * blocks for long except sandbox_spawn() while it builds a sandbox, so ping is always answered. */
#include "mcp_server.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "bridge.h"
#include "cleanup.h"
#include "cli.h"
#include "json.h"
#include "jsonrpc.h"
#include "log.h"
#include "mcp_client.h"
#include "mcp_config.h"
#include "proxy.h"
#include "version.h"
#include "policy.h"
#include "sandbox.h"
#include "seccomp.h"
#include "util.h"


#define PYTHON "/usr/bin/python3"
#define TOOL_NAME "run_python"
#define CAPABILITIES_URI "sandboxd://capabilities"
/* execve() refuses any single argument longer than MAX_ARG_STRLEN (32 pages), NUL included. */
#define MAX_CODE_BYTES (32 * 4096 - 1)
#define READ_CHUNK 65536
/* After a run whose output and bridge requests reach this, malloc_trim(): RSS back where it was. */
#define TRIM_AFTER_BYTES (1u << 20)
#define PROGRESS_INTERVAL_NS 1000000000ULL
/* Stop reading requests while this much output waits for the client to read it. */
#define OUTQ_HIGH_WATER (64u << 20)

#define DEFAULT_MAX_CONCURRENT 4
#define DEFAULT_MAX_QUEUE 64
#define DEFAULT_MAX_MESSAGE (4u << 20)
#define DEFAULT_WARM 2
#define MAX_WARM 64
/* After a warm sandbox fails to start or dies idle, wait this long before the next one. */
#define WARM_RETRY_NS 1000000000ULL
/* Building a warm sandbox (Python's startup, ~15 ms of CPU) while a call runs would compete with
 * the call for the CPUs: the pool is topped up once no call runs, or this long after the latest
 * call started (a long call does not keep the pool empty). */
#define WARM_DEFER_NS 20000000ULL
/* How long delivering a job to a warm sandbox may take before it is given up for a cold one. */
#define JOB_SEND_TIMEOUT_MS 1000
/* How long a call waits for a warm sandbox still being built before starting a cold one (setup
 * takes milliseconds; this only bounds a stuck one). */
#define PENDING_MAX_NS 2000000000ULL

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL};

static const char tool_description[] =
    "Run Python 3 code in a fresh, disposable Linux sandbox and get back its stdout, stderr and exit "
    "status. Every call starts clean: files, variables and processes never carry over, so send "
    "complete programs. No host files; the network is loopback-only; time, memory, processes and "
    "output are limited (read resource " CAPABILITIES_URI " for the limits). Use print() for results; "
    "tracebacks go to stderr. Top-level `await` works. To use tools of host MCP servers, list them in "
    "`servers`; the code then calls them with `await mcp_<server>.<tool>(arg=...)` (helpers in "
    "`from mcp import runtime`).";

/* ------------------------------------------------------------------ state */

/* A warm sandbox: spawned exactly like a cold one (sandbox_spawn, the same spec), but with the
 * runner started without code: it imports what it needs and waits for one job on its bridge socket
 * (runner.py). Used by exactly one call, then destroyed like any other. */
struct warm {
  struct warm *next;
  struct sbx_sandbox *sb;
  bool ready;         /* setup finished (sandbox_spawn_finish); until then it is being built */
  int out_fd, err_fd; /* read ends of its stdout/stderr, adopted by the call */
  int job_fd;         /* our end of the socket at SBX_BRIDGE_FD inside */
};

enum call_state { CALL_QUEUED, CALL_RUNNING };

struct call {
  struct call *next;
  enum call_state state;
  char *id;             /* canonical JSON */
  char *progress_token; /* canonical JSON, or NULL */
  char *code;
  uint64_t timeout_ms; /* requested, or UINT64_MAX */
  uint64_t queued_ns, next_progress_ns;
  unsigned progress;

  struct sbx_sandbox *sb;
  struct sbx_limits limits;
  int out_fd, err_fd; /* read ends, -1 once at EOF */
  strbuf_t out, err;
  bool truncated;
  bool killed;    /* sandbox_kill() sent (deadline or cancel) */
  bool cancelled; /* the client cancelled: kill, and never answer */

  int done_fd;    /* without servers: the runner's done channel (runner.py), or -1 */
  struct warm *pending; /* a warm sandbox still being built that this call waits for, or NULL */
  int pending_bridge;   /* while pending, with servers: the bridge end a cold start would use */
  uint64_t pending_until; /* then it gives up on that sandbox and starts a cold one */
  bool answered;  /* answered at the runner's done byte; reaped and audited when it has ended */
  struct sbx_result res; /* what was answered, for the audit record */

  struct server *srv;
  char **servers; /* host MCP servers the code may call (`servers`), or NULL */
  size_t n_servers;
  struct proxy *proxy; /* the bridge, while running with servers */
};

struct server {
  struct sbx_policy *policy;
  char *rootfs;
  size_t max_concurrent, max_queue, max_message;

  struct call *calls; /* in arrival order */
  size_t n_running, n_queued;

  jsonrpc_framer_t framer;
  strbuf_t outq; /* replies not yet written to stdout */
  size_t outq_off;
  int stdout_flags; /* to restore, or -1 */
  int sigfd;
  bool stdin_eof, stop;
  int log_level; /* index into log_levels: send notifications/message at this level or above */

  struct mcp_config_options mcp_opts;
  struct mcp_config *mcp_cfg; /* host MCP servers (empty if none are configured) */
  struct mcp_hosts *hosts;
  char *python_dir; /* the `mcp` package for inside, or NULL if not found */
  const char *audit_log;

  size_t warm_target; /* --warm */
  struct warm *warm;  /* idle, oldest first */
  size_t n_warm;
  uint64_t warm_retry_ns; /* no new warm sandbox before this */
  uint64_t last_call_ns;  /* when the latest call started (WARM_DEFER_NS) */
};

static const char *const log_levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};

/* ------------------------------------------------------------------ output */

static void flush_output(struct server *srv)
{
  while (srv->outq_off < srv->outq.len) {
    ssize_t n = write(STDOUT_FILENO, srv->outq.data + srv->outq_off, srv->outq.len - srv->outq_off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        break;
      /* The client closed our stdout: nobody is listening any more. */
      log_error("write to stdout: %s", strerror(errno));
      srv->stop = true;
      srv->outq_off = srv->outq.len;
      break;
    }
    srv->outq_off += (size_t) n;
  }
  if (srv->outq_off < srv->outq.len) {
    /* Keep the pending bytes at the front, so a slow reader does not make the buffer creep. */
    if (srv->outq_off > srv->outq.len / 2) {
      memmove(srv->outq.data, srv->outq.data + srv->outq_off, srv->outq.len - srv->outq_off);
      srv->outq.len -= srv->outq_off;
      srv->outq_off = 0;
    }
    return;
  }
  srv->outq.len = srv->outq_off = 0;
  /* Do not keep the room a large reply needed once it is written. */
  if (srv->outq.cap > TRIM_AFTER_BYTES) {
    strbuf_free(&srv->outq);
    malloc_trim(0);
  } else if (srv->outq.data)
    srv->outq.data[0] = '\0';
}

/* Queue one finished message (and free the writer). */
static void send_writer(struct server *srv, json_writer_t *w)
{
  size_t n;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  if (!buf || strbuf_append(&srv->outq, buf, n) < 0 || strbuf_append(&srv->outq, "\n", 1) < 0)
    log_error("cannot build a reply: out of memory");
  json_writer_free(w);
  flush_output(srv);
}

static void send_error(struct server *srv, const char *id, int code, const char *message)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_write_error(w, id, code, message);
  send_writer(srv, w);
}

static void send_errorf(struct server *srv, const char *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void send_errorf(struct server *srv, const char *id, int code, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  send_error(srv, id, code, msg);
}

/* A result that is an empty object: {}. */
static void send_empty_result(struct server *srv, const char *id)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

static void mcp_log(struct server *srv, int level, const char *msg)
{
  if (level < srv->log_level)
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/message");
  json_obj_begin(w);
  json_key(w, "level");
  json_str(w, log_levels[level]);
  json_key(w, "logger");
  json_str(w, "sandboxd");
  json_key(w, "data");
  json_str(w, msg);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* ------------------------------------------------------------------ calls */

static int ms_until(uint64_t when, uint64_t now);
static void warm_free(struct warm *w);

static void call_free(struct call *c)
{
  if (!c)
    return;
  sandbox_free(c->sb);
  if (c->pending)
    warm_free(c->pending);
  if (c->pending_bridge >= 0)
    close(c->pending_bridge);
  if (c->out_fd >= 0)
    close(c->out_fd);
  if (c->err_fd >= 0)
    close(c->err_fd);
  if (c->done_fd >= 0)
    close(c->done_fd);
  strbuf_free(&c->out);
  strbuf_free(&c->err);
  proxy_free(c->proxy);
  for (size_t i = 0; i < c->n_servers; i++)
    free(c->servers[i]);
  free(c->servers);
  free(c->id);
  free(c->progress_token);
  free(c->code);
  free(c);
}

static void call_unlink(struct server *srv, struct call *c)
{
  for (struct call **p = &srv->calls; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  if (c->state == CALL_RUNNING)
    srv->n_running--;
  else
    srv->n_queued--;
}

static struct call *call_find(struct server *srv, const char *id)
{
  /* An answered call is over for the client, which may reuse its id. */
  for (struct call *c = srv->calls; c; c = c->next)
    if (!c->answered && strcmp(c->id, id) == 0)
      return c;
  return NULL;
}

/* A tool result that is only an error message (bad arguments, setup failure): isError, text only.
 * No structuredContent: clients validate it against outputSchema, and there is no run to describe. */
static void send_tool_error(struct server *srv, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_tool_error(struct server *srv, const char *id, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "content");
  json_arr_begin(w);
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "text");
  json_key(w, "text");
  json_str(w, msg);
  json_obj_end(w);
  json_arr_end(w);
  json_key(w, "isError");
  json_bool(w, true);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* Cut back to a UTF-8 character boundary, so truncation never leaves half a character. */
static size_t utf8_trim(const char *s, size_t len)
{
  size_t i = len;
  for (size_t back = 0; back < 4 && i > 0; back++) {
    unsigned char c = (unsigned char) s[i - 1];
    if ((c & 0xc0) != 0x80) { /* a lead byte or ASCII: is its sequence complete? */
      size_t need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      return len - (i - 1) >= need ? len : i - 1;
    }
    i--;
  }
  return len;
}

/* Read what is in one pipe; keep it while the call is under its output limit. 1 at EOF. */
static int drain_pipe(struct call *c, int *fd, strbuf_t *sb)
{
  char buf[READ_CHUNK];
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
    size_t used = c->out.len + c->err.len;
    size_t room = c->limits.output_bytes > used ? c->limits.output_bytes - used : 0;
    size_t keep = c->truncated ? 0 : (size_t) n < room ? (size_t) n : room;
    if (keep < (size_t) n) {
      /* Once cut, keep nothing more: a later byte must not land after half a character. */
      if (!c->truncated)
        keep = utf8_trim(buf, keep);
      c->truncated = true;
    }
    if (keep && strbuf_append(sb, buf, keep) < 0)
      c->truncated = true;
  }
  return 0;
}

static void write_text_block(json_writer_t *w, const char *text, size_t len)
{
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "text");
  json_key(w, "text");
  json_strn(w, text, len);
  json_obj_end(w);
}

/* Output as the reply carries it: valid UTF-8 and \t \n \r as they are; each run of other control
 * bytes (C0, DEL) or of bytes that are not UTF-8 becomes one U+FFFD, so JSON's escapes (\u00XX, 6
 * bytes for one) never apply and the reply's text is at most twice the output. *replaced counts
 * the bytes replaced. */
static int append_shaped(strbuf_t *sb, const char *s, size_t len, size_t *replaced)
{
  const unsigned char *u = (const unsigned char *) s;
  size_t i = 0, start = 0;
  int r = 0;
  while (i < len) {
    size_t l = json_utf8_len(u + i, len - i);
    bool control = l == 1 && (u[i] < 0x20 || u[i] == 0x7f) && u[i] != '\t' && u[i] != '\n' && u[i] != '\r';
    if (l && !control) {
      i += l;
      continue;
    }
    r |= strbuf_append(sb, s + start, i - start);
    size_t run = i;
    while (i < len) {
      l = json_utf8_len(u + i, len - i);
      if (l && !(l == 1 && (u[i] < 0x20 || u[i] == 0x7f) && u[i] != '\t' && u[i] != '\n' && u[i] != '\r'))
        break;
      i++;
    }
    *replaced += i - run;
    r |= strbuf_append(sb, "\xef\xbf\xbd", 3);
    start = i;
  }
  r |= strbuf_append(sb, s + start, len - start);
  return r;
}

static void send_call_result(struct server *srv, struct call *c, const struct sbx_result *res)
{
  /* The text a model reads, the one copy of the output: stdout, then stderr, then what went wrong. */
  strbuf_t text = {0};
  int r = 0;
  char size[32];
  size_t replaced = 0;
  if (c->out.len)
    r |= append_shaped(&text, c->out.data, c->out.len, &replaced);
  if (c->err.len) {
    if (text.len && text.data[text.len - 1] != '\n')
      r |= strbuf_append(&text, "\n", 1);
    r |= strbuf_printf(&text, "--- stderr ---\n");
    r |= append_shaped(&text, c->err.data, c->err.len, &replaced);
  }
  if (c->truncated || replaced || res->status != SBX_STATUS_OK) {
    if (text.len && text.data[text.len - 1] != '\n')
      r |= strbuf_append(&text, "\n", 1);
  }
  if (replaced)
    r |= strbuf_printf(&text, "--- %zu bytes of control characters or invalid UTF-8 shown as U+FFFD ---\n", replaced);
  if (c->truncated)
    r |= strbuf_printf(&text, "--- output truncated at %s (output_limit) ---\n",
                       format_size(c->limits.output_bytes, size, sizeof size));
  switch (res->status) {
  case SBX_STATUS_OK:
    break;
  case SBX_STATUS_ERROR:
    r |= strbuf_printf(&text, "--- status: error, exit code %d ---", res->exit_code);
    break;
  case SBX_STATUS_TIMEOUT:
    r |= strbuf_printf(&text, "--- status: timeout, killed after %llu.%03llu s (the limit) ---",
                       (unsigned long long) (c->limits.timeout_ms / 1000),
                       (unsigned long long) (c->limits.timeout_ms % 1000));
    break;
  case SBX_STATUS_MEMORY_LIMIT:
    r |= strbuf_printf(&text, "--- status: memory_limit, killed at %s ---",
                       format_size(c->limits.memory_bytes, size, sizeof size));
    break;
  case SBX_STATUS_KILLED:
    r |= strbuf_printf(&text, "--- status: killed by signal %d ---", res->signal);
    break;
  }
  if (!text.len)
    r |= strbuf_printf(&text, "(no output)");
  if (r < 0) {
    strbuf_free(&text);
    send_error(srv, c->id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }

  json_writer_t *w = json_writer_new();
  if (!w) {
    strbuf_free(&text);
    return;
  }
  jsonrpc_begin_result(w, c->id);
  json_obj_begin(w);
  json_key(w, "content");
  json_arr_begin(w);
  write_text_block(w, text.data, text.len);
  json_arr_end(w);
  json_key(w, "structuredContent");
  json_obj_begin(w);
  json_key(w, "status");
  json_str(w, sbx_status_name(res->status));
  json_key(w, "exit_code");
  json_int(w, res->exit_code);
  /* The output itself is in the text block only: a reply carries it once. */
  json_key(w, "stdout_bytes");
  json_uint(w, c->out.len);
  json_key(w, "stderr_bytes");
  json_uint(w, c->err.len);
  json_key(w, "replaced_bytes");
  json_uint(w, replaced);
  json_key(w, "truncated");
  json_bool(w, c->truncated);
  json_key(w, "execution_time_ms");
  json_uint(w, res->execution_time_ms);
  json_key(w, "memory_peak_bytes");
  json_uint(w, res->memory_peak_bytes);
  /* How limits were enforced: "degraded" means rlimits only (no cgroup), as the policy allowed. */
  json_key(w, "limits");
  json_str(w, res->limits ? res->limits : "none");
  json_obj_end(w);
  json_key(w, "isError");
  json_bool(w, res->status != SBX_STATUS_OK);
  json_obj_end(w);
  jsonrpc_end(w);
  strbuf_free(&text);
  send_writer(srv, w);
}

/* The sandbox has ended: collect the rest of its output, reap it, answer. */
static void call_finish(struct server *srv, struct call *c)
{
  /* Every process of the sandbox is gone, so the pipes are at EOF once drained. */
  while (c->out_fd >= 0 && drain_pipe(c, &c->out_fd, &c->out) == 0)
    if (c->out_fd >= 0 && poll(&(struct pollfd){.fd = c->out_fd, .events = POLLIN}, 1, 100) <= 0)
      break;
  while (c->err_fd >= 0 && drain_pipe(c, &c->err_fd, &c->err) == 0)
    if (c->err_fd >= 0 && poll(&(struct pollfd){.fd = c->err_fd, .events = POLLIN}, 1, 100) <= 0)
      break;
  struct sbx_result res;
  sbx_error_t err = {0};
  int r = sandbox_wait(c->sb, &res, &err);
  call_unlink(srv, c);
  if (c->answered) {
    /* Killed at its done byte (call_done): the record is what was answered. */
    res = c->res;
    r = 0;
  }
  /* The answer first; the audit record and removing the cgroup (call_free) come after it. */
  if (c->cancelled || c->answered)
    ; /* the client cancelled: it expects no answer */
  else if (r < 0)
    send_tool_error(srv, c->id, "sandboxd: %s", err.msg);
  else
    send_call_result(srv, c, &res);
  _cleanup_free_ char *calls = c->proxy ? proxy_calls_json(c->proxy) : NULL;
  struct audit_record rec = {
      .mode = "mcp", .code = c->code, .code_len = strlen(c->code), .policy = srv->policy, .limits = &c->limits,
      .result = r < 0 ? NULL : &res, .error = r < 0 ? err.msg : NULL, .calls_json = calls,
  };
  audit_write(&rec);
  /* A run that made sandboxd hold a lot (its output, or requests it sent over the bridge) gives
   * the memory back to the system when it ends, not only to malloc's free lists. */
  bool trim = c->out.len + c->err.len + (c->proxy ? proxy_bytes_read(c->proxy) : 0) >= TRIM_AFTER_BYTES;
  call_free(c);
  if (trim)
    malloc_trim(0);
}

static bool readable(int fd)
{
  return poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 0) > 0;
}

/* The runner's done byte: the run is over and all its output is in the pipes. Answer now, from the
 * cgroup's counters, and kill the sandbox (the runner is exiting anyway; anything the code left
 * running ends with it, as when the runner exits): the answer does not wait for the processes to
 * exit and the namespaces to be torn down, which is most of a warm call's time. Code that writes
 * to fd 3 itself ends its own run early, as os._exit() would. Without a cgroup, or on EOF (the
 * code closed fd 3, or the runner died), the call ends when the sandbox has (call_finish). */
static void call_done(struct server *srv, struct call *c)
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
  if (n != 1 || c->killed || c->cancelled)
    return;
  struct sbx_result res;
  if (sandbox_result_now(c->sb, status, &res) < 0)
    return;
  /* Everything the runner wrote is in the pipes: it flushed before the done byte. */
  while (c->out_fd >= 0 && drain_pipe(c, &c->out_fd, &c->out) == 0 && readable(c->out_fd))
    ;
  while (c->err_fd >= 0 && drain_pipe(c, &c->err_fd, &c->err) == 0 && readable(c->err_fd))
    ;
  c->killed = true;
  sandbox_signal(c->sb, SIGKILL);
  c->answered = true;
  c->res = res;
  send_call_result(srv, c, &res);
}

static int open_pipe(int *ret_read, int *ret_write, sbx_error_t *err)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return sbx_error_errno(err, "pipe");
  if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return sbx_error_set(err, e, "pipe");
  }
  *ret_read = p[0];
  *ret_write = p[1];
  return 0;
}

/* A host server's progress on a proxied call, relayed as progress of the run_python call. */
static void relay_progress(void *ctx, const char *server, const char *tool, const json_node_t *params)
{
  struct call *c = ctx;
  if (!c->progress_token || c->cancelled)
    return;
  char msg[300];
  const char *m = json_as_string(json_get(params, "message"), NULL);
  const char *done = json_number_text(json_get(params, "progress"));
  const char *total = json_number_text(json_get(params, "total"));
  bufprintf_cut(msg, sizeof msg, "%.60s.%.60s: %s%s%s%s%.100s", server, tool, done ? done : "?", total ? "/" : "",
                total ? total : "", m ? " " : "", m ? m : "");
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/progress");
  json_obj_begin(w);
  json_key(w, "progressToken");
  json_raw(w, c->progress_token, strlen(c->progress_token));
  json_key(w, "progress");
  json_uint(w, ++c->progress);
  json_key(w, "message");
  json_str(w, msg);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(c->srv, w);
}

/* The spec every sandbox of this server gets, cold or warm; only argv, the bridge and (for a
 * run with servers) the environment differ. The `mcp` package is mounted whenever it exists, so a
 * warm sandbox (which may get a run with servers) looks the same from inside as a cold one. */
static void base_spec(struct server *srv, const struct sbx_limits *limits, char **argv, int devnull, int out_w,
                      int err_w, struct sbx_bind *bind, struct sbx_spec *spec)
{
  *spec = (struct sbx_spec){
      .policy = srv->policy,
      .limits = *limits,
      .rootfs = srv->rootfs,
      .argv = argv,
      .stdin_fd = devnull,
      .stdout_fd = out_w,
      .stderr_fd = err_w,
      .bridge_fd = -1,
  };
  if (srv->python_dir) {
    *bind = (struct sbx_bind){.src = srv->python_dir, .dst = PROXY_PYTHON_DST, .rw = false};
    spec->binds = bind;
    spec->n_binds = 1;
  }
}

static void warm_free(struct warm *w)
{
  if (!w)
    return;
  sandbox_free(w->sb); /* kills and reaps */
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
static int warm_spawn(struct server *srv, sbx_error_t *err)
{
  /* Its limits are the policy's defaults, but with the longest timeout a call may ask for: the
   * call sets its own deadline at delivery. (Only a degraded sandbox, with no cgroup, sees the
   * difference: its RLIMIT_CPU is the maximum timeout rather than the call's.) */
  struct sbx_limits req, limits;
  limits_unset(&req);
  req.timeout_ms = srv->policy->max.timeout_ms;
  if (policy_resolve_limits(srv->policy, &req, &limits, err) < 0)
    return -1;
  _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0)
    return sbx_error_errno(err, "open `/dev/null`");
  _cleanup_close_ int out_w = -1, err_w = -1;
  _cleanup_close_ int out_r = -1, err_r = -1;
  if (open_pipe(&out_r, &out_w, err) < 0 || open_pipe(&err_r, &err_w, err) < 0)
    return -1;
  int sv[2];
  /* Our end never blocks the loop; the runner's end blocks in its read of the job. */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return sbx_error_errno(err, "job socketpair");
  _cleanup_close_ int job = sv[0], inside = sv[1];
  if (fcntl(job, F_SETFL, O_NONBLOCK) < 0)
    return sbx_error_errno(err, "job socket");

  /* python3 -c RUNNER with no code: the runner's warm mode. */
  char *argv[] = {PYTHON, "-c", (char *) mcp_runner_source, NULL};
  struct sbx_spec spec;
  struct sbx_bind bind;
  base_spec(srv, &limits, argv, devnull, out_w, err_w, &bind, &spec);
  spec.bridge_fd = inside;
  struct warm *w = calloc(1, sizeof *w);
  if (!w)
    return sbx_error_set(err, ENOMEM, "warm sandbox");
  if (sandbox_spawn_start(&spec, &w->sb, err) < 0) {
    free(w);
    return -1;
  }
  /* No deadline while idle: the call's starts at delivery. */
  sandbox_set_deadline(w->sb, UINT64_MAX);
  w->out_fd = TAKE_FD(out_r);
  w->err_fd = TAKE_FD(err_r);
  w->job_fd = TAKE_FD(job);
  struct warm **tail = &srv->warm;
  while (*tail)
    tail = &(*tail)->next;
  *tail = w;
  srv->n_warm++;
  return 0;
}

static void warm_unlink(struct server *srv, struct warm *w)
{
  for (struct warm **p = &srv->warm; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      srv->n_warm--;
      return;
    }
}

/* Frame the job (runner.py: the servers, "a,b" or nothing, a newline, the code) and send it
 * whole. */
static int send_job(int fd, const char *code, const char *servers, sbx_error_t *err)
{
  if (!servers)
    servers = "";
  size_t slen = strlen(servers), clen = strlen(code);
  unsigned char hdr[4];
  if (bridge_header(slen + 1 + clen, BRIDGE_DEFAULT_MAX_FRAME, hdr, err) < 0)
    return -1;
  struct iovec iov[4] = {{.iov_base = hdr, .iov_len = 4},
                         {.iov_base = (void *) servers, .iov_len = slen},
                         {.iov_base = "\n", .iov_len = 1},
                         {.iov_base = (void *) code, .iov_len = clen}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 4};
  uint64_t give_up = now_ns() + JOB_SEND_TIMEOUT_MS * 1000000ULL;
  while (mh.msg_iovlen) {
    ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      uint64_t now = now_ns();
      if (now < give_up && poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, ms_until(give_up, now)) > 0)
        continue;
      return sbx_error_set(err, ETIMEDOUT, "warm sandbox: the job was not taken");
    }
    if (n < 0)
      return sbx_error_errno(err, "warm sandbox: send the job");
    size_t done = (size_t) n;
    while (mh.msg_iovlen && done >= mh.msg_iov[0].iov_len) {
      done -= mh.msg_iov[0].iov_len;
      mh.msg_iov++;
      mh.msg_iovlen--;
    }
    if (mh.msg_iovlen) {
      mh.msg_iov[0].iov_base = (char *) mh.msg_iov[0].iov_base + done;
      mh.msg_iov[0].iov_len -= done;
    }
  }
  return 0;
}

/* Give the call a warm sandbox. On failure the warm sandbox is gone and the call gets a cold one. */
static int call_start_warm(struct call *c, struct warm *w, sbx_error_t *err)
{
  const char *servers = c->proxy ? strchr(proxy_env(c->proxy), '=') + 1 : NULL;
  /* The call's clock and deadline start at delivery, as a cold one's start at its spawn. */
  sandbox_start_clock(w->sb);
  sandbox_set_deadline(w->sb, now_ns() + c->limits.timeout_ms * 1000000ULL);
  if (send_job(w->job_fd, c->code, servers, err) < 0) {
    warm_free(w);
    return -1;
  }
  c->sb = TAKE_PTR(w->sb);
  c->out_fd = TAKE_FD(w->out_fd);
  c->err_fd = TAKE_FD(w->err_fd);
  /* With servers, the job socket goes on as the bridge; without, as the done channel. */
  if (c->proxy)
    proxy_adopt_fd(c->proxy, TAKE_FD(w->job_fd));
  else
    c->done_fd = TAKE_FD(w->job_fd);
  warm_free(w);
  return 0;
}

static int call_start_cold(struct server *srv, struct call *c, int bridge_fd, sbx_error_t *err);

static int call_start(struct server *srv, struct call *c, sbx_error_t *err)
{
  struct sbx_limits req;
  limits_unset(&req);
  if (c->timeout_ms != UINT64_MAX)
    req.timeout_ms = c->timeout_ms;
  if (policy_resolve_limits(srv->policy, &req, &c->limits, err) < 0)
    return -1;

  /* With servers: the bridge at fd 3, the `mcp` package read-only, and the runner told which
   * servers it has (it then defines mcp_<alias> and friends). */
  _cleanup_close_ int bridge = -1;
  if (c->n_servers) {
    if (!srv->python_dir)
      return sbx_error_set(err, ENOENT, "the sandbox's Python helpers (mcp package) were not found next to sandboxd");
    if (proxy_new(srv->hosts, (const char *const *) c->servers, c->n_servers, NULL, &bridge, &c->proxy, err) < 0)
      return -1;
    proxy_on_progress(c->proxy, relay_progress, c);
  }
  c->srv = srv;

  /* A ready warm sandbox if there is one. Else one still being built, which the call waits for
   * (call_pending_ready): it is further along than a cold one started now would be, and
   * building both would split the CPUs between them. Only an empty pool (a burst) starts cold. */
  struct warm *w = srv->warm;
  while (w && !w->ready)
    w = w->next;
  if (!w)
    w = srv->warm;
  if (w) {
    warm_unlink(srv, w);
    if (!w->ready) {
      c->pending = w;
      c->pending_bridge = TAKE_FD(bridge);
      c->pending_until = now_ns() + PENDING_MAX_NS;
      return 0;
    }
    sbx_error_t werr = {0};
    if (call_start_warm(c, w, &werr) == 0)
      return 0;
    log_warn("%s; starting a cold sandbox instead", werr.msg);
  }
  return call_start_cold(srv, c, TAKE_FD(bridge), err);
}

/* A sandbox built for this call, with its code on the command line. Takes bridge (with servers:
 * the sandbox's end of the proxy's socket). */
static int call_start_cold(struct server *srv, struct call *c, int bridge_fd, sbx_error_t *err)
{
  _cleanup_close_ int bridge = bridge_fd;
  _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0)
    return sbx_error_errno(err, "open `/dev/null`");
  _cleanup_close_ int out_w = -1, err_w = -1;
  _cleanup_close_ int out_r = -1, err_r = -1;
  if (open_pipe(&out_r, &out_w, err) < 0 || open_pipe(&err_r, &err_w, err) < 0)
    return -1;

  /* python3 -c RUNNER CODE: the runner finds the code in sys.argv[1]. */
  char *argv[] = {PYTHON, "-c", (char *) mcp_runner_source, c->code, NULL};
  struct sbx_spec spec;
  struct sbx_bind bind;
  base_spec(srv, &c->limits, argv, devnull, out_w, err_w, &bind, &spec);
  char *env[2];
  _cleanup_close_ int done = -1;
  if (c->proxy) {
    env[0] = "PYTHONPATH=" PROXY_PYTHON_DST;
    env[1] = (char *) proxy_env(c->proxy);
    spec.extra_env = env;
    spec.n_extra_env = 2;
    spec.bridge_fd = bridge;
  } else {
    /* The done channel at fd 3, as a warm sandbox's job socket becomes. */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
      return sbx_error_errno(err, "done socketpair");
    done = sv[0];
    bridge = sv[1];
    if (fcntl(done, F_SETFL, O_NONBLOCK) < 0)
      return sbx_error_errno(err, "done socket");
    spec.bridge_fd = bridge;
  }
  if (sandbox_spawn(&spec, &c->sb, err) < 0)
    return -1;
  c->done_fd = TAKE_FD(done);
  /* Our copies of the write ends must go, or the pipes never reach EOF. */
  c->out_fd = TAKE_FD(out_r);
  c->err_fd = TAKE_FD(err_r);
  return 0;
}

static void call_start_failed(struct server *srv, struct call *c, const sbx_error_t *err)
{
  log_sbx_error(err);
  mcp_log(srv, 4, err->msg);
  call_unlink(srv, c);
  send_tool_error(srv, c->id, "sandboxd could not start the sandbox: %s", err->msg);
  call_free(c);
}

/* The warm sandbox a call waited for is built, or failed, or took too long (give_up): deliver
 * the job, or start cold. */
static void call_pending_ready(struct server *srv, struct call *c, bool give_up)
{
  struct warm *w = TAKE_PTR(c->pending);
  int bridge = TAKE_FD(c->pending_bridge);
  sbx_error_t werr = {0}, err = {0};
  if (give_up) {
    sbx_error_set(&werr, ETIMEDOUT, "a warm sandbox was not built in time");
    warm_free(w);
  } else if (sandbox_spawn_finish(w->sb, &werr) == 0) {
    w->ready = true;
    if (call_start_warm(c, w, &werr) == 0) {
      if (bridge >= 0)
        close(bridge);
      return;
    }
  } else {
    warm_free(w);
  }
  log_warn("%s; starting a cold sandbox instead", werr.msg);
  if (call_start_cold(srv, c, bridge, &err) < 0)
    call_start_failed(srv, c, &err);
}

/* Start queued calls while there is room. */
static void start_queued(struct server *srv)
{
  struct call *c = srv->calls;
  while (c && srv->n_running < srv->max_concurrent) {
    struct call *next = c->next;
    if (c->state == CALL_QUEUED) {
      sbx_error_t err = {0};
      srv->n_queued--;
      c->state = CALL_RUNNING;
      srv->n_running++;
      srv->last_call_ns = now_ns();
      if (call_start(srv, c, &err) < 0)
        call_start_failed(srv, c, &err);
    }
    c = next;
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
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_notification(w, "notifications/progress");
  json_obj_begin(w);
  json_key(w, "progressToken");
  json_raw(w, c->progress_token, strlen(c->progress_token));
  json_key(w, "progress");
  json_uint(w, ++c->progress);
  json_key(w, "message");
  json_str(w, msg);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* ------------------------------------------------------------------ methods */

const char *mcp_negotiate_version(const char *client_version)
{
  for (size_t i = 0; client_version && mcp_protocol_versions[i]; i++)
    if (strcmp(client_version, mcp_protocol_versions[i]) == 0)
      return mcp_protocol_versions[i];
  return mcp_protocol_versions[0];
}

static void m_initialize(struct server *srv, const char *id, const json_node_t *params)
{
  (void) srv;
  const char *version = mcp_negotiate_version(json_as_string(json_get(params, "protocolVersion"), NULL));
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "protocolVersion");
  json_str(w, version);
  json_key(w, "capabilities");
  json_obj_begin(w);
  json_key(w, "tools");
  json_obj_begin(w);
  json_key(w, "listChanged");
  json_bool(w, false);
  json_obj_end(w);
  json_key(w, "resources");
  json_obj_begin(w);
  json_key(w, "listChanged");
  json_bool(w, false);
  json_key(w, "subscribe");
  json_bool(w, false);
  json_obj_end(w);
  json_key(w, "logging");
  json_obj_begin(w);
  json_obj_end(w);
  json_obj_end(w);
  json_key(w, "serverInfo");
  json_obj_begin(w);
  json_key(w, "name");
  json_str(w, "sandboxd");
  json_key(w, "title");
  json_str(w, "sandboxd Python sandbox");
  json_key(w, "version");
  json_str(w, SANDBOXD_VERSION);
  json_obj_end(w);
  json_key(w, "instructions");
  json_str(w, "Use run_python to execute Python code in a fresh, isolated sandbox per call. "
              "Nothing persists between calls. Limits are in resource " CAPABILITIES_URI ".");
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

static void schema_prop(json_writer_t *w, const char *name, const char *type, const char *description)
{
  json_key(w, name);
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, type);
  if (description) {
    json_key(w, "description");
    json_str(w, description);
  }
  json_obj_end(w);
}

/* Append " a, b" to the string in buf, or " a, ..." where the rest does not fit. */
static void append_names(char *buf, size_t len, const struct mcp_config *cfg)
{
  if (strlen(buf) + 5 > len) /* no room even for " ..." */
    return;
  for (size_t i = 0; i < cfg->n; i++)
    if (bufcatf(buf, len - 4, NULL, "%s %s", i ? "," : "", cfg->servers[i].name) < 0) {
      strcat(buf, " ..."); /* fits: buf stays within len - 4 */
      return;
    }
}

static void write_tool(struct server *srv, json_writer_t *w)
{
  char desc[160];
  json_obj_begin(w);
  json_key(w, "name");
  json_str(w, TOOL_NAME);
  json_key(w, "title");
  json_str(w, "Run Python in a sandbox");
  json_key(w, "description");
  if (srv->mcp_cfg->n) {
    /* Name the servers, within a budget: the description is read on every turn. */
    char desc_servers[sizeof tool_description + 256];
    bufprintf_cut(desc_servers, sizeof desc_servers, "%s Servers:", tool_description);
    append_names(desc_servers, sizeof desc_servers - 1, srv->mcp_cfg); /* and room for the "." */
    strcat(desc_servers, ".");
    json_str(w, desc_servers);
  } else
    json_str(w, tool_description);

  json_key(w, "inputSchema");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "object");
  json_key(w, "properties");
  json_obj_begin(w);
  schema_prop(w, "code", "string", "Python 3 source to run as a script; top-level await is allowed.");
  json_key(w, "servers");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "array");
  json_key(w, "items");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "string");
  json_obj_end(w);
  json_key(w, "description");
  json_str(w, "Host MCP servers the code may call, by name.");
  json_obj_end(w);
  bufprintf_cut(desc, sizeof desc, "Wall-clock limit in seconds (default %llu, at most %llu).",
                (unsigned long long) (srv->policy->limits.timeout_ms / 1000),
                (unsigned long long) (srv->policy->max.timeout_ms / 1000));
  json_key(w, "timeout");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "integer");
  json_key(w, "minimum");
  json_int(w, 1);
  json_key(w, "description");
  json_str(w, desc);
  json_obj_end(w);
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  json_str(w, "code");
  json_arr_end(w);
  json_obj_end(w);

  json_key(w, "outputSchema");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "object");
  json_key(w, "properties");
  json_obj_begin(w);
  json_key(w, "status");
  json_obj_begin(w);
  json_key(w, "type");
  json_str(w, "string");
  json_key(w, "enum");
  json_arr_begin(w);
  for (int s = SBX_STATUS_OK; s <= SBX_STATUS_MEMORY_LIMIT; s++)
    json_str(w, sbx_status_name((enum sbx_status) s));
  json_arr_end(w);
  json_obj_end(w);
  schema_prop(w, "exit_code", "integer",
              "the code's exit status; 128+N if killed by signal N; 124 on timeout");
  schema_prop(w, "stdout_bytes", "integer", "bytes of standard output captured (the text is in content)");
  schema_prop(w, "stderr_bytes", "integer", "bytes of standard error captured (in content, after --- stderr ---)");
  schema_prop(w, "replaced_bytes", "integer", "control or non-UTF-8 bytes shown as U+FFFD in content");
  schema_prop(w, "truncated", "boolean", "output went over the limit and was cut");
  schema_prop(w, "execution_time_ms", "integer", NULL);
  schema_prop(w, "memory_peak_bytes", "integer", NULL);
  schema_prop(w, "limits", "string", "how limits were enforced: cgroup2, cgroup1, or degraded (rlimits only)");
  json_obj_end(w);
  json_key(w, "required");
  json_arr_begin(w);
  static const char *const required[] = {"status",       "exit_code", "stdout_bytes",      "stderr_bytes",
                                         "replaced_bytes", "truncated", "execution_time_ms", "memory_peak_bytes"};
  for (size_t i = 0; i < ARRAY_SIZE(required); i++)
    json_str(w, required[i]);
  json_arr_end(w);
  json_obj_end(w);

  json_key(w, "annotations");
  json_obj_begin(w);
  json_key(w, "title");
  json_str(w, "Run Python in a sandbox");
  json_key(w, "readOnlyHint");
  json_bool(w, false);
  /* Nothing on the host changes: each sandbox is thrown away. */
  json_key(w, "destructiveHint");
  json_bool(w, false);
  json_key(w, "idempotentHint");
  json_bool(w, false);
  /* The sandbox reaches nothing outside itself (loopback-only network). */
  json_key(w, "openWorldHint");
  json_bool(w, false);
  json_obj_end(w);
  json_obj_end(w);
}

static void m_tools_list(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "tools");
  json_arr_begin(w);
  write_tool(srv, w);
  json_arr_end(w);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

/* "configured servers: a, b" (or that there are none), for messages. */
static void server_names(const struct server *srv, char *buf, size_t len)
{
  bufprintf_cut(buf, len, "%s", srv->mcp_cfg->n ? "configured servers:" : "no host MCP servers are configured for sandboxd (see sandboxd(1), --config)");
  append_names(buf, len, srv->mcp_cfg);
}

static void m_tools_call(struct server *srv, const char *id, const json_node_t *params)
{
  const char *name = json_as_string(json_get(params, "name"), NULL);
  if (!name) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Invalid params: `name` must be a string");
    return;
  }
  if (strcmp(name, TOOL_NAME) != 0) {
    send_errorf(srv, id, JSONRPC_INVALID_PARAMS, "Unknown tool: %.200s", name);
    return;
  }
  /* Bad arguments are the model's to fix: answer with an isError result it can read. */
  const json_node_t *args = json_get(params, "arguments");
  if (args && json_type(args) != JSON_OBJECT) {
    send_tool_error(srv, id, "arguments must be an object with `code` (string)");
    return;
  }
  const json_node_t *coden = json_get(args, "code");
  size_t code_len = 0;
  const char *code = json_as_string(coden, &code_len);
  if (!coden) {
    send_tool_error(srv, id, "missing `code`: pass the Python source to run as a string");
    return;
  }
  if (!code) {
    send_tool_error(srv, id, "`code` must be a string, not %s", json_type_name(json_type(coden)));
    return;
  }
  if (code_len == 0 || strspn(code, " \t\r\n") == code_len) {
    send_tool_error(srv, id, "`code` is empty: pass the Python source to run");
    return;
  }
  if (strlen(code) != code_len) {
    send_tool_error(srv, id, "`code` contains a NUL character, which Python source cannot hold");
    return;
  }
  if (code_len > MAX_CODE_BYTES) {
    send_tool_error(srv, id,
                    "code too large: %zu bytes, the limit is %d; write less code, or generate "
                    "data inside the sandbox",
                    code_len, MAX_CODE_BYTES);
    return;
  }
  uint64_t timeout_ms = UINT64_MAX;
  const json_node_t *tn = json_get(args, "timeout");
  if (tn && json_type(tn) != JSON_NULL) {
    long long t;
    if (json_as_int(tn, &t) < 0 || t <= 0) {
      send_tool_error(srv, id, "`timeout` must be a positive whole number of seconds");
      return;
    }
    /* Clamp to the policy's ceiling rather than refuse: the model cannot know it. */
    uint64_t max = srv->policy->max.timeout_ms;
    timeout_ms = (uint64_t) t > max / 1000 ? max : (uint64_t) t * 1000;
  }
  const json_node_t *servers = json_get(args, "servers");
  if (servers && json_type(servers) != JSON_NULL) {
    if (json_type(servers) != JSON_ARRAY) {
      send_tool_error(srv, id, "`servers` must be an array of server names");
      return;
    }
    for (size_t i = 0; i < json_array_len(servers); i++) {
      const char *s = json_as_string(json_array_at(servers, i), NULL);
      if (!s) {
        send_tool_error(srv, id, "`servers` must be an array of server names (strings)");
        return;
      }
      if (!mcp_config_find(srv->mcp_cfg, s)) {
        char names[400];
        server_names(srv, names, sizeof names);
        send_tool_error(srv, id, "unknown server `%.100s`: %s", s, names);
        return;
      }
    }
  }
  if (call_find(srv, id)) {
    send_errorf(srv, id, JSONRPC_INVALID_REQUEST, "Invalid Request: id %.100s is already in use", id);
    return;
  }
  if (srv->n_running >= srv->max_concurrent && srv->n_queued >= srv->max_queue) {
    send_tool_error(srv, id,
                    "sandboxd is busy: %zu calls running and %zu queued (--max-queue); try again later",
                    srv->n_running, srv->n_queued);
    return;
  }

  struct call *c = calloc(1, sizeof *c);
  if (!c || !(c->id = strdup(id)) || !(c->code = strndup(code, code_len))) {
    call_free(c);
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  c->out_fd = c->err_fd = c->done_fd = c->pending_bridge = -1;
  c->timeout_ms = timeout_ms;
  size_t ns = json_array_len(servers);
  if (ns && !(c->servers = calloc(ns, sizeof *c->servers))) {
    call_free(c);
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  for (size_t i = 0; i < ns; i++)
    if ((c->servers[c->n_servers] = strdup(json_as_string(json_array_at(servers, i), NULL))))
      c->n_servers++;
  c->queued_ns = now_ns();
  c->next_progress_ns = c->queued_ns + PROGRESS_INTERVAL_NS;
  c->progress_token = jsonrpc_id_canonical(json_get(json_get(params, "_meta"), "progressToken"));
  c->state = CALL_QUEUED;
  struct call **tail = &srv->calls;
  while (*tail)
    tail = &(*tail)->next;
  *tail = c;
  srv->n_queued++;
  start_queued(srv);
}

static void write_limits(json_writer_t *w, const struct sbx_limits *l)
{
  json_obj_begin(w);
  json_key(w, "timeout_ms");
  json_uint(w, l->timeout_ms);
  json_key(w, "memory_bytes");
  json_uint(w, l->memory_bytes);
  json_key(w, "pids");
  json_uint(w, l->pids);
  json_key(w, "cpus");
  json_double(w, (double) l->cpus_milli / 1000.0);
  json_key(w, "tmp_bytes");
  json_uint(w, l->tmp_bytes);
  json_key(w, "workspace_bytes");
  json_uint(w, l->workspace_bytes);
  json_key(w, "shm_bytes");
  json_uint(w, l->shm_bytes);
  json_key(w, "nofile");
  json_uint(w, l->nofile);
  json_key(w, "fsize_bytes");
  json_uint(w, l->fsize_bytes);
  json_key(w, "output_bytes");
  json_uint(w, l->output_bytes);
  json_obj_end(w);
}

/* What the capabilities resource says: enough for a model or a user to plan within the limits. */
static void write_capabilities(struct server *srv, json_writer_t *w)
{
  const struct sbx_policy *p = srv->policy;
  json_obj_begin(w);
  json_key(w, "server");
  json_obj_begin(w);
  json_key(w, "name");
  json_str(w, "sandboxd");
  json_key(w, "version");
  json_str(w, SANDBOXD_VERSION);
  json_obj_end(w);
  json_key(w, "python");
  json_str(w, PYTHON);
  json_key(w, "rootfs");
  json_str(w, srv->rootfs);
  json_key(w, "policy");
  json_obj_begin(w);
  json_key(w, "name");
  json_str(w, p->name ? p->name : "");
  json_key(w, "description");
  json_str(w, p->description ? p->description : "");
  json_key(w, "sha256");
  json_str(w, p->sha256);
  json_key(w, "readonly_root");
  json_bool(w, p->readonly_root);
  json_key(w, "no_new_privs");
  json_bool(w, p->no_new_privs);
  json_key(w, "drop_capabilities");
  json_bool(w, p->drop_capabilities);
  json_key(w, "uid");
  json_uint(w, p->uid);
  json_key(w, "syscall_rules");
  json_uint(w, p->n_rules);
  json_obj_end(w);
  json_key(w, "network");
  json_str(w, "loopback only");
  json_key(w, "persistence");
  json_str(w, "none: every call runs in a fresh sandbox with an empty /workspace and /tmp");
  json_key(w, "limits");
  write_limits(w, &p->limits);
  json_key(w, "max_limits");
  write_limits(w, &p->max);
  json_key(w, "concurrency");
  json_obj_begin(w);
  json_key(w, "max_concurrent");
  json_uint(w, srv->max_concurrent);
  json_key(w, "max_queue");
  json_uint(w, srv->max_queue);
  json_key(w, "max_code_bytes");
  json_uint(w, MAX_CODE_BYTES);
  json_key(w, "max_message_bytes");
  json_uint(w, srv->max_message);
  /* Sandboxes built ahead of the calls (--warm); each still serves exactly one call. */
  json_key(w, "warm_pool");
  json_uint(w, srv->warm_target);
  json_obj_end(w);
  json_key(w, "servers");
  json_arr_begin(w);
  for (size_t i = 0; i < srv->mcp_cfg->n; i++) {
    json_obj_begin(w);
    json_key(w, "name");
    json_str(w, srv->mcp_cfg->servers[i].name);
    json_key(w, "description");
    json_str(w, srv->mcp_cfg->servers[i].description);
    json_obj_end(w);
  }
  json_arr_end(w);
  json_obj_end(w);
}

static void m_resources_list(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "resources");
  json_arr_begin(w);
  json_obj_begin(w);
  json_key(w, "uri");
  json_str(w, CAPABILITIES_URI);
  json_key(w, "name");
  json_str(w, "capabilities");
  json_key(w, "title");
  json_str(w, "Sandbox capabilities and limits");
  json_key(w, "description");
  json_str(w, "The policy, limits and concurrency run_python enforces.");
  json_key(w, "mimeType");
  json_str(w, "application/json");
  json_obj_end(w);
  json_arr_end(w);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

static void m_resources_templates_list(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "resourceTemplates");
  json_arr_begin(w);
  json_arr_end(w);
  json_obj_end(w);
  jsonrpc_end(w);
  send_writer(srv, w);
}

static void m_resources_read(struct server *srv, const char *id, const json_node_t *params)
{
  const char *uri = json_as_string(json_get(params, "uri"), NULL);
  if (!uri) {
    send_error(srv, id, JSONRPC_INVALID_PARAMS, "Invalid params: `uri` must be a string");
    return;
  }
  if (strcmp(uri, CAPABILITIES_URI) != 0) {
    /* -32002: MCP's "resource not found". */
    send_errorf(srv, id, -32002, "Resource not found: %.200s", uri);
    return;
  }
  json_writer_t *doc = json_writer_new();
  json_writer_t *w = json_writer_new();
  size_t n = 0;
  const char *text = NULL;
  if (doc) {
    write_capabilities(srv, doc);
    text = json_writer_buf(doc, &n);
  }
  if (!w || !text) {
    json_writer_free(doc);
    json_writer_free(w);
    send_error(srv, id, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
    return;
  }
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "contents");
  json_arr_begin(w);
  json_obj_begin(w);
  json_key(w, "uri");
  json_str(w, CAPABILITIES_URI);
  json_key(w, "mimeType");
  json_str(w, "application/json");
  json_key(w, "text");
  json_strn(w, text, n);
  json_obj_end(w);
  json_arr_end(w);
  json_obj_end(w);
  jsonrpc_end(w);
  json_writer_free(doc);
  send_writer(srv, w);
}

static void m_logging_set_level(struct server *srv, const char *id, const json_node_t *params)
{
  const char *level = json_as_string(json_get(params, "level"), NULL);
  for (size_t i = 0; level && i < ARRAY_SIZE(log_levels); i++)
    if (strcmp(level, log_levels[i]) == 0) {
      srv->log_level = (int) i;
      send_empty_result(srv, id);
      return;
    }
  send_error(srv, id, JSONRPC_INVALID_PARAMS,
             "Invalid params: `level` must be one of debug, info, notice, "
             "warning, error, critical, alert, emergency");
}

static void m_ping(struct server *srv, const char *id, const json_node_t *params)
{
  (void) params;
  send_empty_result(srv, id);
}

static const struct method {
  const char *name;
  void (*run)(struct server *srv, const char *id, const json_node_t *params);
} methods[] = {
    {"initialize", m_initialize},         {"ping", m_ping},
    {"tools/list", m_tools_list},         {"tools/call", m_tools_call},
    {"resources/list", m_resources_list}, {"resources/templates/list", m_resources_templates_list},
    {"resources/read", m_resources_read}, {"logging/setLevel", m_logging_set_level},
    /* Not here, so answered -32601: server/discover (the stateless probe; clients then fall back to
     * initialize), prompts/list, completion/complete. */
};

static void on_cancelled(struct server *srv, const json_node_t *params)
{
  _cleanup_free_ char *id = jsonrpc_id_canonical(json_get(params, "requestId"));
  struct call *c = id ? call_find(srv, id) : NULL;
  if (!c)
    return; /* already answered, or never ours: nothing to do */
  if (c->state == CALL_QUEUED || c->pending) {
    call_unlink(srv, c);
    call_free(c);
    return;
  }
  c->cancelled = true;
  if (!c->killed) {
    c->killed = true;
    sandbox_kill(c->sb, false);
  }
}

static void handle_message(struct server *srv, const char *line, size_t len)
{
  struct jsonrpc_message m;
  struct jsonrpc_failure fail;
  if (jsonrpc_parse(line, len, &m, &fail) < 0) {
    send_error(srv, fail.id, fail.code, fail.detail.msg);
    jsonrpc_failure_clear(&fail);
    return;
  }
  if (m.kind == JSONRPC_RESPONSE) {
    /* We send no requests, so no answer is expected; ignore it as the spec allows. */
  } else if (m.kind == JSONRPC_NOTIFICATION) {
    if (strcmp(m.method, "notifications/cancelled") == 0)
      on_cancelled(srv, m.params);
    /* notifications/initialized and anything else: nothing to do, never answered. */
  } else if (m.params && json_type(m.params) != JSON_OBJECT) {
    send_error(srv, m.id, JSONRPC_INVALID_PARAMS, "Invalid params: `params` must be an object");
  } else {
    size_t i = 0;
    while (i < ARRAY_SIZE(methods) && strcmp(methods[i].name, m.method) != 0)
      i++;
    if (i < ARRAY_SIZE(methods))
      methods[i].run(srv, m.id, m.params);
    else
      send_errorf(srv, m.id, JSONRPC_METHOD_NOT_FOUND, "Method not found: %.200s", m.method);
  }
  jsonrpc_message_clear(&m);
}

/* ------------------------------------------------------------------ the loop */

static void read_stdin(struct server *srv)
{
  char buf[READ_CHUNK];
  ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  const char *line;
  size_t len;
  enum jsonrpc_frame f;
  if (n <= 0) {
    if (n < 0)
      log_error("read stdin: %s", strerror(errno));
    srv->stdin_eof = true;
    while ((f = jsonrpc_framer_finish(&srv->framer, &line, &len)) != JSONRPC_FRAME_NONE)
      if (f == JSONRPC_FRAME_MESSAGE)
        handle_message(srv, line, len);
    return;
  }
  sbx_error_t err;
  if (jsonrpc_framer_push(&srv->framer, buf, (size_t) n, &err) < 0) {
    log_sbx_error(&err);
    return;
  }
  while ((f = jsonrpc_framer_next(&srv->framer, &line, &len)) != JSONRPC_FRAME_NONE) {
    if (f == JSONRPC_FRAME_MESSAGE) {
      handle_message(srv, line, len);
    } else {
      struct jsonrpc_failure fail;
      jsonrpc_oversize(line, len, srv->max_message, &fail);
      log_warn("dropped a message larger than %zu bytes (--max-message-size)", srv->max_message);
      send_error(srv, fail.id, fail.code, fail.detail.msg);
      jsonrpc_failure_clear(&fail);
    }
  }
}

static int ms_until(uint64_t when, uint64_t now)
{
  if (when <= now)
    return 0;
  uint64_t ms = (when - now + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int) ms;
}

/* Kill at deadlines, tick progress; returns the poll timeout until the next such event. */
static int run_timers(struct server *srv)
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
    if (c->state == CALL_RUNNING && c->sb && !c->killed) {
      uint64_t deadline = sandbox_deadline_ns(c->sb);
      if (now >= deadline) {
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

/* A warm sandbox ended while idle (its Python failed to start, or something killed it): drop it,
 * and wait a while before the next, so a broken setup does not spin. */
static void warm_died(struct server *srv, struct warm *w, const char *why)
{
  char buf[512];
  ssize_t n = why ? 0 : read(w->err_fd, buf, sizeof buf - 1);
  buf[n > 0 ? n : 0] = '\0';
  if (why)
    log_warn("a warm sandbox could not be built: %s", why);
  else
    log_warn("a warm sandbox ended before it got a job%s%s", n > 0 ? ": " : "", buf);
  warm_unlink(srv, w);
  warm_free(w);
  srv->warm_retry_ns = now_ns() + WARM_RETRY_NS;
}

/* Top the pool up by one. */
static void warm_refill(struct server *srv)
{
  sbx_error_t err = {0};
  if (warm_spawn(srv, &err) < 0) {
    log_warn("warm sandbox: %s", err.msg);
    srv->warm_retry_ns = now_ns() + WARM_RETRY_NS;
  }
}

/* Whether some call is running or about to (answered calls only wait to be reaped). */
static bool code_running(const struct server *srv)
{
  for (const struct call *c = srv->calls; c; c = c->next)
    if (c->state == CALL_RUNNING && !c->answered)
      return true;
  return false;
}

enum { FD_SIGNAL, FD_STDIN, FD_STDOUT, FD_FIXED };
/* Per running call: its pidfd, stdout, stderr and bridge. */
#define FDS_PER_CALL 4

static void serve(struct server *srv)
{
  struct pollfd *pfds = NULL;
  struct call **owners = NULL;
  size_t cap = 0;
  while (!srv->stop && !srv->stdin_eof) {
    start_queued(srv);
    int timeout = run_timers(srv);
    int host_timeout = mcp_hosts_timers(srv->hosts);
    if (host_timeout >= 0 && (timeout < 0 || host_timeout < timeout))
      timeout = host_timeout;
    /* Top the pool up, one sandbox per turn of the loop: starting one only creates the process
     * (about a millisecond); the rest of its setup runs concurrently and is collected below. */
    if (srv->n_warm < srv->warm_target) {
      uint64_t now = now_ns(), at = srv->warm_retry_ns;
      if (code_running(srv) && srv->last_call_ns + WARM_DEFER_NS > at)
        at = srv->last_call_ns + WARM_DEFER_NS;
      int t = ms_until(at, now);
      if (t == 0)
        warm_refill(srv);
      else if (timeout < 0 || t < timeout)
        timeout = t;
    }

    size_t n_hosts = mcp_hosts_max_pollfds(srv->hosts);
    size_t need = FD_FIXED + n_hosts + FDS_PER_CALL * srv->n_running + srv->n_warm;
    if (need > cap) {
      struct pollfd *p = realloc(pfds, need * sizeof *p);
      if (p)
        pfds = p;
      struct call **o = realloc(owners, need * sizeof *o);
      if (o)
        owners = o;
      if (!p || !o) {
        log_error("poll set: out of memory");
        break;
      }
      cap = need;
    }
    bool backlog = srv->outq.len - srv->outq_off > OUTQ_HIGH_WATER;
    pfds[FD_SIGNAL] = (struct pollfd){.fd = srv->sigfd, .events = POLLIN};
    /* A client that does not read our replies gets no more of its requests read. */
    pfds[FD_STDIN] = (struct pollfd){.fd = backlog ? -1 : STDIN_FILENO, .events = POLLIN};
    pfds[FD_STDOUT] =
        (struct pollfd){.fd = srv->outq_off < srv->outq.len ? STDOUT_FILENO : -1, .events = POLLOUT};
    size_t n = FD_FIXED + mcp_hosts_pollfds(srv->hosts, pfds + FD_FIXED);
    size_t first_call = n;
    for (struct call *c = srv->calls; c; c = c->next) {
      if (c->state != CALL_RUNNING)
        continue;
      /* Waiting for its warm sandbox: that sandbox's setup, instead of an end. */
      int fds[3] = {c->pending ? sandbox_spawn_fd(c->pending->sb) : sandbox_pidfd(c->sb), c->out_fd, c->err_fd};
      for (int i = 0; i < 3; i++) {
        owners[n] = c;
        pfds[n++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
      }
      /* The bridge with servers, else the done channel. */
      owners[n] = c;
      pfds[n++] = c->proxy ? (struct pollfd){.fd = proxy_fd(c->proxy), .events = proxy_events(c->proxy)}
                           : (struct pollfd){.fd = c->done_fd, .events = POLLIN};
    }
    size_t first_warm = n;
    for (struct warm *w = srv->warm; w; w = w->next)
      pfds[n++] = (struct pollfd){.fd = w->ready ? sandbox_pidfd(w->sb) : sandbox_spawn_fd(w->sb), .events = POLLIN};
    int r = poll(pfds, n, timeout);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      log_error("poll: %s", strerror(errno));
      break;
    }
    if (pfds[FD_SIGNAL].revents) {
      struct signalfd_siginfo si;
      if (read(srv->sigfd, &si, sizeof si) == sizeof si && si.ssi_signo == SIGHUP) {
        /* logrotate moved the audit log: the next record opens the file anew. */
        audit_reopen();
        continue;
      }
      log_warn("signal %u: stopping", si.ssi_signo);
      srv->stop = true;
      break;
    }
    if (pfds[FD_STDOUT].revents)
      flush_output(srv);
    /* Host servers' answers first: they go to bridges that are still open. */
    mcp_hosts_dispatch(srv->hosts, pfds + FD_FIXED, first_call - FD_FIXED);
    /* Output and bridges, then ends: a call may finish (and be freed) below. */
    for (size_t i = first_call; i < first_warm; i += FDS_PER_CALL) {
      struct call *c = owners[i];
      if (pfds[i + 1].revents && c->out_fd >= 0)
        drain_pipe(c, &c->out_fd, &c->out);
      if (pfds[i + 2].revents && c->err_fd >= 0)
        drain_pipe(c, &c->err_fd, &c->err);
      if (pfds[i + 3].revents && c->proxy && pfds[i + 3].fd == proxy_fd(c->proxy))
        proxy_handle(c->proxy, pfds[i + 3].revents);
      else if (pfds[i + 3].revents && !c->proxy && c->done_fd >= 0 && pfds[i + 3].fd == c->done_fd)
        call_done(srv, c);
    }
    for (size_t i = first_call; i < first_warm; i += FDS_PER_CALL)
      if (pfds[i].revents && owners[i]->pending)
        call_pending_ready(srv, owners[i], false);
      else if (pfds[i].revents)
        call_finish(srv, owners[i]);
    /* In pool order, which nothing above changed: calls take warm sandboxes only in read_stdin. */
    struct warm *w = srv->warm;
    for (size_t i = first_warm; i < n && w; i++) {
      struct warm *next = w->next;
      if (pfds[i].revents && !w->ready) {
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
    if (pfds[FD_STDIN].revents)
      read_stdin(srv);
  }
  free(pfds);
  free(owners);
}

/* Kill and reap every sandbox, then give the client what is already written, briefly. */
static void shutdown_server(struct server *srv)
{
  while (srv->calls) {
    struct call *c = srv->calls;
    call_unlink(srv, c);
    call_free(c); /* sandbox_free kills and reaps */
  }
  while (srv->warm) {
    struct warm *w = srv->warm;
    warm_unlink(srv, w);
    warm_free(w);
  }
  uint64_t give_up = now_ns() + 2000000000ULL;
  while (srv->outq_off < srv->outq.len && !srv->stop) {
    uint64_t now = now_ns();
    if (now >= give_up)
      break;
    struct pollfd p = {.fd = STDOUT_FILENO, .events = POLLOUT};
    if (poll(&p, 1, ms_until(give_up, now)) <= 0)
      break;
    flush_output(srv);
  }
}

/* ------------------------------------------------------------------ command line */

static const char mcp_usage[] =
    "usage: sandboxd mcp [OPTIONS]\n"
    "Serve the Model Context Protocol on stdin/stdout with one tool, run_python; every call runs in\n"
    "a fresh sandbox. Logs go to stderr. Options:\n"
    "  --policy NAME|PATH       policy to enforce (default: default)\n"
    "  --rootfs DIR             root filesystem (default: the built python-3.14-slim)\n"
    "  --max-concurrent N       sandboxes running at once (default 4); further calls queue\n"
    "  --max-queue N            calls waiting beyond that (default 64); more are refused\n"
    "  --warm N                 sandboxes kept built, with Python started, for the next calls\n"
    "                           (default 2, 0 disables); each serves one call\n"
    "  --max-message-size SIZE  largest JSON-RPC message accepted (default 4M)\n"
    "  --config FILE            host MCP servers the code may call ({\"mcpServers\": ...}; default:\n"
    "                           $SANDBOXD_MCP_CONFIG, else ~/.config/sandboxd/mcp.json)\n"
    "  --import-claude          also offer the servers Claude Code would run here (~/.claude.json,\n"
    "                           and the approved ones of ./.mcp.json)\n"
    "  --audit-log PATH|syslog|off   where audit records go (see sandboxd exec --help)\n"
    "See sandboxd(1).\n";

static int parse_count(const char *opt, const char *arg, size_t max, size_t *ret, sbx_error_t *err)
{
  uint64_t v;
  if (parse_u64(arg, &v) < 0 || v == 0 || v > max)
    return sbx_error_set(err, 0, "%s `%s`: expected a whole number from 1 to %zu", opt, arg, max);
  *ret = (size_t) v;
  return 0;
}

enum { OPT_POLICY = 256, OPT_ROOTFS, OPT_MAX_CONCURRENT, OPT_MAX_QUEUE, OPT_MAX_MESSAGE, OPT_CONFIG, OPT_IMPORT_CLAUDE,
       OPT_AUDIT_LOG, OPT_WARM };

static int parse_args(int argc, char **argv, struct server *srv, const char **ret_policy,
                      const char **ret_rootfs, bool *ret_help, sbx_error_t *err)
{
  static const struct option longopts[] = {
      {"policy", required_argument, NULL, OPT_POLICY},
      {"rootfs", required_argument, NULL, OPT_ROOTFS},
      {"max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT},
      {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
      {"max-message-size", required_argument, NULL, OPT_MAX_MESSAGE},
      {"config", required_argument, NULL, OPT_CONFIG},
      {"import-claude", no_argument, NULL, OPT_IMPORT_CLAUDE},
      {"audit-log", required_argument, NULL, OPT_AUDIT_LOG},
      {"warm", required_argument, NULL, OPT_WARM},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  optind = 0;
  opterr = 0;
  int c;
  uint64_t v;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
    case 'h':
      *ret_help = true;
      return 0;
    case OPT_POLICY:
      *ret_policy = optarg;
      break;
    case OPT_ROOTFS:
      *ret_rootfs = optarg;
      break;
    case OPT_MAX_CONCURRENT:
      if (parse_count("--max-concurrent", optarg, 256, &srv->max_concurrent, err) < 0)
        return -1;
      break;
    case OPT_MAX_QUEUE:
      if (parse_count("--max-queue", optarg, 65536, &srv->max_queue, err) < 0)
        return -1;
      break;
    case OPT_MAX_MESSAGE:
      if (parse_size(optarg, &v) < 0 || v < 1024 || v > (1u << 30))
        return sbx_error_set(err, 0, "--max-message-size `%s`: expected a size from 1K to 1G", optarg);
      srv->max_message = (size_t) v;
      break;
    case OPT_CONFIG:
      srv->mcp_opts.path = optarg;
      break;
    case OPT_IMPORT_CLAUDE:
      srv->mcp_opts.import_claude = true;
      break;
    case OPT_AUDIT_LOG:
      srv->audit_log = optarg;
      break;
    case OPT_WARM:
      if (parse_u64(optarg, &v) < 0 || v > MAX_WARM)
        return sbx_error_set(err, 0, "--warm `%s`: expected a whole number from 0 to %d", optarg, MAX_WARM);
      srv->warm_target = (size_t) v;
      break;
    default:
      return sbx_error_set(err, 0, "unknown or incomplete option `%s` (see sandboxd mcp --help)",
                           argv[optind - 1]);
    }
  }
  if (optind < argc)
    return sbx_error_set(err, 0, "unexpected argument `%s` (see sandboxd mcp --help)", argv[optind]);
  return 0;
}

/* Replies may wait for a slow client without stalling the loop: make stdout non-blocking, but only
 * a pipe or socket of our own (a terminal is shared with the shell). */
static int stdout_nonblocking(void)
{
  struct stat st;
  if (fstat(STDOUT_FILENO, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return -1;
  int flags = fcntl(STDOUT_FILENO, F_GETFL);
  if (flags < 0 || (flags & O_NONBLOCK) || fcntl(STDOUT_FILENO, F_SETFL, flags | O_NONBLOCK) < 0)
    return -1;
  return flags;
}

int cmd_mcp(int argc, char **argv)
{
  struct server srv = {
      .max_concurrent = DEFAULT_MAX_CONCURRENT,
      .max_queue = DEFAULT_MAX_QUEUE,
      .max_message = DEFAULT_MAX_MESSAGE,
      .warm_target = DEFAULT_WARM,
      .stdout_flags = -1,
      .sigfd = -1,
      .log_level = 3, /* warning */
  };
  const char *policy_name = NULL, *rootfs = NULL;
  bool help = false;
  sbx_error_t err = {0};
  if (parse_args(argc, argv, &srv, &policy_name, &rootfs, &help, &err) < 0) {
    log_sbx_error(&err);
    return SBX_EXIT_SETUP;
  }
  if (help) {
    fputs(mcp_usage, stdout);
    return 0;
  }
  /* Refuse to start rather than fail every call: the client shows the server as failed, and
   * stderr says why. */
  /* The audit log is opened before any sandbox runs (hostfile.h); a refused path is fatal. */
  if (audit_start(srv.audit_log, NULL, &err) < 0 ||
      policy_load(policy_name, &srv.policy, &err) < 0 || seccomp_validate(srv.policy, &err) < 0 ||
      rootfs_find(rootfs, &srv.rootfs, &err) < 0 || mcp_config_load(&srv.mcp_opts, &srv.mcp_cfg, &err) < 0 ||
      mcp_hosts_new(srv.mcp_cfg, STDERR_FILENO, &srv.hosts, &err) < 0) {
    log_sbx_error(&err);
    policy_free(srv.policy);
    free(srv.rootfs);
    mcp_config_free(srv.mcp_cfg);
    return SBX_EXIT_SETUP;
  }
  proxy_set_policy(srv.policy);
  if (srv.mcp_cfg->n && proxy_python_dir(&srv.python_dir, &err) < 0)
    log_warn("%s: calls with `servers` will fail", err.msg);

  /* Take the stop signals through a signalfd. The sandbox's code starts with an empty mask. */
  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  srv.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  /* A client that goes away must give us EPIPE, not kill us before we clean up. Blocked rather
   * than ignored: an ignored disposition would be inherited by the code, a mask is reset. */
  sigaddset(&mask, SIGPIPE);
  sigprocmask(SIG_BLOCK, &mask, &old);
  if (srv.sigfd < 0) {
    log_error("signalfd: %s", strerror(errno));
    sigprocmask(SIG_SETMASK, &old, NULL);
    mcp_hosts_free(srv.hosts);
    mcp_config_free(srv.mcp_cfg);
    free(srv.python_dir);
    policy_free(srv.policy);
    free(srv.rootfs);
    return SBX_EXIT_SETUP;
  }
  srv.stdout_flags = stdout_nonblocking();
  jsonrpc_framer_init(&srv.framer, srv.max_message);

  serve(&srv);
  shutdown_server(&srv);
  /* After the sandboxes: their calls in flight are cancelled first. */
  mcp_hosts_free(srv.hosts);
  mcp_config_free(srv.mcp_cfg);
  free(srv.python_dir);

  if (srv.stdout_flags >= 0)
    fcntl(STDOUT_FILENO, F_SETFL, srv.stdout_flags);
  close(srv.sigfd);
  sigprocmask(SIG_SETMASK, &old, NULL);
  jsonrpc_framer_free(&srv.framer);
  strbuf_free(&srv.outq);
  policy_free(srv.policy);
  free(srv.rootfs);
  return 0;
}
