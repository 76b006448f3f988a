/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox once it runs: signals, kill, usage sampled before a kill, the result and teardown
 * (sandbox_run.c runs one to completion for `sandboxd exec`). */
#include "sandbox/sandbox_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "kernel/cgroup.h"
#include "sandbox/syncsock.h"

/* Signals sandboxd forwards to the code; the sandbox's init relays them. */
const int sandbox_forwarded_signals[SBX_N_FORWARDED_SIGNALS] = {SIGINT,  SIGTERM, SIGHUP,
                                                                SIGQUIT, SIGUSR1, SIGUSR2};

const char *sbx_status_name(enum sbx_status s)
{
  switch (s) {
  case SBX_STATUS_OK:
    return "ok";
  case SBX_STATUS_ERROR:
    return "error";
  case SBX_STATUS_KILLED:
    return "killed";
  case SBX_STATUS_TIMEOUT:
    return "timeout";
  case SBX_STATUS_MEMORY_LIMIT:
    return "memory_limit";
  }
  return "error";
}

static const char *probe_mode_name(void)
{
  enum cgroup_mode m;
  cgroup_probe(&m, NULL);
  return cgroup_mode_name(m);
}

/* The proxy exits once pid 1 has (it watches its pidfd), after closing every connection. */
static void reap_egress(struct sbx_sandbox *s, bool kill_it)
{
  if (s->egress_pid <= 0)
    return;
  if (kill_it)
    kill(s->egress_pid, SIGKILL);
  while (waitpid(s->egress_pid, NULL, 0) < 0 && errno == EINTR)
    ;
  s->egress_pid = 0;
}

const struct egress_log *sandbox_egress(const struct sbx_sandbox *s)
{
  return s->egress;
}

int sandbox_workspace_fd(const struct sbx_sandbox *s)
{
  return s->workspace_fd;
}
int sandbox_pidfd(const struct sbx_sandbox *s)
{
  return s->pidfd;
}
uint64_t sandbox_deadline_ns(const struct sbx_sandbox *s)
{
  return s->deadline_ns;
}
void sandbox_set_deadline(struct sbx_sandbox *s, uint64_t deadline_ns)
{
  s->deadline_ns = deadline_ns;
}

void sandbox_start_clock(struct sbx_sandbox *s)
{
  s->start_ns = now_ns();
  uint64_t usec;
  if (s->cgroup && cgroup_read_cpu(s->cgroup, &usec) == 0)
    s->cpu_base_usec = usec;
}

/* Signal pid 1 of the sandbox. Through its pidfd; with plain kill() where pidfd_send_signal is
 * missing (Linux < 5.1, valgrind): safe, because until we reap it the pid cannot be reused. */
static int signal_init(struct sbx_sandbox *s, int sig)
{
  if (syscall(SYS_pidfd_send_signal, s->pidfd, sig, NULL, 0) == 0)
    return 0;
  if (errno != ENOSYS && s->pidfd >= 0)
    return -1;
  return kill(s->pid, sig);
}

int sandbox_signal(struct sbx_sandbox *s, int sig)
{
  if (s->reaped)
    return 0;
  return signal_init(s, sig);
}

/* Without a cgroup, a killed sandbox's CPU time and peak memory die with it (rusage covers
 * only children that were waited for). Read them from /proc first: every process whose pid
 * namespace is the sandbox's. */
static void sample_usage(struct sbx_sandbox *s)
{
  char path[64];
  /* pid 1 is not dumpable, so its own ns link is out of reach; it reported the inode. */
  if (!s->pidns_ino)
    return;
  DIR *d = opendir("/proc");
  if (!d)
    return;
  long tick = sysconf(_SC_CLK_TCK);
  uint64_t ticks = 0, peak = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    struct stat st;
    if (bufprintf(path, sizeof path, NULL, "/proc/%s/ns/pid", e->d_name) < 0 || stat(path, &st) < 0 ||
        st.st_ino != s->pidns_ino || st.st_dev != s->pidns_dev)
      continue;
    char buf[2048];
    int fd = bufprintf(path, sizeof path, NULL, "/proc/%s/stat", e->d_name) < 0
                 ? -1
                 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
      continue;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    unsigned long long ut, st_, cut, cst;
    /* fields after the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime cutime cstime */
    if (rp && sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut, &st_,
                     &cut, &cst) == 4)
      ticks += ut + st_ + cut + cst;
    fd = bufprintf(path, sizeof path, NULL, "/proc/%s/status", e->d_name) < 0
             ? -1
             : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
      continue;
    buf[n] = '\0';
    char *hwm = strstr(buf, "VmHWM:");
    unsigned long long kb;
    if (hwm && sscanf(hwm + 6, "%llu", &kb) == 1 && kb * 1024 > peak)
      peak = kb * 1024;
  }
  closedir(d);
  if (tick > 0)
    s->sampled_cpu_ms = ticks * 1000 / (uint64_t) tick;
  s->sampled_peak = peak;
}

void sandbox_kill(struct sbx_sandbox *s, bool timed_out)
{
  if (s->reaped)
    return;
  if (timed_out)
    s->timed_out = true;
  s->killed = true;
  if (!s->cgroup)
    sample_usage(s);
  /* SIGKILL to pid 1 of the namespace: the kernel then kills every process in it. The cgroup
   * kill is belt and braces: it also reaches anything that left the pid namespace's view. */
  signal_init(s, SIGKILL);
  cgroup_kill(s->cgroup);
}

/* The result from what is known: the code's wait status (-1 if init never reported it), init's
 * (for a kill from outside), its rusage, and the cgroup's counters. */
static void fill_result(struct sbx_sandbox *s, int cs, int init_status, const struct rusage *ru,
                        struct sbx_result *res)
{
  *res = (struct sbx_result){0};
  res->execution_time_ms = (now_ns() - s->start_ns) / 1000000ULL;
  res->cpu_time_ms = (uint64_t) (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
                     (uint64_t) (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
  res->memory_peak_bytes = (uint64_t) ru->ru_maxrss * 1024;
  if (s->sampled_cpu_ms > res->cpu_time_ms)
    res->cpu_time_ms = s->sampled_cpu_ms;
  if (s->sampled_peak > res->memory_peak_bytes)
    res->memory_peak_bytes = s->sampled_peak;
  res->limits = "degraded";
  struct cgroup_stats cst = {0};
  if (s->cgroup) {
    cgroup_read_stats(s->cgroup, &cst);
    res->limits = probe_mode_name();
    if (cst.have_peak)
      res->memory_peak_bytes = cst.memory_peak;
    if (cst.have_cpu)
      res->cpu_time_ms = (cst.cpu_usec > s->cpu_base_usec ? cst.cpu_usec - s->cpu_base_usec : 0) / 1000;
    res->pids_limit_hit = cst.pids_max_events > 0;
    /* The cgroup goes in sandbox_free(), so a server can answer before removing it. */
  }
  if (cst.oom_kills > 0 && !s->timed_out) {
    res->status = SBX_STATUS_MEMORY_LIMIT;
    res->signal = SIGKILL;
    res->exit_code = 128 + SIGKILL;
  } else if (s->timed_out) {
    res->status = SBX_STATUS_TIMEOUT;
    res->timed_out = true;
    res->exit_code = SBX_EXIT_TIMEOUT;
    res->signal = SIGKILL;
  } else if (cs == -1) {
    /* pid 1 died without reporting: killed from outside (sandbox_kill) or by the kernel. */
    res->status = SBX_STATUS_KILLED;
    res->signal = WIFSIGNALED(init_status) ? WTERMSIG(init_status) : SIGKILL;
    res->exit_code = 128 + res->signal;
  } else if (WIFSIGNALED(cs)) {
    res->status = SBX_STATUS_KILLED;
    res->signal = WTERMSIG(cs);
    res->exit_code = 128 + res->signal;
  } else {
    res->exit_code = WEXITSTATUS(cs);
    res->status = res->exit_code == 0 ? SBX_STATUS_OK : SBX_STATUS_ERROR;
  }
}

static void close_leave_fds(struct sbx_sandbox *s)
{
  while (s->n_leave_fds > 0)
    close(s->leave_fds[--s->n_leave_fds]);
}

void sandbox_open_leave_fds(struct sbx_sandbox *s)
{
  sbx_error_t ignored = {0};
  if (s->leave && s->cgroup && s->n_leave_fds == 0)
    s->n_leave_fds = cgroup_leave_fds(s->cgroup, s->leave_fds, &ignored);
  if (s->n_leave_fds < 0)
    s->n_leave_fds = 0;
}

/* spec.leave_at_exit: pid 1 said it is the last of the sandbox (MSG_EXIT alone). Without a
 * cgroup it exits on its own. With one (v1) it waits: send it the files to leave the cgroups
 * through and take its MSG_LEFT. True when it has left: the cgroups hold nothing, and it exits on
 * its own. Else (it did not, or could not) it exits now and is reaped as before. */
static bool leave_cgroup(struct sbx_sandbox *s, const struct sync_msg *exit_msg, struct rusage *ru)
{
  if (!exit_msg->alone)
    return false;
  if (!s->cgroup) {
    *ru = exit_msg->usage;
    return true;
  }
  int n = s->killed ? 0 : s->n_leave_fds;
  sync_send_fds(s->sync_fd, &(struct sync_msg){.type = MSG_LEAVE}, s->leave_fds, n);
  close_leave_fds(s);
  if (n == 0)
    return false;
  struct sync_msg m;
  if (sync_recv(s->sync_fd, &m, 0) < 0 || m.type != MSG_LEFT || m.wait_status != 0)
    return false;
  *ru = exit_msg->usage;
  return true;
}

/* A forked sandbox (sandbox_adopt, sandbox_fork.c): pid 1 is not our child. */
void sandbox_fork_wait(struct sbx_sandbox *s)
{
  struct pollfd pfd = {.fd = s->pidfd, .events = POLLIN};
  while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
    ;
  /* pid 1 sends it before it exits: a non-blocking read finds it or nothing (killed). With the
   * code's status, the CPU time (us) and peak RSS (KiB) of pid 1 and the code, as wait4 gives a
   * cold sandbox's (template.py). */
  char buf[96];
  ssize_t n = recv(s->sync_fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  int st;
  unsigned long long cpu_us, maxrss_kib;
  if (n > 0 && (buf[n] = '\0', sscanf(buf, "exit %d %llu %llu", &st, &cpu_us, &maxrss_kib) == 3)) {
    s->code_status = st;
    s->fork_ru.ru_utime.tv_sec = (time_t) (cpu_us / 1000000);
    s->fork_ru.ru_utime.tv_usec = (suseconds_t) (cpu_us % 1000000);
    s->fork_ru.ru_maxrss = (long) maxrss_kib;
  }
}

int sandbox_wait(struct sbx_sandbox *s, struct sbx_result *res, sbx_error_t *err)
{
  struct rusage ru = {0};
  int st = 0;
  pid_t r = 0;
  struct sync_msg m;
  if (s->forked) {
    sandbox_fork_wait(s); /* pid 1 reports its usage (the cgroup's, where there is one) */
    ru = s->fork_ru;
  } else if (s->leave && sync_recv(s->sync_fd, &m, s->killed ? MSG_DONTWAIT : 0) == 0 && m.type == MSG_EXIT &&
             (s->code_status = m.wait_status, leave_cgroup(s, &m, &ru))) {
    s->detached = true; /* the sandbox is over: its last process runs only its own exit */
  } else
    do
      r = wait4(s->pid, &st, 0, &ru);
    while (r < 0 && errno == EINTR);
  if (r < 0)
    return sbx_error_errno(err, "wait for sandbox");
  s->reaped = true;
  /* The exit message is queued before pid 1 exits; a non-blocking read finds it or nothing. */
  if (s->code_status == -1 && !s->forked && sync_recv(s->sync_fd, &m, MSG_DONTWAIT) == 0 &&
      m.type == MSG_EXIT)
    s->code_status = m.wait_status;
  fill_result(s, s->code_status, st, &ru, res);
  reap_egress(s, false);
  return 0;
}

int sandbox_result_now(struct sbx_sandbox *s, int exit_code, struct sbx_result *res)
{
  if (!s->cgroup || s->reaped)
    return -1;
  fill_result(s, (exit_code & 0xff) << 8, 0, &(struct rusage){0}, res);
  return 0;
}

void sandbox_free(struct sbx_sandbox *s)
{
  if (!s)
    return;
  if (!s->reaped) {
    signal_init(s, SIGKILL);
    if (s->forked)
      sandbox_fork_wait(s);
    else
      while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
        ;
  }
  close_leave_fds(s);
  reap_egress(s, true);
  egress_log_free(s->egress);
  if (s->pidfd >= 0)
    close(s->pidfd);
  if (s->sync_fd >= 0)
    close(s->sync_fd);
  /* The last reference to the workspace tmpfs: its memory goes back now. */
  if (s->workspace_fd >= 0)
    close(s->workspace_fd);
  cgroup_destroy(s->cgroup);
  /* Last: every process of the sandbox is gone (pid 1 reaped: the kernel waits for the rest of
   * its pid namespace first), or, detached, pid 1 was alone and runs only its own exit, so the
   * host id may go to the next sandbox. */
  if (s->host_id_lock >= 0)
    close(s->host_id_lock);
  free(s);
}
