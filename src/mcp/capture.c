/* SPDX-License-Identifier: Apache-2.0 */
/* Output kept as each stream's head and tail within output_limit (capture.h). */
#include "mcp/capture.h"

#include <stdlib.h>
#include <string.h>

/* The tail is a queue of blocks: dropping its oldest bytes frees whole blocks, so memory follows
 * what is kept (a block or two more per stream), whichever stream takes the room. */
struct capture_block {
  struct capture_block *next;
  size_t len;
  char data[];
};

#define BLOCK_MIN 4096
#define BLOCK_MAX 65536

void capture_init(struct capture *c, size_t limit)
{
  capture_free(c);
  c->limit = limit;
  c->block = limit / 16 < BLOCK_MIN ? BLOCK_MIN : limit / 16 > BLOCK_MAX ? BLOCK_MAX : limit / 16;
}

static void tail_clear(struct capture_stream *s)
{
  while (s->first) {
    struct capture_block *b = s->first;
    s->first = b->next;
    free(b);
  }
  s->last = NULL;
  s->first_off = s->tail_len = 0;
}

void capture_free(struct capture *c)
{
  for (size_t i = 0; i < 2; i++) {
    strbuf_free(&c->s[i].head);
    tail_clear(&c->s[i]);
  }
  *c = (struct capture){0};
}

static size_t stream_kept(const struct capture_stream *s)
{
  return s->head.len + s->tail_len;
}

size_t capture_kept(const struct capture *c)
{
  return stream_kept(&c->s[0]) + stream_kept(&c->s[1]);
}

bool capture_dropped_any(const struct capture *c)
{
  return c->s[0].total > stream_kept(&c->s[0]) || c->s[1].total > stream_kept(&c->s[1]);
}

/* Drop the n oldest bytes of the tail (n <= tail_len). */
static void tail_drop(struct capture_stream *s, size_t n)
{
  s->tail_len -= n;
  while (n) {
    struct capture_block *b = s->first;
    size_t avail = b->len - s->first_off;
    if (n < avail) {
      s->first_off += n;
      return;
    }
    n -= avail;
    s->first = b->next;
    s->first_off = 0;
    free(b);
  }
  if (!s->first)
    s->last = NULL;
}

/* Append to the tail (its room made). Out of memory: the tail restarts empty, after a gap that
 * takes all it held and these bytes, so what it holds still follows on without a hole. */
static void tail_push(struct capture *c, struct capture_stream *s, const char *buf, size_t n)
{
  while (n) {
    if (!s->last || s->last->len == c->block) {
      struct capture_block *b = malloc(sizeof *b + c->block);
      if (!b) {
        tail_clear(s);
        return;
      }
      b->next = NULL;
      b->len = 0;
      if (s->last)
        s->last->next = b;
      else
        s->first = b;
      s->last = b;
    }
    size_t take = c->block - s->last->len < n ? c->block - s->last->len : n;
    memcpy(s->last->data + s->last->len, buf, take);
    s->last->len += take;
    s->tail_len += take;
    buf += take;
    n -= take;
  }
}

/* Room for n more bytes of stream id: from the other stream's tail beyond its half of the bound,
 * then from this stream's own oldest. Returns how many of the n can be kept (their last ones). */
static size_t capture_room(struct capture *c, enum capture_stream_id id, size_t n)
{
  struct capture_stream *s = &c->s[id], *o = &c->s[!id];
  size_t kept = capture_kept(c);
  if (kept <= c->limit && n <= c->limit - kept)
    return n;
  size_t need = kept + n - c->limit, half = c->limit / 2;
  if (stream_kept(o) > half) {
    size_t excess = stream_kept(o) - half;
    size_t take = need < excess ? need : excess;
    take = take < o->tail_len ? take : o->tail_len;
    tail_drop(o, take);
    need -= take;
  }
  size_t take = need < s->tail_len ? need : s->tail_len;
  tail_drop(s, take);
  need -= take;
  return n > need ? n - need : 0;
}

/* Where a full head ends: after the last newline in its last quarter, else before a character
 * the head holds only part of. */
static size_t head_end(const char *s, size_t len)
{
  for (size_t i = len; i > 0 && len - i <= len / 4; i--)
    if (s[i - 1] == '\n')
      return i;
  for (size_t back = 1; back <= 4 && back <= len; back++) {
    unsigned char u = (unsigned char) s[len - back];
    if ((u & 0xc0) == 0x80)
      continue;
    size_t need = u < 0xc0 ? 1 : u < 0xe0 ? 2 : u < 0xf0 ? 3 : 4;
    return need > back ? len - back : len;
  }
  return len;
}

/* The head is full (or cannot grow): the bytes past its end begin the tail. */
static void head_close(struct capture *c, struct capture_stream *s)
{
  s->head_done = true;
  if (!s->head.len)
    return;
  size_t end = head_end(s->head.data, s->head.len);
  tail_push(c, s, s->head.data + end, s->head.len - end);
  s->head.len = end;
  s->head.data[end] = '\0';
}

/* Append to the head, whose memory grows to max bytes and no further. */
static int head_append(strbuf_t *h, size_t max, const char *buf, size_t n)
{
  if (h->len + n + 1 > h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 4096;
    cap = cap < h->len + n + 1 ? h->len + n + 1 : cap > max + 1 ? max + 1 : cap;
    char *p = realloc(h->data, cap);
    if (!p)
      return -1;
    h->data = p;
    h->cap = cap;
  }
  memcpy(h->data + h->len, buf, n);
  h->len += n;
  h->data[h->len] = '\0';
  return 0;
}

void capture_add(struct capture *c, enum capture_stream_id id, const char *buf, size_t n)
{
  struct capture_stream *s = &c->s[id];
  s->total += n;
  size_t head_max = c->limit / 4;
  if (!s->head_done && s->head.len < head_max && n) {
    /* A head never waits for room: with the other stream at more than half, there is always
     * some to take from its tail (the head is at most a quarter). */
    size_t take = head_max - s->head.len < n ? head_max - s->head.len : n;
    take = capture_room(c, id, take);
    if (head_append(&s->head, head_max, buf, take) < 0) {
      head_close(c, s);
      take = 0;
    }
    buf += take;
    n -= take;
  }
  if (!s->head_done && s->head.len >= head_max)
    head_close(c, s);
  if (!n)
    return;
  size_t keep = capture_room(c, id, n);
  tail_push(c, s, buf + (n - keep), keep);
}

int capture_view(const struct capture *c, enum capture_stream_id id, struct capture_view *ret)
{
  const struct capture_stream *s = &c->s[id];
  strbuf_t sb = {0};
  int r = strbuf_append(&sb, s->head.data ? s->head.data : "", s->head.len);
  size_t off = s->first_off;
  for (const struct capture_block *b = s->first; b; b = b->next, off = 0)
    r |= strbuf_append(&sb, b->data + off, b->len - off);
  if (r < 0) {
    strbuf_free(&sb);
    return -1;
  }
  uint64_t dropped = s->total - stream_kept(s);
  if (dropped) {
    /* After the gap, the rest of a character whose start was dropped goes too. */
    size_t skip = 0;
    while (skip < 3 && s->head.len + skip < sb.len &&
           ((unsigned char) sb.data[s->head.len + skip] & 0xc0) == 0x80)
      skip++;
    memmove(sb.data + s->head.len, sb.data + s->head.len + skip, sb.len - s->head.len - skip + 1);
    sb.len -= skip;
    dropped += skip;
  }
  *ret = (struct capture_view){.buf = sb, .gap = dropped ? s->head.len : sb.len, .dropped = dropped};
  return 0;
}
