/* SPDX-License-Identifier: Apache-2.0 */
/* The egress proxy (egress_proxy.h). Processes, per sandbox with `network proxy`:
 *
 *   sandboxd                       proxy (forked at READY)             one per connection
 *   -----------------------------  ----------------------------------  -------------------------
 *   gets the listener with READY   caps dropped, no_new_privs, the
 *   fork ------------------------> helpers' filter (seccomp.h), only
 *                                  the listener and pid 1's pidfd;
 *                                  accept (in the sandbox's netns)
 *                                    at the limit: 503, recorded
 *                                  fork ------------------------------> head (deadline: 408),
 *                                                                       allowlist, resolve on the
 *                                                                       host, check each address,
 *                                                                       connect, splice, record
 *   sandbox_wait/free reaps it     pid 1 exits (pidfd): SIGKILL the
 *                                  connections, reap them, exit
 *
 * Why processes, not sandboxd's loops: getaddrinfo blocks, and a sandbox's requests must not stall
 * sandboxd's MCP loop or another sandbox's calls; each connection's state is its own stack, the
 * kernel bounds it (egress_connections processes), and an exited sandbox takes its connections
 * with it (SIGKILL, then nothing of them is left). Each process dies with its parent
 * (PR_SET_PDEATHSIG). The log is a MAP_SHARED page set: counters updated with atomics while
 * connections run, so sandboxd reads it whenever it answers. */
#include "egress/egress_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "egress/egress_host.h"
#include "egress/egress_http.h"
#include "kernel/caps.h"
#include "kernel/seccomp.h"
#include "policy/egress_rules.h"

char *const egress_proxy_env[EGRESS_N_ENV] = {
    "HTTP_PROXY=" EGRESS_PROXY_URL,
    "http_proxy=" EGRESS_PROXY_URL,
    "HTTPS_PROXY=" EGRESS_PROXY_URL,
    "https_proxy=" EGRESS_PROXY_URL,
    "ALL_PROXY=" EGRESS_PROXY_URL,
    "all_proxy=" EGRESS_PROXY_URL,
    "NO_PROXY=",
    "no_proxy=",
    /* Node's fetch and http take the variables only when told (Node 24; older ones ignore it). */
    "NODE_USE_ENV_PROXY=1",
};

/* ------------------------------------------------------------------ the shared log */

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

/* A record for one attempt: a slot while there are any, else a scratch one (counted, not kept). */
static struct egress_rec *rec_claim(struct egress_shared *sh, struct egress_rec *scratch)
{
  uint32_t i = ADD(sh->attempts, 1);
  struct egress_rec *r = i < EGRESS_MAX_RECORDS ? &sh->recs[i] : scratch;
  memset(r, 0, sizeof *r);
  r->start_ns = now_ns();
  return r;
}

static void rec_refuse(struct egress_shared *sh, struct egress_rec *r, const char *verdict,
                       const char *reason)
{
  bufprintf_cut(r->verdict, sizeof r->verdict, "%s", verdict);
  bufprintf_cut(r->reason, sizeof r->reason, "%s", reason);
  r->end_ns = now_ns();
  ADD(sh->refused, 1);
  STORE(r->state, REC_DONE);
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

/* ------------------------------------------------------------------ the listener (pid 1) */

int egress_listen(sbx_error_t *err)
{
  _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return sbx_error_errno(err, "egress proxy: socket");
  /* No SO_REUSEPORT: nothing else in the sandbox can bind this port while the listener lives. */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(EGRESS_PROXY_PORT)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || listen(fd, 64) < 0)
    return sbx_error_errno(err, "egress proxy: listen on 127.0.0.1:%d", EGRESS_PROXY_PORT);
  return TAKE_FD(fd);
}

/* ------------------------------------------------------------------ one connection */

struct conn_ctx {
  const struct sbx_policy *p;
  struct egress_shared *sh;
  const struct egress_addr *own;
  size_t n_own;
};

static int ms_left(uint64_t deadline)
{
  uint64_t now = now_ns();
  return now >= deadline ? 0 : (int) ((deadline - now + 999999) / 1000000);
}

/* A refusal to the client: the status and a one-line reason, then close (after draining what it
 * sent, so the kernel does not reset the connection over the answer). */
static void respond(int fd, int status, const char *reason)
{
  static const struct {
    int code;
    const char *text;
  } texts[] = {{400, "Bad Request"},        {403, "Forbidden"},
               {408, "Request Timeout"},    {431, "Request Header Fields Too Large"},
               {500, "Internal Error"},     {502, "Bad Gateway"},
               {503, "Service Unavailable"}};
  const char *text = "Error";
  for (size_t i = 0; i < ARRAY_SIZE(texts); i++)
    if (texts[i].code == status)
      text = texts[i].text;
  char body[256], head[512];
  bufprintf_cut(body, sizeof body, "sandboxd egress proxy: %s\n", reason);
  bufprintf_cut(
      head, sizeof head,
      "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
      status, text, strlen(body), body);
  (void) !send(fd, head, strlen(head), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  uint64_t deadline = now_ns() + 1000000000ULL;
  char sink[4096];
  while (poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, ms_left(deadline)) > 0 &&
         recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
    ;
}

/* Read the head: OK with r filled and buf holding it (and maybe some body), or a refusal sent. */
static int read_head(int fd, char *buf, size_t *len, struct egress_request *r, struct conn_ctx *cx,
                     struct egress_rec *rec)
{
  uint64_t deadline = now_ns() + EGRESS_HEAD_TIMEOUT_MS * 1000000ULL;
  for (;;) {
    int st;
    char why[160];
    enum egress_head_result res = egress_parse_head(buf, *len, r, &st, why, sizeof why);
    if (res == EGRESS_HEAD_OK)
      return 0;
    if (res == EGRESS_HEAD_BAD) {
      rec_refuse(cx->sh, rec, st == 431 ? "header_too_large" : "bad_request", why);
      respond(fd, st, why);
      return -1;
    }
    int pr = poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, ms_left(deadline));
    ssize_t n = pr > 0 ? recv(fd, buf + *len, EGRESS_HEAD_MAX - *len, 0) : 0;
    if (pr == 0) {
      rec_refuse(cx->sh, rec, "head_timeout", "no complete request head within 5 s");
      respond(fd, 408, "no complete request head within 5 s");
      return -1;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      rec_refuse(cx->sh, rec, "bad_request", "the client closed before a complete request head");
      return -1;
    }
    *len += (size_t) n;
  }
}

static void addr_text(const struct egress_addr *a, char *out, size_t len)
{
  if (!inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->a, out, (socklen_t) len))
    bufprintf_cut(out, len, "?");
}

static socklen_t to_sockaddr(const struct egress_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
  memset(ss, 0, sizeof *ss);
  if (a->family == 4) {
    struct sockaddr_in *s4 = (struct sockaddr_in *) ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    memcpy(&s4->sin_addr, a->a, 4);
    return sizeof *s4;
  }
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) ss;
  s6->sin6_family = AF_INET6;
  s6->sin6_port = htons(port);
  memcpy(&s6->sin6_addr, a->a, 16);
  return sizeof *s6;
}

#define MAX_ADDRS 16

/* The addresses the request may go to: its IP literal, or what the name resolves to on the host,
 * each checked (the DNS-rebinding rule); 0 with at least one, else -1 with the refusal sent. */
static int destinations(int fd, const struct egress_request *req, const struct egress_match *m,
                        struct conn_ctx *cx, struct egress_rec *rec, struct egress_addr *out, size_t *n_out)
{
  const struct egress_rule *rule = &cx->p->allow_hosts[m->rule];
  struct egress_addr cand[MAX_ADDRS];
  size_t n = 0;
  char why[160];
  if (m->is_ip) {
    cand[n++] = m->addr;
  } else {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(req->host, NULL, &hints, &ai);
    if (g != 0) {
      bufprintf_cut(why, sizeof why, "cannot resolve `%s` on the host: %s", req->host, gai_strerror(g));
      rec_refuse(cx->sh, rec, "resolve_failed", why);
      respond(fd, 502, why);
      return -1;
    }
    for (struct addrinfo *a = ai; a && n < MAX_ADDRS; a = a->ai_next) {
      struct egress_addr e = {0};
      if (a->ai_family == AF_INET) {
        e.family = 4;
        memcpy(e.a, &((struct sockaddr_in *) a->ai_addr)->sin_addr, 4);
      } else if (a->ai_family == AF_INET6) {
        e.family = 6;
        memcpy(e.a, &((struct sockaddr_in6 *) a->ai_addr)->sin6_addr, 16);
      } else
        continue;
      cand[n++] = e;
    }
    freeaddrinfo(ai);
  }
  *n_out = 0;
  enum egress_class refused = EGRESS_PUBLIC;
  for (size_t i = 0; i < n; i++) {
    enum egress_class c = egress_check_dest(rule, &cand[i], cx->own, cx->n_own);
    if (c == EGRESS_PUBLIC)
      out[(*n_out)++] = cand[i];
    else if (refused == EGRESS_PUBLIC) {
      refused = c;
      addr_text(&cand[i], rec->addr, sizeof rec->addr);
    }
  }
  if (*n_out)
    return 0;
  if (refused == EGRESS_PUBLIC) {
    rec_refuse(cx->sh, rec, "resolve_failed", "the name has no IPv4 or IPv6 address");
    respond(fd, 502, "the name has no IPv4 or IPv6 address");
    return -1;
  }
  bufprintf_cut(why, sizeof why,
                "`%s` resolves to %s, a %s address: refused (only an allow_host naming that IP literal, or "
                "`localhost`, reaches it)",
                req->host, rec->addr, egress_class_name(refused));
  bufprintf_cut(rec->class, sizeof rec->class, "%s", egress_class_name(refused));
  rec_refuse(cx->sh, rec, "address_refused", why);
  respond(fd, 403, why);
  return -1;
}

/* Connect to the first address that answers, each within the connect timeout. */
static int connect_any(const struct egress_addr *addrs, size_t n, uint16_t port, uint64_t deadline,
                       struct egress_rec *rec, char *why, size_t why_len)
{
  int e = ETIMEDOUT;
  for (size_t i = 0; i < n; i++) {
    struct sockaddr_storage ss;
    socklen_t sl = to_sockaddr(&addrs[i], port, &ss);
    addr_text(&addrs[i], rec->addr, sizeof rec->addr);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      e = errno;
      continue;
    }
    uint64_t until = now_ns() + EGRESS_CONNECT_TIMEOUT_MS * 1000000ULL;
    if (until > deadline)
      until = deadline;
    int r = connect(fd, (struct sockaddr *) &ss, sl);
    if (r < 0 && errno == EINPROGRESS) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      socklen_t el = sizeof e;
      if (poll(&pfd, 1, ms_left(until)) <= 0)
        e = ETIMEDOUT;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
        e = errno;
      r = e ? -1 : 0;
    } else if (r < 0)
      e = errno;
    if (r == 0)
      return fd;
    close(fd);
  }
  bufprintf_cut(why, why_len, "connect to %s port %u: %s", rec->addr, port, strerror(e));
  return -1;
}

/* Data one way: a buffer between reading from `from` and writing to `to`. */
/* A plain-HTTP response head being read from the origin, rewritten before the client gets it
 * (egress_response_head: `Connection: close`). */
struct resp_head {
  char buf[EGRESS_HEAD_MAX];
  size_t len;
  bool done;
};

struct flow {
  int from, to;
  char buf[65536]; /* > 2 * EGRESS_HEAD_MAX: a rewritten head and what followed it fit */
  size_t len, off;
  bool eof, limited; /* limited: the budget ran out; what fits is sent, then the connection ends */
  uint64_t *total, limit, *mine;
  struct resp_head *head; /* the origin-to-client flow of plain HTTP, else NULL */
};

/* Take n bytes out of the sandbox's budget for this direction: how many may go (0 at the limit). */
static size_t budget_take(struct flow *f, size_t n)
{
  uint64_t before = ADD(*f->total, n);
  if (before >= f->limit) {
    ADD(*f->total, -(uint64_t) n);
    return 0;
  }
  if (before + n > f->limit) {
    ADD(*f->total, -(uint64_t) (before + n - f->limit));
    return (size_t) (f->limit - before);
  }
  return n;
}

/* n more bytes of the origin's response head are in f->head: move what is complete, rewritten,
 * to f->buf for the client (interim 1xx heads as they are, then the final one and what followed
 * it). -1: not an HTTP/1.x response head. At the origin's end of stream, whatever was held goes as
 * it is (the client sees the truncated response, as it would without a proxy). */
static int take_response_head(struct flow *f)
{
  struct resp_head *h = f->head;
  while (!h->done) {
    if (f->eof) {
      memcpy(f->buf, h->buf, h->len);
      f->len = h->len;
      h->done = true;
      break;
    }
    strbuf_t out = {0};
    size_t head_len;
    bool interim;
    enum egress_head_result r = egress_response_head(h->buf, h->len, &out, &head_len, &interim);
    if (r == EGRESS_HEAD_INCOMPLETE) {
      strbuf_free(&out);
      return 0;
    }
    if (r == EGRESS_HEAD_BAD || f->len + out.len + (interim ? 0 : h->len - head_len) > sizeof f->buf) {
      strbuf_free(&out);
      return -1;
    }
    memcpy(f->buf + f->len, out.data, out.len);
    f->len += out.len;
    strbuf_free(&out);
    memmove(h->buf, h->buf + head_len, h->len - head_len);
    h->len -= head_len;
    if (!interim) {
      memcpy(f->buf + f->len, h->buf, h->len);
      f->len += h->len;
      h->done = true;
    }
  }
  f->off = 0;
  return 0;
}

/* Both ways until both are closed, the byte budget is spent or the connection's time is up. */
static const char *splice_both(struct flow *up, struct flow *down, uint64_t deadline,
                               struct egress_shared *sh)
{
  struct flow *fl[2] = {up, down};
  for (;;) {
    if (up->eof && !up->len && down->eof && !down->len)
      return "closed";
    struct pollfd pfd[2] = {{.fd = up->from}, {.fd = down->from}};
    for (int i = 0; i < 2; i++) {
      if (!fl[i]->eof && !fl[i]->len)
        pfd[i].events |= POLLIN;
      if (fl[1 - i]->len)
        pfd[i].events |= POLLOUT;
    }
    int r = poll(pfd, 2, ms_left(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0) {
      ADD(sh->hit_time, 1);
      return "time_limit";
    }
    if (r < 0)
      return "closed";
    for (int i = 0; i < 2; i++) {
      struct flow *f = fl[i], *o = fl[1 - i];
      /* pfd[i] is f->from, which is o->to. */
      if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) && !f->eof && !f->len) {
        bool in_head = f->head && !f->head->done;
        char *into = in_head ? f->head->buf + f->head->len : f->buf;
        ssize_t n =
            recv(f->from, into, in_head ? sizeof f->head->buf - f->head->len : sizeof f->buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
          n = -2;
        if (n == 0 || n == -1) {
          f->eof = true;
          if (in_head && take_response_head(f) < 0)
            return "bad_response";
          if (!f->len)
            shutdown(f->to, SHUT_WR);
        } else if (n > 0) {
          size_t ok = budget_take(f, (size_t) n);
          if (ok == 0) {
            ADD(sh->hit_bytes, 1);
            return "byte_limit";
          }
          ADD(*f->mine, ok);
          if (ok < (size_t) n)
            f->eof = f->limited = true;
          if (!in_head) {
            f->len = ok;
            f->off = 0;
          } else {
            f->head->len += ok;
            if (take_response_head(f) < 0)
              return "bad_response";
          }
        }
      }
      if ((pfd[i].revents & POLLOUT) && o->len) {
        ssize_t n = send(f->from, o->buf + o->off, o->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
          return "closed";
        if (n > 0) {
          o->off += (size_t) n;
          o->len -= (size_t) n;
          if (!o->len && o->limited) {
            ADD(sh->hit_bytes, 1);
            return "byte_limit";
          }
          if (!o->len && o->eof) /* the last of a response head held at the origin's end */
            shutdown(o->to, SHUT_WR);
        }
      }
    }
  }
}

/* Write all of buf to fd before the deadline. */
static int send_all(int fd, const char *buf, size_t len, uint64_t deadline)
{
  while (len) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      buf += n;
      len -= (size_t) n;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR)
      return -1;
    else if (poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, ms_left(deadline)) <= 0)
      return -1;
  }
  return 0;
}

/* The verdict's name in the log. */
static const char *match_verdict(enum egress_verdict v)
{
  return v == EGRESS_BAD_HOST ? "bad_host" : v == EGRESS_PORT_NOT_ALLOWED ? "port_not_allowed" : "no_rule";
}

static const char *match_reason(const struct egress_request *req, const struct egress_match *m, char *why,
                                size_t len)
{
  if (m->verdict == EGRESS_BAD_HOST)
    bufprintf_cut(why, len, "`%s` is not a host name or IP literal", req->host);
  else if (m->verdict == EGRESS_PORT_NOT_ALLOWED)
    bufprintf_cut(why, len, "allow_host names `%s`, but not port %u", req->host, req->port);
  else
    bufprintf_cut(why, len, "no allow_host names `%s` (port %u)", req->host, req->port);
  return why;
}

/* The connection's time is up wherever it is, resolving included (getaddrinfo takes no deadline):
 * the record says so, and the process ends (its sockets with it). */
static struct egress_rec *alarm_rec;
static uint32_t *alarm_hits;

static void on_alarm(int sig)
{
  (void) sig;
  struct egress_rec *r = alarm_rec;
  static const char tl[] = "time_limit";
  memcpy(r->end, tl, sizeof tl);
  if (!r->verdict[0])
    memcpy(r->verdict, tl, sizeof tl);
  STORE(r->end_ns, now_ns());
  STORE(r->state, REC_DONE);
  ADD(*alarm_hits, 1);
  _exit(0);
}

static _Noreturn void serve_conn(int fd, struct conn_ctx *cx)
{
  struct egress_rec scratch;
  struct egress_rec *rec = rec_claim(cx->sh, &scratch);
  uint64_t deadline = rec->start_ns + cx->p->egress.connection_time_ms * 1000000ULL;
  /* A second past the deadline the poll loops keep: only a call that ignores it meets this. */
  alarm_rec = rec;
  alarm_hits = &cx->sh->hit_time;
  signal(SIGALRM, on_alarm);
  alarm((unsigned) (cx->p->egress.connection_time_ms / 1000) + 2);
  static char buf[EGRESS_HEAD_MAX];
  size_t len = 0;
  struct egress_request req;
  if (read_head(fd, buf, &len, &req, cx, rec) < 0)
    _exit(0);
  bufprintf_cut(rec->method, sizeof rec->method, "%s", req.method);
  bufprintf_cut(rec->host, sizeof rec->host, "%s", req.host);
  rec->port = req.port;
  STORE(rec->state, REC_OPEN);

  char why[200];
  struct egress_match m;
  egress_match_host(cx->p->allow_hosts, cx->p->n_allow_hosts, req.host, req.port, &m);
  if (m.verdict != EGRESS_ALLOWED) {
    rec_refuse(cx->sh, rec, match_verdict(m.verdict), match_reason(&req, &m, why, sizeof why));
    respond(fd, 403, why);
    _exit(0);
  }
  struct egress_addr addrs[MAX_ADDRS];
  size_t n_addrs;
  if (destinations(fd, &req, &m, cx, rec, addrs, &n_addrs) < 0)
    _exit(0);
  int up = connect_any(addrs, n_addrs, req.port, deadline, rec, why, sizeof why);
  if (up < 0) {
    rec_refuse(cx->sh, rec, "connect_failed", why);
    respond(fd, 502, why);
    _exit(0);
  }
  bufprintf_cut(rec->verdict, sizeof rec->verdict, "allowed");
  ADD(cx->sh->allowed, 1);
  /* What reaches the origin first: the rewritten head (plain HTTP), then any body already read.
   * A CONNECT client hears 200 first; bytes it sent after the head go through the tunnel. */
  static struct flow fup, fdown;
  fup = (struct flow){
      .from = fd, .to = up, .total = &cx->sh->bytes_up, .limit = cx->p->egress.bytes_up, .mine = &rec->up};
  fdown = (struct flow){.from = up,
                        .to = fd,
                        .total = &cx->sh->bytes_down,
                        .limit = cx->p->egress.bytes_down,
                        .mine = &rec->down};
  static struct resp_head rhead;
  if (!req.connect)
    fdown.head = &rhead;
  static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  const char *end = "closed";
  if (req.connect && send_all(fd, established, sizeof established - 1, deadline) < 0)
    goto done;
  if (!req.connect) {
    if (budget_take(&fup, req.upstream.len) < req.upstream.len) {
      ADD(cx->sh->hit_bytes, 1);
      end = "byte_limit";
      goto done;
    }
    ADD(rec->up, req.upstream.len);
    if (send_all(up, req.upstream.data, req.upstream.len, deadline) < 0)
      goto done;
  }
  if (len > req.head_len) {
    size_t body = len - req.head_len, ok = budget_take(&fup, body);
    memcpy(fup.buf, buf + req.head_len, ok);
    fup.len = ok;
    ADD(rec->up, ok);
    if (ok < body)
      fup.eof = fup.limited = true;
  }
  end = splice_both(&fup, &fdown, deadline, cx->sh);
  if (!strcmp(end, "bad_response"))
    respond(fd, 502, "the origin's answer is not an HTTP/1.x response");
done:
  bufprintf_cut(rec->end, sizeof rec->end, "%s", end);
  STORE(rec->end_ns, now_ns());
  STORE(rec->state, REC_DONE);
  _exit(0);
}

/* ------------------------------------------------------------------ the proxy process */

struct server {
  struct conn_ctx cx;
  int listen_fd, pidfd, sfd;
  pid_t kids[SBX_EGRESS_MAX_CONNECTIONS];
  size_t n_kids;
  uint64_t tokens_ns; /* the accept bucket, in ns of refill: a connection costs NS_PER_ACCEPT */
  uint64_t filled_at; /* now_ns() of the last refill */
};

/* The accept bucket (EGRESS_ACCEPT_RATE, EGRESS_ACCEPT_BURST), kept as time so that it refills
 * without rounding: full is BURST connections' worth. */
#define NS_PER_ACCEPT (1000000000ULL / EGRESS_ACCEPT_RATE)
#define BUCKET_FULL_NS (NS_PER_ACCEPT * EGRESS_ACCEPT_BURST)

/* Refill the bucket; the ms until it holds one connection (0: it does now). */
static int bucket_wait_ms(struct server *s)
{
  uint64_t now = now_ns();
  s->tokens_ns += now - s->filled_at;
  if (s->tokens_ns > BUCKET_FULL_NS)
    s->tokens_ns = BUCKET_FULL_NS;
  s->filled_at = now;
  if (s->tokens_ns >= NS_PER_ACCEPT)
    return 0;
  return (int) ((NS_PER_ACCEPT - s->tokens_ns + 999999) / 1000000);
}

static void reap(struct server *s)
{
  pid_t pid;
  while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
    for (size_t i = 0; i < s->n_kids; i++)
      if (s->kids[i] == pid) {
        s->kids[i] = s->kids[--s->n_kids];
        break;
      }
}

static void accept_one(struct server *s)
{
  int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0)
    return;
  /* Every accepted connection costs the proxy, a 503 too: each takes its share of the bucket. */
  s->tokens_ns -= NS_PER_ACCEPT;
  if (s->tokens_ns < NS_PER_ACCEPT && !LOAD(s->cx.sh->hit_rate))
    ADD(s->cx.sh->hit_rate, 1);
  if (s->n_kids >= s->cx.p->egress.connections) {
    struct egress_rec scratch, *rec = rec_claim(s->cx.sh, &scratch);
    char why[120];
    bufprintf_cut(why, sizeof why, "the sandbox has %zu connections open, its limit (egress_connections)",
                  s->n_kids);
    ADD(s->cx.sh->hit_connections, 1);
    rec_refuse(s->cx.sh, rec, "connection_limit", why);
    char head[512];
    bufprintf_cut(head, sizeof head,
                  "HTTP/1.1 503 Service Unavailable\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n"
                  "sandboxd egress proxy: %s\n",
                  strlen(why) + 24, why);
    (void) !send(fd, head, strlen(head), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(s->listen_fd);
    close(s->pidfd);
    close(s->sfd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    serve_conn(fd, &s->cx);
  }
  close(fd);
  if (pid > 0)
    s->kids[s->n_kids++] = pid;
}

/* Only these fds: the listener and pid 1's pidfd (and /dev/null on 0, 1, 2: stdout may be the
 * MCP protocol). */
static int isolate(int *listen_fd, int *pidfd)
{
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
    return -1;
  if (dup2(*listen_fd, 3) < 0 || dup2(*pidfd, 4) < 0)
    return -1;
  *listen_fd = 3;
  *pidfd = 4;
  fcntl(3, F_SETFD, FD_CLOEXEC);
  fcntl(4, F_SETFD, FD_CLOEXEC);
  return (int) syscall(SYS_close_range, 5U, ~0U, 0);
}

static struct sbx_bpf helper_filter; /* seccomp_helper_compile, once */

static _Noreturn void proxy_main(const struct sbx_policy *p, struct egress_shared *sh, int listen_fd,
                                 int pidfd, unsigned run_as)
{
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      signal(sig, SIG_DFL);
  signal(SIGPIPE, SIG_IGN);
  /* A terminal's Ctrl-C reaches the whole process group: the code gets it (relayed, with a grace
   * period) and keeps its connections meanwhile; the proxy ends with the sandbox. */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  struct server s = {.cx = {.p = p, .sh = sh}, .listen_fd = listen_fd, .pidfd = pidfd};
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_SETMASK, &chld, NULL);
  sbx_error_t err = {0};
  struct egress_addr *own = NULL;
  if (isolate(&s.listen_fd, &s.pidfd) < 0 || (s.sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
      egress_host_addrs(&own, &s.cx.n_own, &err) < 0)
    _exit(1);
  s.cx.own = own;
  /* Nothing to do with privilege: it connects and relays. As root: the sandbox's own host id
   * (leaving root clears every capability), so a compromised proxy owns no host file root owns;
   * root without a host id drops its capabilities. It never execs (no_new_privs). */
  if (run_as && (setgroups(0, NULL) < 0 || setresgid(run_as, run_as, run_as) < 0 ||
                 setresuid(run_as, run_as, run_as) < 0 || getuid() != run_as))
    _exit(1);
  if (!run_as && geteuid() == 0 && caps_drop_all(&err) < 0)
    _exit(1);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_install(&helper_filter, &err) < 0)
    _exit(1);
  s.tokens_ns = BUCKET_FULL_NS;
  s.filled_at = now_ns();
  for (;;) {
    /* An empty bucket: the listener is not polled until it holds a connection again, and what
     * the sandbox connects meanwhile waits in the backlog, at no cost to the host. */
    int wait = bucket_wait_ms(&s);
    struct pollfd pfd[3] = {{.fd = s.pidfd, .events = POLLIN},
                            {.fd = s.sfd, .events = POLLIN},
                            {.fd = wait ? -1 : s.listen_fd, .events = POLLIN}};
    if (poll(pfd, 3, wait ? wait : -1) < 0 && errno != EINTR)
      break;
    if (pfd[0].revents)
      break;
    if (pfd[1].revents) {
      struct signalfd_siginfo si;
      while (read(s.sfd, &si, sizeof si) == sizeof si)
        ;
      reap(&s);
    }
    if (pfd[2].revents & POLLIN)
      accept_one(&s);
  }
  /* The sandbox has ended: its connections end with it. */
  for (size_t i = 0; i < s.n_kids; i++)
    kill(s.kids[i], SIGKILL);
  while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
    ;
  _exit(0);
}

int egress_proxy_start(const struct sbx_policy *p, int listen_fd, int pidfd, unsigned run_as,
                       struct egress_log **ret_log, pid_t *ret_pid, sbx_error_t *err)
{
  _cleanup_close_ int lfd = listen_fd;
  /* The proxy parses what the sandbox sends: it and its connections run under the host-side
   * helpers' filter (seccomp.h), compiled once here and inherited by every fork. */
  if (!helper_filter.main_prog && seccomp_helper_compile(&helper_filter, err) < 0)
    return sbx_error_prefix(err, "egress proxy");
  struct egress_log *l = calloc(1, sizeof *l);
  if (!l)
    return sbx_error_set(err, ENOMEM, "egress proxy");
  l->sh = mmap(NULL, sizeof *l->sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (l->sh == MAP_FAILED) {
    free(l);
    return sbx_error_errno(err, "egress proxy: mmap");
  }
  /* Here, before the fork: the proxy's processes inherit it, and a missing library is a setup
   * error, not a 500 on every request. */
  if (egress_http_load(err) < 0) {
    egress_log_free(l);
    return -1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    egress_log_free(l);
    return sbx_error_errno(err, "egress proxy: fork");
  }
  if (pid == 0) {
    if (getppid() != parent)
      _exit(1);
    proxy_main(p, l->sh, lfd, pidfd, run_as);
  }
  /* Later forks (the next sandbox, its proxy) do not get this sandbox's log. */
  madvise(l->sh, sizeof *l->sh, MADV_DONTFORK);
  *ret_log = l;
  *ret_pid = pid;
  return 0;
}
