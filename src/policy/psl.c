/* SPDX-License-Identifier: Apache-2.0 */
/* The public suffix list (psl.h): parsed from its text format (the .dat Debian ships; rules in
 * Unicode are converted to punycode, the form allow_host names take), matched by the list's own
 * algorithm, and the allowlist's wildcard rule. */
#include "policy/psl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/util.h"

#define PUNY_BASE 36
#define PUNY_TMIN 1
#define PUNY_TMAX 26
#define PUNY_SKEW 38
#define PUNY_DAMP 700
#define LABEL_CP_MAX 63

static uint32_t puny_adapt(uint32_t delta, uint32_t points, bool first)
{
  delta = first ? delta / PUNY_DAMP : delta / 2;
  delta += delta / points;
  uint32_t k = 0;
  while (delta > ((PUNY_BASE - PUNY_TMIN) * PUNY_TMAX) / 2) {
    delta /= PUNY_BASE - PUNY_TMIN;
    k += PUNY_BASE;
  }
  return k + (PUNY_BASE - PUNY_TMIN + 1) * delta / (delta + PUNY_SKEW);
}

static int putc_sb(strbuf_t *sb, char c)
{
  return strbuf_append(sb, &c, 1);
}

static char puny_digit(uint32_t d)
{
  return (char) (d < 26 ? 'a' + d : '0' + d - 26);
}

/* RFC 3492 section 6.3: the code points cp[0..n) as `xn--` and their punycode, appended to sb. */
static int punycode_label(const uint32_t *cp, size_t n, strbuf_t *sb)
{
  int rc = strbuf_append(sb, "xn--", 4);
  uint32_t h = 0, b, next = 0x80, delta = 0, bias = 72;
  for (size_t i = 0; i < n; i++)
    if (cp[i] < 0x80) {
      rc |= putc_sb(sb, (char) cp[i]);
      h++;
    }
  b = h;
  if (b)
    rc |= putc_sb(sb, '-');
  while (h < n) {
    uint32_t m = UINT32_MAX;
    for (size_t i = 0; i < n; i++)
      if (cp[i] >= next && cp[i] < m)
        m = cp[i];
    /* At most LABEL_CP_MAX code points below 0x110000: no overflow. */
    delta += (m - next) * (h + 1);
    next = m;
    for (size_t i = 0; i < n; i++) {
      if (cp[i] < next)
        delta++;
      if (cp[i] != next)
        continue;
      uint32_t q = delta;
      for (uint32_t k = PUNY_BASE;; k += PUNY_BASE) {
        uint32_t t = k <= bias ? PUNY_TMIN : k >= bias + PUNY_TMAX ? PUNY_TMAX : k - bias;
        if (q < t)
          break;
        rc |= putc_sb(sb, puny_digit(t + (q - t) % (PUNY_BASE - t)));
        q = (q - t) / (PUNY_BASE - t);
      }
      rc |= putc_sb(sb, puny_digit(q));
      bias = puny_adapt(delta, h + 1, h == b);
      delta = 0;
      h++;
    }
    delta++;
    next++;
  }
  return rc;
}

/* One UTF-8 code point at *p (before end), or -1 if it is not well-formed. */
static int64_t utf8_next(const char **p, const char *end)
{
  const unsigned char *s = (const unsigned char *) *p;
  uint32_t c = s[0];
  int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (!len || (const char *) s + len > end)
    return -1;
  if (len > 1)
    c &= 0x3fu >> (len - 1);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return -1;
    c = c << 6 | (s[i] & 0x3f);
  }
  static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    return -1;
  *p += len;
  return c;
}

/* A rule's name (UTF-8, p[0..n)) in ASCII: ASCII labels lowercased, the others in punycode. */
static int rule_ascii(const char *p, size_t n, strbuf_t *sb)
{
  const char *end = p + n;
  int rc = 0;
  /* Most rules are ASCII already: one copy (the labels are checked below all the same). */
  bool plain = true;
  for (size_t i = 0; i < n && plain; i++)
    plain = (unsigned char) p[i] > ' ' && (unsigned char) p[i] < 0x7f && !(p[i] >= 'A' && p[i] <= 'Z');
  if (plain) {
    if (!n || p[0] == '.' || p[n - 1] == '.' || memmem(p, n, "..", 2) || strbuf_append(sb, p, n) < 0)
      return -1;
    return 0;
  }
  while (p < end) {
    const char *dot = memchr(p, '.', (size_t) (end - p)), *le = dot ? dot : end;
    uint32_t cp[LABEL_CP_MAX];
    size_t k = 0;
    bool ascii = true;
    for (const char *c = p; c < le;) {
      int64_t v = utf8_next(&c, le);
      if (v <= ' ' || v == 0x7f || k == LABEL_CP_MAX)
        return -1;
      ascii = ascii && v < 0x80;
      cp[k++] = (uint32_t) (v >= 'A' && v <= 'Z' ? v + 32 : v);
    }
    if (!k)
      return -1;
    if (ascii)
      for (size_t i = 0; i < k; i++)
        rc |= putc_sb(sb, (char) cp[i]);
    else
      rc |= punycode_label(cp, k, sb);
    if (dot)
      rc |= putc_sb(sb, '.');
    p = dot ? dot + 1 : end;
  }
  return rc < 0 ? -1 : 0;
}

void psl_free(struct psl *l)
{
  free(l->rules);
  free(l->names);
  *l = (struct psl){0};
}

int psl_parse(const char *text, size_t len, struct psl *ret, sbx_error_t *err)
{
  struct psl l = {0};
  strbuf_t names = {0}; /* every name, each NUL-terminated: one allocation, not one per rule */
  size_t cap = 0, line = 0;
  for (const char *p = text, *end = text + len; p < end;) {
    const char *nl = memchr(p, '\n', (size_t) (end - p)), *le = nl ? nl : end;
    line++;
    const char *w = p;
    size_t wn = 0;
    while (w + wn < le && w[wn] != ' ' && w[wn] != '\t' && w[wn] != '\r')
      wn++;
    p = nl ? nl + 1 : end;
    if (!wn || (wn >= 2 && w[0] == '/' && w[1] == '/'))
      continue;
    enum psl_kind kind = PSL_RULE;
    if (w[0] == '!') {
      kind = PSL_EXCEPTION;
      w++, wn--;
    } else if (wn > 2 && w[0] == '*' && w[1] == '.') {
      kind = PSL_WILDCARD;
      w += 2, wn -= 2;
    }
    size_t off = names.len;
    if (rule_ascii(w, wn, &names) < 0 || memchr(names.data + off, '*', names.len - off) ||
        strbuf_append(&names, "", 1) < 0) {
      strbuf_free(&names);
      free(l.rules);
      return sbx_error_set(err, EINVAL, "public suffix list, line %zu: not a rule", line);
    }
    if (l.n == cap) {
      cap = cap ? cap * 2 : 1024;
      struct psl_rule *r = realloc(l.rules, cap * sizeof *r);
      if (!r) {
        strbuf_free(&names);
        free(l.rules);
        return sbx_error_set(err, ENOMEM, "public suffix list");
      }
      l.rules = r;
    }
    l.rules[l.n++] = (struct psl_rule){.off = off, .kind = kind};
  }
  if (!l.n) {
    strbuf_free(&names);
    return sbx_error_set(err, EINVAL, "public suffix list: no rules");
  }
  l.names = names.data;
  *ret = l;
  return 0;
}

const char *psl_rule_name(const struct psl *l, size_t i)
{
  return l->names + l->rules[i].off;
}

int psl_load(const char *path, struct psl *ret, sbx_error_t *err)
{
  _cleanup_free_ char *text = NULL;
  size_t len;
  if (read_file(path, PSL_FILE_MAX, &text, &len, err) < 0)
    return -1;
  if (psl_parse(text, len, ret, err) < 0)
    return sbx_error_prefix(err, "`%s`", path);
  return 0;
}

static bool has(const struct psl *l, const char *name, enum psl_kind kind)
{
  for (size_t i = 0; i < l->n; i++)
    if (l->rules[i].kind == kind && !strcmp(psl_rule_name(l, i), name))
      return true;
  return false;
}

bool psl_is_public_suffix(const struct psl *l, const char *name)
{
  if (has(l, name, PSL_EXCEPTION))
    return false;
  if (has(l, name, PSL_RULE))
    return true;
  const char *dot = strchr(name, '.');
  return !dot || has(l, dot + 1, PSL_WILDCARD);
}

int psl_wildcard_ok(const struct psl *l, const char *suffix, sbx_error_t *err)
{
  if (psl_is_public_suffix(l, suffix))
    return sbx_error_set(err, 0,
                         "`%s` is a public suffix, under which anyone can register a name: allow the hosts "
                         "themselves",
                         suffix);
  if (has(l, suffix, PSL_WILDCARD))
    return sbx_error_set(err, 0,
                         "every name just below `%s` is a public suffix (`*.%s`), under which anyone can "
                         "register a name: allow the hosts themselves",
                         suffix, suffix);
  size_t sn = strlen(suffix);
  for (size_t i = 0; i < l->n; i++) {
    const struct psl_rule *r = &l->rules[i];
    const char *name = psl_rule_name(l, i);
    size_t rn = strlen(name);
    if (r->kind != PSL_EXCEPTION && rn > sn && name[rn - sn - 1] == '.' && !strcmp(name + rn - sn, suffix))
      return sbx_error_set(err, 0,
                           "public suffixes lie below `%s` (`%s%s`), under which anyone can register a "
                           "name: allow the hosts themselves",
                           suffix, r->kind == PSL_WILDCARD ? "*." : "", name);
  }
  return 0;
}

int psl_check_wildcard(const char *suffix, sbx_error_t *err)
{
  static struct psl list; /* kept for the process: a policy may name many wildcards */
  if (!list.n && psl_load(PSL_PATH, &list, err) < 0)
    return sbx_error_hint(err, "a wildcard needs the public suffix list: install the package publicsuffix");
  return psl_wildcard_ok(&list, suffix, err);
}
