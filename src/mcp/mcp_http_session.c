/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: the sessions of the stateful mode. An id is 128 bits from getrandom(),
 * bound to the token that made it; lookups compare the whole id in constant time. */
#include "mcp/mcp_http_session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/slist.h"
#include "base/util.h"
#include "mcp/route_ring.h"

int http_session_new(struct http_sessions *s, const struct route_ring *ring, uint64_t num, const char *owner,
                     struct http_session **ret, sbx_error_t *err)
{
  struct http_session *x = calloc(1, sizeof *x);
  if (!x)
    return sbx_error_set(err, ENOMEM, "session: out of memory");
  /* Behind nginx's `hash $http_mcp_session_id consistent`: an id that routes here. */
  do {
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != sizeof b) {
      free(x);
      return sbx_error_errno(err, "session id: getrandom");
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof b; i++) {
      x->id[2 * i] = hex[b[i] >> 4];
      x->id[2 * i + 1] = hex[b[i] & 15];
    }
  } while (!route_ring_mine(ring, x->id, 32));
  x->num = num;
  bufprintf_cut(x->owner, sizeof x->owner, "%s", owner ? owner : "");
  x->used_ns = now_ns();
  slist_append(&s->list, x);
  s->n++;
  *ret = x;
  return 0;
}

static bool same_id(const char *a, const char *b)
{
  unsigned char diff = 0;
  for (size_t i = 0; i < 32; i++)
    diff |= (unsigned char) (a[i] ^ b[i]);
  return diff == 0;
}

struct http_session *http_session_find(struct http_sessions *s, const char *id, const char *owner)
{
  if (strlen(id) != 32)
    return NULL;
  for (struct http_session *x = s->list; x; x = x->next)
    if (same_id(x->id, id) && strcmp(x->owner, owner ? owner : "") == 0)
      return x;
  return NULL;
}

void http_session_end(struct http_sessions *s, struct http_session *x)
{
  slist_unlink(&s->list, x);
  s->n--;
  free(x);
}
