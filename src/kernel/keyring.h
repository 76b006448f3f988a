/* SPDX-License-Identifier: Apache-2.0 */
/* A per-user secret kept in the kernel keyring: the key that authenticates sandboxd's caches.
 *
 * Stored as a "user" key in the invoking user's keyring (KEY_SPEC_USER_KEYRING), readable only
 * by a possessor. A sandbox cannot reach it: its new user namespace has a keyring of its own
 * (Linux >= 5.3) and the shipped policies deny keyctl, add_key and request_key. Files, by
 * contrast, can be bound into a sandbox, so no file can hold the key. */
#ifndef SBX_KEYRING_H
#define SBX_KEYRING_H

#include <stddef.h>

#include "base/error.h"

/* The secret named desc, len random bytes created on first use. Fails where keyrings are
 * unavailable (e.g. Docker's default seccomp profile denies keyctl). */
int keyring_secret(const char *desc, void *out, size_t len, sbx_error_t *err);
/* Remove the secret (if any): caches authenticated by it stop being trusted. */
void keyring_forget(const char *desc);
/* Join a new, empty session keyring: the keyrings this process inherited (a login's session
 * keyring links the user's, where the secret lives) are out of its reach from now on. */
int keyring_join_anonymous(sbx_error_t *err);

#endif
