/* SPDX-License-Identifier: Apache-2.0 */
/* JSON-RPC 2.0 over a newline-delimited byte stream: framing, classifying messages, building
 * replies. Knows nothing of MCP and does no I/O: the caller feeds bytes in and writes bytes out. */
#ifndef SBX_JSONRPC_H
#define SBX_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/json.h"

enum {
  JSONRPC_PARSE_ERROR = -32700,
  JSONRPC_INVALID_REQUEST = -32600,
  JSONRPC_METHOD_NOT_FOUND = -32601,
  JSONRPC_INVALID_PARAMS = -32602,
  JSONRPC_INTERNAL_ERROR = -32603,
};

/* ---- framing: one message per line, each at most max_message bytes ---- */

/* How much of an oversize line is kept, at each end, to answer its id: clients put the id first
 * (before params) or last (the TypeScript SDK: {...request, jsonrpc, id}). */
#define JSONRPC_OVERSIZE_KEEP 256

typedef struct jsonrpc_framer {
  char *buf;
  size_t start, len, cap; /* unconsumed bytes are buf[start..len) */
  size_t scanned;         /* of those, how many are known to hold no newline */
  size_t max_message;
  bool discarding;     /* inside an oversize line: drop bytes up to its newline */
  bool oversize_ready; /* an oversize line has ended: the next event reports it */
  char head[JSONRPC_OVERSIZE_KEEP], tail[JSONRPC_OVERSIZE_KEEP]; /* its first and last bytes */
  size_t head_len, tail_len;
} jsonrpc_framer_t;

enum jsonrpc_frame {
  JSONRPC_FRAME_NONE,     /* need more input */
  JSONRPC_FRAME_MESSAGE,  /* one line, without its "\n" or "\r\n" */
  JSONRPC_FRAME_OVERSIZE, /* a line above max_message was dropped, reported at its end: the bytes
                           * given are its start (jsonrpc_framer_tail() its end) */
};

void jsonrpc_framer_init(jsonrpc_framer_t *f, size_t max_message);
void jsonrpc_framer_free(jsonrpc_framer_t *f);
/* Append input. Call jsonrpc_framer_next() until it returns NONE before pushing again: that keeps
 * the buffer below max_message + n. */
int jsonrpc_framer_push(jsonrpc_framer_t *f, const char *data, size_t n, sbx_error_t *err);
/* The next event; *ret and *ret_len stay valid until the next push. Blank lines are skipped. */
enum jsonrpc_frame jsonrpc_framer_next(jsonrpc_framer_t *f, const char **ret, size_t *ret_len);
/* At end of input: an unterminated last line as MESSAGE, else NONE. */
enum jsonrpc_frame jsonrpc_framer_finish(jsonrpc_framer_t *f, const char **ret, size_t *ret_len);
/* The last bytes of the oversize line just reported (up to JSONRPC_OVERSIZE_KEEP). */
const char *jsonrpc_framer_tail(const jsonrpc_framer_t *f, size_t *ret_len);
/* Once every message is taken (jsonrpc_framer_next gave NONE), a buffer grown above keep bytes is
 * given back: a burst of large messages does not keep its room; the next push allocates anew. */
void jsonrpc_framer_trim(jsonrpc_framer_t *f, size_t keep);

/* ---- messages ---- */

enum jsonrpc_kind {
  JSONRPC_REQUEST,      /* method and id: must be answered */
  JSONRPC_NOTIFICATION, /* method, no id: never answered */
  JSONRPC_RESPONSE,     /* result or error, and id: an answer to a request of ours */
};

struct jsonrpc_message {
  enum jsonrpc_kind kind;
  json_node_t *root;
  const char *method;        /* requests and notifications */
  const json_node_t *params; /* object or array, or NULL when absent */
  char *id;                  /* canonical compact JSON ("0", "\"a\""); NULL for notifications */
};

/* Why a message was rejected: the code and message to answer with, and the id to answer to
 * (canonical JSON, or NULL for null). */
struct jsonrpc_failure {
  int code;
  char *id;
  sbx_error_t detail;
};

/* Parse and validate one message. On failure fill *fail (release it with jsonrpc_failure_clear). */
int jsonrpc_parse(const char *buf, size_t len, struct jsonrpc_message *ret, struct jsonrpc_failure *fail);
/* The same with a tree that holds at most keep bytes of each string, key and number
 * (json_parse_cut), for a message whose large values go on as written. */
int jsonrpc_parse_cut(const char *buf, size_t len, size_t keep, struct jsonrpc_message *ret,
                      struct jsonrpc_failure *fail);
/* The failure for an oversize message whose first bytes are prefix and last bytes tail (may be
 * NULL): answers its id if either holds it (a top-level "id" first, or last before the closing
 * brace, perhaps followed by "jsonrpc":"2.0"). */
void jsonrpc_oversize(const char *prefix, size_t len, const char *tail, size_t tail_len, size_t max_message,
                      struct jsonrpc_failure *fail);
void jsonrpc_message_clear(struct jsonrpc_message *m);
void jsonrpc_failure_clear(struct jsonrpc_failure *f);
/* Canonical JSON of an id node (integer or string; other numbers as written), or NULL if the node
 * cannot be an id. malloc'd. Two ids are the same request iff their canonical forms are equal. */
char *jsonrpc_id_canonical(const json_node_t *id);

/* ---- replies: each is one JSON document in its own writer; append "\n" when sending ---- */

/* {"jsonrpc":"2.0","id":ID,"result":  ...the caller writes the result value, then jsonrpc_end(). */
void jsonrpc_begin_result(json_writer_t *w, const char *id);
/* {"jsonrpc":"2.0","method":M,"params":  ...the caller writes params, then jsonrpc_end(). */
void jsonrpc_begin_notification(json_writer_t *w, const char *method);
void jsonrpc_end(json_writer_t *w);
/* {"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M,"data":  ...the caller writes the data
 * value, then jsonrpc_end_error_data(). */
void jsonrpc_write_error_data(json_writer_t *w, const char *id, int code, const char *message);
void jsonrpc_end_error_data(json_writer_t *w);
/* A complete error response; id NULL answers with null. */
void jsonrpc_write_error(json_writer_t *w, const char *id, int code, const char *message);

#endif
