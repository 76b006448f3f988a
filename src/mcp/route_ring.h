/* SPDX-License-Identifier: Apache-2.0 */
/* nginx's consistent hash (`hash KEY consistent;` in an upstream block), so that a replica mints
 * only handles that nginx sends back to it: a request without the key (a session_start, an
 * initialize) goes round robin to any replica, which then draws random handles until one lands
 * on itself in the ring. Pure: the ring is built from the upstream's servers as its nginx.conf
 * names them (`--ring-file`), and this replica's name among them (`--ring-name`). */
#ifndef SBX_MCP_ROUTE_RING_H
#define SBX_MCP_ROUTE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define RING_MAX_SERVERS 256
#define RING_MAX_WEIGHT 100

struct route_ring {
  struct ring_point {
    uint32_t hash;
    uint16_t server; /* index into names */
  } * points;
  size_t n_points;
  char **names;
  size_t n_names;
  int self; /* this replica's index in names, or -1 */
};

/* CRC-32 (IEEE 802.3, as nginx's ngx_crc32_long and zlib's crc32). */
uint32_t ring_crc32(const void *data, size_t len);
/* The ring of text: one server per line as nginx's upstream block names it ("host:port", or
 * "host:port weight=N"); blank lines and #-comments skipped. self: this replica's name. */
int route_ring_parse(struct route_ring *r, const char *text, size_t len, const char *self, sbx_error_t *err);
void route_ring_free(struct route_ring *r);
/* The server (index into names) nginx picks for key while every server is up. */
size_t route_ring_pick(const struct route_ring *r, const char *key, size_t len);
/* Whether key routes to this replica (true without a ring). */
bool route_ring_mine(const struct route_ring *r, const char *key, size_t len);

#endif
