/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy's request head: strict HTTP/1.x parsing through libhttp-parser (egress_http.h).
 * What is refused and why: a head over EGRESS_HEAD_MAX or with more than EGRESS_HEADERS_MAX lines
 * (431); bare LF, bare CR, NUL and other control characters, obsolete line folding (each a way to
 * make two parsers disagree on where a header ends); a header name that is not a token, such as
 * `Host :` with whitespace before the colon (RFC 9112 section 5.1: 400; libhttp-parser takes
 * `Host ` as the name, so the proxy would add a Host of its own and the origin might honour
 * either); more than one Host; a Host that names another host or port than the request
 * (smuggling a second destination past the allowlist); userinfo in the URI; origin-form requests
 * (not a proxy request), https:// without CONNECT, and versions other than HTTP/1.0 and 1.1 (400). */
#include "egress/egress_http.h"

#include <dlfcn.h>
#include <errno.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* libhttp-parser is loaded when a sandbox with `network proxy` starts (egress_proxy_start, before
 * the proxy forks) or when a head is first parsed: linked normally, every sandboxd start (every
 * `exec`) would map it, one library of seven. */
#define HTTP_PARSER_FUNCS(X)                                                                                 \
  X(http_method_str)                                                                                         \
  X(http_parser_execute)                                                                                     \
  X(http_parser_init)                                                                                        \
  X(http_parser_parse_url)                                                                                   \
  X(http_parser_pause)                                                                                       \
  X(http_parser_settings_init)                                                                               \
  X(http_parser_url_init)

static struct {
#define HP_MEMBER(f) __typeof__(&f) f;
  HTTP_PARSER_FUNCS(HP_MEMBER)
#undef HP_MEMBER
} hpf;

int egress_http_load(sbx_error_t *err)
{
  static void *handle;
  if (handle)
    return 0;
  void *h = dlopen("libhttp_parser.so.2.9", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    sbx_error_set(err, ENOENT, "network proxy: cannot load libhttp-parser: %s", dlerror());
    return sbx_error_hint(err, "install libhttp-parser2.9");
  }
#define HP_LOAD(f)                                                                                           \
  if (!(*(void **) &hpf.f = dlsym(h, #f))) {                                                                 \
    dlclose(h);                                                                                              \
    return sbx_error_set(err, ENOSYS, "network proxy: libhttp-parser lacks %s", #f);                         \
  }
  HTTP_PARSER_FUNCS(HP_LOAD)
#undef HP_LOAD
  handle = h;
  return 0;
}

/* From here on, http_*() calls go through the table. */
#define http_method_str hpf.http_method_str
#define http_parser_execute hpf.http_parser_execute
#define http_parser_init hpf.http_parser_init
#define http_parser_parse_url hpf.http_parser_parse_url
#define http_parser_pause hpf.http_parser_pause
#define http_parser_settings_init hpf.http_parser_settings_init
#define http_parser_url_init hpf.http_parser_url_init

struct span {
  const char *p;
  size_t n;
};

struct head {
  struct span url;
  struct span field[EGRESS_HEADERS_MAX], value[EGRESS_HEADERS_MAX];
  size_t n; /* header lines seen (field callbacks); values pair with the last field */
  bool too_many;
};

static int on_url(http_parser *hp, const char *at, size_t len)
{
  struct head *h = hp->data;
  if (h->url.p) /* one call per span: the whole head is parsed in one execute */
    return 1;
  h->url = (struct span){at, len};
  return 0;
}

static int on_field(http_parser *hp, const char *at, size_t len)
{
  struct head *h = hp->data;
  if (h->n >= EGRESS_HEADERS_MAX) {
    h->too_many = true;
    return 1;
  }
  h->field[h->n] = (struct span){at, len};
  h->value[h->n++] = (struct span){at + len, 0};
  return 0;
}

static int on_value(http_parser *hp, const char *at, size_t len)
{
  struct head *h = hp->data;
  if (h->n == 0 || h->value[h->n - 1].n) /* a second value span would be a folded line */
    return 1;
  h->value[h->n - 1] = (struct span){at, len};
  return 0;
}

static int on_headers_complete(http_parser *hp)
{
  http_parser_pause(hp, 1); /* the body is not ours to parse: it is spliced */
  return 0;
}

/* RFC 9110 section 5.6.2: a token, as a field name must be. */
static bool span_is_token(struct span s)
{
  if (!s.n)
    return false;
  for (size_t i = 0; i < s.n; i++) {
    unsigned char c = (unsigned char) s.p[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          (c && strchr("!#$%&'*+-.^_`|~", c))))
      return false;
  }
  return true;
}

static bool names_are_tokens(const struct head *h)
{
  for (size_t i = 0; i < h->n; i++)
    if (!span_is_token(h->field[i]))
      return false;
  return true;
}

static bool span_is(struct span s, const char *word)
{
  return s.n == strlen(word) && strncasecmp(s.p, word, s.n) == 0;
}

static enum egress_head_result bad(int status, int *ret_status, char *why, size_t why_len, const char *msg)
{
  *ret_status = status;
  bufprintf_cut(why, why_len, "%s", msg);
  return EGRESS_HEAD_BAD;
}

/* A Host header's value as host and port (0 when it names none). */
static bool split_host(struct span v, char *host, size_t host_len, uint16_t *port)
{
  while (v.n && (v.p[v.n - 1] == ' ' || v.p[v.n - 1] == '\t'))
    v.n--;
  const char *end = v.p + v.n, *h = v.p, *he, *colon;
  if (v.n && *h == '[') {
    he = memchr(h, ']', v.n);
    if (!he)
      return false;
    h++;
    colon = he + 1 < end ? he + 1 : NULL;
    if (colon && *colon != ':')
      return false;
  } else {
    colon = memchr(h, ':', v.n);
    he = colon ? colon : end;
  }
  *port = 0;
  if (colon) {
    unsigned long p = 0;
    const char *c = colon + 1;
    if (c == end)
      return false;
    for (; c < end; c++) {
      if (*c < '0' || *c > '9' || (p = p * 10 + (unsigned long) (*c - '0')) > 65535)
        return false;
    }
    if (p == 0)
      return false;
    *port = (uint16_t) p;
  }
  if (he == h || (size_t) (he - h) >= host_len)
    return false;
  memcpy(host, h, (size_t) (he - h));
  host[he - h] = '\0';
  return true;
}

/* Fill r's host and port from the request target. */
static enum egress_head_result target(const struct head *h, bool connect, struct egress_request *r,
                                      struct span *ret_path, int *st, char *why, size_t wl)
{
  struct http_parser_url u;
  http_parser_url_init(&u);
  if (!h->url.n || h->url.n > UINT16_MAX || http_parser_parse_url(h->url.p, h->url.n, connect, &u) != 0)
    return bad(400, st, why, wl, "the request target is not a valid URI");
  if (!connect && !(u.field_set & (1 << UF_SCHEMA)))
    return bad(400, st, why, wl,
               "not a proxy request: send an absolute URI (GET http://host/path) or CONNECT host:port");
  if (!connect) {
    struct span scheme = {h->url.p + u.field_data[UF_SCHEMA].off, u.field_data[UF_SCHEMA].len};
    if (span_is(scheme, "https"))
      return bad(400, st, why, wl, "https:// goes through CONNECT host:443, not plain forwarding");
    if (!span_is(scheme, "http"))
      return bad(400, st, why, wl, "only http:// URIs are forwarded (and CONNECT for anything else)");
  }
  if (u.field_set & (1 << UF_USERINFO))
    return bad(400, st, why, wl, "the request URI has user information (user@host): refused");
  if (!(u.field_set & (1 << UF_HOST)) || u.field_data[UF_HOST].len == 0 ||
      u.field_data[UF_HOST].len > EGRESS_HOST_MAX)
    return bad(400, st, why, wl, "the request URI names no host");
  memcpy(r->host, h->url.p + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
  r->host[u.field_data[UF_HOST].len] = '\0';
  r->port = u.field_set & (1 << UF_PORT) ? u.port : 80;
  if (r->port == 0)
    return bad(400, st, why, wl, "port 0");
  if (connect)
    return EGRESS_HEAD_OK;
  /* The origin-form target: path and query, as sent (the fragment is the client's own). */
  size_t off = u.field_set & (1 << UF_PATH)    ? u.field_data[UF_PATH].off
               : u.field_set & (1 << UF_QUERY) ? (size_t) u.field_data[UF_QUERY].off - 1
                                               : h->url.n;
  size_t end = u.field_set & (1 << UF_QUERY)  ? u.field_data[UF_QUERY].off + u.field_data[UF_QUERY].len
               : u.field_set & (1 << UF_PATH) ? u.field_data[UF_PATH].off + u.field_data[UF_PATH].len
                                              : h->url.n;
  *ret_path = (struct span){h->url.p + off, end - off};
  return EGRESS_HEAD_OK;
}

/* The one Host header must name the request's host (and port, when it names one). */
static enum egress_head_result check_host(const struct head *h, struct egress_request *r, int *host_ix,
                                          int *st, char *why, size_t wl)
{
  *host_ix = -1;
  for (size_t i = 0; i < h->n; i++)
    if (span_is(h->field[i], "host")) {
      if (*host_ix >= 0)
        return bad(400, st, why, wl, "more than one Host header: refused");
      *host_ix = (int) i;
    }
  if (*host_ix < 0)
    return EGRESS_HEAD_OK;
  char host[EGRESS_HOST_MAX + 1];
  uint16_t port;
  if (!split_host(h->value[*host_ix], host, sizeof host, &port))
    return bad(400, st, why, wl, "the Host header is not host[:port]");
  if (strcasecmp(host, r->host) != 0 || (port && port != r->port))
    return bad(400, st, why, wl, "the Host header names another host than the request URI: refused");
  return EGRESS_HEAD_OK;
}

/* Headers the origin does not get: the proxy's own, and the connection's (it gets `close`). */
static bool hop_by_hop(struct span f)
{
  return span_is(f, "connection") || span_is(f, "proxy-connection") || span_is(f, "proxy-authorization") ||
         span_is(f, "keep-alive") || span_is(f, "upgrade") || span_is(f, "te");
}

static int build_upstream(const http_parser *hp, const struct head *h, const struct egress_request *r,
                          struct span path, int host_ix, strbuf_t *sb)
{
  if (!path.n) /* http://host alone: the origin's root */
    path = (struct span){"/", 1};
  int rc = strbuf_printf(sb, "%s %.*s HTTP/%u.%u\r\n", r->method, (int) path.n, path.p, hp->http_major,
                         hp->http_minor);
  for (size_t i = 0; i < h->n; i++)
    if (!hop_by_hop(h->field[i]))
      rc |= strbuf_printf(sb, "%.*s: %.*s\r\n", (int) h->field[i].n, h->field[i].p, (int) h->value[i].n,
                          h->value[i].p);
  if (host_ix < 0)
    rc |= strbuf_printf(sb, strchr(r->host, ':') ? "Host: [%s]:%u\r\n" : "Host: %s:%u\r\n", r->host, r->port);
  rc |= strbuf_printf(sb, "Connection: close\r\n\r\n");
  return rc;
}

enum egress_head_result egress_parse_head(const char *buf, size_t len, struct egress_request *r, int *st,
                                          char *why, size_t wl)
{
  *r = (struct egress_request){0};
  const char *end = NULL;
  for (size_t i = 0; i + 3 < len && i + 4 <= EGRESS_HEAD_MAX; i++)
    if (buf[i] == '\r' && !memcmp(buf + i, "\r\n\r\n", 4)) {
      end = buf + i + 4;
      break;
    }
  size_t scan = end ? (size_t) (end - buf) : len;
  for (size_t i = 0; i < scan; i++) {
    if (buf[i] == '\0')
      return bad(400, st, why, wl, "a NUL byte in the request head");
    if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r'))
      return bad(400, st, why, wl, "a bare LF in the request head (lines end in CRLF)");
    if (buf[i] == '\r' && i + 1 < scan && buf[i + 1] != '\n')
      return bad(400, st, why, wl, "a bare CR in the request head (lines end in CRLF)");
    if (buf[i] == '\n' && i + 1 < scan && (buf[i + 1] == ' ' || buf[i + 1] == '\t'))
      return bad(400, st, why, wl, "a folded header line (obsolete, refused)");
    if (((unsigned char) buf[i] < 0x20 && !strchr("\t\r\n", buf[i])) || buf[i] == 0x7f)
      return bad(400, st, why, wl, "a control character in the request head");
  }
  if (!end)
    return len >= EGRESS_HEAD_MAX ? bad(431, st, why, wl, "the request head is over 16 KiB")
                                  : EGRESS_HEAD_INCOMPLETE;
  r->head_len = (size_t) (end - buf);

  sbx_error_t lerr;
  if (egress_http_load(&lerr) < 0)
    return bad(500, st, why, wl, "no HTTP parser");
  struct head h = {0};
  http_parser hp;
  http_parser_init(&hp, HTTP_REQUEST);
  hp.data = &h;
  http_parser_settings s;
  http_parser_settings_init(&s);
  s.on_url = on_url;
  s.on_header_field = on_field;
  s.on_header_value = on_value;
  s.on_headers_complete = on_headers_complete;
  size_t done = http_parser_execute(&hp, &s, buf, r->head_len);
  if (h.too_many)
    return bad(431, st, why, wl, "more than 100 header lines");
  enum http_errno e = HTTP_PARSER_ERRNO(&hp);
  bool connect = hp.method == HTTP_CONNECT;
  /* The parser pauses at the blank line's LF (on_headers_complete), which must be where we found
   * the head's end: else the two disagree on where the head ends. */
  if (e != HPE_PAUSED || done + 1 != r->head_len)
    return bad(400, st, why, wl, "not a valid HTTP/1.x request head");
  /* HTTP/0.9 (no version) and 2.x heads are not HTTP/1.x, whatever the parser accepts. */
  if (hp.http_major != 1 || hp.http_minor > 1)
    return bad(400, st, why, wl, "only HTTP/1.0 and HTTP/1.1 requests are forwarded");
  if (!names_are_tokens(&h))
    return bad(400, st, why, wl,
               "a header name with whitespace or another character a name cannot have (as in `Host :`)");
  r->connect = connect;
  bufprintf_cut(r->method, sizeof r->method, "%s", http_method_str((enum http_method) hp.method));
  struct span path = {0};
  enum egress_head_result res = target(&h, connect, r, &path, st, why, wl);
  int host_ix;
  if (res == EGRESS_HEAD_OK)
    res = check_host(&h, r, &host_ix, st, why, wl);
  if (res != EGRESS_HEAD_OK)
    return res;
  if (!connect && build_upstream(&hp, &h, r, path, host_ix, &r->upstream) < 0) {
    strbuf_free(&r->upstream);
    return bad(500, st, why, wl, "out of memory");
  }
  return EGRESS_HEAD_OK;
}

enum egress_head_result egress_response_head(const char *buf, size_t len, strbuf_t *out, size_t *ret_head_len,
                                             bool *ret_interim)
{
  *ret_interim = false;
  sbx_error_t lerr;
  if (egress_http_load(&lerr) < 0)
    return EGRESS_HEAD_BAD;
  struct head h = {0};
  http_parser hp;
  http_parser_init(&hp, HTTP_RESPONSE);
  hp.data = &h;
  http_parser_settings s;
  http_parser_settings_init(&s);
  s.on_header_field = on_field;
  s.on_header_value = on_value;
  s.on_headers_complete = on_headers_complete;
  size_t scan = len < EGRESS_HEAD_MAX ? len : EGRESS_HEAD_MAX;
  size_t done = http_parser_execute(&hp, &s, buf, scan);
  enum http_errno e = HTTP_PARSER_ERRNO(&hp);
  if (e == HPE_OK && done == scan) /* the head goes on */
    return scan < EGRESS_HEAD_MAX ? EGRESS_HEAD_INCOMPLETE : EGRESS_HEAD_BAD;
  if (e != HPE_PAUSED || h.too_many || hp.http_major != 1 || hp.http_minor > 1 || !names_are_tokens(&h))
    return EGRESS_HEAD_BAD;
  size_t head_len = done + 1; /* paused at the blank line's LF */
  *ret_head_len = head_len;
  if (hp.status_code >= 100 && hp.status_code < 200 && hp.status_code != 101) {
    *ret_interim = true;
    return strbuf_append(out, buf, head_len) < 0 ? EGRESS_HEAD_BAD : EGRESS_HEAD_OK;
  }
  const char *eol = memchr(buf, '\n', head_len);
  int rc = strbuf_append(out, buf, (size_t) (eol - buf) + 1);
  for (size_t i = 0; i < h.n; i++)
    if (!hop_by_hop(h.field[i]))
      rc |= strbuf_printf(out, "%.*s: %.*s\r\n", (int) h.field[i].n, h.field[i].p, (int) h.value[i].n,
                          h.value[i].p);
  rc |= strbuf_printf(out, "Connection: close\r\n\r\n");
  return rc < 0 ? EGRESS_HEAD_BAD : EGRESS_HEAD_OK;
}
