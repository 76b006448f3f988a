/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy's request head (issue #17): one HTTP/1.x request head from the sandbox, checked
 * strictly and turned into where to connect and, for plain HTTP, the head to send the origin. Pure:
 * no I/O, unit-tested (tests/unit/test_egress_http.c). The parser is Debian's libhttp-parser. */
#ifndef SBX_EGRESS_HTTP_H
#define SBX_EGRESS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "policy/egress_rules.h"

/* The longest request head (request line and headers, through the blank line): more is 431. */
#define EGRESS_HEAD_MAX 16384
/* The most header lines a head may have: more is 431. */
#define EGRESS_HEADERS_MAX 100

struct egress_request {
  bool connect;                   /* CONNECT host:port (a tunnel), else plain-HTTP forwarding */
  char method[16];                /* as the client sent it */
  char host[EGRESS_HOST_MAX + 1]; /* as named, an IPv6 literal without brackets */
  uint16_t port;
  size_t head_len;   /* the head's bytes in the buffer, blank line included: the rest is body */
  strbuf_t upstream; /* plain HTTP: the head the origin gets (origin-form, `Connection: close`) */
};

enum egress_head_result {
  EGRESS_HEAD_OK,         /* *ret filled */
  EGRESS_HEAD_INCOMPLETE, /* no blank line yet, and under EGRESS_HEAD_MAX: read more */
  EGRESS_HEAD_BAD,        /* *ret_status (400, 431) and why say what is wrong */
};

/* Load libhttp-parser (once): the proxy needs it; every other run of sandboxd does not map it. */
int egress_http_load(sbx_error_t *err);

/* Parse the head at the start of buf (len bytes read so far). On OK the caller frees
 * ret->upstream (strbuf_free). why gets a one-line reason for the client on BAD. */
enum egress_head_result egress_parse_head(const char *buf, size_t len, struct egress_request *ret,
                                          int *ret_status, char *why, size_t why_len);

/* A plain-HTTP response head from the origin (at the start of buf, len bytes so far), rewritten for
 * the client: the status line as sent, the headers without hop-by-hop ones (Connection,
 * Keep-Alive, Proxy-Connection, ...), then `Connection: close`, since the proxy serves one request
 * per connection and a client that was not told would send its next request into a closing
 * socket. An interim 1xx head is copied as it is and *ret_interim set: the final head follows.
 * On OK, *ret_head_len bytes of buf were the head and out (appended to) holds what the client
 * gets; BAD means not an HTTP/1.x response head, or one over EGRESS_HEAD_MAX. */
enum egress_head_result egress_response_head(const char *buf, size_t len, strbuf_t *out, size_t *ret_head_len,
                                             bool *ret_interim);

#endif
