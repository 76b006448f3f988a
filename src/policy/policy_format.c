/* SPDX-License-Identifier: Apache-2.0 */
/* Canonical policy text: what `policy show` prints and what the policy's sha256 is computed from.
 * Stable and diffable: every key in a fixed order, sizes in their largest exact unit, constants
 * resolved to numbers (the spelling as written only in trailing comments, which the hash omits). */
#include "policy/policy.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/util.h"

/* Appends, not printf: this runs on every exec (~400 rules and ~60 keys), for the policy's hash. */
static void append(strbuf_t *sb, const char *s)
{
  strbuf_append(sb, s, strlen(s));
}

/* As "%llu". */
static void append_u64(strbuf_t *sb, uint64_t v)
{
  char buf[20], *p = buf + sizeof buf;
  do {
    *--p = (char) ('0' + v % 10);
    v /= 10;
  } while (v);
  strbuf_append(sb, p, (size_t) (buf + sizeof buf - p));
}

/* As "%-18s ": the key padded to 18 columns, then a space. */
static void append_key(strbuf_t *sb, const char *key)
{
  static const char pad[] = "                  ";
  size_t n = strlen(key);
  strbuf_append(sb, key, n);
  if (n < 18)
    strbuf_append(sb, pad, 18 - n);
  strbuf_append(sb, " ", 1);
}

/* "KEY VALUE\n", as "%-18s %s\n" and "%-18s %llu\n". */
static void kv_str(strbuf_t *sb, const char *key, const char *v)
{
  append_key(sb, key);
  append(sb, v ? v : "(null)"); /* what printf wrote; a complete policy has every key */
  append(sb, "\n");
}

/* A yes/no switch, with the floor's note when the floor raised it (policy_floor.c). */
static void kv_floored(strbuf_t *sb, const char *key, bool v, bool raised)
{
  append_key(sb, key);
  append(sb, v ? "yes" : "no");
  if (raised)
    append(sb, "   # floor: sandboxd is not root (the file says no)");
  append(sb, "\n");
}

static void kv_u64(strbuf_t *sb, const char *key, uint64_t v)
{
  append_key(sb, key);
  append_u64(sb, v);
  append(sb, "\n");
}

/* "   # comment" when there is one. */
static void append_comment(strbuf_t *sb, const char *comment)
{
  if (comment) {
    append(sb, "   # ");
    append(sb, comment);
  }
}

/* KEY VALUE[suffix], and `   # comment` when one is given. */
static void fmt_size_comment(strbuf_t *sb, const char *key, uint64_t v, const char *comment)
{
  static const char *suffix[] = {"", "K", "M", "G", "T"};
  size_t i = 0;
  while (i + 1 < ARRAY_SIZE(suffix) && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    i++;
  }
  append_key(sb, key);
  append_u64(sb, v);
  append(sb, suffix[i]);
  append_comment(sb, comment);
  append(sb, "\n");
}

static void fmt_size(strbuf_t *sb, const char *key, uint64_t v)
{
  fmt_size_comment(sb, key, v, NULL);
}

static void fmt_milli(strbuf_t *sb, const char *key, uint64_t v, const char *unit)
{
  append_key(sb, key);
  append_u64(sb, v / 1000);
  if (v % 1000) { /* ".%03llu" */
    char frac[5] = {'.', (char) ('0' + v % 1000 / 100), (char) ('0' + v % 100 / 10), (char) ('0' + v % 10),
                    0};
    append(sb, frac);
  }
  append(sb, unit);
  append(sb, "\n");
}

/* The kernel budgets, each with what enforces it (policy show's comments). */
static void fmt_budgets(strbuf_t *sb, const struct sbx_budgets *b, bool comments)
{
  const struct {
    const char *key;
    uint64_t v;
    const char *what;
  } rows[] = {
      {"inotify_instances", b->inotify_instances,
       "user.max_inotify_instances in the sandbox's user namespace"},
      {"inotify_watches", b->inotify_watches, "user.max_inotify_watches"},
      {"fanotify_groups", b->fanotify_groups, "user.max_fanotify_groups"},
      {"fanotify_marks", b->fanotify_marks, "user.max_fanotify_marks"},
      {"namespaces", b->namespaces, "user.max_{user,mnt,pid,net,ipc,uts,cgroup,time}_namespaces"},
      {"sigpending", b->sigpending, "RLIMIT_SIGPENDING: queued signals and POSIX timers"},
  };
  for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
    append_key(sb, rows[i].key);
    append_u64(sb, rows[i].v);
    append_comment(sb, comments ? rows[i].what : NULL);
    append(sb, "\n");
  }
  fmt_size_comment(sb, "msgqueue", b->msgqueue_bytes,
                   comments ? "RLIMIT_MSGQUEUE: POSIX message queue bytes" : NULL);
  fmt_size_comment(sb, "memlock", b->memlock_bytes,
                   comments ? "RLIMIT_MEMLOCK: locked memory, SHM_LOCK" : NULL);
}

/* "0x" and v in lowercase hex, as "0x%llx" writes it ("0x0" for 0). */
static void append_hex(strbuf_t *sb, uint64_t v)
{
  char buf[19], *p = buf + sizeof buf;
  do {
    *--p = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  *--p = 'x';
  *--p = '0';
  strbuf_append(sb, p, (size_t) (buf + sizeof buf - p));
}

static void fmt_action(strbuf_t *sb, enum sbx_action a, int e)
{
  if (a == SBX_ACT_ALLOW) {
    append(sb, "allow");
  } else if (a == SBX_ACT_KILL) {
    append(sb, "kill");
  } else {
    append(sb, "errno ");
    append(sb, policy_errno_name(e));
  }
}

/* The limits: each request's default, then its max_*. */
static void fmt_limits(strbuf_t *sb, const struct sbx_limits *l, const struct sbx_limits *m)
{
  fmt_milli(sb, "timeout", l->timeout_ms, "s");
  fmt_milli(sb, "max_timeout", m->timeout_ms, "s");
  fmt_size(sb, "memory", l->memory_bytes);
  fmt_size(sb, "max_memory", m->memory_bytes);
  kv_u64(sb, "pids", l->pids);
  kv_u64(sb, "max_pids", m->pids);
  fmt_milli(sb, "cpus", l->cpus_milli, "");
  fmt_milli(sb, "max_cpus", m->cpus_milli, "");
  fmt_size(sb, "tmp_size", l->tmp_bytes);
  fmt_size(sb, "max_tmp_size", m->tmp_bytes);
  fmt_size(sb, "workspace_size", l->workspace_bytes);
  fmt_size(sb, "max_workspace_size", m->workspace_bytes);
  fmt_size(sb, "shm_size", l->shm_bytes);
  fmt_size(sb, "max_shm_size", m->shm_bytes);
  kv_u64(sb, "nofile", l->nofile);
  kv_u64(sb, "max_nofile", m->nofile);
  fmt_size(sb, "fsize", l->fsize_bytes);
  fmt_size(sb, "max_fsize", m->fsize_bytes);
  fmt_size(sb, "output_limit", l->output_bytes);
  fmt_size(sb, "max_output_limit", m->output_bytes);
  kv_u64(sb, "max_artifacts", l->artifacts);
  fmt_size(sb, "artifact_limit", l->artifact_bytes);
}

/* "KEY VALUE\n" for each value. */
static void fmt_each(strbuf_t *sb, const char *key, char *const *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    append(sb, key);
    append(sb, " ");
    append(sb, v[i]);
    append(sb, "\n");
  }
}

/* What the sandbox's processes may do: privileges, the root, /proc, the cgroup. */
static void fmt_isolation(strbuf_t *sb, const struct sbx_policy *p, bool comments)
{
  kv_floored(sb, "no_new_privs", p->no_new_privs, comments && (p->floor_raised & SBX_FLOOR_NO_NEW_PRIVS));
  kv_floored(sb, "drop_capabilities", p->drop_capabilities,
             comments && (p->floor_raised & SBX_FLOOR_CAPABILITIES));
  kv_str(sb, "readonly_root", p->readonly_root ? "yes" : "no");
  kv_str(sb, "mask_proc", p->mask_proc ? "yes" : "no");
  kv_u64(sb, "fork_template_calls", p->fork_template_calls);
  fmt_milli(sb, "session_idle", p->session_idle_ms, "s");
  fmt_milli(sb, "session_max_life", p->session_max_life_ms, "s");
  kv_u64(sb, "max_sessions", p->max_sessions);
  kv_u64(sb, "max_sessions_per_token", p->max_sessions_per_token);
  if (p->cgroup == SBX_CGROUP_REQUIRED) {
    kv_str(sb, "cgroup", "required");
  } else {
    /* What the filter adds without a cgroup (seccomp.c's rlimit_denied): no rule says it. */
    append_key(sb, "cgroup");
    append(sb, "fallback-rlimit");
    append_comment(sb, comments ? "without one: memfd_create memfd_secret ENOMEM, shmget ENOSPC" : NULL);
    append(sb, "\n");
  }
  fmt_each(sb, "proc_mask", p->proc_masked, p->n_proc_masked);
  fmt_each(sb, "proc_readonly", p->proc_readonly, p->n_proc_readonly);
}

/* The host MCP servers, the network and the egress allowlist with its limits. */
static void fmt_network(strbuf_t *sb, const struct sbx_policy *p, bool comments)
{
  strbuf_printf(sb, "%-18s", "proxy_servers");
  for (size_t i = 0; i < p->n_proxy_servers; i++)
    strbuf_printf(sb, " %s", p->proxy_servers[i]);
  strbuf_printf(sb, "%s\n", p->n_proxy_servers ? "" : " none");
  fmt_size(sb, "proxy_request_limit", p->proxy_request_bytes);
  kv_str(sb, "approve_host_calls", policy_approve_name(p->approve_host_calls));
  kv_u64(sb, "max_tasks", p->max_tasks);
  kv_str(sb, "network", p->network == SBX_NET_PROXY ? "proxy" : "none");
  kv_str(sb, "max_network", p->max_network == SBX_NET_PROXY ? "proxy" : "none");
  for (size_t i = 0; i < p->n_allow_hosts; i++) {
    char rule[EGRESS_HOST_MAX + 16];
    egress_rule_format(&p->allow_hosts[i], rule, sizeof rule);
    const char *reason = p->allow_hosts[i].reason;
    strbuf_printf(sb, "allow_host %s%s%s\n", rule, comments && reason[0] ? "   # " : "",
                  comments ? reason : "");
  }
  kv_u64(sb, "egress_connections", p->egress.connections);
  fmt_size(sb, "egress_bytes_up", p->egress.bytes_up);
  fmt_size(sb, "egress_bytes_down", p->egress.bytes_down);
  fmt_milli(sb, "egress_connection_time", p->egress.connection_time_ms, "s");
}

/* One syscall rule: ACTION SYSCALL[ when argN [& MASK] == VALUE]. */
static void fmt_rule(strbuf_t *sb, const struct sbx_rule *r, bool comments)
{
  fmt_action(sb, r->action, r->errno_value);
  append(sb, " ");
  append(sb, r->syscall);
  if (r->cmp == SBX_CMP_EQ32 || r->cmp == SBX_CMP_MASKED_EQ) {
    char arg[] = " when argN ";
    arg[9] = (char) ('0' + r->arg); /* 0..5 (the parser's check) */
    append(sb, arg);
    if (r->cmp == SBX_CMP_MASKED_EQ) {
      append(sb, "& ");
      append_hex(sb, r->mask);
      append(sb, " ");
    }
    append(sb, "== ");
    append_hex(sb, r->value);
  }
  if (comments && r->cond_text)
    strbuf_printf(sb, "   # %s", r->cond_text);
  append(sb, "\n");
}

/* The filter: its default actions, then each group with its rules. */
static void fmt_seccomp(strbuf_t *sb, const struct sbx_policy *p, bool comments)
{
  strbuf_printf(sb, "seccomp_default ");
  fmt_action(sb, p->default_action, p->default_errno);
  strbuf_printf(sb, "\nseccomp_badarch ");
  fmt_action(sb, p->badarch_action, 0);
  strbuf_printf(sb, "\n");
  /* Each group's rules in file order: the first rule not yet written is where the next scan
   * starts (rules come mostly grouped), so this is not groups x rules. */
  size_t first = 0;
  for (size_t g = 0; g < p->n_groups; g++) {
    append(sb, "group ");
    append(sb, p->groups[g].name);
    append(sb, " \"");
    append(sb, p->groups[g].reason);
    append(sb, "\"\n");
    while (first < p->n_rules && p->rules[first].group < g)
      first++;
    for (size_t i = first; i < p->n_rules; i++)
      if (p->rules[i].group == g)
        fmt_rule(sb, &p->rules[i], comments);
  }
}

static char *format(const struct sbx_policy *p, bool comments)
{
  strbuf_t sb = {0};
  strbuf_printf(&sb, "sandboxd-policy %d\n", SBX_POLICY_VERSION);
  kv_str(&sb, "name", p->name);
  kv_str(&sb, "description", p->description);
  fmt_limits(&sb, &p->limits, &p->max);
  kv_u64(&sb, "uid", p->uid);
  kv_u64(&sb, "gid", p->gid);
  strbuf_printf(&sb, "%-18s %u %u%s\n", "host_id_range", p->host_id_start, p->host_id_count,
                comments ? "   # as root: one host uid/gid per concurrent sandbox" : "");
  fmt_budgets(&sb, &p->budgets, comments);
  kv_str(&sb, "hostname", p->hostname);
  fmt_each(&sb, "env", p->env, p->n_env);
  fmt_isolation(&sb, p, comments);
  fmt_network(&sb, p, comments);
  fmt_seccomp(&sb, p, comments);
  return sb.data;
}

char *policy_format(const struct sbx_policy *p)
{
  return format(p, true);
}

char *policy_format_canonical(const struct sbx_policy *p)
{
  return format(p, false);
}
