/* SPDX-License-Identifier: Apache-2.0 */
/* Policy file parser. See sandboxd.policy(5). Finding the files: policy_load.c; the canonical text
 * (policy show, the sha256): policy_format.c; the named constants and errno values:
 * policy_names.c.
 *
 * A policy is a list of lines. The first non-blank, non-comment line is `sandboxd-policy 1`.
 * Scalar keys must be defined exactly once across a file and its include; list keys (env,
 * proc_mask, proc_readonly) accumulate; syscall rules belong to the group above them. */
#include "policy/policy.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"

#define POLICY_MAX_RULES 4096

/* ------------------------------------------------------------------ keys */

enum key_kind {
  K_SIZE,
  K_DURATION,
  K_COUNT,
  K_BUDGET,
  K_MILLI,
  K_ID,
  K_BOOL,
  K_TEXT,
  K_WORD,
  K_CGROUP,
  K_APPROVE
};

struct key_def {
  const char *name;
  enum key_kind kind;
  size_t offset; /* into struct sbx_policy */
};

#define LIM(field) offsetof(struct sbx_policy, limits.field)
#define MAX(field) offsetof(struct sbx_policy, max.field)
#define FIELD(field) offsetof(struct sbx_policy, field)
#define BUDGET(field) offsetof(struct sbx_policy, budgets.field)

static const struct key_def keys[] = {
    {"name", K_WORD, FIELD(name)},
    {"description", K_TEXT, FIELD(description)},
    {"timeout", K_DURATION, LIM(timeout_ms)},
    {"max_timeout", K_DURATION, MAX(timeout_ms)},
    {"memory", K_SIZE, LIM(memory_bytes)},
    {"max_memory", K_SIZE, MAX(memory_bytes)},
    {"pids", K_COUNT, LIM(pids)},
    {"max_pids", K_COUNT, MAX(pids)},
    {"cpus", K_MILLI, LIM(cpus_milli)},
    {"max_cpus", K_MILLI, MAX(cpus_milli)},
    {"tmp_size", K_SIZE, LIM(tmp_bytes)},
    {"max_tmp_size", K_SIZE, MAX(tmp_bytes)},
    {"workspace_size", K_SIZE, LIM(workspace_bytes)},
    {"max_workspace_size", K_SIZE, MAX(workspace_bytes)},
    {"shm_size", K_SIZE, LIM(shm_bytes)},
    {"max_shm_size", K_SIZE, MAX(shm_bytes)},
    {"nofile", K_COUNT, LIM(nofile)},
    {"max_nofile", K_COUNT, MAX(nofile)},
    {"fsize", K_SIZE, LIM(fsize_bytes)},
    {"max_fsize", K_SIZE, MAX(fsize_bytes)},
    {"output_limit", K_SIZE, LIM(output_bytes)},
    {"max_output_limit", K_SIZE, MAX(output_bytes)},
    {"max_artifacts", K_BUDGET, LIM(artifacts)}, /* 0: no files come back */
    {"artifact_limit", K_SIZE, LIM(artifact_bytes)},
    {"uid", K_ID, FIELD(uid)},
    {"gid", K_ID, FIELD(gid)},
    {"inotify_instances", K_BUDGET, BUDGET(inotify_instances)},
    {"inotify_watches", K_BUDGET, BUDGET(inotify_watches)},
    {"fanotify_groups", K_BUDGET, BUDGET(fanotify_groups)},
    {"fanotify_marks", K_BUDGET, BUDGET(fanotify_marks)},
    {"namespaces", K_BUDGET, BUDGET(namespaces)},
    {"sigpending", K_BUDGET, BUDGET(sigpending)},
    {"msgqueue", K_SIZE, BUDGET(msgqueue_bytes)},
    {"memlock", K_SIZE, BUDGET(memlock_bytes)},
    {"hostname", K_WORD, FIELD(hostname)},
    {"no_new_privs", K_BOOL, FIELD(no_new_privs)},
    {"drop_capabilities", K_BOOL, FIELD(drop_capabilities)},
    {"readonly_root", K_BOOL, FIELD(readonly_root)},
    {"mask_proc", K_BOOL, FIELD(mask_proc)},
    {"cgroup", K_CGROUP, FIELD(cgroup)},
    {"egress_connections", K_COUNT, FIELD(egress.connections)},
    {"egress_bytes_up", K_SIZE, FIELD(egress.bytes_up)},
    {"egress_bytes_down", K_SIZE, FIELD(egress.bytes_down)},
    {"egress_connection_time", K_DURATION, FIELD(egress.connection_time_ms)},
    {"proxy_request_limit", K_SIZE, FIELD(proxy_request_bytes)},
    {"fork_template_calls", K_COUNT, FIELD(fork_template_calls)},
    {"approve_host_calls", K_APPROVE, FIELD(approve_host_calls)},
    {"max_tasks", K_COUNT, FIELD(max_tasks)},
    {"session_idle", K_DURATION, FIELD(session_idle_ms)},
    {"session_max_life", K_DURATION, FIELD(session_max_life_ms)},
    {"max_sessions", K_BUDGET, FIELD(max_sessions)}, /* 0: no sessions */
    {"max_sessions_per_token", K_COUNT, FIELD(max_sessions_per_token)},
};

#define N_SCALAR_KEYS ARRAY_SIZE(keys)

/* ------------------------------------------------------------------ parser state */

struct parser {
  struct sbx_policy *p;
  const char *file;
  int line;
  int depth;
  bool seen[N_SCALAR_KEYS];
  bool seen_default, seen_badarch, seen_proxy, seen_host_ids, seen_network, seen_max_network;
  long current_group; /* -1 before the first group line */
  sbx_error_t *err;
  struct rule_index *idx; /* shared with an include's parser */
  const char *file_kept;  /* file, as kept in p->rule_files once a rule names it */
};

/* The rules by name: chains through `next` from a bucket of name_hash, each index + 1 (0 ends a
 * chain), so add_rule compares a rule only with those of the same name (not all ~400: that was a
 * sixth of a parse). `cap` is the rules array's allocated length. */
struct rule_index {
  uint32_t bucket[256];
  uint32_t *next;
  size_t cap;
};

static int perr(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct parser *ps, const char *fmt, ...)
{
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return sbx_error_set(ps->err, 0, "%s:%d: %s", ps->file, ps->line, msg);
}

static int push_str(char ***arr, size_t *n, const char *s)
{
  char **a = realloc(*arr, (*n + 1) * sizeof **arr);
  if (!a)
    return -1;
  *arr = a;
  if (!(a[*n] = strdup(s)))
    return -1;
  (*n)++;
  return 0;
}

/* Split a line into words in place. Handles "double quoted" words and trailing # comments. */
static int tokenize(struct parser *ps, char *line, char **words, int max, int *ret_n)
{
  int n = 0;
  char *p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (!*p || *p == '#')
      break;
    if (n == max)
      return perr(ps, "too many words on one line (at most %d)", max);
    if (*p == '"') {
      char *start = ++p;
      while (*p && *p != '"')
        p++;
      if (*p != '"')
        return perr(ps, "unterminated quote");
      *p++ = '\0';
      words[n++] = start;
      if (*p && *p != ' ' && *p != '\t')
        return perr(ps, "expected a space after a closing quote");
      continue;
    }
    words[n++] = p;
    while (*p && *p != ' ' && *p != '\t')
      p++;
    if (*p)
      *p++ = '\0';
  }
  *ret_n = n;
  return 0;
}

static int parse_value(struct parser *ps, const char *text, uint64_t *ret)
{
  /* VALUE := NAME|NUMBER ['|' VALUE]... */
  _cleanup_free_ char *copy = strdup(text);
  if (!copy)
    return perr(ps, "out of memory");
  uint64_t v = 0;
  char *save = NULL;
  for (char *t = strtok_r(copy, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
    uint64_t x;
    if (policy_constant(t, &x) < 0 && parse_u64(t, &x) < 0)
      return perr(ps, "unknown constant `%s`", t);
    v |= x;
  }
  *ret = v;
  return 0;
}

static int add_rule(struct parser *ps, const char *syscall, enum sbx_action action, int errno_value,
                    enum sbx_cmp cmp, unsigned arg, uint64_t mask, uint64_t value, const char *cond)
{
  struct sbx_policy *p = ps->p;
  if (strlen(syscall) > 64 || !syscall[0])
    return perr(ps, "bad syscall name `%s`", syscall);
  for (const char *c = syscall; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
      return perr(ps, "bad syscall name `%s`", syscall);

  uint32_t h = policy_name_hash(syscall);
  /* Combinations libseccomp cannot express faithfully are refused here, not silently merged:
   * an unconditional rule would replace every conditional rule of the same call. */
  struct rule_index *x = ps->idx;
  for (uint32_t i = x->bucket[h % 256]; i; i = x->next[i - 1]) {
    const struct sbx_rule *r = &p->rules[i - 1];
    if (r->name_hash != h || strcmp(r->syscall, syscall) != 0)
      continue;
    bool r_uncond = r->cmp == SBX_CMP_ANY, uncond = cmp == SBX_CMP_ANY;
    if (r_uncond && uncond)
      return perr(ps, "`%s` already has a rule at %s:%d", syscall, r->file, r->line);
    if (!r_uncond && !uncond && r->cmp == cmp && r->arg == arg && r->mask == mask && r->value == value)
      return perr(ps, "duplicate rule for `%s` (first at %s:%d)", syscall, r->file, r->line);
    bool r_allow = r->action == SBX_ACT_ALLOW, allow = action == SBX_ACT_ALLOW;
    if ((uncond && !r_uncond && r_allow) || (r_uncond && !uncond && allow))
      return perr(ps,
                  "`%s`: an unconditional rule cannot be combined with conditional allow rules "
                  "(see %s:%d); list the allowed cases and let the rest take seccomp_default",
                  syscall, r->file, r->line);
    if ((uncond && !r_uncond && !r_allow && !allow) || (r_uncond && !uncond && !r_allow && !allow))
      return perr(ps, "`%s`: conditional and unconditional deny rules conflict (see %s:%d)", syscall, r->file,
                  r->line);
  }
  if (p->n_rules >= POLICY_MAX_RULES)
    return perr(ps, "too many rules (at most %d)", POLICY_MAX_RULES);
  if (p->n_rules == x->cap) {
    size_t cap = x->cap ? 2 * x->cap : 256;
    struct sbx_rule *rules = realloc(p->rules, cap * sizeof *rules);
    if (rules)
      p->rules = rules;
    uint32_t *next = rules ? realloc(x->next, cap * sizeof *next) : NULL;
    if (!next)
      return perr(ps, "out of memory");
    x->next = next;
    x->cap = cap;
  }
  if (!ps->file_kept) {
    if (push_str(&p->rule_files, &p->n_rule_files, ps->file) < 0)
      return perr(ps, "out of memory");
    ps->file_kept = p->rule_files[p->n_rule_files - 1];
  }
  struct sbx_rule *r = &p->rules[p->n_rules];
  x->next[p->n_rules] = x->bucket[h % 256];
  x->bucket[h % 256] = (uint32_t) p->n_rules + 1;
  *r = (struct sbx_rule){
      .syscall = strdup(syscall),
      .name_hash = h,
      .action = action,
      .errno_value = errno_value,
      .cmp = cmp,
      .arg = arg,
      .mask = mask,
      .value = value,
      .cond_text = cond ? strdup(cond) : NULL,
      .group = (size_t) ps->current_group,
      .file = ps->file_kept,
      .line = ps->line,
  };
  if (!r->syscall || (cond && !r->cond_text))
    return perr(ps, "out of memory");
  p->n_rules++;
  return 0;
}

/* allow|errno E|kill SYSCALL... [when argN (== V | in A,B | & MASK == V)] */
static int parse_rule(struct parser *ps, char **w, int n)
{
  enum sbx_action action;
  int errno_value = 0, i = 1;
  if (ps->current_group < 0)
    return perr(ps, "`%s` before any `group` line: every rule needs a group and a reason", w[0]);
  if (strcmp(w[0], "allow") == 0)
    action = SBX_ACT_ALLOW;
  else if (strcmp(w[0], "kill") == 0)
    action = SBX_ACT_KILL;
  else {
    action = SBX_ACT_ERRNO;
    if (n < 2 || (errno_value = policy_errno_by_name(w[1])) < 0)
      return perr(ps,
                  "`errno` needs a known error name (EPERM, ENOSYS, EACCES, EAFNOSUPPORT, EINVAL, ENOTSUP)");
    i = 2;
  }
  int when = -1;
  for (int j = i; j < n; j++)
    if (strcmp(w[j], "when") == 0) {
      when = j;
      break;
    }
  int last = when < 0 ? n : when;
  if (last == i)
    return perr(ps, "`%s` names no syscall", w[0]);
  if (when < 0) {
    for (int j = i; j < last; j++)
      if (add_rule(ps, w[j], action, errno_value, SBX_CMP_ANY, 0, 0, 0, NULL) < 0)
        return -1;
    return 0;
  }
  if (last - i != 1)
    return perr(ps, "a rule with `when` names exactly one syscall");
  const char *sc = w[i];
  char **c = &w[when + 1];
  int nc = n - when - 1;
  unsigned arg;
  if (nc < 3 || strncmp(c[0], "arg", 3) != 0 || c[0][3] < '0' || c[0][3] > '5' || c[0][4])
    return perr(ps, "condition must start with arg0..arg5");
  arg = (unsigned) (c[0][3] - '0');
  /* The words joined by spaces, as bufcatf would (at most sizeof cond - 1 bytes), without a
   * printf per word: this runs for every conditional rule on every exec. */
  char cond[512];
  size_t cl = 0;
  for (int j = 0; j < nc; j++) {
    size_t wl = strlen(c[j]);
    if (cl + (j ? 1 : 0) + wl >= sizeof cond)
      return perr(ps, "condition too long");
    if (j)
      cond[cl++] = ' ';
    memcpy(cond + cl, c[j], wl);
    cl += wl;
  }
  cond[cl] = '\0';
  uint64_t v, mask;
  if (nc == 3 && strcmp(c[1], "==") == 0) {
    if (parse_value(ps, c[2], &v) < 0)
      return -1;
    if (v > UINT32_MAX)
      return perr(ps, "`==` compares the low 32 bits; %s does not fit", c[2]);
    return add_rule(ps, sc, action, errno_value, SBX_CMP_EQ32, arg, 0xffffffffULL, v, cond);
  }
  if (nc == 3 && strcmp(c[1], "in") == 0) {
    _cleanup_free_ char *list = strdup(c[2]);
    char *save = NULL;
    if (!list)
      return perr(ps, "out of memory");
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      char one[128];
      if (parse_value(ps, t, &v) < 0)
        return -1;
      if (v > UINT32_MAX)
        return perr(ps, "`in` compares the low 32 bits; %s does not fit", t);
      if (bufprintf(one, sizeof one, NULL, "%s == %s", c[0], t) < 0)
        return perr(ps, "condition too long");
      if (add_rule(ps, sc, action, errno_value, SBX_CMP_EQ32, arg, 0xffffffffULL, v, one) < 0)
        return -1;
    }
    return 0;
  }
  if (nc == 5 && strcmp(c[1], "&") == 0 && strcmp(c[3], "==") == 0) {
    if (parse_value(ps, c[2], &mask) < 0 || parse_value(ps, c[4], &v) < 0)
      return -1;
    if ((v & ~mask) != 0)
      return perr(ps, "value has bits outside the mask: the rule could never match");
    return add_rule(ps, sc, action, errno_value, SBX_CMP_MASKED_EQ, arg, mask, v, cond);
  }
  return perr(ps, "condition must be `argN == V`, `argN in A,B,...` or `argN & MASK == V`");
}

static int parse_bool(const char *s, bool *ret)
{
  if (!strcmp(s, "yes") || !strcmp(s, "true")) {
    *ret = true;
    return 0;
  }
  if (!strcmp(s, "no") || !strcmp(s, "false")) {
    *ret = false;
    return 0;
  }
  return -1;
}

static int parse_scalar(struct parser *ps, size_t k, char **w, int n, const char *rest)
{
  const struct key_def *kd = &keys[k];
  char *base = (char *) ps->p + kd->offset;
  if (ps->seen[k])
    return perr(ps, "`%s` is defined twice", kd->name);
  ps->seen[k] = true;
  if (kd->kind == K_TEXT) {
    if (!rest || !*rest)
      return perr(ps, "`%s` needs a value", kd->name);
    if (!(*(char **) base = strdup(rest)))
      return perr(ps, "out of memory");
    return 0;
  }
  if (n != 2)
    return perr(ps, "`%s` takes exactly one value", kd->name);
  uint64_t v;
  switch (kd->kind) {
  case K_SIZE:
    if (parse_size(w[1], &v) < 0)
      return perr(ps, "`%s`: bad size `%s` (use e.g. 512M, 1G)", kd->name, w[1]);
    *(uint64_t *) base = v;
    break;
  case K_DURATION:
    if (parse_duration_ms(w[1], &v) < 0 || v == 0)
      return perr(ps, "`%s`: bad duration `%s` (use e.g. 30s, 500ms)", kd->name, w[1]);
    *(uint64_t *) base = v;
    break;
  case K_COUNT:
    if (parse_u64(w[1], &v) < 0 || v == 0 || v > INT_MAX)
      return perr(ps, "`%s`: bad count `%s`", kd->name, w[1]);
    *(uint64_t *) base = v;
    break;
  case K_BUDGET: /* 0 is a budget too: none of it */
    if (parse_u64(w[1], &v) < 0 || v > INT_MAX)
      return perr(ps, "`%s`: bad count `%s` (0 to %d)", kd->name, w[1], INT_MAX);
    *(uint64_t *) base = v;
    break;
  case K_MILLI:
    if (parse_milli(w[1], &v) < 0 || v == 0 || v > 1024 * 1000)
      return perr(ps, "`%s`: bad number `%s` (use e.g. 0.5, 2)", kd->name, w[1]);
    *(uint64_t *) base = v;
    break;
  case K_ID:
    if (parse_u64(w[1], &v) < 0 || v >= 65535 * 65536ULL)
      return perr(ps, "`%s`: bad id `%s`", kd->name, w[1]);
    *(unsigned *) base = (unsigned) v;
    break;
  case K_BOOL:
    if (parse_bool(w[1], (bool *) base) < 0)
      return perr(ps, "`%s`: expected yes or no, got `%s`", kd->name, w[1]);
    break;
  case K_WORD:
    for (const char *c = w[1]; *c; c++)
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
            *c == '_' || *c == '.'))
        return perr(ps, "`%s`: `%s` may only hold letters, digits, '-', '_' and '.'", kd->name, w[1]);
    if (strlen(w[1]) > 63)
      return perr(ps, "`%s`: longer than 63 characters", kd->name);
    if (!(*(char **) base = strdup(w[1])))
      return perr(ps, "out of memory");
    break;
  case K_CGROUP:
    if (!strcmp(w[1], "required"))
      *(enum sbx_cgroup_policy *) base = SBX_CGROUP_REQUIRED;
    else if (!strcmp(w[1], "fallback-rlimit"))
      *(enum sbx_cgroup_policy *) base = SBX_CGROUP_FALLBACK_RLIMIT;
    else
      return perr(ps, "`cgroup`: expected required or fallback-rlimit, got `%s`", w[1]);
    break;
  case K_APPROVE:
    if (policy_approve_parse(w[1], (enum sbx_approve *) base) < 0)
      return perr(ps, "`%s`: expected none, writes or all, got `%s`", kd->name, w[1]);
    break;
  case K_TEXT:
    break;
  }
  return 0;
}

static int parse_text(struct parser *ps, const char *text, const char *dir);

static int parse_include(struct parser *ps, char **w, int n, const char *dir)
{
  if (n != 2)
    return perr(ps, "`include` takes one file name");
  if (ps->depth > 0)
    return perr(ps, "`include` inside an included file: at most one level of include");
  if (strchr(w[1], '/') || w[1][0] == '.')
    return perr(ps, "`include %s`: name a file in the same directory", w[1]);
  char path[PATH_MAX];
  if (bufprintf(path, sizeof path, ps->err, "%s/%s", dir, w[1]) < 0)
    return sbx_error_prefix(ps->err, "%s:%d: include", ps->file, ps->line);
  _cleanup_free_ char *text = NULL;
  if (read_file(path, SBX_POLICY_MAX_BYTES, &text, NULL, ps->err) < 0)
    return sbx_error_prefix(ps->err, "%s:%d", ps->file, ps->line);
  struct parser sub = *ps;
  sub.file = path;
  sub.file_kept = NULL;
  sub.line = 0;
  sub.depth = ps->depth + 1;
  sub.current_group = -1;
  if (parse_text(&sub, text, dir) < 0)
    return -1;
  memcpy(ps->seen, sub.seen, sizeof ps->seen);
  ps->seen_default = sub.seen_default;
  ps->seen_badarch = sub.seen_badarch;
  ps->seen_proxy = sub.seen_proxy;
  return 0;
}

static int parse_group(struct parser *ps, char **w, int n)
{
  struct sbx_policy *p = ps->p;
  if (n != 3)
    return perr(ps, "`group` takes a name and a quoted reason");
  for (size_t i = 0; i < p->n_groups; i++)
    if (strcmp(p->groups[i].name, w[1]) == 0)
      return perr(ps, "group `%s` is defined twice", w[1]);
  if (!*w[2])
    return perr(ps, "group `%s` needs a reason", w[1]);
  struct sbx_group *g = realloc(p->groups, (p->n_groups + 1) * sizeof *g);
  if (!g)
    return perr(ps, "out of memory");
  p->groups = g;
  g[p->n_groups].name = strdup(w[1]);
  g[p->n_groups].reason = strdup(w[2]);
  if (!g[p->n_groups].name || !g[p->n_groups].reason)
    return perr(ps, "out of memory");
  ps->current_group = (long) p->n_groups++;
  return 0;
}

static int parse_seccomp_action(struct parser *ps, char **w, int n, bool *seen, enum sbx_action *act, int *e)
{
  if (*seen)
    return perr(ps, "`%s` is defined twice", w[0]);
  *seen = true;
  if (n == 2 && strcmp(w[1], "kill") == 0) {
    *act = SBX_ACT_KILL;
    return 0;
  }
  if (n == 3 && strcmp(w[1], "errno") == 0 && e && (*e = policy_errno_by_name(w[2])) >= 0) {
    *act = SBX_ACT_ERRNO;
    return 0;
  }
  return perr(ps, "`%s` must be `kill`%s", w[0], e ? " or `errno NAME`" : "");
}

static int parse_env(struct parser *ps, char **w, int n)
{
  if (n != 2 || !strchr(w[1], '=') || w[1][0] == '=')
    return perr(ps, "`env` takes one NAME=VALUE");
  size_t klen = (size_t) (strchr(w[1], '=') - w[1]);
  /* `${` starts a variable, and the only one is the memory limit: no other expansion happens. */
  for (const char *v = strstr(w[1], "${"); v; v = strstr(v + 2, "${"))
    if (strncmp(v, POLICY_ENV_MEMORY_MIB, strlen(POLICY_ENV_MEMORY_MIB)))
      return perr(ps, "`env %.*s`: `%.*s` is not a variable (the one is " POLICY_ENV_MEMORY_MIB ")",
                  (int) klen, w[1], (int) strcspn(v, "}") + 1, v);
  for (size_t i = 0; i < ps->p->n_env; i++)
    if (strncmp(ps->p->env[i], w[1], klen + 1) == 0)
      return perr(ps, "`env %.*s` is defined twice", (int) klen, w[1]);
  return push_str(&ps->p->env, &ps->p->n_env, w[1]) < 0 ? perr(ps, "out of memory") : 0;
}

static int parse_proxy_servers(struct parser *ps, char **w, int n)
{
  /* proxy_servers none | * | NAME... : which host MCP servers code may reach (sandboxd-mcp(7)). */
  if (ps->seen_proxy)
    return perr(ps, "`proxy_servers` is defined twice");
  ps->seen_proxy = true;
  if (n < 2)
    return perr(ps, "`proxy_servers` needs `none`, `*` or server names");
  if (n == 2 && !strcmp(w[1], "none"))
    return 0;
  for (int i = 1; i < n; i++) {
    if (strcmp(w[i], "*") != 0)
      for (const char *c = w[i]; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_' || *c == '.'))
          return perr(ps, "`proxy_servers`: `%s` is not a server name", w[i]);
    if ((!strcmp(w[i], "*") && n != 2) || !strcmp(w[i], "none"))
      return perr(ps, "`proxy_servers`: `*` and `none` stand alone");
    if (push_str(&ps->p->proxy_servers, &ps->p->n_proxy_servers, w[i]) < 0)
      return perr(ps, "out of memory");
  }
  return 0;
}

static int parse_network(struct parser *ps, char **w, int n)
{
  /* network none|proxy, max_network none|proxy (sandboxd.policy(5), "Network"). */
  bool max = w[0][0] == 'm';
  bool *seen = max ? &ps->seen_max_network : &ps->seen_network;
  if (*seen)
    return perr(ps, "`%s` is defined twice", w[0]);
  *seen = true;
  if (n != 2 || (strcmp(w[1], "none") && strcmp(w[1], "proxy")))
    return perr(ps, "`%s` takes `none` or `proxy`", w[0]);
  *(max ? &ps->p->max_network : &ps->p->network) = strcmp(w[1], "none") ? SBX_NET_PROXY : SBX_NET_NONE;
  return 0;
}

static int parse_allow_host(struct parser *ps, char **w, int n, const char *reason)
{
  /* allow_host PATTERN[:PORT]   # reason */
  if (n != 2)
    return perr(ps, "`allow_host` takes one PATTERN[:PORT] (and a `# reason`)");
  sbx_error_t e = {0};
  if (policy_push_allow_host(ps->p, w[1], reason, SBX_POLICY_MAX_ALLOW_HOSTS, &e) < 0)
    return perr(ps, "`allow_host`: %s", e.msg);
  return 0;
}

static int parse_host_id_range(struct parser *ps, char **w, int n)
{
  /* host_id_range START COUNT: host uids/gids START..START+COUNT-1, one per concurrent sandbox. */
  uint64_t start, count;
  if (ps->seen_host_ids)
    return perr(ps, "`host_id_range` is defined twice");
  ps->seen_host_ids = true;
  if (n != 3 || parse_u64(w[1], &start) < 0 || parse_u64(w[2], &count) < 0)
    return perr(ps, "`host_id_range` takes START COUNT");
  /* Not 0 (root), and below 4294967295, which is (uid_t) -1 to the kernel. */
  if (start == 0 || count == 0 || start + count > UINT32_MAX)
    return perr(ps, "`host_id_range %s %s`: need 1 <= START and START + COUNT <= 4294967295", w[1], w[2]);
  ps->p->host_id_start = (unsigned) start;
  ps->p->host_id_count = (unsigned) count;
  return 0;
}

static int parse_proc_paths(struct parser *ps, char **w, int n)
{
  bool mask = w[0][5] == 'm';
  char ***arr = mask ? &ps->p->proc_masked : &ps->p->proc_readonly;
  size_t *cnt = mask ? &ps->p->n_proc_masked : &ps->p->n_proc_readonly;
  if (n < 2)
    return perr(ps, "`%s` needs at least one path", w[0]);
  for (int i = 1; i < n; i++) {
    if (strncmp(w[i], "/proc/", 6) != 0 || strstr(w[i], "..") || strlen(w[i]) > 200)
      return perr(ps, "`%s`: `%s` is not a path under /proc", w[0], w[i]);
    for (size_t j = 0; j < *cnt; j++)
      if (!strcmp((*arr)[j], w[i]))
        return perr(ps, "`%s %s` is listed twice", w[0], w[i]);
    if (push_str(arr, cnt, w[i]) < 0)
      return perr(ps, "out of memory");
  }
  return 0;
}

static int parse_line(struct parser *ps, char *line, const char *dir)
{
  char *w[64];
  int n;
  /* `description` keeps the rest of the line verbatim (minus a trailing comment). */
  char *rest = NULL, restbuf[512];
  if (strncmp(line, "description", 11) == 0 && (line[11] == ' ' || line[11] == '\t')) {
    if (bufprintf(restbuf, sizeof restbuf, NULL, "%s", line + 11) < 0)
      return perr(ps, "`description` is longer than %zu bytes", sizeof restbuf - 1);
    rest = restbuf;
    while (*rest == ' ' || *rest == '\t')
      rest++;
    char *hash = strstr(rest, " #");
    if (hash)
      *hash = '\0';
    size_t len = strlen(rest);
    while (len && (rest[len - 1] == ' ' || rest[len - 1] == '\t'))
      rest[--len] = '\0';
  }
  /* `allow_host`'s trailing comment is its reason, which `policy show` prints. */
  char reasonbuf[EGRESS_REASON_MAX + 2], *reason = NULL;
  if (strncmp(line, "allow_host", 10) == 0 && (line[10] == ' ' || line[10] == '\t') && strchr(line, '#')) {
    char *r = strchr(line, '#') + 1;
    while (*r == ' ' || *r == '\t')
      r++;
    size_t len = strlen(r);
    while (len && (r[len - 1] == ' ' || r[len - 1] == '\t'))
      len--;
    if (len > EGRESS_REASON_MAX)
      return perr(ps, "`allow_host`: the reason is longer than %d bytes", EGRESS_REASON_MAX);
    memcpy(reasonbuf, r, len);
    reasonbuf[len] = '\0';
    reason = reasonbuf;
  }
  if (tokenize(ps, line, w, (int) ARRAY_SIZE(w), &n) < 0)
    return -1;
  if (n == 0)
    return 0;
  if (!strcmp(w[0], "include"))
    return parse_include(ps, w, n, dir);
  if (!strcmp(w[0], "group"))
    return parse_group(ps, w, n);
  if (!strcmp(w[0], "allow") || !strcmp(w[0], "errno") || !strcmp(w[0], "kill"))
    return parse_rule(ps, w, n);
  if (!strcmp(w[0], "seccomp_default"))
    return parse_seccomp_action(ps, w, n, &ps->seen_default, &ps->p->default_action, &ps->p->default_errno);
  if (!strcmp(w[0], "seccomp_badarch"))
    return parse_seccomp_action(ps, w, n, &ps->seen_badarch, &ps->p->badarch_action, NULL);
  if (!strcmp(w[0], "env"))
    return parse_env(ps, w, n);
  if (!strcmp(w[0], "proxy_servers"))
    return parse_proxy_servers(ps, w, n);
  if (!strcmp(w[0], "host_id_range"))
    return parse_host_id_range(ps, w, n);
  if (!strcmp(w[0], "network") || !strcmp(w[0], "max_network"))
    return parse_network(ps, w, n);
  if (!strcmp(w[0], "allow_host"))
    return parse_allow_host(ps, w, n, reason);
  if (!strcmp(w[0], "proc_mask") || !strcmp(w[0], "proc_readonly"))
    return parse_proc_paths(ps, w, n);
  for (size_t k = 0; k < N_SCALAR_KEYS; k++)
    if (!strcmp(w[0], keys[k].name))
      return parse_scalar(ps, k, w, n, rest);
  /* Policies written before host_id_range: say what replaced the key, not only that it is gone. */
  if (strcmp(w[0], "host_uid") == 0 || strcmp(w[0], "host_gid") == 0)
    return perr(ps,
                "`%s` was replaced by `host_id_range START COUNT`, one host uid and gid per sandbox "
                "(sandboxd.policy(5))",
                w[0]);
  return perr(ps, "unknown key `%s`", w[0]);
}

static int parse_text(struct parser *ps, const char *text, const char *dir)
{
  _cleanup_free_ char *copy = strdup(text);
  if (!copy)
    return sbx_error_set(ps->err, ENOMEM, "%s", ps->file);
  bool have_header = false;
  char *save = NULL;
  char *line = copy;
  ps->line = 0;
  for (;;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = '\0';
    ps->line++;
    if (strchr(line, '\r'))
      return perr(ps, "carriage return in line (save the file with Unix line endings)");
    char *t = line;
    while (*t == ' ' || *t == '\t')
      t++;
    if (*t && *t != '#') {
      if (!have_header) {
        char *w[4];
        int n;
        if (tokenize(ps, t, w, 4, &n) < 0)
          return -1;
        if (n != 2 || strcmp(w[0], "sandboxd-policy") != 0)
          return perr(ps, "the first line must be `sandboxd-policy %d`", SBX_POLICY_VERSION);
        if (strcmp(w[1], "1") != 0)
          return perr(ps, "unsupported policy version `%s` (this sandboxd reads version %d)", w[1],
                      SBX_POLICY_VERSION);
        have_header = true;
      } else if (parse_line(ps, t, dir) < 0) {
        return -1;
      }
    }
    if (!nl)
      break;
    line = nl + 1;
  }
  (void) save;
  if (!have_header)
    return perr(ps, "empty policy: the first line must be `sandboxd-policy %d`", SBX_POLICY_VERSION);
  return 0;
}

static int check_complete(struct parser *ps)
{
  struct sbx_policy *p = ps->p;
  for (size_t k = 0; k < N_SCALAR_KEYS; k++)
    if (!ps->seen[k])
      return sbx_error_set(ps->err, 0, "%s: missing key `%s` (every limit and switch is explicit)", ps->file,
                           keys[k].name);
  if (!ps->seen_proxy)
    return sbx_error_set(ps->err, 0, "%s: missing key `proxy_servers` (every limit and switch is explicit)",
                         ps->file);
  if (!ps->seen_host_ids)
    return sbx_error_set(ps->err, 0, "%s: missing key `host_id_range` (every limit and switch is explicit)",
                         ps->file);
  if (!ps->seen_network || !ps->seen_max_network)
    return sbx_error_set(ps->err, 0, "%s: missing key `%s` (every limit and switch is explicit)", ps->file,
                         ps->seen_network ? "max_network" : "network");
  if (p->network > p->max_network)
    return sbx_error_set(ps->err, 0, "%s: `network` is above `max_network`", ps->file);
  /* An allowlist nothing can use would mislead an auditor. */
  if (p->n_allow_hosts && p->max_network == SBX_NET_NONE)
    return sbx_error_set(ps->err, 0, "%s: `allow_host` needs `network proxy` or `max_network proxy`",
                         ps->file);
  if (p->egress.connections > SBX_EGRESS_MAX_CONNECTIONS)
    return sbx_error_set(ps->err, 0, "%s: `egress_connections` is above %d", ps->file,
                         SBX_EGRESS_MAX_CONNECTIONS);
  if (p->proxy_request_bytes < SBX_PROXY_REQUEST_MIN || p->proxy_request_bytes > SBX_PROXY_REQUEST_MAX)
    return sbx_error_set(ps->err, 0, "%s: `proxy_request_limit` must be from %uK to %uM", ps->file,
                         SBX_PROXY_REQUEST_MIN >> 10, SBX_PROXY_REQUEST_MAX >> 20);
  if (p->fork_template_calls > SBX_FORK_TEMPLATE_CALLS_MAX)
    return sbx_error_set(ps->err, 0, "%s: `fork_template_calls` must be from 1 to %u", ps->file,
                         SBX_FORK_TEMPLATE_CALLS_MAX);
  if (p->max_tasks > SBX_MAX_TASKS_MAX)
    return sbx_error_set(ps->err, 0, "%s: `max_tasks` must be from 1 to %u", ps->file, SBX_MAX_TASKS_MAX);
  if (p->session_idle_ms < 1000 || p->session_max_life_ms < 1000 ||
      p->session_idle_ms > SBX_SESSION_MAX_S * 1000 || p->session_max_life_ms > SBX_SESSION_MAX_S * 1000)
    return sbx_error_set(ps->err, 0, "%s: `session_idle` and `session_max_life` must be from 1s to %us",
                         ps->file, SBX_SESSION_MAX_S);
  if (p->max_sessions > SBX_MAX_SESSIONS)
    return sbx_error_set(ps->err, 0, "%s: `max_sessions` must be from 0 to %u", ps->file, SBX_MAX_SESSIONS);
  if (!ps->seen_default || !ps->seen_badarch)
    return sbx_error_set(ps->err, 0, "%s: missing `%s`", ps->file,
                         ps->seen_default ? "seccomp_badarch" : "seccomp_default");
  if (p->n_rules == 0)
    return sbx_error_set(ps->err, 0, "%s: no syscall rules", ps->file);
  static const struct {
    const char *name;
    size_t off;
  } pairs[] = {
      {"timeout", offsetof(struct sbx_limits, timeout_ms)},
      {"memory", offsetof(struct sbx_limits, memory_bytes)},
      {"pids", offsetof(struct sbx_limits, pids)},
      {"cpus", offsetof(struct sbx_limits, cpus_milli)},
      {"tmp_size", offsetof(struct sbx_limits, tmp_bytes)},
      {"workspace_size", offsetof(struct sbx_limits, workspace_bytes)},
      {"shm_size", offsetof(struct sbx_limits, shm_bytes)},
      {"nofile", offsetof(struct sbx_limits, nofile)},
      {"fsize", offsetof(struct sbx_limits, fsize_bytes)},
      {"output_limit", offsetof(struct sbx_limits, output_bytes)},
  };
  for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
    uint64_t def = *(uint64_t *) ((char *) &p->limits + pairs[i].off);
    uint64_t max = *(uint64_t *) ((char *) &p->max + pairs[i].off);
    if (def > max)
      return sbx_error_set(ps->err, 0, "%s: `%s` is above `max_%s`", ps->file, pairs[i].name, pairs[i].name);
  }
  if (p->uid == 0 || p->gid == 0)
    return sbx_error_set(ps->err, 0, "%s: `uid` and `gid` must not be 0: code never runs as root", ps->file);
  if (p->budgets.namespaces < SBX_MIN_NAMESPACES)
    return sbx_error_set(
        ps->err, 0,
        "%s: `namespaces` must be at least %d: the sandbox's setup holds two cgroup namespaces for a moment",
        ps->file, SBX_MIN_NAMESPACES);
  return 0;
}

int policy_parse_string(const char *text, const char *file, const char *dir, struct sbx_policy **ret,
                        sbx_error_t *err)
{
  struct sbx_policy *p = calloc(1, sizeof *p);
  if (!p)
    return sbx_error_set(err, ENOMEM, "policy");
  struct rule_index idx = {0};
  struct parser ps = {.p = p, .file = file, .current_group = -1, .err = err, .idx = &idx};
  /* A fragment (*.inc, what `include` names) is checked on its own without the completeness
   * rules; it cannot be used as a policy. */
  size_t flen = strlen(file);
  bool fragment = flen > 4 && strcmp(file + flen - 4, ".inc") == 0;
  bool ok =
      (p->path = strdup(file)) && parse_text(&ps, text, dir) == 0 && (fragment || check_complete(&ps) == 0);
  free(idx.next);
  if (!ok) {
    policy_free(p);
    return -1;
  }
  /* The hash covers what is enforced, not how constants were spelled (comments). */
  if (fragment) {
    p->name = strdup("(fragment)");
    *ret = p;
    return 0;
  }
  _cleanup_free_ char *canon = policy_format_canonical(p);
  if (!canon) {
    policy_free(p);
    return sbx_error_set(err, ENOMEM, "policy");
  }
  sha256_hex(canon, strlen(canon), p->sha256);
  *ret = p;
  return 0;
}

static void free_strv(char **v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

void policy_free(struct sbx_policy *p)
{
  if (!p)
    return;
  free(p->name);
  free(p->path);
  free(p->description);
  free(p->hostname);
  free_strv(p->env, p->n_env);
  free_strv(p->proc_masked, p->n_proc_masked);
  free_strv(p->proc_readonly, p->n_proc_readonly);
  free_strv(p->proxy_servers, p->n_proxy_servers);
  free(p->allow_hosts);
  for (size_t i = 0; i < p->n_groups; i++) {
    free(p->groups[i].name);
    free(p->groups[i].reason);
  }
  free(p->groups);
  for (size_t i = 0; i < p->n_rules; i++) {
    free(p->rules[i].syscall);
    free(p->rules[i].cond_text);
  }
  free(p->rules);
  free_strv(p->rule_files, p->n_rule_files);
  free(p);
}

bool policy_allows_server(const struct sbx_policy *p, const char *name)
{
  for (size_t i = 0; i < p->n_proxy_servers; i++)
    if (!strcmp(p->proxy_servers[i], "*") || !strcmp(p->proxy_servers[i], name))
      return true;
  return false;
}
