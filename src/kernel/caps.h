/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities, through libcap-ng. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

#include "base/error.h"

/* The egress proxy's (a sandbox drops its own in sandbox/contain.c, which has no libc).
 * Empty the effective, permitted, inheritable, ambient and bounding sets. Needs CAP_SETPCAP
 * (for the bounding set), so it runs while the sandbox still holds its namespace capabilities. */
int caps_drop_all(sbx_error_t *err);

#endif
