/* mcp/route_ring.c: CRC-32, the ring file, and picks that are nginx's (the scale suite checks them
 * against nginx itself). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mcp/route_ring.h"

int main(void)
{
  /* CRC-32's check value (the IEEE polynomial, reflected, as zlib and nginx). */
  CHECK(ring_crc32("123456789", 9) == 0xcbf43926u);
  CHECK(ring_crc32("", 0) == 0);

  struct route_ring r;
  sbx_error_t err = {0};
  const char *three = "# the upstream\n127.0.0.1:9001\n\n127.0.0.1:9002   # two\n127.0.0.1:9003 weight=1\n";
  CHECK(route_ring_parse(&r, three, strlen(three), "127.0.0.1:9002", &err) == 0);
  CHECK(r.n_names == 3 && r.n_points == 480 && r.self == 1);
  size_t unsorted = 0;
  for (size_t i = 1; i < r.n_points; i++)
    unsorted += r.points[i - 1].hash > r.points[i].hash;
  CHECK(unsorted == 0);
  /* Every key goes somewhere, the same place each time, and each server gets a fair share. */
  size_t got[3] = {0}, wrong = 0;
  char key[32];
  for (int i = 0; i < 3000; i++) {
    int n = snprintf(key, sizeof key, "sbx_%d", i);
    size_t p = route_ring_pick(&r, key, (size_t) n);
    wrong += !(p < 3 && p == route_ring_pick(&r, key, (size_t) n));
    wrong += route_ring_mine(&r, key, (size_t) n) != (p == 1);
    got[p < 3 ? p : 0]++;
  }
  CHECK(wrong == 0);
  CHECK(got[0] > 500 && got[1] > 500 && got[2] > 500);
  route_ring_free(&r);

  /* A weight of 2 gets about twice the keys. */
  const char *weighted = "a:1 weight=2\nb:1\n";
  CHECK(route_ring_parse(&r, weighted, strlen(weighted), NULL, &err) == 0 && r.n_points == 480 &&
        r.self == -1);
  size_t a = 0, not_mine = 0;
  for (int i = 0; i < 3000; i++) {
    int n = snprintf(key, sizeof key, "k%d", i);
    a += route_ring_pick(&r, key, (size_t) n) == 0;
    not_mine += !route_ring_mine(&r, key, (size_t) n); /* no self: everything is ours */
  }
  CHECK(not_mine == 0);
  CHECK(a > 1600 && a < 2400);
  route_ring_free(&r);
  CHECK(route_ring_mine(NULL, "x", 1));

  /* Refused, each with a reason. */
  static const char *const bad[][2] = {{"", NULL},
                                       {"# nothing\n", NULL},
                                       {"a:1\na:1\n", NULL},
                                       {"a:1 weight=0\n", NULL},
                                       {"a:1 weight=101\n", NULL},
                                       {"a:1 max_fails=0\n", NULL},
                                       {"a:1\nb:2\n", "c:3"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    sbx_error_t e = {0};
    CHECK(route_ring_parse(&r, bad[i][0], strlen(bad[i][0]), bad[i][1], &e) < 0 && e.msg[0]);
    CHECK(r.points == NULL && r.names == NULL);
  }
  return check_summary("test_route_ring");
}
