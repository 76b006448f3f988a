/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's egress log (egress_log.h): a MAP_SHARED page set that the proxy's processes write
 * with atomics while connections run (a record per attempt while there are slots, counters for
 * all), and that sandboxd reads as JSON whenever it answers. */
#include "egress/egress_log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/util.h"
#include "egress/egress_internal.h"

struct egress_rec *egress_rec_claim(struct egress_shared *sh, struct egress_rec *scratch)
{
  uint32_t i = ADD(sh->attempts, 1);
  struct egress_rec *r = i < EGRESS_MAX_RECORDS ? &sh->recs[i] : scratch;
  memset(r, 0, sizeof *r);
  r->start_ns = now_ns();
  return r;
}

void egress_rec_refuse(struct egress_shared *sh, struct egress_rec *r, const char *verdict,
                       const char *reason)
{
  bufprintf_cut(r->verdict, sizeof r->verdict, "%s", verdict);
  bufprintf_cut(r->reason, sizeof r->reason, "%s", reason);
  r->end_ns = now_ns();
  ADD(sh->refused, 1);
  STORE(r->state, REC_DONE);
}

int egress_log_new(struct egress_log **ret, sbx_error_t *err)
{
  struct egress_log *l = calloc(1, sizeof *l);
  if (!l)
    return sbx_error_set(err, ENOMEM, "egress proxy");
  l->sh = mmap(NULL, sizeof *l->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (l->sh == MAP_FAILED) {
    free(l);
    return sbx_error_errno(err, "egress proxy: mmap");
  }
  *ret = l;
  return 0;
}

void egress_log_free(struct egress_log *l)
{
  if (!l)
    return;
  munmap(l->sh, sizeof *l->sh);
  free(l);
}

void egress_log_write_json(const struct egress_log *l, json_writer_t *w, bool records)
{
  const struct egress_shared *sh = l->sh;
  uint32_t attempts = LOAD(sh->attempts);
  json_obj_begin(w);
  json_kv_uint(w, "connections", attempts);
  json_kv_uint(w, "allowed", LOAD(sh->allowed));
  json_kv_uint(w, "refused", LOAD(sh->refused));
  json_kv_uint(w, "bytes_up", LOAD(sh->bytes_up));
  json_kv_uint(w, "bytes_down", LOAD(sh->bytes_down));
  json_key(w, "limits_hit");
  json_arr_begin(w);
  if (LOAD(sh->hit_connections))
    json_str(w, "egress_connections");
  if (LOAD(sh->hit_bytes))
    json_str(w, "egress_bytes");
  if (LOAD(sh->hit_time))
    json_str(w, "egress_connection_time");
  if (LOAD(sh->hit_rate))
    json_str(w, "egress_connection_rate");
  json_arr_end(w);
  if (records) {
    uint64_t now = now_ns();
    json_key(w, "records");
    json_arr_begin(w);
    for (uint32_t i = 0; i < attempts && i < EGRESS_MAX_RECORDS; i++) {
      const struct egress_rec *r = &sh->recs[i];
      uint32_t st = LOAD(r->state);
      if (st == REC_CLAIMED)
        continue; /* the sandbox ended before its head was read */
      uint64_t end = LOAD(r->end_ns);
      json_obj_begin(w);
      json_kv_str(w, "method", r->method);
      json_kv_str(w, "host", r->host);
      json_kv_uint(w, "port", r->port);
      json_kv_str_or_null(w, "address", r->addr[0] ? r->addr : NULL);
      json_kv_str(w, "verdict", r->verdict);
      if (r->class[0])
        json_kv_str(w, "class", r->class);
      if (r->reason[0])
        json_kv_str(w, "reason", r->reason);
      if (st == REC_OPEN)
        json_kv_str(w, "end", "open"); /* still open, or cut when the sandbox ended */
      else if (r->end[0])
        json_kv_str(w, "end", r->end);
      json_kv_uint(w, "bytes_up", LOAD(r->up));
      json_kv_uint(w, "bytes_down", LOAD(r->down));
      json_kv_uint(w, "duration_ms", ((end ? end : now) - r->start_ns) / 1000000ULL);
      json_obj_end(w);
    }
    json_arr_end(w);
    json_kv_uint(w, "records_dropped", attempts > EGRESS_MAX_RECORDS ? attempts - EGRESS_MAX_RECORDS : 0);
  }
  json_obj_end(w);
}

char *egress_log_json(const struct egress_log *l, bool records)
{
  json_writer_t *w = json_writer_new();
  if (!w)
    return NULL;
  egress_log_write_json(l, w, records);
  size_t len;
  const char *buf = json_writer_buf(w, &len);
  char *s = buf ? strndup(buf, len) : NULL;
  json_writer_free(w);
  return s;
}
