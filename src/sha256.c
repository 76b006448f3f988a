/* SHA-256: the padding and length here; the 64-byte block function is the CPU's SHA extensions
 * (x86-64 SHA-NI, checked with cpuid once) or libmd's SHA256Transform. Why not libmd alone: the
 * policy's hash (10 KB of canonical text) and the seccomp cache's HMAC are hashed on every exec,
 * and libmd's C rounds cost ~3,700 instructions a block there, most of exec's own hashing time;
 * SHA-NI does a block in a few hundred. */
#include "sha256.h"

#include <sha2.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

typedef void block_fn(uint32_t h[8], const uint8_t *data, size_t nblocks);

static void block_portable(uint32_t h[8], const uint8_t *data, size_t nblocks)
{
  for (; nblocks; nblocks--, data += 64)
    SHA256Transform(h, data);
}

#if defined(__x86_64__)
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* Intel's SHA extensions: the state as ABEF and CDGH, two rounds per sha256rnds2, the message
 * schedule by sha256msg1/msg2, four words (one __m128i) at a time. */
__attribute__((target("sha,sse4.1"))) static void block_shani(uint32_t h[8], const uint8_t *data,
                                                              size_t nblocks)
{
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[0]), 0xb1); /* CDAB */
  __m128i st1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[4]), 0x1b); /* EFGH */
  __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);                                      /* ABEF */
  st1 = _mm_blend_epi16(st1, tmp, 0xf0);                                           /* CDGH */
  for (; nblocks; nblocks--, data += 64) {
    const __m128i save0 = st0, save1 = st1;
    __m128i w[4];
    for (int g = 0; g < 16; g++) {
      __m128i m;
      if (g < 4) {
        m = w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) (data + 16 * g)), bswap);
      } else {
        /* W[t..t+3] from W[t-16..t-1]: w[g%4] holds W[t-16..t-13] until it is replaced. */
        __m128i x = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);
        x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
        m = w[g % 4] = _mm_sha256msg2_epu32(x, w[(g + 3) % 4]);
      }
      m = _mm_add_epi32(m, _mm_loadu_si128((const __m128i *) &K[4 * g]));
      st1 = _mm_sha256rnds2_epu32(st1, st0, m);
      st0 = _mm_sha256rnds2_epu32(st0, st1, _mm_shuffle_epi32(m, 0x0e));
    }
    st0 = _mm_add_epi32(st0, save0);
    st1 = _mm_add_epi32(st1, save1);
  }
  tmp = _mm_shuffle_epi32(st0, 0x1b);    /* FEBA */
  st1 = _mm_shuffle_epi32(st1, 0xb1);    /* DCHG */
  st0 = _mm_blend_epi16(tmp, st1, 0xf0); /* DCBA */
  st1 = _mm_alignr_epi8(st1, tmp, 8);    /* HGFE: h[4..7] */
  _mm_storeu_si128((__m128i *) &h[0], st0);
  _mm_storeu_si128((__m128i *) &h[4], st1);
}

static bool cpu_has_shani(void)
{
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
    return false;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}
#endif

static block_fn *block;
static bool forced_portable;

static block_fn *pick(void)
{
#if defined(__x86_64__)
  if (!forced_portable && cpu_has_shani())
    return block_shani;
#endif
  return block_portable;
}

int sha256_force_portable(int on)
{
  forced_portable = on;
  block = pick();
  return block != block_portable;
}

void sha256_init(struct sbx_sha256 *c)
{
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  if (!block)
    block = pick();
  memcpy(c->h, iv, sizeof iv);
  c->bytes = 0;
  c->n = 0;
}

void sha256_update(struct sbx_sha256 *c, const void *data, size_t len)
{
  const uint8_t *p = data;
  c->bytes += len;
  if (c->n) {
    size_t take = len < 64 - c->n ? len : 64 - c->n;
    memcpy(c->buf + c->n, p, take);
    c->n += take;
    p += take;
    len -= take;
    if (c->n < 64)
      return;
    block(c->h, c->buf, 1);
    c->n = 0;
  }
  if (len >= 64) {
    block(c->h, p, len / 64);
    p += len / 64 * 64;
    len %= 64;
  }
  memcpy(c->buf, p, len);
  c->n = len;
}

void sha256_final(struct sbx_sha256 *c, uint8_t out[SBX_SHA256_LEN])
{
  uint64_t bits = c->bytes * 8;
  c->buf[c->n++] = 0x80;
  if (c->n > 56) {
    memset(c->buf + c->n, 0, 64 - c->n);
    block(c->h, c->buf, 1);
    c->n = 0;
  }
  memset(c->buf + c->n, 0, 56 - c->n);
  for (int i = 0; i < 8; i++)
    c->buf[56 + i] = (uint8_t) (bits >> (56 - 8 * i));
  block(c->h, c->buf, 1);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++)
      out[4 * i + j] = (uint8_t) (c->h[i] >> (24 - 8 * j));
  memset(c, 0, sizeof *c);
}
