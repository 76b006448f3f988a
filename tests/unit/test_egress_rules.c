/* Unit tests for the egress allowlist (src/policy/egress_rules.c): patterns, matching, address classes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "egress/egress_host.h"
#include "policy/egress_rules.h"

static struct egress_rule R(const char *text) {
  struct egress_rule r = {0};
  sbx_error_t err = {0};
  if (egress_rule_parse(text, &r, &err) < 0)
    fprintf(stderr, "unexpected: %s: %s\n", text, err.msg);
  return r;
}

static bool
bad(const char *text)
{
  struct egress_rule r;
  sbx_error_t err = {0};
  return egress_rule_parse(text, &r, &err) < 0 && err.msg[0];
}

static bool fmt_is(const char *text, const char *want)
{
  struct egress_rule r = R(text);
  char buf[300];
  egress_rule_format(&r, buf, sizeof buf);
  if (strcmp(buf, want))
    fprintf(stderr, "%s -> %s, want %s\n", text, buf, want);
  return !strcmp(buf, want);
}

static void test_parse(void)
{
  CHECK(fmt_is("pypi.org", "pypi.org:443"));
  CHECK(fmt_is("PyPI.Org.", "pypi.org:443"));
  CHECK(fmt_is("*.Example.com:8443", "*.example.com:8443"));
  CHECK(fmt_is("127.0.0.1:8080", "127.0.0.1:8080"));
  CHECK(fmt_is("[::1]:80", "[::1]:80"));
  CHECK(fmt_is("2001:DB8::0:1", "[2001:db8::1]:443"));
  CHECK(fmt_is("[::ffff:127.0.0.1]:80", "127.0.0.1:80"));
  CHECK(fmt_is("localhost:3000", "localhost:3000"));
  CHECK(fmt_is("xn--bcher-kva.example", "xn--bcher-kva.example:443"));
  CHECK(R("localhost").kind == EGRESS_LOCALHOST);
  CHECK(R("*.example.com").kind == EGRESS_WILDCARD);
  CHECK(R("1.2.3.4").kind == EGRESS_IPV4);
  CHECK(R("[::1]").kind == EGRESS_IPV6);
  CHECK(R("a.b:65535").port == 65535);
  CHECK(bad(""));
  CHECK(bad("a..b"));
  CHECK(bad(".a"));
  CHECK(bad("a.b.."));
  CHECK(bad("foo.*.com"));
  CHECK(bad("*foo.com"));
  CHECK(bad("*"));
  CHECK(bad("*.com"));
  CHECK(bad("*.localhost"));
  CHECK(bad("a.b:0"));
  CHECK(bad("a.b:65536"));
  CHECK(bad("a.b:"));
  CHECK(bad("a.b:+80"));
  CHECK(bad("a.b:80x"));
  CHECK(bad("-a.b"));
  CHECK(bad("a-.b"));
  CHECK(bad("b\xc3\xbc"
            "cher.example"));
  CHECK(bad("a b"));
  CHECK(bad("1.2.3"));
  CHECK(bad("999.1.1.1"));
  CHECK(bad("0x7f.0.0.1"));
  CHECK(bad("0x7f000001:80"));
  CHECK(bad("[::1"));
  CHECK(bad("[::1]x"));
  CHECK(bad("[1.2.3.4]:80"));
  CHECK(bad("::1:80:zz"));
  char longlabel[80];
  memset(longlabel, 'a', 64);
  strcpy(longlabel + 64, ".com");
  CHECK(bad(longlabel));
  longlabel[1] = '.';
  CHECK(!bad(longlabel));
}

static enum egress_verdict match(const struct egress_rule *rules, size_t n, const char *host, unsigned port,
                                 size_t *which)
{
  struct egress_match m;
  egress_match_host(rules, n, host, (uint16_t) port, &m);
  if (which)
    *which = m.rule;
  return m.verdict;
}

static void test_match(void)
{
  struct egress_rule rules[] = {R("pypi.org"), R("*.example.com:8443"), R("127.0.0.1:8080"),
                                R("[::1]:80"), R("localhost:3000"),     R("pypi.org:80")};
  size_t n = sizeof rules / sizeof rules[0], w = 99;
  CHECK(match(rules, n, "pypi.org", 443, &w) == EGRESS_ALLOWED && w == 0);
  CHECK(match(rules, n, "PYPI.ORG.", 443, NULL) == EGRESS_ALLOWED);
  CHECK(match(rules, n, "pypi.org", 80, &w) == EGRESS_ALLOWED && w == 5);
  CHECK(match(rules, n, "pypi.org", 8080, NULL) == EGRESS_PORT_NOT_ALLOWED);
  CHECK(match(rules, n, "www.pypi.org", 443, NULL) == EGRESS_NO_RULE);
  CHECK(match(rules, n, "a.example.com", 8443, &w) == EGRESS_ALLOWED && w == 1);
  CHECK(match(rules, n, "a.b.Example.COM", 8443, NULL) == EGRESS_ALLOWED);
  CHECK(match(rules, n, "example.com", 8443, NULL) == EGRESS_NO_RULE);
  CHECK(match(rules, n, "badexample.com", 8443, NULL) == EGRESS_NO_RULE);
  CHECK(match(rules, n, "a.example.com", 443, NULL) == EGRESS_PORT_NOT_ALLOWED);
  CHECK(match(rules, n, "127.0.0.1", 8080, &w) == EGRESS_ALLOWED && w == 2);
  CHECK(match(rules, n, "[::ffff:127.0.0.1]", 8080, NULL) == EGRESS_ALLOWED);
  CHECK(match(rules, n, "127.0.0.2", 8080, NULL) == EGRESS_NO_RULE);
  CHECK(match(rules, n, "127.1", 8080, NULL) == EGRESS_BAD_HOST);
  CHECK(match(rules, n, "2130706433", 8080, NULL) == EGRESS_BAD_HOST);
  CHECK(match(rules, n, "0x7F.1", 8080, NULL) == EGRESS_BAD_HOST);
  CHECK(match(rules, n, "[::1]", 80, &w) == EGRESS_ALLOWED && w == 3);
  CHECK(match(rules, n, "::1", 80, NULL) == EGRESS_ALLOWED);
  CHECK(match(rules, n, "localhost", 3000, &w) == EGRESS_ALLOWED && w == 4);
  CHECK(match(rules, n, "localhost", 8080, NULL) == EGRESS_PORT_NOT_ALLOWED);
  CHECK(match(rules, n, "127.0.0.1", 3000, NULL) == EGRESS_PORT_NOT_ALLOWED);
  CHECK(match(rules, n, "", 443, NULL) == EGRESS_BAD_HOST);
  CHECK(match(rules, n, "pypi.org\r\nHost: evil", 443, NULL) == EGRESS_BAD_HOST);
  CHECK(match(rules, n, "pypi.org", 0, NULL) == EGRESS_BAD_HOST);
  CHECK(match(rules, 0, "pypi.org", 443, NULL) == EGRESS_NO_RULE);
}

static enum egress_class cls(const char *ip)
{
  struct egress_addr a;
  if (!egress_parse_ip(ip, &a))
    return (enum egress_class) 99;
  return egress_classify(&a);
}

static void test_classify(void)
{
  CHECK(cls("93.184.216.34") == EGRESS_PUBLIC);
  CHECK(cls("2606:4700::1111") == EGRESS_PUBLIC);
  CHECK(cls("127.0.0.1") == EGRESS_LOOPBACK);
  CHECK(cls("127.255.1.2") == EGRESS_LOOPBACK);
  CHECK(cls("::1") == EGRESS_LOOPBACK);
  CHECK(cls("10.1.2.3") == EGRESS_PRIVATE);
  CHECK(cls("172.16.0.1") == EGRESS_PRIVATE);
  CHECK(cls("172.31.255.255") == EGRESS_PRIVATE);
  CHECK(cls("172.32.0.1") == EGRESS_PUBLIC);
  CHECK(cls("192.168.1.1") == EGRESS_PRIVATE);
  CHECK(cls("fd00::1") == EGRESS_PRIVATE);
  CHECK(cls("fc00::1") == EGRESS_PRIVATE);
  CHECK(cls("169.254.169.254") == EGRESS_LINK_LOCAL);
  CHECK(cls("fe80::1") == EGRESS_LINK_LOCAL);
  CHECK(cls("224.0.0.1") == EGRESS_MULTICAST);
  CHECK(cls("ff02::1") == EGRESS_MULTICAST);
  CHECK(cls("0.0.0.0") == EGRESS_UNSPECIFIED);
  CHECK(cls("0.1.2.3") == EGRESS_UNSPECIFIED);
  CHECK(cls("::") == EGRESS_UNSPECIFIED);
  CHECK(cls("100.64.0.1") == EGRESS_CGNAT);
  CHECK(cls("100.127.255.255") == EGRESS_CGNAT);
  CHECK(cls("100.128.0.1") == EGRESS_PUBLIC);
  CHECK(cls("192.0.2.1") == EGRESS_DOCUMENTATION);
  CHECK(cls("198.51.100.1") == EGRESS_DOCUMENTATION);
  CHECK(cls("203.0.113.1") == EGRESS_DOCUMENTATION);
  CHECK(cls("2001:db8::1") == EGRESS_DOCUMENTATION);
  CHECK(cls("255.255.255.255") == EGRESS_BROADCAST);
  CHECK(cls("240.0.0.1") == EGRESS_RESERVED);
  CHECK(cls("198.18.0.1") == EGRESS_RESERVED);
  /* IPv6 forms that carry an IPv4 address are that address. */
  CHECK(cls("::ffff:10.0.0.1") == EGRESS_PRIVATE);
  CHECK(cls("::ffff:127.0.0.1") == EGRESS_LOOPBACK);
  CHECK(cls("64:ff9b::a9fe:a9fe") == EGRESS_LINK_LOCAL);
  CHECK(cls("2002:7f00:1::") == EGRESS_LOOPBACK);
  CHECK(cls("::127.0.0.1") == EGRESS_RESERVED);
}

static enum egress_class dest(const char *rule, const char *ip, const struct egress_addr *own, size_t n_own)
{
  struct egress_rule r = R(rule);
  struct egress_addr a;
  egress_parse_ip(ip, &a);
  return egress_check_dest(&r, &a, own, n_own);
}

static void test_dest(void)
{
  /* DNS rebinding: a name that resolves to a private address is refused... */
  CHECK(dest("pypi.org", "127.0.0.1", NULL, 0) == EGRESS_LOOPBACK);
  CHECK(dest("pypi.org", "10.0.0.5", NULL, 0) == EGRESS_PRIVATE);
  CHECK(dest("*.example.com", "169.254.169.254", NULL, 0) == EGRESS_LINK_LOCAL);
  CHECK(dest("pypi.org", "::ffff:192.168.0.1", NULL, 0) == EGRESS_PRIVATE);
  CHECK(dest("pypi.org", "151.101.0.223", NULL, 0) == EGRESS_PUBLIC);
  /* ...unless the rule names that literal, or localhost and the address is loopback. */
  CHECK(dest("127.0.0.1:8080", "127.0.0.1", NULL, 0) == EGRESS_PUBLIC);
  CHECK(dest("127.0.0.1:8080", "::ffff:127.0.0.1", NULL, 0) == EGRESS_PUBLIC);
  CHECK(dest("127.0.0.1:8080", "127.0.0.2", NULL, 0) == EGRESS_LOOPBACK);
  CHECK(dest("[::1]:80", "::1", NULL, 0) == EGRESS_PUBLIC);
  CHECK(dest("localhost", "127.0.0.1", NULL, 0) == EGRESS_PUBLIC);
  CHECK(dest("localhost", "::1", NULL, 0) == EGRESS_PUBLIC);
  CHECK(dest("localhost", "10.0.0.1", NULL, 0) == EGRESS_PRIVATE);
  /* The host's own public address is refused like a private one. */
  struct egress_addr own[2];
  egress_parse_ip("203.0.114.7", &own[0]);
  egress_parse_ip("2606:4700::7", &own[1]);
  CHECK(dest("pypi.org", "203.0.114.7", own, 2) == EGRESS_HOST_OWN);
  CHECK(dest("pypi.org", "::ffff:203.0.114.7", own, 2) == EGRESS_HOST_OWN);
  CHECK(dest("pypi.org", "2606:4700::7", own, 2) == EGRESS_HOST_OWN);
  CHECK(dest("203.0.114.7", "203.0.114.7", own, 2) == EGRESS_PUBLIC);
  CHECK(dest("pypi.org", "203.0.114.8", own, 2) == EGRESS_PUBLIC);
  CHECK(!strcmp(egress_class_name(EGRESS_HOST_OWN), "the host's own address"));
}

static void test_host_addrs(void)
{
  struct egress_addr *v = NULL;
  size_t n = 0;
  sbx_error_t err = {0};
  CHECK(egress_host_addrs(&v, &n, &err) == 0);
  bool lo = false;
  for (size_t i = 0; i < n; i++)
    lo |= v[i].family == 4 && v[i].a[0] == 127;
  CHECK(lo || n == 0); /* loopback when it is up */
  free(v);
}

int main(void)
{
  test_parse();
  test_match();
  test_classify();
  test_dest();
  test_host_addrs();
  return check_summary("egress_rules");
}
