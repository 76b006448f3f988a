/* SPDX-License-Identifier: Apache-2.0 */
/* Small pure helpers: parsing numbers and sizes, growable buffers, hashing. */
#ifndef SBX_UTIL_H
#define SBX_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/sha256.h" /* sha256_hex and the rest, for the callers that hash */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* "512M", "64MiB", "1G", "4096" -> bytes. Binary units. Rejects overflow and junk. */
int parse_size(const char *s, uint64_t *ret_bytes);
/* "30", "30s", "1.5", "500ms" -> milliseconds. */
int parse_duration_ms(const char *s, uint64_t *ret_ms);
/* Decimal or 0x-prefixed unsigned integer, whole string. */
int parse_u64(const char *s, uint64_t *ret);
/* Non-negative decimal like "0.5" or "2" -> thousandths. */
int parse_milli(const char *s, uint64_t *ret_milli);
/* "512 MiB" style rendering into buf. */
const char *format_size(uint64_t bytes, char *buf, size_t len);

/* Bounded string builds into fixed buffers, all checked: every snprintf into a fixed buffer goes
 * through these, so a truncation is an error (or, for messages, a visible cut), never silent.
 *
 * bufprintf: 0 if the whole result fits in size bytes. Else -1 with errno ENAMETOOLONG, buf holds ""
 * (never a cut-off path) and err, unless NULL, says "`<start>...` is longer than N bytes".
 * bufcatf: the same, appending at strlen(buf); on failure buf is left as it was.
 * bufprintf_cut (error.h, which formats every message with it): for messages only: a result that
 * does not fit is cut and ends in "...". */
int bufprintf(char *buf, size_t size, sbx_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), warn_unused_result)) SBX_BUF_ACCESS(write_only, 1, 2);
int bufcatf(char *buf, size_t size, sbx_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), warn_unused_result)) SBX_BUF_ACCESS(read_write, 1, 2);

/* A growable byte buffer, always NUL-terminated. */
typedef struct strbuf {
  char *data;
  size_t len, cap;
} strbuf_t;

int strbuf_append(strbuf_t *sb, const char *s, size_t n);
int strbuf_printf(strbuf_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_free(strbuf_t *sb);

/* data in base64 (RFC 4648, padded), NUL-terminated, malloc'd; *ret_len its length. NULL: out
 * of memory. */
char *base64_encode(const void *data, size_t len, size_t *ret_len);
/* base64 text (RFC 4648, the standard alphabet; padding optional) decoded, NUL-terminated,
 * malloc'd; *ret_len its length. NULL with errno EINVAL for a character outside the alphabet or a
 * bad length or padding, ENOMEM when out of memory. */
char *base64_decode(const char *text, size_t len, size_t *ret_len);

/* Read a whole (small) file, NUL-terminated. Fails above max bytes. */
int read_file(const char *path, size_t max, char **ret_data, size_t *ret_len, sbx_error_t *err);
/* Write a whole string to an existing file (for /proc files). */
int write_file(const char *path, const char *data, sbx_error_t *err);

/* A pipe (O_CLOEXEC) whose read end does not block. */
int open_pipe(int *ret_read, int *ret_write, sbx_error_t *err);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);
/* From now to when (now_ns clock) in milliseconds, rounded up: 0 if past, at most INT_MAX (a poll
 * timeout). */
int ms_until(uint64_t when, uint64_t now);

/* The UTC calendar date and time of t (seconds since the epoch, t >= 0), as gmtime_r fills them
 * (year, month, day, hour, minute, second), computed here: glibc's gmtime_r reads the local zone's
 * file (/etc/localtime) on its first call. */
void utc_time(int64_t t, int *year, int *month, int *day, int *hour, int *min, int *sec);

#endif
