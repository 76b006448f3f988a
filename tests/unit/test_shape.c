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

/* shape_stream on a stream with nothing dropped, as the tests before the gap were written. */
static int head_tail(strbuf_t *sb, const char *s, size_t len, size_t budget, const char *stream,
                     size_t text_limit, const char *saved, size_t *cut)
{
  struct shape_stream in = {.name = stream,
                            .s = s,
                            .len = len,
                            .gap = len,
                            .saved = saved,
                            .text_limit = text_limit,
                            .output_limit = 1 << 20};
  return shape_stream(sb, &in, budget, cut);
}

/* Bytes dropped at capture between a head and a tail (capture.h): the cut line stands there. */
static void dropped_at_capture(const char *big, size_t n)
{
  strbuf_t sb = {0};
  size_t cut = 0, whole = 0;
  /* The capture kept lines 0-99 and 99900-99999 of 100,000 (10 bytes each). */
  char kept[2000];
  memcpy(kept, big, 1000);
  memcpy(kept + 1000, big + n - 1000, 1000);
  struct shape_stream in = {.name = "stdout",
                            .s = kept,
                            .len = 2000,
                            .gap = 1000,
                            .dropped = n - 2000,
                            .text_limit = 40000,
                            .output_limit = 1 << 20};
  const char *line = "--- 998000 bytes of stdout cut here (output_limit 1 MiB); write large results to files "
                     "in /workspace/out ---\n";
  /* It fits: all that was kept, the line where the gap is. */
  CHECK(shape_whole_chars(&in, &whole) == 0 && whole == 2000 + strlen(line));
  CHECK(shape_stream(&sb, &in, whole, &cut) == 0 && cut == 0 && sb.len == whole);
  CHECK(memcmp(sb.data, kept, 1000) == 0 && memcmp(sb.data + 1000, line, strlen(line)) == 0 &&
        memcmp(sb.data + 1000 + strlen(line), kept + 1000, 1000) == 0);
  strbuf_free(&sb);

  /* It does not: the head from before the gap, the tail from after it, one line with both counts,
   * whole lines either side. */
  CHECK(shape_stream(&sb, &in, 1000, &cut) == 0 && cut > 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(shape_chars(sb.data, sb.len - 1) <= 1000);
  char *m = strstr(sb.data, "--- ");
  CHECK(m && m > sb.data && m[-1] == '\n' && strncmp(sb.data, "FIRST0000\n", 10) == 0);
  char want[200];
  snprintf(want, sizeof want,
           "--- %zu characters and 998000 bytes of stdout cut here (text limit 40000, "
           "output_limit 1 MiB); write large results to files in /workspace/out ---\n",
           cut);
  CHECK(m && strncmp(m, want, strlen(want)) == 0);
  char *tail = m ? m + strlen(want) : NULL;
  CHECK(tail && strncmp(tail, "line-----\n", 10) == 0 && strstr(tail, "LAST99999\n") != NULL);
  CHECK(tail && (size_t) (m - sb.data) + cut + strlen(tail) == 2000);
  strbuf_free(&sb);

  /* A head shorter than its half leaves the rest to the tail. */
  in.gap = 10;
  in.s = kept + 990;
  in.len = 1010;
  CHECK(shape_stream(&sb, &in, 600, &cut) == 0 && cut > 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(strncmp(sb.data, "line-----\n--- ", 14) == 0 && shape_chars(sb.data, sb.len - 1) > 500);
  strbuf_free(&sb);

  /* Saved: the line says where what was kept is; the saved copy's own line gives no advice. */
  in.saved = "/out/r2/stdout.txt";
  CHECK(shape_stream(&sb, &in, 600, &cut) == 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(strstr(sb.data, "; the captured head and tail of stdout are in /out/r2/stdout.txt ---\n") != NULL);
  strbuf_free(&sb);
  CHECK(strbuf_append(&sb, "abc", 3) == 0 && shape_cut_line(&sb, &in, 0, false) == 0 &&
        strbuf_append(&sb, "", 1) == 0);
  CHECK(strcmp(sb.data, "abc\n--- 998000 bytes of stdout cut here (output_limit 1 MiB) ---\n") == 0);
  strbuf_free(&sb);
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
  CHECK(head_tail(&sb, "hello\n", 6, 6, "stdout", 1000, NULL, &cut) == 0);
  CHECK(sb.len == 6 && memcmp(sb.data, "hello\n", 6) == 0 && cut == 0);
  strbuf_free(&sb);

  /* 100,000 lines into 2,000 characters: the head, one marker line, the tail; at most the budget. */
  size_t n = 100000 * 10;
  char *big = malloc(n + 1);
  CHECK(big != NULL);
  for (size_t i = 0; i < 100000; i++)
    memcpy(big + i * 10, i == 0 ? "FIRST0000\n" : i == 99999 ? "LAST99999\n" : "line-----\n", 10);
  big[n] = '\0';
  CHECK(head_tail(&sb, big, n, 2000, "stdout", 2000, NULL, &cut) == 0);
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
  CHECK(head_tail(&sb, big, n, 2000, "stderr", 2000, "/out/r1/stderr.txt", &cut) == 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(strstr(sb.data, "the whole captured stderr is in /out/r1/stderr.txt ---\n") != NULL);
  strbuf_free(&sb);

  /* A path too long for the budget is dropped from the marker, not the output. */
  char longpath[1200];
  memset(longpath, 'p', sizeof longpath - 1);
  longpath[sizeof longpath - 1] = '\0';
  CHECK(head_tail(&sb, big, n, 1000, "stdout", 1000, longpath, &cut) == 0);
  CHECK(strbuf_append(&sb, "", 1) == 0);
  CHECK(!strstr(sb.data, "ppp") && shape_chars(sb.data, sb.len - 1) <= 1000 && cut > 0);
  strbuf_free(&sb);

  /* Multibyte text is cut on character boundaries and counted in characters. */
  char *wide = malloc(3 * 5000);
  CHECK(wide != NULL);
  for (size_t i = 0; i < 5000; i++)
    memcpy(wide + 3 * i, "\xe2\x82\xac", 3); /* U+20AC, no newlines at all */
  CHECK(head_tail(&sb, wide, 3 * 5000, 1000, "stdout", 1000, NULL, &cut) == 0);
  CHECK(shape_chars(sb.data, sb.len) <= 1000 && cut > 4000);
  replaced = 0;
  strbuf_t check = {0};
  CHECK(shape_repair(&check, sb.data, sb.len, &replaced) == 0 && replaced == 0);
  strbuf_free(&check);
  strbuf_free(&sb);
  free(wide);
  dropped_at_capture(big, n);
  free(big);
  return check_summary("shape");
}
