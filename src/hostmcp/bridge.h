/* SPDX-License-Identifier: Apache-2.0 */
/* The bridge: framed JSON between sandboxd and the code inside, over a SOCK_STREAM socketpair
 * whose sandbox end is fd SBX_BRIDGE_FD (3) inside. A frame is a 4-byte big-endian length and
 * that many bytes of UTF-8 JSON. Frames have no line or 64 KiB limit, only the configured maximum
 * (16 MiB by default for answers; the proxy reads requests with the policy's proxy_request_limit,
 * proxy.h).
 * No file descriptors ever cross: sandboxd reads without a control buffer,
 * so any SCM_RIGHTS sent from inside are discarded by the kernel, and it never sends any. */
#ifndef SBX_BRIDGE_H
#define SBX_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define BRIDGE_DEFAULT_MAX_FRAME (16u << 20)
/* How much of an oversize frame the reader keeps (a request's "id" comes first). */
#define BRIDGE_OVERSIZE_PREFIX 256

/* Incremental frame reader: feed it bytes as they arrive, take frames out. Pure (no I/O). */
struct bridge_reader {
  uint32_t max_frame;
  unsigned char hdr[4];
  size_t hdr_len;
  char *frame; /* being filled; frame_len bytes expected */
  size_t frame_len, have;
  size_t skip;           /* bytes of an oversize frame still to discard */
  uint64_t oversize;     /* frames refused for size so far */
  uint32_t oversize_len; /* the announced length of the latest oversize frame */
  /* The first bytes of an oversize frame, kept so its request id can still be answered. */
  char prefix[BRIDGE_OVERSIZE_PREFIX + 1];
  size_t prefix_len, prefix_want;
};

enum bridge_event {
  BRIDGE_NEED_MORE, /* consumed everything, no complete frame */
  BRIDGE_FRAME,     /* *ret_frame (malloc'd, NUL-terminated) of *ret_len bytes */
  BRIDGE_OVERSIZE,  /* a frame above max_frame was announced; it is being skipped, nothing is
                     * allocated for it. *ret_frame points at its first bytes (up to
                     * BRIDGE_OVERSIZE_PREFIX, *ret_len of them, NUL-terminated) inside the
                     * reader: valid until the next call, not to be freed. */
};

void bridge_reader_init(struct bridge_reader *r, uint32_t max_frame);
void bridge_reader_free(struct bridge_reader *r);
/* Consume from data[0..len); *ret_used says how much. Call again with the rest after a frame. */
enum bridge_event bridge_reader_feed(struct bridge_reader *r, const char *data, size_t len, size_t *ret_used,
                                     char **ret_frame, size_t *ret_len);
/* The frame still arriving: the bytes of it so far (NULL when none is: between frames, or while
 * one is skipped), so that the caller can judge it before it is whole. */
const char *bridge_reader_partial(const struct bridge_reader *r, size_t *ret_len);
/* Give up the frame still arriving: what is here of it is freed and the rest is skipped as it
 * arrives (the stream stays in sync). */
void bridge_reader_drop(struct bridge_reader *r);

/* Encode a frame header for len bytes. Fails above max. */
int bridge_header(size_t len, uint32_t max_frame, unsigned char out[4], sbx_error_t *err);

#endif
