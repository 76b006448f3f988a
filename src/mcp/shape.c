/* SPDX-License-Identifier: Apache-2.0 */
/* The run_python result's text: valid UTF-8, cut to the model's budget (shape.h). */
#include "mcp/shape.h"

#include <stdbool.h>
#include <string.h>

#include "base/json.h"

static bool shown_as_is(const unsigned char *u, size_t l)
{
  return l && !(l == 1 && (u[0] < 0x20 || u[0] == 0x7f) && u[0] != '\t' && u[0] != '\n' && u[0] != '\r');
}

int shape_repair(strbuf_t *sb, const char *s, size_t len, size_t *replaced)
{
  const unsigned char *u = (const unsigned char *) s;
  size_t i = 0, start = 0;
  int r = 0;
  while (i < len) {
    if (shown_as_is(u + i, json_utf8_len(u + i, len - i))) {
      i += json_utf8_len(u + i, len - i);
      continue;
    }
    r |= strbuf_append(sb, s + start, i - start);
    size_t run = i;
    while (i < len && !shown_as_is(u + i, json_utf8_len(u + i, len - i)))
      i++;
    *replaced += i - run;
    r |= strbuf_append(sb, "\xef\xbf\xbd", 3);
    start = i;
  }
  r |= strbuf_append(sb, s + start, len - start);
  return r;
}

size_t shape_chars(const char *s, size_t len)
{
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += ((unsigned char) s[i] & 0xc0) != 0x80;
  return n;
}

/* The byte offset after the first `chars` characters of s. */
static size_t offset_of(const char *s, size_t len, size_t chars)
{
  size_t i = 0;
  for (; i < len; i++)
    if (((unsigned char) s[i] & 0xc0) != 0x80 && chars-- == 0)
      break;
  return i;
}

static int marker(strbuf_t *sb, size_t cut, const char *stream, size_t text_limit, const char *saved)
{
  int r = 0;
  if (sb->len && sb->data[sb->len - 1] != '\n')
    r |= strbuf_append(sb, "\n", 1);
  r |= strbuf_printf(sb, "--- %zu characters of %s cut here (text limit %zu); ", cut, stream, text_limit);
  if (saved)
    r |= strbuf_printf(sb, "the whole captured %s is in %s ---\n", stream, saved);
  else
    r |= strbuf_printf(sb, "write large results to files in /workspace/out ---\n");
  return r;
}

int shape_head_tail(strbuf_t *sb, const char *s, size_t len, size_t chars, size_t budget, const char *stream,
                    size_t text_limit, const char *saved, size_t *cut)
{
  *cut = 0;
  if (chars <= budget)
    return strbuf_append(sb, s, len);

  /* The marker's size with the largest count it can show: what is left is for the text. */
  strbuf_t m = {0};
  if (strbuf_append(&m, "x", 1) < 0 || marker(&m, chars, stream, text_limit, saved) < 0)
    return strbuf_free(&m), -1;
  size_t reserve = shape_chars(m.data, m.len);
  if (saved && reserve > budget / 2) { /* a long path: say less rather than show nothing */
    saved = NULL;
    m.len = 1;
    if (marker(&m, chars, stream, text_limit, NULL) < 0)
      return strbuf_free(&m), -1;
    reserve = shape_chars(m.data, m.len);
  }
  strbuf_free(&m);
  size_t keep = budget > reserve ? budget - reserve : 0;
  size_t head_chars = keep / 2, tail_chars = keep - head_chars;

  size_t head = offset_of(s, len, head_chars);
  size_t tail = offset_of(s, len, chars - tail_chars);
  /* End the head after a newline, and start the tail after one, when one is in the last (first)
   * quarter: whole lines read better and cost at most a quarter of the budget. */
  for (size_t i = head; i > 0 && head - i < head / 4 + 1; i--)
    if (s[i - 1] == '\n') {
      head = i;
      break;
    }
  for (size_t i = tail; i < len && i - tail < (len - tail) / 4 + 1; i++)
    if (s[i] == '\n') {
      tail = i + 1;
      break;
    }
  *cut = chars - shape_chars(s, head) - shape_chars(s + tail, len - tail);
  int r = strbuf_append(sb, s, head);
  r |= marker(sb, *cut, stream, text_limit, saved);
  r |= strbuf_append(sb, s + tail, len - tail);
  return r;
}
