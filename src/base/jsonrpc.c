/* SPDX-License-Identifier: Apache-2.0 */
/* JSON-RPC 2.0 framing and message validation (https://www.jsonrpc.org/specification). */
#include "base/jsonrpc.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ framing */

void jsonrpc_framer_init(jsonrpc_framer_t *f, size_t max_message)
{
  *f = (jsonrpc_framer_t){.max_message = max_message};
}

void jsonrpc_framer_free(jsonrpc_framer_t *f)
{
  free(f->buf);
  *f = (jsonrpc_framer_t){0};
}

/* Keep the last JSONRPC_OVERSIZE_KEEP bytes of an oversize line as they go by. */
static void keep_tail(jsonrpc_framer_t *f, const char *data, size_t n)
{
  if (n >= sizeof f->tail) {
    memcpy(f->tail, data + n - sizeof f->tail, sizeof f->tail);
    f->tail_len = sizeof f->tail;
    return;
  }
  size_t keep = f->tail_len + n > sizeof f->tail ? sizeof f->tail - n : f->tail_len;
  memmove(f->tail, f->tail + f->tail_len - keep, keep);
  memcpy(f->tail + keep, data, n);
  f->tail_len = keep + n;
}

/* An oversize line starts with line[0..n): keep its first bytes, and its last ones so far. */
static void oversize_start(jsonrpc_framer_t *f, const char *line, size_t n)
{
  f->head_len = n < sizeof f->head ? n : sizeof f->head;
  if (f->head_len > f->max_message)
    f->head_len = f->max_message;
  memcpy(f->head, line, f->head_len);
  f->tail_len = 0;
  keep_tail(f, line, n);
}

const char *jsonrpc_framer_tail(const jsonrpc_framer_t *f, size_t *ret_len)
{
  *ret_len = f->tail_len;
  return f->tail;
}

void jsonrpc_framer_trim(jsonrpc_framer_t *f, size_t keep)
{
  if (f->start < f->len || f->cap <= keep)
    return;
  free(f->buf);
  f->buf = NULL;
  f->start = f->len = f->cap = f->scanned = 0;
}

int jsonrpc_framer_push(jsonrpc_framer_t *f, const char *data, size_t n, sbx_error_t *err)
{
  if (f->discarding) {
    const char *nl = memchr(data, '\n', n);
    size_t upto = nl ? (size_t) (nl - data) : n;
    keep_tail(f, data, upto);
    if (!nl)
      return 0;
    n -= upto + 1;
    data = nl + 1;
    f->discarding = false;
    f->oversize_ready = true; /* reported at its end, when its last bytes (maybe its id) are here */
  }
  if (f->start > 0) {
    memmove(f->buf, f->buf + f->start, f->len - f->start);
    f->len -= f->start;
    f->start = 0;
  }
  if (f->len + n + 1 > f->cap) {
    size_t cap = f->cap ? f->cap : 4096;
    while (cap < f->len + n + 1)
      cap *= 2;
    char *b = realloc(f->buf, cap);
    if (!b)
      return sbx_error_set(err, ENOMEM, "buffer a %zu-byte message", f->len + n);
    f->buf = b;
    f->cap = cap;
  }
  memcpy(f->buf + f->len, data, n);
  f->len += n;
  return 0;
}

static bool blank(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
      return false;
  return true;
}

enum jsonrpc_frame jsonrpc_framer_next(jsonrpc_framer_t *f, const char **ret, size_t *ret_len)
{
  if (f->oversize_ready) {
    f->oversize_ready = false;
    *ret = f->head;
    *ret_len = f->head_len;
    return JSONRPC_FRAME_OVERSIZE;
  }
  if (!f->buf) /* nothing pushed yet (and NULL + 0 is undefined) */
    return JSONRPC_FRAME_NONE;
  for (;;) {
    size_t avail = f->len - f->start;
    char *line = f->buf + f->start;
    char *nl = avail > f->scanned ? memchr(line + f->scanned, '\n', avail - f->scanned) : NULL;
    if (!nl) {
      f->scanned = avail;
      if (avail <= f->max_message)
        return JSONRPC_FRAME_NONE;
      /* No newline within the limit: drop the line as it arrives, keeping its two ends, and
       * report it at its newline (jsonrpc_framer_push). */
      oversize_start(f, line, avail);
      f->start = f->len;
      f->scanned = 0;
      f->discarding = true;
      return JSONRPC_FRAME_NONE;
    }
    size_t n = (size_t) (nl - line);
    f->start += n + 1;
    f->scanned = 0;
    if (n > f->max_message) {
      oversize_start(f, line, n);
      *ret = f->head;
      *ret_len = f->head_len;
      return JSONRPC_FRAME_OVERSIZE;
    }
    if (blank(line, n))
      continue;
    if (line[n - 1] == '\r')
      n--;
    *ret = line;
    *ret_len = n;
    return JSONRPC_FRAME_MESSAGE;
  }
}

enum jsonrpc_frame jsonrpc_framer_finish(jsonrpc_framer_t *f, const char **ret, size_t *ret_len)
{
  enum jsonrpc_frame r = jsonrpc_framer_next(f, ret, ret_len);
  if (r != JSONRPC_FRAME_NONE)
    return r;
  size_t avail = f->len - f->start;
  const char *line = f->buf ? f->buf + f->start : NULL;
  f->start = f->len;
  f->scanned = 0;
  if (f->discarding || avail == 0 || blank(line, avail))
    return JSONRPC_FRAME_NONE;
  *ret = line;
  *ret_len = avail;
  return JSONRPC_FRAME_MESSAGE;
}

/* ------------------------------------------------------------------ messages */

char *jsonrpc_id_canonical(const json_node_t *id)
{
  char buf[32];
  switch (json_type(id)) {
  case JSON_INTEGER: {
    long long v = 0;
    json_as_int(id, &v);
    return bufprintf(buf, sizeof buf, NULL, "%lld", v) < 0 ? NULL : strdup(buf);
  }
  case JSON_NUMBER: /* JSON-RPC allows any number; echo it as written */
    return strdup(json_number_text(id));
  case JSON_STRING: {
    json_writer_t *w = json_writer_new();
    if (!w)
      return NULL;
    json_write_node(w, id);
    size_t n;
    const char *s = json_writer_buf(w, &n);
    char *r = s ? strndup(s, n) : NULL;
    json_writer_free(w);
    return r;
  }
  default:
    return NULL;
  }
}

static int fail_with(struct jsonrpc_failure *fail, int code, char *id, const char *fmt, const char *arg)
{
  fail->code = code;
  fail->id = id;
  sbx_error_set(&fail->detail, 0, fmt, arg);
  return -1;
}

int jsonrpc_parse(const char *buf, size_t len, struct jsonrpc_message *ret, struct jsonrpc_failure *fail)
{
  return jsonrpc_parse_cut(buf, len, SIZE_MAX, ret, fail);
}

int jsonrpc_parse_cut(const char *buf, size_t len, size_t keep, struct jsonrpc_message *ret,
                      struct jsonrpc_failure *fail)
{
  *fail = (struct jsonrpc_failure){0};
  json_node_t *root = NULL;
  sbx_error_t perr;
  if (json_parse_cut(buf, len, SIZE_MAX, keep, &root, &perr) < 0)
    return fail_with(fail, JSONRPC_PARSE_ERROR, NULL, "Parse error: %s", perr.msg);

  int r = -1;
  char *id = NULL;
  if (json_type(root) == JSON_ARRAY) {
    /* Batches left JSON-RPC use in MCP with 2025-06-18, and no client sends them. */
    fail_with(fail, JSONRPC_INVALID_REQUEST, NULL, "Invalid Request: %s", "batches are not supported");
    goto out;
  }
  if (json_type(root) != JSON_OBJECT) {
    fail_with(fail, JSONRPC_INVALID_REQUEST, NULL, "Invalid Request: %s", "a message must be a JSON object");
    goto out;
  }
  const json_node_t *idn = json_get(root, "id");
  if (idn && !(id = jsonrpc_id_canonical(idn))) {
    fail_with(fail, JSONRPC_INVALID_REQUEST, NULL, "Invalid Request: %s",
              "`id` must be a string or an integer");
    goto out;
  }
  const char *version = json_as_string(json_get(root, "jsonrpc"), NULL);
  if (!version || strcmp(version, "2.0") != 0) {
    fail_with(fail, JSONRPC_INVALID_REQUEST, TAKE_PTR(id), "Invalid Request: %s",
              "`jsonrpc` must be \"2.0\"");
    goto out;
  }
  const json_node_t *method = json_get(root, "method");
  if (!method) {
    if (id && (json_get(root, "result") || json_get(root, "error"))) {
      *ret = (struct jsonrpc_message){.kind = JSONRPC_RESPONSE, .root = root, .id = id};
      return 0;
    }
    fail_with(fail, JSONRPC_INVALID_REQUEST, TAKE_PTR(id), "Invalid Request: %s", "`method` is missing");
    goto out;
  }
  size_t mlen;
  const char *m = json_as_string(method, &mlen);
  if (!m || strlen(m) != mlen) {
    fail_with(fail, JSONRPC_INVALID_REQUEST, TAKE_PTR(id), "Invalid Request: %s",
              "`method` must be a string");
    goto out;
  }
  const json_node_t *params = json_get(root, "params");
  if (params && json_type(params) != JSON_OBJECT && json_type(params) != JSON_ARRAY) {
    fail_with(fail, JSONRPC_INVALID_REQUEST, TAKE_PTR(id), "Invalid Request: %s",
              "`params` must be an object or an array");
    goto out;
  }
  *ret = (struct jsonrpc_message){
      .kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION,
      .root = root,
      .method = m,
      .params = params,
      .id = id,
  };
  return 0;
out:
  free(id);
  json_free(root);
  return r;
}

static size_t ws_back(const char *s, size_t n)
{
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    n--;
  return n;
}

/* Where the value that ends at s[n) starts: a string without escapes or an integer, at most
 * 128 bytes; SIZE_MAX if it is neither. */
static size_t scalar_back(const char *s, size_t n)
{
  size_t i = n;
  if (n && s[n - 1] == '"') {
    for (i = n - 1; i > 0 && s[i - 1] != '"'; i--)
      if (s[i - 1] == '\\' || n - i > 130)
        return SIZE_MAX;
    return i > 0 ? i - 1 : SIZE_MAX;
  }
  while (i > 0 && ((s[i - 1] >= '0' && s[i - 1] <= '9') || s[i - 1] == '-') && n - i < 20)
    i--;
  return i < n ? i : SIZE_MAX;
}

/* The id of a message whose last bytes are s[0..n), if it is its last top-level member, or the
 * last but "jsonrpc": an integer or a string without escapes. Inside a string every quote is
 * escaped, so a `"key": value` just before the very last closing brace is a member. */
static char *tail_id(const char *s, size_t n)
{
  n = ws_back(s, n);
  if (!n || s[n - 1] != '}')
    return NULL;
  n--;
  for (int member = 0; member < 2; member++) {
    size_t vend = ws_back(s, n), vstart = scalar_back(s, vend);
    if (vstart == SIZE_MAX)
      return NULL;
    size_t k = ws_back(s, vstart);
    if (!k || s[k - 1] != ':')
      return NULL;
    size_t kend = ws_back(s, k - 1), kstart = scalar_back(s, kend);
    if (kstart == SIZE_MAX || s[kstart] != '"')
      return NULL;
    size_t before = ws_back(s, kstart);
    if (!before || (s[before - 1] != ',' && s[before - 1] != '{'))
      return NULL;
    const char *key = s + kstart + 1;
    size_t key_len = kend - kstart - 2;
    if (key_len == 2 && memcmp(key, "id", 2) == 0)
      return strndup(s + vstart, vend - vstart);
    if (key_len != 7 || memcmp(key, "jsonrpc", 7) != 0 || s[before - 1] != ',')
      return NULL;
    n = before - 1;
  }
  return NULL;
}

void jsonrpc_oversize(const char *prefix, size_t len, const char *tail, size_t tail_len, size_t max_message,
                      struct jsonrpc_failure *fail)
{
  *fail = (struct jsonrpc_failure){.code = JSONRPC_INVALID_REQUEST};
  /* Some clients write "id" before "params" (it is then in the first bytes), others last. */
  char *id = NULL;
  if (json_peek_member(prefix, len, "id", &id) == 0 && strcmp(id, "null") != 0 && id[0] != 't' &&
      id[0] != 'f')
    fail->id = id;
  else {
    free(id);
    fail->id = tail ? tail_id(tail, tail_len) : NULL;
  }
  sbx_error_set(&fail->detail, 0, "Invalid Request: message larger than the limit of %zu bytes", max_message);
}

void jsonrpc_message_clear(struct jsonrpc_message *m)
{
  json_free(m->root);
  free(m->id);
  *m = (struct jsonrpc_message){0};
}

void jsonrpc_failure_clear(struct jsonrpc_failure *f)
{
  free(f->id);
  f->id = NULL;
}

/* ------------------------------------------------------------------ replies */

static void write_id(json_writer_t *w, const char *id)
{
  if (id)
    json_raw(w, id, strlen(id));
  else
    json_null(w);
}

void jsonrpc_begin_result(json_writer_t *w, const char *id)
{
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_key(w, "id");
  write_id(w, id);
  json_key(w, "result");
}

void jsonrpc_begin_notification(json_writer_t *w, const char *method)
{
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_kv_str(w, "method", method);
  json_key(w, "params");
}

void jsonrpc_end(json_writer_t *w)
{
  json_obj_end(w);
}

void jsonrpc_write_error_data(json_writer_t *w, const char *id, int code, const char *message)
{
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_key(w, "id");
  write_id(w, id);
  json_key(w, "error");
  json_obj_begin(w);
  json_kv_int(w, "code", code);
  json_kv_str(w, "message", message);
  json_key(w, "data");
}

void jsonrpc_end_error_data(json_writer_t *w)
{
  json_obj_end(w);
  json_obj_end(w);
}

void jsonrpc_write_error(json_writer_t *w, const char *id, int code, const char *message)
{
  json_obj_begin(w);
  json_kv_str(w, "jsonrpc", "2.0");
  json_key(w, "id");
  write_id(w, id);
  json_key(w, "error");
  json_obj_begin(w);
  json_kv_int(w, "code", code);
  json_kv_str(w, "message", message);
  json_obj_end(w);
  json_obj_end(w);
}
