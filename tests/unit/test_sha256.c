/* Unit tests for src/base/sha256.c: FIPS 180-4 vectors, and both block functions (SHA-NI and libmd's)
 * against libmd's own SHA256Final for every length up to 1,100 bytes, fed whole and in random
 * pieces. */
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "check.h"

static void hex(const uint8_t d[32], char out[65])
{
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void vectors(void)
{
  char out[65];
  sha256_hex("", 0, out);
  CHECK(!strcmp(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  sha256_hex("abc", 3, out);
  CHECK(!strcmp(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  sha256_hex(m, strlen(m), out);
  CHECK(!strcmp(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  struct sha256 c;
  char a[1000];
  memset(a, 'a', sizeof a);
  sha256_init(&c);
  for (int i = 0; i < 1000; i++)
    sha256_update(&c, a, sizeof a);
  uint8_t d[32];
  sha256_final(&c, d);
  hex(d, out);
  CHECK(!strcmp(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

/* Every length, whole and in random pieces, against libmd's own padding and transform. */
static void against_libmd(const char *path)
{
  static uint8_t buf[1100];
  srand(7);
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (uint8_t) rand();
  int bad = 0;
  for (size_t n = 0; n <= sizeof buf; n++) {
    uint8_t want[32], got[32], split[32];
    SHA2_CTX ref;
    SHA256Init(&ref);
    SHA256Update(&ref, buf, n);
    SHA256Final(want, &ref);
    struct sha256 c;
    sha256_init(&c);
    sha256_update(&c, buf, n);
    sha256_final(&c, got);
    sha256_init(&c);
    for (size_t off = 0; off < n;) {
      size_t k = (size_t) rand() % 150;
      if (k > n - off)
        k = n - off;
      sha256_update(&c, buf + off, k);
      off += k;
    }
    sha256_final(&c, split);
    if (memcmp(want, got, 32) || memcmp(want, split, 32)) {
      if (bad++ < 3)
        fprintf(stderr, "  %s: length %zu differs from libmd\n", path, n);
    }
  }
  CHECK(bad == 0);
}

int main(void)
{
  bool ni = sha256_accelerated();
  printf("sha256: this CPU %s the SHA extensions\n", ni ? "has" : "lacks (only libmd's path is checked)");
  vectors();
  against_libmd(ni ? "SHA-NI" : "libmd");
  if (ni) {
    sha256_set_accelerated(false);
    CHECK(!sha256_accelerated());
    vectors();
    against_libmd("libmd");
    sha256_set_accelerated(true);
    CHECK(sha256_accelerated());
  }
  return check_summary("test_sha256");
}
