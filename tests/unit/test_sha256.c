/* Unit tests for src/sha256.c: FIPS 180-4 / RFC 4231 vectors through sha256_hex and
 * hmac_sha256_hex, and the CPU's block function (SHA-NI) against the portable one (libmd's) for
 * every length up to 600 bytes, fed whole and in pieces (the buffering across blocks). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sha256.h"
#include "util.h"

static void digest(const uint8_t *data, size_t len, size_t piece, uint8_t out[SBX_SHA256_LEN])
{
  struct sbx_sha256 c;
  sha256_init(&c);
  for (size_t off = 0; off < len; off += piece)
    sha256_update(&c, data + off, len - off < piece ? len - off : piece);
  sha256_final(&c, out);
}

static int vectors(void)
{
  char hex[65];
  int ok = 1;
  sha256_hex("", 0, hex);
  ok &= strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0;
  sha256_hex("abc", 3, hex);
  ok &= strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0;
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes: 2 blocks */
  sha256_hex(two, strlen(two), hex);
  ok &= strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0;
  char *a = malloc(1000000);
  memset(a, 'a', 1000000);
  sha256_hex(a, 1000000, hex);
  ok &= strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0;
  free(a);
  /* RFC 4231 test cases 1 and 6 (a key longer than a block is hashed first). */
  uint8_t key[131];
  memset(key, 0x0b, 20);
  hmac_sha256_hex(key, 20, "Hi There", 8, hex);
  ok &= strcmp(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7") == 0;
  memset(key, 0xaa, sizeof key);
  const char *m = "Test Using Larger Than Block-Size Key - Hash Key First";
  hmac_sha256_hex(key, sizeof key, m, strlen(m), hex);
  ok &= strcmp(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54") == 0;
  return ok;
}

int main(void)
{
  int fast = sha256_force_portable(0);
  printf("test_sha256: block function: %s\n", fast ? "SHA-NI" : "portable (libmd)");
  CHECK(vectors());
  sha256_force_portable(1);
  CHECK(vectors());

  uint8_t data[600];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t) (i * 131 + 7);
  int same = 1;
  for (size_t len = 0; len <= sizeof data; len++) {
    uint8_t ref[SBX_SHA256_LEN], got[SBX_SHA256_LEN];
    sha256_force_portable(1);
    digest(data, len, sizeof data, ref);
    sha256_force_portable(0);
    static const size_t pieces[] = {1, 7, 63, 64, 65, 600};
    for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++) {
      digest(data, len, pieces[p], got);
      same &= memcmp(ref, got, sizeof ref) == 0;
    }
  }
  CHECK(same);
  return check_summary("test_sha256");
}
