/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox host uid/gid when sandboxd runs as root: one id of the policy's host_id_range per
 * concurrent sandbox, so that what the kernel counts per host user (pipe buffers, and the owner's
 * share of every per-user-namespace count) is the sandbox's own and not root's, nobody's or
 * another sandbox's. */
#ifndef SBX_HOSTID_H
#define SBX_HOSTID_H

#include "base/error.h"

/* Root-owned, 0700; the lock file inside is never read or written, only locked. */
#define HOSTID_LOCK_DIR "/run/sandboxd"
#define HOSTID_LOCK_NAME "host-ids.lock"

/* Take a free id of [start, start + count): an open-file-description lock on byte `id` of the lock
 * file, held by *ret_lock_fd until it is closed. The kernel drops the lock with the fd, also when
 * sandboxd dies, so nothing is left to clean up. Fails with EUSERS when every id is taken. */
int hostid_acquire(unsigned start, unsigned count, unsigned *ret_id, int *ret_lock_fd, sbx_error_t *err);

#endif
