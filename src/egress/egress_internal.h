/* SPDX-License-Identifier: Apache-2.0 */
/* What the egress proxy's files share (egress_proxy.c: the listener and the proxy process;
 * egress_conn.c: one connection's process; egress_log.c: the log they write and sandboxd reads);
 * not for callers, who use egress_proxy.h. */
#ifndef SBX_EGRESS_INTERNAL_H
#define SBX_EGRESS_INTERNAL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "egress/egress_log.h"
#include "policy/egress_rules.h"
#include "policy/policy.h"

/* ------------------------------------------------------------------ the shared log (egress_log.c) */

enum rec_state { REC_CLAIMED, REC_OPEN, REC_DONE };

struct egress_rec {
  uint32_t state; /* enum rec_state; the strings are written before OPEN */
  char method[16];
  char host[EGRESS_HOST_MAX + 1];
  uint16_t port;
  char addr[INET6_ADDRSTRLEN];
  char verdict[24]; /* "allowed", or what refused it */
  char reason[160];
  char class[24]; /* address_refused: the address's class (egress_class_name) */
  char end[16];   /* how an allowed one ended: closed, byte_limit, time_limit */
  uint64_t up, down, start_ns, end_ns;
};

struct egress_shared {
  uint64_t bytes_up, bytes_down;
  uint32_t attempts, allowed, refused;
  uint32_t hit_connections, hit_bytes, hit_time, hit_rate;
  struct egress_rec recs[EGRESS_MAX_RECORDS];
};

struct egress_log {
  struct egress_shared *sh;
};

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_ACQ_REL)

/* A log for one sandbox's proxy: pages shared with the processes forked after it. */
int egress_log_new(struct egress_log **ret, sbx_error_t *err);
/* A record for one attempt: a slot while there are any, else a scratch one (counted, not kept). */
struct egress_rec *egress_rec_claim(struct egress_shared *sh, struct egress_rec *scratch);
void egress_rec_refuse(struct egress_shared *sh, struct egress_rec *r, const char *verdict,
                       const char *reason);

/* ------------------------------------------------------------------ one connection (egress_conn.c) */

struct conn_ctx {
  const struct sbx_policy *p;
  struct egress_shared *sh;
  const struct egress_addr *own;
  size_t n_own;
};

/* Serve fd, an accepted connection, in this process (forked for it): head, allowlist, resolve,
 * connect, relay; the record written; then _exit. */
_Noreturn void egress_serve_conn(int fd, struct conn_ctx *cx);

#endif
