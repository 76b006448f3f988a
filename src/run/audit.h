/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log: one JSON line per execution, to a file or syslog. Never blocks or fails an
 * execution: a record that cannot be written is counted and the count goes into the next one. */
#ifndef SBX_AUDIT_H
#define SBX_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/hostfile.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"

struct audit_record {
  const char *mode;       /* "exec" or "mcp" */
  const char *request_id; /* NULL: one is made up */
  const char *code;       /* the code (hashed; logged only with audit_set_log_code) */
  size_t code_len;
  const char *file;     /* exec FILE, or NULL for -c */
  const char *language; /* mcp execute_code's `language` other than python, or NULL */
  const struct sbx_policy *policy;
  const struct sbx_limits *limits;
  const struct sbx_result *result; /* NULL if setup failed */
  const char *error;               /* setup error message, or NULL */
  int error_exit;                  /* the exit status it gave (126, 127); 0: 125 */
  const char *calls_json;          /* proxied calls as a JSON array, or NULL */
  const char *client;              /* mcp --http: the client (token index, session prefix), or NULL */
  const char *egress_json;         /* network proxy: the egress log as a JSON object, or NULL */
  const char *task;                /* mcp: the id of the task the call served, or NULL */
  const char *session;             /* mcp: the session the call ran in (its handle's hash), or NULL */
};

/* A session's start or end (mcp, sandboxd-mcp(7) SESSIONS): never its handle, a hash of it. */
struct audit_session {
  const char *event;   /* "session_start" or "session_end" */
  const char *session; /* the handle's hash */
  const char *client;  /* over HTTP: the token (its line's index) and the transport session, or NULL */
  const char *language;
  const struct sbx_limits *limits;
  uint64_t idle_s, max_life_s, calls;
  const char *reason;  /* session_end: ended, idle, max_life, died, server_exit */
  const char *message; /* session_end: what later calls are told */
};

/* Where records go: a path, "syslog", "off", or NULL for the default ($SANDBOXD_AUDIT_LOG, else
 * $XDG_STATE_HOME/sandboxd/audit.log, ~/.local/state/sandboxd/audit.log, or for root
 * /var/log/sandboxd/audit.log). Opening failures are reported later as dropped records. */
void audit_configure(const char *target);
/* audit_configure(), then open the log's directory and the log now, before any sandbox runs,
 * refusing what a sandbox may have planted (hostfile.h; guard: the trees this run's sandbox can
 * write, or NULL). Fails only on such a refusal (the caller must not run; nothing is logged);
 * any other failure is reported later, as a dropped record. */
int audit_start(const char *target, const struct hostfile_guard *guard, sbx_error_t *err);
/* Also log the code text itself (opt-in: it may hold secrets). */
void audit_set_log_code(bool on);
void audit_write(const struct audit_record *r);
void audit_write_session(const struct audit_session *r);
/* A fresh request_id (32 hex digits), for a caller that names other things after its record. */
void audit_new_request_id(char out[33]);
/* Reopen the file by its name in the same directory (after logrotate moved it): call on SIGHUP. */
void audit_reopen(void);
/* Records that could not be written so far. */
unsigned long audit_dropped(void);
/* Where records go, for messages. */
const char *audit_target(void);
/* Whether audit_write() drops every record (`off`, or a log refused at the start): a caller can
 * skip building one. */
bool audit_off(void);

#endif
