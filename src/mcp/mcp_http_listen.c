/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: where it listens: the --http argument, the listening socket, and the
 * connections the open-file limit leaves room for. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "mcp/mcp_http.h"

/* fds kept for everything but connections: sandboxes (pidfd, pipes, bridge), host servers, logs. */
#define FD_RESERVE_BASE 256
#define FD_RESERVE_PER_CALL 16

int mcp_http_parse_listen(const char *arg, struct mcp_http_opts *o, sbx_error_t *err)
{
  const char *colon = strrchr(arg, ':');
  const char *port = colon ? colon + 1 : arg;
  char addr[64] = MCP_HTTP_DEFAULT_ADDR;
  if (colon) {
    const char *a = arg;
    size_t n = (size_t) (colon - arg);
    bool bracketed = n >= 2 && a[0] == '[' && a[n - 1] == ']';
    if (bracketed) {
      a++;
      n -= 2;
    }
    if (!bracketed && memchr(a, ':', n))
      return sbx_error_set(err, 0, "--http `%s`: an IPv6 address goes in brackets: [ADDR]:PORT", arg);
    if (!n || n >= sizeof addr)
      return sbx_error_set(err, 0, "--http `%s`: expected [ADDR:]PORT", arg);
    memcpy(addr, a, n);
    addr[n] = '\0';
  }
  uint64_t p;
  if (parse_u64(port, &p) < 0 || p > 65535)
    return sbx_error_set(err, 0, "--http `%s`: the port must be a number from 0 to 65535", arg);
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, addr, &a4) == 1)
    o->loopback = (ntohl(a4.s_addr) >> 24) == 127;
  else if (inet_pton(AF_INET6, addr, &a6) == 1)
    o->loopback = IN6_IS_ADDR_LOOPBACK(&a6);
  else
    return sbx_error_set(err, 0, "--http `%s`: `%s` is not a numeric IPv4 or IPv6 address", arg, addr);
  memcpy(o->addr, addr, sizeof addr);
  o->port = (uint16_t) p;
  return 0;
}

/* The listening socket, made here so its errors say what failed. */
int mcp_http_listen_socket(const struct mcp_http_opts *o, char *url, size_t url_size, sbx_error_t *err)
{
  struct sockaddr_storage ss = {0};
  socklen_t len;
  bool v6 = strchr(o->addr, ':') != NULL;
  if (v6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(o->port);
    inet_pton(AF_INET6, o->addr, &s6->sin6_addr);
    len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *) &ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(o->port);
    inet_pton(AF_INET, o->addr, &s4->sin_addr);
    len = sizeof *s4;
  }
  _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return sbx_error_errno(err, "--http: socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, (struct sockaddr *) &ss, len) < 0)
    return sbx_error_errno(err, "--http: bind %s%s%s:%u", v6 ? "[" : "", o->addr, v6 ? "]" : "", o->port);
  if (listen(fd, 1024) < 0)
    return sbx_error_errno(err, "--http: listen");
  len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
    return sbx_error_errno(err, "--http: getsockname");
  unsigned port =
      ntohs(v6 ? ((struct sockaddr_in6 *) &ss)->sin6_port : ((struct sockaddr_in *) &ss)->sin_port);
  bufprintf_cut(url, url_size, "http://%s%s%s:%u" MCP_HTTP_PATH, v6 ? "[" : "", o->addr, v6 ? "]" : "", port);
  return TAKE_FD(fd);
}

/* Connections are fds: raise the soft limit to the hard one, and keep room for the sandboxes. */
size_t mcp_http_connection_limit(size_t max_concurrent, size_t warm, size_t want, sbx_error_t *err)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
    return (size_t) sbx_error_errno(err, "getrlimit");
  uint64_t reserve = FD_RESERVE_BASE + FD_RESERVE_PER_CALL * (uint64_t) (max_concurrent + warm);
  if (rl.rlim_cur == RLIM_INFINITY)
    return want;
  if (rl.rlim_cur <= reserve + 16) {
    sbx_error_set(err, EMFILE, "--http: the open-file limit (%llu) leaves no room for connections",
                  (unsigned long long) rl.rlim_cur);
    return 0;
  }
  uint64_t room = rl.rlim_cur - reserve;
  return room < want ? (size_t) room : want;
}
