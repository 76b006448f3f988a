/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 with the block function chosen once: the x86 SHA extensions (SHA-NI, with SSSE3 and
 * SSE4.1 for the shuffles) where cpuid says so, else libmd's SHA256Transform. Padding and
 * lengths are ours on both paths, so the unit test's comparison with libmd's own SHA256Final
 * over every length checks each path whole.
 *
 * Why not libmd alone: every `sandboxd exec` hashes the policy's canonical text (~24 KiB) and
 * seals the seccomp cache (~10 KiB): 0.95 M instructions, 38% of the parent's, about 170 µs
 * here; the extensions do it in about a fifth of the time. nettle has them too, but loading it
 * as a shared library costs more than it saves. */
#include "base/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <sha2.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"

#if defined(__x86_64__) && defined(__GNUC__) && __has_include(<sys/platform/x86.h>)
#include <immintrin.h>
#include <sys/platform/x86.h> /* glibc's own cpuid results: cpuid itself traps to a hypervisor */
#define HAVE_SHA_NI 1
#endif

typedef void blocks_fn(uint32_t h[8], const uint8_t *p, size_t n);

static void blocks_libmd(uint32_t h[8], const uint8_t *p, size_t n)
{
  for (; n; n--, p += 64)
    SHA256Transform(h, p);
}

#ifdef HAVE_SHA_NI
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

/* Intel's layout: the state as ABEF and CDGH; each sha256rnds2 does two rounds, so a group of four
 * message words takes two, the second with the upper half of (W + K) moved down. The schedule,
 * W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four words at a time: msg1 adds s0 of the
 * next group to the oldest, alignr brings W[t-7..t-4], msg2 adds s1 (of words it makes itself
 * for the upper two). w[] holds the last four groups. */
__attribute__((target("sha,ssse3,sse4.1"))) static void blocks_ni(uint32_t h[8], const uint8_t *p, size_t n)
{
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[0]), 0xB1);  /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[4]), 0x1B); /* EFGH */
  __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                         /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                                              /* CDGH */
  for (; n; n--, p += 64) {
    __m128i save0 = s0, save1 = s1, w[4];
    for (int i = 0; i < 16; i++) {
      if (i < 4)
        w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) (p + 16 * i)), bswap);
      else
        w[i & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]),
                                                      _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4)),
                                        w[(i + 3) & 3]);
      __m128i m = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *) &K[4 * i]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, m);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
    }
    s0 = _mm_add_epi32(s0, save0);
    s1 = _mm_add_epi32(s1, save1);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);   /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);  /* DCHG */
  s0 = _mm_blend_epi16(t, s1, 0xF0); /* DCBA */
  s1 = _mm_alignr_epi8(s1, t, 8);    /* HGFE */
  _mm_storeu_si128((__m128i *) &h[0], s0);
  _mm_storeu_si128((__m128i *) &h[4], s1);
}

static bool cpu_has_sha_ni(void)
{
  return CPU_FEATURE_ACTIVE(SHA) && CPU_FEATURE_ACTIVE(SSSE3) && CPU_FEATURE_ACTIVE(SSE4_1);
}
#endif

static blocks_fn *blocks;

static blocks_fn *pick(void)
{
  if (!blocks) {
#ifdef HAVE_SHA_NI
    blocks = cpu_has_sha_ni() ? blocks_ni : blocks_libmd;
#else
    blocks = blocks_libmd;
#endif
  }
  return blocks;
}

bool sha256_accelerated(void)
{
  return pick() != blocks_libmd;
}

void sha256_set_accelerated(bool on)
{
  blocks = NULL;
  if (!on || !sha256_accelerated())
    blocks = blocks_libmd;
}

void sha256_init(struct sha256 *c)
{
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->len = 0;
  c->n = 0;
}

void sha256_update(struct sha256 *c, const void *data, size_t len)
{
  const uint8_t *p = data;
  blocks_fn *f = pick();
  c->len += len;
  if (c->n) {
    size_t k = len < 64 - c->n ? len : 64 - c->n;
    memcpy(c->buf + c->n, p, k);
    c->n += k, p += k, len -= k;
    if (c->n < 64)
      return;
    f(c->h, c->buf, 1);
    c->n = 0;
  }
  if (len >= 64) {
    f(c->h, p, len / 64);
    p += len / 64 * 64;
    len %= 64;
  }
  memcpy(c->buf, p, len);
  c->n = len;
}

void sha256_final(struct sha256 *c, uint8_t out[32])
{
  uint64_t bits = c->len * 8;
  uint8_t pad[72] = {0x80};
  /* 0x80, zeros, then the length in bits (big-endian): up to a multiple of 64 bytes. */
  size_t k = (c->n < 56 ? 56 : 120) - c->n;
  for (int i = 0; i < 8; i++)
    pad[k + (size_t) i] = (uint8_t) (bits >> (56 - 8 * i));
  uint64_t len = c->len;
  sha256_update(c, pad, k + 8);
  c->len = len;
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t) (c->h[i] >> 24);
    out[4 * i + 1] = (uint8_t) (c->h[i] >> 16);
    out[4 * i + 2] = (uint8_t) (c->h[i] >> 8);
    out[4 * i + 3] = (uint8_t) c->h[i];
  }
}

static void digest_hex(const uint8_t d[32], char out[65])
{
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[64] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[65])
{
  struct sha256 c;
  uint8_t d[32];
  sha256_init(&c);
  sha256_update(&c, data, len);
  sha256_final(&c, d);
  digest_hex(d, out);
}

/* RFC 2104 with SHA-256 (block 64 bytes); keys longer than a block are hashed first. */
void hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len, char out[65])
{
  uint8_t k[64] = {0}, pad[64], inner[32], d[32];
  struct sha256 c;
  if (key_len > sizeof k) {
    sha256_init(&c);
    sha256_update(&c, key, key_len);
    sha256_final(&c, k);
  } else if (key_len) {
    memcpy(k, key, key_len);
  }
  for (size_t i = 0; i < sizeof pad; i++)
    pad[i] = k[i] ^ 0x36;
  sha256_init(&c);
  sha256_update(&c, pad, sizeof pad);
  sha256_update(&c, data, len);
  sha256_final(&c, inner);
  for (size_t i = 0; i < sizeof pad; i++)
    pad[i] = k[i] ^ 0x5c;
  sha256_init(&c);
  sha256_update(&c, pad, sizeof pad);
  sha256_update(&c, inner, sizeof inner);
  sha256_final(&c, d);
  digest_hex(d, out);
}

int sha256_file_hex(const char *path, char out[65], sbx_error_t *err)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "open `%s`", path);
  struct sha256 c;
  uint8_t d[32], buf[65536];
  sha256_init(&c);
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return sbx_error_errno(err, "read `%s`", path);
    if (n == 0)
      break;
    sha256_update(&c, buf, (size_t) n);
  }
  sha256_final(&c, d);
  digest_hex(d, out);
  return 0;
}
