/* Diagnostics: the only place that writes human messages, always to stderr. */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include "error.h"

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "sandboxd: MSG" for a failed operation. */
void log_sbx_error(const sbx_error_t *err);

#endif
