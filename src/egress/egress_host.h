/* SPDX-License-Identifier: Apache-2.0 */
/* The host's own addresses (getifaddrs), which egress_check_dest() refuses like private ones: a
 * public address of the host reaches services bound to it. Apart from egress_rules.c, which does no
 * I/O. */
#ifndef SBX_EGRESS_HOST_H
#define SBX_EGRESS_HOST_H

#include <stddef.h>

#include "base/error.h"
#include "policy/egress_rules.h"

/* Every IPv4 and IPv6 address of the host's interfaces (in the caller's network namespace). */
int egress_host_addrs(struct egress_addr **ret, size_t *ret_n, sbx_error_t *err);

#endif
