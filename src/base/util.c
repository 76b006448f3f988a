/* SPDX-License-Identifier: Apache-2.0 */
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"

int parse_u64(const char *s, uint64_t *ret)
{
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
    return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end)
    return -1;
  *ret = v;
  return 0;
}

/* Parse "D[.DDD]" into value * scale, where scale is a power of ten up to 1000. */
static int parse_decimal(const char *s, uint64_t scale, const char **ret_end, uint64_t *ret)
{
  const char *p = s;
  uint64_t whole = 0, frac = 0, frac_scale = scale;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (whole > (UINT64_MAX - 9) / 10)
      return -1;
    whole = whole * 10 + (uint64_t) (*p - '0');
  }
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9')
      return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
      if (frac_scale >= 10) {
        frac_scale /= 10;
        frac += (uint64_t) (*p - '0') * frac_scale;
      }
    }
  }
  if (whole > UINT64_MAX / scale)
    return -1;
  *ret = whole * scale + frac;
  *ret_end = p;
  return 0;
}

int parse_size(const char *s, uint64_t *ret_bytes)
{
  static const struct {
    const char *suffix;
    uint64_t mult;
  } units[] = {
      {"", 1},
      {"B", 1},
      {"K", 1ULL << 10},
      {"KiB", 1ULL << 10},
      {"k", 1ULL << 10},
      {"M", 1ULL << 20},
      {"MiB", 1ULL << 20},
      {"G", 1ULL << 30},
      {"GiB", 1ULL << 30},
      {"T", 1ULL << 40},
      {"TiB", 1ULL << 40},
  };
  const char *end;
  uint64_t milli;
  if (!s || parse_decimal(s, 1000, &end, &milli) < 0)
    return -1;
  for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
    if (strcmp(end, units[i].suffix) != 0)
      continue;
    uint64_t mult = units[i].mult;
    if (milli / 1000 > UINT64_MAX / mult)
      return -1;
    *ret_bytes = (milli / 1000) * mult + (milli % 1000) * mult / 1000;
    return 0;
  }
  return -1;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
  const char *end;
  uint64_t v;
  if (!s)
    return -1;
  size_t n = strlen(s);
  if (n > 2 && strcmp(s + n - 2, "ms") == 0) {
    if (parse_decimal(s, 1, &end, &v) < 0 || strcmp(end, "ms") != 0)
      return -1;
    *ret_ms = v;
    return 0;
  }
  if (parse_decimal(s, 1000, &end, &v) < 0)
    return -1;
  if (*end && strcmp(end, "s") != 0)
    return -1;
  *ret_ms = v;
  return 0;
}

int parse_milli(const char *s, uint64_t *ret_milli)
{
  const char *end;
  if (!s || parse_decimal(s, 1000, &end, ret_milli) < 0 || *end)
    return -1;
  return 0;
}

const char *format_size(uint64_t bytes, char *buf, size_t len)
{
  static const char *names[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  size_t i = 0;
  uint64_t v = bytes;
  while (i + 1 < ARRAY_SIZE(names) && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    i++;
  }
  bufprintf_cut(buf, len, "%llu %s", (unsigned long long) v, names[i]);
  return buf;
}

/* Format at buf + off (off < size). On failure buf is cut back to its first off bytes. */
static int vbufprintf_at(char *buf, size_t size, size_t off, sbx_error_t *err, const char *fmt, va_list ap)
{
  int n = vsnprintf(buf + off, size - off, fmt, ap);
  if (n >= 0 && (size_t) n < size - off)
    return 0;
  int errnum = n < 0 ? EILSEQ : ENAMETOOLONG;
  if (err && n < 0)
    sbx_error_set(err, errnum, "format `%.80s`", fmt);
  else if (err) /* what fit names what was being built */
    sbx_error_set(err, errnum, "`%.80s...` is longer than %zu bytes", buf, size - 1);
  buf[off] = '\0';
  errno = errnum;
  return -1;
}

int bufprintf(char *buf, size_t size, sbx_error_t *err, const char *fmt, ...)
{
  if (!size) {
    sbx_error_set(err, ENAMETOOLONG, "no room to format `%.80s`", fmt);
    errno = ENAMETOOLONG;
    return -1;
  }
  va_list ap;
  va_start(ap, fmt);
  int r = vbufprintf_at(buf, size, 0, err, fmt, ap);
  va_end(ap);
  return r;
}

int bufcatf(char *buf, size_t size, sbx_error_t *err, const char *fmt, ...)
{
  size_t off = strnlen(buf, size);
  if (off == size) { /* not a string */
    sbx_error_set(err, EINVAL, "append to an unterminated buffer");
    errno = EINVAL;
    return -1;
  }
  va_list ap;
  va_start(ap, fmt);
  int r = vbufprintf_at(buf, size, off, err, fmt, ap);
  va_end(ap);
  return r;
}

int strbuf_append(strbuf_t *sb, const char *s, size_t n)
{
  if (sb->len + n + 1 > sb->cap) {
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + n + 1)
      cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p)
      return -1;
    sb->data = p;
    sb->cap = cap;
  }
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
  return 0;
}

int strbuf_printf(strbuf_t *sb, const char *fmt, ...)
{
  /* Format straight into the spare room; only a line that does not fit is formatted twice. */
  for (int pass = 0; pass < 2; pass++) {
    size_t room = sb->cap > sb->len ? sb->cap - sb->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? sb->data + sb->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0)
      return -1;
    if ((size_t) n < room) {
      sb->len += (size_t) n;
      return 0;
    }
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + (size_t) n + 1)
      cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p)
      return -1;
    sb->data = p;
    sb->cap = cap;
  }
  return -1;
}

void strbuf_free(strbuf_t *sb)
{
  free(sb->data);
  sb->data = NULL;
  sb->len = sb->cap = 0;
}

char *base64_encode(const void *data, size_t len, size_t *ret_len)
{
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *in = data;
  if (len > (SIZE_MAX - 1) / 4 * 3 - 2)
    return NULL;
  size_t n = (len + 2) / 3 * 4;
  char *out = malloc(n + 1), *o = out;
  if (!out)
    return NULL;
  size_t i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
    *o++ = abc[v >> 18];
    *o++ = abc[(v >> 12) & 63];
    *o++ = abc[(v >> 6) & 63];
    *o++ = abc[v & 63];
  }
  if (i < len) {
    uint32_t v = (uint32_t) in[i] << 16 | (i + 1 < len ? (uint32_t) in[i + 1] << 8 : 0);
    *o++ = abc[v >> 18];
    *o++ = abc[(v >> 12) & 63];
    *o++ = i + 1 < len ? abc[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  *o = '\0';
  *ret_len = n;
  return out;
}

static int base64_value(char c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

char *base64_decode(const char *text, size_t len, size_t *ret_len)
{
  if (len % 4 == 0 && len >= 2 && text[len - 1] == '=')
    len -= text[len - 2] == '=' ? 2 : 1;
  if (len % 4 == 1) {
    errno = EINVAL;
    return NULL;
  }
  char *out = malloc(len / 4 * 3 + 3), *o = out;
  if (!out)
    return NULL;
  uint32_t acc = 0;
  size_t bits = 0;
  for (size_t i = 0; i < len; i++) {
    int v = base64_value(text[i]);
    if (v < 0) {
      free(out);
      errno = EINVAL;
      return NULL;
    }
    acc = acc << 6 | (uint32_t) v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *o++ = (char) (acc >> bits & 0xff);
    }
  }
  /* The bits left over must be zero (RFC 4648 section 3.5: canonical encodings only). */
  if (acc & ((1u << bits) - 1)) {
    free(out);
    errno = EINVAL;
    return NULL;
  }
  *o = '\0';
  *ret_len = (size_t) (o - out);
  return out;
}

int read_file(const char *path, size_t max, char **ret_data, size_t *ret_len, sbx_error_t *err)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "open `%s`", path);
  strbuf_t sb = {0};
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      strbuf_free(&sb);
      return sbx_error_errno(err, "read `%s`", path);
    }
    if (n == 0)
      break;
    if (sb.len + (size_t) n > max) {
      strbuf_free(&sb);
      return sbx_error_set(err, EFBIG, "read `%s`: larger than %zu bytes", path, max);
    }
    if (strbuf_append(&sb, buf, (size_t) n) < 0) {
      strbuf_free(&sb);
      return sbx_error_set(err, ENOMEM, "read `%s`", path);
    }
  }
  if (!sb.data && strbuf_append(&sb, "", 0) < 0)
    return sbx_error_set(err, ENOMEM, "read `%s`", path);
  *ret_data = sb.data;
  if (ret_len)
    *ret_len = sb.len;
  return 0;
}

int write_file(const char *path, const char *data, sbx_error_t *err)
{
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "open `%s`", path);
  size_t len = strlen(data);
  ssize_t n = write(fd, data, len);
  if (n < 0)
    return sbx_error_errno(err, "write `%s`", path);
  if ((size_t) n != len)
    return sbx_error_set(err, EIO, "write `%s`: short write", path);
  return 0;
}

void utc_time(int64_t t, int *year, int *month, int *day, int *hour, int *min, int *sec)
{
  int64_t days = t / 86400, rem = t % 86400;
  *hour = (int) (rem / 3600);
  *min = (int) (rem % 3600 / 60);
  *sec = (int) (rem % 60);
  /* Howard Hinnant's civil_from_days: 400-year eras of 146097 days, years starting in March so
   * the leap day is the last of one. */
  days += 719468;
  int64_t era = days / 146097, doe = days % 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
  *day = (int) (doy - (153 * mp + 2) / 5 + 1);
  *month = (int) (mp < 10 ? mp + 3 : mp - 9);
  *year = (int) (yoe + era * 400 + (*month <= 2));
}

int open_pipe(int *ret_read, int *ret_write, sbx_error_t *err)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return sbx_error_errno(err, "pipe");
  if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return sbx_error_set(err, e, "pipe");
  }
  *ret_read = p[0];
  *ret_write = p[1];
  return 0;
}

uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

int ms_until(uint64_t when, uint64_t now)
{
  if (when <= now)
    return 0;
  uint64_t ms = (when - now + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int) ms;
}
