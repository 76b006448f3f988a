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
 * connections run, so sandboxd reads it whenever it answers.
 *
 * Here the listener and the proxy process; one connection's process is egress_conn.c, the log
 * egress_log.c. */
#include "egress/egress_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
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
#include "egress/egress_internal.h"
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
    struct egress_rec scratch, *rec = egress_rec_claim(s->cx.sh, &scratch);
    char why[120];
    bufprintf_cut(why, sizeof why, "the sandbox has %zu connections open, its limit (egress_connections)",
                  s->n_kids);
    ADD(s->cx.sh->hit_connections, 1);
    egress_rec_refuse(s->cx.sh, rec, "connection_limit", why);
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
    egress_serve_conn(fd, &s->cx);
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
  struct egress_log *l;
  if (egress_log_new(&l, err) < 0)
    return -1;
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
