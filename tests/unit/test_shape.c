/* Unit tests for the result text's shaping (src/mcp/shape.c): repair, then head and tail. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mcp/shape.h"

static size_t count(const char *s, const char *needle)
{
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

int main(void)
{
  strbuf_t sb = {0};
  size_t replaced = 0, cut = 0;

  /* Repair: each run of control or invalid bytes is one U+FFFD; \t \n \r and UTF-8 pass. */
  CHECK(shape_repair(&sb,
                     "a\x01\x02"
                     "b\xff\xfe\tc\n\xc3\xa9",
                     11, &replaced) == 0);
  CHECK(sb.len == strlen("a\xef\xbf\xbd"
                         "b\xef\xbf\xbd\tc\n\xc3\xa9") &&
        memcmp(sb.data,
               "a\xef\xbf\xbd"
               "b\xef\xbf\xbd\tc\n\xc3\xa9",
               sb.len) == 0);
  CHECK(replaced == 4);
  CHECK(shape_chars(sb.data, sb.len) == 8);
  strbuf_free(&sb);

  /* Within the budget: as it is, nothing cut. */
  CHECK(shape_head_tail(&sb, "hello\n", 6, 6, 6, "stdout", 1000, NULL, &cut) == 0);
  CHECK(sb.len == 6 && memcmp(sb.data, "hello\n", 6) == 0 && cut == 0);
  strbuf_free(&sb);

  /* 100,000 lines into 2,000 characters: the head, one marker line, the tail; at most the budget. */
  size_t n = 100000 * 10;
  char *big = malloc(n + 1);
  CHECK(big != NULL);
  for (size_t i = 0; i < 100000; i++)
    memcpy(big + i * 10, i == 0 ? "FIRST0000\n" : i == 99999 ? "LAST99999\n" : "line-----\n", 10);
  big[n] = '\0';
  CHECK(shape_head_tail(&sb, big, n, n, 2000, "stdout", 2000, NULL, &cut) == 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(shape_chars(sb.data, sb.len - 1) <= 2000 && shape_chars(sb.data, sb.len - 1) > 1800);
  CHECK(strncmp(sb.data, "FIRST0000\n", 10) == 0 && strstr(sb.data, "LAST99999\n") != NULL);
  CHECK(count(sb.data, "characters of stdout cut here (text limit 2000)") == 1);
  CHECK(strstr(sb.data, "write large results to files in /workspace/out") != NULL);
  /* Cut at line ends: the marker starts and the tail begins on a line of their own. */
  char *m = strstr(sb.data, "--- ");
  CHECK(m && m[-1] == '\n' && strncmp(strchr(m, '\n') + 1, "line-----\n", 10) == 0);
  /* What is shown plus what is cut is the whole. */
  size_t shown = shape_chars(sb.data, sb.len - 1) - (size_t) (strchr(m, '\n') + 1 - m);
  CHECK(shown + cut == n);
  strbuf_free(&sb);

  /* With the output saved: the marker says where. */
  CHECK(shape_head_tail(&sb, big, n, n, 2000, "stderr", 2000, "/out/r1/stderr.txt", &cut) == 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(strstr(sb.data, "the whole captured stderr is in /out/r1/stderr.txt ---\n") != NULL);
  strbuf_free(&sb);

  /* A path too long for the budget is dropped from the marker, not the output. */
  char longpath[1200];
  memset(longpath, 'p', sizeof longpath - 1);
  longpath[sizeof longpath - 1] = '\0';
  CHECK(shape_head_tail(&sb, big, n, n, 1000, "stdout", 1000, longpath, &cut) == 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(!strstr(sb.data, "ppp") && shape_chars(sb.data, sb.len - 1) <= 1000 && cut > 0);
  strbuf_free(&sb);

  /* Multibyte text is cut on character boundaries and counted in characters. */
  char *wide = malloc(3 * 5000);
  CHECK(wide != NULL);
  for (size_t i = 0; i < 5000; i++)
    memcpy(wide + 3 * i, "\xe2\x82\xac", 3); /* U+20AC, no newlines at all */
  CHECK(shape_head_tail(&sb, wide, 3 * 5000, 5000, 1000, "stdout", 1000, NULL, &cut) == 0);
  CHECK(shape_chars(sb.data, sb.len) <= 1000 && cut > 4000);
  replaced = 0;
  strbuf_t check = {0};
  CHECK(shape_repair(&check, sb.data, sb.len, &replaced) == 0 && replaced == 0);
  strbuf_free(&check);
  strbuf_free(&sb);
  free(wide);
  free(big);
  return check_summary("shape");
}
