/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of `sandboxd mcp --http` share (mcp_http.c: the transport, its loop and the
 * daemon's handlers; mcp_http_request.c: what a request asks, checked and done;
 * mcp_http_exchange.c: each request's exchange, its answer and the server's messages to it); not
 * for callers, who use mcp_http.h. */
#ifndef SBX_MCP_HTTP_INTERNAL_H
#define SBX_MCP_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "mcp/mcp_http.h"
#include "mcp/mcp_http_daemon.h"
#include "mcp/mcp_http_gate.h"
#include "mcp/mcp_http_session.h"

enum xstate { X_BODY, X_WAIT, X_STREAM, X_OVER };

struct exchange {
  struct exchange *next;
  uint64_t id; /* the route */
  struct mcp_http *h;
  struct MHD_Connection *conn;
  enum xstate state;
  bool get;       /* a session's GET stream */
  bool sse;       /* answered as a stream (counted in n_streams) */
  bool suspended; /* waits: MHD does not watch it, we poll its socket */
  bool gone;      /* the client hung up */
  bool done;      /* its answer (or the stream's last event) is in out */
  size_t held;    /* body bytes counted in body_bytes */
  bool new_session;
  struct http_session *sess; /* NULL: stateless, or the session has ended */
  int principal;
  char *req_id; /* the request it carries (canonical JSON), or NULL */
  /* A POST refused for what its head says (an unknown session, an unsupported version): the
   * refusal is made once its body is read, so that it names the request's id. 0: none. */
  unsigned refuse_status;
  const char *refuse_msg;
  bool bad_version; /* its MCP-Protocol-Version names no version served (answered once read) */
  unsigned status;  /* its answer's HTTP status when not 200 (mcp_http_status), else 0 */
  strbuf_t body;
  strbuf_t out;
  size_t out_off;
  char name[48];    /* the client, for audit records */
  uint64_t sent_ns; /* a GET stream: when it was last given something */
};

struct mcp_http {
  struct server *srv;
  struct mcp_http_handlers on; /* the server's, given at start */
  struct MHD_Daemon *d;
  struct mcp_http_opts o;
  struct http_tokens tokens;
  bool auth;
  struct http_sessions sessions;
  struct exchange *xs;
  size_t n_xs, n_streams, n_suspended;
  /* Request bodies being read, together: many clients' uploads at once are bounded as the calls'
   * code is (CODE_HELD_MESSAGES messages). */
  size_t body_bytes, body_budget;
  uint64_t next_id;
  int epoll_fd;
  struct http_daemon_handlers daemon_on; /* mcp_http.c's */
  /* The listening socket is the gate's (mcp_http_gate.c): it hands MHD each connection whose
   * head is complete. */
  struct http_gate gate;
  size_t gate_nfds;    /* its poll entries, after MHD's epoll fd */
  bool kick;           /* MHD must run (a connection was resumed) */
  uint64_t mhd_due_ns; /* MHD must run by then (its timeouts), or 0 */
  uint64_t *polled;    /* the exchanges of the poll entries after the first */
  size_t polled_cap;
};

/* ------------------------------------------------------------------ mcp_http_exchange.c */

struct exchange *http_exchange_find(struct mcp_http *h, uint64_t id);
void http_exchange_free(struct mcp_http *h, struct exchange *x);
/* The daemon serves x's connection again (it was suspended while x waited). */
void http_wake(struct exchange *x);
/* The answers; false: the connection closes. */
bool http_respond(struct exchange *x, unsigned status, const char *ctype, strbuf_t *body);
/* An HTTP-level refusal: a JSON-RPC error with no id, as the SDK's server sends. */
bool http_refuse(struct exchange *x, unsigned status, const char *header, const char *value,
                 const char *message);
/* The same once the body is read: with the request's id (canonical JSON; NULL: none). */
bool http_refuse_id(struct exchange *x, const char *id, unsigned status, const char *header,
                    const char *value, const char *message);
bool http_start_stream(struct exchange *x);
/* The JSON answer, once it is there (else wait for it). */
bool http_answer_or_wait(struct exchange *x);
/* A session ends (DELETE, or idle for MCP_HTTP_SESSION_IDLE_S). */
void http_end_session(struct mcp_http *h, struct http_session *s);
/* Keepalives due now; the ms until the next one, or -1. */
int http_keepalive(struct mcp_http *h);

/* ------------------------------------------------------------------ mcp_http_request.c */

/* A request's head is in: answer it, refuse it, or (a POST) read its body. */
bool http_request_head(struct exchange *x, const char *url, const char *method);
/* The whole body is in. */
bool http_request_body(struct exchange *x);

#endif
