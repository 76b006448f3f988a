/* SPDX-License-Identifier: Apache-2.0 */
/* The public suffix list (publicsuffix.org, as Debian's package publicsuffix installs it): the
 * names under which anyone can register one of their own (`com`, `co.uk`, `github.io`,
 * `s3.amazonaws.com`). An allowlist wildcard over such a name (`*.co.uk`) would let the code reach
 * hosts anyone can set up, so the policy refuses it (psl_check_wildcard). The list is parsed and
 * matched here without I/O (unit-tested); psl_check_wildcard reads PSL_PATH once per process. */
#ifndef SBX_PSL_H
#define SBX_PSL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

#define PSL_PATH "/usr/share/publicsuffix/public_suffix_list.dat"
#define PSL_FILE_MAX (4 << 20) /* the list is about 230 KB */

enum psl_kind {
  PSL_RULE,      /* `co.uk`: a public suffix */
  PSL_WILDCARD,  /* `*.ck`: every name one label below `ck` is one */
  PSL_EXCEPTION, /* `!www.ck`: ... but not this one */
};

struct psl_rule {
  size_t off; /* of its name in names: ASCII, lowercase, labels in Unicode in punycode (`xn--`) */
  enum psl_kind kind;
};

struct psl {
  struct psl_rule *rules;
  size_t n;
  char *names; /* every rule's name, NUL-terminated */
};

/* The list's text (comments `//`, one rule a line, the first word of it) into ret. */
int psl_parse(const char *text, size_t len, struct psl *ret, sbx_error_t *err);
int psl_load(const char *path, struct psl *ret, sbx_error_t *err);
void psl_free(struct psl *l);
/* Rule i's name. */
const char *psl_rule_name(const struct psl *l, size_t i);

/* Is name (ASCII, lowercase, no trailing dot) a public suffix: a rule, a wildcard's match and no
 * exception, or a single label (the list's implicit `*` rule)? */
bool psl_is_public_suffix(const struct psl *l, const char *name);
/* May `*.suffix` be allowed? Not when suffix is a public suffix, nor when one lies below it (then
 * the wildcard would cover names anyone can register): -1 with a message saying which. */
int psl_wildcard_ok(const struct psl *l, const char *suffix, sbx_error_t *err);
/* psl_wildcard_ok with the list at PSL_PATH, loaded on first use. Without the list every wildcard
 * is refused, with a message naming the file and the package. */
int psl_check_wildcard(const char *suffix, sbx_error_t *err);

#endif
