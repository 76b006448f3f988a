/* SPDX-License-Identifier: Apache-2.0 */
/* nginx's consistent hash, as its ngx_http_upstream_hash_module.c builds and searches it
 * (ngx_http_upstream_init_chash, ngx_http_upstream_find_chash_point): each server contributes
 * 160 points per unit of weight; the first point's hash is CRC-32 of "host" NUL "port" followed
 * by four zero bytes, each next one CRC-32 of the same prefix followed by the previous point's
 * hash (little-endian); the points are sorted by hash, and a key goes to the first point whose
 * hash is at least CRC-32 of the key, wrapping to the first. A server's name is the text of its
 * `server` line. Checked against nginx itself by tests/scale. */
#include "mcp/route_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

static uint32_t crc_table[256];

static void crc_init(void)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc_update(uint32_t crc, const void *data, size_t len)
{
  if (!crc_table[1])
    crc_init();
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++)
    crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

uint32_t ring_crc32(const void *data, size_t len)
{
  return crc_update(0xffffffffu, data, len) ^ 0xffffffffu;
}

static int cmp_points(const void *a, const void *b)
{
  const struct ring_point *x = a, *y = b;
  return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* One server's points, appended to r->points (room for them is made by the caller). */
static void add_points(struct route_ring *r, const char *name, unsigned weight, uint16_t index)
{
  /* As nginx splits it: "unix:PATH" is all host; else a trailing ":DIGITS" is the port. */
  size_t n = strlen(name), host_len = n;
  const char *port = "";
  if (strncasecmp(name, "unix:", 5) == 0) {
    name += 5;
    host_len = n - 5;
  } else {
    size_t j = 0;
    while (j < n && name[n - j - 1] >= '0' && name[n - j - 1] <= '9')
      j++;
    if (j < n && name[n - j - 1] == ':') {
      host_len = n - j - 1;
      port = name + n - j;
    }
  }
  uint32_t base = crc_update(0xffffffffu, name, host_len);
  base = crc_update(base, "", 1);
  base = crc_update(base, port, strlen(port));
  uint32_t prev = 0;
  for (unsigned j = 0; j < weight * 160; j++) {
    unsigned char le[4] = {(unsigned char) prev, (unsigned char) (prev >> 8), (unsigned char) (prev >> 16),
                           (unsigned char) (prev >> 24)};
    uint32_t h = crc_update(base, le, 4) ^ 0xffffffffu;
    r->points[r->n_points++] = (struct ring_point){.hash = h, .server = index};
    prev = h;
  }
}

/* One line's name and weight: 0, 1 if it has none (blank, comment), -1 if malformed. */
static int parse_line(char *line, char **name, unsigned *weight)
{
  char *hash = strchr(line, '#');
  if (hash)
    *hash = '\0';
  char *save = NULL, *tok = strtok_r(line, " \t\r", &save);
  if (!tok)
    return 1;
  *name = tok;
  *weight = 1;
  while ((tok = strtok_r(NULL, " \t\r", &save))) {
    uint64_t w;
    if (strncmp(tok, "weight=", 7) != 0 || parse_u64(tok + 7, &w) < 0 || w < 1 || w > RING_MAX_WEIGHT)
      return -1;
    *weight = (unsigned) w;
  }
  return 0;
}

int route_ring_parse(struct route_ring *r, const char *text, size_t len, const char *self, sbx_error_t *err)
{
  *r = (struct route_ring){.self = -1};
  char *copy = strndup(text, len), *save = NULL;
  if (!copy)
    return sbx_error_set(err, ENOMEM, "ring: out of memory");
  unsigned weights[RING_MAX_SERVERS];
  int ret = 0;
  r->names = calloc(RING_MAX_SERVERS, sizeof *r->names);
  for (char *line = strtok_r(copy, "\n", &save); r->names && line && ret == 0;
       line = strtok_r(NULL, "\n", &save)) {
    char *name;
    unsigned weight;
    int p = parse_line(line, &name, &weight);
    if (p < 0)
      ret = sbx_error_set(err, 0, "ring: `%.100s`: a server is `host:port` with an optional weight=1..%d",
                          line, RING_MAX_WEIGHT);
    else if (p == 0 && r->n_names == RING_MAX_SERVERS)
      ret = sbx_error_set(err, 0, "ring: more than %d servers", RING_MAX_SERVERS);
    else if (p == 0) {
      for (size_t i = 0; i < r->n_names && ret == 0; i++)
        if (strcmp(r->names[i], name) == 0)
          ret = sbx_error_set(err, 0, "ring: server `%.100s` named twice", name);
      if (ret == 0 && !(r->names[r->n_names] = strdup(name)))
        ret = sbx_error_set(err, ENOMEM, "ring: out of memory");
      if (ret == 0)
        weights[r->n_names++] = weight;
    }
  }
  free(copy);
  if (!r->names && ret == 0)
    ret = sbx_error_set(err, ENOMEM, "ring: out of memory");
  if (ret == 0 && r->n_names == 0)
    ret = sbx_error_set(err, 0, "ring: no server named");
  size_t total = 0;
  for (size_t i = 0; ret == 0 && i < r->n_names; i++) {
    total += weights[i] * 160;
    if (self && strcmp(r->names[i], self) == 0)
      r->self = (int) i;
  }
  if (ret == 0 && self && r->self < 0)
    ret = sbx_error_set(err, 0, "ring: this replica's name `%.100s` is not among its servers", self);
  if (ret == 0 && !(r->points = calloc(total, sizeof *r->points)))
    ret = sbx_error_set(err, ENOMEM, "ring: out of memory");
  for (size_t i = 0; ret == 0 && i < r->n_names; i++)
    add_points(r, r->names[i], weights[i], (uint16_t) i);
  if (ret < 0) {
    route_ring_free(r);
    return -1;
  }
  qsort(r->points, r->n_points, sizeof *r->points, cmp_points);
  return 0;
}

void route_ring_free(struct route_ring *r)
{
  for (size_t i = 0; r->names && i < r->n_names; i++)
    free(r->names[i]);
  free(r->names);
  free(r->points);
  *r = (struct route_ring){.self = -1};
}

size_t route_ring_pick(const struct route_ring *r, const char *key, size_t len)
{
  uint32_t h = ring_crc32(key, len);
  size_t lo = 0, hi = r->n_points; /* the first point with hash >= h */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->points[mid].hash < h)
      lo = mid + 1;
    else
      hi = mid;
  }
  return r->points[lo == r->n_points ? 0 : lo].server;
}

bool route_ring_mine(const struct route_ring *r, const char *key, size_t len)
{
  return !r || !r->n_points || r->self < 0 || route_ring_pick(r, key, len) == (size_t) r->self;
}
