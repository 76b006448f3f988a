/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd policy check FILE...` and `sandboxd policy show [NAME|FILE]`. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/cli.h"
#include "kernel/seccomp.h"

static const char policy_usage[] =
    "usage: sandboxd policy check FILE...     validate policy files (errors as file:line)\n"
    "       sandboxd policy show [NAME|FILE]  print the resolved policy and its sha256\n"
    "       sandboxd policy diff A B          differences in effect (exit 1 if any)\n"
    "Named policies are looked up in $SANDBOXD_POLICY_DIR, next to the binary, and /etc/sandboxd/policy.\n";

static int load_checked(const char *name, bool allow_fragment, struct sbx_policy **ret, sbx_error_t *err)
{
  size_t len = name ? strlen(name) : 0;
  bool fragment = allow_fragment && len > 4 && strcmp(name + len - 4, ".inc") == 0;
  if ((fragment ? policy_load_file(name, ret, err) : policy_load(name, ret, err)) < 0)
    return -1;
  if (seccomp_validate(*ret, err) < 0) {
    policy_free(*ret);
    return -1;
  }
  return 0;
}

static int policy_check(int argc, char **argv)
{
  if (argc < 1) {
    log_error("policy check: name at least one FILE");
    return 125;
  }
  int bad = 0;
  for (int i = 0; i < argc; i++) {
    sbx_error_t err = {0};
    struct sbx_policy *p;
    if (load_checked(argv[i], true, &p, &err) < 0) {
      log_sbx_error(&err);
      bad++;
      continue;
    }
    if (!p->sha256[0])
      printf("%s: ok (fragment for `include`, %zu syscall rules in %zu groups)\n", argv[i], p->n_rules,
             p->n_groups);
    else
      printf("%s: ok (policy `%s`, %zu syscall rules in %zu groups, sha256 %s)\n", argv[i], p->name,
             p->n_rules, p->n_groups, p->sha256);
    policy_free(p);
  }
  return bad ? 125 : 0;
}

static int policy_show(int argc, char **argv)
{
  if (argc > 1) {
    log_error("policy show: takes at most one NAME or FILE");
    return 125;
  }
  sbx_error_t err = {0};
  struct sbx_policy *p;
  if (load_checked(argc ? argv[0] : NULL, false, &p, &err) < 0) {
    log_sbx_error(&err);
    return 125;
  }
  char *text = policy_format(p);
  if (!text) {
    policy_free(p);
    log_error("policy show: out of memory");
    return 125;
  }
  /* The text is itself a valid policy; the hash is over exactly these lines. */
  printf("# sandboxd policy `%s`, resolved from %s (%s)\n", p->name, p->path, seccomp_arch_name());
  if (p->floor_raised)
    printf("# sandboxd is not root: the unprivileged floor raised what the file allows (lines marked "
           "`floor`; sandboxd.policy(5), UNPRIVILEGED FLOOR)\n");
  fputs(text, stdout);
  printf("# sha256 %s\n", p->sha256);
  free(text);
  policy_free(p);
  return 0;
}

/* Lines of the canonical text (comments dropped) present in a but not in b. */
static int print_missing(const char *a, const char *b, char sign)
{
  int n = 0;
  for (const char *l = a; *l;) {
    const char *end = strchr(l, '\n');
    size_t len = end ? (size_t) (end - l) : strlen(l);
    size_t eff = len;
    const char *hash = memmem(l, len, "   # ", 5);
    if (hash)
      eff = (size_t) (hash - l);
    bool found = false;
    for (const char *m = b; *m && !found;) {
      const char *mend = strchr(m, '\n');
      size_t mlen = mend ? (size_t) (mend - m) : strlen(m);
      const char *mh = memmem(m, mlen, "   # ", 5);
      if (mh)
        mlen = (size_t) (mh - m);
      found = mlen == eff && memcmp(m, l, eff) == 0;
      m = mend ? mend + 1 : m + strlen(m);
    }
    if (!found && strncmp(l, "description", 11) != 0) {
      printf("%c %.*s\n", sign, (int) len, l);
      n++;
    }
    l = end ? end + 1 : l + len;
  }
  return n;
}

/* Differences in effect between two policies: enforced lines only in A (-) and only in B (+). */
static int policy_diff(int argc, char **argv)
{
  if (argc != 2) {
    log_error("policy diff: takes two policies, A and B");
    return 125;
  }
  struct sbx_policy *a = NULL, *b = NULL;
  sbx_error_t err = {0};
  if (load_checked(argv[0], false, &a, &err) < 0 || load_checked(argv[1], false, &b, &err) < 0) {
    log_sbx_error(&err);
    policy_free(a);
    return 125;
  }
  char *ta = policy_format(a), *tb = policy_format(b);
  int n = 0;
  if (ta && tb) {
    printf("--- %s (%s, sha256 %.12s)\n+++ %s (%s, sha256 %.12s)\n", argv[0], a->name, a->sha256, argv[1],
           b->name, b->sha256);
    n += print_missing(ta, tb, '-');
    n += print_missing(tb, ta, '+');
    if (!n)
      printf("no difference in effect\n");
  }
  free(ta);
  free(tb);
  policy_free(a);
  policy_free(b);
  /* Like diff(1): 0 the same, 1 different. */
  return n ? 1 : 0;
}

int cmd_policy(int argc, char **argv)
{
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(policy_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 125 : 0;
  }
  if (!strcmp(argv[1], "check"))
    return policy_check(argc - 2, argv + 2);
  if (!strcmp(argv[1], "show"))
    return policy_show(argc - 2, argv + 2);
  if (!strcmp(argv[1], "diff"))
    return policy_diff(argc - 2, argv + 2);
  log_error("policy: unknown command `%s` (expected check, show or diff)", argv[1]);
  return 125;
}
