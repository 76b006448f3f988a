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

int shape_cut_line(strbuf_t *sb, const struct shape_stream *in, size_t cut, bool advise)
{
  int r = 0;
  char size[32];
  if (sb->len && sb->data[sb->len - 1] != '\n')
    r |= strbuf_append(sb, "\n", 1);
  r |= strbuf_printf(sb, "--- ");
  if (cut)
    r |= strbuf_printf(sb, "%zu characters%s", cut, in->dropped ? " and " : "");
  if (in->dropped)
    r |= strbuf_printf(sb, "%llu bytes", (unsigned long long) in->dropped);
  r |= strbuf_printf(sb, " of %s cut here (", in->name);
  if (cut)
    r |= strbuf_printf(sb, "text limit %zu%s", in->text_limit, in->dropped ? ", " : "");
  if (in->dropped)
    r |= strbuf_printf(sb, "output_limit %s", format_size(in->output_limit, size, sizeof size));
  r |= strbuf_printf(sb, ")");
  if (advise && in->saved && in->dropped)
    r |= strbuf_printf(sb, "; the captured head and tail of %s are in %s", in->name, in->saved);
  else if (advise && in->saved)
    r |= strbuf_printf(sb, "; the whole captured %s is in %s", in->name, in->saved);
  else if (advise)
    r |= strbuf_printf(sb, "; write large results to files in /workspace/out");
  r |= strbuf_printf(sb, " ---\n");
  return r;
}

/* The characters of the cut line saying `cut` characters, and the newline before it when what
 * precedes it (after) does not end with one. */
static int cut_line_chars(const struct shape_stream *in, size_t cut, const char *after, size_t after_len,
                          size_t *ret)
{
  strbuf_t m = {0};
  if (shape_cut_line(&m, in, cut, true) < 0)
    return strbuf_free(&m), -1;
  *ret = shape_chars(m.data, m.len) + (after_len && after[after_len - 1] != '\n');
  strbuf_free(&m);
  return 0;
}

int shape_whole_chars(const struct shape_stream *in, size_t *ret)
{
  size_t line = 0;
  if (in->dropped && cut_line_chars(in, 0, in->s, in->gap, &line) < 0)
    return -1;
  *ret = shape_chars(in->s, in->len) + line;
  return 0;
}

/* The head ends after a newline, and the tail starts after one, when one is in the last (first)
 * quarter of what is shown of them: whole lines read better and cost at most a quarter. */
static size_t snap_head(const char *s, size_t head)
{
  for (size_t i = head; i > 0 && head - i < head / 4 + 1; i--)
    if (s[i - 1] == '\n')
      return i;
  return head;
}

static size_t snap_tail(const char *s, size_t len, size_t tail)
{
  for (size_t i = tail; i < len && i - tail < (len - tail) / 4 + 1; i++)
    if (s[i] == '\n')
      return i + 1;
  return tail;
}

int shape_stream(strbuf_t *sb, const struct shape_stream *stream, size_t budget, size_t *cut)
{
  struct shape_stream in = *stream;
  const char *s = in.s;
  size_t gap = in.dropped ? in.gap : in.len;
  size_t hchars = shape_chars(s, gap), tchars = shape_chars(s + gap, in.len - gap);
  size_t chars = hchars + tchars, whole = 0, reserve;
  *cut = 0;
  if (in.dropped && cut_line_chars(&in, 0, s, gap, &whole) < 0)
    return -1;
  if (chars + whole <= budget) {
    int r = strbuf_append(sb, s, gap);
    if (in.dropped)
      r |= shape_cut_line(sb, &in, 0, true);
    return r | strbuf_append(sb, s + gap, in.len - gap);
  }

  /* The cut line's size with the largest count it can show (and a newline before it): what is
   * left is for the text. */
  if (cut_line_chars(&in, chars, "x", 1, &reserve) < 0)
    return -1;
  if (in.saved && reserve > budget / 2) { /* a long path: say less rather than show nothing */
    in.saved = NULL;
    if (cut_line_chars(&in, chars, "x", 1, &reserve) < 0)
      return -1;
  }
  size_t keep = budget > reserve ? budget - reserve : 0;
  /* The head is taken from s[0, gap) and the tail from s[gap, len), the one that needs less
   * leaving the rest to the other; without a gap, both from the whole. */
  size_t tstart = in.dropped ? gap : 0, hc = in.dropped ? hchars : chars, tc = in.dropped ? tchars : chars;
  size_t hk = keep / 2 < hc ? keep / 2 : hc;
  size_t tk = keep - hk < tc ? keep - hk : tc;
  hk = keep - tk < hc ? keep - tk : hc;
  size_t head = offset_of(s, gap, hk), tail = tstart + offset_of(s + tstart, in.len - tstart, tc - tk);
  if (hk < hc)
    head = snap_head(s, head);
  if (tk < tc)
    tail = snap_tail(s, in.len, tail);
  *cut = chars - shape_chars(s, head) - shape_chars(s + tail, in.len - tail);
  int r = strbuf_append(sb, s, head);
  r |= shape_cut_line(sb, &in, *cut, true);
  r |= strbuf_append(sb, s + tail, in.len - tail);
  return r;
}
