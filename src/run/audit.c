/* SPDX-License-Identifier: Apache-2.0 */
#include "run/audit.h"

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

#include "base/hostfile.h"
#include "base/json.h"
#include "base/paths.h"
#include "base/util.h"
#include "base/warn.h"

static char target[PATH_MAX];
static bool configured, use_syslog, disabled, log_code;
/* The log's directory, opened once (audit_start), and the name in it: every (re)open goes
 * through dirfd, so nothing done to the path after the start can move the log elsewhere. */
static int dirfd = -1, fd = -1;
static const char *name;
static sbx_error_t open_error; /* why dirfd is missing, for the warning */
static bool tried;
static unsigned long dropped;
static bool warned, target_too_long;

/* A target that does not fit is never opened (a cut path is another file): its records are dropped,
 * with the warning naming its start. */
static void target_set(int r, const char *what)
{
  if ((target_too_long = r < 0))
    bufprintf_cut(target, 104, "%s", what); /* its first 100 bytes, then "..." */
}

static void default_target(void)
{
  const char *env = getenv("SANDBOXD_AUDIT_LOG");
  char dir[PATH_MAX];
  sbx_error_t e;
  if (env && *env)
    target_set(bufprintf(target, sizeof target, NULL, "%s", env), env);
  else if (paths_state_dir(dir, &e) == 0)
    target_set(bufprintf(target, sizeof target, NULL, "%s/audit.log", dir), dir);
  else if (e.errnum == ENAMETOOLONG) { /* the warning names the variable's start */
    const char *state = getenv("XDG_STATE_HOME");
    target_set(-1, state && state[0] == '/' ? state : getenv("HOME"));
  } else
    target_set(bufprintf(target, sizeof target, NULL, "off"), "");
}

static void close_log(void)
{
  if (fd >= 0)
    close(fd);
  if (dirfd >= 0)
    close(dirfd);
  fd = dirfd = -1;
  tried = false;
}

void audit_configure(const char *t)
{
  close_log();
  if (t)
    target_set(bufprintf(target, sizeof target, NULL, "%s", t), t);
  else
    default_target();
  use_syslog = !strcmp(target, "syslog");
  disabled = !strcmp(target, "off");
  configured = true;
}

void audit_set_log_code(bool on)
{
  log_code = on;
}
unsigned long audit_dropped(void)
{
  return dropped;
}

bool audit_off(void)
{
  if (!configured)
    audit_configure(NULL);
  return disabled;
}

const char *audit_target(void)
{
  if (!configured)
    audit_configure(NULL);
  return target;
}

/* hostfile.c's messages start with the quoted path: "audit log `PATH` is a symlink...". */
static void name_log(sbx_error_t *err)
{
  char old[sizeof err->msg];
  memcpy(old, err->msg, sizeof old);
  bufprintf_cut(err->msg, sizeof err->msg, "audit log %s", old);
}

/* The file in the held directory. O_APPEND: each write lands whole at the end, even with several
 * writers; O_NONBLOCK: a FIFO with no reader never blocks an execution (hostfile.c). */
static int open_file(sbx_error_t *err)
{
  int rc = hostfile_open_append(dirfd, name, target, &fd, err);
  if (rc < 0)
    name_log(err);
  return rc;
}

int audit_start(const char *t, const struct hostfile_guard *guard, sbx_error_t *err)
{
  audit_configure(t);
  if (disabled || use_syslog)
    return 0;
  tried = true;
  if (target_too_long) { /* never opened: a cut path names another file */
    sbx_error_set(&open_error, ENAMETOOLONG, "audit log `%s`", target);
    return 0;
  }
  /* mkdir -p for the log's directory, the last one private to its owner. */
  sbx_error_t e;
  int rc = hostfile_open_parent(target, guard, HOSTFILE_MKDIR, &dirfd, &name, &e);
  if (rc == 0)
    rc = open_file(&e);
  else
    name_log(&e);
  if (rc == HOSTFILE_UNSAFE) {
    /* Refused: nothing is written anywhere, and the caller does not run. */
    close_log();
    disabled = true;
    *err = e;
    return -1;
  }
  if (rc < 0 && dirfd < 0)
    open_error = e;
  return 0;
}

static int open_log(sbx_error_t *err)
{
  if (fd >= 0)
    return 0;
  if (!tried) {
    sbx_error_t e;
    if (audit_start(target, NULL, &e) < 0) {
      disabled = false; /* count it as dropped, with the reason, like any failure here */
      *err = e;
      return -1;
    }
    if (fd >= 0)
      return 0;
  }
  if (dirfd < 0) {
    *err = open_error;
    return -1;
  }
  return open_file(err);
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
  int y, mo, d, h, mi, s;
  clock_gettime(CLOCK_REALTIME, &ts);
  /* Not gmtime_r and strftime: glibc's read the local zone's file on every exec's way out, for
   * a time in UTC. */
  utc_time(ts.tv_sec, &y, &mo, &d, &h, &mi, &s);
  if (bufprintf(buf, len, NULL, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", y, mo, d, h, mi, s,
                ts.tv_nsec / 1000000) < 0)
    bufprintf_cut(buf, len, "?");
}

void audit_new_request_id(char out[33])
{
  unsigned char b[16];
  if (getrandom(b, sizeof b, GRND_NONBLOCK) != sizeof b)
    memset(b, 0, sizeof b);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[32] = '\0';
}

/* The record as one JSON object; dropped_before counts the records lost since the last one written. */
static void write_record(json_writer_t *w, const struct audit_record *r)
{
  char now[64], id[33], sha[65];
  iso_time(now, sizeof now);
  if (!r->request_id)
    audit_new_request_id(id);
  sha256_hex(r->code ? r->code : "", r->code ? r->code_len : 0, sha);
  json_obj_begin(w);
  json_kv_str(w, "time", now);
  json_kv_str(w, "request_id", r->request_id ? r->request_id : id);
  json_kv_str(w, "mode", r->mode);
  json_kv_uint(w, "uid", (uint64_t) getuid());
  json_kv_str(w, "code_sha256", sha);
  if (r->file)
    json_kv_str(w, "file", r->file);
  if (r->language)
    json_kv_str(w, "language", r->language);
  if (r->client)
    json_kv_str(w, "client", r->client);
  if (r->task)
    json_kv_str(w, "task", r->task);
  if (r->session)
    json_kv_str(w, "session", r->session);
  if (log_code && r->code)
    json_kv_strn(w, "code", r->code, r->code_len);
  json_kv_str_or_null(w, "policy", r->policy ? r->policy->name : NULL);
  json_kv_str_or_null(w, "policy_sha256", r->policy ? r->policy->sha256 : NULL);
  if (r->limits) {
    json_key(w, "limits");
    json_obj_begin(w);
    json_kv_uint(w, "timeout_ms", r->limits->timeout_ms);
    json_kv_uint(w, "memory_bytes", r->limits->memory_bytes);
    json_kv_uint(w, "pids", r->limits->pids);
    json_kv_double(w, "cpus", (double) r->limits->cpus_milli / 1000.0);
    json_obj_end(w);
  }
  const struct sbx_result *res = r->result;
  json_kv_str(w, "status", res ? sbx_status_name(res->status) : "setup_error");
  json_kv_int(w, "exit_code", res ? res->exit_code : r->error_exit ? r->error_exit : 125);
  json_kv_uint(w, "duration_ms", res ? res->execution_time_ms : 0);
  json_kv_uint(w, "memory_peak_bytes", res ? res->memory_peak_bytes : 0);
  json_kv_str(w, "enforcement", res && res->limits ? res->limits : "none");
  json_kv_bool(w, "degraded", res && res->limits && !strcmp(res->limits, "degraded"));
  if (res && res->pids_limit_hit)
    json_kv_bool(w, "pids_limit_hit", true);
  if (r->error)
    json_kv_str(w, "error", r->error);
  json_key(w, "calls");
  if (r->calls_json)
    json_raw(w, r->calls_json, strlen(r->calls_json));
  else {
    json_arr_begin(w);
    json_arr_end(w);
  }
  if (r->egress_json)
    json_kv_raw(w, "egress", r->egress_json, strlen(r->egress_json));
  if (dropped)
    json_kv_uint(w, "dropped_before", dropped);
  json_obj_end(w);
}

/* Append the record to the log file as one line: 0, or -1 with err set. */
static int append_line(const char *buf, size_t len, sbx_error_t *err)
{
  /* One write per record: the line is never split between writers. */
  char *line = malloc(len + 1);
  bool ok = false;
  if (!line)
    sbx_error_set(err, ENOMEM, "audit log `%s`", target);
  else if (open_log(err) == 0) {
    memcpy(line, buf, len);
    line[len] = '\n';
    ok = write(fd, line, len + 1) == (ssize_t) (len + 1);
    if (!ok) {
      sbx_error_errno(err, "audit log `%s`", target);
      audit_reopen();
    }
  }
  free(line);
  return ok ? 0 : -1;
}

static void emit(json_writer_t *w);

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
  write_record(w, r);
  emit(w);
}

void audit_write_session(const struct audit_session *r)
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
  char now[64];
  iso_time(now, sizeof now);
  json_obj_begin(w);
  json_kv_str(w, "time", now);
  json_kv_str(w, "event", r->event);
  json_kv_str(w, "mode", "mcp");
  json_kv_uint(w, "uid", (uint64_t) getuid());
  json_kv_str(w, "session", r->session);
  json_kv_str_or_null(w, "client", r->client);
  json_kv_str(w, "language", r->language);
  json_key(w, "limits");
  json_obj_begin(w);
  json_kv_uint(w, "idle_ttl_s", r->idle_s);
  json_kv_uint(w, "max_life_s", r->max_life_s);
  json_kv_uint(w, "memory_bytes", r->limits->memory_bytes);
  json_kv_uint(w, "pids", r->limits->pids);
  json_kv_double(w, "cpus", (double) r->limits->cpus_milli / 1000.0);
  json_obj_end(w);
  if (r->reason) {
    json_kv_str(w, "reason", r->reason);
    json_kv_str(w, "message", r->message ? r->message : "");
    json_kv_uint(w, "calls", r->calls);
  }
  if (dropped)
    json_kv_uint(w, "dropped_before", dropped);
  json_obj_end(w);
  emit(w);
}

/* The record in w, written (and w freed). */
static void emit(json_writer_t *w)
{
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
  sbx_error_t e = {0};
  int rc = append_line(buf, len, &e);
  json_writer_free(w);
  if (rc == 0) {
    dropped = 0;
    return;
  }
  dropped++;
  if (!warned) {
    warned = true;
    sbx_warn(SBX_WARN_AUDIT, "%s; record dropped (the execution is not affected)", e.msg);
  }
}
