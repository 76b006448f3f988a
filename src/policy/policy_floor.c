/* SPDX-License-Identifier: Apache-2.0 */
/* The unprivileged floor (policy.h, sandboxd.policy(5) "UNPRIVILEGED FLOOR"). Unprivileged,
 * sandboxd makes its sandboxes' user namespaces with whatever right the host gave the binary
 * (an AppArmor profile's `userns`, where the host refuses them to ordinary users): a policy
 * file the caller wrote must not hand that namespace on to the code. So whatever the file says,
 * the code gets no capability, no_new_privs, and no call that makes or enters a namespace or
 * changes mounts. Pure: the caller decides when it applies (policy_load: not root).
 *
 * The floor edits the policy itself, not the filter alone, so that `policy show`, the sha256,
 * the seccomp cache's name and the audit record all say what is enforced. A policy that already
 * holds the floor (every shipped one) comes out unchanged, byte for byte; so does the floored
 * text read back. */
#include "policy/policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define FLOOR_GROUP "unprivileged-floor"
#define FLOOR_REASON                                                                                         \
  "sandboxd is not root: no namespace or mount call, whatever the file allows (sandboxd.policy(5), "         \
  "UNPRIVILEGED FLOOR)"
#define FLOOR_FILE "(unprivileged floor)"
#define FLOOR_NOTE "floor: sandboxd is not root"

/* CLONE_NEWNS|CLONE_NEWUTS|CLONE_NEWIPC|CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWCGROUP|
 * CLONE_NEWTIME: the shipped rule's mask (in clone's arg0 the last is a bit of the exit signal,
 * which no signal number sets). */
#define NS_FLAGS 0x7e020080ULL

/* Refused outright: each makes or enters a namespace, or changes the mount tree. clone3 gets
 * ENOSYS, as in the shipped policies: its flags are in memory no filter reads, and libc falls
 * back to clone. A call no rule allows is refused already: seccomp_default is never allow. */
static const struct {
  const char *name;
  int errno_value;
} floor_denied[] = {
    {"unshare", EPERM},       {"setns", EPERM},   {"mount", EPERM},      {"umount2", EPERM},
    {"pivot_root", EPERM},    {"chroot", EPERM},  {"fsopen", EPERM},     {"fsconfig", EPERM},
    {"fsmount", EPERM},       {"fspick", EPERM},  {"move_mount", EPERM}, {"open_tree", EPERM},
    {"mount_setattr", EPERM}, {"clone3", ENOSYS},
};

static bool named(const struct sbx_rule *r, const char *syscall, uint32_t h)
{
  return r->name_hash == h && strcmp(r->syscall, syscall) == 0;
}

/* An allow rule of clone that can let a namespace flag through: unconditional, on another
 * argument, or on arg0 with a mask that leaves a flag out or a value that holds one. */
static bool clone_rule_lets_ns(const struct sbx_rule *r)
{
  if (r->action != SBX_ACT_ALLOW)
    return false;
  if (r->cmp == SBX_CMP_ANY || r->arg != 0)
    return true;
  return (r->mask & NS_FLAGS) != NS_FLAGS || (r->value & NS_FLAGS) != 0;
}

static void rule_free(struct sbx_rule *r)
{
  free(r->syscall);
  free(r->cond_text);
}

/* Drop the rules of p that drop() picks, keeping the order of the rest. */
static size_t drop_rules(struct sbx_policy *p, bool (*drop)(const struct sbx_rule *r, const void *arg),
                         const void *arg)
{
  size_t n = 0, dropped = 0;
  for (size_t i = 0; i < p->n_rules; i++) {
    if (drop(&p->rules[i], arg)) {
      rule_free(&p->rules[i]);
      dropped++;
    } else {
      p->rules[n++] = p->rules[i];
    }
  }
  p->n_rules = n;
  return dropped;
}

static bool is_rule_of(const struct sbx_rule *r, const void *syscall)
{
  return named(r, syscall, policy_name_hash(syscall));
}

static bool is_clone_ns_allow(const struct sbx_rule *r, const void *unused)
{
  (void) unused;
  return named(r, "clone", policy_name_hash("clone")) && clone_rule_lets_ns(r);
}

/* A rule of clone with the floor's own condition (arg0 & NS_FLAGS == 0): it would duplicate it. */
static bool is_clone_floor_cond(const struct sbx_rule *r, const void *unused)
{
  (void) unused;
  return named(r, "clone", policy_name_hash("clone")) && r->cmp == SBX_CMP_MASKED_EQ && r->arg == 0 &&
         r->mask == NS_FLAGS && r->value == 0;
}

/* The floor's group, added once. */
static int floor_group(struct sbx_policy *p, size_t *ret, sbx_error_t *err)
{
  for (size_t g = 0; g < p->n_groups; g++)
    if (strcmp(p->groups[g].name, FLOOR_GROUP) == 0) {
      *ret = g;
      return 0;
    }
  struct sbx_group *groups = realloc(p->groups, (p->n_groups + 1) * sizeof *groups);
  if (!groups)
    return sbx_error_set(err, ENOMEM, "policy floor");
  p->groups = groups;
  groups[p->n_groups] = (struct sbx_group){.name = strdup(FLOOR_GROUP), .reason = strdup(FLOOR_REASON)};
  if (!groups[p->n_groups].name || !groups[p->n_groups].reason) {
    free(groups[p->n_groups].name);
    free(groups[p->n_groups].reason);
    return sbx_error_set(err, ENOMEM, "policy floor");
  }
  *ret = p->n_groups++;
  return 0;
}

static int add_floor_rule(struct sbx_policy *p, struct sbx_rule r, const char *note, sbx_error_t *err)
{
  size_t g = 0;
  if (floor_group(p, &g, err) < 0)
    return -1;
  struct sbx_rule *rules = realloc(p->rules, (p->n_rules + 1) * sizeof *rules);
  if (!rules)
    return sbx_error_set(err, ENOMEM, "policy floor");
  p->rules = rules;
  r.name_hash = policy_name_hash(r.syscall);
  r.syscall = strdup(r.syscall);
  r.cond_text = strdup(note);
  r.group = g;
  r.file = FLOOR_FILE;
  r.line = 0;
  if (!r.syscall || !r.cond_text) {
    rule_free(&r);
    return sbx_error_set(err, ENOMEM, "policy floor");
  }
  rules[p->n_rules++] = r;
  return 0;
}

int policy_apply_floor(struct sbx_policy *p, sbx_error_t *err)
{
  unsigned raised = 0;
  if (!p->drop_capabilities) {
    p->drop_capabilities = true;
    raised |= SBX_FLOOR_CAPABILITIES;
  }
  if (!p->no_new_privs) {
    p->no_new_privs = true;
    raised |= SBX_FLOOR_NO_NEW_PRIVS;
  }
  for (size_t c = 0; c < ARRAY_SIZE(floor_denied); c++) {
    const char *name = floor_denied[c].name;
    uint32_t h = policy_name_hash(name);
    bool allowed = false;
    for (size_t i = 0; i < p->n_rules && !allowed; i++)
      allowed = named(&p->rules[i], name, h) && p->rules[i].action == SBX_ACT_ALLOW;
    if (!allowed)
      continue;
    /* Every rule of the call goes, its conditional denials too: an unconditional denial covers
     * them, and the parser refuses the two kinds together (the text must read back). */
    drop_rules(p, is_rule_of, name);
    struct sbx_rule r = {.syscall = (char *) name,
                         .action = SBX_ACT_ERRNO,
                         .errno_value = floor_denied[c].errno_value,
                         .cmp = SBX_CMP_ANY};
    if (add_floor_rule(p, r, FLOOR_NOTE, err) < 0)
      return -1;
    raised |= SBX_FLOOR_SYSCALLS;
  }
  /* clone: threads and processes stay; an allow that lets any namespace flag through is replaced
   * by one that lets none (the rest takes seccomp_default, never allow). Conditional denials
   * stay, but one with the floor's own condition, which the parser would call a duplicate. */
  if (drop_rules(p, is_clone_ns_allow, NULL)) {
    drop_rules(p, is_clone_floor_cond, NULL);
    struct sbx_rule r = {.syscall = "clone",
                         .action = SBX_ACT_ALLOW,
                         .cmp = SBX_CMP_MASKED_EQ,
                         .arg = 0,
                         .mask = NS_FLAGS,
                         .value = 0};
    if (add_floor_rule(p, r, "arg0 & CLONE_NEW* == 0   (" FLOOR_NOTE ")", err) < 0)
      return -1;
    raised |= SBX_FLOOR_SYSCALLS;
  }
  p->floor_raised |= raised;
  if (!raised)
    return 0;
  char *canon = policy_format_canonical(p);
  if (!canon)
    return sbx_error_set(err, ENOMEM, "policy floor");
  sha256_hex(canon, strlen(canon), p->sha256);
  free(canon);
  return 0;
}
