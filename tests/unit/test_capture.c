/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for output capture (src/mcp/capture.c): each stream's head and tail within one bound. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mcp/capture.h"

/* What a stream carried, to compare its view with. */
struct sent {
  char *data;
  size_t len;
};

static void send_to(struct capture *c, enum capture_stream_id id, struct sent *w, const char *buf, size_t n)
{
  capture_add(c, id, buf, n);
  w->data = realloc(w->data, w->len + n);
  memcpy(w->data + w->len, buf, n);
  w->len += n;
}

/* The view is a head of what was sent, then (after a gap of `dropped` bytes) its end. */
static int view_ok(const struct capture *c, enum capture_stream_id id, const struct sent *w,
                   struct capture_view *v)
{
  if (capture_view(c, id, v) < 0)
    return 0;
  size_t tail = v->buf.len - v->gap;
  return v->gap <= v->buf.len && memcmp(v->buf.data, w->data, v->gap) == 0 &&
         v->buf.len + v->dropped == w->len &&
         memcmp(v->buf.data + v->gap, w->data + w->len - tail, tail) == 0 &&
         (v->dropped || v->gap == v->buf.len);
}

static void lines(struct capture *c, enum capture_stream_id id, struct sent *w, const char *name, int from,
                  int to, size_t chunk)
{
  char buf[65536];
  size_t n = 0;
  for (int i = from; i < to; i++) {
    n += (size_t) snprintf(buf + n, sizeof buf - n, "%s %06d ----------------\n", name, i);
    if (n + 64 > chunk || n + 64 > sizeof buf || i + 1 == to) {
      send_to(c, id, w, buf, n);
      n = 0;
    }
  }
}

static void small_streams_are_kept_whole(void)
{
  struct capture c = {0};
  capture_init(&c, 1 << 20);
  struct sent o = {0}, e = {0};
  struct capture_view v;
  send_to(&c, CAPTURE_STDOUT, &o, "hello\n", 6);
  send_to(&c, CAPTURE_STDERR, &e, "oops\n", 5);
  CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v) && v.dropped == 0 && v.buf.len == 6);
  strbuf_free(&v.buf);
  CHECK(view_ok(&c, CAPTURE_STDERR, &e, &v) && v.dropped == 0 && v.buf.len == 5);
  strbuf_free(&v.buf);
  CHECK(capture_kept(&c) == 11 && !capture_dropped_any(&c));
  /* Past a quarter of the bound (the head) but within it: still whole, no gap. */
  lines(&c, CAPTURE_STDOUT, &o, "out", 0, 20000, 4096);
  CHECK(o.len < (1 << 20) && view_ok(&c, CAPTURE_STDOUT, &o, &v) && v.dropped == 0);
  strbuf_free(&v.buf);
  capture_free(&c);
  free(o.data);
  free(e.data);
}

static void a_flood_keeps_head_and_end_then_a_traceback_whole(void)
{
  for (size_t chunk = 100; chunk <= 65536; chunk *= 8) {
    struct capture c = {0};
    capture_init(&c, 65536);
    struct sent o = {0}, e = {0};
    struct capture_view v;
    lines(&c, CAPTURE_STDOUT, &o, "out", 0, 50000, chunk);
    CHECK(capture_kept(&c) == 65536 && capture_dropped_any(&c));
    CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v));
    /* The head ends at a line end, and the bound is full. */
    CHECK(v.gap <= 65536 / 4 && v.gap > 65536 / 8 && v.buf.data[v.gap - 1] == '\n');
    CHECK(v.buf.len == 65536 && strstr(v.buf.data + v.gap, "out 049999 ") != NULL);
    strbuf_free(&v.buf);
    /* Then a traceback: all of it, its room taken from stdout's tail. */
    char tb[3000];
    memset(tb, 'T', sizeof tb);
    send_to(&c, CAPTURE_STDERR, &e, tb, sizeof tb);
    CHECK(view_ok(&c, CAPTURE_STDERR, &e, &v) && v.dropped == 0 && v.buf.len == sizeof tb);
    strbuf_free(&v.buf);
    CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v) && v.buf.len == 65536 - sizeof tb);
    strbuf_free(&v.buf);
    capture_free(&c);
    free(o.data);
    free(e.data);
  }
}

static void interleaved_streams_share_the_bound(void)
{
  struct capture c = {0};
  capture_init(&c, 100000);
  struct sent o = {0}, e = {0};
  struct capture_view v;
  for (int i = 0; i < 2000; i++) {
    lines(&c, CAPTURE_STDOUT, &o, "out", i * 10, i * 10 + 10, 300);
    lines(&c, CAPTURE_STDERR, &e, "err", i * 5, i * 5 + 5, 65536);
  }
  CHECK(capture_kept(&c) == 100000);
  CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v) && v.buf.len >= 50000 && v.dropped > 0);
  CHECK(strncmp(v.buf.data, "out 000000 ", 11) == 0 && strstr(v.buf.data + v.gap, "out 019999 ") != NULL);
  strbuf_free(&v.buf);
  CHECK(view_ok(&c, CAPTURE_STDERR, &e, &v) && v.buf.len >= 50000 && v.dropped > 0);
  CHECK(strncmp(v.buf.data, "err 000000 ", 11) == 0 && strstr(v.buf.data + v.gap, "err 009999 ") != NULL);
  strbuf_free(&v.buf);
  capture_free(&c);
  free(o.data);
  free(e.data);
}

/* Two-byte characters, no newline, read 999 bytes at a time: the head ends and the tail starts on
 * character boundaries. */
static void characters_are_never_split(void)
{
  size_t n = 100000;
  char *all = malloc(n);
  CHECK(all != NULL);
  for (size_t i = 0; i < n; i += 2)
    memcpy(all + i, "\xc3\xa9", 2);
  for (size_t limit = 9999; limit <= 10002; limit++) {
    struct capture c = {0};
    capture_init(&c, limit);
    struct sent o = {0};
    struct capture_view v;
    for (size_t off = 0; off < n; off += 999)
      send_to(&c, CAPTURE_STDOUT, &o, all + off, n - off < 999 ? n - off : 999);
    CHECK(capture_kept(&c) == limit);
    CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v));
    CHECK(v.gap % 2 == 0 && (v.buf.len - v.gap) % 2 == 0 && (unsigned char) v.buf.data[v.gap] == 0xc3);
    CHECK(v.buf.len == limit - limit % 2); /* a continuation byte after the gap goes too */
    strbuf_free(&v.buf);
    capture_free(&c);
    free(o.data);
  }
  free(all);
}

static void writes_larger_than_the_bound(void)
{
  struct capture c = {0};
  capture_init(&c, 1000);
  struct sent o = {0}, e = {0};
  struct capture_view v;
  char big[5000];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (char) ('a' + i % 26);
  send_to(&c, CAPTURE_STDOUT, &o, big, sizeof big);
  CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v) && v.gap == 250 && v.buf.len == 1000);
  strbuf_free(&v.buf);
  send_to(&c, CAPTURE_STDERR, &e, big, sizeof big);
  CHECK(capture_kept(&c) == 1000);
  CHECK(view_ok(&c, CAPTURE_STDERR, &e, &v) && v.gap == 250 && v.buf.len == 500);
  strbuf_free(&v.buf);
  CHECK(view_ok(&c, CAPTURE_STDOUT, &o, &v) && v.buf.len == 500);
  strbuf_free(&v.buf);
  capture_free(&c);

  /* A bound of 0 keeps nothing and counts everything. */
  capture_init(&c, 0);
  struct sent z = {0};
  send_to(&c, CAPTURE_STDOUT, &z, big, 10);
  CHECK(view_ok(&c, CAPTURE_STDOUT, &z, &v) && v.buf.len == 0 && v.dropped == 10 && capture_dropped_any(&c));
  strbuf_free(&v.buf);
  capture_free(&c);
  free(o.data);
  free(e.data);
  free(z.data);
}

int main(void)
{
  small_streams_are_kept_whole();
  a_flood_keeps_head_and_end_then_a_traceback_whole();
  interleaved_streams_share_the_bound();
  characters_are_never_split();
  writes_larger_than_the_bound();
  return check_summary("capture");
}
