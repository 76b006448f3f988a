/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd rootfs build` and `sandboxd rootfs fetch`: how an installed user gets a rootfs into
 * the store without a source tree. Both run a host tool and end in the one safe import:
 *
 *   build   sandboxd --spawn--> build-rootfs (the recipe, found by paths_rootfs_recipe)
 *                                 mmdebstrap -> verify -> oci-pack -> `sandboxd rootfs import`
 *           sandboxd follows the recipe's log (STORE/NAME.build.log) and prints a line per phase.
 *   fetch   sandboxd --fork--> a probe that connects to the registry (killed after --timeout)
 *           sandboxd --spawn--> skopeo copy docker://IMAGE oci:STORE/.NAME.fetch-XXXXXX/layout
 *           sandboxd: image_import of that layout (cli_rootfs.c), then the layout goes. */
#include "cli/cli_rootfs.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "base/paths.h"
#include "base/util.h"
#include "image/fs_root.h"

extern char **environ;

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
  got_signal = sig;
}

/* SIGINT/SIGTERM/SIGHUP are remembered (and passed on to the child by the caller), not fatal. */
static void catch_signals(void)
{
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

/* argv[0] found on $PATH (or given with a slash), executable; 0 if found. */
static int find_program(const char *name, char out[PATH_MAX])
{
  if (strchr(name, '/'))
    return bufprintf(out, PATH_MAX, NULL, "%s", name) < 0 || access(out, X_OK) < 0 ? -1 : 0;
  const char *path = getenv("PATH");
  char dirs[4096];
  if (bufprintf(dirs, sizeof dirs, NULL, "%s", path && *path ? path : "/usr/sbin:/usr/bin:/sbin:/bin") < 0)
    return -1;
  for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save))
    if (*d == '/' && bufprintf(out, PATH_MAX, NULL, "%s/%s", d, name) == 0 && access(out, X_OK) == 0)
      return 0;
  return -1;
}

/* Spawn argv with stdin from /dev/null and stdout/stderr to out_fd (-1: ours). */
static int spawn(char *const argv[], char *const envp[], int out_fd, pid_t *ret_pid, sbx_error_t *err)
{
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  }
  int r = posix_spawn(ret_pid, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (r)
    return sbx_error_set(err, r, "run `%s`: %s", argv[0], strerror(r));
  return 0;
}

/* Wait for pid, passing on a signal we got; every poll_ms, tick(userdata) (may be NULL). Returns
 * the exit status (128+N if killed by signal N). */
static int wait_child(pid_t pid, int poll_ms, void (*tick)(void *), void *userdata)
{
  int sent = 0;
  for (;;) {
    int status;
    pid_t r = waitpid(pid, &status, poll_ms ? WNOHANG : 0);
    if (r == pid) {
      if (tick)
        tick(userdata);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 && errno != EINTR)
      return 127;
    if (got_signal && sent != got_signal) {
      sent = got_signal;
      kill(pid, SIGTERM);
    }
    if (tick)
      tick(userdata);
    if (poll_ms)
      poll(NULL, 0, poll_ms);
  }
}

/* ------------------------------------------------------------------ build */

/* The recipe's log, as mmdebstrap and the recipe write it, and the phase each marker begins. */
static const struct phase {
  const char *marker;
  const char *what;
} phases[] = {
    {"I: running apt-get update", "updating the package lists (mmdebstrap, Debian sid)"},
    {"I: downloading packages with apt", "downloading packages"},
    {"I: extracting archives", "installing packages"},
    {"I: running --customize-hook",
     "customizing: the sandbox user, slimming (and Python's standard library precompiled)"},
    {"I: success in ", "verifying the tree and packing it as an OCI image"},
    {".oci.new: sha256:", "importing it into the store"},
};

struct follow {
  const char *log;
  off_t off;
  size_t next;    /* the first phase not yet printed */
  char line[512]; /* the partial last line */
  size_t len;
};

static void follow_line(struct follow *f)
{
  for (size_t i = f->next; i < ARRAY_SIZE(phases); i++)
    if (strstr(f->line, phases[i].marker)) {
      printf("rootfs build: [%zu/%zu] %s\n", i + 1, ARRAY_SIZE(phases), phases[i].what);
      fflush(stdout);
      f->next = i + 1;
      return;
    }
}

/* Read what the log gained since the last tick; a log started afresh (truncated) is read again. */
static void follow_tick(void *userdata)
{
  struct follow *f = userdata;
  _cleanup_close_ int fd = open(f->log, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return;
  if (st.st_size < f->off)
    f->off = 0, f->len = 0;
  char buf[8192];
  ssize_t n;
  while ((n = pread(fd, buf, sizeof buf, f->off)) > 0) {
    f->off += n;
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') {
        f->line[f->len] = '\0';
        follow_line(f);
        f->len = 0;
      } else if (f->len + 1 < sizeof f->line) {
        f->line[f->len++] = buf[i];
      }
    }
  }
}

/* Whether the recipe knows --profile (the data profile's recipe says so in its usage line). Its
 * output is read through a pipe until EOF, for at most 5 s. */
static bool recipe_has_profiles(const char *recipe)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return false;
  char *argv[] = {(char *) recipe, (char *) "--help", NULL};
  pid_t pid;
  int r = spawn(argv, environ, p[1], &pid, NULL);
  close(p[1]);
  if (r < 0) {
    close(p[0]);
    return false;
  }
  char buf[4096];
  size_t len = 0;
  uint64_t deadline = now_ns() + 5000000000ULL;
  for (;;) {
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    uint64_t now = now_ns();
    if (now >= deadline || poll(&pf, 1, (int) ((deadline - now) / 1000000) + 1) <= 0)
      break;
    char chunk[1024];
    ssize_t n = read(p[0], chunk, sizeof chunk);
    if (n <= 0)
      break;
    size_t keep = (size_t) n < sizeof buf - 1 - len ? (size_t) n : sizeof buf - 1 - len;
    memcpy(buf + len, chunk, keep);
    len += keep;
  }
  close(p[0]);
  kill(pid, SIGKILL); /* gone already, unless it hung */
  wait_child(pid, 0, NULL, NULL);
  buf[len] = '\0';
  return strstr(buf, "--profile") != NULL;
}

/* What the recipe runs, by the Debian package that has it: checked here so that an installed user
 * is told an apt-get line (the recipe itself says `scripts/install-deps`, a source-tree script). */
static int recipe_tools_missing(char *out, size_t len)
{
  static const char *const tools[][2] = {
      {"mmdebstrap", "mmdebstrap"}, {"python3", "python3"}, {"zstd", "zstd"}, /* oci-pack */
  };
  char path[PATH_MAX];
  out[0] = '\0';
  /* (The names fit: a cut list would still be non-empty.) */
  for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
    if (find_program(tools[i][0], path) < 0 && bufcatf(out, len, NULL, " %s", tools[i][1]) < 0)
      return -1;
  /* The recipe's KEYRING: the archive key mmdebstrap checks the mirror against. */
  if (access("/usr/share/keyrings/debian-archive-keyring.gpg", R_OK) < 0 &&
      bufcatf(out, len, NULL, " %s", "debian-archive-keyring") < 0)
    return -1;
  return out[0] ? -1 : 0;
}

int rootfs_build(const struct rootfs_build_options *o)
{
  sbx_error_t err = {0};
  char recipe[PATH_MAX], exe[PATH_MAX], missing[160];
  if (paths_rootfs_recipe(recipe, &err) < 0 || paths_exe(exe, &err) < 0) {
    log_sbx_error(&err);
    return SBX_EXIT_SETUP;
  }
  if (recipe_tools_missing(missing, sizeof missing) < 0) {
    log_error("rootfs build: the recipe needs what is not installed; run `apt-get install%s` (or pull an "
              "image instead: `sandboxd rootfs fetch`)",
              missing);
    return SBX_EXIT_SETUP;
  }
  bool profiles = recipe_has_profiles(recipe);
  if (strcmp(o->profile, "slim") && !profiles) {
    log_error("rootfs build: this recipe (%s) has only the slim profile; `--profile %s` needs a "
              "build-rootfs that knows it",
              recipe, o->profile);
    return SBX_EXIT_SETUP;
  }
  if (mkdir(o->store, 0755) < 0 && errno != EEXIST) {
    log_error("rootfs build: create the rootfs store `%s`: %s", o->store, strerror(errno));
    return SBX_EXIT_SETUP;
  }
  if (access(o->store, W_OK) < 0) {
    log_error("rootfs build: the rootfs store `%s` is not writable: %s; run as root, or pass --dir DIR",
              o->store, strerror(errno));
    return SBX_EXIT_SETUP;
  }
  char outdir[PATH_MAX], log[PATH_MAX], sbx_env[PATH_MAX + 16], cache_env[PATH_MAX + 16];
  if (bufprintf(outdir, sizeof outdir, &err, "%s/%s", o->store, o->name) < 0 ||
      bufprintf(log, sizeof log, &err, "%s.build.log", outdir) < 0 ||
      bufprintf(sbx_env, sizeof sbx_env, &err, "SANDBOXD=%s", exe) < 0 ||
      /* The recipe's .deb cache, in the store rather than beside the (read-only) recipe. */
      bufprintf(cache_env, sizeof cache_env, &err, "APT_CACHE=%s/.apt-cache", o->store) < 0) {
    log_sbx_error(&err);
    return SBX_EXIT_SETUP;
  }
  char *argv[8];
  int n = 0;
  argv[n++] = recipe;
  if (profiles)
    argv[n++] = (char *) "--profile", argv[n++] = (char *) o->profile;
  if (o->force)
    argv[n++] = (char *) "--force";
  argv[n++] = outdir;
  argv[n] = NULL;
  /* The caller's environment (PATH, proxies for apt), plus where sandboxd and the cache are. */
  size_t ne = 0;
  while (environ[ne])
    ne++;
  _cleanup_free_ char **envp = calloc(ne + 3, sizeof *envp);
  if (!envp) {
    log_error("rootfs build: out of memory");
    return SBX_EXIT_SETUP;
  }
  size_t k = 0;
  for (size_t i = 0; i < ne; i++)
    if (strncmp(environ[i], "SANDBOXD=", 9) && strncmp(environ[i], "APT_CACHE=", 10))
      envp[k++] = environ[i];
  envp[k++] = sbx_env;
  envp[k++] = cache_env;
  printf("rootfs build: profile %s into %s (recipe %s; log %s)\n", o->profile, outdir, recipe, log);
  fflush(stdout);
  catch_signals();
  struct follow f = {.log = log};
  /* What the log holds before the recipe starts is the last build's (it starts the log afresh). */
  struct stat st;
  if (stat(log, &st) == 0)
    f.off = st.st_size;
  pid_t pid;
  if (spawn(argv, envp, -1, &pid, &err) < 0) {
    log_sbx_error(&err);
    return SBX_EXIT_SETUP;
  }
  int rc = wait_child(pid, 250, follow_tick, &f);
  if (got_signal)
    return 128 + got_signal;
  return rc ? 1 : 0;
}

/* ------------------------------------------------------------------ fetch */

/* "HOST[:PORT]/NAME[:TAG][@DIGEST]" -> the repository (no tag or digest), host and port; Docker
 * Hub's short forms ("python:3.14-slim", "library/python") are registry-1.docker.io:443. */
static int parse_reference(const char *image, bool tls, char repo[512], char host[256], char port[8],
                           sbx_error_t *err)
{
  if (bufprintf(repo, 512, err, "%s", image) < 0)
    return sbx_error_prefix(err, "image reference");
  char *at = strchr(repo, '@');
  if (at)
    *at = '\0';
  char *last = strrchr(repo, '/'), *colon = strrchr(last ? last : repo, ':');
  if (colon)
    *colon = '\0';
  const char *slash = strchr(repo, '/');
  size_t fl = slash ? (size_t) (slash - repo) : 0;
  char first[256] = "";
  if (slash && fl < sizeof first)
    memcpy(first, repo, fl), first[fl] = '\0';
  bool hub = !slash || (!strchr(first, '.') && !strchr(first, ':') && strcmp(first, "localhost"));
  if (hub || !strcmp(first, "docker.io")) {
    bufprintf_cut(host, 256, "%s", "registry-1.docker.io");
    bufprintf_cut(port, 8, "%s", "443");
    return 0;
  }
  char *p = strchr(first, ':');
  if (p)
    *p++ = '\0';
  bufprintf_cut(host, 256, "%s", first);
  bufprintf_cut(port, 8, "%s", p ? p : tls ? "443" : "80");
  return 0;
}

/* One TCP connection to host:port, in a child killed after timeout_ms: name resolution has no
 * timeout of its own we could set. 0 if it connected. */
static int registry_reachable(const char *host, const char *port, unsigned timeout_ms)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[0]);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
      _exit(1);
    for (struct addrinfo *a = res; a; a = a->ai_next) {
      int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (s >= 0 && connect(s, a->ai_addr, a->ai_addrlen) == 0) {
        (void) !write(p[1], "1", 1);
        _exit(0);
      }
      if (s >= 0)
        close(s);
    }
    _exit(1);
  }
  close(p[1]);
  struct pollfd pf = {.fd = p[0], .events = POLLIN};
  char c = 0;
  int r = poll(&pf, 1, (int) timeout_ms);
  bool ok = r == 1 && read(p[0], &c, 1) == 1 && c == '1';
  close(p[0]);
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return ok ? 0 : -1;
}

/* The last non-empty line of the file at fd (skopeo's error), into out. */
static void last_line(int fd, char *out, size_t len)
{
  char buf[8192];
  off_t size = lseek(fd, 0, SEEK_END);
  off_t from = size > (off_t) sizeof buf - 1 ? size - (off_t) sizeof buf + 1 : 0;
  ssize_t n = pread(fd, buf, sizeof buf - 1, from);
  buf[n > 0 ? n : 0] = '\0';
  char *end = buf + strlen(buf);
  while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
    *--end = '\0';
  char *start = strrchr(buf, '\n');
  bufprintf_cut(out, len, "%s", start ? start + 1 : buf);
}

int rootfs_fetch_pull(const struct rootfs_fetch_options *o, struct rootfs_fetched *ret, sbx_error_t *err)
{
  char repo[512], host[256], port[8], skopeo[PATH_MAX];
  if (parse_reference(o->image, o->tls_verify, repo, host, port, err) < 0)
    return -1;
  if (find_program("skopeo", skopeo) < 0)
    return sbx_error_set(
        err, 0,
        "rootfs fetch: skopeo is not installed (apt-get install skopeo); or build the rootfs "
        "offline with `sandboxd rootfs build`");
  if (registry_reachable(host, port, o->timeout_ms) < 0)
    return sbx_error_set(
        err, 0,
        "rootfs fetch: cannot reach registry %s:%s within %u.%us (offline?); build the rootfs "
        "offline instead: `sandboxd rootfs build`",
        host, port, o->timeout_ms / 1000, o->timeout_ms % 1000 / 100);
  if (mkdir(o->store, 0755) < 0 && errno != EEXIST)
    return sbx_error_errno(err, "rootfs fetch: create the rootfs store `%s`", o->store);
  /* The layout sits in the store, on the file system the tree will be on; not under a name that
   * image_import sweeps as stale (.NAME.src-*), since it is imported from there. */
  struct rootfs_fetched f = {0};
  if (bufprintf(f.tmp, sizeof f.tmp, err, "%s/.%s.fetch.XXXXXX", o->store, o->name) < 0)
    return -1;
  if (!mkdtemp(f.tmp))
    return sbx_error_errno(err, "rootfs fetch: create a temporary directory in `%s`", o->store);
  char dest[PATH_MAX + 64], digestfile[PATH_MAX], logpath[PATH_MAX], src[600];
  if (bufprintf(f.layout, sizeof f.layout, err, "%s/layout", f.tmp) < 0 ||
      bufprintf(dest, sizeof dest, err, "oci:%s:%s", f.layout, o->name) < 0 ||
      bufprintf(digestfile, sizeof digestfile, err, "%s/digest", f.tmp) < 0 ||
      bufprintf(logpath, sizeof logpath, err, "%s/log", f.tmp) < 0 ||
      bufprintf(src, sizeof src, err, "docker://%s", o->image) < 0) {
    rootfs_fetched_free(&f);
    return -1;
  }
  _cleanup_close_ int logfd = open(logpath, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (logfd < 0) {
    sbx_error_errno(err, "rootfs fetch: create `%s`", logpath);
    rootfs_fetched_free(&f);
    return -1;
  }
  /* Only this host's platform is copied from a multi-platform image. */
  char *argv[12];
  int n = 0;
  argv[n++] = skopeo;
  argv[n++] = (char *) "--command-timeout";
  argv[n++] = (char *) "900s";
  argv[n++] = (char *) "copy";
  argv[n++] = (char *) "--retry-times";
  argv[n++] = (char *) "2";
  if (!o->tls_verify)
    argv[n++] = (char *) "--src-tls-verify=false";
  argv[n++] = (char *) "--digestfile";
  argv[n++] = digestfile;
  argv[n++] = src;
  argv[n++] = dest;
  argv[n] = NULL;
  printf("rootfs fetch: pulling %s with skopeo\n", o->image);
  fflush(stdout);
  catch_signals();
  pid_t pid;
  if (spawn(argv, environ, logfd, &pid, err) < 0) {
    rootfs_fetched_free(&f);
    return -1;
  }
  int rc = wait_child(pid, 100, NULL, NULL);
  if (got_signal) {
    rootfs_fetched_free(&f);
    return sbx_error_set(err, EINTR, "rootfs fetch: interrupted");
  }
  if (rc) {
    char why[300];
    last_line(logfd, why, sizeof why);
    sbx_error_set(err, 0, "rootfs fetch: skopeo copy %s failed: %s", src, why);
    rootfs_fetched_free(&f);
    return -1;
  }
  _cleanup_free_ char *digest = NULL;
  size_t dlen;
  if (read_file(digestfile, 128, &digest, &dlen, err) < 0 || dlen < 71 || strncmp(digest, "sha256:", 7)) {
    if (!err->msg[0])
      sbx_error_set(err, 0, "rootfs fetch: skopeo reported no digest for %s", o->image);
    rootfs_fetched_free(&f);
    return -1;
  }
  digest[71] = '\0';
  /* The pin: the digest pulled, recorded as the tree's source. */
  bufprintf_cut(f.source, sizeof f.source, "docker://%s@%s", repo, digest);
  *ret = f;
  return 0;
}

void rootfs_fetched_free(struct rootfs_fetched *f)
{
  if (!f->tmp[0])
    return;
  char *slash = strrchr(f->tmp, '/');
  *slash = '\0';
  _cleanup_close_ int dfd = open(f->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0)
    fs_remove_tree(dfd, slash + 1);
  f->tmp[0] = '\0';
}
