/* SPDX-License-Identifier: Apache-2.0 */
/* rtnetlink through libmnl. */
#ifndef SBX_NETLINK_H
#define SBX_NETLINK_H

#include "base/error.h"

/* Bring the loopback interface of the current network namespace up. */
int netlink_loopback_up(sbx_error_t *err);

#endif
