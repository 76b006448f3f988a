/* SPDX-License-Identifier: Apache-2.0 */
/* A call's output as sandboxd keeps it: each of stdout and stderr as its head and its tail, both
 * streams within one bound (the policy's output_limit). Pure memory, unit-tested
 * (tests/unit/test_capture.c).
 *
 * How the bound is shared, so that whatever the size the beginning and the end of each stream are
 * kept, and what is dropped is one run of bytes per stream, between its head and its tail:
 * - a stream's first bytes fill its head, up to a quarter of the bound; the head ends at a line
 *   end when one is in its last quarter, else at a character boundary; what follows goes to the
 *   stream's tail;
 * - while both streams together hold less than the bound, every byte is kept;
 * - at the bound, new bytes of a stream take their room from the other stream's tail, as far as
 *   the other holds more than half of the bound, then from the oldest bytes of their own tail.
 * So a stream that stays small leaves the rest of the bound to the other, and each stream keeps at
 * least half of it (or all it wrote). */
#ifndef SBX_CAPTURE_H
#define SBX_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

enum capture_stream_id { CAPTURE_STDOUT, CAPTURE_STDERR };

struct capture_block;

struct capture_stream {
  strbuf_t head;
  bool head_done;                     /* complete: new bytes go to the tail */
  struct capture_block *first, *last; /* the tail, oldest first: a queue of blocks */
  size_t first_off;                   /* bytes of `first` already dropped */
  size_t tail_len;                    /* bytes the tail holds */
  uint64_t total;                     /* every byte the stream carried, kept or not */
};

struct capture {
  size_t limit; /* bytes kept, both streams together */
  size_t block; /* the size of a tail block */
  struct capture_stream s[2];
};

/* A zeroed struct capture is empty (limit 0) and may be freed. */
void capture_init(struct capture *c, size_t limit);
void capture_free(struct capture *c);

/* Take n more bytes of one stream. Never fails: bytes it cannot hold (out of memory, too) are
 * dropped from between the head and the tail, and counted. */
void capture_add(struct capture *c, enum capture_stream_id id, const char *buf, size_t n);

/* Bytes held, both streams. */
size_t capture_kept(const struct capture *c);

/* Whether any byte was dropped. */
bool capture_dropped_any(const struct capture *c);

/* One stream as kept: its head, then its tail (from a character boundary: the bytes of a
 * character whose start was dropped are dropped too). gap is the head's length when bytes were
 * dropped there (dropped of them), else buf.len. */
struct capture_view {
  strbuf_t buf;
  size_t gap;
  uint64_t dropped;
};

/* -1 when out of memory (ret untouched). Free ret->buf. */
int capture_view(const struct capture *c, enum capture_stream_id id, struct capture_view *ret);

#endif
