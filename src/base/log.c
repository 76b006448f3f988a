/* SPDX-License-Identifier: Apache-2.0 */
#include "base/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static void log_v(const char *level, const char *fmt, va_list ap)
{
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  /* One write, so concurrent writers cannot interleave within a line. */
  fprintf(stderr, "sandboxd: %s%s\n", level, line);
  fflush(stderr);
}

void log_error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  log_v("", fmt, ap);
  va_end(ap);
}

void log_warn(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  log_v("warning: ", fmt, ap);
  va_end(ap);
}

void log_sbx_error(const sbx_error_t *err)
{
  log_error("%s", err->msg);
}

void log_warning(enum sbx_warning kind, const char *msg)
{
  static bool said_degraded;
  if (kind == SBX_WARN_DEGRADED) {
    if (said_degraded)
      return;
    said_degraded = true;
  }
  log_warn("%s", msg);
}
