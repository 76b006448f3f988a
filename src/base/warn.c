/* SPDX-License-Identifier: Apache-2.0 */
#include "base/warn.h"

#include <stdarg.h>
#include <stdio.h>

static sbx_warn_handler_t handler;

sbx_warn_handler_t sbx_warn_set_handler(sbx_warn_handler_t h)
{
  sbx_warn_handler_t old = handler;
  handler = h;
  return old;
}

void sbx_warn(enum sbx_warning kind, const char *fmt, ...)
{
  if (!handler)
    return;
  /* As log.c's lines: a longer warning is cut. */
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  handler(kind, msg);
}
