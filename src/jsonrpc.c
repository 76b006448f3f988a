/* JSON-RPC 2.0 framing and message validation (https://www.jsonrpc.org/specification). */
#include "jsonrpc.h"

#include "cleanup.h"
#include "util.h"

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

int jsonrpc_framer_push(jsonrpc_framer_t *f, const char *data, size_t n, sbx_error_t *err)
{
  if (f->discarding) {
    const char *nl = memchr(data, '\n', n);
    if (!nl)
      return 0;
    n -= (size_t) (nl + 1 - data);
    data = nl + 1;
    f->discarding = false;
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
      /* No newline within the limit: report the line now and drop the rest of it as it arrives. */
      f->start = f->len;
      f->scanned = 0;
      f->discarding = true;
      *ret = line;
      *ret_len = f->max_message;
      return JSONRPC_FRAME_OVERSIZE;
    }
    size_t n = (size_t) (nl - line);
    f->start += n + 1;
    f->scanned = 0;
    if (n > f->max_message) {
      *ret = line;
      *ret_len = f->max_message;
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
  *fail = (struct jsonrpc_failure){0};
  json_node_t *root = NULL;
  sbx_error_t perr;
  if (json_parse(buf, len, &root, &perr) < 0)
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

void jsonrpc_oversize(const char *prefix, size_t len, size_t max_message, struct jsonrpc_failure *fail)
{
  *fail = (struct jsonrpc_failure){.code = JSONRPC_INVALID_REQUEST};
  /* Clients write "id" before "params", so the id is usually in the part we kept. */
  char *id = NULL;
  if (json_peek_member(prefix, len, "id", &id) == 0 && strcmp(id, "null") != 0 && id[0] != 't' &&
      id[0] != 'f')
    fail->id = id;
  else
    free(id);
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
