/* SPDX-License-Identifier: Apache-2.0 */
#include "hostmcp/proxy.h"
#include "policy/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/jsonrpc.h"
#include "base/slist.h"
#include "base/util.h"
#include "hostmcp/bridge.h"

#define PROXY_READ_CHUNK 65536
/* How much of a frame is checked as it arrives (syntax, PROXY_MAX_VALUES), before it is whole: a
 * frame of `[0,0,...]` or of junk is refused there and skipped, never held whole. The rest is
 * parsed once, whole. yajl reads a token split between pieces again from its start at each
 * piece, so it is fed pieces of at least PROXY_CHECK_STEP (code that sends a long string a byte
 * at a time costs at most PREFIX / STEP readings of the prefix, not one per byte). */
#define PROXY_CHECK_PREFIX (256u << 10)
#define PROXY_CHECK_STEP (16u << 10)
/* The most of a string (or key, or number) a request's tree holds (json_parse_cut): more than
 * any name or id the proxy compares or bounds (MCP_CONFIG_MAX_NAME, PROXY_MAX_ID,
 * PROXY_MAX_TOOL_NAME), so a cut one never matches and is still too long. A large payload is
 * thus checked but never copied into the tree: its arguments go on from the frame. */
#define PROXY_TREE_STRING 4096

enum outcome { OUT_PENDING, OUT_OK, OUT_TOOL_ERROR, OUT_ERROR, OUT_DENIED, OUT_TIMEOUT, OUT_CANCELLED };
static const char *const outcome_names[] = {"pending", "ok",      "tool_error", "error",
                                            "denied",  "timeout", "cancelled"};

/* Whether the user was asked (approve_host_calls), and what came of it: PROXY_APPROVAL_NONE
 * (not asked: absent from the record), or while it waits PROXY_APPROVAL_PENDING, then the verdict. */
#define PROXY_APPROVAL_NONE (-1)
#define PROXY_APPROVAL_PENDING (-2)
static const char *const approval_names[] = {"approved", "denied", "cancelled", "timeout", "unavailable"};

/* One request from inside that waits for a host server (op), or, before its tools/call goes out,
 * for that server's tool list (listing: is the tool read-only?) or for the user (approval). */
struct pcall {
  struct pcall *next;
  struct proxy *p;
  char *id; /* canonical JSON */
  uint64_t op;
  size_t record; /* index into records, or SIZE_MAX for lists */
  size_t charge; /* its share of inflight_bytes */
  char *server, *tool;
  bool listing, progress;
  uint64_t approval; /* the id the owner answers (proxy_approval) while it waits, else 0 */
  char *args;        /* the call's arguments while it waits (NULL: {}) */
};

struct record {
  char *server, *tool;
  uint64_t start_ns, duration_ms;
  enum outcome outcome;
  int approval; /* enum proxy_verdict, or PROXY_APPROVAL_NONE / _PENDING */
};

struct proxy {
  struct mcp_hosts *hosts;
  const struct sbx_policy *policy; /* proxy_servers, or NULL: every configured server */
  char **servers;
  size_t n_servers;
  strbuf_t env; /* SANDBOXD_MCP_SERVERS=a,b: sized from the names */
  uint32_t max_frame;
  uint64_t call_timeout_ms;
  size_t max_calls;
  int fd;
  struct bridge_reader reader;
  json_check_t *check; /* of the frame arriving, up to PROXY_CHECK_PREFIX bytes */
  size_t checked;
  strbuf_t outq;
  size_t outq_off;
  struct pcall *inflight;
  size_t n_inflight, inflight_bytes;
  size_t bytes_read;
  struct record *records;
  size_t n_records;
  void (*progress_fn)(void *ctx, const char *server, const char *tool, const json_node_t *params);
  void *progress_ctx;
  void (*done_fn)(void *ctx, int status);
  void *done_ctx;
  enum sbx_approve approve; /* the policy's approve_host_calls, or what the owner raised it to */
  proxy_approval_fn approval_fn;
  void *approval_ctx;
  uint64_t next_approval;
};

/* ------------------------------------------------------------------ output */

static void flush_out(struct proxy *p)
{
  while (p->fd >= 0 && p->outq_off < p->outq.len) {
    ssize_t n =
        send(p->fd, p->outq.data + p->outq_off, p->outq.len - p->outq_off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n < 0) {
      /* The code closed its end: nobody is listening any more. */
      p->outq_off = p->outq.len;
      break;
    }
    p->outq_off += (size_t) n;
  }
  p->outq.len = p->outq_off = 0;
}

/* Frame one document (the writer is freed). A document above the frame limit becomes an error
 * for `id` instead, so the code always gets an answer. */
static void send_frame(struct proxy *p, json_writer_t *w, const char *id);

static void reply_error(struct proxy *p, const char *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_error(struct proxy *p, const char *id, int code, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  jsonrpc_write_error(w, id, code, msg);
  send_frame(p, w, NULL);
}

/* Queue one frame made of the n pieces (a document); false (nothing queued) if it is above the
 * frame limit or the queue's. An answer for `id` that does not fit becomes an error for it. */
static bool queue_frame(struct proxy *p, const char *const *piece, const size_t *len, size_t n,
                        const char *id)
{
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += len[i];
  unsigned char hdr[4];
  sbx_error_t err;
  if (bridge_header(total, p->max_frame, hdr, &err) < 0) {
    if (id)
      reply_error(p, id, MCP_ERR_TOO_LARGE, "the answer is %zu bytes, above the bridge's limit of %u bytes",
                  total, p->max_frame);
    return false;
  }
  if (p->outq.len - p->outq_off + total > PROXY_MAX_OUTQ) {
    if (id)
      reply_error(p, id, MCP_ERR_TOO_LARGE, "the code has not read %zu bytes of earlier answers",
                  p->outq.len - p->outq_off);
    return false;
  }
  size_t before = p->outq.len;
  bool ok = strbuf_append(&p->outq, (const char *) hdr, 4) == 0;
  for (size_t i = 0; ok && i < n; i++)
    ok = strbuf_append(&p->outq, piece[i], len[i]) == 0;
  if (!ok) /* out of memory: no half frame */
    p->outq.len = before;
  return ok;
}

static void send_frame(struct proxy *p, json_writer_t *w, const char *id)
{
  size_t n;
  const char *buf = w ? json_writer_buf(w, &n) : NULL;
  if (!buf) {
    json_writer_free(w);
    if (id)
      reply_error(p, id, JSONRPC_INTERNAL_ERROR, "sandboxd: out of memory");
    return;
  }
  bool queued = queue_frame(p, &buf, &n, 1, id);
  json_writer_free(w);
  if (queued)
    flush_out(p);
}

/* ------------------------------------------------------------------ records */

/* A name as the record keeps it: at most PROXY_RECORD_NAME bytes, cut at a character boundary and
 * marked, so a name the code made up cannot make the audit line (or sandboxd) large. */
static char *record_name(const char *s)
{
  size_t n = strnlen(s, PROXY_RECORD_NAME + 1);
  if (n <= PROXY_RECORD_NAME)
    return strndup(s, n);
  n = PROXY_RECORD_NAME - 3;
  while (n > 0 && ((unsigned char) s[n] & 0xc0) == 0x80)
    n--;
  char *r = malloc(n + 4);
  if (r) {
    memcpy(r, s, n);
    memcpy(r + n, "...", 4);
  }
  return r;
}

static size_t record_start(struct proxy *p, const char *server, const char *tool)
{
  struct record *r = realloc(p->records, (p->n_records + 1) * sizeof *r);
  if (!r)
    return SIZE_MAX;
  p->records = r;
  r[p->n_records] = (struct record){.server = record_name(server),
                                    .tool = record_name(tool),
                                    .start_ns = now_ns(),
                                    .approval = PROXY_APPROVAL_NONE};
  return p->n_records++;
}

static void record_end(struct proxy *p, size_t i, enum outcome o)
{
  if (i >= p->n_records)
    return;
  p->records[i].outcome = o;
  p->records[i].duration_ms = (now_ns() - p->records[i].start_ns) / 1000000ULL;
}

char *proxy_calls_json(const struct proxy *p)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return NULL;
  json_arr_begin(w);
  for (size_t i = 0; i < p->n_records; i++) {
    const struct record *r = &p->records[i];
    json_obj_begin(w);
    json_kv_str(w, "server", r->server ? r->server : "");
    json_kv_str(w, "tool", r->tool ? r->tool : "");
    json_kv_uint(w, "duration_ms",
                 r->outcome == OUT_PENDING ? (now_ns() - r->start_ns) / 1000000ULL : r->duration_ms);
    json_kv_str(w, "outcome", outcome_names[r->outcome == OUT_PENDING ? OUT_CANCELLED : r->outcome]);
    if (r->approval != PROXY_APPROVAL_NONE) /* a run that ended while the user was asked: cancelled */
      json_kv_str(w, "approval",
                  approval_names[r->approval == PROXY_APPROVAL_PENDING ? PROXY_CANCELLED : r->approval]);
    json_obj_end(w);
  }
  json_arr_end(w);
  size_t n;
  const char *buf = json_writer_buf(w, &n);
  char *out = buf ? strndup(buf, n) : NULL;
  json_writer_free(w);
  return out;
}

/* ------------------------------------------------------------------ host answers */

static void pcall_free(struct pcall *c)
{
  if (!c)
    return;
  free(c->id);
  free(c->server);
  free(c->tool);
  free(c->args);
  free(c);
}

static void pcall_unlink(struct proxy *p, struct pcall *c)
{
  if (slist_unlink(&p->inflight, c)) {
    p->n_inflight--;
    p->inflight_bytes -= c->charge;
  }
}

static void call_decide(struct proxy *p, struct pcall *c, const char *tools, size_t len);

static void on_done(void *ctx, const char *json, size_t len, int code, const char *message)
{
  struct pcall *c = ctx;
  struct proxy *p = c->p;
  if (c->listing) { /* the server's tools: now the call itself, asked for or not */
    c->listing = false;
    c->op = 0;
    call_decide(p, c, json, len);
    return;
  }
  pcall_unlink(p, c);
  if (!json) {
    record_end(p, c->record, code == MCP_ERR_TIMEOUT ? OUT_TIMEOUT : OUT_ERROR);
    reply_error(p, c->id, code, "%s", message);
    pcall_free(c);
    return;
  }
  if (c->record != SIZE_MAX) /* a tool's own failure (isError): recorded as such, passed on as it is */
    record_end(p, c->record, code == MCP_RESULT_IS_ERROR ? OUT_TOOL_ERROR : OUT_OK);
  /* {"jsonrpc":"2.0","id":ID,"result":R} (R in {"tools":...} for a list), put together in the
   * queue: json (valid JSON from the host client) and the id (canonical) are copied once. */
  bool list = c->record == SIZE_MAX;
  const char *piece[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":", c->id, ",\"result\":", "{\"tools\":", json, "}", "}"};
  size_t plen[] = {22, strlen(c->id), 10, list ? 9 : 0, len, list ? 1 : 0, 1};
  if (queue_frame(p, piece, plen, ARRAY_SIZE(piece), c->id))
    flush_out(p);
  pcall_free(c);
}

static void on_progress(void *ctx, const json_node_t *params)
{
  struct pcall *c = ctx;
  struct proxy *p = c->p;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_kv_str(w, "method", "notifications/progress");
  json_key(w, "params");
  json_obj_begin(w);
  json_kv_raw(w, "id", c->id, strlen(c->id));
  static const char *const keys[] = {"progress", "total", "message"};
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    const json_node_t *v = json_get(params, keys[i]);
    if (v) {
      json_key(w, keys[i]);
      json_write_node(w, v);
    }
  }
  json_obj_end(w);
  json_obj_end(w);
  send_frame(p, w, NULL);
  if (p->progress_fn)
    p->progress_fn(p->progress_ctx, c->server, c->tool, params);
}

/* ------------------------------------------------------------------ requests */

static bool allowed(const struct proxy *p, const char *server)
{
  for (size_t i = 0; i < p->n_servers; i++)
    if (strcmp(p->servers[i], server) == 0)
      return true;
  return false;
}

/* Discovery (servers/list, tools/list) covers every configured server the policy allows, listed
 * in `servers` or not: learning a server's tools may start it, calling one needs `allowed`. */
static bool discoverable(const struct proxy *p, const char *server)
{
  return mcp_config_find(mcp_hosts_config(p->hosts), server) &&
         (!p->policy || policy_allows_server(p->policy, server));
}

static void list_servers(struct proxy *p, const char *id)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  const struct mcp_config *cfg = mcp_hosts_config(p->hosts);
  jsonrpc_begin_result(w, id);
  json_obj_begin(w);
  json_key(w, "servers");
  json_arr_begin(w);
  /* In config order, which is the order of ties in the package's search_tool_docs. */
  for (size_t i = 0; i < cfg->n; i++) {
    const struct mcp_server_config *s = &cfg->servers[i];
    if (!discoverable(p, s->name))
      continue;
    json_obj_begin(w);
    json_kv_str(w, "name", s->name);
    json_kv_str(w, "description", s->description ? s->description : "");
    json_kv_bool(w, "callable", allowed(p, s->name));
    json_obj_end(w);
  }
  json_arr_end(w);
  json_obj_end(w);
  jsonrpc_end(w);
  send_frame(p, w, id);
}

/* The arguments of a tools/call (an object) for the host client, which takes them: as the code
 * wrote them, without white space (one line for the server), moved to the front of *frame, which
 * becomes theirs. Where they cannot be found as written (a key written with escapes before them),
 * they are written again from a whole tree of the frame (*root holds cut strings). Either way
 * sandboxd holds at most two copies of a request at once; *root is freed. */
static char *take_arguments(char **frame, size_t frame_len, json_node_t **root)
{
  json_free(*root);
  *root = NULL;
  size_t poff, plen, aoff, alen;
  if (json_member_span(*frame, frame_len, "params", &poff, &plen) == 0 &&
      json_member_span(*frame + poff, plen, "arguments", &aoff, &alen) == 0 && (*frame)[poff + aoff] == '{') {
    char *a = TAKE_PTR(*frame);
    memmove(a, a + poff + aoff, alen);
    a[json_minify(a, alen)] = '\0';
    return a;
  }
  json_node_t *whole = NULL;
  sbx_error_t err;
  int parsed = json_parse_bounded(*frame, frame_len, PROXY_MAX_VALUES, &whole, &err);
  free(TAKE_PTR(*frame));
  if (parsed < 0)
    return NULL;
  json_writer_t *w = json_writer_new();
  size_t len = 0;
  const char *buf = NULL;
  if (w) {
    json_write_node(w, json_get(json_get(whole, "params"), "arguments"));
    buf = json_writer_buf(w, &len);
  }
  json_free(whole);
  char *a = buf ? strndup(buf, len) : NULL;
  json_writer_free(w);
  return a;
}

/* Send c on to its host server: its tools/call (its arguments taken), or a list of tools. On
 * failure it is answered and gone. */
static void pcall_send(struct proxy *p, struct pcall *c)
{
  bool call = c->record != SIZE_MAX && !c->listing;
  struct mcp_op_cb cb = {.done = on_done, .progress = call && c->progress ? on_progress : NULL, .ctx = c};
  sbx_error_t err = {0};
  c->op = call ? mcp_hosts_call_tool(p->hosts, c->server, c->tool, TAKE_PTR(c->args), p->call_timeout_ms, &cb,
                                     &err)
               : mcp_hosts_list_tools(p->hosts, c->server, p->call_timeout_ms, &cb, &err);
  if (!c->op) {
    pcall_unlink(p, c);
    record_end(p, c->record, OUT_ERROR);
    reply_error(p, c->id, JSONRPC_INVALID_PARAMS, "%s", err.msg);
    pcall_free(c);
  }
}

/* At most this much of a call's arguments goes into what the user is asked. */
#define PROXY_APPROVAL_EXCERPT 300

/* A tools/call about to go: on to its server, or first to the user (proxy_on_approval). tools:
 * the server's list, under approve_host_calls writes. */
static void call_decide(struct proxy *p, struct pcall *c, const char *tools, size_t len)
{
  bool ask = p->approve == SBX_APPROVE_ALL ||
             (p->approve == SBX_APPROVE_WRITES && !mcp_tools_read_only(tools, len, c->tool));
  if (!ask) {
    pcall_send(p, c);
    return;
  }
  if (c->record < p->n_records)
    p->records[c->record].approval = PROXY_APPROVAL_PENDING;
  c->approval = ++p->next_approval;
  if (!p->approval_fn) {
    proxy_approval(p, c->approval, PROXY_UNAVAILABLE, "this run has no MCP client to ask");
    return;
  }
  const char *a = c->args ? c->args : "{}";
  char excerpt[PROXY_APPROVAL_EXCERPT + 4];
  size_t n = strnlen(a, PROXY_APPROVAL_EXCERPT + 1);
  if (n > PROXY_APPROVAL_EXCERPT) { /* cut at a character boundary, and marked */
    n = PROXY_APPROVAL_EXCERPT;
    while (n > 0 && ((unsigned char) a[n] & 0xc0) == 0x80)
      n--;
  }
  memcpy(excerpt, a, n);
  memcpy(excerpt + n, a[n] ? "..." : "", a[n] ? 4 : 1);
  /* It may answer at once (proxy_approval), and c may then be gone. */
  p->approval_fn(p->approval_ctx, c->approval, c->server, c->tool, excerpt);
}

void proxy_approval(struct proxy *p, uint64_t approval, enum proxy_verdict v, const char *detail)
{
  struct pcall *c = p->inflight;
  while (c && (!approval || c->approval != approval))
    c = c->next;
  if (!c)
    return; /* answered already, or the run is over */
  c->approval = 0;
  if (c->record < p->n_records)
    p->records[c->record].approval = (int) v;
  if (v == PROXY_APPROVED) {
    pcall_send(p, c);
    return;
  }
  pcall_unlink(p, c);
  record_end(p, c->record, OUT_DENIED);
  static const char *const what[] = {"", "denied by the user", "cancelled by the user", "", ""};
  if (v == PROXY_UNAVAILABLE)
    reply_error(p, c->id, PROXY_ERR_NOT_APPROVED,
                "approval not possible: %s (tool `%.100s` of server `%.100s`, approve_host_calls)",
                detail ? detail : "no one to ask", c->tool, c->server);
  else
    reply_error(p, c->id, PROXY_ERR_NOT_APPROVED, "%s (tool `%.100s` of server `%.100s`)",
                v == PROXY_APPROVAL_TIMEOUT ? (detail ? detail : "approval timed out") : what[v], c->tool,
                c->server);
  pcall_free(c);
}

/* *root is the request's tree (params within it) and *frame its text: either may be taken. */
static void forward(struct proxy *p, const char *id, const char *method, const json_node_t *params,
                    size_t frame_len, json_node_t **root, char **frame)
{
  const char *server = json_as_string(json_get(params, "server"), NULL);
  bool call = strcmp(method, "tools/call") == 0;
  const char *tool = call ? json_as_string(json_get(params, "name"), NULL) : NULL;
  const json_node_t *args = json_get(params, "arguments");
  if (!server || (call && !tool)) {
    reply_error(p, id, JSONRPC_INVALID_PARAMS, "%s needs `server`%s (strings)", method,
                call ? " and `name`" : "");
    return;
  }
  if (args && json_type(args) != JSON_OBJECT && json_type(args) != JSON_NULL) {
    reply_error(p, id, JSONRPC_INVALID_PARAMS, "`arguments` must be an object");
    return;
  }
  if (call && p->n_records >= p->max_calls) {
    reply_error(p, id, JSONRPC_INVALID_REQUEST, "this run has made its %zu calls, the limit", p->max_calls);
    return;
  }
  /* The access check comes first, and the record keeps bounded copies of the names: a denied
   * call costs no more than an allowed one, whatever names it carries. */
  bool ok = call ? allowed(p, server) : discoverable(p, server);
  size_t rec = call ? record_start(p, server, tool) : SIZE_MAX;
  if (!ok) {
    record_end(p, rec, OUT_DENIED);
    if (call || discoverable(p, server))
      reply_error(p, id, JSONRPC_INVALID_PARAMS,
                  "server `%.100s` is not available to this run (list it in `servers`)", server);
    else
      reply_error(p, id, JSONRPC_INVALID_PARAMS,
                  "server `%.100s` is not configured, or the policy does not allow it", server);
    return;
  }
  if (call && strlen(tool) > PROXY_MAX_TOOL_NAME) {
    record_end(p, rec, OUT_ERROR);
    reply_error(p, id, MCP_ERR_TOO_LARGE, "the tool name is longer than %d bytes, the limit",
                PROXY_MAX_TOOL_NAME);
    return;
  }
  if (p->n_inflight >= PROXY_MAX_INFLIGHT) {
    record_end(p, rec, OUT_ERROR);
    reply_error(p, id, JSONRPC_INVALID_REQUEST, "more than %d calls at once", PROXY_MAX_INFLIGHT);
    return;
  }
  if (p->n_inflight && p->inflight_bytes + frame_len > PROXY_MAX_INFLIGHT_BYTES) {
    record_end(p, rec, OUT_ERROR);
    reply_error(
        p, id, MCP_ERR_TOO_LARGE,
        "the calls in flight already hold %zu bytes of requests; this one (%zu bytes) would pass the limit "
        "of %u bytes: wait for answers",
        p->inflight_bytes, frame_len, PROXY_MAX_INFLIGHT_BYTES);
    return;
  }
  struct pcall *c = calloc(1, sizeof *c);
  if (!c || !(c->id = strdup(id)) || !(c->server = strdup(server)) || !(c->tool = strdup(tool ? tool : ""))) {
    pcall_free(c);
    record_end(p, rec, OUT_ERROR);
    reply_error(p, id, JSONRPC_INTERNAL_ERROR, "sandboxd: out of memory");
    return;
  }
  c->p = p;
  c->record = rec;
  json_as_bool(json_get(params, "progress"), &c->progress);
  if (call && args && json_type(args) == JSON_OBJECT && !(c->args = take_arguments(frame, frame_len, root))) {
    record_end(p, rec, OUT_ERROR);
    reply_error(p, id, JSONRPC_INTERNAL_ERROR, "sandboxd: out of memory");
    pcall_free(c);
    return;
  }
  /* In flight from here, whatever it waits for: it holds its share of the budget. */
  c->charge = frame_len;
  c->next = p->inflight;
  p->inflight = c;
  p->n_inflight++;
  p->inflight_bytes += frame_len;
  /* approve_host_calls writes: whether the tool is read-only is in its server's list (cached by
   * the host client: asked of the server once, and after it says the list changed). */
  c->listing = call && p->approve == SBX_APPROVE_WRITES;
  if (call && !c->listing)
    call_decide(p, c, NULL, 0);
  else
    pcall_send(p, c);
}

/* The id of a request that is refused unparsed (too large), from its first bytes or the whole
 * frame: an integer or a string of at most PROXY_MAX_ID bytes as canonical JSON, else NULL
 * (answered with id null). */
static char *peek_id(const char *prefix, size_t len)
{
  char *id = NULL;
  if (json_peek_member(prefix, len, "id", &id) < 0)
    return NULL;
  bool number = (id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) && !strpbrk(id, ".eE");
  if ((!number && id[0] != '"') || strlen(id) > PROXY_MAX_ID) {
    free(id);
    return NULL;
  }
  return id;
}

/* A frame that is not JSON, or holds too many values: frame[0..len) is what is here of it. */
static void refuse_unparsed(struct proxy *p, const char *frame, size_t len, const sbx_error_t *err)
{
  if (err->errnum == E2BIG) {
    /* The peek stops at the id, allocating only it. */
    _cleanup_free_ char *id = peek_id(frame, len);
    reply_error(p, id, MCP_ERR_TOO_LARGE, "the request holds more than %d JSON values, the bridge's limit",
                PROXY_MAX_VALUES);
  } else
    reply_error(p, NULL, JSONRPC_PARSE_ERROR, "Parse error: %s", err->msg);
}

static void check_reset(struct proxy *p)
{
  json_check_free(p->check);
  p->check = NULL;
  p->checked = 0;
}

/* The frame still arriving, its new bytes within PROXY_CHECK_PREFIX: refused and skipped as soon
 * as it cannot be a request within the budget. */
static void check_partial(struct proxy *p)
{
  size_t have;
  const char *data = bridge_reader_partial(&p->reader, &have);
  size_t upto = have < PROXY_CHECK_PREFIX ? have : PROXY_CHECK_PREFIX;
  if (!data || upto <= p->checked || (upto - p->checked < PROXY_CHECK_STEP && upto < PROXY_CHECK_PREFIX))
    return;
  if (!p->check && !(p->check = json_check_new(PROXY_MAX_VALUES)))
    return; /* out of memory: it is checked whole, at its end */
  sbx_error_t err = {0};
  if (json_check_feed(p->check, data + p->checked, upto - p->checked, &err) == 0) {
    p->checked = upto;
    return;
  }
  refuse_unparsed(p, data, upto, &err);
  bridge_reader_drop(&p->reader);
  check_reset(p);
}

/* frame (malloc'd) is taken: a tools/call's arguments go on in it (forward). */
static void handle_frame(struct proxy *p, char *frame, size_t len)
{
  _cleanup_free_ char *text = frame;
  json_node_t *root = NULL;
  sbx_error_t err;
  if (json_parse_cut(text, len, PROXY_MAX_VALUES, PROXY_TREE_STRING, &root, &err) < 0) {
    refuse_unparsed(p, text, len, &err);
    return;
  }
  _cleanup_free_ char *id = jsonrpc_id_canonical(json_get(root, "id"));
  const char *method = json_as_string(json_get(root, "method"), NULL);
  const json_node_t *params = json_get(root, "params");
  long long status;
  if (!id && method && strcmp(method, PROXY_DONE_METHOD) == 0 && p->done_fn &&
      json_as_int(json_get(params, "status"), &status) == 0 && status >= 0 && status <= 255) {
    /* The run is over: nothing more from this bridge is served (the sandbox is killed now). */
    close(p->fd);
    p->fd = -1;
    p->done_fn(p->done_ctx, (int) status);
  } else if (id && strlen(id) > PROXY_MAX_ID)
    reply_error(p, NULL, JSONRPC_INVALID_REQUEST, "Invalid Request: the id is longer than %d bytes",
                PROXY_MAX_ID);
  else if (json_type(root) != JSON_OBJECT || !id || !method)
    reply_error(p, id, JSONRPC_INVALID_REQUEST, "Invalid Request: expected an object with `id` and `method`");
  else if (params && json_type(params) != JSON_OBJECT)
    reply_error(p, id, JSONRPC_INVALID_PARAMS, "`params` must be an object");
  else if (strcmp(method, "servers/list") == 0)
    list_servers(p, id);
  else if (strcmp(method, "tools/list") == 0 || strcmp(method, "tools/call") == 0)
    forward(p, id, method, params, len, &root, &text);
  else
    reply_error(p, id, JSONRPC_METHOD_NOT_FOUND, "Method not found: %.100s", method);
  json_free(root);
}

/* ------------------------------------------------------------------ API */

int proxy_new(struct mcp_hosts *hosts, const struct sbx_policy *policy, const char *const *servers,
              size_t n_servers, const struct proxy_limits *lim, int *ret_sandbox_fd, struct proxy **ret,
              sbx_error_t *err)
{
  const struct mcp_config *cfg = mcp_hosts_config(hosts);
  for (size_t i = 0; i < n_servers; i++) {
    if (!mcp_config_find(cfg, servers[i]))
      return sbx_error_set(err, ENOENT, "unknown server `%.100s`", servers[i]);
    /* Access is the request's servers, the configured ones, and the policy's proxy_servers. */
    if (policy && !policy_allows_server(policy, servers[i]))
      return sbx_error_set(err, 0, "server `%.100s` is not allowed by policy `%s` (proxy_servers)",
                           servers[i], policy->name);
  }
  struct proxy *p = calloc(1, sizeof *p);
  if (!p || !(p->servers = calloc(n_servers + 1, sizeof *p->servers))) {
    free(p);
    return sbx_error_set(err, ENOMEM, "proxy");
  }
  p->fd = -1;
  p->hosts = hosts;
  p->policy = policy;
  static const char var[] = "SANDBOXD_MCP_SERVERS=";
  if (strbuf_append(&p->env, var, sizeof var - 1) < 0) {
    proxy_free(p);
    return sbx_error_set(err, ENOMEM, "proxy");
  }
  for (size_t i = 0; i < n_servers; i++) {
    bool dup = false;
    for (size_t j = 0; j < p->n_servers; j++)
      dup |= strcmp(p->servers[j], servers[i]) == 0;
    if (dup)
      continue;
    /* Names are [A-Za-z0-9_.-] (mcp_config.c), so a comma separates them safely. */
    if (!(p->servers[p->n_servers] = strdup(servers[i])) ||
        (p->n_servers && strbuf_append(&p->env, ",", 1) < 0) ||
        strbuf_append(&p->env, servers[i], strlen(servers[i])) < 0) {
      free(p->servers[p->n_servers]);
      p->servers[p->n_servers] = NULL;
      proxy_free(p);
      return sbx_error_set(err, ENOMEM, "proxy");
    }
    p->n_servers++;
  }
  p->approve = policy ? policy->approve_host_calls : SBX_APPROVE_NONE;
  p->max_frame = lim && lim->max_frame ? lim->max_frame : BRIDGE_DEFAULT_MAX_FRAME;
  p->call_timeout_ms = lim && lim->call_timeout_ms ? lim->call_timeout_ms : PROXY_DEFAULT_CALL_TIMEOUT_MS;
  p->max_calls = lim && lim->max_calls ? lim->max_calls : PROXY_DEFAULT_MAX_CALLS;
  bridge_reader_init(&p->reader, proxy_max_request(policy));
  if (!ret_sandbox_fd) { /* the caller brings the socket (proxy_adopt_fd) */
    *ret = p;
    return 0;
  }
  int sv[2];
  /* SOCK_STREAM: frames carry their own length; no fds are ever received (no control buffer). */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
    proxy_free(p);
    return sbx_error_errno(err, "bridge socketpair");
  }
  /* The code's end blocks: its reader thread waits in recv. */
  int flags = fcntl(sv[1], F_GETFL);
  if (flags >= 0)
    fcntl(sv[1], F_SETFL, flags & ~O_NONBLOCK);
  p->fd = sv[0];
  *ret_sandbox_fd = sv[1];
  *ret = p;
  return 0;
}

void proxy_adopt_fd(struct proxy *p, int fd)
{
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0)
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (p->fd >= 0)
    close(p->fd);
  p->fd = fd;
}

void proxy_free(struct proxy *p)
{
  if (!p)
    return;
  while (p->inflight) {
    struct pcall *c = p->inflight;
    p->inflight = c->next;
    mcp_hosts_cancel(p->hosts, c->op);
    record_end(p, c->record, OUT_CANCELLED);
    pcall_free(c);
  }
  for (size_t i = 0; i < p->n_servers; i++)
    free(p->servers[i]);
  free(p->servers);
  for (size_t i = 0; i < p->n_records; i++) {
    free(p->records[i].server);
    free(p->records[i].tool);
  }
  free(p->records);
  bridge_reader_free(&p->reader);
  check_reset(p);
  strbuf_free(&p->outq);
  strbuf_free(&p->env);
  if (p->fd >= 0)
    close(p->fd);
  free(p);
}

void proxy_on_progress(struct proxy *p, void (*fn)(void *, const char *, const char *, const json_node_t *),
                       void *ctx)
{
  p->progress_fn = fn;
  p->progress_ctx = ctx;
}

void proxy_on_approval(struct proxy *p, enum sbx_approve level, proxy_approval_fn fn, void *ctx)
{
  if (level > p->approve)
    p->approve = level;
  p->approval_fn = fn;
  p->approval_ctx = ctx;
}

void proxy_on_done(struct proxy *p, void (*fn)(void *ctx, int status), void *ctx)
{
  p->done_fn = fn;
  p->done_ctx = ctx;
}

int proxy_fd(const struct proxy *p)
{
  return p->fd;
}
const char *proxy_env(const struct proxy *p)
{
  return p->env.data;
}

uint32_t proxy_max_request(const struct sbx_policy *policy)
{
  return policy && policy->proxy_request_bytes ? (uint32_t) policy->proxy_request_bytes
                                               : BRIDGE_DEFAULT_MAX_FRAME;
}

short proxy_events(const struct proxy *p)
{
  short ev = 0;
  /* Backpressure: while answers wait for the code to read them, read no more of its requests. */
  if (p->outq.len - p->outq_off < p->max_frame)
    ev |= POLLIN;
  if (p->outq_off < p->outq.len)
    ev |= POLLOUT;
  return ev;
}

void proxy_handle(struct proxy *p, short revents)
{
  if (p->fd < 0)
    return;
  if (revents & POLLOUT)
    flush_out(p);
  if (!(revents & (POLLIN | POLLHUP | POLLERR)))
    return;
  char buf[PROXY_READ_CHUNK];
  for (int rounds = 0; rounds < 64 && p->fd >= 0; rounds++) {
    ssize_t n = recv(p->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n <= 0) {
      /* The code closed its end (or exited): calls in flight still finish, nobody reads them. */
      close(p->fd);
      p->fd = -1;
      return;
    }
    p->bytes_read += (size_t) n;
    size_t off = 0;
    while (off < (size_t) n) {
      size_t used;
      char *frame;
      size_t flen;
      enum bridge_event ev =
          bridge_reader_feed(&p->reader, buf + off, (size_t) n - off, &used, &frame, &flen);
      off += used;
      if (ev != BRIDGE_NEED_MORE)
        check_reset(p);
      if (ev == BRIDGE_FRAME) {
        handle_frame(p, frame, flen);
        if (p->fd < 0) /* the done notification: what follows it is not served */
          return;
      } else if (ev == BRIDGE_OVERSIZE) {
        _cleanup_free_ char *id = peek_id(frame, flen);
        reply_error(p, id, MCP_ERR_TOO_LARGE,
                    "the request is %u bytes, above the bridge's limit of %u bytes (the policy's "
                    "proxy_request_limit)",
                    p->reader.oversize_len, p->reader.max_frame);
      }
    }
    check_partial(p);
    if (p->bytes_read >= PROXY_MAX_RUN_BYTES) {
      reply_error(p, NULL, MCP_ERR_TOO_LARGE,
                  "the code has sent %u MiB over the bridge in this run, the limit; the bridge is closed",
                  PROXY_MAX_RUN_BYTES >> 20);
      /* Closed, as when the code closes its end: a request it sent after this would never be
       * answered, so it must fail at once (EPIPE, then EOF for the package's reader). Calls in
       * flight finish on the host; their answers have nowhere to go. */
      close(p->fd);
      p->fd = -1;
      bridge_reader_free(&p->reader);
      check_reset(p);
      return;
    }
  }
}

size_t proxy_bytes_read(const struct proxy *p)
{
  return p->bytes_read;
}
