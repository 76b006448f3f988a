/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template's policy (fork_template.c): its calls' own, with the calls a template makes
 * allowed in its filter (template_allows), /proc whole, no network, and its user namespace's budgets
 * and rlimits sized for every call in flight, since a call's user namespace charges what it holds to
 * the template's owner there as well. What the template needs is the mechanism's to say (inside/
 * zygote.c and template.py make these calls); its owner says only how many calls run at once. */
#include "sandbox/fork_policy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "base/warn.h"
#include "policy/policy.h"

/* The template's own processes beside its calls': its pid 1, itself, a call's being forked. */
#define TEMPLATE_OWN_PIDS 8

/* What the template's filter allows that the server's may not: clone into namespaces, and for
 * its children unshare and mount; as root also the id changes by which a call's pid 1 takes the
 * host id sandboxd mapped for it. The template itself has no capabilities for any of them in its
 * own user namespace; a call's own filter, the server's, is installed before any code. */
static const char *const template_allows[] = {"clone",     "unshare",   "mount",
                                              "setgroups", "setresgid", "setresuid"};
#define TEMPLATE_ALLOWS_ALWAYS 3

static bool template_allowed(const char *syscall, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(syscall, template_allows[i]) == 0)
      return true;
  return false;
}

/* The calls a template's budgets have room for: those in flight, and some being torn down. */
static unsigned long long template_calls(size_t max_calls)
{
  return max_calls + 4;
}

/* A call's user namespace records its creator's rlimits, the template's, as the ceiling on what
 * all calls of the template's owner hold together there (kernel/ucount.c): so the template's
 * sigpending and msgqueue (and without a cgroup nproc) are room for calls in flight at theirs. Above
 * sandboxd's own hard limit that needs CAP_SYS_RESOURCE: as root sandboxd raises its own; otherwise the hard
 * limit holds (set_budget_rlimit), and the server says once if it is short of --max-concurrent
 * calls. RLIMIT_MEMLOCK is not shared so: the kernel counts its pages there against a limit in
 * bytes. */
static uint64_t room_for_calls(int res, const char *name, uint64_t per_call, unsigned long long calls,
                               size_t running)
{
  static bool told[RLIM_NLIMITS];
  uint64_t want = per_call * calls;
  struct rlimit rl;
  if (getrlimit(res, &rl) < 0 || rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want)
    return want;
  if (geteuid() == 0 && setrlimit(res, &(struct rlimit){.rlim_cur = rl.rlim_cur > want ? rl.rlim_cur : want,
                                                        .rlim_max = want}) == 0)
    return want;
  if (per_call && rl.rlim_max / per_call < running && !told[res]) {
    told[res] = true;
    sbx_warn(SBX_WARN_LIMITS,
             "--max-concurrent %zu: the hard RLIMIT_%s (%llu) holds %llu forked calls at %llu each", running,
             name, (unsigned long long) rl.rlim_max, (unsigned long long) (rl.rlim_max / per_call),
             (unsigned long long) per_call);
  }
  return want;
}

int fork_policy_make(const struct sbx_policy *p, size_t max_calls, struct sbx_policy *ret,
                     struct sbx_rule **ret_rules, sbx_error_t *err)
{
  size_t n_allows =
      geteuid() == 0 ? sizeof template_allows / sizeof *template_allows : TEMPLATE_ALLOWS_ALWAYS;
  *ret = *p;
  struct sbx_rule *rules = calloc(p->n_rules + n_allows, sizeof *rules);
  if (!rules)
    return sbx_error_set(err, ENOMEM, "fork template policy");
  *ret_rules = rules; /* the caller's to free, whatever follows */
  size_t n = 0;
  for (size_t i = 0; i < p->n_rules; i++) {
    rules[n] = p->rules[i];
    if (template_allowed(p->rules[i].syscall, n_allows)) {
      rules[n].action = SBX_ACT_ALLOW;
      rules[n].cmp = SBX_CMP_ANY;
      rules[n].cond_text = NULL;
    }
    n++;
  }
  /* Those the server's policy does not name (its default action refuses them). */
  for (size_t a = 0; a < n_allows; a++) {
    bool named = false;
    for (size_t i = 0; i < p->n_rules && !named; i++)
      named = strcmp(p->rules[i].syscall, template_allows[a]) == 0;
    if (!named)
      rules[n++] = (struct sbx_rule){.syscall = (char *) template_allows[a],
                                     .action = SBX_ACT_ALLOW,
                                     .cmp = SBX_CMP_ANY,
                                     .file = "fork template"};
  }
  ret->rules = rules;
  ret->n_rules = n;
  ret->mask_proc = false;
  /* The template reaches nothing: with network proxy, each call's pid 1 makes its own listener
   * and gets its own proxy (sandbox_adopt); the variables are set for the call (template.py). */
  ret->network = SBX_NET_NONE;
  /* What a call's user namespace is charged is charged to the template's owner in the template's
   * as well: room there for every call in flight at its own budget (each call's namespace holds it
   * to that), so that one call at its budget does not leave another without. */
  unsigned long long calls = template_calls(max_calls);
  struct sbx_budgets *b = &ret->budgets;
  b->namespaces = (p->budgets.namespaces + 8) * calls;
  b->inotify_instances = p->budgets.inotify_instances * calls;
  b->inotify_watches = p->budgets.inotify_watches * calls;
  b->fanotify_groups = p->budgets.fanotify_groups * calls;
  b->fanotify_marks = p->budgets.fanotify_marks * calls;
  b->sigpending = room_for_calls(RLIMIT_SIGPENDING, "SIGPENDING", p->budgets.sigpending, calls, max_calls);
  b->msgqueue_bytes =
      room_for_calls(RLIMIT_MSGQUEUE, "MSGQUEUE", p->budgets.msgqueue_bytes, calls, max_calls);
  _cleanup_free_ char *text = policy_format_canonical(ret);
  if (!text)
    return sbx_error_set(err, ENOMEM, "fork template policy");
  sha256_hex(text, strlen(text), ret->sha256);
  return 0;
}

uint64_t fork_policy_pids(size_t max_calls, uint64_t per_call)
{
  uint64_t pids = room_for_calls(RLIMIT_NPROC, "NPROC", per_call, template_calls(max_calls), max_calls) +
                  TEMPLATE_OWN_PIDS;
  /* set_rlimits sets RLIMIT_NPROC as it is, where it caps the budgets at the hard limit. */
  struct rlimit nproc;
  if (getrlimit(RLIMIT_NPROC, &nproc) == 0 && nproc.rlim_max != RLIM_INFINITY && nproc.rlim_max < pids)
    pids = nproc.rlim_max;
  return pids;
}
