/* Unit tests for the public suffix list: parsing, punycode, matching and the wildcard rule
 * (src/policy/psl.c). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "policy/psl.h"

static const char LIST[] = "// a comment\n"
                           "uk\n"
                           "co.uk\n"
                           "com\n"
                           "\n"
                           "ck\n"
                           "*.ck\n"
                           "!www.ck\n"
                           "*.compute.example-cloud.com\n"
                           "s3.example-cloud.com\n"
                           "github.io   trailing words are ignored\r\n"
                           "// Unicode rules become punycode, the form allow_host names take\n"
                           "\xe5\x85\xac\xe5\x8f\xb8.cn\n"
                           "cn\n"
                           "b\xc3\xbc"
                           "cher.example\n";

static bool refused(const struct psl *l, const char *suffix, const char *why)
{
  sbx_error_t e = {0};
  return psl_wildcard_ok(l, suffix, &e) < 0 && strstr(e.msg, why);
}

int main(void)
{
  struct psl l = {0};
  sbx_error_t e = {0};
  CHECK(psl_parse(LIST, sizeof LIST - 1, &l, &e) == 0 && l.n == 12);

  /* Punycode (RFC 3492): 公司 and bücher. */
  bool puny = false, puny2 = false;
  for (size_t i = 0; i < l.n; i++) {
    puny = puny || !strcmp(psl_rule_name(&l, i), "xn--55qx5d.cn");
    puny2 = puny2 || !strcmp(psl_rule_name(&l, i), "xn--bcher-kva.example");
  }
  CHECK(puny && puny2);

  /* The list's algorithm. */
  CHECK(psl_is_public_suffix(&l, "co.uk"));
  CHECK(psl_is_public_suffix(&l, "uk"));
  CHECK(!psl_is_public_suffix(&l, "bbc.co.uk"));
  CHECK(psl_is_public_suffix(&l, "anything.ck"));
  CHECK(!psl_is_public_suffix(&l, "www.ck"));
  CHECK(!psl_is_public_suffix(&l, "a.anything.ck"));
  CHECK(psl_is_public_suffix(&l, "nosuchtld")); /* the implicit `*` rule */
  CHECK(psl_is_public_suffix(&l, "github.io"));
  CHECK(!psl_is_public_suffix(&l, "user.github.io"));
  CHECK(psl_is_public_suffix(&l, "xn--55qx5d.cn"));

  /* The wildcard rule: over a public suffix, or over one with public suffixes below it. */
  CHECK(refused(&l, "co.uk", "`co.uk` is a public suffix"));
  CHECK(refused(&l, "com", "public suffix"));
  CHECK(refused(&l, "nosuchtld", "public suffix"));
  CHECK(refused(&l, "github.io", "public suffix"));
  CHECK(refused(&l, "xn--55qx5d.cn", "public suffix"));
  CHECK(refused(&l, "example-cloud.com", "public suffixes lie below `example-cloud.com`"));
  CHECK(refused(&l, "compute.example-cloud.com", "every name just below `compute.example-cloud.com`"));
  CHECK(refused(&l, "ck", "public suffix"));
  CHECK(psl_wildcard_ok(&l, "bbc.co.uk", &e) == 0);
  CHECK(psl_wildcard_ok(&l, "user.github.io", &e) == 0);
  CHECK(psl_wildcard_ok(&l, "www.ck", &e) == 0);
  CHECK(refused(&l, "a.compute.example-cloud.com", "public suffix")); /* matched by *.compute... */
  CHECK(psl_wildcard_ok(&l, "b.a.compute.example-cloud.com", &e) == 0);
  /* A name that only ends alike is not below. */
  CHECK(psl_wildcard_ok(&l, "o.uk", &e) == 0); /* `co.uk` is not below `o.uk` */
  psl_free(&l);

  /* What is not a list. */
  CHECK(psl_parse("// only comments\n\n", 18, &l, &e) < 0 && strstr(e.msg, "no rules"));
  CHECK(psl_parse("co.uk\n\xff\xfe.uk\n", 12, &l, &e) < 0 && strstr(e.msg, "line 2"));
  CHECK(psl_parse("a..b\n", 5, &l, &e) < 0 && strstr(e.msg, "line 1"));
  CHECK(psl_parse("*.*.x\n", 6, &l, &e) < 0);
  CHECK(psl_parse("a\0b.uk\n", 7, &l, &e) < 0);
  CHECK(psl_load("/nonexistent-sbx/list.dat", &l, &e) < 0 && e.errnum == ENOENT);

  /* Debian's list, as the policy reads it. */
  if (access(PSL_PATH, R_OK) == 0) {
    CHECK(psl_check_wildcard("co.uk", &e) < 0 && strstr(e.msg, "public suffix"));
    CHECK(psl_check_wildcard("github.io", &e) < 0);
    CHECK(psl_check_wildcard("amazonaws.com", &e) < 0 && strstr(e.msg, "lie below"));
    CHECK(psl_check_wildcard("example.com", &e) == 0);
    CHECK(psl_check_wildcard("pythonhosted.org", &e) == 0);
  } else {
    CHECK(psl_check_wildcard("example.com", &e) < 0 && strstr(e.msg, "install the package publicsuffix"));
  }
  return check_summary("psl");
}
