/* Unit tests for src/base/jsonrpc.c and the parsing half of src/base/json.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/jsonrpc.h"
#include "base/util.h"
#include "mcp/mcp_server.h"

static int passed, failed;

#define CHECK(cond)                                                                                          \
  do {                                                                                                       \
    if (cond)                                                                                                \
      passed++;                                                                                              \
    else {                                                                                                   \
      failed++;                                                                                              \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                        \
    }                                                                                                        \
  } while (0)

static bool streq(const char *a, const char *b)
{
  return a && b && strcmp(a, b) == 0;
}

/* ---- json tree ---- */

static json_node_t *parse(const char *s)
{
  json_node_t *n = NULL;
  sbx_error_t err;
  if (json_parse(s, strlen(s), &n, &err) < 0)
    return NULL;
  return n;
}

static void test_json_tree(void)
{
  json_node_t *n = parse("{\"a\":1,\"b\":\"x\\u0000y\",\"c\":[true,null,2.5,5.0,1e2],\"d\":{},"
                         "\"big\":123456789012345678901234567890,\"a\":2}");
  CHECK(n != NULL);
  CHECK(json_type(n) == JSON_OBJECT);
  CHECK(json_object_len(n) == 6);
  long long v = -1;
  CHECK(json_as_int(json_get(n, "a"), &v) == 0 && v == 1); /* first duplicate wins */
  size_t len = 0;
  const char *s = json_as_string(json_get(n, "b"), &len);
  CHECK(s && len == 3 && memcmp(s, "x\0y", 3) == 0);
  const json_node_t *c = json_get(n, "c");
  CHECK(json_array_len(c) == 5);
  bool b = false;
  CHECK(json_as_bool(json_array_at(c, 0), &b) == 0 && b);
  CHECK(json_type(json_array_at(c, 1)) == JSON_NULL);
  CHECK(json_as_int(json_array_at(c, 2), &v) < 0);
  CHECK(json_as_int(json_array_at(c, 3), &v) == 0 && v == 5);
  CHECK(json_as_int(json_array_at(c, 4), &v) == 0 && v == 100);
  CHECK(json_array_at(c, 5) == NULL);
  CHECK(json_type(json_get(n, "big")) == JSON_NUMBER);
  CHECK(streq(json_number_text(json_get(n, "big")), "123456789012345678901234567890"));
  CHECK(json_get(n, "missing") == NULL);
  CHECK(json_get(c, "a") == NULL);           /* not an object */
  CHECK(json_as_string(NULL, NULL) == NULL); /* NULL-safe */
  const char *key = NULL;
  json_node_t *val = NULL;
  CHECK(json_object_at(n, 5, &key, &val) == 0 && streq(key, "a"));
  CHECK(json_object_at(n, 6, &key, &val) < 0);

  json_writer_t *w = json_writer_new();
  json_write_node(w, json_get(n, "c"));
  CHECK(streq(json_writer_buf(w, NULL), "[true,null,2.5,5.0,1e2]"));
  json_writer_free(w);
  json_free(n);
}

static void test_json_reject(void)
{
  static const char *const bad[] = {
      "",           "{",   "{\"a\":}", "[1,]",       "{} {}",         "{}x",
      "/* c */ {}", "nul", "\"\xff\"", "{\"a\":1,}", "[\"\\uZZZZ\"]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_node_t *n = NULL;
    sbx_error_t err;
    int r = json_parse(bad[i], strlen(bad[i]), &n, &err);
    CHECK(r < 0 && n == NULL && !strchr(err.msg, '\n'));
  }
  /* Embedded NUL */
  json_node_t *n = NULL;
  sbx_error_t err;
  CHECK(json_parse("{}\0", 3, &n, &err) < 0);
  /* Not NUL-terminated input is fine */
  CHECK(json_parse("[1]xxxx", 3, &n, &err) == 0 && json_array_len(n) == 1);
  json_free(n);

  /* Depth: JSON_MAX_DEPTH levels pass, one more fails, a million fail fast. */
  char deep[2 * JSON_MAX_DEPTH + 3];
  memset(deep, '[', JSON_MAX_DEPTH);
  memset(deep + JSON_MAX_DEPTH, ']', JSON_MAX_DEPTH);
  CHECK(json_parse(deep, 2 * JSON_MAX_DEPTH, &n, &err) == 0);
  json_free(n);
  memset(deep, '[', JSON_MAX_DEPTH + 1);
  memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
  CHECK(json_parse(deep, 2 * JSON_MAX_DEPTH + 2, &n, &err) < 0 && strstr(err.msg, "deeper"));
  size_t big = 1000000;
  char *huge = malloc(big);
  memset(huge, '[', big);
  CHECK(json_parse(huge, big, &n, &err) < 0);
  free(huge);

  /* A value budget: every scalar, container and key counts; one over fails with E2BIG. */
  const char *doc = "{\"a\":[1,2,\"x\"],\"b\":null}"; /* object, a, array, 1, 2, "x", b, null: 8 */
  CHECK(json_parse_bounded(doc, strlen(doc), 8, &n, &err) == 0 && json_array_len(json_get(n, "a")) == 3);
  json_free(n);
  err.errnum = 0;
  CHECK(json_parse_bounded(doc, strlen(doc), 7, &n, &err) < 0 && err.errnum == E2BIG &&
        strstr(err.msg, "more than 7"));
  CHECK(json_parse_bounded("[]", 2, 0, &n, &err) < 0 && err.errnum == E2BIG);
}

static void test_json_peek(void)
{
  char *id = NULL;
  const char *m = "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"code\":\"xxxx";
  CHECK(json_peek_member(m, strlen(m), "id", &id) == 0 && streq(id, "42"));
  free(id);
  m = "{\"params\":{\"id\":1},\"id\":\"a\\\"b\",\"x\":";
  CHECK(json_peek_member(m, strlen(m), "id", &id) == 0 && streq(id, "\"a\\\"b\""));
  free(id);
  m = "{\"jsonrpc\":\"2.0\",\"params\":{\"id\":7,\"code\":\"xxxxxxx";
  CHECK(json_peek_member(m, strlen(m), "id", &id) < 0);
  m = "[{\"id\":1}";
  CHECK(json_peek_member(m, strlen(m), "id", &id) < 0);
  m = "garbage";
  CHECK(json_peek_member(m, strlen(m), "id", &id) < 0);
  m = "{\"id\":{\"a\":1}, \"b\":2";
  CHECK(json_peek_member(m, strlen(m), "id", &id) < 0);
}

/* A member as written, and the text without its white space: what the proxy passes on without
 * writing it again. */
static void test_json_span_minify(void)
{
  size_t off = 0, len = 0;
  const char *d = " { \"id\" : 1 , \"params\":{\"a\":\"x\\\"}y\",\"b\":[1,{\"c\":\"]\"}]} ,\"params\":2 }";
  CHECK(json_member_span(d, strlen(d), "params", &off, &len) == 0 &&
        len == strlen("{\"a\":\"x\\\"}y\",\"b\":[1,{\"c\":\"]\"}]}") && d[off] == '{' &&
        d[off + len - 1] == '}');
  const char *params = d + off;
  CHECK(json_member_span(params, len, "b", &off, &len) == 0 &&
        !strncmp(params + off, "[1,{\"c\":\"]\"}]", len));
  CHECK(json_member_span(d, strlen(d), "id", &off, &len) == 0 && len == 1 && d[off] == '1');
  CHECK(json_member_span(d, strlen(d), "nope", &off, &len) < 0);
  /* An escaped key before the one asked for: json_get would decode it, so no answer here. */
  d = "{\"p\\u0061rams\":1,\"params\":2}";
  CHECK(json_member_span(d, strlen(d), "params", &off, &len) < 0);
  CHECK(json_member_span("[1]", 3, "a", &off, &len) < 0 && json_member_span("{}", 2, "a", &off, &len) < 0);
  char m[] = "{ \"a\" :\n [ 1 ,\t\"b c\\\" d\" ]\r\n}";
  size_t n = json_minify(m, strlen(m));
  CHECK(n == strlen("{\"a\":[1,\"b c\\\" d\"]}") && !strncmp(m, "{\"a\":[1,\"b c\\\" d\"]}", n));
}

/* A tree that holds at most `keep` bytes of each string, key and number, cut at a character
 * boundary; the whole document is still checked. */
static void test_json_parse_cut(void)
{
  json_node_t *n = NULL;
  sbx_error_t err;
  const char *d = "{\"name\":\"abc\",\"long\":\"\xc3\xa9\xc3\xa9\xc3\xa9\",\"n\":123456,\"abcdefgh\":1}";
  CHECK(json_parse_cut(d, strlen(d), 100, 4, &n, &err) == 0);
  size_t len = 0;
  const char *s = json_as_string(json_get(n, "long"), &len);
  CHECK(s && len == 4 && !strcmp(s, "\xc3\xa9\xc3\xa9"));
  CHECK(streq(json_as_string(json_get(n, "name"), NULL), "abc"));
  CHECK(streq(json_number_text(json_get(n, "n")), "1234") && json_get(n, "abcd") && !json_get(n, "abcdefgh"));
  json_free(n);
  d = "{\"long\":\"\xc3\xa9\xc3\xa9\xc3\"}"; /* invalid UTF-8 past the part kept */
  CHECK(json_parse_cut(d, strlen(d), 100, 4, &n, &err) < 0);
}

/* A document checked in pieces: its syntax and its value budget, before it is whole. */
static void test_json_check(void)
{
  sbx_error_t err = {0};
  json_check_t *c = json_check_new(4);
  CHECK(c && json_check_feed(c, "{\"a\":[1,", 8, &err) == 0 && json_check_feed(c, "2", 1, &err) == 0);
  CHECK(c && json_check_feed(c, ",3]", 3, &err) < 0 && err.errnum == E2BIG);
  json_check_free(c);
  c = json_check_new(100);
  err = (sbx_error_t){0};
  CHECK(c && json_check_feed(c, "{\"a\":\"lo", 8, &err) == 0 && json_check_feed(c, "ng\"}x", 5, &err) < 0 &&
        err.errnum != E2BIG);
  json_check_free(c);
}

static void test_json_strn_utf8(void)
{
  json_writer_t *w = json_writer_new();
  json_strn(w,
            "a\xff"
            "b\xc3",
            4);
  CHECK(streq(json_writer_buf(w, NULL), "\"a\xef\xbf\xbd"
                                        "b\xef\xbf\xbd\""));
  json_writer_free(w);
}

/* Each json_kv_* writes its key and then its value, as the two calls would. */
static void test_json_kv(void)
{
  json_writer_t *w = json_writer_new();
  json_obj_begin(w);
  json_kv_str(w, "s", "x\"y");
  json_kv_strn(w, "n", "ab\xff", 3);
  json_kv_str_or_null(w, "some", "v");
  json_kv_str_or_null(w, "none", NULL);
  json_kv_int(w, "i", -42);
  json_kv_uint(w, "u", UINT64_MAX);
  json_kv_double(w, "d", 1.5);
  json_kv_bool(w, "t", true);
  json_kv_bool(w, "f", false);
  json_kv_null(w, "z");
  json_kv_raw(w, "r", "[1,{}]", 6);
  json_obj_end(w);
  CHECK(streq(json_writer_buf(w, NULL), "{\"s\":\"x\\\"y\",\"n\":\"ab\xef\xbf\xbd\",\"some\":\"v\","
                                        "\"none\":null,\"i\":-42,\"u\":18446744073709551615,"
                                        "\"d\":1.5,\"t\":true,\"f\":false,\"z\":null,\"r\":[1,{}]}"));
  json_writer_free(w);
}

/* ---- framing ---- */

static enum jsonrpc_frame next(jsonrpc_framer_t *f, char *out, size_t outlen)
{
  const char *p;
  size_t n;
  enum jsonrpc_frame r = jsonrpc_framer_next(f, &p, &n);
  if (r != JSONRPC_FRAME_NONE) {
    size_t k = n < outlen - 1 ? n : outlen - 1;
    memcpy(out, p, k);
    out[k] = '\0';
  }
  return r;
}

static void push(jsonrpc_framer_t *f, const char *s)
{
  sbx_error_t err;
  jsonrpc_framer_push(f, s, strlen(s), &err);
}

static void test_framer(void)
{
  jsonrpc_framer_t f;
  char buf[64];
  jsonrpc_framer_init(&f, 16);
  push(&f, "{\"a\":1}\n\n  \r\n{\"b\"");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "{\"a\":1}"));
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_NONE);
  push(&f, ":2}\r\n");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "{\"b\":2}"));
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_NONE);
  /* Everything taken: a buffer above the size kept is given back, and the next push works. */
  jsonrpc_framer_trim(&f, 1u << 20);
  CHECK(f.buf != NULL);
  jsonrpc_framer_trim(&f, 16);
  CHECK(f.buf == NULL && f.cap == 0);
  push(&f, "{\"c\":3}\n");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "{\"c\":3}"));

  /* Exactly the limit passes; one more byte is oversize, in one push or across many. */
  push(&f, "0123456789abcdef\n0123456789abcdefX\n1\n");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "0123456789abcdef"));
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_OVERSIZE && streq(buf, "0123456789abcdef"));
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "1"));
  /* A line without a newline within the limit is dropped as it arrives and reported at its end,
   * with its first bytes and (jsonrpc_framer_tail) its last ones, where some clients put the id. */
  push(&f, "{\"id\":3,\"params\":");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_NONE);
  for (int i = 0; i < 1000; i++)
    push(&f, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  CHECK(f.cap <= 4096); /* dropped bytes are not buffered */
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_NONE);
  push(&f, "xx,\"id\":9}\n{\"c\":3}\n");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_OVERSIZE && streq(buf, "{\"id\":3,\"params\""));
  size_t tl;
  const char *tail = jsonrpc_framer_tail(&f, &tl);
  CHECK(tl == JSONRPC_OVERSIZE_KEEP && memcmp(tail + tl - 11, "xxx,\"id\":9}", 11) == 0);
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "{\"c\":3}"));
  /* Ended within one push: the tail is that line's end. */
  push(&f, "{\"method\":\"x\",\"params\":\"yyyyyyyy\",\"id\":\"q\"}\n");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_OVERSIZE && streq(buf, "{\"method\":\"x\",\"p"));
  tail = jsonrpc_framer_tail(&f, &tl);
  CHECK(tl == 43 && memcmp(tail + tl - 10, ",\"id\":\"q\"}", 10) == 0);

  /* Byte at a time */
  const char *msg = "{\"d\":4}\n";
  for (const char *p = msg; *p; p++) {
    sbx_error_t err;
    jsonrpc_framer_push(&f, p, 1, &err);
    if (p[1])
      CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_NONE);
  }
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_MESSAGE && streq(buf, "{\"d\":4}"));

  /* Unterminated last line at EOF */
  push(&f, "{\"e\":5}");
  CHECK(next(&f, buf, sizeof buf) == JSONRPC_FRAME_NONE);
  const char *p;
  size_t n;
  CHECK(jsonrpc_framer_finish(&f, &p, &n) == JSONRPC_FRAME_MESSAGE && n == 7 &&
        memcmp(p, "{\"e\":5}", 7) == 0);
  CHECK(jsonrpc_framer_finish(&f, &p, &n) == JSONRPC_FRAME_NONE);
  jsonrpc_framer_free(&f);

  jsonrpc_framer_init(&f, 16);
  CHECK(jsonrpc_framer_finish(&f, &p, &n) == JSONRPC_FRAME_NONE);
  jsonrpc_framer_free(&f);
}

/* ---- messages ---- */

struct parsed {
  int r;
  struct jsonrpc_message m;
  struct jsonrpc_failure fail;
};

static struct parsed rpc(const char *s)
{
  struct parsed p = {0};
  p.r = jsonrpc_parse(s, strlen(s), &p.m, &p.fail);
  return p;
}

static void done(struct parsed *p)
{
  if (p->r == 0)
    jsonrpc_message_clear(&p->m);
  else
    jsonrpc_failure_clear(&p->fail);
}

static void test_parse_ids(void)
{
  static const struct {
    const char *in, *id;
  } ok[] = {
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}", "0"},
      {"{\"jsonrpc\":\"2.0\",\"id\":-7,\"method\":\"ping\"}", "-7"},
      {"{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"method\":\"ping\"}", "9223372036854775807"},
      {"{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}", "99999999999999999999"},
      {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", "1.5"},
      {"{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"ping\"}", "\"\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\\u00e9\",\"method\":\"ping\"}", "\"a\\\"b\xc3\xa9\""},
      {"{\"method\":\"ping\",\"id\":\"0\",\"jsonrpc\":\"2.0\",\"params\":{}}", "\"0\""},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    struct parsed p = rpc(ok[i].in);
    CHECK(p.r == 0 && p.m.kind == JSONRPC_REQUEST && streq(p.m.id, ok[i].id) && streq(p.m.method, "ping"));
    if (p.r == 0 && !streq(p.m.id, ok[i].id))
      fprintf(stderr, "  id %s, want %s\n", p.m.id, ok[i].id);
    done(&p);
  }
}

static void test_parse_kinds(void)
{
  struct parsed p = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  CHECK(p.r == 0 && p.m.kind == JSONRPC_NOTIFICATION && p.m.id == NULL && p.m.params == NULL);
  done(&p);
  p = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":[1]}");
  CHECK(p.r == 0 && p.m.kind == JSONRPC_NOTIFICATION && json_array_len(p.m.params) == 1);
  done(&p);
  p = rpc("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}");
  CHECK(p.r == 0 && p.m.kind == JSONRPC_RESPONSE && streq(p.m.id, "3"));
  done(&p);
  p = rpc("{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":1,\"message\":\"m\"}}");
  CHECK(p.r == 0 && p.m.kind == JSONRPC_RESPONSE);
  done(&p);
}

static void test_parse_errors(void)
{
  static const struct {
    const char *in;
    int code;
    const char *id;
  } bad[] = {
      {"garbage", JSONRPC_PARSE_ERROR, NULL},
      {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi", JSONRPC_PARSE_ERROR, NULL},
      {"\xff\xfe", JSONRPC_PARSE_ERROR, NULL},
      {"[]", JSONRPC_INVALID_REQUEST, NULL},
      {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JSONRPC_INVALID_REQUEST, NULL},
      {"42", JSONRPC_INVALID_REQUEST, NULL},
      {"\"str\"", JSONRPC_INVALID_REQUEST, NULL},
      {"null", JSONRPC_INVALID_REQUEST, NULL},
      {"{}", JSONRPC_INVALID_REQUEST, NULL},
      {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, NULL},
      {"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, NULL},
      {"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, NULL},
      {"{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, NULL},
      {"{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, "5"},
      {"{\"id\":5,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, "5"},
      {"{\"jsonrpc\":2.0,\"id\":5,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, "5"},
      {"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":5}", JSONRPC_INVALID_REQUEST, "\"x\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"a\\u0000b\"}", JSONRPC_INVALID_REQUEST, "\"x\""},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\",\"params\":3}", JSONRPC_INVALID_REQUEST, "0"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\",\"params\":\"x\"}", JSONRPC_INVALID_REQUEST, "0"},
      {"{\"jsonrpc\":\"2.0\",\"id\":0}", JSONRPC_INVALID_REQUEST, "0"},
      {"{\"jsonrpc\":\"2.0\",\"result\":{}}", JSONRPC_INVALID_REQUEST, NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct parsed p = rpc(bad[i].in);
    bool ok = p.r < 0 && p.fail.code == bad[i].code &&
              (bad[i].id ? streq(p.fail.id, bad[i].id) : p.fail.id == NULL) && p.fail.detail.msg[0];
    CHECK(ok);
    if (!ok)
      fprintf(stderr, "  input %s: r=%d code=%d id=%s\n", bad[i].in, p.r, p.fail.code,
              p.r < 0 && p.fail.id ? p.fail.id : "null");
    done(&p);
  }
}

static void test_oversize(void)
{
  struct jsonrpc_failure f;
  const char *m =
      "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"tools/call\",\"params\":{\"arguments\":{\"code\":\"xx";
  jsonrpc_oversize(m, strlen(m), NULL, 0, 1024, &f);
  CHECK(f.code == JSONRPC_INVALID_REQUEST && streq(f.id, "17") && strstr(f.detail.msg, "1024"));
  jsonrpc_failure_clear(&f);
  m = "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"id\":3";
  jsonrpc_oversize(m, strlen(m), NULL, 0, 1024, &f);
  CHECK(f.id == NULL);
  jsonrpc_failure_clear(&f);
  m = "{\"id\":null,";
  jsonrpc_oversize(m, strlen(m), NULL, 0, 1024, &f);
  CHECK(f.id == NULL);
  jsonrpc_failure_clear(&f);
  /* The TypeScript SDK writes the id last ({...request, jsonrpc, id}): it is found in the tail. */
  m = "{\"method\":\"tools/call\",\"params\":{\"arguments\":{\"code\":\"xx";
  static const struct {
    const char *tail, *id;
  } tails[] = {
      {"xx\"}},\"jsonrpc\":\"2.0\",\"id\":5}", "5"},
      {"xx\"}}, \"id\": \"a-1\" , \"jsonrpc\": \"2.0\" }\r", "\"a-1\""},
      {"xx\"}},\"id\":-3,\"jsonrpc\":\"2.0\"}", "-3"},
      {"xx\"}}}", NULL},                                /* no id */
      {"xx\"},\"id\":5}}", NULL},                       /* nested: not the message's own */
      {"x\\\",\\\"id\\\":5}\"}}", NULL},                /* inside a string, its quotes escaped */
      {"\"code\":\"a\\\"b\",\"id\":\"a\\\"b\"}", NULL}, /* an escape in the id: not taken */
      {"xx\"}},\"id\":true}", NULL},
      {"xx\"}},\"x\":1,\"id\":7}", "7"},
      {"xx\"}},\"id\":7,\"x\":1}", NULL}, /* only "jsonrpc" may follow it */
      {"id\":7}", NULL},                  /* cut: no separator before the key */
  };
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    jsonrpc_oversize(m, strlen(m), tails[i].tail, strlen(tails[i].tail), 1024, &f);
    CHECK(tails[i].id ? f.id && streq(f.id, tails[i].id) : f.id == NULL);
    jsonrpc_failure_clear(&f);
  }
}

static void test_replies(void)
{
  json_writer_t *w = json_writer_new();
  jsonrpc_begin_result(w, "0");
  json_obj_begin(w);
  json_obj_end(w);
  jsonrpc_end(w);
  CHECK(streq(json_writer_buf(w, NULL), "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}"));
  json_writer_free(w);

  w = json_writer_new();
  jsonrpc_write_error(w, NULL, JSONRPC_PARSE_ERROR, "Parse error");
  CHECK(streq(json_writer_buf(w, NULL),
              "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}"));
  json_writer_free(w);

  w = json_writer_new();
  jsonrpc_write_error(w, "\"a\"", JSONRPC_METHOD_NOT_FOUND, "Method not found: x");
  CHECK(streq(
      json_writer_buf(w, NULL),
      "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"error\":{\"code\":-32601,\"message\":\"Method not found: x\"}}"));
  json_writer_free(w);

  w = json_writer_new();
  jsonrpc_begin_notification(w, "notifications/progress");
  json_obj_begin(w);
  json_key(w, "progress");
  json_int(w, 1);
  json_obj_end(w);
  jsonrpc_end(w);
  CHECK(streq(json_writer_buf(w, NULL),
              "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}"));
  json_writer_free(w);

  /* Canonical ids: the same request written two ways compares equal. */
  json_node_t *a = parse("[7, \"x\", \"\\u0078\"]");
  char *i0 = jsonrpc_id_canonical(json_array_at(a, 0));
  char *i1 = jsonrpc_id_canonical(json_array_at(a, 1));
  char *i2 = jsonrpc_id_canonical(json_array_at(a, 2));
  CHECK(streq(i0, "7") && streq(i1, "\"x\"") && streq(i1, i2));
  free(i0);
  free(i1);
  free(i2);
  json_free(a);
}

/* ---- the MCP layer's pure bits ---- */

static void test_mcp_versions(void)
{
  CHECK(streq(mcp_negotiate_version("2025-11-25"), "2025-11-25"));
  CHECK(streq(mcp_negotiate_version("2025-06-18"), "2025-06-18"));
  CHECK(streq(mcp_negotiate_version("2025-03-26"), "2025-03-26"));
  CHECK(streq(mcp_negotiate_version("2024-11-05"), "2024-11-05"));
  CHECK(streq(mcp_negotiate_version("2024-10-07"), "2025-11-25"));
  CHECK(streq(mcp_negotiate_version("2099-01-01"), "2025-11-25"));
  CHECK(streq(mcp_negotiate_version(""), "2025-11-25"));
  CHECK(streq(mcp_negotiate_version(NULL), "2025-11-25"));
}

int main(void)
{
  test_json_tree();
  test_json_reject();
  test_json_peek();
  test_json_span_minify();
  test_json_check();
  test_json_parse_cut();
  test_json_strn_utf8();
  test_json_kv();
  test_framer();
  test_parse_ids();
  test_parse_kinds();
  test_parse_errors();
  test_oversize();
  test_replies();
  test_mcp_versions();
  printf("test_jsonrpc: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
