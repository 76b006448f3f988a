/* SPDX-License-Identifier: Apache-2.0 */
/* Output as a model reads it (the run_python result): first made valid UTF-8, then cut to a budget
 * of characters, keeping the head and the tail with one line between them saying what was cut
 * there: for the budget, or when the capture dropped bytes there (capture.h). Pure functions over
 * memory, unit-tested (tests/unit/test_shape.c). */
#ifndef SBX_SHAPE_H
#define SBX_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

/* Append s to sb as valid UTF-8: \t \n \r and valid UTF-8 as they are; each run of other control
 * bytes (C0, DEL) or of bytes that are not UTF-8 becomes one U+FFFD, so JSON's escapes (\u00XX,
 * 6 bytes for one) never apply and the result is at most twice the input. *replaced counts the
 * bytes replaced. -1 when out of memory. */
int shape_repair(strbuf_t *sb, const char *s, size_t len, size_t *replaced);

/* Characters (code points) of valid UTF-8. */
size_t shape_chars(const char *s, size_t len);

/* One stream to shape: valid UTF-8 (shape_repair). When its capture dropped bytes (output_limit,
 * capture.h), they were between s[0, gap) and s[gap, len). */
struct shape_stream {
  const char *name; /* "stdout" */
  const char *s;
  size_t len, gap;
  uint64_t dropped;      /* bytes dropped at gap; 0: none, and gap is not used */
  const char *saved;     /* where what was captured of it is, or NULL */
  size_t text_limit;     /* --text-limit, for the cut line */
  uint64_t output_limit; /* output_limit, for the cut line */
};

/* Append the stream to sb within `budget` characters: when it does not fit, its head and its tail
 * (cut at line ends when one is near); when bytes were dropped, the head comes from before the
 * gap and the tail from after it. Between them, where the cut is, one line counted in the budget:
 *   --- N characters of STREAM cut here (text limit L); write large results to files in /workspace/out ---
 *   --- D bytes of STREAM cut here (output_limit 1 MiB); ... ---
 *   --- N characters and D bytes of STREAM cut here (text limit L, output_limit 1 MiB); ... ---
 * (with SAVED: "; the whole captured STREAM is in SAVED", or when bytes were dropped "; the
 * captured head and tail of STREAM are in SAVED"). *cut is the number of characters left out for
 * the budget (0 when it fit). -1 when out of memory. */
int shape_stream(strbuf_t *sb, const struct shape_stream *in, size_t budget, size_t *cut);

/* The characters the stream takes shown whole, with its cut line when bytes were dropped. */
int shape_whole_chars(const struct shape_stream *in, size_t *ret);

/* The cut line alone (on a line of its own: a newline first unless sb ends with one). Without
 * advise, only what was cut (the saved copy of a stream carries this). */
int shape_cut_line(strbuf_t *sb, const struct shape_stream *in, size_t cut, bool advise);

#endif
