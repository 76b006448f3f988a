/* SPDX-License-Identifier: Apache-2.0 */
/* The egress allowlist: patterns, matching, address classes (egress_rules.h). No I/O. */
#include "policy/egress_rules.h"

#include <arpa/inet.h>
#include <string.h>

#include "base/util.h"

static char lower(char c)
{
  return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

bool egress_parse_ip(const char *text, struct egress_addr *ret)
{
  char buf[64];
  size_t len = strlen(text);
  if (len >= sizeof buf)
    return false;
  if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
    memcpy(buf, text + 1, len - 2);
    buf[len - 2] = '\0';
  } else {
    memcpy(buf, text, len + 1);
  }
  struct egress_addr a = {0};
  if (inet_pton(AF_INET, buf, a.a) == 1) {
    a.family = 4;
  } else if (inet_pton(AF_INET6, buf, a.a) == 1) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    a.family = 6;
    if (!memcmp(a.a, mapped, sizeof mapped)) {
      memmove(a.a, a.a + 12, 4);
      memset(a.a + 4, 0, 12);
      a.family = 4;
    }
  } else {
    return false;
  }
  *ret = a;
  return true;
}

/* Normalize a host name in place: lowercase, one trailing dot dropped. Checks LDH labels of 1..63
 * characters, no leading or trailing hyphen, ASCII only (IDN as punycode). Returns NULL when valid,
 * else why not. */
static const char *normalize_name(char *h)
{
  size_t len = strlen(h);
  if (len && h[len - 1] == '.')
    h[--len] = '\0';
  if (!len)
    return "empty host name";
  if (len > EGRESS_HOST_MAX)
    return "host name longer than 253 characters";
  size_t label = 0;
  for (size_t i = 0; i <= len; i++) {
    char c = h[i];
    if (c == '.' || c == '\0') {
      if (!label)
        return "empty label";
      if (h[i - 1] == '-')
        return "a label ends with `-`";
      label = 0;
      continue;
    }
    if ((unsigned char) c >= 0x80)
      return "not ASCII (write an international name as punycode, `xn--...`)";
    h[i] = c = lower(c);
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return c == '*' ? "`*` may only be the whole first label, as in `*.example.com`" : "bad character";
    if (c == '-' && label == 0)
      return "a label starts with `-`";
    if (++label > EGRESS_LABEL_MAX)
      return "label longer than 63 characters";
  }
  return NULL;
}

/* A name a resolver would read as an IPv4 address in another spelling (`127.1`, `2130706433`,
 * `0x7f.0.0.1`): inet_aton takes those, inet_pton (egress_parse_ip) does not. */
static bool looks_numeric(const char *name)
{
  struct in_addr a;
  return strspn(name, "0123456789.") == strlen(name) || inet_aton(name, &a) != 0;
}

static int parse_port(const char *s, uint16_t *ret)
{
  uint64_t v;
  if (!*s || parse_u64(s, &v) < 0 || v < 1 || v > 65535)
    return -1;
  for (const char *c = s; *c; c++)
    if (*c < '0' || *c > '9')
      return -1;
  *ret = (uint16_t) v;
  return 0;
}

int egress_rule_parse(const char *text, struct egress_rule *ret, sbx_error_t *err)
{
  struct egress_rule r = {.port = EGRESS_DEFAULT_PORT};
  char host[EGRESS_HOST_MAX + 2 + 8];
  const char *port = NULL;
  size_t len = strlen(text);
  if (!len)
    return sbx_error_set(err, 0, "empty pattern");
  if (len >= sizeof host + 6)
    return sbx_error_set(err, 0, "pattern too long");
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (!close)
      return sbx_error_set(err, 0, "`[` without `]` (write IPv6 as `[ADDR]:PORT`)");
    if (close[1] && close[1] != ':')
      return sbx_error_set(err, 0, "expected `:PORT` after `]`");
    if (close[1])
      port = close + 2;
    size_t hl = (size_t) (close - text) + 1;
    if (hl >= sizeof host)
      return sbx_error_set(err, 0, "pattern too long");
    memcpy(host, text, hl);
    host[hl] = '\0';
    if (!strchr(host, ':') || !egress_parse_ip(host, &r.addr))
      return sbx_error_set(err, 0, "not an IPv6 address");
  } else if (strchr(text, ':') != strrchr(text, ':')) {
    /* Two colons or more: a bare IPv6 address, which cannot carry a port. */
    if (!egress_parse_ip(text, &r.addr) || r.addr.family != 6)
      return sbx_error_set(err, 0, "not an IPv6 address (with a port: `[ADDR]:PORT`)");
  } else {
    const char *colon = strchr(text, ':');
    size_t hl = colon ? (size_t) (colon - text) : len;
    if (hl >= sizeof host)
      return sbx_error_set(err, 0, "host name longer than %d characters", EGRESS_HOST_MAX);
    memcpy(host, text, hl);
    host[hl] = '\0';
    if (colon)
      port = colon + 1;
  }
  if (port && parse_port(port, &r.port) < 0)
    return sbx_error_set(err, 0, "port `%s` is not 1-65535", port);
  if (r.addr.family) {
    r.kind = r.addr.family == 4 ? EGRESS_IPV4 : EGRESS_IPV6;
  } else if (egress_parse_ip(host, &r.addr)) {
    r.kind = EGRESS_IPV4;
  } else {
    char *name = host;
    r.kind = EGRESS_NAME;
    if (name[0] == '*') {
      if (name[1] != '.')
        return sbx_error_set(err, 0, "`*` may only be the whole first label, as in `*.example.com`");
      name += 2;
      r.kind = EGRESS_WILDCARD;
    }
    const char *why = normalize_name(name);
    if (why)
      return sbx_error_set(err, 0, "%s", why);
    /* Not an address in the one spelling egress_parse_ip reads, yet numeric to a resolver. */
    if (looks_numeric(name))
      return sbx_error_set(err, 0, "neither an IPv4 address nor a host name");
    if (r.kind == EGRESS_WILDCARD && !strchr(name, '.'))
      return sbx_error_set(err, 0, "would match a whole top-level domain");
    if (r.kind == EGRESS_NAME && !strcmp(name, "localhost"))
      r.kind = EGRESS_LOCALHOST;
    if (r.kind == EGRESS_WILDCARD && (!strcmp(name, "localhost") || strstr(name, ".localhost") != NULL))
      return sbx_error_set(err, 0, "name `localhost` itself");
    memcpy(r.host, name, strlen(name) + 1);
  }
  if (r.kind == EGRESS_IPV4 || r.kind == EGRESS_IPV6) {
    char a[INET6_ADDRSTRLEN];
    inet_ntop(r.kind == EGRESS_IPV4 ? AF_INET : AF_INET6, r.addr.a, a, sizeof a);
    memcpy(r.host, a, strlen(a) + 1);
  }
  *ret = r;
  return 0;
}

void egress_rule_format(const struct egress_rule *r, char *buf, size_t len)
{
  if (r->kind == EGRESS_IPV6)
    bufprintf_cut(buf, len, "[%s]:%u", r->host, r->port);
  else
    bufprintf_cut(buf, len, "%s%s:%u", r->kind == EGRESS_WILDCARD ? "*." : "", r->host, r->port);
}

const char *egress_verdict_name(enum egress_verdict v)
{
  switch (v) {
  case EGRESS_ALLOWED:
    return "allowed";
  case EGRESS_BAD_HOST:
    return "not a host name or IP address";
  case EGRESS_NO_RULE:
    return "no allow_host names this host";
  case EGRESS_PORT_NOT_ALLOWED:
    return "the host is allowed on other ports only";
  }
  return "?";
}

static bool rule_names_host(const struct egress_rule *r, const char *name, const struct egress_match *m)
{
  switch (r->kind) {
  case EGRESS_IPV4:
  case EGRESS_IPV6:
    return m->is_ip && r->addr.family == m->addr.family && !memcmp(r->addr.a, m->addr.a, 16);
  case EGRESS_NAME:
  case EGRESS_LOCALHOST:
    return !m->is_ip && !strcmp(r->host, name);
  case EGRESS_WILDCARD: {
    size_t nl = strlen(name), sl = strlen(r->host);
    return !m->is_ip && nl > sl + 1 && name[nl - sl - 1] == '.' && !strcmp(name + nl - sl, r->host);
  }
  }
  return false;
}

void egress_match_host(const struct egress_rule *rules, size_t n, const char *host, uint16_t port,
                       struct egress_match *ret)
{
  struct egress_match m = {.verdict = EGRESS_BAD_HOST};
  char name[EGRESS_HOST_MAX + 2];
  if (egress_parse_ip(host, &m.addr)) {
    m.is_ip = true;
    name[0] = '\0';
  } else {
    size_t len = strlen(host);
    if (len >= sizeof name || port == 0) {
      *ret = m;
      return;
    }
    memcpy(name, host, len + 1);
    if (normalize_name(name) || looks_numeric(name)) {
      *ret = m;
      return;
    }
  }
  m.verdict = EGRESS_NO_RULE;
  for (size_t i = 0; i < n; i++) {
    if (!rule_names_host(&rules[i], name, &m))
      continue;
    if (rules[i].port == port) {
      m.verdict = EGRESS_ALLOWED;
      m.rule = i;
      break;
    }
    if (m.verdict == EGRESS_NO_RULE) {
      m.verdict = EGRESS_PORT_NOT_ALLOWED;
      m.rule = i;
    }
  }
  *ret = m;
}

static bool in4(const uint8_t *a, uint32_t net, unsigned bits)
{
  uint32_t v = (uint32_t) a[0] << 24 | (uint32_t) a[1] << 16 | (uint32_t) a[2] << 8 | a[3];
  uint32_t mask = bits ? ~(uint32_t) 0 << (32 - bits) : 0;
  return (v & mask) == net;
}

static enum egress_class classify4(const uint8_t *a)
{
  static const struct {
    uint32_t net;
    unsigned bits;
    enum egress_class c;
  } nets[] = {
      {0x00000000, 8, EGRESS_UNSPECIFIED},    {0x7f000000, 8, EGRESS_LOOPBACK},
      {0x0a000000, 8, EGRESS_PRIVATE},        {0xac100000, 12, EGRESS_PRIVATE},
      {0xc0a80000, 16, EGRESS_PRIVATE},       {0x64400000, 10, EGRESS_CGNAT},
      {0xa9fe0000, 16, EGRESS_LINK_LOCAL},    {0xc0000200, 24, EGRESS_DOCUMENTATION},
      {0xc6336400, 24, EGRESS_DOCUMENTATION}, {0xcb007100, 24, EGRESS_DOCUMENTATION},
      {0xc0000000, 24, EGRESS_RESERVED},      {0xc6120000, 15, EGRESS_RESERVED},
      {0xe0000000, 4, EGRESS_MULTICAST},      {0xffffffff, 32, EGRESS_BROADCAST},
      {0xf0000000, 4, EGRESS_RESERVED},
  };
  for (size_t i = 0; i < ARRAY_SIZE(nets); i++)
    if (in4(a, nets[i].net, nets[i].bits))
      return nets[i].c;
  return EGRESS_PUBLIC;
}

enum egress_class egress_classify(const struct egress_addr *addr)
{
  const uint8_t *a = addr->a;
  if (addr->family == 4)
    return classify4(a);
  static const uint8_t zero[16] = {0};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (!memcmp(a, zero, 15))
    return a[15] == 1 ? EGRESS_LOOPBACK : a[15] == 0 ? EGRESS_UNSPECIFIED : EGRESS_RESERVED;
  if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12))
    return classify4(a + 12);
  if (a[0] == 0x20 && a[1] == 0x02) /* 6to4: the IPv4 address is bytes 2-5 */
    return classify4(a + 2);
  if (a[0] == 0xff)
    return EGRESS_MULTICAST;
  if ((a[0] & 0xfe) == 0xfc || (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0))
    return EGRESS_PRIVATE;
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
    return EGRESS_LINK_LOCAL;
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0d && a[3] == 0xb8)
    return EGRESS_DOCUMENTATION;
  /* Only 2000::/3 is global unicast; the rest (::/8 compat, 100::/64 discard...) is special. */
  if ((a[0] & 0xe0) != 0x20)
    return EGRESS_RESERVED;
  return EGRESS_PUBLIC;
}

const char *egress_class_name(enum egress_class c)
{
  static const char *names[] = {
      [EGRESS_PUBLIC] = "public",
      [EGRESS_LOOPBACK] = "loopback",
      [EGRESS_PRIVATE] = "private",
      [EGRESS_LINK_LOCAL] = "link-local",
      [EGRESS_MULTICAST] = "multicast",
      [EGRESS_UNSPECIFIED] = "unspecified",
      [EGRESS_CGNAT] = "shared (CGNAT)",
      [EGRESS_DOCUMENTATION] = "documentation",
      [EGRESS_BROADCAST] = "broadcast",
      [EGRESS_RESERVED] = "reserved",
      [EGRESS_HOST_OWN] = "the host's own address",
  };
  return (size_t) c < ARRAY_SIZE(names) && names[c] ? names[c] : "?";
}

static bool same_addr(const struct egress_addr *x, const struct egress_addr *y)
{
  size_t n = x->family == 4 ? 4 : 16;
  return x->family == y->family && !memcmp(x->a, y->a, n);
}

enum egress_class egress_check_dest(const struct egress_rule *r, const struct egress_addr *addr,
                                    const struct egress_addr *own, size_t n_own)
{
  struct egress_addr a = *addr;
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (a.family == 6 && !memcmp(a.a, mapped, 12)) {
    memmove(a.a, a.a + 12, 4);
    memset(a.a + 4, 0, 12);
    a.family = 4;
  }
  if ((r->kind == EGRESS_IPV4 || r->kind == EGRESS_IPV6) && same_addr(&r->addr, &a))
    return EGRESS_PUBLIC; /* named explicitly */
  enum egress_class c = egress_classify(&a);
  if (c == EGRESS_LOOPBACK && r->kind == EGRESS_LOCALHOST)
    return EGRESS_PUBLIC;
  if (c != EGRESS_PUBLIC)
    return c;
  for (size_t i = 0; i < n_own; i++)
    if (same_addr(&own[i], &a))
      return EGRESS_HOST_OWN;
  return EGRESS_PUBLIC;
}
