/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy (issue #17): one host-side process per sandbox with `network proxy`, serving a
 * listening socket that the sandbox's pid 1 made inside its network namespace, so accepted
 * connections live there while outbound ones are made from the host's. It speaks HTTP CONNECT and
 * plain-HTTP forwarding (egress_http.h), lets through only what the allowlist names
 * (egress_rules.h) to addresses that passed egress_check_dest, within the policy's egress limits,
 * and records each attempt in a log it shares with sandboxd (egress_log). sandboxd.policy(5),
 * "Network". */
#ifndef SBX_EGRESS_PROXY_H
#define SBX_EGRESS_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "egress/egress_log.h"
#include "policy/policy.h"

/* Where the proxy listens inside every sandbox: 127.0.0.1:3128 (squid's port, which clients
 * know). */
#define EGRESS_PROXY_PORT 3128
#define EGRESS_PROXY_URL "http://127.0.0.1:3128"
/* The variables every `network proxy` sandbox gets (NO_PROXY empty: even loopback goes to it). */
#define EGRESS_N_ENV 9
extern char *const egress_proxy_env[EGRESS_N_ENV];
/* Connections the proxy accepts from one sandbox: a bucket of EGRESS_ACCEPT_BURST, refilled at
 * EGRESS_ACCEPT_RATE a second. Each costs a fork of sandboxd's and its CPU (about 2 ms here) in
 * sandboxd's cgroup, not the sandbox's: without it a connect/close loop at --cpus 0.25 made the
 * proxy spend 0.9 s of CPU in 6 s while the sandbox spent 0.05 s. Past it, connections wait in the
 * listener's backlog (then in the code's connect), and the summary's limits_hit names
 * `egress_connection_rate`. */
#define EGRESS_ACCEPT_RATE 20
#define EGRESS_ACCEPT_BURST 64
/* A request head must arrive within this (slowloris: 408), a connect finish within this (502). */
#define EGRESS_HEAD_TIMEOUT_MS 5000
#define EGRESS_CONNECT_TIMEOUT_MS 10000

/* The listening socket is made by the sandbox's pid 1 in its network namespace, on
 * 127.0.0.1:EGRESS_PROXY_PORT (sandbox/contain.c contain_listen: cold and forked alike). */

/* In sandboxd, once the sandbox is ready: fork the proxy, which serves listen_fd (taken: closed
 * here) until pidfd (the sandbox's pid 1) is readable, then closes every connection and exits.
 * As root it runs as uid and gid run_as (the sandbox's host id; 0: stays root, without
 * capabilities). *ret_log is shared with it (read it any time; egress_log_free after reaping
 * *ret_pid). */
int egress_proxy_start(const struct sbx_policy *p, int listen_fd, int pidfd, unsigned run_as,
                       struct egress_log **ret_log, pid_t *ret_pid, sbx_error_t *err);

#endif
