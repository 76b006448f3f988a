/* `sandboxd exec`: argv -> sbx_spec -> sandbox_run() -> exit status (and a JSON report). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "binds.h"
#include "cleanup.h"
#include "host_servers.h"
#include "hostfile.h"
#include "image.h"
#include "json.h"
#include "log.h"
#include "mcp_client.h"
#include "mcp_config.h"
#include "paths.h"
#include "proxy.h"
#include "seccomp.h"
#include "util.h"

static const char exec_usage[] =
    "usage: sandboxd exec [OPTIONS] FILE [ARG...]\n"
    "       sandboxd exec [OPTIONS] -c CODE [ARG...]\n"
    "Run Python in a fresh sandbox. Options:\n"
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
    "policy or setup errors. See sandboxd(1).\n";

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
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  memset(o, 0, sizeof *o);
  limits_unset(&o->limits);
  optind = 0; /* reset getopt, also across calls in unit tests */
  opterr = 0;
  int c;
  const char *last_arg = NULL; /* getopt clears optarg on its last call */
  /* '+': options end at FILE, so the script's own options pass through untouched. */
  while ((c = getopt_long(argc, argv, "+c:h", longopts, NULL)) != -1) {
    last_arg = optarg;
    switch (c) {
    case 'c':
      o->code = optarg;
      /* -c CODE ends option parsing, like python -c. */
      goto done;
    case 'h':
      o->help = true;
      return 0;
    case OPT_POLICY:
      o->policy = optarg;
      break;
    case OPT_ROOTFS:
      o->rootfs = optarg;
      break;
    case OPT_REPORT:
      o->report = optarg;
      break;
    case OPT_AUDIT_LOG:
      o->audit_log = optarg;
      break;
    case OPT_AUDIT_CODE:
      o->audit_code = true;
      break;
    case OPT_CONFIG:
      o->mcp_config = optarg;
      break;
    case OPT_IMPORT_CLAUDE:
      o->import_claude = true;
      break;
    case OPT_WORKDIR:
      if (!path_is_clean_abs(optarg) && strcmp(optarg, "/") != 0)
        return sbx_error_set(err, 0, "--workdir `%s`: must be an absolute path inside the sandbox", optarg);
      o->workdir = optarg;
      break;
    case OPT_BIND:
    case OPT_BIND_RW:
      if (bind_opts_add(&o->binds, optarg, c == OPT_BIND_RW, err) < 0)
        return -1;
      break;
    case OPT_ENV: {
      const char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg || strcspn(optarg, "=") != (size_t) (eq - optarg))
        return sbx_error_set(err, 0, "--env `%s`: expected NAME=VALUE", optarg);
      if (o->n_env >= EXEC_MAX_ENV)
        return sbx_error_set(err, 0, "too many --env options (at most %d)", EXEC_MAX_ENV);
      o->env[o->n_env++] = optarg;
      break;
    }
    case '?':
      if (optopt == 'c')
        return sbx_error_set(err, 0, "-c needs CODE");
      if (optopt)
        return sbx_error_set(err, 0, "unknown option `-%c` (see sandboxd exec --help)", optopt);
      return sbx_error_set(err, 0, "unknown or incomplete option `%s` (see sandboxd exec --help)",
                           argv[optind - 1]);
    default:
      if (parse_limit(c, optarg, &o->limits, err) < 0)
        return -1;
      break;
    }
  }
done:
  /* `-- PROGRAM [ARG...]`: getopt ate the `--` (unless it was the last option's argument). */
  if (!o->code && optind > 1 && optind < argc && !strcmp(argv[optind - 1], "--") &&
      argv[optind - 1] != last_arg) {
    o->program = argv[optind++];
    if (!o->program[0])
      return sbx_error_set(err, 0, "PROGRAM is empty");
  } else if (!o->code) {
    if (optind >= argc)
      return sbx_error_set(err, 0, "missing FILE or -c CODE (see sandboxd exec --help)");
    o->file = argv[optind++];
    if (!o->file[0])
      return sbx_error_set(err, 0, "FILE is empty");
  }
  o->args = argv + optind;
  o->n_args = argc - optind;
  return 0;
}

/* name (python3, or PROGRAM) along PATH inside the rootfs (lstat on the host path: the name only
 * has to exist; execve inside resolves any symlink against the sandbox's root); a name with a `/`
 * is taken as it is. */
static int find_program(const char *rootfs, char **env, const char *name, char **ret, sbx_error_t *err)
{
  if (strchr(name, '/')) {
    if (!(*ret = strdup(name)))
      return sbx_error_set(err, ENOMEM, "exec");
    return 0;
  }
  const char *path = NULL;
  for (char **e = env; *e; e++)
    if (!strncmp(*e, "PATH=", 5))
      path = *e + 5;
  char buf[4096];
  if (bufprintf(buf, sizeof buf, err, "%s", path ? path : "/usr/local/bin:/usr/bin") < 0)
    return sbx_error_prefix(err, "the sandbox's PATH");
  char *save = NULL;
  for (char *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char host[PATH_MAX * 2];
    struct stat st;
    if (dir[0] != '/' || strstr(dir, ".."))
      continue;
    if (bufprintf(host, sizeof host, NULL, "%s%s/%s", rootfs, dir, name) == 0 && lstat(host, &st) == 0) {
      if (asprintf(ret, "%s/%s", dir, name) < 0)
        return sbx_error_set(err, ENOMEM, "exec");
      return 0;
    }
  }
  return sbx_error_set(err, ENOENT, "no %s on the sandbox's PATH (%s) in rootfs `%s`", name,
                       path ? path : "unset", rootfs);
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

static void write_report(const struct report_file *rf, const struct sbx_policy *p,
                         const struct sbx_result *res, const sbx_error_t *failure)
{
  if (rf->dirfd < 0)
    return;
  json_writer_t *w = json_writer_new();
  if (!w)
    return;
  json_obj_begin(w);
  json_kv_str(w, "status", failure ? "setup_error" : sbx_status_name(res->status));
  json_kv_int(w, "exit_code", failure ? SBX_EXIT_SETUP : res->exit_code);
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

/* The code as text for the audit hash: -c CODE, or FILE's contents (bounded). */
static char *code_text(const struct exec_options *o, size_t *ret_len)
{
  char *data = NULL;
  if (o->code) {
    *ret_len = strlen(o->code);
    return strdup(o->code);
  }
  if (o->file && read_file(o->file, 64 << 20, &data, ret_len, NULL) == 0)
    return data;
  *ret_len = 0;
  return NULL;
}

static void audit(const struct exec_options *o, const struct sbx_policy *p, const struct sbx_limits *l,
                  const struct sbx_result *res, const sbx_error_t *err, const char *calls)
{
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
      .calls_json = calls,
  };
  audit_write(&r);
}

static int fail(const struct exec_options *o, struct report_file *rf, const struct sbx_policy *p,
                const sbx_error_t *err)
{
  log_sbx_error(err);
  write_report(rf, p, NULL, err);
  report_file_close(rf);
  audit(o, p, NULL, NULL, err, NULL);
  return SBX_EXIT_SETUP;
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
  char *python;
  char *file_real, *file_dst;
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
  free(r->python);
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

/* Limits, rootfs, the image's config, the environment and python3 in it. */
static int exec_prepare(const struct exec_options *o, const struct sbx_policy *p, struct exec_run *r,
                        sbx_error_t *err)
{
  struct sbx_spec *spec = &r->spec;
  if (policy_resolve_limits(p, &o->limits, &spec->limits, err) < 0 ||
      rootfs_find(o->rootfs, &r->rootfs, err) < 0 || image_load_config(r->rootfs, &r->icfg, err) < 0)
    return -1;
  /* The image's Env under the policy's, under --env; python3 found along the resulting PATH. */
  spec->policy = p;
  spec->extra_env = o->env;
  spec->n_extra_env = o->n_env;
  spec->base_env = r->icfg.env;
  spec->n_base_env = r->icfg.n_env;
  if (!(r->envp = sandbox_build_env(spec)))
    return sbx_error_set(err, ENOMEM, "exec");
  return find_program(r->rootfs, r->envp, o->program ? o->program : "python3", &r->python, err);
}

/* The binds, then the sandbox's argv: python3, FILE (bound read-only under /workspace) or -c CODE,
 * then the arguments. */
static int exec_command(struct exec_options *o, struct exec_run *r, sbx_error_t *err)
{
  if (bind_opts_resolve(&o->binds, err) < 0)
    return -1;
  memcpy(r->binds, o->binds.binds, o->binds.n * sizeof *r->binds);
  r->n_binds = o->binds.n;
  size_t nargv = 0;
  r->child_argv = calloc((size_t) o->n_args + 4, sizeof *r->child_argv);
  if (!r->child_argv)
    return sbx_error_set(err, ENOMEM, "exec");
  r->child_argv[nargv++] = r->python;
  if (o->program) {
    /* -- PROGRAM: its arguments only. */
  } else if (o->file) {
    struct stat st;
    if (!(r->file_real = realpath(o->file, NULL)) || stat(r->file_real, &st) < 0)
      return sbx_error_errno(err, "FILE `%s`", o->file);
    if (!S_ISREG(st.st_mode))
      return sbx_error_set(err, EINVAL, "FILE `%s` is not a regular file", o->file);
    const char *base = strrchr(r->file_real, '/') + 1;
    if (asprintf(&r->file_dst, "/workspace/%s", base) < 0) {
      r->file_dst = NULL;
      return sbx_error_set(err, ENOMEM, "exec");
    }
    r->binds[r->n_binds++] = (struct sbx_bind){.src = r->file_real, .dst = r->file_dst, .rw = false};
    r->child_argv[nargv++] = r->file_dst;
  } else {
    r->child_argv[nargv++] = "-c";
    r->child_argv[nargv++] = (char *) o->code;
  }
  for (int i = 0; i < o->n_args; i++)
    r->child_argv[nargv++] = o->args[i];

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
    spec->n_extra_env = o->n_env + host_servers_env(r->mcp.proxy, r->env + o->n_env);
    r->n_binds += host_servers_bind(&r->mcp.hs, &r->binds[r->n_binds]);
    spec->n_binds = r->n_binds;
    spec->bridge_fd = r->mcp.sandbox_fd;
  }
  return 0;
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

  int rc;
  struct exec_run r = {.mcp = {.sandbox_fd = -1}};
  struct sbx_result res;
  if (exec_prepare(o, p, &r, &err) < 0 || exec_command(o, &r, &err) < 0 ||
      exec_host_servers(o, p, &r, &err) < 0)
    goto out_fail;
  struct sbx_run_hooks hooks = {.fill = exec_mcp_fill, .dispatch = exec_mcp_dispatch, .ctx = &r.mcp};
  int run = sandbox_run_hooks(&r.spec, r.mcp.proxy ? &hooks : NULL, &res, &err);
  if (r.mcp.sandbox_fd >= 0)
    close(TAKE_FD(r.mcp.sandbox_fd));
  if (run < 0)
    goto out_fail;
  log_outcome(&r.spec.limits, &res);
  write_report(&rf, p, &res, NULL);
  report_file_close(&rf);
  char *calls = r.mcp.proxy ? proxy_calls_json(r.mcp.proxy) : NULL;
  audit(o, p, &r.spec.limits, &res, NULL, calls);
  free(calls);
  rc = res.exit_code;
  exec_run_free(&r);
  policy_free(p);
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
