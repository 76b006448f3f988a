/* SPDX-License-Identifier: Apache-2.0 */
/* Errors: functions that can fail return a negative int and fill an sbx_error_t given last.
 * The struct is flat (no heap) so the sandbox child can send it to the parent as bytes. */
#ifndef SBX_ERROR_H
#define SBX_ERROR_H

#include <stddef.h>

typedef struct sbx_error {
  int errnum;    /* errno of the failed operation, 0 if none */
  int status;    /* exit status the failure maps to (SBX_EXIT_*) */
  char msg[480]; /* one line, no trailing newline */
} sbx_error_t;

/* Exit statuses shared by every command (documented in sandboxd(1)). */
enum {
  SBX_EXIT_TIMEOUT = 124,
  SBX_EXIT_SETUP = 125,       /* usage, policy or setup error */
  SBX_EXIT_CANNOT_EXEC = 126, /* the program is there but cannot be executed */
  SBX_EXIT_NOT_FOUND = 127,   /* the program is not in the sandbox */
};

/* Set err: message from fmt, plus ": strerror(errnum)" when errnum != 0. Returns -1. */
int sbx_error_set(sbx_error_t *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, with errno as errnum. */
int sbx_error_errno(sbx_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append what to do about an existing error, after its errno text: "msg: strerror; HINT". When the
 * whole does not fit, the message is cut, never the hint. Returns -1. */
int sbx_error_hint(sbx_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix an existing message with context: "ctx: old". Returns -1. */
int sbx_error_prefix(sbx_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#if defined(__GNUC__) && !defined(__clang__)
/* GCC checks at each call that size is no more than the buffer it is given. */
#define SBX_BUF_ACCESS(mode, b, n) __attribute__((access(mode, b, n)))
#else
#define SBX_BUF_ACCESS(mode, b, n)
#endif
/* A message into a fixed buffer: a result that does not fit is cut and ends in "..." (util.h's
 * bufprintf and bufcatf are the checked builds, for everything that is not a message). */
void bufprintf_cut(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)))
SBX_BUF_ACCESS(write_only, 1, 2);

#endif
