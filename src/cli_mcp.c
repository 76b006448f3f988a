/* `sandboxd mcp`'s command line: the options, the setup (policy, rootfs, host servers, audit log,
 * signals, stdout), the server's loop, and the one teardown. */
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

#include "audit.h"
#include "cli.h"
#include "jsonrpc.h"
#include "log.h"
#include "mcp_client.h"
#include "mcp_config.h"
#include "mcp_internal.h"
#include "mcp_server.h"
#include "policy.h"
#include "proxy.h"
#include "sandbox.h"
#include "seccomp.h"
#include "util.h"

/* Kill and reap every sandbox, then give the client what is already written, briefly. */
static void shutdown_server(struct server *srv)
{
  /* A running call goes through call_finish, which writes its audit record: one answered at its
   * done byte is not recorded until its sandbox is reaped, and a run killed here is a run too. A
   * queued call never ran. */
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
  flush_output_for(srv, 2000);
}

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

enum {
  OPT_POLICY = 256,
  OPT_ROOTFS,
  OPT_MAX_CONCURRENT,
  OPT_MAX_QUEUE,
  OPT_MAX_MESSAGE,
  OPT_CONFIG,
  OPT_IMPORT_CLAUDE,
  OPT_AUDIT_LOG,
  OPT_WARM
};

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

/* Everything the server needs before it reads a request. Refuse to start rather than fail every
 * call: the client shows the server as failed, and stderr says why. *ret_masked: the signal mask
 * was changed (old holds the previous one). */
static int setup(struct server *srv, const char *policy_name, const char *rootfs, sigset_t *old,
                 bool *ret_masked, sbx_error_t *err)
{
  /* The audit log is opened before any sandbox runs (hostfile.h); a refused path is fatal. */
  if (audit_start(srv->audit_log, NULL, err) < 0 || policy_load(policy_name, &srv->policy, err) < 0 ||
      seccomp_validate(srv->policy, err) < 0 || rootfs_find(rootfs, &srv->rootfs, err) < 0 ||
      host_servers_load(&srv->hs, &srv->mcp_opts, err) < 0 ||
      host_servers_start(&srv->hs, srv->policy, STDERR_FILENO, err) < 0)
    return -1;
  sbx_error_t herr = {0};
  /* Every sandbox gets the package (base_spec), with host servers or without. */
  if (host_servers_find_helpers(&srv->hs, &herr) < 0)
    log_warn("%s: `from mcp import runtime` will fail%s", herr.msg,
             srv->hs.cfg->n ? ", and so will calls with `servers`" : "");

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
  sigset_t old;
  bool masked = false;
  int rc = 0;
  if (setup(&srv, policy_name, rootfs, &old, &masked, &err) < 0) {
    log_sbx_error(&err);
    rc = SBX_EXIT_SETUP;
  } else {
    serve(&srv);
    shutdown_server(&srv);
  }
  teardown(&srv, masked ? &old : NULL);
  return rc;
}
