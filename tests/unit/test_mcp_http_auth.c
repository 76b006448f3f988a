/* Unit tests for mcp_http_auth.c: the token file (parsed, checked, matched by index) and the
 * Origin check; and mcp_http_parse_listen. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "mcp/mcp_http.h"

static char dir[] = "/tmp/test_mcp_http_auth.XXXXXX";

static const char *write_tokens(const char *name, const char *text, mode_t mode)
{
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text))
    abort();
  close(fd);
  chmod(path, mode);
  return path;
}

static int load(const char *name, const char *text, mode_t mode, struct http_tokens *t)
{
  sbx_error_t err = {0};
  *t = (struct http_tokens){0};
  return http_tokens_load(write_tokens(name, text, mode), t, &err);
}

static void test_tokens(void)
{
  struct http_tokens t;
  const char *a = "aaaaaaaaaaaaaaaa-first", *b = "bbbbbbbbbbbbbbbb-second";
  CHECK(load("ok", "# comment\n\n  aaaaaaaaaaaaaaaa-first  \r\nbbbbbbbbbbbbbbbb-second\n", 0600, &t) == 0);
  CHECK(t.n == 2);
  CHECK(http_tokens_match(&t, a, strlen(a)) == 0);
  CHECK(http_tokens_match(&t, b, strlen(b)) == 1);
  CHECK(http_tokens_match(&t, a, strlen(a) - 1) == -1);             /* a prefix */
  CHECK(http_tokens_match(&t, "aaaaaaaaaaaaaaaa-firsT", 22) == -1); /* one byte off */
  CHECK(http_tokens_match(&t, "", 0) == -1);
  http_tokens_free(&t);
  CHECK(load("ro", "aaaaaaaaaaaaaaaa-first\n", 0400, &t) == 0 && t.n == 1);
  http_tokens_free(&t);
  /* Refused: readable by group or others, a token too short or with a space, none at all. */
  CHECK(load("g", "aaaaaaaaaaaaaaaa-first\n", 0640, &t) < 0);
  CHECK(load("o", "aaaaaaaaaaaaaaaa-first\n", 0604, &t) < 0);
  CHECK(load("x", "aaaaaaaaaaaaaaaa-first\n", 0610, &t) < 0);
  CHECK(load("short", "fifteen-chars-x\n", 0600, &t) < 0);
  CHECK(load("sixteen", "sixteen-chars-xx\n", 0600, &t) == 0 && t.n == 1);
  http_tokens_free(&t);
  CHECK(load("space", "aaaaaaaa aaaaaaaaaaaaa\n", 0600, &t) < 0);
  CHECK(load("empty", "# only a comment\n\n", 0600, &t) < 0);
  char path[300];
  snprintf(path, sizeof path, "%s/link", dir);
  CHECK(symlink(write_tokens("target", "aaaaaaaaaaaaaaaa-first\n", 0600), path) == 0);
  sbx_error_t err = {0};
  CHECK(http_tokens_load(path, &t, &err) < 0);
}

static void test_origins(void)
{
  const char *allowed[] = {"https://app.example.com"};
  static const char *const good[] = {
      "http://localhost",    "http://localhost:3000", "https://LOCALHOST:1",     "http://127.0.0.1",
      "http://127.1.2.3:80", "http://[::1]:8080",     "https://app.example.com", "HTTPS://APP.EXAMPLE.COM"};
  static const char *const bad[] = {"http://evil.example",
                                    "http://localhost.evil.example",
                                    "http://127.0.0.1.evil",
                                    "http://127.0.0.1:",
                                    "http://127.0.0.1:80x",
                                    "http://127.0.0",
                                    "http://[::1",
                                    "http://[::2]",
                                    "null",
                                    "file://",
                                    "localhost",
                                    "https://app.example.com:444",
                                    "http://app.example.com",
                                    ""};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    if (!http_origin_allowed(good[i], allowed, 1)) {
      fprintf(stderr, "refused: %s\n", good[i]);
      CHECK(0);
    } else
      CHECK(1);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (http_origin_allowed(bad[i], allowed, 1)) {
      fprintf(stderr, "allowed: %s\n", bad[i]);
      CHECK(0);
    } else
      CHECK(1);
}

static void test_listen(void)
{
  struct mcp_http_opts o = {0};
  sbx_error_t err = {0};
  CHECK(mcp_http_parse_listen("8080", &o, &err) == 0 && o.port == 8080 && !strcmp(o.addr, "127.0.0.1") &&
        o.loopback);
  CHECK(mcp_http_parse_listen("0.0.0.0:0", &o, &err) == 0 && o.port == 0 && !o.loopback);
  CHECK(mcp_http_parse_listen("127.5.0.1:1", &o, &err) == 0 && o.loopback);
  CHECK(mcp_http_parse_listen("[::1]:443", &o, &err) == 0 && !strcmp(o.addr, "::1") && o.loopback);
  CHECK(mcp_http_parse_listen("[::]:443", &o, &err) == 0 && !o.loopback);
  CHECK(mcp_http_parse_listen("10.0.0.1:65535", &o, &err) == 0 && o.port == 65535);
  static const char *const bad[] = {"65536",        "x",        "",      "localhost:80",
                                    ":80",          "1.2.3:80", "[::1]", "[::1]:",
                                    "127.0.0.1:-1", "::1:80",   "::1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (mcp_http_parse_listen(bad[i], &o, &err) == 0) {
      fprintf(stderr, "taken: %s\n", bad[i]);
      CHECK(0);
    } else
      CHECK(1);
}

int main(void)
{
  if (!mkdtemp(dir))
    return 1;
  test_tokens();
  test_origins();
  test_listen();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    return 1;
  return check_summary("test_mcp_http_auth");
}
