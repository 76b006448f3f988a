#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "util.h"

static char target[PATH_MAX];
static bool configured, use_syslog, disabled, log_code;
static int fd = -1;
static unsigned long dropped;
static bool warned;

static void default_target(void)
{
  const char *env = getenv("SANDBOXD_AUDIT_LOG");
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  if (env && *env)
    snprintf(target, sizeof target, "%s", env);
  else if (geteuid() == 0)
    snprintf(target, sizeof target, "/var/log/sandboxd/audit.log");
  else if (state && state[0] == '/')
    snprintf(target, sizeof target, "%s/sandboxd/audit.log", state);
  else if (home && home[0] == '/')
    snprintf(target, sizeof target, "%s/.local/state/sandboxd/audit.log", home);
  else
    snprintf(target, sizeof target, "off");
}

void audit_configure(const char *t)
{
  if (fd >= 0)
    close(fd);
  fd = -1;
  if (t)
    snprintf(target, sizeof target, "%s", t);
  else
    default_target();
  use_syslog = !strcmp(target, "syslog");
  disabled = !strcmp(target, "off");
  configured = true;
}

void audit_set_log_code(bool on) { log_code = on; }
unsigned long audit_dropped(void) { return dropped; }

const char *audit_target(void)
{
  if (!configured)
    audit_configure(NULL);
  return target;
}

/* mkdir -p for the log's directory, private to its owner. */
static void make_parent(const char *path)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir)
    return;
  *slash = '\0';
  for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
    *p = '\0';
    mkdir(dir, 0755);
    *p = '/';
  }
  mkdir(dir, 0700);
}

static int open_log(void)
{
  if (fd >= 0)
    return fd;
  make_parent(target);
  /* O_APPEND: each write lands whole at the end, even with several writers. O_NONBLOCK: a FIFO
   * with no reader never blocks an execution. */
  fd = open(target, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0600);
  return fd;
}

void audit_reopen(void)
{
  if (fd >= 0)
    close(fd);
  fd = -1;
}

static void iso_time(char *buf, size_t len)
{
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static void make_id(char out[33])
{
  unsigned char b[16];
  if (getrandom(b, sizeof b, GRND_NONBLOCK) != sizeof b)
    memset(b, 0, sizeof b);
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
}

void audit_write(const struct audit_record *r)
{
  if (!configured)
    audit_configure(NULL);
  if (disabled)
    return;
  json_writer_t *w = json_writer_new();
  if (!w) {
    dropped++;
    return;
  }
  char now[64], id[33], sha[65];
  iso_time(now, sizeof now);
  if (!r->request_id)
    make_id(id);
  sha256_hex(r->code ? r->code : "", r->code ? r->code_len : 0, sha);
  json_obj_begin(w);
  json_key(w, "time");
  json_str(w, now);
  json_key(w, "request_id");
  json_str(w, r->request_id ? r->request_id : id);
  json_key(w, "mode");
  json_str(w, r->mode);
  json_key(w, "uid");
  json_uint(w, (uint64_t) getuid());
  json_key(w, "code_sha256");
  json_str(w, sha);
  if (r->file) {
    json_key(w, "file");
    json_str(w, r->file);
  }
  if (log_code && r->code) {
    json_key(w, "code");
    json_strn(w, r->code, r->code_len);
  }
  json_key(w, "policy");
  if (r->policy)
    json_str(w, r->policy->name);
  else
    json_null(w);
  json_key(w, "policy_sha256");
  if (r->policy)
    json_str(w, r->policy->sha256);
  else
    json_null(w);
  if (r->limits) {
    json_key(w, "limits");
    json_obj_begin(w);
    json_key(w, "timeout_ms");
    json_uint(w, r->limits->timeout_ms);
    json_key(w, "memory_bytes");
    json_uint(w, r->limits->memory_bytes);
    json_key(w, "pids");
    json_uint(w, r->limits->pids);
    json_key(w, "cpus");
    json_double(w, (double) r->limits->cpus_milli / 1000.0);
    json_obj_end(w);
  }
  const struct sbx_result *res = r->result;
  json_key(w, "status");
  json_str(w, res ? sbx_status_name(res->status) : "setup_error");
  json_key(w, "exit_code");
  json_int(w, res ? res->exit_code : 125);
  json_key(w, "duration_ms");
  json_uint(w, res ? res->execution_time_ms : 0);
  json_key(w, "memory_peak_bytes");
  json_uint(w, res ? res->memory_peak_bytes : 0);
  json_key(w, "enforcement");
  json_str(w, res && res->limits ? res->limits : "none");
  json_key(w, "degraded");
  json_bool(w, res && res->limits && !strcmp(res->limits, "degraded"));
  if (res && res->pids_limit_hit) {
    json_key(w, "pids_limit_hit");
    json_bool(w, true);
  }
  if (r->error) {
    json_key(w, "error");
    json_str(w, r->error);
  }
  json_key(w, "calls");
  if (r->calls_json)
    json_raw(w, r->calls_json, strlen(r->calls_json));
  else {
    json_arr_begin(w);
    json_arr_end(w);
  }
  if (dropped) {
    json_key(w, "dropped_before");
    json_uint(w, dropped);
  }
  json_obj_end(w);
  size_t len;
  const char *buf = json_writer_buf(w, &len);
  if (!buf) {
    dropped++;
    json_writer_free(w);
    return;
  }
  if (use_syslog) {
    openlog("sandboxd", LOG_PID | LOG_NDELAY, LOG_USER);
    syslog(LOG_INFO, "%.*s", (int) len, buf);
    dropped = 0;
    json_writer_free(w);
    return;
  }
  /* One write per record: the line is never split between writers. */
  char *line = malloc(len + 1);
  bool ok = false;
  if (line && open_log() >= 0) {
    memcpy(line, buf, len);
    line[len] = '\n';
    ok = write(fd, line, len + 1) == (ssize_t) (len + 1);
    if (!ok)
      audit_reopen();
  }
  int e = errno;
  free(line);
  json_writer_free(w);
  if (ok) {
    dropped = 0;
    return;
  }
  dropped++;
  if (!warned) {
    warned = true;
    log_warn("audit log `%s`: %s; record dropped (the execution is not affected)", target, strerror(e));
  }
}
