/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd mcp --http`: who may call. The bearer tokens of --token-file (loaded, compared in
 * constant time) and the Origin check that stops a web page's DNS-rebinding attack. Pure but for
 * reading the file; unit-tested. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "mcp/mcp_http.h"

#define TOKEN_FILE_MAX (1u << 20)
#define TOKEN_MIN 16
#define TOKEN_MAX 4096

void http_tokens_free(struct http_tokens *t)
{
  free(t->sha);
  t->sha = NULL;
  t->n = 0;
}

/* Checked on the open file: a token file others can read is a leaked token. */
static int check_file(int fd, const char *path, sbx_error_t *err)
{
  struct stat st;
  if (fstat(fd, &st) < 0)
    return sbx_error_errno(err, "--token-file `%s`", path);
  if (!S_ISREG(st.st_mode))
    return sbx_error_set(err, 0, "--token-file `%s`: not a regular file", path);
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return sbx_error_set(err, 0, "--token-file `%s`: owned by uid %u, not by us or root", path,
                         (unsigned) st.st_uid);
  /* A file root hands to a server that is not root may be readable by its group too: root chose
   * the group (a Kubernetes Secret mounted with fsGroup is root:fsGroup 0440), as PostgreSQL
   * allows for its key. Our own file stays 600. */
  if (st.st_mode & (st.st_uid == 0 && geteuid() != 0 ? 037 : 077))
    return sbx_error_set(err, 0, "--token-file `%s`: mode %04o lets others read it; chmod 600 it", path,
                         (unsigned) (st.st_mode & 07777));
  if (st.st_size > TOKEN_FILE_MAX)
    return sbx_error_set(err, 0, "--token-file `%s`: larger than %u bytes", path, TOKEN_FILE_MAX);
  return 0;
}

static int parse_tokens(const char *path, char *data, struct http_tokens *t, sbx_error_t *err)
{
  unsigned line = 0;
  for (char *p = data, *nl; p && *p; p = nl) {
    line++;
    nl = strchr(p, '\n');
    if (nl)
      *nl++ = '\0';
    size_t len = strlen(p);
    while (len && (p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t'))
      p[--len] = '\0';
    while (*p == ' ' || *p == '\t')
      p++, len--;
    if (!len || *p == '#')
      continue;
    if (len < TOKEN_MIN || len > TOKEN_MAX)
      return sbx_error_set(err, 0, "--token-file `%s`:%u: a token must be %d to %d characters", path, line,
                           TOKEN_MIN, TOKEN_MAX);
    for (size_t i = 0; i < len; i++)
      if (p[i] <= ' ' || p[i] > '~')
        return sbx_error_set(err, 0, "--token-file `%s`:%u: a token is visible ASCII without spaces", path,
                             line);
    void *grown = realloc(t->sha, (t->n + 1) * sizeof *t->sha);
    if (!grown)
      return sbx_error_set(err, ENOMEM, "--token-file `%s`: out of memory", path);
    t->sha = grown;
    sha256_hex(p, len, t->sha[t->n++]);
  }
  if (!t->n)
    return sbx_error_set(err, 0, "--token-file `%s`: no token in it", path);
  return 0;
}

int http_tokens_load(const char *path, struct http_tokens *ret, sbx_error_t *err)
{
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return sbx_error_errno(err, "--token-file `%s`", path);
  if (check_file(fd, path, err) < 0)
    return -1;
  _cleanup_free_ char *data = malloc(TOKEN_FILE_MAX + 1);
  if (!data)
    return sbx_error_set(err, ENOMEM, "--token-file `%s`: out of memory", path);
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, data + len, TOKEN_FILE_MAX - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return sbx_error_errno(err, "--token-file `%s`: read", path);
    if (n == 0)
      break;
    len += (size_t) n;
    if (len == TOKEN_FILE_MAX)
      return sbx_error_set(err, 0, "--token-file `%s`: larger than %u bytes", path, TOKEN_FILE_MAX);
  }
  data[len] = '\0';
  if (memchr(data, '\0', len))
    return sbx_error_set(err, 0, "--token-file `%s`: a NUL byte in it", path);
  struct http_tokens t = {0};
  if (parse_tokens(path, data, &t, err) < 0) {
    http_tokens_free(&t);
    return -1;
  }
  explicit_bzero(data, len);
  *ret = t;
  return 0;
}

int http_tokens_match(const struct http_tokens *t, const char *token, size_t len)
{
  /* Hashes of equal length, every byte of every token compared: the time says nothing about how
   * much of which token was right. */
  char sha[65];
  sha256_hex(token, len, sha);
  int found = -1;
  for (size_t i = 0; i < t->n; i++) {
    unsigned char diff = 0;
    for (size_t j = 0; j < 64; j++)
      diff |= (unsigned char) (sha[j] ^ t->sha[i][j]);
    /* found = i when diff is 0, branch-free */
    unsigned mask = (unsigned) (((int) diff - 1) >> 8) & 1u;
    found = (int) (mask * (unsigned) i + (1u - mask) * (unsigned) found);
  }
  explicit_bzero(sha, sizeof sha);
  return found;
}

static bool loopback_host(const char *h, size_t n)
{
  if ((n == 9 && strncasecmp(h, "localhost", 9) == 0) || (n == 5 && strncmp(h, "[::1]", 5) == 0))
    return true;
  /* 127.0.0.0/8, as four decimal parts */
  if (n < 7 || strncmp(h, "127.", 4) != 0)
    return false;
  int dots = 0;
  for (size_t i = 4; i < n; i++) {
    if (h[i] == '.')
      dots++;
    else if (h[i] < '0' || h[i] > '9')
      return false;
  }
  return dots == 2;
}

bool http_origin_allowed(const char *origin, const char *const *allowed, size_t n_allowed)
{
  for (size_t i = 0; i < n_allowed; i++)
    if (strcasecmp(origin, allowed[i]) == 0)
      return true;
  const char *host;
  if (strncasecmp(origin, "http://", 7) == 0)
    host = origin + 7;
  else if (strncasecmp(origin, "https://", 8) == 0)
    host = origin + 8;
  else
    return false; /* "null" (a sandboxed frame, a file://), or anything else */
  size_t n = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":");
  if (host[0] == '[' && host[n - 1] != ']')
    return false;
  const char *rest = host + n;
  if (*rest == ':') {
    rest++;
    if (!*rest)
      return false;
    for (; *rest; rest++)
      if (*rest < '0' || *rest > '9')
        return false;
  } else if (*rest)
    return false;
  return loopback_host(host, n);
}
