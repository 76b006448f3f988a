/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: the sessions of the stateful mode (Mcp-Session-Id). Internal to the
 * transport (mcp_http_internal.h). */
#ifndef SBX_MCP_HTTP_SESSION_H
#define SBX_MCP_HTTP_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct http_session {
  struct http_session *next;
  char id[33];        /* 128 random bits, hex: the Mcp-Session-Id */
  uint64_t num;       /* the server's client number (struct call's client) */
  char owner[65];     /* the sha256 of the token that made it (not its line in --token-file,
                       * which a reload may move), or "" without tokens */
  uint64_t get_route; /* its GET stream's exchange, or 0 */
  size_t open;        /* exchanges of it in flight */
  uint64_t used_ns;   /* its latest request */
};

struct http_sessions {
  struct http_session *list;
  size_t n;
};

struct route_ring;
/* A new session (ret owned by s); with a ring (route_ring.h), an id nginx routes here. */
int http_session_new(struct http_sessions *s, const struct route_ring *ring, uint64_t num, const char *owner,
                     struct http_session **ret, sbx_error_t *err);
/* The session with this id made under this principal (a session id is no use with another
 * token), or NULL. */
struct http_session *http_session_find(struct http_sessions *s, const char *id, const char *owner);
void http_session_end(struct http_sessions *s, struct http_session *x);

#endif
