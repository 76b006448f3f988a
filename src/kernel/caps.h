/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities, through libcap-ng. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

#include "base/error.h"

/* Empty the effective, permitted, inheritable, ambient and bounding sets. Needs CAP_SETPCAP
 * (for the bounding set), so it runs while the sandbox still holds its namespace capabilities. */
int caps_drop_all(sbx_error_t *err);
/* libcap-ng's per-thread state made ready (no change to any capability), for a caller whose
 * later calls must not allocate: under RLIMIT_AS an ASan build could not map its bookkeeping. */
void caps_prepare(void);

#endif
