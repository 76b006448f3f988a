/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104): the policy's identity, the seccomp cache's
 * seal, audit records, image digests. The block function is the CPU's SHA extensions where it
 * has them, else libmd's. */
#ifndef SBX_SHA256_H
#define SBX_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct sha256 {
  uint32_t h[8];
  uint64_t len; /* bytes so far */
  uint8_t buf[64];
  size_t n; /* bytes in buf */
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t len);
void sha256_final(struct sha256 *c, uint8_t out[32]);

/* sha256 of data as 64 lowercase hex chars + NUL. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* HMAC-SHA-256 of data under key, as 64 hex chars + NUL. */
void hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len, char out[65]);
/* sha256 of a file's contents. */
int sha256_file_hex(const char *path, char out[65], sbx_error_t *err);

/* Whether the block function is the CPU's (SHA-NI); tests turn it off to check the other. */
bool sha256_accelerated(void);
void sha256_set_accelerated(bool on);

#endif
