/* Unit tests for the egress proxy's request heads (src/egress/egress_http.c): where a request goes, what
 * the origin gets, and each way a head is refused. */
#include <string.h>

#include "check.h"
#include "egress/egress_http.h"

static int st;
static char why[200];

static enum egress_head_result P(const char *head, struct egress_request *r)
{
  st = 0;
  why[0] = '\0';
  return egress_parse_head(head, strlen(head), r, &st, why, sizeof why);
}

/* Refused with this status and a reason containing needle. */
static bool refused(const char *head, int status, const char *needle)
{
  struct egress_request r;
  enum egress_head_result res = P(head, &r);
  if (res == EGRESS_HEAD_OK)
    strbuf_free(&r.upstream);
  bool ok = res == EGRESS_HEAD_BAD && st == status && strstr(why, needle);
  if (!ok)
    fprintf(stderr, "  head %.60s: result %d status %d why `%s`\n", head, res, st, why);
  return ok;
}

static void test_connect(void)
{
  struct egress_request r;
  CHECK(P("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\nTLS", &r) == EGRESS_HEAD_OK);
  CHECK(r.connect && !strcmp(r.host, "pypi.org") && r.port == 443 && !strcmp(r.method, "CONNECT"));
  CHECK(r.head_len == strlen("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n"));
  CHECK(r.upstream.len == 0);
  CHECK(P("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r) == EGRESS_HEAD_OK && !strcmp(r.host, "::1") &&
        r.port == 8443);
  CHECK(P("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.ORG\r\n\r\n", &r) == EGRESS_HEAD_OK);
  CHECK(refused("CONNECT pypi.org HTTP/1.1\r\n\r\n", 400, "not a valid URI"));
  CHECK(refused("CONNECT pypi.org:443 HTTP/1.1\r\nHost: evil.org:443\r\n\r\n", 400, "another host"));
  CHECK(refused("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:80\r\n\r\n", 400, "another host"));
}

static void test_forward(void)
{
  struct egress_request r;
  const char *h = "GET http://Example.com:8080/a/b?q=1#frag HTTP/1.1\r\nHost: example.com:8080\r\n"
                  "Proxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nConnection: keep-alive\r\n"
                  "Accept: */*\r\n\r\nBODY";
  CHECK(P(h, &r) == EGRESS_HEAD_OK);
  CHECK(!r.connect && !strcmp(r.host, "Example.com") && r.port == 8080 && !strcmp(r.method, "GET"));
  CHECK(r.head_len == strlen(h) - 4);
  CHECK(r.upstream.data && !strcmp(r.upstream.data, "GET /a/b?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n"
                                                    "Accept: */*\r\nConnection: close\r\n\r\n"));
  strbuf_free(&r.upstream);
  /* No Host: the origin gets one; no path: `/`; the default port is 80. */
  CHECK(P("POST http://a.example HTTP/1.0\r\nContent-Length: 3\r\n\r\n", &r) == EGRESS_HEAD_OK);
  CHECK(r.port == 80 && r.upstream.data &&
        !strcmp(r.upstream.data,
                "POST / HTTP/1.0\r\nContent-Length: 3\r\nHost: a.example:80\r\nConnection: close\r\n\r\n"));
  strbuf_free(&r.upstream);
  CHECK(P("GET http://[::1]:81/ HTTP/1.1\r\n\r\n", &r) == EGRESS_HEAD_OK && r.upstream.data &&
        strstr(r.upstream.data, "\r\nHost: [::1]:81\r\n"));
  strbuf_free(&r.upstream);
}

static void test_refused(void)
{
  struct egress_request r;
  /* Incomplete until the blank line, refused at the cap. */
  CHECK(P("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n", &r) == EGRESS_HEAD_INCOMPLETE);
  static char big[EGRESS_HEAD_MAX + 64];
  memset(big, 'a', sizeof big - 1);
  memcpy(big, "GET http://a.example/ HTTP/1.1\r\nX: ", 35);
  CHECK(refused(big, 431, "over 16 KiB"));
  strbuf_t many = {0};
  strbuf_printf(&many, "GET http://a.example/ HTTP/1.1\r\n");
  for (int i = 0; i <= EGRESS_HEADERS_MAX; i++)
    strbuf_printf(&many, "X-%d: 1\r\n", i);
  strbuf_printf(&many, "\r\n");
  CHECK(refused(many.data, 431, "more than 100 header lines"));
  strbuf_free(&many);
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", 400,
                "more than one Host"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nhost: a.example\r\nHOST: a.example\r\n\r\n", 400,
                "more than one Host"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n", 400, "another host"));
  CHECK(refused("GET http://a.example:81/ HTTP/1.1\r\nHost: a.example:82\r\n\r\n", 400, "another host"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nHost: a.example:\r\n\r\n", 400, "host[:port]"));
  CHECK(refused("GET http://a.example@b.example/ HTTP/1.1\r\n\r\n", 400, "user information"));
  CHECK(refused("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", 400, "not a proxy request"));
  CHECK(refused("GET https://a.example/ HTTP/1.1\r\n\r\n", 400, "CONNECT"));
  CHECK(refused("GET ftp://a.example/ HTTP/1.1\r\n\r\n", 400, "only http://"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\nHost: a.example\n\n", 400, "bare LF"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "folded"));
  /* RFC 9112 section 5.1: whitespace between a name and its colon is a 400, not a header `Host `
   * (the parser's reading), which would leave the request Host-less and get the proxy's own. */
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nHost : b.example\r\n\r\n", 400, "header name"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nHost\t: b.example\r\n\r\n", 400, "header name") ||
        refused("GET http://a.example/ HTTP/1.1\r\nHost\t: b.example\r\n\r\n", 400, "not a valid"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost : b.example\r\n\r\n", 400,
                "header name"));
  CHECK(refused("CONNECT a.example:443 HTTP/1.1\r\nHost : b.example:443\r\n\r\n", 400, "header name"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX Y: 1\r\n\r\n", 400, "header name") ||
        refused("GET http://a.example/ HTTP/1.1\r\nX Y: 1\r\n\r\n", 400, "not a valid"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX(: 1\r\n\r\n", 400, "header name") ||
        refused("GET http://a.example/ HTTP/1.1\r\nX(: 1\r\n\r\n", 400, "not a valid"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\n Host: a.example\r\n\r\n", 400, "folded"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX: a\r\n\tHost: b.example\r\n\r\n", 400, "folded"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX: a\rHost: b.example\r\n\r\n", 400, "bare CR"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX: a\x0b\r\n\r\n", 400, "control character"));
  CHECK(refused("GET http://a.example/ HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400, "control character"));
  CHECK(refused("BREW http://a.example/ HTTP/1.1\r\n\r\n", 400, "not a valid HTTP/1.x"));
  CHECK(refused("GET http://a.example/\r\n\r\n", 400, "only HTTP/1.0 and HTTP/1.1"));
  CHECK(refused("GET http://a.example/ HTTP/2.0\r\n\r\n", 400, "only HTTP/1.0 and HTTP/1.1") ||
        refused("GET http://a.example/ HTTP/2.0\r\n\r\n", 400, "not a valid HTTP/1.x"));
  CHECK(refused("GET http://a.example:0/ HTTP/1.1\r\n\r\n", 400, "port 0") ||
        refused("GET http://a.example:0/ HTTP/1.1\r\n\r\n", 400, "not a valid"));
}

static void test_nul(void)
{
  /* A NUL anywhere in the head (strlen would stop there: pass the length). */
  const char h[] = "GET http://a.example/ HTTP/1.1\r\nX: a\0b\r\n\r\n";
  struct egress_request r;
  CHECK(egress_parse_head(h, sizeof h - 1, &r, &st, why, sizeof why) == EGRESS_HEAD_BAD && st == 400 &&
        strstr(why, "NUL"));
}

/* The origin's response head, as the client gets it. */
static enum egress_head_result R(const char *resp, strbuf_t *out, size_t *hl, bool *interim)
{
  *out = (strbuf_t){0};
  return egress_response_head(resp, strlen(resp), out, hl, interim);
}

static void test_response(void)
{
  strbuf_t out;
  size_t hl;
  bool interim;
  const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n"
                  "Keep-Alive: timeout=5\r\nX-A: b\r\n\r\nhi";
  CHECK(R(h, &out, &hl, &interim) == EGRESS_HEAD_OK && !interim && hl == strlen(h) - 2);
  CHECK(out.data && !strcmp(out.data, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n"
                                      "Connection: close\r\n\r\n"));
  strbuf_free(&out);
  /* An interim 100 goes as it is; the final head is the next call's. */
  h = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
  CHECK(R(h, &out, &hl, &interim) == EGRESS_HEAD_OK && interim &&
        hl == strlen("HTTP/1.1 100 Continue\r\n\r\n"));
  CHECK(out.data && !strcmp(out.data, "HTTP/1.1 100 Continue\r\n\r\n"));
  strbuf_free(&out);
  CHECK(R("HTTP/1.1 200 OK\r\nContent-Le", &out, &hl, &interim) == EGRESS_HEAD_INCOMPLETE);
  strbuf_free(&out);
  CHECK(R("SSH-2.0-OpenSSH_9.2\r\n\r\n", &out, &hl, &interim) == EGRESS_HEAD_BAD);
  strbuf_free(&out);
  CHECK(R("HTTP/2.0 200 OK\r\n\r\n", &out, &hl, &interim) == EGRESS_HEAD_BAD);
  strbuf_free(&out);
  /* A name with whitespace before its colon: the client would read another header than we pass. */
  CHECK(R("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello", &out, &hl, &interim) == EGRESS_HEAD_BAD);
  strbuf_free(&out);
  /* A head that never ends within EGRESS_HEAD_MAX. */
  static char big[EGRESS_HEAD_MAX + 100];
  memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 20);
  memset(big + 20, 'a', sizeof big - 21);
  big[sizeof big - 1] = '\0';
  CHECK(R(big, &out, &hl, &interim) == EGRESS_HEAD_BAD);
  strbuf_free(&out);
}

int main(void)
{
  test_response();
  test_connect();
  test_forward();
  test_refused();
  test_nul();
  return check_summary("egress_http");
}
