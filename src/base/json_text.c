/* SPDX-License-Identifier: Apache-2.0 */
/* Valid JSON text read as written, without a parser or a tree: a member's value found where it
 * stands (json_member_span) and white space dropped in place (json_minify), for payloads that go
 * on as they came (the proxy's large host tool arguments and results). The text was checked
 * first (json.c). */
#include "base/json.h"

#include <stdbool.h>
#include <string.h>

static bool json_space(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_space(const char *b, size_t n, size_t i)
{
  while (i < n && json_space(b[i]))
    i++;
  return i;
}

/* b[i] is a string's opening quote: the index after its closing one (n if there is none). */
static size_t string_end(const char *b, size_t n, size_t i)
{
  for (i++; i < n;) {
    const char *q = memchr(b + i, '"', n - i);
    if (!q)
      return n;
    size_t at = (size_t) (q - b), k = at;
    while (k > i && b[k - 1] == '\\')
      k--;
    if ((at - k) % 2 == 0) /* not escaped: an even run of backslashes before it */
      return at + 1;
    i = at + 1;
  }
  return n;
}

/* The index after the value that starts at b[i]. */
static size_t value_end(const char *b, size_t n, size_t i)
{
  if (i >= n)
    return n;
  if (b[i] == '"')
    return string_end(b, n, i);
  if (b[i] != '{' && b[i] != '[') {
    while (i < n && !json_space(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']')
      i++;
    return i;
  }
  for (size_t depth = 0; i < n;) {
    char c = b[i];
    if (c == '"') {
      i = string_end(b, n, i);
      continue;
    }
    if (c == '{' || c == '[')
      depth++;
    else if ((c == '}' || c == ']') && --depth == 0)
      return i + 1;
    i++;
  }
  return n;
}

int json_member_span(const char *buf, size_t len, const char *key, size_t *ret_off, size_t *ret_len)
{
  size_t klen = strlen(key);
  size_t i = skip_space(buf, len, 0);
  if (i >= len || buf[i] != '{')
    return -1;
  for (i = skip_space(buf, len, i + 1); i < len && buf[i] == '"';) {
    size_t kend = string_end(buf, len, i);
    if (kend >= len || memchr(buf + i + 1, '\\', kend - i - 2))
      return -1;
    bool match = kend - i - 2 == klen && memcmp(buf + i + 1, key, klen) == 0;
    i = skip_space(buf, len, kend);
    if (i >= len || buf[i] != ':')
      return -1;
    i = skip_space(buf, len, i + 1);
    size_t vend = value_end(buf, len, i);
    if (vend == i || vend > len)
      return -1;
    if (match) {
      *ret_off = i;
      *ret_len = vend - i;
      return 0;
    }
    i = skip_space(buf, len, vend);
    if (i >= len || buf[i] != ',')
      return -1;
    i = skip_space(buf, len, i + 1);
  }
  return -1;
}

size_t json_minify(char *buf, size_t len)
{
  size_t w = 0;
  for (size_t r = 0; r < len;) {
    if (buf[r] == '"') {
      size_t end = string_end(buf, len, r);
      if (w != r)
        memmove(buf + w, buf + r, end - r);
      w += end - r;
      r = end;
    } else if (json_space(buf[r]))
      r++;
    else
      buf[w++] = buf[r++];
  }
  return w;
}
