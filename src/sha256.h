/* SHA-256 (FIPS 180-4): the CPU's SHA extensions where it has them (x86-64 SHA-NI), else
 * libmd's block function. The same digest either way (tests/unit/test_sha256.c). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define SBX_SHA256_LEN 32

struct sbx_sha256 {
  uint32_t h[8];
  uint64_t bytes; /* hashed so far */
  uint8_t buf[64];
  size_t n; /* bytes in buf */
};

void sha256_init(struct sbx_sha256 *c);
void sha256_update(struct sbx_sha256 *c, const void *data, size_t len);
void sha256_final(struct sbx_sha256 *c, uint8_t out[SBX_SHA256_LEN]);

/* For the tests: use the portable block function (libmd) even where the CPU has SHA-NI, or go
 * back to the fastest; returns whether SHA-NI is in use. */
int sha256_force_portable(int on);
