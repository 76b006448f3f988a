/* Capabilities, through libcap-ng. */
#ifndef SBX_CAPS_H
#define SBX_CAPS_H

#include <stdbool.h>

#include "error.h"

/* Empty the effective, permitted, inheritable, ambient and bounding sets. Needs CAP_SETPCAP
 * (for the bounding set), so it runs while the sandbox still holds its namespace capabilities. */
int caps_drop_all(sbx_error_t *err);
/* Whether this process holds cap (CAP_*) in its effective set; false if that cannot be read. */
bool caps_effective(int cap);

#endif
