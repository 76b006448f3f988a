/* Unit tests for bridge framing (src/hostmcp/bridge.c). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hostmcp/bridge.h"

static size_t frame(char *out, const char *payload, size_t n)
{
  unsigned char h[4];
  bridge_header(n, 0, h, NULL);
  memcpy(out, h, 4);
  memcpy(out + 4, payload, n);
  return n + 4;
}

int main(void)
{
  struct bridge_reader r;
  char buf[256], *f;
  size_t used, flen;

  /* Two frames in one read, then byte by byte. */
  bridge_reader_init(&r, 0);
  size_t n = frame(buf, "{\"a\":1}", 7);
  n += frame(buf + n, "[]", 2);
  CHECK(bridge_reader_feed(&r, buf, n, &used, &f, &flen) == BRIDGE_FRAME && flen == 7 &&
        !strcmp(f, "{\"a\":1}"));
  free(f);
  size_t off = used;
  CHECK(bridge_reader_feed(&r, buf + off, n - off, &used, &f, &flen) == BRIDGE_FRAME && flen == 2 &&
        !strcmp(f, "[]") && off + used == n);
  free(f);
  n = frame(buf, "hello", 5);
  int frames = 0;
  for (size_t i = 0; i < n; i++) {
    enum bridge_event e = bridge_reader_feed(&r, buf + i, 1, &used, &f, &flen);
    CHECK(used == 1);
    if (e == BRIDGE_FRAME) {
      frames++;
      CHECK(i == n - 1 && flen == 5 && !memcmp(f, "hello", 5));
      free(f);
    }
  }
  CHECK(frames == 1);
  /* A zero-length frame. */
  n = frame(buf, "", 0);
  CHECK(bridge_reader_feed(&r, buf, n, &used, &f, &flen) == BRIDGE_FRAME && flen == 0);
  free(f);
  bridge_reader_free(&r);

  /* Oversize: refused without allocating, answered once its first bytes (the id) are in, skipped,
   * and the next frame still arrives. */
  bridge_reader_init(&r, 8);
  unsigned char big[4] = {0x7f, 0xff, 0xff, 0xff};
  CHECK(bridge_reader_feed(&r, (char *) big, 4, &used, &f, &flen) == BRIDGE_NEED_MORE && used == 4 &&
        !r.frame);
  char body[BRIDGE_OVERSIZE_PREFIX + 10];
  memset(body, 'x', sizeof body);
  memcpy(body, "{\"id\":7,", 7);
  CHECK(bridge_reader_feed(&r, body, sizeof body, &used, &f, &flen) == BRIDGE_OVERSIZE &&
        used == BRIDGE_OVERSIZE_PREFIX && flen == BRIDGE_OVERSIZE_PREFIX && !memcmp(f, "{\"id\":7,", 7) &&
        f[flen] == '\0' && r.oversize_len == 0x7fffffffu && r.skip == 0x7fffffffu - BRIDGE_OVERSIZE_PREFIX);
  CHECK(bridge_reader_feed(&r, body, 10, &used, &f, &flen) == BRIDGE_NEED_MORE && used == 10);
  bridge_reader_free(&r);
  bridge_reader_init(&r, 8);
  n = frame(buf, "0123456789", 10);
  n += frame(buf + n, "ok", 2);
  CHECK(bridge_reader_feed(&r, buf, n, &used, &f, &flen) == BRIDGE_OVERSIZE && r.oversize == 1 &&
        flen == 10 && !strcmp(f, "0123456789"));
  off = used;
  CHECK(bridge_reader_feed(&r, buf + off, n - off, &used, &f, &flen) == BRIDGE_FRAME && flen == 2 &&
        !strcmp(f, "ok"));
  free(f);
  bridge_reader_free(&r);

  /* A frame judged while it arrives (bridge_reader_partial) and given up (bridge_reader_drop): the
   * rest of it is skipped, and the next frame is read as usual. */
  bridge_reader_init(&r, 0);
  n = frame(buf, "[0,0,0,0,0,0,0,0]", 17);
  n += frame(buf + n, "ok", 2);
  size_t have = 0;
  CHECK(!bridge_reader_partial(&r, &have));
  CHECK(bridge_reader_feed(&r, buf, 10, &used, &f, &flen) == BRIDGE_NEED_MORE && used == 10);
  const char *part = bridge_reader_partial(&r, &have);
  CHECK(part && have == 6 && !memcmp(part, "[0,0,0", 6));
  bridge_reader_drop(&r);
  CHECK(!bridge_reader_partial(&r, &have) && r.skip == 11);
  off = 10;
  CHECK(bridge_reader_feed(&r, buf + off, n - off, &used, &f, &flen) == BRIDGE_FRAME && flen == 2 &&
        !strcmp(f, "ok") && off + used == n);
  free(f);
  bridge_reader_drop(&r); /* between frames: nothing to drop */
  CHECK(r.skip == 0 && !r.frame);
  bridge_reader_free(&r);

  /* Encoding refuses frames above the maximum. */
  unsigned char h[4];
  sbx_error_t err;
  CHECK(bridge_header(9, 8, h, &err) < 0);
  CHECK(bridge_header(8, 8, h, &err) == 0 && h[3] == 8 && h[0] == 0);
  CHECK(bridge_header(0x01020304, 0x7fffffff, h, &err) == 0 && h[0] == 1 && h[1] == 2 && h[2] == 3 &&
        h[3] == 4);
  return check_summary("test_bridge");
}
