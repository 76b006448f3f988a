/* Unit tests for the policy parser (src/policy/policy.c), loader (policy_load.c), canonical text
 * (policy_format.c) and limit resolution. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "check.h"
#include "kernel/seccomp.h"
#include "policy/policy.h"

/* A complete, minimal policy; tests append or replace lines. */
static const char base[] =
    "sandboxd-policy 1\n"
    "name t\n"
    "description test policy\n"
    "timeout 30s\nmax_timeout 120s\nmemory 512M\nmax_memory 4G\npids 128\nmax_pids 1024\n"
    "cpus 1\nmax_cpus 2\ntmp_size 64M\nmax_tmp_size 1G\nworkspace_size 128M\nmax_workspace_size 2G\n"
    "shm_size 64M\nmax_shm_size 1G\nnofile 1024\nmax_nofile 65536\nfsize 128M\nmax_fsize 2G\n"
    "output_limit 1M\nmax_output_limit 64M\nmax_artifacts 16\nartifact_limit 16M\n"
    "uid 1000\ngid 1000\nhost_id_range 1879048192 65536\nhostname sandbox\n"
    "inotify_instances 16\ninotify_watches 8192\nfanotify_groups 0\nfanotify_marks 0\nnamespaces 2\n"
    "sigpending 1024\nmsgqueue 128K\nmemlock 1M\n"
    "no_new_privs yes\ndrop_capabilities yes\nreadonly_root yes\nmask_proc yes\ncgroup required\n"
    "fork_template_calls 256\nsession_idle 900s\nsession_max_life 7200s\nmax_sessions "
    "16\nmax_sessions_per_token 4\n"
    "env PATH=/usr/bin\nproxy_servers *\nproxy_request_limit 16M\nnetwork none\nmax_network none\n"
    "egress_connections 4\negress_bytes_up 1M\negress_bytes_down 8M\negress_connection_time 60s\n"
    "seccomp_default errno ENOSYS\nseccomp_badarch kill\n"
    "group io \"basic io\"\n"
    "allow read write\n"
    "approve_host_calls none\n"
    "max_tasks 16\n";

static struct sbx_policy *parse(const char *extra, sbx_error_t *err)
{
  size_t n = strlen(base) + strlen(extra) + 1;
  char *text = malloc(n);
  snprintf(text, n, "%s%s", base, extra);
  struct sbx_policy *p = NULL;
  memset(err, 0, sizeof *err);
  if (policy_parse_string(text, "t.policy", ".", &p, err) < 0)
    p = NULL;
  free(text);
  return p;
}

/* base with one line replaced */
static struct sbx_policy *parse_replaced(const char *old, const char *new, sbx_error_t *err)
{
  char text[sizeof base + 16384];
  const char *at = strstr(base, old);
  if (!at)
    return NULL;
  snprintf(text, sizeof text, "%.*s%s%s", (int) (at - base), base, new, at + strlen(old));
  struct sbx_policy *p = NULL;
  memset(err, 0, sizeof *err);
  if (policy_parse_string(text, "t.policy", ".", &p, err) < 0)
    p = NULL;
  return p;
}

static int check_failure(struct sbx_policy *p, const sbx_error_t *err, const char *needle)
{
  if (p) {
    policy_free(p);
    return 0;
  }
  if (!strstr(err->msg, needle)) {
    fprintf(stderr, "  message `%s` lacks `%s`\n", err->msg, needle);
    return 0;
  }
  return 1;
}

static int replaced_fails_with(const char *old, const char *new, const char *needle)
{
  sbx_error_t err;
  return check_failure(parse_replaced(old, new, &err), &err, needle);
}

static int fails_with(const char *extra, const char *needle)
{
  sbx_error_t err;
  struct sbx_policy *p = parse(extra, &err);
  if (p) {
    policy_free(p);
    fprintf(stderr, "  expected failure for: %s", extra);
    return 0;
  }
  if (!strstr(err.msg, needle)) {
    fprintf(stderr, "  message `%s` lacks `%s`\n", err.msg, needle);
    return 0;
  }
  return 1;
}

static void test_valid(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p != NULL);
  if (!p) {
    fprintf(stderr, "  %s\n", err.msg);
    return;
  }
  CHECK(strcmp(p->name, "t") == 0);
  CHECK(strcmp(p->description, "test policy") == 0);
  CHECK(p->limits.timeout_ms == 30000);
  CHECK(p->max.timeout_ms == 120000);
  CHECK(p->limits.memory_bytes == 512ULL << 20);
  CHECK(p->max.memory_bytes == 4ULL << 30);
  CHECK(p->limits.cpus_milli == 1000);
  CHECK(p->limits.artifacts == 16 && p->limits.artifact_bytes == 16ULL << 20);
  CHECK(p->uid == 1000 && p->host_id_start == 1879048192 && p->host_id_count == 65536);
  CHECK(p->budgets.inotify_instances == 16 && p->budgets.inotify_watches == 8192 &&
        p->budgets.fanotify_groups == 0);
  CHECK(p->budgets.namespaces == 2 && p->budgets.sigpending == 1024 &&
        p->budgets.msgqueue_bytes == 128 << 10 && p->budgets.memlock_bytes == 1 << 20);
  CHECK(p->n_rules == 2);
  CHECK(p->n_env == 1);
  CHECK(p->default_action == SBX_ACT_ERRNO && p->default_errno == 38);
  CHECK(p->badarch_action == SBX_ACT_KILL);
  CHECK(strlen(p->sha256) == 64);
  policy_free(p);
}

static void test_errors(void)
{
  /* Each error names file:line. */
  CHECK(fails_with("bogus_key 1\n", "t.policy:63: unknown key `bogus_key`"));
  CHECK(fails_with("host_uid 65534\n", "`host_uid` was replaced by `host_id_range START COUNT`"));
  CHECK(fails_with("timeout 10s\n", "`timeout` is defined twice"));
  CHECK(fails_with("env PATH=/x\n", "`env PATH` is defined twice"));
  CHECK(fails_with("env X=${HOME}\n", "`env X`: `${HOME}` is not a variable (the one is ${memory_mib})"));
  CHECK(fails_with("env X=a${memory_mib}${memory\n", "`${memory` is not a variable"));
  CHECK(fails_with("allow read\n", "`read` already has a rule"));
  CHECK(fails_with("group io \"again\"\n", "group `io` is defined twice"));
  CHECK(replaced_fails_with("memory 512M", "memory lots", "bad size"));
  CHECK(fails_with("include ../x.policy\n", "same directory"));
  CHECK(fails_with("allow ioctl when arg1 > 5\n", "condition must be"));
  CHECK(fails_with("allow ioctl when arg9 == 5\n", "arg0..arg5"));
  CHECK(fails_with("allow socket when arg0 == NOPE\n", "unknown constant `NOPE`"));
  CHECK(fails_with("errno EWHAT mount\n", "known error name"));
  CHECK(fails_with("allow socket when arg0 == AF_UNIX\nallow socket\n", "cannot be combined"));
  CHECK(fails_with("allow socket\nallow socket when arg0 == AF_UNIX\n", "cannot be combined"));
  CHECK(fails_with("errno EPERM ioctl when arg1 == 1\nerrno EPERM ioctl\n", "conflict"));
  CHECK(fails_with("allow clone when arg0 & 0xf == 0x10\n", "outside the mask"));
  CHECK(fails_with("allow x when arg0 == 0x100000000\n", "low 32 bits"));
  CHECK(fails_with("proc_mask /etc/passwd\n", "not a path under /proc"));
  CHECK(replaced_fails_with("hostname sandbox", "hostname a/b", "may only hold"));
  CHECK(fails_with("allow Read\n", "bad syscall name"));

  sbx_error_t err;
  struct sbx_policy *p = NULL;
  CHECK(policy_parse_string("", "e.policy", ".", &p, &err) < 0 && strstr(err.msg, "first line"));
  CHECK(policy_parse_string("sandboxd-policy 2\n", "e.policy", ".", &p, &err) < 0 &&
        strstr(err.msg, "unsupported policy version"));
  CHECK(policy_parse_string("sandboxd-policy 1\nname x\n", "e.policy", ".", &p, &err) < 0 &&
        strstr(err.msg, "missing key"));
  /* A rule before any group has no reason for an auditor to read. */
  CHECK(policy_parse_string("sandboxd-policy 1\nallow read\n", "e.policy", ".", &p, &err) < 0 &&
        strstr(err.msg, "before any `group`"));
  /* uid 0 is refused: code never runs as root inside. */
  char *text = strdup(base);
  char *u = strstr(text, "uid 1000");
  memcpy(u, "uid 0   ", 8);
  CHECK(policy_parse_string(text, "u.policy", ".", &p, &err) < 0 && strstr(err.msg, "must not be 0"));
  free(text);
  /* A default above its max is refused. */
  CHECK(replaced_fails_with("pids 128", "pids 9999", "above `max_pids`"));
  CHECK(replaced_fails_with("no_new_privs yes", "no_new_privs maybe", "expected yes or no"));
  CHECK(replaced_fails_with("timeout 30s", "timeout 0", "bad duration"));
  CHECK(replaced_fails_with("cgroup required", "cgroup maybe", "expected required or fallback-rlimit"));
  /* The host id range never holds root, nor (uid_t) -1. */
  CHECK(replaced_fails_with("host_id_range 1879048192 65536", "host_id_range 0 10", "1 <= START"));
  CHECK(replaced_fails_with("host_id_range 1879048192 65536", "host_id_range 4294967290 6", "<= 4294967295"));
  CHECK(replaced_fails_with("host_id_range 1879048192 65536", "host_id_range 100000 0", "1 <= START"));
  CHECK(replaced_fails_with("host_id_range 1879048192 65536", "host_id_range 100000", "takes START COUNT"));
  CHECK(fails_with("host_id_range 1 1\n", "`host_id_range` is defined twice"));
  CHECK(replaced_fails_with("host_id_range 1879048192 65536", "# no range", "missing key `host_id_range`"));
  /* Budgets: 0 is a budget (none); INT_MAX is the most a kernel count holds. */
  CHECK(replaced_fails_with("inotify_instances 16", "inotify_instances 2147483648", "bad count"));
  CHECK(replaced_fails_with("sigpending 1024", "sigpending lots", "bad count"));
  CHECK(replaced_fails_with("namespaces 2", "namespaces 1", "at least 2"));
  CHECK(replaced_fails_with("msgqueue 128K", "msgqueue 1Q", "bad size"));
  CHECK(replaced_fails_with("artifact_limit 16M", "artifact_limit lots", "bad size"));
  CHECK(replaced_fails_with("max_artifacts 16\n", "", "missing key `max_artifacts`"));
  CHECK(replaced_fails_with("fanotify_marks 0", "fanotify_groups 1", "defined twice"));
  {
    sbx_error_t e;
    struct sbx_policy *q = parse_replaced("inotify_instances 16", "inotify_instances 0", &e);
    CHECK(q && q->budgets.inotify_instances == 0);
    policy_free(q);
  }
  CHECK(replaced_fails_with("proxy_servers *", "proxy_servers * memory", "stand alone"));
  CHECK(replaced_fails_with("proxy_servers *", "proxy_servers a/b", "not a server name"));
  {
    sbx_error_t e;
    struct sbx_policy *q = parse_replaced("proxy_servers *", "proxy_servers memory everything", &e);
    CHECK(q && policy_allows_server(q, "memory") && policy_allows_server(q, "everything") &&
          !policy_allows_server(q, "other"));
    policy_free(q);
    q = parse_replaced("proxy_servers *", "proxy_servers none", &e);
    CHECK(q && !policy_allows_server(q, "memory"));
    policy_free(q);
    q = parse_replaced("proxy_servers *", "proxy_servers *", &e);
    CHECK(q && policy_allows_server(q, "anything"));
    policy_free(q);
  }
}

static void test_conditions(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("group net \"n\"\n"
                               "allow socket when arg0 in AF_UNIX,AF_INET,AF_INET6\n"
                               "allow clone when arg0 & CLONE_NEWUSER|CLONE_NEWNS == 0\n"
                               "errno EPERM ioctl when arg1 == TIOCSTI\n"
                               "allow ioctl\n",
                               &err);
  CHECK(p != NULL);
  if (!p) {
    fprintf(stderr, "  %s\n", err.msg);
    return;
  }
  /* `in` expands to one rule per value; all compare the low 32 bits. */
  int sockets = 0;
  for (size_t i = 0; i < p->n_rules; i++) {
    const struct sbx_rule *r = &p->rules[i];
    if (!strcmp(r->syscall, "socket")) {
      sockets++;
      CHECK(r->cmp == SBX_CMP_EQ32 && r->mask == 0xffffffffULL && r->arg == 0);
    }
    if (!strcmp(r->syscall, "clone"))
      CHECK(r->cmp == SBX_CMP_MASKED_EQ && r->mask == (0x10000000ULL | 0x00020000ULL) && r->value == 0);
    if (!strcmp(r->syscall, "ioctl") && r->cmp != SBX_CMP_ANY)
      CHECK(r->action == SBX_ACT_ERRNO && r->errno_value == 1 && r->value == 0x5412 && r->arg == 1);
  }
  CHECK(sockets == 3);
  /* A condition longer than its buffer is an error, not an overrun (it once overflowed the stack). */
  {
    char line[1024] = "group long \"l\"\nallow ioctl when arg2 & CLONE_NEWNS";
    for (int i = 0; i < 60; i++)
      strcat(line, "|CLONE_NEWNS");
    strcat(line, " == 0\n");
    sbx_error_t e2;
    CHECK(check_failure(parse(line, &e2), &e2, "condition too long"));
  }
  /* The canonical text of conditions: args and values as "0x%llx" writes them, 0 and 2^32-1 included. */
  {
    sbx_error_t e2;
    struct sbx_policy *q = parse("group c \"c\"\nallow made_up_a when arg5 & 0xff00 == 0\n"
                                 "allow made_up_b when arg0 == 4294967295\nallow made_up_b when arg0 == 0\n",
                                 &e2);
    char *canon = q ? policy_format_canonical(q) : NULL;
    /* Keys padded to 18 columns (longer ones not), sizes in their largest exact unit, ms as s. */
    CHECK(canon && strstr(canon, "\nname               t\n") && strstr(canon, "\ntimeout            30s\n") &&
          strstr(canon, "\nmax_workspace_size 2G\n") && strstr(canon, "\negress_connection_time 60s\n") &&
          strstr(canon, "\nuid                1000\ngid                1000\n"));
    CHECK(canon && strstr(canon, "allow made_up_a when arg5 & 0xff00 == 0x0\n") &&
          strstr(canon, "allow made_up_b when arg0 == 0xffffffff\n") &&
          strstr(canon, "allow made_up_b when arg0 == 0x0\n") && strstr(canon, "group c \"c\"\n"));
    free(canon);
    policy_free(q);
  }
  /* Its edge: "arg2 == VALUE" of 511 bytes is kept whole, 512 is refused. */
  {
    char line[1024], value[600];
    for (int len = 511; len <= 512; len++) {
      size_t vl = (size_t) len - strlen("arg2 == ");
      memset(value, '0', vl); /* "0|0|...": still 0 */
      for (size_t i = vl % 2 ? 1 : 2; i < vl; i += 2)
        value[i] = '|';
      value[vl] = '\0';
      snprintf(line, sizeof line, "group long \"l\"\nallow made_up_call when arg2 == %s\n", value);
      sbx_error_t e2;
      struct sbx_policy *q = parse(line, &e2);
      if (len == 512) {
        CHECK(check_failure(q, &e2, "condition too long"));
        continue;
      }
      const struct sbx_rule *kept = NULL;
      for (size_t i = 0; q && i < q->n_rules; i++)
        if (!strcmp(q->rules[i].syscall, "made_up_call"))
          kept = &q->rules[i];
      CHECK(kept && kept->cond_text && strlen(kept->cond_text) == 511 &&
            !strncmp(kept->cond_text, "arg2 == 0|0|", 12));
      policy_free(q);
    }
  }
  /* The filter compiles, and the conditional denial goes to the stacked exception filter. */
  struct sbx_bpf bpf;
  CHECK(seccomp_compile(p, 0, &bpf, &err) == 0);
  CHECK(bpf.main_len > 0 && bpf.except_prog != NULL && bpf.except_len > 0);
  seccomp_bpf_free(&bpf);
  policy_free(p);

  p = parse("group x \"x\"\nallow not_a_syscall\n", &err);
  CHECK(p != NULL);
  if (p) {
    CHECK(seccomp_validate(p, &err) < 0 && strstr(err.msg, "unknown syscall `not_a_syscall`") &&
          strstr(err.msg, "t.policy:64"));
    policy_free(p);
  }
}

static void test_roundtrip(void)
{
  /* `policy show` output is itself a policy with the same hash. */
  sbx_error_t err;
  struct sbx_policy *p = parse("group net \"n\"\nallow socket when arg0 in AF_UNIX,AF_INET\n", &err);
  CHECK(p != NULL);
  if (!p)
    return;
  char *text = policy_format(p);
  /* Every budget is listed, with what enforces it. */
  CHECK(strstr(text, "\nhost_id_range      1879048192 65536   # ") != NULL);
  CHECK(strstr(text, "\ninotify_instances  16   # user.max_inotify_instances") != NULL);
  CHECK(strstr(text, "\nnamespaces         2   # user.max_") != NULL);
  CHECK(strstr(text, "\nsigpending         1024   # RLIMIT_SIGPENDING") != NULL);
  CHECK(strstr(text, "\nmsgqueue           128K   # RLIMIT_MSGQUEUE") != NULL);
  CHECK(strstr(text, "\nmemlock            1M   # RLIMIT_MEMLOCK") != NULL);
  CHECK(strstr(text, "\nmax_artifacts      16\nartifact_limit     16M\n") != NULL);
  struct sbx_policy *q = NULL;
  CHECK(policy_parse_string(text, "show", ".", &q, &err) == 0);
  if (q) {
    CHECK(strcmp(p->sha256, q->sha256) == 0);
    policy_free(q);
  } else {
    fprintf(stderr, "  %s\n", err.msg);
  }
  free(text);
  /* The hash is over the canonical text: policy_format() without its trailing comments. */
  char *canon = policy_format_canonical(p);
  CHECK(canon != NULL);
  if (canon) {
    char hex[65];
    sha256_hex(canon, strlen(canon), hex);
    CHECK(strcmp(hex, p->sha256) == 0);
    CHECK(strchr(canon, '#') == NULL);
    CHECK(strstr(canon, "\nmsgqueue           128K\n") != NULL);
    free(canon);
  }
  /* Any change in effect changes the hash. */
  struct sbx_policy *r = parse("group net \"n\"\nallow socket when arg0 in AF_UNIX,AF_INET6\n", &err);
  CHECK(r && strcmp(p->sha256, r->sha256) != 0);
  policy_free(r);
  policy_free(p);
}

static void test_limits(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p != NULL);
  if (!p)
    return;
  struct sbx_limits req, out;
  limits_unset(&req);
  CHECK(policy_resolve_limits(p, &req, &out, &err) == 0 && out.timeout_ms == 30000);
  req.timeout_ms = 5000; /* tighten */
  CHECK(policy_resolve_limits(p, &req, &out, &err) == 0 && out.timeout_ms == 5000);
  req.timeout_ms = 120000; /* loosen up to the max */
  CHECK(policy_resolve_limits(p, &req, &out, &err) == 0 && out.timeout_ms == 120000);
  req.timeout_ms = 120001; /* beyond */
  CHECK(policy_resolve_limits(p, &req, &out, &err) < 0 && strstr(err.msg, "--timeout") &&
        strstr(err.msg, "max_timeout"));
  limits_unset(&req);
  req.memory_bytes = 5ULL << 30;
  CHECK(policy_resolve_limits(p, &req, &out, &err) < 0 && strstr(err.msg, "--memory"));
  policy_free(p);
}

static void test_load(void)
{
  /* A name goes through the search path, whose first directory is $SANDBOXD_POLICY_DIR (read
   * once, so set before the first lookup); a path is read as it is. */
  setenv("SANDBOXD_POLICY_DIR", "policy", 1);
  sbx_error_t err = {0};
  struct sbx_policy *p = NULL;
  CHECK(policy_load("strict", &p, &err) == 0 && p && strcmp(p->name, "strict") == 0 &&
        strcmp(p->path, "policy/strict.policy") == 0);
  policy_free(TAKE_PTR(p));
  CHECK(policy_load(NULL, &p, &err) == 0 && p && strcmp(p->name, "default") == 0);
  policy_free(TAKE_PTR(p));
  CHECK(strncmp(policy_search_path(), "policy:", 7) == 0);
  CHECK(policy_load("no-such-policy", &p, &err) < 0 && err.errnum == ENOENT &&
        strstr(err.msg, "policy `no-such-policy` not found in policy:") != NULL);
  CHECK(policy_load("Bad Name", &p, &err) < 0 &&
        strstr(err.msg, "use a name like `default` or a path") != NULL);
  /* A fragment parses on its own (policy check) but is not a policy to run under. */
  CHECK(policy_load("policy/syscalls.inc", &p, &err) < 0 &&
        strstr(err.msg, "is a fragment for `include`") != NULL);
  CHECK(policy_load_file("policy/syscalls.inc", &p, &err) == 0 && p && !p->sha256[0]);
  policy_free(TAKE_PTR(p));
}

static void test_shipped(void)
{
  /* The shipped policies parse and compile (run from the repository root). */
  static const char *files[] = {"policy/default.policy", "policy/ci.policy", "policy/strict.policy"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    sbx_error_t err = {0};
    struct sbx_policy *p = NULL;
    CHECK(policy_load_file(files[i], &p, &err) == 0);
    if (!p) {
      fprintf(stderr, "  %s\n", err.msg);
      continue;
    }
    CHECK(seccomp_validate(p, &err) == 0);
    struct sbx_bpf bpf;
    CHECK(seccomp_compile(p, 0, &bpf, &err) == 0);
    seccomp_bpf_free(&bpf);
    policy_free(p);
  }
}

/* In a child with filter installed: memfd_create's errno (0: it worked), then shmget's. */
static int errnos_under(const struct sbx_bpf *bpf)
{
  pid_t pid = fork();
  if (pid == 0) {
    sbx_error_t err;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(bpf, &err) < 0)
      _exit(255);
    int fd = memfd_create("t", MFD_CLOEXEC);
    int e1 = fd < 0 ? errno : 0;
    int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    int e2 = id < 0 ? errno : 0;
    if (id >= 0)
      shmctl(id, IPC_RMID, NULL);
    _exit(e1 * 16 + e2 > 254 ? 254 : e1 * 16 + e2);
  }
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
    return -1;
  return WEXITSTATUS(st);
}

static void test_rlimit_variant(void)
{
  /* Without a cgroup the filter refuses what holds memory outside RLIMIT_AS, even though the
   * policy allows it; with one, the policy's filter is unchanged. */
  sbx_error_t err = {0};
  struct sbx_policy *p = NULL;
  CHECK(policy_load_file("policy/ci.policy", &p, &err) == 0);
  if (!p)
    return;
  CHECK(seccomp_policy_allows(p, "memfd_create") && seccomp_policy_allows(p, "shmget"));
  struct sbx_bpf plain, rl;
  CHECK(seccomp_compile(p, 0, &plain, &err) == 0);
  CHECK(seccomp_compile(p, SBX_SECCOMP_RLIMIT, &rl, &err) == 0);
  CHECK(rl.except_prog != NULL && rl.except_len > plain.except_len);
  CHECK(errnos_under(&plain) == 0);
  CHECK(errnos_under(&rl) == ENOMEM * 16 + ENOSPC);
  seccomp_bpf_free(&plain);
  seccomp_bpf_free(&rl);
  policy_free(p);
}

static void test_network(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p && p->network == SBX_NET_NONE && p->max_network == SBX_NET_NONE && p->n_allow_hosts == 0);
  /* Strict: --allow-host is a usage error, and nothing changed. */
  CHECK(p && policy_add_allow_host(p, "--allow-host", "pypi.org", &err) < 0 &&
        strstr(err.msg, "--allow-host pypi.org: policy `t` allows no network (max_network none)"));
  CHECK(p && p->network == SBX_NET_NONE && p->n_allow_hosts == 0);
  CHECK(p && policy_check_network(p, &err) == 0);
  policy_free(p);

  p = parse_replaced("max_network none\n",
                     "max_network proxy\n"
                     "allow_host PyPI.org.   # the package index\n"
                     "allow_host *.pythonhosted.org\n"
                     "allow_host 127.0.0.1:8080 # a test server\n"
                     "allow_host [::1]:80\n",
                     &err);
  CHECK(p != NULL);
  if (!p) {
    fprintf(stderr, "  %s\n", err.msg);
    return;
  }
  CHECK(p->n_allow_hosts == 4 && p->network == SBX_NET_NONE);
  CHECK(p->n_allow_hosts == 4 && !strcmp(p->allow_hosts[0].host, "pypi.org") &&
        !strcmp(p->allow_hosts[0].reason, "the package index") && p->allow_hosts[0].port == 443 &&
        p->allow_hosts[1].kind == EGRESS_WILDCARD && p->allow_hosts[1].reason[0] == '\0' &&
        !strcmp(p->allow_hosts[2].reason, "a test server"));
  char *text = policy_format(p);
  CHECK(strstr(text, "\nnetwork            none\nmax_network        proxy\n"
                     "allow_host pypi.org:443   # the package index\n"
                     "allow_host *.pythonhosted.org:443\n"
                     "allow_host 127.0.0.1:8080   # a test server\n"
                     "allow_host [::1]:80\n") != NULL);
  /* policy show's text is a policy with the same hash; reasons are comments, outside it. */
  struct sbx_policy *q = NULL;
  CHECK(policy_parse_string(text, "show", ".", &q, &err) == 0);
  CHECK(q && !strcmp(q->sha256, p->sha256) && q->n_allow_hosts == 4 &&
        !strcmp(q->allow_hosts[0].reason, "the package index"));
  policy_free(q);
  free(text);
  char *canon = policy_format_canonical(p);
  CHECK(canon && strstr(canon, "allow_host pypi.org:443\n") && !strstr(canon, "package index"));
  free(canon);
  /* The command line adds hosts when max_network permits, and that asks for the proxy. */
  CHECK(policy_check_network(p, &err) == 0);
  CHECK(policy_add_allow_host(p, "--allow-host", "Example.com:8443", &err) == 0);
  CHECK(p->network == SBX_NET_PROXY && p->n_allow_hosts == 5 &&
        !strcmp(p->allow_hosts[4].host, "example.com"));
  CHECK(policy_add_allow_host(p, "--allow-host", "example.com:8443", &err) < 0 &&
        strstr(err.msg, "listed twice"));
  CHECK(policy_add_allow_host(p, "--allow-host", "a..b", &err) < 0 &&
        strstr(err.msg, "--allow-host: `a..b`: empty label"));
  CHECK(policy_check_network(p, &err) == 0);
  /* A limit on what a command line adds. */
  int added = 0;
  for (int i = 0; i < SBX_POLICY_MAX_ALLOW_HOSTS + SBX_CLI_MAX_ALLOW_HOSTS + 1; i++) {
    char h[32];
    snprintf(h, sizeof h, "h%d.example", i);
    if (policy_add_allow_host(p, "--allow-host", h, &err) < 0)
      break;
    added++;
  }
  CHECK(p->n_allow_hosts == SBX_POLICY_MAX_ALLOW_HOSTS + SBX_CLI_MAX_ALLOW_HOSTS &&
        strstr(err.msg, "more than"));
  CHECK(added == SBX_POLICY_MAX_ALLOW_HOSTS + SBX_CLI_MAX_ALLOW_HOSTS - 5);
  /* Any change in the allowlist changes the hash. */
  struct sbx_policy *r =
      parse_replaced("max_network none\n", "max_network proxy\nallow_host pypi.org:80\n", &err);
  struct sbx_policy *s =
      parse_replaced("max_network none\n", "max_network proxy\nallow_host pypi.org\n", &err);
  CHECK(r && s && strcmp(r->sha256, s->sha256) != 0);
  policy_free(r);
  policy_free(s);
  policy_free(p);

  /* network proxy in the file: parsed, and runs (the egress proxy). */
  p = parse_replaced("network none\nmax_network none\n", "network proxy\nmax_network proxy\n", &err);
  CHECK(p && p->network == SBX_NET_PROXY && policy_check_network(p, &err) == 0);
  policy_free(p);
  /* The proxy's limits: each required, egress_connections bounded. */
  CHECK(replaced_fails_with("egress_connections 4\n", "", "missing key `egress_connections`"));
  p = parse_replaced("egress_connections 4\n", "egress_connections 257\n", &err);
  CHECK(!p && strstr(err.msg, "`egress_connections` is above 256"));
  policy_free(p);
}

/* proxy_request_limit: required, from 4K to 32M, and printed as the file says it. */
static void test_proxy_request_limit(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p && p->proxy_request_bytes == 16u << 20);
  char *canon = p ? policy_format_canonical(p) : NULL;
  CHECK(canon && strstr(canon, "\nproxy_servers      *\nproxy_request_limit 16M\n"));
  free(canon);
  policy_free(p);
  CHECK(replaced_fails_with("proxy_request_limit 16M\n", "", "missing key `proxy_request_limit`"));
  static const char *bad[] = {"proxy_request_limit 4095\n", "proxy_request_limit 33M\n",
                              "proxy_request_limit 0\n"};
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    p = parse_replaced("proxy_request_limit 16M\n", bad[i], &err);
    CHECK(!p && strstr(err.msg, "`proxy_request_limit` must be from 4K to 32M"));
    policy_free(p);
  }
  p = parse_replaced("proxy_request_limit 16M\n", "proxy_request_limit 32M\n", &err);
  CHECK(p && p->proxy_request_bytes == 32u << 20);
  policy_free(p);
  p = parse_replaced("proxy_request_limit 16M\n", "proxy_request_limit 4K\nproxy_request_limit 4K\n", &err);
  CHECK(!p && strstr(err.msg, "proxy_request_limit"));
  policy_free(p);
}

/* Sessions' keys: required, bounded, printed; max_sessions 0 means none, the per-token bound
 * not. */
static void test_session_keys(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p && p->session_idle_ms == 900000 && p->session_max_life_ms == 7200000 && p->max_sessions == 16 &&
        p->max_sessions_per_token == 4);
  char *canon = p ? policy_format_canonical(p) : NULL;
  CHECK(canon && strstr(canon, "\nsession_idle       900s\n") &&
        strstr(canon, "\nsession_max_life   7200s\n") && strstr(canon, "\nmax_sessions       16\n") &&
        strstr(canon, "\nmax_sessions_per_token 4\n"));
  free(canon);
  policy_free(p);
  static const char *const keys[][2] = {{"session_idle 900s\n", "session_idle"},
                                        {"session_max_life 7200s\n", "session_max_life"},
                                        {"max_sessions 16\n", "max_sessions"},
                                        {"max_sessions_per_token 4\n", "max_sessions_per_token"}};
  for (size_t i = 0; i < 4; i++) {
    char want[80];
    snprintf(want, sizeof want, "missing key `%s`", keys[i][1]);
    CHECK(replaced_fails_with(keys[i][0], "", want));
  }
  p = parse_replaced("session_idle 900s\n", "session_idle 604801s\n", &err);
  CHECK(!p && strstr(err.msg, "`session_idle` and `session_max_life` must be from 1s to 604800s"));
  policy_free(p);
  p = parse_replaced("session_max_life 7200s\n", "session_max_life 500ms\n", &err);
  CHECK(!p && strstr(err.msg, "must be from 1s"));
  policy_free(p);
  p = parse_replaced("max_sessions 16\n", "max_sessions 4097\n", &err);
  CHECK(!p && strstr(err.msg, "`max_sessions` must be from 0 to 4096"));
  policy_free(p);
  p = parse_replaced("max_sessions 16\n", "max_sessions 0\n", &err);
  CHECK(p && p->max_sessions == 0);
  policy_free(p);
  p = parse_replaced("max_sessions_per_token 4\n", "max_sessions_per_token 0\n", &err);
  CHECK(!p && strstr(err.msg, "`max_sessions_per_token`: bad count `0`"));
  policy_free(p);
  p = parse_replaced("max_sessions 16\n", "max_sessions 16\nmax_sessions 16\n", &err);
  CHECK(!p && strstr(err.msg, "max_sessions"));
  policy_free(p);
}

/* fork_template_calls: required, from 1 to 65536, printed. */
static void test_fork_template_calls(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p && p->fork_template_calls == 256);
  char *canon = p ? policy_format_canonical(p) : NULL;
  CHECK(canon && strstr(canon, "\nfork_template_calls 256\n"));
  free(canon);
  policy_free(p);
  CHECK(replaced_fails_with("fork_template_calls 256\n", "", "missing key `fork_template_calls`"));
  p = parse_replaced("fork_template_calls 256\n", "fork_template_calls 65537\n", &err);
  CHECK(!p && strstr(err.msg, "`fork_template_calls` must be from 1 to 65536"));
  policy_free(p);
  p = parse_replaced("fork_template_calls 256\n", "fork_template_calls 0\n", &err);
  CHECK(!p && strstr(err.msg, "`fork_template_calls`: bad count `0`"));
  policy_free(p);
  p = parse_replaced("fork_template_calls 256\n", "fork_template_calls 1\n", &err);
  CHECK(p && p->fork_template_calls == 1);
  policy_free(p);
}

/* approve_host_calls: required, none|writes|all, printed; ordered for --approve. */
static void test_approve_host_calls(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p && p->approve_host_calls == SBX_APPROVE_NONE);
  char *canon = p ? policy_format_canonical(p) : NULL;
  CHECK(canon && strstr(canon, "\napprove_host_calls none\n"));
  free(canon);
  policy_free(p);
  CHECK(replaced_fails_with("approve_host_calls none\n", "", "missing key `approve_host_calls`"));
  CHECK(replaced_fails_with("approve_host_calls none\n", "approve_host_calls some\n",
                            "`approve_host_calls`: expected none, writes or all, got `some`"));
  CHECK(fails_with("approve_host_calls all\n", "`approve_host_calls` is defined twice"));
  p = parse_replaced("approve_host_calls none\n", "approve_host_calls writes\n", &err);
  CHECK(p && p->approve_host_calls == SBX_APPROVE_WRITES);
  canon = p ? policy_format_canonical(p) : NULL;
  CHECK(canon && strstr(canon, "\napprove_host_calls writes\n"));
  free(canon);
  policy_free(p);
  enum sbx_approve a;
  CHECK(policy_approve_parse("all", &a) == 0 && a == SBX_APPROVE_ALL);
  CHECK(policy_approve_parse("ALL", &a) < 0 && policy_approve_parse("", &a) < 0);
  CHECK(SBX_APPROVE_NONE < SBX_APPROVE_WRITES && SBX_APPROVE_WRITES < SBX_APPROVE_ALL);
}

/* max_tasks: required, from 1 to 1024, printed. */
static void test_max_tasks(void)
{
  sbx_error_t err;
  struct sbx_policy *p = parse("", &err);
  CHECK(p && p->max_tasks == 16);
  char *canon = p ? policy_format_canonical(p) : NULL;
  CHECK(canon && strstr(canon, "\nmax_tasks          16\n"));
  free(canon);
  policy_free(p);
  CHECK(replaced_fails_with("max_tasks 16\n", "", "missing key `max_tasks`"));
  CHECK(replaced_fails_with("max_tasks 16\n", "max_tasks 0\n", "`max_tasks`: bad count `0`"));
  CHECK(replaced_fails_with("max_tasks 16\n", "max_tasks 1025\n", "`max_tasks` must be from 1 to 1024"));
  CHECK(fails_with("max_tasks 2\n", "`max_tasks` is defined twice"));
  p = parse_replaced("max_tasks 16\n", "max_tasks 1\n", &err);
  CHECK(p && p->max_tasks == 1);
  policy_free(p);
}

static void test_network_errors(void)
{
  CHECK(replaced_fails_with("network none\n", "", "missing key `network`"));
  CHECK(replaced_fails_with("max_network none\n", "", "missing key `max_network`"));
  CHECK(fails_with("network none\n", "`network` is defined twice"));
  CHECK(replaced_fails_with("network none\n", "network on\n",
                            "t.policy:51: `network` takes `none` or `proxy`"));
  CHECK(replaced_fails_with("max_network none\n", "max_network\n", "`max_network` takes `none` or `proxy`"));
  CHECK(replaced_fails_with("network none\n", "network proxy\n", "`network` is above `max_network`"));
  CHECK(fails_with("allow_host pypi.org\n", "`allow_host` needs `network proxy` or `max_network proxy`"));
  static const struct {
    const char *line, *needle;
  } bad[] = {
      {"allow_host\n", "`allow_host` takes one PATTERN[:PORT]"},
      {"allow_host a b\n", "`allow_host` takes one PATTERN[:PORT]"},
      {"allow_host a..b\n", "empty label"},
      {"allow_host .a\n", "empty label"},
      {"allow_host a.*.b\n", "`*` may only be the whole first label"},
      {"allow_host *a.b\n", "`*` may only be the whole first label"},
      {"allow_host *.com\n", "whole top-level domain"},
      {"allow_host a.b:0\n", "port `0` is not 1-65535"},
      {"allow_host a.b:65536\n", "port `65536` is not 1-65535"},
      {"allow_host b\xc3\xbc"
       "cher.de\n",
       "punycode"},
      {"allow_host ::1:443:x\n", "not an IPv6 address"},
      {"allow_host [::1:80\n", "`[` without `]`"},
      {"allow_host a.b\nallow_host A.B.\n", "`A.B.` is listed twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[256];
    snprintf(text, sizeof text, "max_network proxy\n%s", bad[i].line);
    if (!replaced_fails_with("max_network none\n", text, bad[i].needle))
      fprintf(stderr, "  (case %zu)\n", i);
    CHECK(replaced_fails_with("max_network none\n", text, "t.policy:"));
  }
  /* The limit on allow_host lines, hit. */
  size_t cap = 64 + (size_t) (SBX_POLICY_MAX_ALLOW_HOSTS + 1) * 32;
  char *many = malloc(cap), *at = many;
  at += sprintf(at, "max_network proxy\n");
  for (int i = 0; i <= SBX_POLICY_MAX_ALLOW_HOSTS; i++)
    at += sprintf(at, "allow_host h%d.example\n", i);
  sbx_error_t err;
  CHECK(check_failure(parse_replaced("max_network none\n", many, &err), &err, "more than 256 hosts"));
  free(many);
  char reason[300];
  memset(reason, 'r', sizeof reason - 1);
  reason[sizeof reason - 1] = '\0';
  char line[400];
  snprintf(line, sizeof line, "max_network proxy\nallow_host a.b   # %s\n", reason);
  CHECK(replaced_fails_with("max_network none\n", line, "the reason is longer than 200 bytes"));
}

/* Rules from an include and from the including file are one set: a name the include gave a rule
 * cannot get another after it, and more rules than the first allocation (256) across both are
 * kept (the include's parser shares the name index with the including file's). */
static void test_include_shares_rules(void)
{
  char dir[] = "/tmp/sbx-test-policy-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char inc[sizeof dir + 16];
  snprintf(inc, sizeof inc, "%s/rules.inc", dir);
  FILE *f = fopen(inc, "w");
  CHECK(f != NULL);
  if (!f)
    return;
  fprintf(f, "sandboxd-policy 1\ngroup inc \"many\"\n");
  for (int i = 0; i < 300; i++)
    fprintf(f, "allow sys%d\n", i);
  fclose(f);
  const char *tails[] = {"include rules.inc\nallow sys5\n", "include rules.inc\nallow read\n",
                         "include rules.inc\nallow fresh1 fresh2\n"};
  for (int t = 0; t < 3; t++) {
    size_t n = strlen(base) + strlen(tails[t]) + 1;
    char *text = malloc(n);
    snprintf(text, n, "%s%s", base, tails[t]);
    struct sbx_policy *p = NULL;
    sbx_error_t err = {0};
    int rc = policy_parse_string(text, "t.policy", dir, &p, &err);
    if (t < 2) {
      CHECK(rc < 0 && strstr(err.msg, "already has a rule"));
    } else {
      CHECK(rc == 0 && p && p->n_rules == 2 + 300 + 2);
      CHECK(p && strcmp(p->rules[2 + 299].syscall, "sys299") == 0 &&
            strcmp(p->rules[303].syscall, "fresh2") == 0);
    }
    if (p)
      policy_free(p);
    free(text);
  }
  unlink(inc);
  rmdir(dir);
}

/* The rules of p for syscall, as `policy show` writes them without comments, one per line. */
static void rules_of(const struct sbx_policy *p, const char *syscall, char *out, size_t len)
{
  out[0] = '\0';
  _cleanup_free_ char *text = policy_format_canonical(p);
  for (char *l = text, *nl; l && *l; l = nl ? nl + 1 : NULL) {
    nl = strchr(l, '\n');
    if (nl)
      *nl = '\0';
    const char *sp = strchr(l, ' ');
    if (!strncmp(l, "errno ", 6))
      sp = strchr(l + 6, ' ');
    if (sp && !strncmp(sp + 1, syscall, strlen(syscall)) &&
        (sp[1 + strlen(syscall)] == '\0' || sp[1 + strlen(syscall)] == ' '))
      CHECK(bufcatf(out, len, NULL, "%s;", l) == 0);
  }
}

static void test_floor(void)
{
  sbx_error_t err;
  char r[512];
  /* A policy that holds the floor is left as it is, byte for byte (its hash too). */
  struct sbx_policy *p =
      parse("group ns \"x\"\n"
            "allow clone when arg0 & "
            "CLONE_NEWNS|CLONE_NEWUTS|CLONE_NEWIPC|CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET|"
            "CLONE_NEWCGROUP|CLONE_NEWTIME == 0\n"
            "errno ENOSYS clone3\nerrno EPERM unshare mount\n",
            &err);
  CHECK(p != NULL);
  if (!p)
    return;
  char sha[65];
  memcpy(sha, p->sha256, sizeof sha);
  size_t n_rules = p->n_rules, n_groups = p->n_groups;
  CHECK(policy_apply_floor(p, &err) == 0);
  CHECK(p->floor_raised == 0 && !strcmp(sha, p->sha256) && p->n_rules == n_rules && p->n_groups == n_groups);
  policy_free(p);

  /* The issue's policy: each loosening is raised, and marked for `policy show`. */
  char text[sizeof base + 512];
  const char *at = strstr(base, "no_new_privs yes\ndrop_capabilities yes\n");
  CHECK(at != NULL);
  if (!at)
    return;
  snprintf(text, sizeof text,
           "%.*sno_new_privs no\ndrop_capabilities no\n%s"
           "group ns \"x\"\nallow clone unshare setns mount clone3 fsopen\n"
           "group other \"y\"\nerrno EPERM pivot_root when arg0 == 1\nallow pivot_root when arg0 == 2\n",
           (int) (at - base), base, at + strlen("no_new_privs yes\ndrop_capabilities yes\n"));
  CHECK(policy_parse_string(text, "t.policy", ".", &p, &err) == 0);
  if (!p)
    return;
  memcpy(sha, p->sha256, sizeof sha);
  CHECK(policy_apply_floor(p, &err) == 0);
  CHECK(p->floor_raised == (SBX_FLOOR_CAPABILITIES | SBX_FLOOR_NO_NEW_PRIVS | SBX_FLOOR_SYSCALLS));
  CHECK(p->drop_capabilities && p->no_new_privs && strcmp(sha, p->sha256) != 0);
  rules_of(p, "unshare", r, sizeof r);
  CHECK(!strcmp(r, "errno EPERM unshare;"));
  rules_of(p, "clone3", r, sizeof r);
  CHECK(!strcmp(r, "errno ENOSYS clone3;"));
  rules_of(p, "clone", r, sizeof r);
  CHECK(!strcmp(r, "allow clone when arg0 & 0x7e020080 == 0x0;"));
  /* Every rule of a call the floor refuses goes, its conditional denials too (the parser refuses
   * an unconditional denial beside them). */
  rules_of(p, "pivot_root", r, sizeof r);
  CHECK(!strcmp(r, "errno EPERM pivot_root;"));
  rules_of(p, "read", r, sizeof r);
  CHECK(!strcmp(r, "allow read;"));
  /* What policy show prints reads back as a valid policy that needs no floor: the same hash. */
  _cleanup_free_ char *shown = policy_format(p);
  CHECK(strstr(shown, "drop_capabilities  yes   # floor: sandboxd is not root (the file says no)\n") != NULL);
  CHECK(strstr(shown, "errno EPERM unshare   # floor: sandboxd is not root\n") != NULL);
  struct sbx_policy *again = NULL;
  CHECK(policy_parse_string(shown, "shown.policy", ".", &again, &err) == 0);
  if (again) {
    CHECK(!strcmp(again->sha256, p->sha256));
    CHECK(policy_apply_floor(again, &err) == 0 && again->floor_raised == 0 &&
          !strcmp(again->sha256, p->sha256));
    policy_free(again);
  }
  struct sbx_bpf bpf;
  CHECK(seccomp_compile(p, 0, &bpf, &err) == 0);
  seccomp_bpf_free(&bpf);
  policy_free(p);

  /* clone: an allow whose mask leaves out a namespace flag, or whose value holds one, goes; a
   * conditional denial stays, but one with the floor's own condition (a duplicate). */
  p = parse("group ns \"x\"\n"
            "allow clone when arg0 & CLONE_NEWNS|CLONE_NEWPID == 0\n"
            "allow clone when arg0 == CLONE_NEWUSER\n"
            "allow clone when arg0 == 0x11\n"
            "errno EPERM clone when arg0 & 0x100 == 0x100\n",
            &err);
  CHECK(p != NULL);
  if (!p)
    return;
  CHECK(policy_apply_floor(p, &err) == 0 && p->floor_raised == SBX_FLOOR_SYSCALLS);
  rules_of(p, "clone", r, sizeof r);
  CHECK(!strcmp(r, "allow clone when arg0 == 0x11;errno EPERM clone when arg0 & 0x100 == 0x100;"
                   "allow clone when arg0 & 0x7e020080 == 0x0;"));
  policy_free(p);

  /* The shipped policies hold the floor already: unprivileged, they run as written. */
  static const char *files[] = {"policy/default.policy", "policy/ci.policy", "policy/strict.policy"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    p = NULL;
    CHECK(policy_load_file(files[i], &p, &err) == 0);
    if (!p)
      continue;
    memcpy(sha, p->sha256, sizeof sha);
    CHECK(policy_apply_floor(p, &err) == 0 && p->floor_raised == 0 && !strcmp(sha, p->sha256));
    policy_free(p);
  }
}

int main(void)
{
  test_valid();
  test_include_shares_rules();
  test_errors();
  test_conditions();
  test_roundtrip();
  test_limits();
  test_load();
  test_shipped();
  test_rlimit_variant();
  test_network();
  test_network_errors();
  test_proxy_request_limit();
  test_fork_template_calls();
  test_max_tasks();
  test_session_keys();
  test_approve_host_calls();
  test_floor();
  return check_summary("test_policy");
}
