/* SPDX-License-Identifier: Apache-2.0 */
/* JSON generation and parsing over yajl. */
#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#include "base/util.h"

struct json_writer {
  yajl_gen g;
  int failed;
};

json_writer_t *json_writer_new(void)
{
  json_writer_t *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->g = yajl_gen_alloc(NULL);
  if (!w->g) {
    free(w);
    return NULL;
  }
  /* Escape '/' is off by default; keep output compact (one line) for JSON-RPC framing. */
  return w;
}

void json_writer_free(json_writer_t *w)
{
  if (!w)
    return;
  yajl_gen_free(w->g);
  free(w);
}

#define CHECK(w, call)                                                                                       \
  do {                                                                                                       \
    if ((call) != yajl_gen_status_ok)                                                                        \
      (w)->failed = 1;                                                                                       \
  } while (0)

void json_obj_begin(json_writer_t *w)
{
  CHECK(w, yajl_gen_map_open(w->g));
}
void json_obj_end(json_writer_t *w)
{
  CHECK(w, yajl_gen_map_close(w->g));
}
void json_arr_begin(json_writer_t *w)
{
  CHECK(w, yajl_gen_array_open(w->g));
}
void json_arr_end(json_writer_t *w)
{
  CHECK(w, yajl_gen_array_close(w->g));
}
void json_key(json_writer_t *w, const char *key)
{
  json_str(w, key);
}
void json_int(json_writer_t *w, long long v)
{
  CHECK(w, yajl_gen_integer(w->g, v));
}
void json_double(json_writer_t *w, double v)
{
  CHECK(w, yajl_gen_double(w->g, v));
}
void json_bool(json_writer_t *w, bool v)
{
  CHECK(w, yajl_gen_bool(w->g, v));
}
void json_null(json_writer_t *w)
{
  CHECK(w, yajl_gen_null(w->g));
}

void json_uint(json_writer_t *w, uint64_t v)
{
  char buf[32];
  if (bufprintf(buf, sizeof buf, NULL, "%llu", (unsigned long long) v) < 0)
    w->failed = 1;
  else
    CHECK(w, yajl_gen_number(w->g, buf, strlen(buf)));
}

void json_raw(json_writer_t *w, const char *json, size_t len)
{
  /* yajl_gen_number emits its argument verbatim, with correct separators around it. */
  CHECK(w, yajl_gen_number(w->g, json, len));
}

size_t json_utf8_len(const unsigned char *s, size_t n)
{
  unsigned char c = s[0];
  size_t len;
  unsigned cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
  } else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
    return 0;
  return len;
}

void json_strn(json_writer_t *w, const char *s, size_t len)
{
  const unsigned char *u = (const unsigned char *) s;
  size_t i = 0;
  while (i < len) {
    size_t l = json_utf8_len(u + i, len - i);
    if (!l)
      break;
    i += l;
  }
  if (i == len) {
    CHECK(w, yajl_gen_string(w->g, u, len));
    return;
  }
  /* Replace each invalid byte with U+FFFD (3 bytes): at most 3x the input. */
  unsigned char *fixed = malloc(len * 3 + 1);
  if (!fixed) {
    w->failed = 1;
    return;
  }
  size_t o = 0;
  for (i = 0; i < len;) {
    size_t l = json_utf8_len(u + i, len - i);
    if (l) {
      memcpy(fixed + o, u + i, l);
      o += l;
      i += l;
    } else {
      memcpy(fixed + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  CHECK(w, yajl_gen_string(w->g, fixed, o));
  free(fixed);
}

void json_str(json_writer_t *w, const char *s)
{
  json_strn(w, s, strlen(s));
}

void json_kv_str(json_writer_t *w, const char *key, const char *s)
{
  json_key(w, key);
  json_str(w, s);
}
void json_kv_strn(json_writer_t *w, const char *key, const char *s, size_t len)
{
  json_key(w, key);
  json_strn(w, s, len);
}
void json_kv_str_or_null(json_writer_t *w, const char *key, const char *s)
{
  json_key(w, key);
  if (s)
    json_str(w, s);
  else
    json_null(w);
}
void json_kv_int(json_writer_t *w, const char *key, long long v)
{
  json_key(w, key);
  json_int(w, v);
}
void json_kv_uint(json_writer_t *w, const char *key, uint64_t v)
{
  json_key(w, key);
  json_uint(w, v);
}
void json_kv_double(json_writer_t *w, const char *key, double v)
{
  json_key(w, key);
  json_double(w, v);
}
void json_kv_bool(json_writer_t *w, const char *key, bool v)
{
  json_key(w, key);
  json_bool(w, v);
}
void json_kv_null(json_writer_t *w, const char *key)
{
  json_key(w, key);
  json_null(w);
}
void json_kv_raw(json_writer_t *w, const char *key, const char *json, size_t len)
{
  json_key(w, key);
  json_raw(w, json, len);
}

const char *json_writer_buf(json_writer_t *w, size_t *ret_len)
{
  const unsigned char *buf;
  size_t len;
  if (w->failed || yajl_gen_get_buf(w->g, &buf, &len) != yajl_gen_status_ok)
    return NULL;
  if (ret_len)
    *ret_len = len;
  return (const char *) buf;
}

/* ------------------------------------------------------------------ reading */

/* Our own small tree, built from yajl's event parser rather than yajl_tree: yajl_tree needs a
 * NUL-terminated buffer, turns on comments, loses string lengths ("\u0000") and has no depth limit
 * (its recursive free would overflow the stack on a deeply nested message). */
struct json_node {
  json_type_t type;
  union {
    bool b;
    struct {
      long long i; /* valid for JSON_INTEGER */
      char *text;  /* as written */
    } num;
    struct {
      char *s;
      size_t len;
    } str;
    struct {
      json_node_t **items;
      char **keys; /* objects only */
      size_t len, cap;
    } c;
  } u;
};

void json_free(json_node_t *n)
{
  if (!n)
    return;
  switch (n->type) {
  case JSON_INTEGER:
  case JSON_NUMBER:
    free(n->u.num.text);
    break;
  case JSON_STRING:
    free(n->u.str.s);
    break;
  case JSON_ARRAY:
  case JSON_OBJECT:
    for (size_t i = 0; i < n->u.c.len; i++) {
      json_free(n->u.c.items[i]);
      if (n->u.c.keys)
        free(n->u.c.keys[i]);
    }
    free(n->u.c.items);
    free(n->u.c.keys);
    break;
  default:
    break;
  }
  free(n);
}

struct build_ctx {
  json_node_t *root;
  json_node_t *stack[JSON_MAX_DEPTH];
  size_t depth;
  char *key; /* pending object key */
  size_t values, max_values;
  size_t keep; /* the most bytes of a string, key or number the tree holds (json_parse_cut) */
  bool too_deep, too_many, oom;
};

/* One more value: within the budget? Checked before anything is allocated for it. */
static bool spend(struct build_ctx *c)
{
  if (c->values++ < c->max_values)
    return true;
  c->too_many = true;
  return false;
}

/* How much of s[0..len) the tree keeps: all, or keep bytes cut back to a character boundary. */
static size_t kept(const struct build_ctx *c, const unsigned char *s, size_t len)
{
  if (len <= c->keep)
    return len;
  size_t n = c->keep;
  while (n > 0 && (s[n] & 0xc0) == 0x80)
    n--;
  return n;
}

static char *memdup_nul(const void *s, size_t len)
{
  char *p = malloc(len + 1);
  if (p) {
    memcpy(p, s, len);
    p[len] = '\0';
  }
  return p;
}

/* Attach n to the current container (or make it the root). Takes n. */
static int build_add(struct build_ctx *c, json_node_t *n)
{
  if (!n) {
    c->oom = true;
    return 0;
  }
  if (c->depth == 0) {
    c->root = n;
    return 1;
  }
  json_node_t *parent = c->stack[c->depth - 1];
  bool is_obj = parent->type == JSON_OBJECT;
  if (parent->u.c.len == parent->u.c.cap) {
    size_t cap = parent->u.c.cap ? parent->u.c.cap * 2 : 4;
    json_node_t **items = realloc(parent->u.c.items, cap * sizeof *items);
    if (items)
      parent->u.c.items = items;
    char **keys = NULL;
    if (items && is_obj) {
      keys = realloc(parent->u.c.keys, cap * sizeof *keys);
      if (keys)
        parent->u.c.keys = keys;
    }
    if (!items || (is_obj && !keys)) {
      json_free(n);
      c->oom = true;
      return 0;
    }
    parent->u.c.cap = cap;
  }
  if (is_obj) {
    parent->u.c.keys[parent->u.c.len] = c->key;
    c->key = NULL;
  }
  parent->u.c.items[parent->u.c.len++] = n;
  return 1;
}

static json_node_t *node_new(json_type_t t)
{
  json_node_t *n = calloc(1, sizeof *n);
  if (n)
    n->type = t;
  return n;
}

static int cb_null(void *ctx)
{
  return spend(ctx) && build_add(ctx, node_new(JSON_NULL));
}

static int cb_bool(void *ctx, int v)
{
  if (!spend(ctx))
    return 0;
  json_node_t *n = node_new(JSON_BOOL);
  if (n)
    n->u.b = v;
  return build_add(ctx, n);
}

static int cb_number(void *ctx, const char *s, size_t len)
{
  if (!spend(ctx))
    return 0;
  json_node_t *n = node_new(JSON_NUMBER);
  len = kept(ctx, (const unsigned char *) s, len);
  if (n && !(n->u.num.text = memdup_nul(s, len))) {
    free(n);
    n = NULL;
  }
  if (n && !memchr(s, '.', len) && !memchr(s, 'e', len) && !memchr(s, 'E', len)) {
    char *end;
    errno = 0;
    long long v = strtoll(n->u.num.text, &end, 10);
    if (errno == 0 && *end == '\0') {
      n->type = JSON_INTEGER;
      n->u.num.i = v;
    }
  }
  return build_add(ctx, n);
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
  if (!spend(ctx))
    return 0;
  json_node_t *n = node_new(JSON_STRING);
  len = kept(ctx, s, len);
  if (n && !(n->u.str.s = memdup_nul(s, len))) {
    free(n);
    n = NULL;
  }
  if (n)
    n->u.str.len = len;
  return build_add(ctx, n);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t len)
{
  struct build_ctx *c = ctx;
  if (!spend(c))
    return 0;
  free(c->key);
  c->key = memdup_nul(s, kept(c, s, len));
  if (!c->key)
    c->oom = true;
  return c->key != NULL;
}

static int cb_open(struct build_ctx *c, json_type_t t)
{
  if (c->depth == JSON_MAX_DEPTH) {
    c->too_deep = true;
    return 0;
  }
  if (!spend(c))
    return 0;
  json_node_t *n = node_new(t);
  if (!build_add(c, n))
    return 0;
  c->stack[c->depth++] = n;
  return 1;
}

static int cb_start_map(void *ctx)
{
  return cb_open(ctx, JSON_OBJECT);
}
static int cb_start_array(void *ctx)
{
  return cb_open(ctx, JSON_ARRAY);
}

static int cb_close(void *ctx)
{
  struct build_ctx *c = ctx;
  c->depth--;
  return 1;
}

static const yajl_callbacks build_callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_close,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_close,
};

int json_parse(const char *buf, size_t len, json_node_t **ret, sbx_error_t *err)
{
  return json_parse_bounded(buf, len, SIZE_MAX, ret, err);
}

int json_parse_bounded(const char *buf, size_t len, size_t max_values, json_node_t **ret, sbx_error_t *err)
{
  return json_parse_cut(buf, len, max_values, SIZE_MAX, ret, err);
}

int json_parse_cut(const char *buf, size_t len, size_t max_values, size_t keep, json_node_t **ret,
                   sbx_error_t *err)
{
  struct build_ctx c = {.max_values = max_values, .keep = keep};
  if (memchr(buf, '\0', len))
    return sbx_error_set(err, 0, "parse error: NUL byte in input");
  yajl_handle h = yajl_alloc(&build_callbacks, NULL, &c);
  if (!h)
    return sbx_error_set(err, ENOMEM, "parse");
  yajl_status st = yajl_parse(h, (const unsigned char *) buf, len);
  if (st == yajl_status_ok)
    st = yajl_complete_parse(h);
  int r = 0;
  if (st != yajl_status_ok || !c.root) {
    if (c.oom)
      r = sbx_error_set(err, ENOMEM, "parse");
    else if (c.too_deep)
      r = sbx_error_set(err, 0, "parse error: nested deeper than %d levels", JSON_MAX_DEPTH);
    else if (c.too_many) {
      r = sbx_error_set(err, 0, "more than %zu JSON values, the limit", max_values);
      err->errnum = E2BIG;
    } else {
      unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *) buf, len);
      r = sbx_error_set(err, 0, "%s", msg ? (const char *) msg : "parse error");
      /* yajl's messages end with a newline; keep the error to one line. */
      err->msg[strcspn(err->msg, "\n")] = '\0';
      if (msg)
        yajl_free_error(h, msg);
    }
    json_free(c.root);
  } else
    *ret = c.root;
  free(c.key);
  yajl_free(h);
  return r;
}

json_type_t json_type(const json_node_t *n)
{
  return n ? n->type : JSON_NULL;
}

const char *json_type_name(json_type_t t)
{
  static const char *const names[] = {
      [JSON_NULL] = "null",     [JSON_BOOL] = "boolean", [JSON_INTEGER] = "integer", [JSON_NUMBER] = "number",
      [JSON_STRING] = "string", [JSON_ARRAY] = "array",  [JSON_OBJECT] = "object",
  };
  return (unsigned) t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

json_node_t *json_get(const json_node_t *obj, const char *key)
{
  if (!obj || obj->type != JSON_OBJECT)
    return NULL;
  for (size_t i = 0; i < obj->u.c.len; i++)
    if (strcmp(obj->u.c.keys[i], key) == 0)
      return obj->u.c.items[i];
  return NULL;
}

const char *json_as_string(const json_node_t *n, size_t *ret_len)
{
  if (!n || n->type != JSON_STRING)
    return NULL;
  if (ret_len)
    *ret_len = n->u.str.len;
  return n->u.str.s;
}

int json_as_int(const json_node_t *n, long long *ret)
{
  if (!n)
    return -1;
  if (n->type == JSON_INTEGER) {
    *ret = n->u.num.i;
    return 0;
  }
  if (n->type == JSON_NUMBER) {
    /* JSON Schema's "integer" includes 5.0. */
    char *end;
    errno = 0;
    double d = strtod(n->u.num.text, &end);
    if (errno == 0 && *end == '\0' && d >= -9.2e18 && d <= 9.2e18 && d == (double) (long long) d) {
      *ret = (long long) d;
      return 0;
    }
  }
  return -1;
}

int json_as_bool(const json_node_t *n, bool *ret)
{
  if (!n || n->type != JSON_BOOL)
    return -1;
  *ret = n->u.b;
  return 0;
}

const char *json_number_text(const json_node_t *n)
{
  return n && (n->type == JSON_INTEGER || n->type == JSON_NUMBER) ? n->u.num.text : NULL;
}

size_t json_array_len(const json_node_t *arr)
{
  return arr && arr->type == JSON_ARRAY ? arr->u.c.len : 0;
}

json_node_t *json_array_at(const json_node_t *arr, size_t i)
{
  return i < json_array_len(arr) ? arr->u.c.items[i] : NULL;
}

size_t json_object_len(const json_node_t *obj)
{
  return obj && obj->type == JSON_OBJECT ? obj->u.c.len : 0;
}

int json_object_at(const json_node_t *obj, size_t i, const char **ret_key, json_node_t **ret_value)
{
  if (i >= json_object_len(obj))
    return -1;
  if (ret_key)
    *ret_key = obj->u.c.keys[i];
  if (ret_value)
    *ret_value = obj->u.c.items[i];
  return 0;
}

void json_write_node(json_writer_t *w, const json_node_t *n)
{
  switch (json_type(n)) {
  case JSON_NULL:
    json_null(w);
    break;
  case JSON_BOOL:
    json_bool(w, n->u.b);
    break;
  case JSON_INTEGER:
  case JSON_NUMBER:
    json_raw(w, n->u.num.text, strlen(n->u.num.text));
    break;
  case JSON_STRING:
    json_strn(w, n->u.str.s, n->u.str.len);
    break;
  case JSON_ARRAY:
    json_arr_begin(w);
    for (size_t i = 0; i < n->u.c.len; i++)
      json_write_node(w, n->u.c.items[i]);
    json_arr_end(w);
    break;
  case JSON_OBJECT:
    json_obj_begin(w);
    for (size_t i = 0; i < n->u.c.len; i++) {
      json_key(w, n->u.c.keys[i]);
      json_write_node(w, n->u.c.items[i]);
    }
    json_obj_end(w);
    break;
  }
}

/* ---- checking a document as it arrives ---- */

struct json_check {
  yajl_handle h;
  size_t values, max_values;
};

static int ck_value(void *ctx)
{
  struct json_check *c = ctx;
  return c->values++ < c->max_values;
}
static int ck_bool(void *ctx, int v)
{
  (void) v;
  return ck_value(ctx);
}
static int ck_number(void *ctx, const char *s, size_t len)
{
  (void) s;
  (void) len;
  return ck_value(ctx);
}
static int ck_string(void *ctx, const unsigned char *s, size_t len)
{
  (void) s;
  (void) len;
  return ck_value(ctx);
}
static int ck_close(void *ctx)
{
  (void) ctx;
  return 1;
}

/* Every value counts one, as build_callbacks' spend(). */
static const yajl_callbacks check_callbacks = {
    .yajl_null = ck_value,
    .yajl_boolean = ck_bool,
    .yajl_number = ck_number,
    .yajl_string = ck_string,
    .yajl_start_map = ck_value,
    .yajl_map_key = ck_string,
    .yajl_end_map = ck_close,
    .yajl_start_array = ck_value,
    .yajl_end_array = ck_close,
};

json_check_t *json_check_new(size_t max_values)
{
  struct json_check *c = calloc(1, sizeof *c);
  if (c && !(c->h = yajl_alloc(&check_callbacks, NULL, c))) {
    free(c);
    return NULL;
  }
  if (c)
    c->max_values = max_values;
  return c;
}

int json_check_feed(json_check_t *c, const char *buf, size_t len, sbx_error_t *err)
{
  if (memchr(buf, '\0', len))
    return sbx_error_set(err, 0, "parse error: NUL byte in input");
  if (yajl_parse(c->h, (const unsigned char *) buf, len) == yajl_status_ok)
    return 0;
  if (c->values > c->max_values) {
    sbx_error_set(err, 0, "more than %zu JSON values, the limit", c->max_values);
    err->errnum = E2BIG;
    return -1;
  }
  unsigned char *msg = yajl_get_error(c->h, 0, (const unsigned char *) buf, len);
  sbx_error_set(err, 0, "%s", msg ? (const char *) msg : "parse error");
  err->msg[strcspn(err->msg, "\n")] = '\0';
  if (msg)
    yajl_free_error(c->h, msg);
  return -1;
}

void json_check_free(json_check_t *c)
{
  if (!c)
    return;
  yajl_free(c->h);
  free(c);
}

/* ---- peeking into a truncated document ---- */

struct peek_ctx {
  const char *key;
  size_t depth;
  bool at_key; /* the last top-level key was `key` */
  json_writer_t *w;
  bool found;
};

static int peek_scalar(struct peek_ctx *p)
{
  /* A value at depth 1 right after the wanted key: we have it, stop parsing. */
  if (p->depth == 1 && p->at_key) {
    p->found = true;
    return 0;
  }
  if (p->depth == 1)
    p->at_key = false;
  return 1;
}

static int pk_null(void *ctx)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 1 && p->at_key)
    json_null(p->w);
  return peek_scalar(p);
}

static int pk_bool(void *ctx, int v)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 1 && p->at_key)
    json_bool(p->w, v);
  return peek_scalar(p);
}

static int pk_number(void *ctx, const char *s, size_t len)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 1 && p->at_key)
    json_raw(p->w, s, len);
  return peek_scalar(p);
}

static int pk_string(void *ctx, const unsigned char *s, size_t len)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 1 && p->at_key)
    json_strn(p->w, (const char *) s, len);
  return peek_scalar(p);
}

static int pk_key(void *ctx, const unsigned char *s, size_t len)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 1)
    p->at_key = strlen(p->key) == len && memcmp(s, p->key, len) == 0;
  return 1;
}

static int pk_open(void *ctx)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 1)
    p->at_key = false; /* the wanted member is a container: not a scalar */
  p->depth++;
  return 1;
}

static int pk_open_array(void *ctx)
{
  struct peek_ctx *p = ctx;
  if (p->depth == 0)
    return 0; /* the top level is not an object */
  return pk_open(ctx);
}

static int pk_close(void *ctx)
{
  struct peek_ctx *p = ctx;
  p->depth--;
  return 1;
}

static const yajl_callbacks peek_callbacks = {
    .yajl_null = pk_null,
    .yajl_boolean = pk_bool,
    .yajl_number = pk_number,
    .yajl_string = pk_string,
    .yajl_start_map = pk_open,
    .yajl_map_key = pk_key,
    .yajl_end_map = pk_close,
    .yajl_start_array = pk_open_array,
    .yajl_end_array = pk_close,
};

int json_peek_member(const char *buf, size_t len, const char *key, char **ret_json)
{
  struct peek_ctx p = {.key = key};
  p.w = json_writer_new();
  if (!p.w)
    return -1;
  yajl_handle h = yajl_alloc(&peek_callbacks, NULL, &p);
  if (!h) {
    json_writer_free(p.w);
    return -1;
  }
  /* Parse whatever is there; a cut-off document simply stops. */
  (void) yajl_parse(h, (const unsigned char *) buf, len);
  yajl_free(h);
  int r = -1;
  size_t n;
  const char *out = json_writer_buf(p.w, &n);
  if (p.found && out && n > 0) {
    *ret_json = memdup_nul(out, n);
    r = *ret_json ? 0 : -1;
  }
  json_writer_free(p.w);
  return r;
}
