/* libFuzzer target: the bridge.
 *
 * By default, in process: the frame reader, fed in chunks whose sizes come from the input, and a
 * frame still arriving given up (bridge_reader_drop) when the input's first byte says so.
 *
 * With SANDBOXD_FUZZ_BRIDGE=live, a real `sandboxd mcp` with a sandbox at the other end:
 *
 *   fuzzer --FIFO in--> bridge_relay.py (host MCP server `fuzz`, started by sandboxd)
 *     ^                      | tool `next`: the input, base64
 *     |                      v
 *     +--FIFO out (ack)-- relay code in run_python --fd 3, raw frames--> sandboxd
 *
 * The relay code gets each input by calling `next`, sends it to sandboxd as frames on fd 3 (byte
 * 0 picks how: a frame of the rest, or one padded with spaces to more than 1 MiB, which sandboxd
 * checks as it arrives and holds whole, or to more than 16 MiB, the default request limit: the
 * oversize path), then calls `next` again; that call acknowledges the input, and since sandboxd
 * handles a bridge's frames in order, sandboxd has handled it by then. After each ack the fuzzer
 * checks that sandboxd is alive and answers `ping` within PING_MS; else it aborts, which saves
 * the input. A run that ends (its timeout, or the code died) is replaced by a new one.
 * Environment: SANDBOXD (default build-asan/sandboxd if built, else build/sandboxd),
 * SANDBOXD_ROOTFS (default rootfs/python-3.14-slim), paths relative to the repository;
 * SANDBOXD_FUZZ_AUDIT=FILE keeps sandboxd's audit log (each run's calls: one `next` per input). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostmcp/bridge.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PING_MS 2000
#define ACK_MS 30000
#define MAX_INPUT 16384 /* fits a FIFO buffer: writing it never waits for the relay */

static int in_process(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  struct bridge_reader r;
  bridge_reader_init(&r, 1u << 16);
  size_t chunk = (size_t) data[0] % 17 + 1, off = 1;
  bool drop = data[0] & 0x80;
  while (off < size) {
    size_t n = size - off < chunk ? size - off : chunk;
    size_t used;
    char *f;
    size_t flen;
    enum bridge_event e = bridge_reader_feed(&r, (const char *) data + off, n, &used, &f, &flen);
    if (used > n)
      abort();
    if (e == BRIDGE_FRAME) {
      if (f[flen] != '\0')
        abort();
      free(f);
    }
    if (e == BRIDGE_OVERSIZE && (flen > BRIDGE_OVERSIZE_PREFIX || f[flen] != '\0'))
      abort();
    if (used == 0 && e == BRIDGE_NEED_MORE)
      abort();
    off += used;
    size_t have;
    const char *part = bridge_reader_partial(&r, &have);
    if (part && have > r.max_frame)
      abort();
    if (part && drop && have >= 8)
      bridge_reader_drop(&r);
  }
  bridge_reader_free(&r);
  return 0;
}

/* ------------------------------------------------------------------ live mode */

/* The relay inside: raw frames on fd 3, its own `next` calls with ids no answer to a fuzz frame
 * is likely to carry. */
static const char RELAY_CODE[] =
    "import base64, json, os, socket, struct\n"
    "s = socket.socket(fileno=os.dup(3))\n"
    "def exact(n):\n"
    "    b = b''\n"
    "    while len(b) < n:\n"
    "        c = s.recv(n - len(b))\n"
    "        if not c:\n"
    "            raise SystemExit(0)\n"
    "        b += c\n"
    "    return b\n"
    "def frame(b, extra=0):\n"
    "    s.sendall(struct.pack('>I', len(b) + extra) + b + b' ' * extra)\n"
    "i = 0\n"
    "while True:\n"
    "    i += 1\n"
    "    rid = 'relay-%d' % i\n"
    "    frame(json.dumps({'jsonrpc': '2.0', 'id': rid, 'method': 'tools/call',\n"
    "                      'params': {'server': 'fuzz', 'name': 'next', 'arguments': {}}}).encode())\n"
    "    while True:\n"
    "        msg = json.loads(exact(struct.unpack('>I', exact(4))[0]))\n"
    "        if isinstance(msg, dict) and msg.get('id') == rid:\n"
    "            break\n"
    "    if 'result' not in msg:\n"
    "        raise SystemExit(0)\n"
    "    data = base64.b64decode(msg['result']['content'][0]['text'])\n"
    "    if not data:\n"
    "        continue\n"
    "    mode, body = data[0], data[1:]\n"
    "    if mode & 1:\n"
    "        frame(body, ((16 << 20) if mode & 2 else (1 << 20)) + (mode >> 2) * 4096)\n"
    "    elif mode & 2:\n"
    "        for part in body.split(b'\\n'):\n"
    "            frame(part)\n"
    "    else:\n"
    "        frame(body)\n";

static struct {
  pid_t pid;
  int to_sbx, from_sbx; /* sandboxd's stdin and stdout */
  int fifo_in, fifo_out;
  char dir[64];
  long next_id, run_id;
  char line[1 << 16];
  size_t line_len;
  bool overlong;
} L = {.pid = -1};

static void live_stop(void);

/* abort() saves the input; sandboxd and the scratch directory go first (atexit does not run). */
static void die(const char *what)
{
  fprintf(stderr, "fuzz_bridge live: %s\n", what);
  live_stop();
  abort();
}

static long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void write_all(int fd, const void *buf, size_t n)
{
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      die("write to sandboxd or the relay failed");
    p += w;
    n -= (size_t) w;
  }
}

static long send_request(const char *method, const char *params)
{
  char buf[sizeof RELAY_CODE * 2 + 512];
  long id = ++L.next_id;
  int n = snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"%s\"%s%s}\n", id, method,
                   params ? ",\"params\":" : "", params ? params : "");
  if (n < 0 || (size_t) n >= sizeof buf)
    die("request too long");
  write_all(L.to_sbx, buf, (size_t) n);
  return id;
}

static void start_run(void)
{
  /* The code as a JSON string: escape quotes, backslashes and newlines. */
  char code[sizeof RELAY_CODE * 2], params[sizeof RELAY_CODE * 2 + 256];
  size_t o = 0;
  for (const char *c = RELAY_CODE; *c; c++) {
    if (*c == '"' || *c == '\\')
      code[o++] = '\\';
    if (*c == '\n') {
      code[o++] = '\\';
      code[o++] = 'n';
    } else
      code[o++] = *c;
  }
  code[o] = '\0';
  snprintf(params, sizeof params,
           "{\"name\":\"run_python\",\"arguments\":{\"code\":\"%s\",\"servers\":[\"fuzz\"],\"timeout\":60}}", code);
  L.run_id = send_request("tools/call", params);
}

/* Read what sandboxd wrote; 1 if the answer to `want` is among it. A run that ended is
 * replaced. */
static int read_answers(long want)
{
  char buf[65536];
  ssize_t n = read(L.from_sbx, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return 0;
  if (n <= 0)
    die("sandboxd closed its stdout (it died?)");
  int found = 0;
  for (ssize_t i = 0; i < n; i++) {
    if (buf[i] != '\n') {
      if (L.line_len < sizeof L.line - 1)
        L.line[L.line_len++] = buf[i];
      else
        L.overlong = true; /* a long result: only its start matters */
      continue;
    }
    L.line[L.line_len] = '\0';
    long id;
    if (sscanf(L.line, "{\"jsonrpc\":\"2.0\",\"id\":%ld,", &id) == 1) {
      if (id == want)
        found = 1;
      if (id == L.run_id)
        start_run();
    }
    L.line_len = 0;
    L.overlong = false;
  }
  return found;
}

static void check_alive(void)
{
  int st;
  if (waitpid(L.pid, &st, WNOHANG) == L.pid) {
    L.pid = -1; /* reaped: nothing to stop */
    die(WIFSIGNALED(st) ? "sandboxd was killed by a signal" : "sandboxd exited");
  }
}

/* Wait for the answer to `id` (from sandboxd) or, with ack, for the relay's ack byte. */
static void wait_for(long id, bool ack, long ms, const char *what)
{
  long deadline = now_ms() + ms;
  for (;;) {
    long left = deadline - now_ms();
    if (left <= 0)
      die(what);
    struct pollfd p[2] = {{.fd = L.from_sbx, .events = POLLIN}, {.fd = ack ? L.fifo_out : -1, .events = POLLIN}};
    if (poll(p, 2, (int) left) < 0 && errno != EINTR)
      die("poll");
    if (p[0].revents && read_answers(id) && !ack)
      return;
    if (ack && (p[1].revents & POLLIN)) {
      char b[64];
      if (read(L.fifo_out, b, sizeof b) > 0)
        return;
    }
    check_alive();
  }
}

static void live_stop(void)
{
  if (L.pid > 0) {
    kill(L.pid, SIGTERM);
    waitpid(L.pid, NULL, 0);
    L.pid = -1;
  }
  if (!L.dir[0])
    return;
  char p[128];
  static const char *const names[] = {"in", "out", "servers.json"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(p, sizeof p, "%s/%s", L.dir, names[i]);
    unlink(p);
  }
  rmdir(L.dir);
  L.dir[0] = '\0';
}

static const char *pick(const char *env, const char *a, const char *b)
{
  const char *v = getenv(env);
  if (v && *v)
    return v;
  return access(a, X_OK) == 0 || !b ? a : b;
}

static void live_start(void)
{
  const char *sandboxd = pick("SANDBOXD", "build-asan/sandboxd", "build/sandboxd");
  const char *rootfs = pick("SANDBOXD_ROOTFS", "rootfs/python-3.14-slim", NULL);
  char relay[4096], fin[128], fout[128], cfg[128];
  if (!realpath("tests/fuzz/bridge_relay.py", relay))
    die("tests/fuzz/bridge_relay.py not found: run from the repository");
  snprintf(L.dir, sizeof L.dir, "/tmp/fuzz-bridge.XXXXXX");
  if (!mkdtemp(L.dir))
    die("mkdtemp");
  snprintf(fin, sizeof fin, "%s/in", L.dir);
  snprintf(fout, sizeof fout, "%s/out", L.dir);
  snprintf(cfg, sizeof cfg, "%s/servers.json", L.dir);
  /* O_RDWR: neither end blocks in open, whenever sandboxd starts the relay. */
  if (mkfifo(fin, 0600) < 0 || mkfifo(fout, 0600) < 0 || (L.fifo_in = open(fin, O_RDWR | O_CLOEXEC)) < 0 ||
      (L.fifo_out = open(fout, O_RDWR | O_CLOEXEC | O_NONBLOCK)) < 0)
    die("fifos");
  FILE *f = fopen(cfg, "we");
  if (!f)
    die("config");
  fprintf(f,
          "{\"mcpServers\":{\"fuzz\":{\"command\":\"/usr/bin/python3\",\"args\":[\"%s\"],"
          "\"env\":{\"FUZZ_IN\":\"%s\",\"FUZZ_OUT\":\"%s\"}}}}\n",
          relay, fin, fout);
  fclose(f);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
    die("pipe");
  signal(SIGPIPE, SIG_IGN);
  L.pid = fork();
  if (L.pid < 0)
    die("fork");
  if (L.pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    /* Leaks are for the in-process targets; here a leak at exit is not an answer to ping. */
    setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
    const char *audit = getenv("SANDBOXD_FUZZ_AUDIT");
    execl(sandboxd, "sandboxd", "mcp", "--config", cfg, "--rootfs", rootfs, "--warm", "0", "--audit-log",
          audit && *audit ? audit : "off", (char *) NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  L.to_sbx = in[1];
  L.from_sbx = out[0];
  atexit(live_stop);
  fprintf(stderr, "fuzz_bridge live: %s mcp (pid %d), rootfs %s\n", sandboxd, (int) L.pid, rootfs);
  long id = send_request("initialize", "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                                       "\"clientInfo\":{\"name\":\"fuzz_bridge\",\"version\":\"1\"}}");
  wait_for(id, false, 30000, "sandboxd did not answer initialize");
  start_run();
}

static bool live;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void) argc;
  (void) argv;
  const char *mode = getenv("SANDBOXD_FUZZ_BRIDGE");
  live = mode && strcmp(mode, "live") == 0;
  if (live)
    live_start();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (!live)
    return in_process(data, size);
  if (size > MAX_INPUT)
    return 0;
  unsigned char hdr[4] = {(unsigned char) (size >> 24), (unsigned char) (size >> 16), (unsigned char) (size >> 8),
                          (unsigned char) size};
  write_all(L.fifo_in, hdr, 4);
  write_all(L.fifo_in, data, size);
  wait_for(0, true, ACK_MS, "the relay did not ask for the next input: sandboxd stopped handling the bridge");
  long id = send_request("ping", NULL);
  wait_for(id, false, PING_MS, "sandboxd did not answer ping in time");
  return 0;
}
