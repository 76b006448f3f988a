/* SPDX-License-Identifier: Apache-2.0 */
/* A `network proxy` sandbox's egress log (egress_log.c): what its proxy records of each attempt,
 * in memory it shares with sandboxd, read here. egress_proxy_start makes it. */
#ifndef SBX_EGRESS_LOG_H
#define SBX_EGRESS_LOG_H

#include <stdbool.h>

#include "base/json.h"

/* Attempts recorded one by one per sandbox; the rest are counted. */
#define EGRESS_MAX_RECORDS 64

struct egress_log;

void egress_log_free(struct egress_log *l);

/* The attempts so far as a JSON object: counts, bytes, limits hit and (with records) each attempt
 * (host, port, address, verdict, bytes, duration). For the audit record (records), --report and
 * MCP structuredContent (the summary). */
void egress_log_write_json(const struct egress_log *l, json_writer_t *w, bool records);
char *egress_log_json(const struct egress_log *l, bool records);

#endif
