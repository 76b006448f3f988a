/* SPDX-License-Identifier: Apache-2.0 */
/* Output as a model reads it (the run_python result): first made valid UTF-8, then cut to a budget
 * of characters, keeping the head and the tail with one line between them saying what was cut.
 * Pure functions over memory, unit-tested (tests/unit/test_shape.c). */
#ifndef SBX_SHAPE_H
#define SBX_SHAPE_H

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

/* Append s (valid UTF-8 of `chars` characters) to sb within `budget` characters. If it does not
 * fit: its head and its tail (cut at line ends when one is near), and between them one line
 *   --- N characters of STREAM cut here (text limit L); the whole captured STREAM is in SAVED ---
 * (without SAVED: "; write large results to files in /workspace/out"), counted in the budget.
 * *cut is the number of characters left out (0 when it fit). -1 when out of memory. */
int shape_head_tail(strbuf_t *sb, const char *s, size_t len, size_t chars, size_t budget, const char *stream,
                    size_t text_limit, const char *saved, size_t *cut);

#endif
