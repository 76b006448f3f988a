/* libFuzzer target: the egress proxy's request heads (egress_http.c), which come from the code.
 * Input: the bytes a client sends. A head that parses must say where to go, and the head the
 * origin gets must have one Host line, CRLF line ends only and end in `Connection: close`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct egress_request r;
  int st = 0;
  char why[200];
  enum egress_head_result res = egress_parse_head((const char *) data, size, &r, &st, why, sizeof why);
  if (res == EGRESS_HEAD_BAD && (st < 400 || st > 599 || !why[0]))
    abort();
  if (res != EGRESS_HEAD_OK)
    return 0;
  if (r.head_len < 4 || r.head_len > size || r.head_len > EGRESS_HEAD_MAX ||
      memcmp(data + r.head_len - 4, "\r\n\r\n", 4) != 0 || !r.host[0] || r.port == 0)
    abort();
  if (!r.connect) {
    const char *u = r.upstream.data;
    size_t n = r.upstream.len, hosts = 0;
    static const char tail[] = "Connection: close\r\n\r\n";
    if (!u || n < sizeof tail || strlen(u) != n || memcmp(u + n - (sizeof tail - 1), tail, sizeof tail - 1))
      abort();
    for (size_t i = 0; i < n; i++) {
      if (u[i] == '\n' && (i == 0 || u[i - 1] != '\r'))
        abort();
      if (i >= 2 && u[i - 2] == '\r' && u[i - 1] == '\n' && strncasecmp(u + i, "host:", 5) == 0)
        hosts++;
    }
    if (hosts != 1)
      abort();
  }
  strbuf_free(&r.upstream);
  return 0;
}
