/* SPDX-License-Identifier: Apache-2.0 */
/* One connection to the egress proxy, in a process of its own (egress_proxy.c forks it): the
 * request head within its deadline (egress_http.c), the allowlist, the name resolved on the host
 * and each address checked, the connect, then both ways within the byte and time budgets; every
 * step recorded in the log (egress_log.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/util.h"
#include "egress/egress_http.h"
#include "egress/egress_internal.h"
#include "egress/egress_proxy.h"
#include "policy/egress_rules.h"

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
      egress_rec_refuse(cx->sh, rec, st == 431 ? "header_too_large" : "bad_request", why);
      respond(fd, st, why);
      return -1;
    }
    int pr = poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, ms_left(deadline));
    ssize_t n = pr > 0 ? recv(fd, buf + *len, EGRESS_HEAD_MAX - *len, 0) : 0;
    if (pr == 0) {
      egress_rec_refuse(cx->sh, rec, "head_timeout", "no complete request head within 5 s");
      respond(fd, 408, "no complete request head within 5 s");
      return -1;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      egress_rec_refuse(cx->sh, rec, "bad_request", "the client closed before a complete request head");
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
      egress_rec_refuse(cx->sh, rec, "resolve_failed", why);
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
    egress_rec_refuse(cx->sh, rec, "resolve_failed", "the name has no IPv4 or IPv6 address");
    respond(fd, 502, "the name has no IPv4 or IPv6 address");
    return -1;
  }
  bufprintf_cut(why, sizeof why,
                "`%s` resolves to %s, a %s address: refused (only an allow_host naming that IP literal, or "
                "`localhost`, reaches it)",
                req->host, rec->addr, egress_class_name(refused));
  bufprintf_cut(rec->class, sizeof rec->class, "%s", egress_class_name(refused));
  egress_rec_refuse(cx->sh, rec, "address_refused", why);
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

_Noreturn void egress_serve_conn(int fd, struct conn_ctx *cx)
{
  struct egress_rec scratch;
  struct egress_rec *rec = egress_rec_claim(cx->sh, &scratch);
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
    egress_rec_refuse(cx->sh, rec, match_verdict(m.verdict), match_reason(&req, &m, why, sizeof why));
    respond(fd, 403, why);
    _exit(0);
  }
  struct egress_addr addrs[MAX_ADDRS];
  size_t n_addrs;
  if (destinations(fd, &req, &m, cx, rec, addrs, &n_addrs) < 0)
    _exit(0);
  int up = connect_any(addrs, n_addrs, req.port, deadline, rec, why, sizeof why);
  if (up < 0) {
    egress_rec_refuse(cx->sh, rec, "connect_failed", why);
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
