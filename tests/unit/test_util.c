/* Unit tests for the checked bounded string builds (src/base/util.c bufprintf, bufcatf, bufprintf_cut). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "check.h"

int main(void)
{
  sbx_error_t err = {0};
  char b[8];

  /* Exactly size - 1 bytes fit; one more is an error, and the buffer holds "" (no cut-off path). */
  CHECK(bufprintf(b, sizeof b, &err, "%s/%s", "abc", "def") == 0 && strcmp(b, "abc/def") == 0);
  errno = 0;
  CHECK(bufprintf(b, sizeof b, &err, "%s/%s", "abc", "defg") < 0 && errno == ENAMETOOLONG && b[0] == '\0');
  CHECK(err.errnum == ENAMETOOLONG && strstr(err.msg, "`abc/def...` is longer than 7 bytes") &&
        !strchr(err.msg, '\n'));
  /* err may be NULL; errno still says why. */
  errno = 0;
  CHECK(bufprintf(b, sizeof b, NULL, "%d", 123456789) < 0 && errno == ENAMETOOLONG && b[0] == '\0');
  CHECK(bufprintf(b, 0, &err, "x") < 0 && err.errnum == ENAMETOOLONG);
  CHECK(bufprintf(b, 1, &err, "%s", "") == 0 && b[0] == '\0');

  /* Appending: the offset never runs past the end, whatever was appended before. */
  CHECK(bufprintf(b, sizeof b, &err, "a") == 0);
  CHECK(bufcatf(b, sizeof b, &err, ",%s", "bc") == 0 && strcmp(b, "a,bc") == 0);
  CHECK(bufcatf(b, sizeof b, &err, ",%s", "de") == 0 && strcmp(b, "a,bc,de") == 0);
  CHECK(bufcatf(b, sizeof b, &err, "%s", "") == 0 && strcmp(b, "a,bc,de") == 0);
  /* Full: a failed append leaves what was there, and so does every later one. */
  CHECK(bufcatf(b, sizeof b, &err, ",%s", "f") < 0 && strcmp(b, "a,bc,de") == 0 &&
        err.errnum == ENAMETOOLONG);
  CHECK(bufcatf(b, sizeof b, &err, "x") < 0 && strcmp(b, "a,bc,de") == 0);
  memset(b, 'z', sizeof b); /* not a string: refused, not read past */
  CHECK(bufcatf(b, sizeof b, &err, "x") < 0 && err.errnum == EINVAL && b[sizeof b - 1] == 'z');

  /* The 64 x 64-character server list that overflowed a fixed 4096-byte buffer. */
  char big[4096], name[65];
  memset(name, 'n', 64);
  name[64] = '\0';
  int r = bufprintf(big, sizeof big, &err, "SANDBOXD_MCP_SERVERS=");
  int i = 0;
  for (; r == 0 && i < 64; i++)
    r = bufcatf(big, sizeof big, &err, "%s%s", i ? "," : "", name);
  CHECK(r < 0 && i == 63 && strlen(big) < sizeof big && err.errnum == ENAMETOOLONG);

  /* Messages: cut, and the cut shows. */
  bufprintf_cut(b, sizeof b, "%s", "abcdefghij");
  CHECK(strcmp(b, "abcd...") == 0);
  bufprintf_cut(b, sizeof b, "%s", "abc");
  CHECK(strcmp(b, "abc") == 0);
  bufprintf_cut(b, 3, "%s", "abcdef");
  CHECK(strcmp(b, "ab") == 0);

  /* base64: RFC 4648's test vectors, every padding case. */
  static const char *const b64[][2] = {{"", ""},
                                       {"f", "Zg=="},
                                       {"fo", "Zm8="},
                                       {"foo", "Zm9v"},
                                       {"foob", "Zm9vYg=="},
                                       {"fooba", "Zm9vYmE="},
                                       {"foobar", "Zm9vYmFy"}};
  for (size_t k = 0; k < sizeof b64 / sizeof *b64; k++) {
    size_t n = 99;
    char *e = base64_encode(b64[k][0], strlen(b64[k][0]), &n);
    CHECK(e && n == strlen(b64[k][1]) && strcmp(e, b64[k][1]) == 0);
    free(e);
    /* And back, with and without the padding. */
    char *d = base64_decode(b64[k][1], strlen(b64[k][1]), &n);
    CHECK(d && n == strlen(b64[k][0]) && strcmp(d, b64[k][0]) == 0);
    free(d);
    size_t bare = strcspn(b64[k][1], "=");
    d = base64_decode(b64[k][1], bare, &n);
    CHECK(d && n == strlen(b64[k][0]) && memcmp(d, b64[k][0], n) == 0);
    free(d);
  }
  /* Refused: a character outside the alphabet, a length no encoding has, stray bits, stray '='. */
  static const char *const bad_b64[] = {"Zm9v!", "Z", "Zm9vY", "Zh==", "Zm=v", "=", "Zg=a"};
  for (size_t k = 0; k < sizeof bad_b64 / sizeof *bad_b64; k++) {
    size_t n;
    errno = 0;
    CHECK(!base64_decode(bad_b64[k], strlen(bad_b64[k]), &n) && errno == EINVAL);
  }
  /* Every byte value, high bits included. */
  unsigned char bin[3] = {0xff, 0x00, 0xfe};
  size_t bn;
  char *be = base64_encode(bin, 3, &bn);
  CHECK(be && strcmp(be, "/wD+") == 0);
  free(be);

  /* utc_time: as gmtime_r, over the epoch, leap days (2000 is one, 2100 is not), the ends of
   * years and months, and a spread of times up to 2400. */
  static const int64_t times[] = {0,          59,          86399,      86400,      951782399,
                                  951782400,  951868800,   1796455034, 4107456000, 4107542399,
                                  4107542400, 13569465599, 13569465600};
  bool same = true;
  for (size_t k = 0; k < sizeof times / sizeof *times + 20000 && same; k++) {
    int64_t t = k < sizeof times / sizeof *times ? times[k] : (int64_t) (k * 681234567ULL % 13569465600ULL);
    time_t tt = (time_t) t;
    struct tm tm;
    int y, mo, d, h, mi, sec;
    utc_time(t, &y, &mo, &d, &h, &mi, &sec);
    gmtime_r(&tt, &tm);
    if (y != tm.tm_year + 1900 || mo != tm.tm_mon + 1 || d != tm.tm_mday || h != tm.tm_hour ||
        mi != tm.tm_min || sec != tm.tm_sec) {
      fprintf(stderr, "utc_time(%lld): %04d-%02d-%02d %02d:%02d:%02d\n", (long long) t, y, mo, d, h, mi, sec);
      same = false;
    }
  }
  CHECK(same);
  return check_summary("test_util");
}
