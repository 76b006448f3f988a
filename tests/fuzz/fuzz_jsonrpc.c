/* libFuzzer target: JSON-RPC framing (in chunks whose sizes come from the input) and message
 * parsing, including the oversize path, and the JSON tree underneath; and a member found as
 * written in a message that parses (json_member_span, json_minify: how the proxy passes a
 * payload on unparsed) is the member the tree holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a and b are the same value: written out alike. */
static int same(const json_node_t *a, const json_node_t *b)
{
  json_writer_t *wa = json_writer_new(), *wb = json_writer_new();
  size_t na = 0, nb = 0;
  const char *sa = NULL, *sb = NULL;
  if (wa && wb) {
    json_write_node(wa, a);
    json_write_node(wb, b);
    sa = json_writer_buf(wa, &na);
    sb = json_writer_buf(wb, &nb);
  }
  int r = !sa || !sb || (na == nb && memcmp(sa, sb, na) == 0); /* out of memory: no verdict */
  json_writer_free(wa);
  json_writer_free(wb);
  return r;
}

static void check_spans(const char *msg, size_t len, const json_node_t *root)
{
  static const char *const keys[] = {"id", "params", "result", "error"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    size_t off, n;
    if (json_member_span(msg, len, keys[i], &off, &n) < 0)
      continue;
    const json_node_t *want = json_get(root, keys[i]);
    char *copy = malloc(n + 1);
    if (!want || !copy)
      abort();
    memcpy(copy, msg + off, n);
    size_t m = json_minify(copy, n);
    json_node_t *got = NULL, *small = NULL;
    sbx_error_t err;
    if (json_parse(msg + off, n, &got, &err) < 0 || json_parse(copy, m, &small, &err) < 0 ||
        memchr(copy, '\n', m) || !same(want, got) || !same(want, small))
      abort();
    json_free(got);
    json_free(small);
    free(copy);
  }
}

static void parse_one(const char *msg, size_t len)
{
  struct jsonrpc_message m;
  struct jsonrpc_failure f;
  if (jsonrpc_parse(msg, len, &m, &f) == 0) {
    if (m.kind == JSONRPC_REQUEST && !m.id)
      abort(); /* a request always has an id to answer */
    check_spans(msg, len, m.root);
    jsonrpc_message_clear(&m);
  } else {
    jsonrpc_failure_clear(&f);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  jsonrpc_framer_t fr;
  jsonrpc_framer_init(&fr, 4096);
  size_t chunk = (size_t) data[0] % 64 + 1, off = 1;
  while (off < size) {
    size_t n = size - off < chunk ? size - off : chunk;
    sbx_error_t err;
    if (jsonrpc_framer_push(&fr, (const char *) data + off, n, &err) < 0)
      break;
    off += n;
    const char *msg;
    size_t len;
    enum jsonrpc_frame e;
    while ((e = jsonrpc_framer_next(&fr, &msg, &len)) != JSONRPC_FRAME_NONE) {
      if (e == JSONRPC_FRAME_MESSAGE) {
        parse_one(msg, len);
      } else {
        struct jsonrpc_failure f;
        size_t tail_len;
        const char *tail = jsonrpc_framer_tail(&fr, &tail_len);
        jsonrpc_oversize(msg, len, tail, tail_len, 4096, &f);
        jsonrpc_failure_clear(&f);
      }
    }
  }
  const char *msg;
  size_t len;
  if (jsonrpc_framer_finish(&fr, &msg, &len) == JSONRPC_FRAME_MESSAGE)
    parse_one(msg, len);
  jsonrpc_framer_free(&fr);
  return 0;
}
