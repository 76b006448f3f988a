/* SPDX-License-Identifier: Apache-2.0 */
#include "base/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int error_vset(sbx_error_t *err, int errnum, const char *fmt, va_list ap)
{
  if (!err)
    return -1;
  /* A message is cut where it does not fit, visibly (bufprintf_cut). */
  char msg[sizeof err->msg];
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  if (n < 0)
    msg[0] = '\0';
  else if ((size_t) n >= sizeof msg)
    memcpy(msg + sizeof msg - 4, "...", 4);
  bufprintf_cut(err->msg, sizeof err->msg, "%s%s%s", msg, errnum ? ": " : "", errnum ? strerror(errnum) : "");
  err->errnum = errnum;
  /* Callers pass uninitialised structs: set every field, read none. */
  err->status = 125;
  return -1;
}

int sbx_error_set(sbx_error_t *err, int errnum, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  error_vset(err, errnum, fmt, ap);
  va_end(ap);
  return -1;
}

int sbx_error_errno(sbx_error_t *err, const char *fmt, ...)
{
  int errnum = errno;
  va_list ap;
  va_start(ap, fmt);
  error_vset(err, errnum, fmt, ap);
  va_end(ap);
  return -1;
}

int sbx_error_prefix(sbx_error_t *err, const char *fmt, ...)
{
  if (!err)
    return -1;
  char ctx[sizeof err->msg], old[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  bufprintf_cut(err->msg, sizeof err->msg, "%s: %s", ctx, old);
  return -1;
}

int sbx_error_hint(sbx_error_t *err, const char *fmt, ...)
{
  if (!err)
    return -1;
  char hint[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(hint, sizeof hint, fmt, ap);
  va_end(ap);
  if (n < 0)
    return -1;
  /* Room for the message, "...", "; " and the hint; a hint longer than half the buffer is cut
   * too, so some of the message always remains. */
  size_t hl = strlen(hint), max = sizeof err->msg / 2;
  if (hl > max)
    memcpy(hint + max - 3, "...", 4), hl = max;
  size_t ml = strlen(err->msg), room = sizeof err->msg - 1 - hl - 2;
  if (ml > room) {
    memcpy(err->msg + room - 3, "...", 4);
    ml = room;
  }
  memcpy(err->msg + ml, "; ", 2);
  memcpy(err->msg + ml + 2, hint, hl + 1);
  return -1;
}

void bufprintf_cut(char *buf, size_t size, const char *fmt, ...)
{
  if (!size)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  if (n < 0)
    buf[0] = '\0';
  else if ((size_t) n >= size && size > 3)
    memcpy(buf + size - 4, "...", 4);
}
