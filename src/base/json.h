/* SPDX-License-Identifier: Apache-2.0 */
/* JSON through yajl: the only module that includes yajl's headers. */
#ifndef SBX_JSON_H
#define SBX_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* ---- writing ---- */
typedef struct json_writer json_writer_t;

json_writer_t *json_writer_new(void);
void json_writer_free(json_writer_t *w);
void json_obj_begin(json_writer_t *w);
void json_obj_end(json_writer_t *w);
void json_arr_begin(json_writer_t *w);
void json_arr_end(json_writer_t *w);
void json_key(json_writer_t *w, const char *key);
/* Strings are validated as UTF-8; invalid bytes become U+FFFD. */
void json_str(json_writer_t *w, const char *s);
void json_strn(json_writer_t *w, const char *s, size_t len);
void json_int(json_writer_t *w, long long v);
void json_uint(json_writer_t *w, uint64_t v);
void json_double(json_writer_t *w, double v);
void json_bool(json_writer_t *w, bool v);
void json_null(json_writer_t *w);
/* A member of the open object: the key, then its value. */
void json_kv_str(json_writer_t *w, const char *key, const char *s);
void json_kv_strn(json_writer_t *w, const char *key, const char *s, size_t len);
/* The string, or null when s is NULL. */
void json_kv_str_or_null(json_writer_t *w, const char *key, const char *s);
void json_kv_int(json_writer_t *w, const char *key, long long v);
void json_kv_uint(json_writer_t *w, const char *key, uint64_t v);
void json_kv_double(json_writer_t *w, const char *key, double v);
void json_kv_bool(json_writer_t *w, const char *key, bool v);
void json_kv_null(json_writer_t *w, const char *key);
/* An already-serialised JSON value, as json_raw. */
void json_kv_raw(json_writer_t *w, const char *key, const char *json, size_t len);
/* Length of the valid UTF-8 sequence at s[0..n) (1 to 4), or 0 if it is not one. */
size_t json_utf8_len(const unsigned char *s, size_t n);
/* Insert an already-serialised JSON value verbatim. */
void json_raw(json_writer_t *w, const char *json, size_t len);
/* The document so far. Valid until the next call on w. Returns NULL if generation failed. */
const char *json_writer_buf(json_writer_t *w, size_t *ret_len);

/* ---- reading: a parsed tree (yajl_tree underneath) ---- */
typedef struct json_node json_node_t;

typedef enum json_type {
  JSON_NULL,
  JSON_BOOL,
  JSON_INTEGER, /* a number that fits a long long */
  JSON_NUMBER,  /* any other number (fraction, exponent or too big) */
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT,
} json_type_t;

/* Deepest nesting json_parse accepts: bounds the recursion of freeing the tree. */
#define JSON_MAX_DEPTH 64

/* Parse exactly one JSON document of len bytes (no NUL needed; embedded NULs are rejected).
 * The tree is owned by the caller: json_free(). */
int json_parse(const char *buf, size_t len, json_node_t **ret, sbx_error_t *err);
/* The same with a budget for what the tree may hold, for documents from an untrusted peer: at
 * most max_values values (every scalar, array, object and key counts one). Crossing it stops the
 * parse before the next value is allocated, with err->errnum E2BIG. */
int json_parse_bounded(const char *buf, size_t len, size_t max_values, json_node_t **ret, sbx_error_t *err);
/* The same, for a document whose large values are not read from the tree (they go on as written,
 * json_member_span): a string, key or number longer than keep bytes is held as its first keep
 * bytes, cut back to a character boundary. The whole document is still checked. */
int json_parse_cut(const char *buf, size_t len, size_t max_values, size_t keep, json_node_t **ret,
                   sbx_error_t *err);
void json_free(json_node_t *n);
/* A document checked as it arrives, in pieces, with nothing built: its syntax so far and
 * json_parse_bounded's budget of max_values, so that one that fails early need not be kept
 * whole. (yajl reads a token split between pieces again from its start at each piece: feed it
 * a bounded prefix, not a long document in small pieces.) */
typedef struct json_check json_check_t;
json_check_t *json_check_new(size_t max_values);
/* 0 while it may still be a valid document within the budget; -1 once it cannot, err->errnum
 * E2BIG for the budget. */
int json_check_feed(json_check_t *c, const char *buf, size_t len, sbx_error_t *err);
void json_check_free(json_check_t *c);
/* NULL-safe accessors: a NULL or wrongly typed node reads as absent. */
json_type_t json_type(const json_node_t *n);
const char *json_type_name(json_type_t t);
/* Member of an object, or NULL. With duplicate keys the first wins. */
json_node_t *json_get(const json_node_t *obj, const char *key);
/* The string, or NULL if n is not a string. Strings are NUL-terminated and valid UTF-8 (yajl
 * validates), but may contain "\u0000": ret_len gives the real length. */
const char *json_as_string(const json_node_t *n, size_t *ret_len);
/* 0 and *ret set if n is an integer (or a number with an integral value that fits), else -1. */
int json_as_int(const json_node_t *n, long long *ret);
/* 0 and *ret set if n is true/false, else -1. */
int json_as_bool(const json_node_t *n, bool *ret);
/* The number as written in the document (JSON_INTEGER or JSON_NUMBER), else NULL. */
const char *json_number_text(const json_node_t *n);
size_t json_array_len(const json_node_t *arr);
json_node_t *json_array_at(const json_node_t *arr, size_t i);
size_t json_object_len(const json_node_t *obj);
/* The i-th member, in document order: 0 and outputs set, or -1 past the end / not an object. */
int json_object_at(const json_node_t *obj, size_t i, const char **ret_key, json_node_t **ret_value);
/* Re-serialise a subtree (compact) into w. */
void json_write_node(json_writer_t *w, const json_node_t *n);

/* Where member `key` of the top-level object of buf is, as written, for text that has been parsed
 * already (valid JSON): 0 and *ret_off, *ret_len, the first of duplicates as json_get; -1 if it is
 * not there, or if a key before it is written with escapes (json_get compares decoded keys, this
 * does not): the caller then writes the member from the tree. Lets a large value go on as it
 * came, without being written again. */
int json_member_span(const char *buf, size_t len, const char *key, size_t *ret_off, size_t *ret_len);
/* Drop the white space between the tokens of valid JSON text, in place (a value then fits on one
 * line); returns the new length. */
size_t json_minify(char *buf, size_t len);

/* Look for a scalar member `key` of the top-level object in a document that may be cut short
 * (an oversize message's first bytes). On success *ret_json is the member's value as compact JSON
 * (malloc'd; a string comes back quoted). Returns -1 if the prefix does not contain it. */
int json_peek_member(const char *buf, size_t len, const char *key, char **ret_json);

#endif
