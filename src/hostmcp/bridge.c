/* SPDX-License-Identifier: Apache-2.0 */
#include "hostmcp/bridge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void bridge_reader_init(struct bridge_reader *r, uint32_t max_frame)
{
  memset(r, 0, sizeof *r);
  r->max_frame = max_frame ? max_frame : BRIDGE_DEFAULT_MAX_FRAME;
}

void bridge_reader_free(struct bridge_reader *r)
{
  free(r->frame);
  r->frame = NULL;
}

enum bridge_event bridge_reader_feed(struct bridge_reader *r, const char *data, size_t len, size_t *ret_used,
                                     char **ret_frame, size_t *ret_len)
{
  size_t used = 0;
  while (used < len) {
    if (r->prefix_want) {
      size_t n = len - used < r->prefix_want - r->prefix_len ? len - used : r->prefix_want - r->prefix_len;
      memcpy(r->prefix + r->prefix_len, data + used, n);
      r->prefix_len += n;
      r->skip -= n;
      used += n;
      if (r->prefix_len < r->prefix_want)
        continue;
      r->prefix_want = 0;
      r->prefix[r->prefix_len] = '\0';
      *ret_frame = r->prefix;
      *ret_len = r->prefix_len;
      *ret_used = used;
      return BRIDGE_OVERSIZE;
    }
    if (r->skip) {
      size_t n = len - used < r->skip ? len - used : r->skip;
      r->skip -= n;
      used += n;
      continue;
    }
    if (r->hdr_len < 4) {
      r->hdr[r->hdr_len++] = (unsigned char) data[used++];
      if (r->hdr_len < 4)
        continue;
      uint32_t n =
          (uint32_t) r->hdr[0] << 24 | (uint32_t) r->hdr[1] << 16 | (uint32_t) r->hdr[2] << 8 | r->hdr[3];
      /* Refuse above the maximum without allocating; skip the body so the stream stays in sync,
       * keeping its first bytes to answer its id. */
      r->frame = n > r->max_frame ? NULL : malloc((size_t) n + 1);
      if (!r->frame) {
        r->skip = n;
        r->hdr_len = 0;
        r->oversize++;
        r->oversize_len = n;
        r->prefix_len = 0;
        r->prefix_want = n < BRIDGE_OVERSIZE_PREFIX ? n : BRIDGE_OVERSIZE_PREFIX;
        if (r->prefix_want)
          continue;
        r->prefix[0] = '\0';
        *ret_frame = r->prefix;
        *ret_len = 0;
        *ret_used = used;
        return BRIDGE_OVERSIZE;
      }
      r->frame_len = n;
      r->have = 0;
    }
    size_t n = len - used < r->frame_len - r->have ? len - used : r->frame_len - r->have;
    memcpy(r->frame + r->have, data + used, n);
    r->have += n;
    used += n;
    if (r->have == r->frame_len) {
      r->frame[r->frame_len] = '\0';
      *ret_frame = r->frame;
      *ret_len = r->frame_len;
      r->frame = NULL;
      r->hdr_len = 0;
      *ret_used = used;
      return BRIDGE_FRAME;
    }
  }
  /* A zero-length frame completes as soon as its header does. */
  if (r->hdr_len == 4 && r->frame && r->frame_len == 0) {
    r->frame[0] = '\0';
    *ret_frame = r->frame;
    *ret_len = 0;
    r->frame = NULL;
    r->hdr_len = 0;
    *ret_used = used;
    return BRIDGE_FRAME;
  }
  *ret_used = used;
  return BRIDGE_NEED_MORE;
}

const char *bridge_reader_partial(const struct bridge_reader *r, size_t *ret_len)
{
  if (!r->frame || r->hdr_len < 4)
    return NULL;
  *ret_len = r->have;
  return r->frame;
}

void bridge_reader_drop(struct bridge_reader *r)
{
  if (!r->frame)
    return;
  r->skip = r->frame_len - r->have;
  free(r->frame);
  r->frame = NULL;
  r->hdr_len = 0;
}

int bridge_header(size_t len, uint32_t max_frame, unsigned char out[4], sbx_error_t *err)
{
  if (len > (max_frame ? max_frame : BRIDGE_DEFAULT_MAX_FRAME))
    return sbx_error_set(err, EMSGSIZE, "bridge: frame of %zu bytes is above the maximum", len);
  out[0] = (unsigned char) (len >> 24);
  out[1] = (unsigned char) (len >> 16);
  out[2] = (unsigned char) (len >> 8);
  out[3] = (unsigned char) len;
  return 0;
}
