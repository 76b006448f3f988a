/* SPDX-License-Identifier: Apache-2.0 */
/* Diagnostics: the only place that writes human messages, always to stderr. */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include "base/error.h"
#include "base/warn.h"

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "sandboxd: MSG" for a failed operation. */
void log_sbx_error(const sbx_error_t *err);
/* The default handler for library warnings (warn.h): each as log_warn, except that limits
 * degrading to rlimits, the same fact for every sandbox of a process, is said once. */
void log_warning(enum sbx_warning kind, const char *msg);

#endif
