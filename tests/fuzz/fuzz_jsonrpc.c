/* libFuzzer target: JSON-RPC framing (in chunks whose sizes come from the input) and message
 * parsing, including the oversize path, and the JSON tree underneath. */
#include <stdint.h>
#include <stdlib.h>

#include "base/jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_one(const char *msg, size_t len)
{
  struct jsonrpc_message m;
  struct jsonrpc_failure f;
  if (jsonrpc_parse(msg, len, &m, &f) == 0) {
    if (m.kind == JSONRPC_REQUEST && !m.id)
      abort(); /* a request always has an id to answer */
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
