/* SPDX-License-Identifier: Apache-2.0 */
/* The egress allowlist (issue #17): `allow_host` patterns, matching a request's host and port
 * against them, and classifying the address a name resolved to (the DNS-rebinding rule). Pure: no
 * I/O, no resolver, so it is unit-tested and fuzzed on its own (sandboxd.policy(5), "Network"). */
#ifndef SBX_EGRESS_RULES_H
#define SBX_EGRESS_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define EGRESS_DEFAULT_PORT 443
#define EGRESS_HOST_MAX 253 /* a DNS name's longest text form, without the trailing dot */
#define EGRESS_LABEL_MAX 63
#define EGRESS_REASON_MAX 200

enum egress_kind {
  EGRESS_NAME,      /* exactly this host name */
  EGRESS_WILDCARD,  /* `*.example.com`: any name below example.com, never example.com itself */
  EGRESS_IPV4,      /* this IPv4 address only */
  EGRESS_IPV6,      /* this IPv6 address only */
  EGRESS_LOCALHOST, /* the name `localhost`: the loopback addresses, named explicitly */
};

/* An address: IPv4 in a[0..3] (family 4) or IPv6 in a[0..15] (family 6). */
struct egress_addr {
  int family; /* 4 or 6 */
  uint8_t a[16];
};

struct egress_rule {
  enum egress_kind kind;
  char host[EGRESS_HOST_MAX + 1]; /* lowercase, no trailing dot; a wildcard's suffix without `*.` */
  struct egress_addr addr;        /* IP kinds only */
  uint16_t port;
  char reason[EGRESS_REASON_MAX + 1]; /* the line's `# reason`, "" if none */
};

/* Parse PATTERN[:PORT] (IPv6 as `[ADDR]:PORT` or bare `ADDR` without a port). Names are ASCII
 * (IDN as punycode `xn--`), normalized to lowercase without a trailing dot. A message says what is
 * wrong without repeating the pattern: the caller names it. */
int egress_rule_parse(const char *text, struct egress_rule *ret, sbx_error_t *err);
/* The rule as a policy line's value: `host:port`, `*.suffix:port`, `[v6]:port`. */
void egress_rule_format(const struct egress_rule *r, char *buf, size_t len);

enum egress_verdict {
  EGRESS_ALLOWED,
  EGRESS_BAD_HOST,         /* not a host name or IP literal */
  EGRESS_NO_RULE,          /* no rule names this host */
  EGRESS_PORT_NOT_ALLOWED, /* rules name the host, none on this port */
};

struct egress_match {
  enum egress_verdict verdict;
  size_t rule;             /* ALLOWED: the first rule that matched; PORT_NOT_ALLOWED: one naming the host */
  bool is_ip;              /* the request named an IP literal */
  struct egress_addr addr; /* ... and this is it */
};

/* Match a request's host (a name, an IPv4 literal, an IPv6 literal with or without brackets) and
 * port. Case-insensitive; an IP literal matches only a rule naming the same address (an IPv4-mapped
 * IPv6 literal is its IPv4 address); a name never matches an IP rule. */
void egress_match_host(const struct egress_rule *rules, size_t n, const char *host, uint16_t port,
                       struct egress_match *ret);
const char *egress_verdict_name(enum egress_verdict v);

enum egress_class {
  EGRESS_PUBLIC,
  EGRESS_LOOPBACK,      /* 127/8, ::1 */
  EGRESS_PRIVATE,       /* RFC 1918, fc00::/7, fec0::/10 */
  EGRESS_LINK_LOCAL,    /* 169.254/16, fe80::/10 */
  EGRESS_MULTICAST,     /* 224/4, ff00::/8 */
  EGRESS_UNSPECIFIED,   /* 0/8 ("this network"), :: */
  EGRESS_CGNAT,         /* 100.64/10 */
  EGRESS_DOCUMENTATION, /* 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32 */
  EGRESS_BROADCAST,     /* 255.255.255.255 */
  EGRESS_RESERVED,      /* 192.0.0/24, 198.18/15 (benchmarking), 240/4, other special IPv6 */
  EGRESS_HOST_OWN,      /* one of the host's own addresses (egress_host.c) */
};

/* The class of an address. IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
 * addresses are classified as the IPv4 address they carry. */
enum egress_class egress_classify(const struct egress_addr *addr);
const char *egress_class_name(enum egress_class c);

/* May a connection that rule r allowed go to addr, which its name resolved to? Any class but
 * PUBLIC, and any of the host's own addresses (own, n_own), is refused unless r names that IP
 * literal, or r is `localhost` and addr is loopback. Returns EGRESS_PUBLIC when allowed, else the
 * class that refused it. */
enum egress_class egress_check_dest(const struct egress_rule *r, const struct egress_addr *addr,
                                    const struct egress_addr *own, size_t n_own);

/* Parse an IP literal (IPv6 with or without brackets); an IPv4-mapped IPv6 one becomes IPv4. */
bool egress_parse_ip(const char *text, struct egress_addr *ret);

#endif
