/* libFuzzer target: bridge frame reader, fed in chunks whose sizes come from the input. */
#include <stdint.h>
#include <stdlib.h>

#include "bridge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct bridge_reader r;
  bridge_reader_init(&r, 1u << 16);
  size_t chunk = (size_t) data[0] % 17 + 1, off = 1;
  while (off < size) {
    size_t n = size - off < chunk ? size - off : chunk;
    size_t used;
    char *f;
    size_t flen;
    enum bridge_event e = bridge_reader_feed(&r, (const char *) data + off, n, &used, &f, &flen);
    if (used > n)
      abort();
    if (e == BRIDGE_FRAME) {
      if (f[flen] != '\0')
        abort();
      free(f);
    }
    if (used == 0 && e == BRIDGE_NEED_MORE)
      abort();
    off += used;
  }
  bridge_reader_free(&r);
  return 0;
}
