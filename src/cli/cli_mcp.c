/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp`'s command line: the options, the setup (policy, rootfs, host servers, audit log,
 * signals, stdout), the server's loop, and the one teardown. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/hostfile.h"
#include "base/jsonrpc.h"
#include "base/log.h"
#include "base/util.h"
#include "cli/cli.h"
#include "hostmcp/mcp_client.h"
#include "hostmcp/mcp_config.h"
#include "hostmcp/proxy.h"
#include "image/image.h"
#include "kernel/seccomp.h"
#include "mcp/fork_pool.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_internal.h"
#include "mcp/mcp_server.h"
#include "mcp/mcp_tasks.h"
#include "policy/policy.h"
#include "run/audit.h"
#include "run/binds.h"
#include "sandbox/sandbox.h"

/* Kill and reap every sandbox, then give the client what is already written, briefly. */
static void shutdown_server(struct server *srv)
{
  /* A running call goes through call_finish, which writes its audit record: one answered at its
   * done byte is not recorded until its sandbox is reaped, and a run killed here is a run too. A
   * queued call never ran. */
  /* Sessions first: a call running on one is then the owner of its sandbox, and ends below. */
  sessions_clear(srv);
  while (srv->calls) {
    struct call *c = srv->calls;
    if (c->state == CALL_RUNNING && c->sb) {
      if (!c->answered) {
        c->cancelled = true; /* the client has gone or asked us to stop: no answer */
        sandbox_kill(c->sb, false);
      }
      call_finish(srv, c);
    } else {
      call_unlink(srv, c);
      call_free(c);
    }
  }
  warm_pool_clear(srv);
  fork_pool_clear(srv);
  flush_output_for(srv, 2000);
}

static const char mcp_usage[] =
    "usage: sandboxd mcp [OPTIONS]\n"
    "Serve the Model Context Protocol on stdin/stdout with the tools run_python and execute_code\n"
    "(python, bash, javascript); every call runs in a fresh sandbox. Logs go to stderr. Options:\n"
    "  --policy NAME|PATH       policy to enforce (default: default)\n"
    "  --rootfs NAME|DIR        root filesystem: a name in the rootfs store (`sandboxd rootfs list`)\n"
    "                           or a path with a `/` (default: the built python-3.14-slim)\n"
    "  --max-concurrent N       sandboxes running at once (default 4); further calls queue\n"
    "  --max-queue N            calls waiting beyond that (default 64); more are refused\n"
    "  --tools LIST             the tools offered, of run_python,execute_code,sessions (default:\n"
    "                           all; sessions: session_start and session_end)\n"
    "  --warm N                 sandboxes kept built, with Python started, for the next calls\n"
    "                           (default 2, 0 disables); each serves one call\n"
    "  --warm-lang LIST         the languages kept warm, N sandboxes each (default python); the\n"
    "                           others start cold\n"
    "  --warm-mode MODE         fork: each python call forks from one idle template; prestart:\n"
    "                           python sandboxes built ahead, as above; auto (default): fork,\n"
    "                           or prestart where forking cannot work (sandboxd-mcp(7))\n"
    "  --preload MODULES        fork: Python modules the template imports before any call, so a\n"
    "                           call that imports them pays nothing (comma-separated; default:\n"
    "                           what the rootfs names, numpy,pandas,matplotlib.pyplot in the\n"
    "                           data rootfs; \"\" for none)\n"
    "  --max-message-size SIZE  largest JSON-RPC message accepted (default 4M)\n"
    "  --text-limit N           characters of output a result's text shows (default 40000);\n"
    "                           beyond that its head and tail, and a line saying what was cut\n"
    "  --config FILE            host MCP servers the code may call ({\"mcpServers\": ...}; default:\n"
    "                           $SANDBOXD_MCP_CONFIG, else ~/.config/sandboxd/mcp.json)\n"
    "  --import-claude          also offer the servers Claude Code would run here (~/.claude.json,\n"
    "                           and the approved ones of ./.mcp.json)\n"
    "  --audit-log PATH|syslog|off   where audit records go (see sandboxd exec --help)\n"
    "  --output-dir DIR         save each call's /workspace/out files (and whole output) in\n"
    "                           DIR/<request_id>/ and return links to them\n"
    "  --output-max-size SIZE   what those directories may hold in all (default 1G); the\n"
    "                           oldest are removed first\n"
    "  --output-max-age AGE     and how long each is kept: N[s|m|h|d] (default 7d)\n"
    "  --allow-host HOST[:PORT] egress to HOST (port 443 by default) if the policy's max_network\n"
    "                           permits, through the egress proxy (sandboxd.policy(5) \"Network\")\n"
    "  --bind SRC:DST           bind host SRC read-only at DST in every sandbox (as exec)\n"
    "  --bind-rw SRC:DST        the same, writable\n"
    "  --approve LEVEL          host tool calls that wait for the user's approval, asked of the\n"
    "                           client: none, writes or all; raises the policy's\n"
    "                           approve_host_calls, never lowers it\n"
    "  --approve-timeout SECS   how long a call waits for that answer (default 120)\n"
    "  --session-idle SECS      end a session (session_start) after this long without a call;\n"
    "                           at most the policy's session_idle\n"
    "  --session-max-life SECS  end a session this long after its start; at most the policy's\n"
    "                           session_max_life\n"
    "  --max-sessions N         sessions at once (0: none); at most the policy's max_sessions\n"
    "  --roots                  bind the client's roots (if it has any) read-only under\n"
    "                           " ROOTS_DIR "/NAME (stdio only)\n"
    "Streamable HTTP instead of stdio (sandboxd-mcp(7)):\n"
    "  --http [ADDR:]PORT       serve MCP on http://ADDR:PORT/mcp (ADDR default 127.0.0.1; port 0\n"
    "                           picks one); the address is printed on stderr\n"
    "  --stateless              no sessions: every request stands alone (replicas behind a proxy)\n"
    "  --token-file FILE        bearer tokens, one a line, mode 600 (required beyond loopback;\n"
    "                           re-read on SIGHUP)\n"
    "  --auth-server URL        the OAuth authorization server the RFC 9728 metadata names\n"
    "  --allow-origin ORIGIN    a browser Origin allowed besides loopback ones (repeatable)\n"
    "  --max-connections N      open connections (default 2048, within the open-file limit); an\n"
    "                           eighth, at most 256, for those whose request head is not complete\n"
    "  --max-requests N         HTTP requests in flight, all clients (default 256); more get 503\n"
    "  --max-streams N          open SSE streams (default 1024)\n"
    "  --max-http-sessions N    HTTP transport sessions (Mcp-Session-Id; default 256)\n"
    "  --idle-timeout SECS      close a connection idle this long (default 60)\n"
    "  --ring-file FILE         the servers of nginx's `hash ... consistent` upstream, one a line,\n"
    "  --ring-name NAME         and this replica's among them: session ids and handles are minted\n"
    "                           so that nginx routes them back here\n"
    "See sandboxd(1).\n";

static int parse_count(const char *opt, const char *arg, size_t max, size_t *ret, sbx_error_t *err)
{
  uint64_t v;
  if (parse_u64(arg, &v) < 0 || v == 0 || v > max)
    return sbx_error_set(err, 0, "%s `%s`: expected a whole number from 1 to %zu", opt, arg, max);
  *ret = (size_t) v;
  return 0;
}

enum {
  OPT_POLICY = 256,
  OPT_ROOTFS,
  OPT_MAX_CONCURRENT,
  OPT_MAX_QUEUE,
  OPT_MAX_MESSAGE,
  OPT_CONFIG,
  OPT_IMPORT_CLAUDE,
  OPT_AUDIT_LOG,
  OPT_WARM,
  OPT_TEXT_LIMIT,
  OPT_OUTPUT_DIR,
  OPT_OUTPUT_MAX_SIZE,
  OPT_OUTPUT_MAX_AGE,
  OPT_BIND,
  OPT_BIND_RW,
  OPT_ROOTS,
  OPT_TOOLS,
  OPT_WARM_LANG,
  OPT_ALLOW_HOST,
  OPT_HTTP,
  OPT_STATELESS,
  OPT_TOKEN_FILE,
  OPT_AUTH_SERVER,
  OPT_ALLOW_ORIGIN,
  OPT_MAX_CONNECTIONS,
  OPT_MAX_REQUESTS,
  OPT_MAX_STREAMS,
  OPT_MAX_HTTP_SESSIONS,
  OPT_IDLE_TIMEOUT,
  OPT_WARM_MODE,
  OPT_PRELOAD,
  OPT_APPROVE,
  OPT_APPROVE_TIMEOUT,
  OPT_SESSION_IDLE,
  OPT_SESSION_MAX_LIFE,
  OPT_SESSIONS,
  OPT_RING_FILE,
  OPT_RING_NAME,
};

/* The --http options (mcp_http.h); false: not one of them. */
static bool parse_http_opt(int c, const char *arg, struct mcp_http_opts *o, bool *use, int *r,
                           sbx_error_t *err)
{
  uint64_t v;
  *r = 0;
  switch (c) {
  case OPT_HTTP:
    *use = true;
    *r = mcp_http_parse_listen(arg, o, err);
    return true;
  case OPT_STATELESS:
    o->stateless = true;
    return true;
  case OPT_TOKEN_FILE:
    o->token_file = arg;
    return true;
  case OPT_AUTH_SERVER:
    if (strncmp(arg, "https://", 8) != 0 && strncmp(arg, "http://", 7) != 0)
      *r = sbx_error_set(err, 0, "--auth-server `%s`: expected an http:// or https:// URL", arg);
    o->auth_server = arg;
    return true;
  case OPT_ALLOW_ORIGIN:
    if (o->n_origins == MCP_HTTP_MAX_ORIGINS)
      *r = sbx_error_set(err, 0, "--allow-origin: at most %d", MCP_HTTP_MAX_ORIGINS);
    else
      o->origins[o->n_origins++] = arg;
    return true;
  case OPT_MAX_CONNECTIONS:
    *r = parse_count("--max-connections", arg, 1000000, &o->max_connections, err);
    return true;
  case OPT_MAX_REQUESTS:
    *r = parse_count("--max-requests", arg, 1000000, &o->max_requests, err);
    return true;
  case OPT_MAX_STREAMS:
    *r = parse_count("--max-streams", arg, 1000000, &o->max_streams, err);
    return true;
  case OPT_MAX_HTTP_SESSIONS:
    *r = parse_count("--max-http-sessions", arg, 1000000, &o->max_sessions, err);
    return true;
  case OPT_RING_FILE:
    o->ring_file = arg;
    return true;
  case OPT_RING_NAME:
    o->ring_name = arg;
    return true;
  case OPT_IDLE_TIMEOUT:
    if (parse_u64(arg, &v) < 0 || v == 0 || v > 86400)
      *r = sbx_error_set(err, 0, "--idle-timeout `%s`: expected seconds from 1 to 86400", arg);
    o->idle_s = (unsigned) v;
    return true;
  }
  return false;
}

/* --output-max-age: whole seconds, minutes, hours or days (seconds without a unit). */
static int parse_age(const char *arg, uint64_t *ret_s)
{
  static const struct {
    char unit;
    uint64_t s;
  } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  char num[24];
  size_t n = strlen(arg);
  uint64_t mult = 1, v;
  for (size_t i = 0; n > 1 && i < ARRAY_SIZE(units); i++)
    if (arg[n - 1] == units[i].unit) {
      mult = units[i].s;
      n--;
      break;
    }
  if (n == 0 || n >= sizeof num)
    return -1;
  memcpy(num, arg, n);
  num[n] = '\0';
  if (parse_u64(num, &v) < 0 || v == 0 || v > 3650 * 86400ULL / mult)
    return -1;
  *ret_s = v * mult;
  return 0;
}

/* A preload list: dotted Python module names, comma-separated ("" is none). They reach the
 * template's Python as one line of its setup, and are imported by name only. */
static int check_preload(const char *what, const char *list, sbx_error_t *err)
{
  if (strlen(list) > 1024)
    return sbx_error_set(err, 0, "%s: longer than 1024 characters", what);
  for (const char *s = list; *s;) {
    size_t n = strcspn(s, ",");
    bool ok = n > 0 && s[0] != '.' && s[n - 1] != '.';
    for (size_t i = 0; ok && i < n; i++)
      ok = isalnum((unsigned char) s[i]) || s[i] == '_' || (s[i] == '.' && s[i + 1] != '.');
    if (!ok || isdigit((unsigned char) s[0]))
      return sbx_error_set(err, 0, "%s `%s`: expected Python module names separated by commas", what, list);
    s += n + (s[n] == ',');
    if (s[-1] == ',' && !*s)
      return sbx_error_set(err, 0, "%s `%s`: a trailing comma", what, list);
  }
  return 0;
}

/* --tools: of "run_python,execute_code,sessions". */
static int parse_tools(const char *list, unsigned *ret, sbx_error_t *err)
{
  unsigned tools = 0;
  for (const char *p = list;;) {
    size_t n = strcspn(p, ",");
    if (n == sizeof TOOL_NAME - 1 && strncmp(p, TOOL_NAME, n) == 0)
      tools |= TOOL_RUN_PYTHON;
    else if (n == sizeof EXEC_TOOL_NAME - 1 && strncmp(p, EXEC_TOOL_NAME, n) == 0)
      tools |= TOOL_EXECUTE_CODE;
    else if (n == sizeof "sessions" - 1 && strncmp(p, "sessions", n) == 0)
      tools |= TOOL_SESSIONS;
    else
      return sbx_error_set(err, 0,
                           "--tools `%s`: expected " TOOL_NAME ", " EXEC_TOOL_NAME
                           " or sessions (session_start and session_end), separated by commas",
                           list);
    if (!p[n])
      break;
    p += n + 1;
  }
  *ret = tools;
  return 0;
}

/* The server's numbers: calls at once and queued, sizes, the output directory's budget, warm
 * sandboxes, the text shown; false: not one of them. */
static bool parse_number_opt(int c, const char *arg, struct server *srv, int *r, sbx_error_t *err)
{
  uint64_t v;
  *r = 0;
  switch (c) {
  case OPT_MAX_CONCURRENT:
    *r = parse_count("--max-concurrent", arg, 256, &srv->max_concurrent, err);
    return true;
  case OPT_MAX_QUEUE:
    *r = parse_count("--max-queue", arg, 65536, &srv->max_queue, err);
    return true;
  case OPT_MAX_MESSAGE:
    if (parse_size(arg, &v) < 0 || v < 1024 || v > (1u << 30))
      *r = sbx_error_set(err, 0, "--max-message-size `%s`: expected a size from 1K to 1G", arg);
    else
      srv->max_message = (size_t) v;
    return true;
  case OPT_OUTPUT_MAX_SIZE:
    if (parse_size(arg, &v) < 0 || v < 1024 || v > (1ULL << 50))
      *r = sbx_error_set(err, 0, "--output-max-size `%s`: expected a size from 1K to 1024T", arg);
    else
      srv->output_budget.max_bytes = v;
    return true;
  case OPT_OUTPUT_MAX_AGE:
    if (parse_age(arg, &v) < 0)
      *r =
          sbx_error_set(err, 0, "--output-max-age `%s`: expected N, Ns, Nm, Nh or Nd, from 1s to 3650d", arg);
    else
      srv->output_budget.max_age_s = v;
    return true;
  case OPT_WARM:
    if (parse_u64(arg, &v) < 0 || v > MAX_WARM)
      *r = sbx_error_set(err, 0, "--warm `%s`: expected a whole number from 0 to %d", arg, MAX_WARM);
    else
      srv->warm_target = (size_t) v;
    return true;
  case OPT_TEXT_LIMIT:
    if (parse_u64(arg, &v) < 0 || v < MIN_TEXT_LIMIT || v > MAX_TEXT_LIMIT)
      *r = sbx_error_set(err, 0, "--text-limit `%s`: expected a whole number from %d to %d", arg,
                         MIN_TEXT_LIMIT, MAX_TEXT_LIMIT);
    else
      srv->text_limit = (size_t) v;
    return true;
  case OPT_APPROVE_TIMEOUT:
    if (parse_u64(arg, &v) < 0 || v == 0 || v > MAX_APPROVE_TIMEOUT_S)
      *r = sbx_error_set(err, 0, "--approve-timeout `%s`: expected a whole number of seconds from 1 to %d",
                         arg, MAX_APPROVE_TIMEOUT_S);
    else
      srv->approve_timeout_s = v;
    return true;
  case OPT_SESSION_IDLE:
  case OPT_SESSION_MAX_LIFE:
    if (parse_u64(arg, &v) < 0 || v == 0 || v > SBX_SESSION_MAX_S)
      *r = sbx_error_set(err, 0, "%s `%s`: expected a whole number of seconds from 1 to %u",
                         c == OPT_SESSION_IDLE ? "--session-idle" : "--session-max-life", arg,
                         SBX_SESSION_MAX_S);
    else
      *(c == OPT_SESSION_IDLE ? &srv->session_idle_s : &srv->session_max_life_s) = v;
    return true;
  case OPT_SESSIONS:
    if (parse_u64(arg, &v) < 0 || v > SBX_MAX_SESSIONS)
      *r = sbx_error_set(err, 0, "--max-sessions `%s`: expected a whole number from 0 to %u", arg,
                         SBX_MAX_SESSIONS);
    else
      srv->max_sessions = v;
    return true;
  }
  return false;
}

/* What every sandbox of the server gets and what it offers: host servers, the audit log, binds
 * and roots, tools, warm sandboxes and the fork template's preload, egress; false: not one of
 * them. */
static bool parse_server_opt(int c, const char *arg, struct server *srv, int *r, sbx_error_t *err)
{
  *r = 0;
  switch (c) {
  case OPT_CONFIG:
    srv->mcp_opts.path = arg;
    return true;
  case OPT_IMPORT_CLAUDE:
    srv->mcp_opts.import_claude = true;
    return true;
  case OPT_AUDIT_LOG:
    srv->audit_log = arg;
    return true;
  case OPT_BIND:
  case OPT_BIND_RW:
    *r = bind_opts_add(&srv->binds, arg, c == OPT_BIND_RW, err);
    return true;
  case OPT_ROOTS:
    srv->roots.enabled = true;
    return true;
  case OPT_TOOLS:
    *r = parse_tools(arg, &srv->tools, err);
    return true;
  case OPT_WARM_LANG:
    *r = mcp_lang_parse_list("--warm-lang", arg, &srv->warm_langs, err);
    return true;
  case OPT_WARM_MODE:
    if (strcmp(arg, "fork") == 0)
      srv->warm_mode = WARM_FORK;
    else if (strcmp(arg, "prestart") == 0)
      srv->warm_mode = WARM_PRESTART;
    else if (strcmp(arg, "auto") == 0)
      srv->warm_mode = WARM_AUTO;
    else
      *r = sbx_error_set(err, 0, "--warm-mode `%s`: expected auto, fork or prestart", arg);
    return true;
  case OPT_PRELOAD:
    if ((*r = check_preload("--preload", arg, err)) < 0)
      return true;
    free(srv->preload);
    if (!(srv->preload = strdup(arg)))
      *r = sbx_error_set(err, ENOMEM, "--preload");
    else
      srv->preload_set = true;
    return true;
  case OPT_ALLOW_HOST:
    *r = policy_allow_opts_add(&srv->allow_hosts, arg, err);
    return true;
  case OPT_APPROVE:
    if (policy_approve_parse(arg, &srv->approve) < 0)
      *r = sbx_error_set(err, 0, "--approve `%s`: expected none, writes or all", arg);
    else
      srv->approve_set = true;
    return true;
  }
  return false;
}

static int parse_args(int argc, char **argv, struct server *srv, const char **ret_policy,
                      const char **ret_rootfs, const char **ret_output_dir, struct mcp_http_opts *http,
                      bool *ret_http, bool *ret_help, sbx_error_t *err)
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
      {"text-limit", required_argument, NULL, OPT_TEXT_LIMIT},
      {"output-dir", required_argument, NULL, OPT_OUTPUT_DIR},
      {"output-max-size", required_argument, NULL, OPT_OUTPUT_MAX_SIZE},
      {"output-max-age", required_argument, NULL, OPT_OUTPUT_MAX_AGE},
      {"bind", required_argument, NULL, OPT_BIND},
      {"bind-rw", required_argument, NULL, OPT_BIND_RW},
      {"roots", no_argument, NULL, OPT_ROOTS},
      {"tools", required_argument, NULL, OPT_TOOLS},
      {"warm-lang", required_argument, NULL, OPT_WARM_LANG},
      {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
      {"http", required_argument, NULL, OPT_HTTP},
      {"stateless", no_argument, NULL, OPT_STATELESS},
      {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
      {"auth-server", required_argument, NULL, OPT_AUTH_SERVER},
      {"ring-file", required_argument, NULL, OPT_RING_FILE},
      {"ring-name", required_argument, NULL, OPT_RING_NAME},
      {"allow-origin", required_argument, NULL, OPT_ALLOW_ORIGIN},
      {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
      {"max-requests", required_argument, NULL, OPT_MAX_REQUESTS},
      {"max-streams", required_argument, NULL, OPT_MAX_STREAMS},
      {"max-http-sessions", required_argument, NULL, OPT_MAX_HTTP_SESSIONS},
      {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
      {"warm-mode", required_argument, NULL, OPT_WARM_MODE},
      {"preload", required_argument, NULL, OPT_PRELOAD},
      {"approve", required_argument, NULL, OPT_APPROVE},
      {"approve-timeout", required_argument, NULL, OPT_APPROVE_TIMEOUT},
      {"session-idle", required_argument, NULL, OPT_SESSION_IDLE},
      {"session-max-life", required_argument, NULL, OPT_SESSION_MAX_LIFE},
      {"max-sessions", required_argument, NULL, OPT_SESSIONS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  optind = 0;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    int r;
    if (parse_http_opt(c, optarg, http, ret_http, &r, err) || parse_number_opt(c, optarg, srv, &r, err) ||
        parse_server_opt(c, optarg, srv, &r, err)) {
      if (r < 0)
        return -1;
      continue;
    }
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
    case OPT_OUTPUT_DIR:
      *ret_output_dir = optarg;
      break;
    default:
      return sbx_error_set(err, 0, "unknown or incomplete option `%s` (see sandboxd mcp --help)",
                           argv[optind - 1]);
    }
  }
  if (optind < argc)
    return sbx_error_set(err, 0, "unexpected argument `%s` (see sandboxd mcp --help)", argv[optind]);
  if (!*ret_http && (http->stateless || http->token_file || http->auth_server || http->n_origins ||
                     http->ring_file || http->ring_name))
    return sbx_error_set(
        err, 0, "--stateless, --token-file, --auth-server, --allow-origin and --ring-file need --http");
  if (!http->ring_file != !http->ring_name)
    return sbx_error_set(err, 0, "--ring-file and --ring-name go together (sandboxd-mcp(7), DEPLOYMENT)");
  /* The client's roots are one client's: over HTTP there are many. */
  if (*ret_http && srv->roots.enabled)
    return sbx_error_set(err, 0, "--roots is for stdio: over --http each client has its own roots");
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

/* --bind sources exist (resolved now, as exec does before its run), and with --roots no bind is
 * at or under ROOTS_DIR: the roots' mount points would be made in it, on the host for --bind-rw. */
static int setup_binds(struct server *srv, sbx_error_t *err)
{
  if (bind_opts_resolve(&srv->binds, err) < 0)
    return -1;
  const size_t rl = sizeof ROOTS_DIR - 1;
  for (size_t i = 0; srv->roots.enabled && i < srv->binds.n; i++) {
    const char *d = srv->binds.binds[i].dst;
    if (strncmp(d, ROOTS_DIR, rl) == 0 && (d[rl] == '/' || !d[rl]))
      return sbx_error_set(err, 0, "--bind `%s`: with --roots, DST must not be " ROOTS_DIR " or below it", d);
  }
  return 0;
}

/* The languages present (their rootfs has the interpreter) and /dev/null, held for every run. A
 * language kept warm (--warm-lang) must be present; python always is (rootfs_find checked). */
static int setup_langs(struct server *srv, sbx_error_t *err)
{
  srv->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (srv->devnull < 0)
    return sbx_error_errno(err, "open `/dev/null`");
  for (int l = 0; l < MCP_LANG_COUNT; l++) {
    if (mcp_lang_rootfs((enum mcp_lang) l, srv->rootfs, &srv->lang_rootfs[l], err) < 0 ||
        (srv->lang_rootfs[l] && image_load_config(srv->lang_rootfs[l], &srv->lang_image[l], err) < 0))
      return -1;
    if (srv->lang_rootfs[l])
      srv->langs |= MCP_LANG_BIT(l);
  }
  for (int l = 0; l < MCP_LANG_COUNT; l++)
    if ((srv->warm_langs & MCP_LANG_BIT(l)) && !srv->lang_rootfs[l])
      return sbx_error_set(err, ENOENT, "--warm-lang %s: %s is not in its rootfs (%s)",
                           mcp_lang_name((enum mcp_lang) l), mcp_lang_argv((enum mcp_lang) l)[0],
                           mcp_lang_hint((enum mcp_lang) l));
  return 0;
}

/* Fork mode fails here, not at the first call, where the kernel or policy cannot do it; after
 * every option is checked (a bad --token-file is one line, not a sandbox's warnings first). auto
 * forks (as root each call has a host id of its own, as a cold sandbox has); where its fork path
 * cannot work, it says why and prestarts. */
static int setup_warm_mode(struct server *srv, sbx_error_t *err)
{
  srv->warm_fork = srv->warm_mode == WARM_FORK || srv->warm_mode == WARM_AUTO;
  /* What the template preloads: --preload, else what the rootfs names. */
  if (srv->warm_fork && !srv->preload_set) {
    struct image_config ic;
    if (image_load_config(srv->lang_rootfs[MCP_LANG_PYTHON], &ic, err) < 0)
      return -1;
    int r = ic.preload ? check_preload("the rootfs's label org.sandboxd.preload", ic.preload, err) : 0;
    srv->preload = TAKE_PTR(ic.preload);
    image_config_free(&ic);
    if (r < 0)
      return -1;
  }
  sbx_error_t why = {0};
  if (!srv->warm_fork ||
      fork_pool_init(srv, warm_pool_drop_forked, srv->warm_mode == WARM_FORK ? err : &why) == 0)
    return 0;
  if (srv->warm_mode == WARM_FORK)
    return -1;
  log_warn("%s; --warm-mode auto prestarts instead", why.msg);
  srv->warm_fork = false;
  return 0;
}

/* Sessions' bounds: the policy's, or the command line's where it is tighter; a looser one is
 * refused (only a policy may loosen them). */
static int session_bounds(struct server *srv, sbx_error_t *err)
{
  const struct sbx_policy *p = srv->policy;
  const struct {
    const char *opt, *key;
    uint64_t *v, policy;
  } b[] = {
      {"--session-idle", "session_idle", &srv->session_idle_s, p->session_idle_ms / 1000},
      {"--session-max-life", "session_max_life", &srv->session_max_life_s, p->session_max_life_ms / 1000},
      {"--max-sessions", "max_sessions", &srv->max_sessions, p->max_sessions},
  };
  for (size_t i = 0; i < ARRAY_SIZE(b); i++) {
    if (*b[i].v == UINT64_MAX)
      *b[i].v = b[i].policy;
    else if (*b[i].v > b[i].policy)
      return sbx_error_set(
          err, 0, "%s %llu: policy `%s` says %s %llu, which only a policy may raise%s", b[i].opt,
          (unsigned long long) *b[i].v, p->name, b[i].key, (unsigned long long) b[i].policy,
          b[i].v == &srv->max_sessions ? " (the HTTP transport's cap is --max-http-sessions)" : "");
  }
  srv->max_sessions_per_token = p->max_sessions_per_token;
  return 0;
}

/* Everything the server needs before it reads a request. Refuse to start rather than fail every
 * call: the client shows the server as failed, and stderr says why. *ret_masked: the signal mask
 * was changed (old holds the previous one). */
static int setup(struct server *srv, const char *policy_name, const char *rootfs, const char *output_dir,
                 sigset_t *old, bool *ret_masked, sbx_error_t *err)
{
  /* The audit log is opened before any sandbox runs (hostfile.h), not through the trees the
   * sandboxes can write; a refused path is fatal. */
  struct hostfile_tree trees[BIND_OPTS_MAX];
  struct hostfile_guard guard = {.trees = trees};
  bind_opts_writable_trees(&srv->binds, trees, &guard.n_trees);
  if (setup_binds(srv, err) < 0 ||
      /* Before any sandbox runs: where calls save their files, checked once (mcp_files.c). */
      (output_dir && (output_dir_open(output_dir, &guard, &srv->output_dirfd, &srv->output_dir, err) < 0 ||
                      output_budget_start(srv, err) < 0)) ||
      audit_start(srv->audit_log, &guard, err) < 0 || policy_load(policy_name, &srv->policy, err) < 0 ||
      policy_apply_network(srv->policy, &srv->allow_hosts, err) < 0 ||
      seccomp_validate(srv->policy, err) < 0 || rootfs_find(rootfs, &srv->rootfs, err) < 0 ||
      setup_langs(srv, err) < 0 || host_servers_load(&srv->hs, &srv->mcp_opts, err) < 0 ||
      host_servers_start(&srv->hs, srv->policy, STDERR_FILENO, err) < 0)
    return -1;
  /* --approve raises the policy's level; lowering it would undo what the policy's author asked. */
  if (srv->approve_set && srv->approve < srv->policy->approve_host_calls)
    return sbx_error_set(
        err, 0, "--approve %s: policy `%s` says approve_host_calls %s, which only a policy may lower",
        policy_approve_name(srv->approve), srv->policy->name,
        policy_approve_name(srv->policy->approve_host_calls));
  if (srv->approve < srv->policy->approve_host_calls)
    srv->approve = srv->policy->approve_host_calls;
  if (session_bounds(srv, err) < 0)
    return -1;
  sbx_error_t herr = {0};
  /* Every sandbox gets the package (base_spec), with host servers or without. */
  if (host_servers_find_helpers(&srv->hs, &herr) < 0)
    log_warn("%s: `from mcp import runtime` will fail%s", herr.msg,
             srv->hs.cfg->n ? ", and so will calls with `servers`" : "");
  mcp_binds_rebuild(srv);

  /* Take the stop signals through a signalfd. The sandbox's code starts with an empty mask. */
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  srv->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  /* A client that goes away must give us EPIPE, not kill us before we clean up. Blocked rather
   * than ignored: an ignored disposition would be inherited by the code, a mask is reset. */
  sigaddset(&mask, SIGPIPE);
  sigprocmask(SIG_BLOCK, &mask, old);
  *ret_masked = true;
  if (srv->sigfd < 0)
    return sbx_error_errno(err, "signalfd");
  srv->stdout_flags = stdout_nonblocking();
  jsonrpc_framer_init(&srv->framer, srv->max_message);
  return 0;
}

/* --ring-file and --ring-name: the ring nginx routes sessions by (route_ring.h). */
static int setup_ring(struct server *srv, const struct mcp_http_opts *o, sbx_error_t *err)
{
  if (!o->ring_file)
    return 0;
  _cleanup_free_ char *text = NULL;
  size_t len;
  if (read_file(o->ring_file, 1 << 20, &text, &len, err) < 0)
    return sbx_error_prefix(err, "--ring-file %s", o->ring_file);
  if (route_ring_parse(&srv->ring, text, len, o->ring_name, err) < 0)
    return sbx_error_prefix(err, "--ring-file %s", o->ring_file);
  return 0;
}

/* The one teardown, of whatever setup() got to. The sandboxes are gone (shutdown_server). */
static void teardown(struct server *srv, const sigset_t *old)
{
  /* After the sandboxes: their calls in flight are cancelled first. */
  host_servers_free(&srv->hs);
  if (srv->stdout_flags >= 0)
    fcntl(STDOUT_FILENO, F_SETFL, srv->stdout_flags);
  if (srv->sigfd >= 0)
    close(srv->sigfd);
  if (old)
    sigprocmask(SIG_SETMASK, old, NULL);
  jsonrpc_framer_free(&srv->framer);
  strbuf_free(&srv->outq);
  policy_free(srv->policy);
  free(srv->rootfs);
  for (int l = 0; l < MCP_LANG_COUNT; l++) {
    free(srv->lang_rootfs[l]);
    image_config_free(&srv->lang_image[l]);
  }
  if (srv->devnull >= 0)
    close(srv->devnull);
  if (srv->output_dirfd >= 0)
    close(srv->output_dirfd);
  free(srv->output_dir);
  free(srv->preload);
  free(srv->client_levels);
  free(srv->client_caps);
  tasks_free_all(srv);
  output_budget_free(&srv->output_budget);
  bind_opts_free(&srv->binds);
  mcp_roots_free(&srv->roots);
  route_ring_free(&srv->ring);
}

/* The HTTP transport's way into the server (mcp_server.c). */
static const struct mcp_http_handlers http_handlers = {
    .dispatch = mcp_dispatch,
    .cancel_calls = mcp_cancel_calls,
    .protocol_versions = mcp_all_versions,
};

int cmd_mcp(int argc, char **argv)
{
  struct server srv = {
      .max_concurrent = DEFAULT_MAX_CONCURRENT,
      .max_queue = DEFAULT_MAX_QUEUE,
      .max_message = DEFAULT_MAX_MESSAGE,
      .warm_target = DEFAULT_WARM,
      .text_limit = DEFAULT_TEXT_LIMIT,
      .stdout_flags = -1,
      .sigfd = -1,
      .output_dirfd = -1,
      .output_budget = {.max_bytes = DEFAULT_OUTPUT_MAX_SIZE, .max_age_s = DEFAULT_OUTPUT_MAX_AGE_S},
      .devnull = -1,
      .tools = TOOL_RUN_PYTHON | TOOL_EXECUTE_CODE | TOOL_SESSIONS,
      .warm_langs = MCP_LANG_BIT(MCP_LANG_PYTHON),
      .log_level = 3, /* warning */
      .approve_timeout_s = DEFAULT_APPROVE_TIMEOUT_S,
      .session_idle_s = UINT64_MAX, /* the policy's (session_bounds) */
      .session_max_life_s = UINT64_MAX,
      .max_sessions = UINT64_MAX,
      /* The task store calls up only through these (mcp_tasks.c). */
      .tasks_on = {.status = tasks_legacy_status, .ended = tasks_legacy_ended, .cancel_call = call_cancel},
  };
  const char *policy_name = NULL, *rootfs = NULL, *output_dir = NULL;
  struct mcp_http_opts http = {
      .max_connections = MCP_HTTP_DEFAULT_MAX_CONNECTIONS,
      .max_requests = MCP_HTTP_DEFAULT_MAX_REQUESTS,
      .max_streams = MCP_HTTP_DEFAULT_MAX_STREAMS,
      .max_sessions = MCP_HTTP_DEFAULT_MAX_SESSIONS,
      .idle_s = MCP_HTTP_DEFAULT_IDLE_S,
  };
  bool help = false, use_http = false;
  sbx_error_t err = {0};
  if (parse_args(argc, argv, &srv, &policy_name, &rootfs, &output_dir, &http, &use_http, &help, &err) < 0 ||
      help) {
    bind_opts_free(&srv.binds);
    if (help)
      fputs(mcp_usage, stdout);
    else
      log_sbx_error(&err);
    return help ? 0 : SBX_EXIT_SETUP;
  }
  sigset_t old;
  bool masked = false;
  int rc = 0;
  char url[128];
  if (setup(&srv, policy_name, rootfs, output_dir, &old, &masked, &err) < 0 ||
      setup_ring(&srv, &http, &err) < 0 ||
      (use_http && mcp_http_start(&srv, &http, &http_handlers, &srv.http, url, sizeof url, &err) < 0) ||
      setup_warm_mode(&srv, &err) < 0) {
    log_sbx_error(&err);
    rc = SBX_EXIT_SETUP;
  } else {
    if (use_http) /* one line a test or a script can read the port from */
      fprintf(stderr, "sandboxd: listening on %s\n", url);
    serve(&srv);
    shutdown_server(&srv);
  }
  mcp_http_stop(srv.http);
  teardown(&srv, masked ? &old : NULL);
  return rc;
}
