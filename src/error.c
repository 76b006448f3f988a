#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int error_vset(sbx_error_t *err, int errnum, const char *fmt, va_list ap)
{
  if (!err)
    return -1;
  int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  if (n < 0)
    n = 0;
  if (errnum && (size_t) n < sizeof err->msg)
    snprintf(err->msg + n, sizeof err->msg - n, ": %s", strerror(errnum));
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
  snprintf(err->msg, sizeof err->msg, "%s: %s", ctx, old);
  return -1;
}
