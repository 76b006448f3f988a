/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd exec`: argv -> sbx_spec -> sandbox_run() -> exit status (and a JSON report). */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/hostfile.h"
#include "base/json.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/util.h"
#include "egress/egress_proxy.h"
#include "hostmcp/mcp_client.h"
#include "hostmcp/mcp_config.h"
#include "hostmcp/proxy.h"
#include "image/image.h"
#include "kernel/seccomp.h"
#include "run/audit.h"
#include "run/binds.h"
#include "run/exec_prog.h"
#include "run/host_servers.h"
#include "run/lang.h"
#include "sandbox/sandbox_run.h"

static const char exec_usage[] =
    "usage: sandboxd exec [OPTIONS] FILE [ARG...]\n"
    "       sandboxd exec [OPTIONS] -c CODE [ARG...]\n"
    "       sandboxd exec [OPTIONS] -m MODULE [ARG...]\n"
    "       sandboxd exec [OPTIONS] -- PROGRAM [ARG...]\n"
    "Run a script, Python code or module, or any program of the rootfs in a fresh sandbox. FILE runs\n"
    "by its extension (.py python3, .sh bash, .js/.mjs node), else its #! line, else python3;\n"
    "PROGRAM is found along the image's PATH inside the rootfs. Options:\n"
    "  --lang python|bash|javascript   the language of FILE or -c CODE (and so its rootfs)\n"
    "  --policy NAME|PATH    policy to enforce (default: default)\n"
    "  --timeout SEC         wall-clock limit          --memory SIZE   memory limit (e.g. 256M)\n"
    "  --pids N              process/thread limit      --cpus F        CPU limit in cores\n"
    "  --tmp-size SIZE       /tmp tmpfs size           --workspace-size SIZE  /workspace size\n"
    "  --shm-size SIZE       /dev/shm size             --nofile N      open files per process\n"
    "  --fsize SIZE          largest file written\n"
    "  --bind SRC:DST        bind host SRC read-only at DST\n"
    "  --bind-rw SRC:DST     bind host SRC writable at DST\n"
    "  --workdir DIR         working directory inside (default /workspace)\n"
    "  --env NAME=VALUE      add to the (otherwise fixed) environment\n"
    "  --allow-host HOST[:PORT]  egress to HOST (port 443 by default) if the policy's max_network\n"
    "                        permits, through the egress proxy (sandboxd.policy(5) \"Network\")\n"
    "  --rootfs NAME|DIR     root filesystem: a tree in the rootfs store (`sandboxd rootfs list`) or a\n"
    "                        path with a `/` (default: $SANDBOXD_ROOTFS, else python-3.14-slim in the\n"
    "                        store; see sandboxd(1) FILES)\n"
    "  --report FILE         write a JSON report of the run to FILE\n"
    "  --audit-log PATH|syslog|off   where the audit record goes (default: $SANDBOXD_AUDIT_LOG,\n"
    "                        else under $XDG_STATE_HOME/sandboxd/, or /var/log/sandboxd/ for root)\n"
    "  --audit-code          include the code itself in the audit record (default: its sha256)\n"
    "  --config FILE         host MCP servers the code may call through `mcp` (also\n"
    "                        $SANDBOXD_MCP_CONFIG); see sandboxd(1)\n"
    "  --import-claude       also the servers Claude Code would run here (~/.claude.json,\n"
    "                        and the approved ones of ./.mcp.json)\n"
    "Exit status: the code's own; 128+N if killed by signal N; 124 on timeout; 125 on usage,\n"
    "policy or setup errors; 126 if the program cannot be executed; 127 if it is not in the\n"
    "sandbox. See sandboxd(1).\n";

enum {
  OPT_POLICY = 256,
  OPT_TIMEOUT,
  OPT_MEMORY,
  OPT_PIDS,
  OPT_CPUS,
  OPT_BIND,
  OPT_BIND_RW,
  OPT_WORKDIR,
  OPT_ENV,
  OPT_ROOTFS,
  OPT_REPORT,
  OPT_TMP,
  OPT_WS,
  OPT_SHM,
  OPT_NOFILE,
  OPT_FSIZE,
  OPT_AUDIT_LOG,
  OPT_AUDIT_CODE,
  OPT_CONFIG,
  OPT_IMPORT_CLAUDE,
  OPT_LANG,
  OPT_ALLOW_HOST,
};

static int parse_limit(int opt, const char *arg, struct sbx_limits *l, sbx_error_t *err)
{
  uint64_t v;
  switch (opt) {
  case OPT_TIMEOUT:
    if (parse_duration_ms(arg, &v) < 0 || v == 0)
      return sbx_error_set(err, 0, "--timeout `%s`: expected seconds, e.g. 30 or 1.5", arg);
    l->timeout_ms = v;
    return 0;
  case OPT_CPUS:
    if (parse_milli(arg, &v) < 0 || v == 0)
      return sbx_error_set(err, 0, "--cpus `%s`: expected a number of cores, e.g. 0.5", arg);
    l->cpus_milli = v;
    return 0;
  case OPT_PIDS:
  case OPT_NOFILE:
    if (parse_u64(arg, &v) < 0 || v == 0 || v > INT_MAX)
      return sbx_error_set(err, 0, "%s `%s`: expected a positive whole number",
                           opt == OPT_PIDS ? "--pids" : "--nofile", arg);
    *(opt == OPT_PIDS ? &l->pids : &l->nofile) = v;
    return 0;
  default:
    break;
  }
  const char *name = opt == OPT_MEMORY ? "--memory"
                     : opt == OPT_TMP  ? "--tmp-size"
                     : opt == OPT_WS   ? "--workspace-size"
                     : opt == OPT_SHM  ? "--shm-size"
                                       : "--fsize";
  if (parse_size(arg, &v) < 0 || v == 0)
    return sbx_error_set(err, 0, "%s `%s`: expected a size, e.g. 256M or 1G", name, arg);
  switch (opt) {
  case OPT_MEMORY:
    l->memory_bytes = v;
    break;
  case OPT_TMP:
    l->tmp_bytes = v;
    break;
  case OPT_WS:
    l->workspace_bytes = v;
    break;
  case OPT_SHM:
    l->shm_bytes = v;
    break;
  default:
    l->fsize_bytes = v;
    break;
  }
  return 0;
}

/* An option that sets what runs, and how (the limits: parse_limit). */
static int parse_option(int c, char *arg, struct exec_options *o, sbx_error_t *err)
{
  switch (c) {
  case OPT_LANG:
    if (!lang_by_name(arg))
      return sbx_error_set(err, 0, "--lang `%s`: expected one of %s", arg, lang_names());
    o->lang = arg;
    return 0;
  case OPT_POLICY:
    o->policy = arg;
    return 0;
  case OPT_ROOTFS:
    o->rootfs = arg;
    return 0;
  case OPT_REPORT:
    o->report = arg;
    return 0;
  case OPT_AUDIT_LOG:
    o->audit_log = arg;
    return 0;
  case OPT_AUDIT_CODE:
    o->audit_code = true;
    return 0;
  case OPT_CONFIG:
    o->mcp_config = arg;
    return 0;
  case OPT_IMPORT_CLAUDE:
    o->import_claude = true;
    return 0;
  case OPT_WORKDIR:
    if (!path_is_clean_abs(arg) && strcmp(arg, "/") != 0)
      return sbx_error_set(err, 0, "--workdir `%s`: must be an absolute path inside the sandbox", arg);
    o->workdir = arg;
    return 0;
  case OPT_BIND:
  case OPT_BIND_RW:
    return bind_opts_add(&o->binds, arg, c == OPT_BIND_RW, err);
  case OPT_ENV: {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || strcspn(arg, "=") != (size_t) (eq - arg))
      return sbx_error_set(err, 0, "--env `%s`: expected NAME=VALUE", arg);
    if (o->n_env >= EXEC_MAX_ENV)
      return sbx_error_set(err, 0, "too many --env options (at most %d)", EXEC_MAX_ENV);
    o->env[o->n_env++] = arg;
    return 0;
  }
  case OPT_ALLOW_HOST:
    return policy_allow_opts_add(&o->allow_hosts, arg, err);
  default:
    return parse_limit(c, arg, &o->limits, err);
  }
}

int exec_parse_args(int argc, char **argv, struct exec_options *o, sbx_error_t *err)
{
  static const struct option longopts[] = {
      {"policy", required_argument, NULL, OPT_POLICY},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"memory", required_argument, NULL, OPT_MEMORY},
      {"pids", required_argument, NULL, OPT_PIDS},
      {"cpus", required_argument, NULL, OPT_CPUS},
      {"bind", required_argument, NULL, OPT_BIND},
      {"bind-rw", required_argument, NULL, OPT_BIND_RW},
      {"workdir", required_argument, NULL, OPT_WORKDIR},
      {"env", required_argument, NULL, OPT_ENV},
      {"rootfs", required_argument, NULL, OPT_ROOTFS},
      {"report", required_argument, NULL, OPT_REPORT},
      {"tmp-size", required_argument, NULL, OPT_TMP},
      {"workspace-size", required_argument, NULL, OPT_WS},
      {"shm-size", required_argument, NULL, OPT_SHM},
      {"nofile", required_argument, NULL, OPT_NOFILE},
      {"fsize", required_argument, NULL, OPT_FSIZE},
      {"audit-log", required_argument, NULL, OPT_AUDIT_LOG},
      {"audit-code", no_argument, NULL, OPT_AUDIT_CODE},
      {"config", required_argument, NULL, OPT_CONFIG},
      {"import-claude", no_argument, NULL, OPT_IMPORT_CLAUDE},
      {"lang", required_argument, NULL, OPT_LANG},
      {"allow-host", required_argument, NULL, OPT_ALLOW_HOST},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  memset(o, 0, sizeof *o);
  limits_unset(&o->limits);
  optind = 0; /* reset getopt, also across calls in unit tests */
  opterr = 0;
  int c, before;
  bool dashdash = false;
  /* '+': options end at FILE, so the script's own options pass through untouched. optind 0
   * restarts getopt, which then starts at 1. */
  while ((before = optind ? optind : 1), (c = getopt_long(argc, argv, "+c:m:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'c':
      o->code = optarg;
      /* -c CODE ends option parsing, like python -c. */
      goto done;
    case 'm':
      o->module = optarg;
      /* So does -m MODULE, like python -m. */
      goto done;
    case 'h':
      o->help = true;
      return 0;
    case '?':
      if (optopt == 'c' || optopt == 'm')
        return sbx_error_set(err, 0, "-%c needs %s", optopt, optopt == 'c' ? "CODE" : "MODULE");
      if (optopt)
        return sbx_error_set(err, 0, "unknown option `-%c` (see sandboxd exec --help)", optopt);
      return sbx_error_set(err, 0, "unknown or incomplete option `%s` (see sandboxd exec --help)",
                           argv[optind - 1]);
    default:
      if (parse_option(c, optarg, o, err) < 0)
        return -1;
      break;
    }
  }
  /* getopt stepped over a `--` of its own (not an option's argument): PROGRAM follows. */
  dashdash = optind == before + 1 && !strcmp(argv[before], "--");
done:
  if (o->module && (!o->module[0] || o->module[0] == '-'))
    return sbx_error_set(err, 0, "-m `%s`: expected a module name", o->module);
  if (o->module && o->lang && strcmp(o->lang, "python") != 0)
    return sbx_error_set(err, 0, "-m runs a Python module: not with --lang %s", o->lang);
  if (!o->code && !o->module) {
    if (optind >= argc)
      return sbx_error_set(err, 0,
                           "missing FILE, -c CODE, -m MODULE or -- PROGRAM (see sandboxd exec --help)");
    const char **what = dashdash ? &o->program : &o->file;
    *what = argv[optind++];
    if (!(*what)[0])
      return sbx_error_set(err, 0, "%s is empty", dashdash ? "PROGRAM" : "FILE");
  }
  o->args = argv + optind;
  o->n_args = argc - optind;
  return 0;
}

/* --report FILE: its directory, opened before the sandbox starts (open_report). */
struct report_file {
  const char *path;
  const char *name;
  int dirfd;
};

static int open_report(const char *path, const struct hostfile_guard *guard, struct report_file *rf,
                       sbx_error_t *err)
{
  if (!path)
    return 0;
  if (hostfile_open_parent(path, guard, 0, &rf->dirfd, &rf->name, err) < 0)
    return sbx_error_prefix(err, "--report");
  rf->path = path;
  return 0;
}

static void report_file_close(struct report_file *rf)
{
  if (rf->dirfd >= 0)
    close(rf->dirfd);
  rf->dirfd = -1;
}

/* 127 and 126 (the program is not there, or cannot run) are the shell's; anything else is ours. */
static int failure_status(const sbx_error_t *err)
{
  return err->status == SBX_EXIT_NOT_FOUND || err->status == SBX_EXIT_CANNOT_EXEC ? err->status
                                                                                  : SBX_EXIT_SETUP;
}

static void write_report(const struct report_file *rf, const struct sbx_policy *p,
                         const struct sbx_result *res, const sbx_error_t *failure, const char *egress)
{
  if (rf->dirfd < 0)
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  json_obj_begin(w);
  json_kv_str(w, "status", failure ? "setup_error" : sbx_status_name(res->status));
  json_kv_int(w, "exit_code", failure ? failure_status(failure) : res->exit_code);
  json_key(w, "signal");
  if (!failure && res->signal)
    json_int(w, res->signal);
  else
    json_null(w);
  json_kv_bool(w, "timed_out", !failure && res->timed_out);
  json_kv_uint(w, "execution_time_ms", failure ? 0 : res->execution_time_ms);
  json_kv_uint(w, "cpu_time_ms", failure ? 0 : res->cpu_time_ms);
  json_kv_uint(w, "memory_peak_bytes", failure ? 0 : res->memory_peak_bytes);
  json_kv_str_or_null(w, "policy", p ? p->name : NULL);
  json_kv_str_or_null(w, "policy_sha256", p ? p->sha256 : NULL);
  json_kv_bool(w, "pids_limit_hit", !failure && res->pids_limit_hit);
  json_key(w, "limits");
  if (failure)
    json_null(w);
  else
    json_str(w, res->limits);
  if (failure)
    json_kv_str(w, "error", failure->msg);
  if (egress) /* network proxy: the egress summary (sandboxd.policy(5), "Network") */
    json_kv_raw(w, "egress", egress, strlen(egress));
  json_obj_end(w);
  size_t len;
  const char *buf = json_writer_buf(w, &len);
  _cleanup_free_ char *line = buf ? malloc(len + 1) : NULL;
  sbx_error_t err;
  if (line) {
    memcpy(line, buf, len);
    line[len++] = '\n';
  }
  json_writer_free(w);
  /* A new file renamed over the name: a symlink or hardlink the code left there is replaced,
   * not written through. */
  if (!line)
    log_warn("cannot write report `%s`: %s", rf->path, strerror(ENOMEM));
  else if (hostfile_replace(rf->dirfd, rf->name, rf->path, line, len, 0666, &err) < 0)
    log_warn("cannot write report %s", err.msg);
}

/* The code as text for the audit hash: -c CODE, FILE's contents (bounded), or the command line
 * (-m MODULE, -- PROGRAM) with its arguments, one per line. */
static char *code_text(const struct exec_options *o, size_t *ret_len)
{
  char *data = NULL;
  if (o->code) {
    *ret_len = strlen(o->code);
    return strdup(o->code);
  }
  if (o->module || o->program) {
    size_t len = strlen(o->module ? o->module : o->program) + (o->module ? 3 : 0);
    for (int i = 0; i < o->n_args; i++)
      len += 1 + strlen(o->args[i]);
    if (!(data = malloc(len + 1)))
      goto none;
    char *p = stpcpy(stpcpy(data, o->module ? "-m " : ""), o->module ? o->module : o->program);
    for (int i = 0; i < o->n_args; i++)
      p = stpcpy(stpcpy(p, "\n"), o->args[i]);
    *ret_len = len;
    return data;
  }
  if (o->file && read_file(o->file, 64 << 20, &data, ret_len, NULL) == 0)
    return data;
none:
  *ret_len = 0;
  return NULL;
}

static void audit(const struct exec_options *o, const struct sbx_policy *p, const struct sbx_limits *l,
                  const struct sbx_result *res, const sbx_error_t *err, const char *calls, const char *egress)
{
  if (audit_off()) /* nothing to write: the code is not read again for its hash */
    return;
  size_t len;
  _cleanup_free_ char *code = code_text(o, &len);
  struct audit_record r = {
      .mode = "exec",
      .code = code,
      .code_len = len,
      .file = o->file,
      .policy = p,
      .limits = l,
      .result = res,
      .error = err ? err->msg : NULL,
      .error_exit = err ? failure_status(err) : 0,
      .calls_json = calls,
      .egress_json = egress,
  };
  audit_write(&r);
}

static int fail(const struct exec_options *o, struct report_file *rf, const struct sbx_policy *p,
                const sbx_error_t *err)
{
  log_sbx_error(err);
  write_report(rf, p, NULL, err, NULL);
  report_file_close(rf);
  audit(o, p, NULL, NULL, err, NULL, NULL);
  return failure_status(err);
}

/* ------------------------------------------------------------------ host MCP servers */

struct exec_mcp {
  struct host_servers hs;
  struct proxy *proxy;
  int sandbox_fd;
};

static void exec_mcp_free(struct exec_mcp *m)
{
  proxy_free(m->proxy);
  host_servers_free(&m->hs);
  if (m->sandbox_fd >= 0)
    close(m->sandbox_fd);
  *m = (struct exec_mcp){.sandbox_fd = -1};
}

static int exec_mcp_setup(const struct exec_options *o, const struct sbx_policy *pol, struct exec_mcp *m,
                          sbx_error_t *err)
{
  struct mcp_config_options co = {.path = o->mcp_config, .import_claude = o->import_claude};
  if (host_servers_load(&m->hs, &co, err) < 0)
    return -1;
  if (!m->hs.cfg->n)
    return 0;
  /* Host servers' chatter would mix with the script's stderr; it goes nowhere in exec. */
  if (host_servers_find_helpers(&m->hs, err) < 0 || host_servers_start(&m->hs, pol, -1, err) < 0)
    return -1;
  /* exec offers every configured server the policy allows. */
  const char *names[MCP_CONFIG_MAX_SERVERS];
  size_t n = 0;
  for (size_t i = 0; i < m->hs.cfg->n; i++)
    if (policy_allows_server(pol, m->hs.cfg->servers[i].name))
      names[n++] = m->hs.cfg->servers[i].name;
  if (!n)
    return sbx_error_set(err, 0, "policy `%s` allows none of the configured host MCP servers (proxy_servers)",
                         pol->name);
  return host_servers_proxy(&m->hs, names, n, &m->sandbox_fd, &m->proxy, err);
}

static size_t exec_mcp_fill(void *ctx, struct pollfd *pfds, size_t max, int *timeout_ms)
{
  struct exec_mcp *m = ctx;
  int t = mcp_hosts_timers(m->hs.hosts);
  if (t >= 0 && t < *timeout_ms)
    *timeout_ms = t;
  if (mcp_hosts_max_pollfds(m->hs.hosts) + 1 > max)
    return 0;
  size_t n = mcp_hosts_pollfds(m->hs.hosts, pfds);
  pfds[n++] = (struct pollfd){.fd = proxy_fd(m->proxy), .events = proxy_events(m->proxy)};
  return n;
}

static void exec_mcp_dispatch(void *ctx, const struct pollfd *pfds, size_t n)
{
  struct exec_mcp *m = ctx;
  mcp_hosts_dispatch(m->hs.hosts, pfds, n - 1);
  if (pfds[n - 1].revents && pfds[n - 1].fd == proxy_fd(m->proxy))
    proxy_handle(m->proxy, pfds[n - 1].revents);
}

/* Limits degrading to rlimits is said only on a terminal: piped stderr belongs to the code, and
 * the report and audit record say `degraded` anyway. */
static void exec_warning(enum sbx_warning kind, const char *msg)
{
  if (kind == SBX_WARN_DEGRADED && !isatty(STDERR_FILENO))
    return;
  log_warning(kind, msg);
}

/* ------------------------------------------------------------------ cmd_exec */

/* What one run builds before the sandbox starts; exec_run_free releases it. */
struct exec_run {
  char *rootfs;
  const struct sbx_lang *lang; /* what runs FILE or CODE; NULL: FILE's #! line, or PROGRAM */
  struct shebang shebang;      /* FILE's #! line, if it runs by it */
  char *prog;                  /* argv[0]: the interpreter or PROGRAM, inside the sandbox */
  char *file_real, *file_dst;
  int file_fd; /* with file_real: it, held (sbx_bind.fd) */
  char **child_argv;
  char **envp;
  struct image_config icfg;
  struct sbx_spec spec;
  struct sbx_bind binds[BIND_OPTS_MAX + 2];
  size_t n_binds;
  char *env[EXEC_MAX_ENV + HOST_SERVERS_N_ENV];
  struct exec_mcp mcp;
};

static void exec_run_free(struct exec_run *r)
{
  exec_mcp_free(&r->mcp);
  image_config_free(&r->icfg);
  free(r->rootfs);
  free(r->prog);
  if (r->file_real)
    close(r->file_fd);
  free(r->file_real);
  free(r->file_dst);
  free(r->child_argv);
  free(r->envp);
}

/* The host files this run writes are opened first, before anything runs: nothing the code
 * does during the run can change where they land, and a symlink an earlier run planted in a
 * tree this run's code can write (any --bind-rw source) is refused, not followed. */
static int open_outputs(const struct exec_options *o, struct hostfile_tree trees[BIND_OPTS_MAX],
                        struct report_file *rf, sbx_error_t *err)
{
  size_t n_trees = 0;
  bind_opts_writable_trees(&o->binds, trees, &n_trees);
  struct hostfile_guard guard = {.trees = trees, .n_trees = n_trees};
  audit_set_log_code(o->audit_code);
  if (audit_start(o->audit_log, &guard, err) < 0 || open_report(o->report, &guard, rf, err) < 0)
    return -1;
  return 0;
}

/* FILE (bound read-only under /workspace) and, when no language is given or known from its
 * extension, its #! line. */
static int exec_file(const struct exec_options *o, struct exec_run *r, sbx_error_t *err)
{
  /* Opened once and held, as every bind source (binds.h). Unlike a --bind source it may lie in a
   * --bind-rw tree (`--bind-rw .:/w tool.py`): this run's one sandbox binds it before its code
   * runs, and a symlink an earlier run planted there is not followed. */
  struct hostfile_guard rw = bind_opts_guard(&o->binds);
  struct stat st;
  if (bind_source_open("FILE", o->file, &rw, &r->file_real, &r->file_fd, err) < 0)
    return -1;
  if (fstat(r->file_fd, &st) < 0)
    return sbx_error_errno(err, "FILE `%s`", o->file);
  if (!S_ISREG(st.st_mode))
    return sbx_error_set(err, EINVAL, "FILE `%s` is not a regular file", o->file);
  if (asprintf(&r->file_dst, "/workspace/%s", strrchr(r->file_real, '/') + 1) < 0) {
    r->file_dst = NULL;
    return sbx_error_set(err, ENOMEM, "exec");
  }
  /* The name given, then the file it links to (`run -> tool.py`). */
  if (o->lang)
    r->lang = lang_by_name(o->lang);
  else if (!(r->lang = lang_by_file(o->file)))
    r->lang = lang_by_file(r->file_real);
  if (r->lang)
    return 0;
  char head[SHEBANG_MAX];
  _cleanup_close_ int fd = open(r->file_real, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  ssize_t n = fd < 0 ? -1 : read(fd, head, sizeof head);
  if (n < 0)
    return sbx_error_errno(err, "FILE `%s`", o->file);
  int k = shebang_parse(head, (size_t) n, &r->shebang, err);
  if (k < 0)
    return sbx_error_prefix(err, "FILE `%s`", o->file);
  /* Neither: Python, as exec has always run FILE. */
  if (!k)
    r->lang = lang_by_name("python");
  return 0;
}

/* The language whose rootfs this run uses: what runs FILE or CODE, else what a #! line or
 * PROGRAM names (`#!/usr/bin/env node`, `-- node app.js`), else none (the default rootfs). */
static const struct sbx_lang *rootfs_lang(const struct exec_options *o, const struct exec_run *r)
{
  if (r->lang)
    return r->lang;
  if (o->program)
    return lang_by_program(o->program);
  const char *base = strrchr(r->shebang.interp, '/');
  if (base && !strcmp(base, "/env") && r->shebang.arg[0] && r->shebang.arg[0] != '-')
    return lang_by_program(r->shebang.arg);
  return lang_by_program(r->shebang.interp);
}

static int find_program(const struct exec_options *o, struct exec_run *r, const char *path, const char *name,
                        sbx_error_t *err);

/* Limits, the language, its rootfs, the image's config, the environment, and argv[0] along the
 * resulting PATH inside the rootfs (or a bind over one of its directories). */
static int exec_prepare(struct exec_options *o, const struct sbx_policy *p, struct exec_run *r,
                        sbx_error_t *err)
{
  struct sbx_spec *spec = &r->spec;
  /* The binds first: FILE and the program lookup see their sources as the sandbox will. */
  if (bind_opts_resolve(&o->binds, err) < 0 || policy_resolve_limits(p, &o->limits, &spec->limits, err) < 0)
    return -1;
  if (o->file) {
    if (exec_file(o, r, err) < 0)
      return -1;
  } else if (!o->program) {
    r->lang = lang_by_name(o->lang ? o->lang : "python"); /* -c CODE, -m MODULE */
  }
  const struct sbx_lang *rl = o->lang ? lang_by_name(o->lang) : rootfs_lang(o, r);
  if (rootfs_find_for(o->rootfs, rl ? rl->rootfs : NULL, NULL, &r->rootfs, err) < 0) {
    if (rl && rl->rootfs && !o->rootfs)
      return sbx_error_hint(err, "%s, or pass --rootfs (%s)",
                            paths_build_tree() ? rl->build_hint : rl->installed_hint, rl->name);
    return -1;
  }
  if (image_load_config(r->rootfs, &r->icfg, err) < 0)
    return -1;
  /* The image's Env under the policy's, under --env; the program found along the resulting PATH. */
  spec->policy = p;
  spec->extra_env = o->env;
  spec->n_extra_env = o->n_env;
  spec->base_env = r->icfg.env;
  spec->n_base_env = r->icfg.n_env;
  if (!(r->envp = sandbox_build_env(spec)))
    return sbx_error_set(err, ENOMEM, "exec");
  const char *path = "/usr/local/bin:/usr/bin:/bin";
  for (char **e = r->envp; *e; e++)
    if (!strncmp(*e, "PATH=", 5))
      path = *e + 5;
  const char *name = r->lang ? r->lang->program : o->program ? o->program : r->shebang.interp;
  /* A path (a #! line's, or PROGRAM with a slash) is the kernel's to resolve inside the sandbox,
   * where a bind may provide it: not there is 127, not executable 126, as for a name here. */
  if (strchr(name, '/')) {
    if (!(r->prog = strdup(name)))
      return sbx_error_set(err, ENOMEM, "exec");
    return 0;
  }
  if (!r->lang && !o->program) {
    sbx_error_set(err, 0, "FILE `%s`: the #! line's interpreter `%s` is not an absolute path", o->file, name);
    err->status = SBX_EXIT_NOT_FOUND;
    return -1;
  }
  return find_program(o, r, path, name, err);
}

/* The --bind covering the sandbox directory dir (the longest destination that is dir or one of
 * its ancestors), or NULL. */
static const struct sbx_bind *covering_bind(const struct exec_options *o, const char *dir, size_t len)
{
  const struct sbx_bind *best = NULL;
  for (size_t i = 0; i < o->binds.n; i++) {
    const struct sbx_bind *b = &o->binds.binds[i];
    size_t l = strlen(b->dst);
    if (l <= len && !strncmp(dir, b->dst, l) && (l == len || dir[l] == '/') &&
        (!best || l > strlen(best->dst)))
      best = b;
  }
  return best;
}

/* name along PATH as the sandbox will see it: a PATH directory a --bind covers is looked up in
 * that bind's source (prog_in_bind: its links resolved inside it, never on the host), the others
 * in the rootfs (prog_find: never following the image's links on the host). */
static int find_program(const struct exec_options *o, struct exec_run *r, const char *path, const char *name,
                        sbx_error_t *err)
{
  char rest[PATH_MAX] = "";
  bool covered = false;
  for (const char *d = path; *d;) {
    size_t len = strcspn(d, ":");
    const struct sbx_bind *b = len && d[0] == '/' ? covering_bind(o, d, len) : NULL;
    if (b) {
      covered = true;
      char sub[PATH_MAX], inside[PATH_MAX];
      size_t l = strlen(b->dst);
      if (bufprintf(sub, sizeof sub, NULL, "%.*s", (int) (len - l), d + l) == 0 &&
          bufprintf(inside, sizeof inside, NULL, "%.*s/%s", (int) len, d, name) == 0 &&
          prog_in_bind(b->src, sub, name)) {
        if (!(r->prog = strdup(inside)))
          return sbx_error_set(err, ENOMEM, "exec");
        return 0;
      }
    } else if (len && bufcatf(rest, sizeof rest, NULL, "%s%.*s", rest[0] ? ":" : "", (int) len, d) < 0) {
      return sbx_error_set(err, ENAMETOOLONG, "PATH");
    }
    d += len + (d[len] == ':');
  }
  return prog_find(r->rootfs, covered ? rest : path, name, &r->prog, err);
}

/* The binds, then the sandbox's argv: the interpreter and FILE, CODE or MODULE, or PROGRAM, then
 * the arguments. */
static int exec_command(struct exec_options *o, struct exec_run *r, sbx_error_t *err)
{
  memcpy(r->binds, o->binds.binds, o->binds.n * sizeof *r->binds);
  r->n_binds = o->binds.n;
  size_t nargv = 0;
  r->child_argv = calloc((size_t) o->n_args + 6, sizeof *r->child_argv);
  if (!r->child_argv)
    return sbx_error_set(err, ENOMEM, "exec");
  char **a = r->child_argv;
  a[nargv++] = r->prog;
  const char *lang = r->lang ? r->lang->name : "";
  if (o->file) {
    r->binds[r->n_binds++] =
        (struct sbx_bind){.src = r->file_real, .dst = r->file_dst, .rw = false, .fd = r->file_fd};
    /* As the kernel runs a #! script: the interpreter, the line's one argument, the script. */
    if (!r->lang && r->shebang.arg[0])
      a[nargv++] = r->shebang.arg;
    a[nargv++] = r->file_dst;
  } else if (o->module) {
    a[nargv++] = "-m";
    a[nargv++] = (char *) o->module;
  } else if (o->code && !strcmp(lang, "javascript")) {
    /* An ES module, as execute_code runs it (top-level await); `--` ends node's own options. */
    a[nargv++] = "--input-type=module";
    a[nargv++] = "-e";
    a[nargv++] = (char *) o->code;
    a[nargv++] = "--";
  } else if (o->code) {
    a[nargv++] = "-c";
    a[nargv++] = (char *) o->code;
    /* bash -c takes $0 first: the arguments are $1..., as for a script. */
    if (!strcmp(lang, "bash"))
      a[nargv++] = "bash";
  }
  for (int i = 0; i < o->n_args; i++)
    a[nargv++] = o->args[i];

  struct sbx_spec *spec = &r->spec;
  spec->rootfs = r->rootfs;
  spec->argv = r->child_argv;
  spec->binds = r->binds;
  spec->n_binds = r->n_binds;
  /* --workdir, else the image's WorkingDir (unless it is just "/"), else /workspace. */
  spec->workdir = o->workdir                                             ? o->workdir
                  : r->icfg.workdir && strcmp(r->icfg.workdir, "/") != 0 ? r->icfg.workdir
                                                                         : NULL;
  spec->stdin_fd = 0;
  spec->stdout_fd = 1;
  spec->stderr_fd = 2;
  spec->bridge_fd = -1;
  /* We exit right after the run: pid 1 need not be reaped (spec.leave_at_exit). */
  spec->leave_at_exit = true;
  return 0;
}

/* Host MCP servers, when asked for: the bridge at fd 3, the `mcp` package, every configured
 * server allowed. Without them exec stays as it was (no extra bind, env or fds). */
static int exec_host_servers(const struct exec_options *o, const struct sbx_policy *p, struct exec_run *r,
                             sbx_error_t *err)
{
  const char *cfg_env = getenv("SANDBOXD_MCP_CONFIG");
  if (!o->mcp_config && !o->import_claude && !(cfg_env && *cfg_env))
    return 0;
  if (exec_mcp_setup(o, p, &r->mcp, err) < 0)
    return -1;
  if (r->mcp.proxy) {
    struct sbx_spec *spec = &r->spec;
    memcpy(r->env, o->env, o->n_env * sizeof *r->env);
    spec->extra_env = r->env;
    spec->n_extra_env = o->n_env + host_servers_env(&r->mcp.hs, r->mcp.proxy, r->env + o->n_env);
    r->n_binds += host_servers_bind(&r->mcp.hs, &r->binds[r->n_binds]);
    spec->n_binds = r->n_binds;
    spec->bridge_fd = r->mcp.sandbox_fd;
  }
  return 0;
}

/* The egress log of a network proxy run, read when the sandbox has ended: every attempt for the
 * audit record, the summary for --report. */
struct exec_egress {
  char *audit, *report;
};

static void exec_egress_ended(void *ctx, const struct sbx_sandbox *s)
{
  struct exec_egress *e = ctx;
  const struct egress_log *l = sandbox_egress(s);
  if (l) {
    e->audit = egress_log_json(l, true);
    e->report = egress_log_json(l, false);
  }
}

/* What a person running the code is told about limits it hit. */
static void log_outcome(const struct sbx_limits *l, const struct sbx_result *res)
{
  if (res->timed_out)
    log_error("timeout: the code ran longer than %llu.%03llus and was killed",
              (unsigned long long) (l->timeout_ms / 1000), (unsigned long long) (l->timeout_ms % 1000));
  if (res->status == SBX_STATUS_MEMORY_LIMIT) {
    char size[32];
    log_error("memory limit (%s) exceeded", format_size(l->memory_bytes, size, sizeof size));
  }
  if (res->pids_limit_hit)
    log_warn("the code reached the process limit (%llu)", (unsigned long long) l->pids);
}

/* A run's policy once it has ended well, until the process exits (exec_main). A volatile store is
 * never dropped by the compiler. */
static struct sbx_policy *volatile exec_policy_kept;

/* cmd_exec once o is there: what it holds is freed by the caller, whichever way this returns. */
static int exec_main(struct exec_options *o, int argc, char **argv)
{
  sbx_error_t err = {0};
  sbx_warn_set_handler(exec_warning);
  if (exec_parse_args(argc, argv, o, &err) < 0) {
    log_sbx_error(&err);
    return SBX_EXIT_SETUP;
  }
  if (o->help) {
    fputs(exec_usage, stdout);
    return 0;
  }
  struct hostfile_tree trees[BIND_OPTS_MAX];
  struct report_file rf = {.dirfd = -1};
  if (open_outputs(o, trees, &rf, &err) < 0)
    return fail(o, &rf, NULL, &err);
  struct sbx_policy *p = NULL;
  /* Syscall names are checked when the filter is compiled (or were, when it was cached). */
  if (policy_load(o->policy, &p, &err) < 0)
    return fail(o, &rf, NULL, &err);
  if (policy_apply_network(p, &o->allow_hosts, &err) < 0) {
    int rc = fail(o, &rf, p, &err);
    policy_free(p);
    return rc;
  }

  int rc;
  struct exec_run r = {.mcp = {.sandbox_fd = -1}};
  struct sbx_result res;
  if (exec_prepare(o, p, &r, &err) < 0 || exec_command(o, &r, &err) < 0 ||
      exec_host_servers(o, p, &r, &err) < 0)
    goto out_fail;
  struct exec_egress eg = {0};
  struct sbx_run_hooks hooks = {.fill = r.mcp.proxy ? exec_mcp_fill : NULL,
                                .dispatch = exec_mcp_dispatch,
                                .ctx = &r.mcp,
                                .ended = exec_egress_ended,
                                .ended_ctx = &eg};
  int run = sandbox_run_hooks(&r.spec, &hooks, &res, &err);
  if (r.mcp.sandbox_fd >= 0)
    close(TAKE_FD(r.mcp.sandbox_fd));
  if (run < 0)
    goto out_fail;
  log_outcome(&r.spec.limits, &res);
  write_report(&rf, p, &res, NULL, eg.report);
  report_file_close(&rf);
  char *calls = r.mcp.proxy ? proxy_calls_json(r.mcp.proxy) : NULL;
  audit(o, p, &r.spec.limits, &res, NULL, calls, eg.audit);
  free(calls);
  free(eg.audit);
  free(eg.report);
  rc = res.exit_code;
  exec_run_free(&r);
  /* The process exits next and its memory with it: the policy's ~400 rules are not freed one
   * by one (80K instructions on every exec's critical path). Kept reachable, so valgrind and
   * LeakSanitizer see no leak. */
  exec_policy_kept = p;
  return rc;

out_fail:
  rc = fail(o, &rf, p, &err);
  exec_run_free(&r);
  policy_free(p);
  return rc;
}

int cmd_exec(int argc, char **argv)
{
  struct exec_options o = {0};
  int rc = exec_main(&o, argc, argv);
  bind_opts_free(&o.binds);
  return rc;
}
