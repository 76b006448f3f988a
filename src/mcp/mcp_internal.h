/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp` inside: the state its modules share (mcp_server.c the methods and the loop,
 * mcp_tool.c the tool's schema, mcp_calls.c the calls, warm_pool.c the pool, mcp_output.c what
 * is sent, mcp_spec.c each sandbox's spec, cli_mcp.c the command line). Not for other modules. */
#ifndef SBX_MCP_INTERNAL_H
#define SBX_MCP_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/util.h"
#include "hostmcp/mcp_config.h"
#include "image/image.h"
#include "mcp/capture.h"
#include "mcp/mcp_binds.h"
#include "mcp/mcp_lang.h"
#include "mcp/mcp_tasks.h"
#include "mcp/mcp_tool.h"
#include "mcp/route_ring.h"
#include "policy/policy.h"
#include "run/artifacts.h"
#include "run/binds.h"
#include "run/host_servers.h"
#include "sandbox/sandbox.h"

#define PYTHON "/usr/bin/python3"
#define CAPABILITIES_URI "sandboxd://capabilities"
#define MCP_READ_CHUNK 65536
/* After a run whose output and bridge requests reach this, malloc_trim(): RSS back where it was. */
#define TRIM_AFTER_BYTES (1u << 20)
#define PROGRESS_INTERVAL_NS 1000000000ULL
/* Stop reading requests while this much output waits for the client to read it. */
#define OUTQ_HIGH_WATER (64u << 20)

/* The code of the calls queued and running, together, is at most this many times the message
 * limit (64 MiB by default): sandboxd holds each call's code until its audit record. */
#define CODE_HELD_MESSAGES 16

#define DEFAULT_MAX_CONCURRENT 4
#define DEFAULT_MAX_QUEUE 64
#define DEFAULT_MAX_MESSAGE (4u << 20)
/* Characters of output a result's text holds (--text-limit): Claude Code shows a tool's output
 * up to about 25,000 tokens and writes longer results to a file the model must then read. */
#define DEFAULT_TEXT_LIMIT 40000
#define MIN_TEXT_LIMIT 1000
#define MAX_TEXT_LIMIT 10000000
#define DEFAULT_WARM 2
#define MAX_WARM 64
/* After a warm sandbox fails to start or dies idle, wait this long before the next one. */
#define WARM_RETRY_NS 1000000000ULL
/* Building a warm sandbox (Python's startup, ~15 ms of CPU) while a call runs would compete with
 * the call for the CPUs: the pool is topped up once no call runs, or this long after the latest
 * call started (a long call does not keep the pool empty). */
#define WARM_DEFER_NS 20000000ULL
/* How long delivering a job (mcp_job.c) may go without the runner reading any of it: it reads at
 * once (a cold one once Python has started); only a stuck one waits, and then the call fails. */
#define JOB_SEND_TIMEOUT_MS 1000
/* How long a call waits for a warm sandbox still being built before starting a cold one (setup
 * takes milliseconds; this only bounds a stuck one). */
#define PENDING_MAX_NS 2000000000ULL

/* --tools: which tools are offered. */
#define TOOL_RUN_PYTHON 1u
#define TOOL_EXECUTE_CODE 2u
#define TOOL_SESSIONS 4u /* session_start and session_end (with max_sessions above 0) */

/* Requests the server sends the client (mcp_server.c). */
#define MAX_REQUESTS 4
#define REQUEST_TIMEOUT_NS ROOTS_REQUEST_TIMEOUT_NS
/* Approvals asked at once (mcp_approval.c): one slot stays free for roots/list; the rest wait. */
#define MAX_APPROVAL_REQUESTS (MAX_REQUESTS - 1)
/* --approve-timeout: how long a host tool call waits for the user's answer (within its run's). */
#define DEFAULT_APPROVE_TIMEOUT_S 120
#define MAX_APPROVE_TIMEOUT_S 86400

/* Sessions (mcp_sessions.c): "sbx_" and 256 random bits in base64url. */
#define SESSION_ID_PREFIX "sbx_"
#define SESSION_ID_LEN (4 + 43)
/* After the interrupt (SIGINT) at a session call's time limit, how long the interpreter has to
 * come back before its sandbox is killed (and the session with it). */
#define SESSION_GRACE_NS 2000000000ULL
/* Ended sessions remembered, so that a later call says why (the oldest forgotten first). */
#define SESSION_TOMBS 256

/* ------------------------------------------------------------------ state */

/* A request of revision 2026-07-28 (mcp_modern.c): the level of the log notifications it asked
 * for (io.modelcontextprotocol/logLevel; MCP_LOG_LEVELS: none asked, none sent). */
struct mcp_modern_req {
  bool modern;
  int log_level;
  const json_node_t *caps; /* io.modelcontextprotocol/clientCapabilities, while it is dispatched */
};

/* A session (mcp_sessions.c): one sandbox, confined as a one-shot call's, whose interpreter
 * (inside/session.py) runs call after call in the same __main__. */
struct session {
  struct session *next;
  char id[SESSION_ID_LEN + 1];
  char hash[17];   /* the audit log's name for it: sha256 of the handle, cut */
  char owner[65];  /* over HTTP: the sha256 of the bearer token that made it, else "" */
  char client[48]; /* as audit records name the client */
  enum mcp_lang lang;
  struct sbx_sandbox *sb;
  int ctl_fd; /* our end of its control socket (fd 3 inside) */
  /* javascript: the read ends of its own stdout and stderr, each call's output (else -1: a Python
   * or bash call brings its own pipes) */
  int out_fd, err_fd;
  struct sbx_limits limits;
  uint64_t idle_s, max_life_s;
  uint64_t started_ns, used_ns; /* now_ns clock */
  int64_t started_wall;         /* seconds since the epoch */
  uint64_t calls;
  struct call *busy; /* the call running on it, or NULL */
};

/* An ended session: its handle, its owner, and what a later call is told. */
struct session_tomb {
  char id[SESSION_ID_LEN + 1];
  char owner[65];
  char *why;
};

enum request_kind { REQUEST_NONE, REQUEST_ROOTS_LIST, REQUEST_ELICIT };

struct request {
  enum request_kind kind; /* REQUEST_NONE: a free slot */
  char id[40];            /* canonical JSON */
  const char *method;
  uint64_t sent_ns;
  /* REQUEST_ELICIT: the approval it asks for, and the client it was sent to (only its answer
   * counts: over HTTP another session's would not). */
  struct approval *approval;
  uint64_t client;
};

/* A host tool call that waits for the user's approval (mcp_approval.c): asked of the call's
 * client with elicitation/create, once a request slot is free. */
struct approval {
  struct approval *next;
  struct call *call;
  uint64_t proxy_id; /* proxy_approval's */
  uint64_t asked_ns, deadline_ns;
  char *message;
  struct request *req; /* while sent; NULL while it waits for a slot */
  bool in_result;      /* 2026-07-28: asked in an InputRequiredResult (its call is detached) */
};

/* A warm sandbox: spawned exactly like a cold one (sandbox_spawn, the same spec), but with the
 * runner started without code: it imports what it needs and waits for one job on its bridge socket
 * (runner.py). Used by exactly one call, then destroyed like any other. */
struct warm {
  struct warm *next;
  struct sbx_sandbox *sb;
  enum mcp_lang lang; /* what it runs (--warm-lang) */
  bool ready;         /* setup finished (sandbox_spawn_finish); until then it is being built */
  int out_fd, err_fd; /* read ends of its stdout/stderr, adopted by the call */
  int job_fd;         /* our end of the socket at SBX_BRIDGE_FD inside, or of its stdin pipe */
  /* --warm-mode fork: the template it was forked from (a reference, fork_pool.c); else NULL */
  struct fork_pool_entry *fork_tmpl;
  struct fork_pending *fork_pending; /* while it is forked (not ready), else NULL */
  bool for_call;                     /* forked for a call (fork_call_start), not for the pool */
};

/* The job on its way to the runner (mcp_job.c): the frame's parts and how much is written. */
struct job {
  int fd; /* our end of the socket at fd 3 inside, until all is written; else -1 */
  unsigned char hdr[4];
  char *head; /* "bridge a,b\n" or "done\n" */
  size_t head_len;
  bool raw;         /* only the code, to a pipe at the interpreter's stdin (not python's runner) */
  const char *code; /* the call's own copy (struct call), not owned */
  size_t code_len;
  size_t sent, total;
  uint64_t deadline_ns;
};

enum call_state { CALL_QUEUED, CALL_RUNNING };

struct call {
  struct call *next;
  enum call_state state;
  char *id;             /* canonical JSON */
  char *progress_token; /* canonical JSON, or NULL */
  char *code;
  enum mcp_lang lang;  /* python for run_python; execute_code's `language` */
  uint64_t timeout_ms; /* requested, or UINT64_MAX */
  uint64_t queued_ns, next_progress_ns;
  unsigned progress;

  struct sbx_sandbox *sb;
  struct sbx_limits limits;
  int out_fd, err_fd; /* read ends, -1 once at EOF */
  struct capture cap; /* both streams: heads and tails within output_limit */
  bool killed;        /* sandbox_kill() sent (deadline or cancel) */
  bool cancelled;     /* the client cancelled: kill, and never answer */

  struct job job;         /* while the code is being written to fd 3 (job.fd >= 0) */
  char *job_error;        /* why the sandbox did not take its code (it is killed), or NULL */
  int done_fd;            /* without a bridge: the runner's done channel (runner.py), or -1 */
  struct warm *pending;   /* a warm sandbox still being built that this call waits for, or NULL */
  uint64_t pending_until; /* then it gives up on that sandbox and starts a cold one (a fork: once
                             more, a fork) */
  bool fork_retried;      /* --warm-mode fork: its sandbox failed once and was forked again */
  bool answered;          /* answered at the runner's done byte; reaped and audited when it has ended */
  struct sbx_result res;  /* what was answered, for the audit record */

  /* Files out (mcp_files.c). request_id: the audit record's, and the name of the call's directory
   * under --output-dir; saved_dir: that directory once made (the files, and stdout.txt/stderr.txt
   * when saved_stdout/saved_stderr: the whole captured output); collect: /workspace/out held files
   * at the done byte, so the call is answered (with res) once its sandbox has ended. */
  char request_id[33];
  struct artifacts arts;
  char *saved_dir;
  char *not_saved; /* why nothing was saved under --output-dir (its budget), or NULL */
  bool saved_stdout, saved_stderr;
  bool collect;

  struct server *srv;
  char **servers; /* host MCP servers the code may call (`servers`), or NULL */
  size_t n_servers;
  size_t code_len;
  struct proxy *proxy; /* the bridge: with servers, or for discovery (host_servers_discovery) */
  /* Over HTTP (mcp_http.c): whose call it is (its ids are that client's own; 0 over stdio), the
   * exchange its answer and notifications go to, and the client as audit records name it. */
  uint64_t client, route;
  char client_name[48];
  const char *protocol;      /* the client's protocol version when it called (static), or NULL */
  struct mcp_modern_req req; /* a 2026-07-28 request's log level (its caps not kept) */
  /* 2026-07-28 (mcp_approval.c): whether its request's clientCapabilities has elicitation (form);
   * the bearer token's sha256 ("": none); and, while an approval is asked in an InputRequiredResult,
   * the call is detached: its request answered, no id or route, until a retry brings `req_state`
   * back from the same token with the same tool and code (digest). */
  bool elicit_form;
  char owner[65];
  bool detached;
  char req_state[48];
  uint8_t digest[32];
  bool session; /* over HTTP: a session's call (not a stateless request's) */
  /* A call on a session (session_id): its sandbox is the session's (c->sb, not owned while
   * sess is set); interrupted: SIGINT sent at its time limit; sess_gone: the session ended
   * during the call, and why (the result says so). */
  struct session *sess;
  bool interrupted;
  char *sess_gone;
  char sess_hash[17]; /* the session's, for the audit record (kept if the session ends) */
  /* A session call's done status, answered once the loop is out of the handlers that read it
   * (the proxy's done hook, the done channel: calls_answer_sessions); -1: none yet. */
  int sess_status;
  struct fork_pool_entry *fork_tmpl; /* --warm-mode fork: the template its sandbox forked from */
  /* The task it serves (mcp_tasks.c), or NULL: its answer is kept there, not sent, and its
   * request is over for the client (its id may be used again). task_id: that task's, for the
   * audit record (kept when the task has gone). */
  struct task *task;
  char task_id[33];
};

#define DEFAULT_OUTPUT_MAX_SIZE (1ULL << 30)    /* --output-max-size */
#define DEFAULT_OUTPUT_MAX_AGE_S (7ULL * 86400) /* --output-max-age */

/* --output-dir's call directories (mcp_output_budget.c), oldest first. */
struct saved_call {
  char name[33];
  uint64_t bytes;
  int64_t when; /* made (or, found at start, last changed): seconds since the epoch */
};
struct output_budget {
  uint64_t max_bytes, max_age_s; /* --output-max-size, --output-max-age */
  struct saved_call *v;
  size_t n, cap;
  uint64_t bytes; /* of all in v */
};

struct server {
  struct sbx_policy *policy;
  struct policy_allow_opts allow_hosts; /* --allow-host */
  char *rootfs;
  /* Each language's rootfs (mcp_lang_rootfs; python's is rootfs), or NULL when absent. */
  char *lang_rootfs[MCP_LANG_COUNT];
  /* Each one's image config (its NAME.json): the Env goes under the policy's env of every sandbox
   * of that language, cold, warm or forked, as exec's does (base_spec). */
  struct image_config lang_image[MCP_LANG_COUNT];
  unsigned langs;      /* the languages present (MCP_LANG_BIT), execute_code's enum */
  unsigned tools;      /* --tools: TOOL_RUN_PYTHON, TOOL_EXECUTE_CODE */
  unsigned warm_langs; /* --warm-lang: the languages kept warm (--warm of each) */
  size_t max_concurrent, max_queue, max_message;
  size_t text_limit; /* --text-limit: characters of output in a result's text */

  struct call *calls; /* in arrival order */
  size_t n_running, n_queued;
  size_t code_bytes; /* of the calls' code, together (CODE_HELD_MESSAGES) */

  jsonrpc_framer_t framer;
  strbuf_t outq; /* replies not yet written to stdout */
  size_t outq_off;
  int stdout_flags; /* to restore, or -1 */
  int sigfd;
  bool stdin_eof, stop;
  /* Index into log_levels: send notifications/message at this level or above. Over stdio the
   * client's; over HTTP the level of a session that has not asked for one, and each session that
   * asked has its own (logging/setLevel applies to the session that sent it). */
  int log_level;
  struct client_level {
    uint64_t client; /* a session's client number */
    int level;
  } * client_levels;
  size_t n_client_levels;

  struct mcp_config_options mcp_opts;
  struct host_servers hs; /* host MCP servers (hs.cfg empty if none are configured) */
  const char *audit_log;
  const char *protocol; /* negotiated in initialize (static), or NULL before it */
  int output_dirfd;     /* --output-dir, held from the start; else -1 */
  int devnull;          /* /dev/null, held from the start: the runner's stdin */
  char *output_dir;     /* its absolute path */
  struct output_budget output_budget;

  size_t warm_target; /* --warm */
  struct warm *warm;  /* idle, oldest first */
  size_t n_warm;
  uint64_t warm_retry_ns; /* no new warm sandbox before this */
  uint64_t last_call_ns;  /* when the latest call started (WARM_DEFER_NS) */
  /* --warm-mode: what was asked (auto, the default: fork unless root); warm_fork: what runs,
   * Python calls forked from a template (fork_pool.c) instead of the pool; retired templates
   * wait there for their last call. */
  enum warm_mode { WARM_AUTO, WARM_PRESTART, WARM_FORK } warm_mode;
  bool warm_fork;
  /* --preload (else the rootfs's label org.sandboxd.preload): the modules each fork template
   * imports before any call, "a,b.c" (NULL or "": none). */
  char *preload;
  bool preload_set; /* given on the command line */
  struct fork_pool_entry *fork_tmpl, *fork_next, *fork_retired;
  /* A template died: the pool drops what was forked from it (warm_pool_drop_forked, given at
   * fork_pool_init). */
  void (*fork_template_died)(struct server *srv, const struct fork_pool_entry *e);

  struct bind_opts binds; /* --bind, --bind-rw */
  struct mcp_roots roots; /* --roots: the client's */
  /* What every sandbox gets (mcp_binds_rebuild): the `mcp` package, the binds, the roots. */
  struct sbx_bind spec_binds[SBX_MAX_BINDS];
  size_t n_spec_binds;
  uint64_t next_request_id; /* our requests to the client (mcp_server.c) */
  struct request requests[MAX_REQUESTS];
  /* Approval of host tool calls (mcp_approval.c): the level (the policy's, or --approve's
   * higher), --approve-timeout, the calls waiting, and what each client declared in initialize
   * (over HTTP per session; over stdio the one client, 0). */
  enum sbx_approve approve;
  bool approve_set;
  uint64_t approve_timeout_s;
  struct approval *approvals; /* oldest first */
  struct client_caps {
    uint64_t client;
    bool elicit_form; /* elicitation in form mode */
  } * client_caps;
  size_t n_client_caps;

  /* Sessions (mcp_sessions.c): live ones, the ended ones remembered (a ring), and the bounds
   * (the policy's, or the tighter --session-idle, --session-max-life, --max-sessions). */
  struct session *sessions;
  size_t n_sessions;
  struct session_tomb tombs[SESSION_TOMBS];
  size_t tomb_next;
  uint64_t session_idle_s, session_max_life_s;
  uint64_t max_sessions, max_sessions_per_token;
  /* Over HTTP with --token-file: the sha256 of the bearer token of the message being dispatched
   * (a session's owner: by the token itself, so a reordered token file keeps each session with
   * its token); else NULL. */
  const char *owner;

  /* --http (mcp_http.c), or NULL for stdio. While it dispatches a message, and while a call
   * sends: the client (call ids are per client), the exchange that takes what is sent, and the
   * client's name for audit records. */
  struct mcp_http *http;
  uint64_t client, route;
  bool client_session; /* client is a session's (stateful), not a single request's */
  const char *client_name;
  int principal; /* the bearer token's index (-1: no tokens; 0 over stdio) */
  /* --ring-file: nginx's consistent-hash ring this replica is in; handles are minted to route
   * here (route_ring_mine). Empty (no points) without it. */
  struct route_ring ring;
  /* While the HTTP transport dispatches a request: its headers (name matched without case), for
   * revision 2026-07-28's checks (mcp_modern.c); NULL over stdio. */
  const char *(*req_header)(void *ctx, const char *name);
  void *req_ctx;
  struct mcp_modern_req req; /* the request being dispatched, when it is of 2026-07-28 */

  /* Calls run as tasks (mcp_tasks.c), oldest first, and the last creation number given. */
  struct task *tasks;
  /* What the task store (mcp_tasks.c) tells the layers above it, given at start (cli_mcp.c):
   * a task's status changed (2025-11-25's notification), it ended or went (its waiting
   * tasks/result answered), its call is to be killed (call_cancel). It calls none by name. */
  struct tasks_handlers {
    void (*status)(struct server *srv, const struct task *t);
    void (*ended)(struct server *srv, struct task *t, const char *gone_msg);
    void (*cancel_call)(struct server *srv, struct call *c);
  } tasks_on;
  uint64_t task_seq;
};

struct pollfd;
struct proxy;
struct sbx_policy;
struct mcp_hosts;

/* mcp_output.c: the output queue (the only writer of stdout), and what is sent through it. */
void flush_output(struct server *srv);
/* The same, waiting up to timeout_ms for a slow reader (at exit). */
void flush_output_for(struct server *srv, int timeout_ms);
/* Queue one finished message (and free the writer). */
void send_writer(struct server *srv, json_writer_t *w);
void send_error(struct server *srv, const char *id, int code, const char *message);
void send_errorf(struct server *srv, const char *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A result that is an empty object ({}, with 2026-07-28's fields). */
void send_empty_result(struct server *srv, const char *id);
/* A tool result of one text block (no structuredContent), isError as given. */
void send_text_result(struct server *srv, const char *id, bool is_error, const char *text);
/* A tool result that is only an error message (bad arguments, setup failure). */
void send_tool_error(struct server *srv, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, as a message not yet sent (NULL: out of memory). */
json_writer_t *tool_error_writer(const struct server *srv, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* notifications/message at level (an index into mcp_log_levels), to srv->route, if srv->client
 * (over HTTP; the one client over stdio) asked for that level. */
void mcp_log(struct server *srv, int level, const char *msg);
/* The level srv->client asked for (logging/setLevel), or the server's. */
int mcp_log_level(const struct server *srv);
/* logging/setLevel from srv->client. 0, or -1 with errno ENOMEM. */
int mcp_log_level_set(struct server *srv, int level);
/* A session ended: forget its level. */
void mcp_log_level_forget(struct server *srv, uint64_t client);
#define MCP_LOG_LEVELS 8
extern const char *const mcp_log_levels[MCP_LOG_LEVELS]; /* debug ... emergency */

/* mcp_modern.c: revision 2026-07-28 beside the initialize-based ones. */
#define MCP_MODERN_VERSION "2026-07-28"
/* basic/index, "Error Codes": the codes the spec reserves (-32020 to -32099). */
#define MCP_HEADER_MISMATCH (-32020)
#define MCP_MISSING_CAPABILITY (-32021)
#define MCP_UNSUPPORTED_VERSION (-32022)
static inline bool mcp_is_modern(const char *protocol)
{
  return protocol && strcmp(protocol, MCP_MODERN_VERSION) == 0;
}
/* Whether m is a request of revision 2026-07-28: header_version (HTTP's MCP-Protocol-Version, or
 * NULL) names it, or its _meta carries a protocolVersion that is not an initialize-based one, or
 * it is server/discover (which exists only there). Pure. */
bool mcp_request_is_modern(const struct jsonrpc_message *m, const char *header_version);
/* A request checked for its era: 0 legacy (*req zeroed), 1 modern (*req filled), -1 refused (the
 * error is sent: -32602, -32020 or -32022; over HTTP with status 400). */
int mcp_modern_request(struct server *srv, const struct jsonrpc_message *m, struct mcp_modern_req *req);
/* A legacy request whose MCP-Protocol-Version header names no version served: answered -32022
 * (true), else false. */
bool mcp_version_refused(struct server *srv, const struct jsonrpc_message *m);
/* -32601, over HTTP with status 404 (transports/streamable-http, "Protocol Version Header"). */
void mcp_method_not_found(struct server *srv, const char *id, const char *method);
/* mcp_output.c: before a result object's closing brace: under MCP_MODERN_VERSION, resultType and the server's
 * identity in _meta, and with ttl_ms >= 0 the caching hints (server/utilities/caching). Nothing
 * under older versions. */
void mcp_result_fields(const char *protocol, json_writer_t *w, int64_t ttl_ms);
/* The same with another resultType ("task": SEP-2663's CreateTaskResult). */
void mcp_result_fields_typed(const char *protocol, json_writer_t *w, int64_t ttl_ms, const char *result_type);
/* MissingRequiredClientCapability (-32021, over HTTP with status 400) naming the extension the
 * request lacks in its clientCapabilities. */
void mcp_missing_extension(struct server *srv, const char *id, const char *extension);

/* mcp_resources.c: the resources methods (sandboxd://capabilities). */
void m_resources_list(struct server *srv, const char *id, const json_node_t *params);
void m_resources_templates_list(struct server *srv, const char *id, const json_node_t *params);
void m_resources_read(struct server *srv, const char *id, const json_node_t *params);
/* How long a client may keep the lists and server/discover (2026-07-28's ttlMs): they change only
 * with the server's configuration (roots, which change the tools, are not used under 2026-07-28). */
#define LIST_TTL_MS 300000

/* mcp_server.c: the methods and the loop. */
void serve(struct server *srv);
/* One parsed message, as if read from stdin (the HTTP transport's entry). */
void mcp_dispatch(struct server *srv, const struct jsonrpc_message *m);
/* Cancel every call of client (its session ended), or every call routed to route (its HTTP
 * exchange ended) when route is not 0: killed, never answered. */
void mcp_cancel_calls(struct server *srv, uint64_t client, uint64_t route);

/* mcp_requests.c: a free request slot with a new id ("sandboxd-N"; its text, unquoted, in id), sent
 * to nobody yet; NULL when MAX_REQUESTS are in flight. */
struct request *request_new(struct server *srv, enum request_kind kind, const char *method, char *id,
                            size_t id_size);
/* Forget the roots/list requests unanswered for REQUEST_TIMEOUT_NS. */
void requests_expire(struct server *srv, uint64_t now);

/* mcp_approval.c: approval of host tool calls (sandboxd-mcp(7), THE PROXY, "Approval"). */
/* The proxy's approval hook (proxy_on_approval); ctx is the call. */
void approval_ask(void *ctx, uint64_t approval, const char *server, const char *tool, const char *args);
/* The client's answer to r (an elicitation/create), from m. */
void approval_answered(struct server *srv, struct request *r, const struct jsonrpc_message *m);
/* Deadlines, and asking those that wait for a slot; the poll timeout until the next deadline. */
int approval_timers(struct server *srv);
/* The call ends: its approvals are forgotten (an answer after this is ignored). */
void approval_forget_call(struct server *srv, struct call *c);
/* 2026-07-28: a tools/call carrying requestState, the retry of one answered with an
 * InputRequiredResult (basic/patterns/mrtr): the call it names takes this request (digest: the
 * language and code, as approval_digest), and the approval its inputResponses answer is decided. */
void approval_retry(struct server *srv, const char *id, const json_node_t *params, const uint8_t digest[32]);
void approval_digest(const struct mcp_tool_args *args, uint8_t out[32]);
/* The tasks extension (2026-07-28): the question c's task holds, as tasks/get's inputRequests
 * written to w (false: none), and tasks/update's inputResponses deciding it (any other key, or
 * none asked, ignored). */
bool approval_task_question(const struct server *srv, const struct call *c, json_writer_t *w);
void approval_task_answer(struct server *srv, struct call *c, const json_node_t *responses);
/* initialize from srv->client: what it declared (elicitation). */
void approval_client_init(struct server *srv, const json_node_t *capabilities);
/* A session ended: forget what its client declared. */
void approval_forget_client(struct server *srv, uint64_t client);

/* mcp_calls.c */
void call_free(struct call *c);
void call_unlink(struct server *srv, struct call *c);
/* The client cancelled c (or its task): killed, never answered; a queued one is gone at once. */
void call_cancel(struct server *srv, struct call *c);
struct call *call_find(struct server *srv, const char *id);
/* Read what is in one pipe; keep it while the call is under its output limit. 1 at EOF. */
int drain_pipe(struct call *c, int *fd, enum capture_stream_id id);
/* The sandbox has ended: collect the rest of its output, reap it, answer. */
void call_finish(struct server *srv, struct call *c);
/* Give the call a warm sandbox. On failure the warm sandbox is gone and the call gets a cold one. */
int call_start_warm(struct call *c, struct warm *w, sbx_error_t *err);
/* The runner's done byte is readable. */
void call_done(struct server *srv, struct call *c);
/* mcp_job.c: hand the call's sandbox (kind: "warm", "cold", "session", for the debug log) its
 * code on fd (our end of fd 3 inside, taken): what fits now, the rest from the loop
 * (call_job_ready). -1 if fd takes nothing (the sandbox is gone). */
int call_deliver(struct call *c, int fd, const char *kind, sbx_error_t *err);
/* mcp_job.c: the job's socket is writable (or its deadline passed: timed_out). */
void call_job_ready(struct server *srv, struct call *c, bool timed_out);
/* The warm sandbox a call waited for is built, or failed, or took too long (give_up). */
void call_pending_ready(struct server *srv, struct call *c, bool give_up);
/* A new call at the end of the queue (args checked, mcp_tool.c), in sess's sandbox if sess. NULL:
 * out of memory. */
struct call *call_enqueue(struct server *srv, const char *id, const struct mcp_tool_args *a,
                          const json_node_t *progress_token, struct session *sess);
/* Start queued calls while there is room. */
void start_queued(struct server *srv);
/* Kill at deadlines, tick progress; returns the poll timeout until the next such event. */
int run_timers(struct server *srv);
/* Answer the session calls whose done status came (call_answer_done): out of every handler, as
 * answering frees the call, its pipes and its proxy. */
void calls_answer_sessions(struct server *srv);
/* Whether some call is running or about to (answered calls only wait to be reaped). */
bool code_running(const struct server *srv);
/* mcp_sessions.c: sessions (sandboxd-mcp(7), SESSIONS). */
void session_tool_start(struct server *srv, const char *id, const json_node_t *args);
void session_tool_end(struct server *srv, const char *id, const json_node_t *args);
/* The session a call names, checked: its owner, alive, the language, not busy. NULL with what the
 * model is told in msg. */
struct session *session_for_call(struct server *srv, const char *sid, enum mcp_lang lang, char *msg,
                                 size_t msg_len);
/* Hand the call to its session's interpreter: the call's pipes and job socket (SCM_RIGHTS), or,
 * javascript, the job on the session's control socket and its own pipes for the output. */
int session_call_start(struct server *srv, struct call *c, sbx_error_t *err);
/* The session call's output: what is in its pipes at its done byte, and no more. */
void session_call_output(struct call *c);
/* The call was answered and its interpreter is waiting for the next. */
void session_call_over(struct server *srv, struct call *c);
/* The session's sandbox ended during the call (reaped, res): the session is over, the call owns
 * the sandbox now and c->sess_gone says why. */
void session_call_lost(struct server *srv, struct call *c, const struct sbx_result *res);
/* Idle and maximum life: sessions expired; the poll timeout until the next. */
int session_timers(struct server *srv);
/* The pidfds of the idle sessions (a death between calls is seen at once). */
size_t session_pollfds(struct server *srv, struct pollfd *pfds);
void session_dispatch(struct server *srv, const struct pollfd *pfds, size_t n);
/* At exit: every session killed, reaped and recorded. */
void sessions_clear(struct server *srv);
/* The tools' entries in tools/list. */
void session_tools_write(struct server *srv, json_writer_t *w, bool icons);

/* mcp_spec.c: each sandbox's spec and channels. */
/* A sandbox's channels: its stdout and stderr pipes and where it takes its code (python's runner
 * a socket at fd 3, another language a pipe at stdin; job, ours, never blocks). The write ends and
 * `inside` go to the sandbox (base_spec, fork_pending_begin), ours are out_r, err_r and job
 * (TAKE_FD them); what is left is closed when it goes out of scope. */
struct sandbox_fds {
  int out_r, out_w, err_r, err_w, job, inside;
};
void sandbox_fds_close(struct sandbox_fds *f);
#define _cleanup_sandbox_fds_ __attribute__((cleanup(sandbox_fds_close)))
#define SANDBOX_FDS_INIT ((struct sandbox_fds){-1, -1, -1, -1, -1, -1})
int sandbox_fds_open(enum mcp_lang lang, struct sandbox_fds *f, sbx_error_t *err);
/* The spec every sandbox of this server gets for lang, cold or warm; inside: sandbox_fds's. */
void base_spec(struct server *srv, enum mcp_lang lang, const struct sbx_limits *limits, int inside, int out_w,
               int err_w, struct sbx_spec *spec);

/* mcp_files.c: --output-dir (opened once, at setup), and a call's files. */
struct hostfile_guard;
int output_dir_open(const char *path, const struct hostfile_guard *guard, int *ret_fd, char **ret_path,
                    sbx_error_t *err);
/* Save the output under --output-dir, and, when ended (every process of the sandbox is gone: pid 1
 * reaped), what /workspace/out holds; never out of a sandbox that may still run. */
void call_collect_files(struct server *srv, struct call *c, bool ended);
/* mcp_output_budget.c: the call directories already in --output-dir, counted (and the expired or
 * those beyond the size budget removed, oldest first) at start. */
int output_budget_start(struct server *srv, sbx_error_t *err);
/* Room for need more bytes: expired directories, then the oldest, removed. -1: need alone is
 * more than the budget (nothing is removed for it). */
int output_budget_reserve(struct server *srv, uint64_t need);
void output_budget_add(struct server *srv, const char *name, uint64_t bytes);
void output_budget_free(struct output_budget *b);
/* The result's content blocks for them (after the text block). */
void call_write_file_blocks(struct server *srv, struct call *c, json_writer_t *w);

/* mcp_job.c: the job frame (fd is taken, even on failure). job_write: 1 once all is written, 0
 * when the socket is full (wait for POLLOUT), -1 on error. */
int job_begin(struct job *j, int fd, const char *servers, const char *code, size_t code_len,
              sbx_error_t *err);
/* Only the code, to a pipe at an interpreter's stdin, closed once written (its EOF). */
void job_begin_raw(struct job *j, int fd, const char *code, size_t code_len);
int job_write(struct job *j, sbx_error_t *err);
void job_free(struct job *j);

/* warm_pool.c */
void warm_free(struct warm *w);
void warm_unlink(struct server *srv, struct warm *w);
void warm_drop(struct server *srv, struct warm *w); /* warm_free, and let go of its fork template */
/* Top the pool up by one if it is short and it is time (later while code runs: code_running);
 * lowers *timeout to when it will be. */
void warm_pool_top_up(struct server *srv, bool code_running, int *timeout);
/* The pool's poll entries, then what they say (the pool unchanged in between). */
size_t warm_pool_pollfds(struct server *srv, struct pollfd *pfds);
void warm_pool_dispatch(struct server *srv, const struct pollfd *pfds, size_t n);
/* Kill and reap every idle warm sandbox. */
void warm_pool_clear(struct server *srv);
/* Kill and reap the idle ones forked from e's template (it died). */
void warm_pool_drop_forked(struct server *srv, const struct fork_pool_entry *e);

#endif
