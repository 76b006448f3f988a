/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v1, on hybrid and legacy hosts: one directory per sandbox in each controller's
 * hierarchy. clone3 cannot place a process in several hierarchies, so the sandbox moves itself in
 * through files opened here (cgroup_attach_fds). No freezer hierarchy: what would need freezing
 * is normally gone with the sandbox's pid 1 (the kernel kills its whole pid namespace before
 * reporting it dead), and what is left is stopped from forking by pids.max 0 (remove_v1). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "kernel/cgroup_internal.h"

const char *const cgroup_v1_names[C_MAX] = {"memory", "pids", "cpu", "cpuacct"};

static char v1_base[C_MAX][PATH_MAX]; /* per controller; "" if unavailable */
/* The first controller in the same hierarchy (cgroup_v1_shared); each its own until probed. */
static int v1_first[C_MAX] = {C_MEMORY, C_PIDS, C_CPU, C_CPUACCT};
static bool v1_memsw;

void cgroup_v1_shared(const char (*base)[PATH_MAX], int first[C_MAX])
{
  for (int c = 0; c < C_MAX; c++) {
    first[c] = c;
    for (int j = 0; j < c && first[c] == c; j++)
      if (base[c][0] && strcmp(base[c], base[j]) == 0)
        first[c] = j;
  }
}

/* A controller whose hierarchy an earlier one already stands for: its directory is that one's. */
static bool v1_dup(int c)
{
  return v1_first[c] != c;
}

static int probe_v1(const struct cgroup_mounts *m, sbx_error_t *err)
{
  sbx_error_t unreachable = {0}; /* memory's or pids' cgroup not under its mount's root */
  for (int c = 0; c < C_MAX; c++) {
    char rel[PATH_MAX], base[PATH_MAX];
    v1_base[c][0] = '\0';
    if (!m->v1[c][0] || cg_own_path(cgroup_v1_names[c], rel, sizeof rel) < 0)
      continue;
    if (cg_dir_below(m->v1[c], m->v1_root[c], rel, base, sizeof base) < 0) {
      /* A container's mount of another cgroup, or one outside our cgroup namespace ("/.."). */
      if ((c == C_MEMORY || c == C_PIDS) && !unreachable.msg[0])
        sbx_error_set(&unreachable, 0,
                      "cgroup v1: this process's %s cgroup `%s` is not under `%s`, which shows `%s`",
                      cgroup_v1_names[c], rel, m->v1[c], m->v1_root[c]);
      continue;
    }
    if (cg_writable_dir(base))
      memcpy(v1_base[c], base, PATH_MAX); /* the same size */
  }
  /* Co-mounted controllers (systemd's cpu,cpuacct) share one hierarchy: one directory there. */
  cgroup_v1_shared((const char(*)[PATH_MAX]) v1_base, v1_first);
  if (unreachable.msg[0] && (!v1_base[C_MEMORY][0] || !v1_base[C_PIDS][0]))
    return (*err = unreachable, -1);
  if (!v1_base[C_MEMORY][0] || !v1_base[C_PIDS][0])
    return sbx_error_set(err, EACCES,
                         "cgroup v1: the memory and pids controllers are not writable by this user");
  char path[PATH_MAX + 64];
  v1_memsw = bufprintf(path, sizeof path, NULL, "%s/memory.memsw.limit_in_bytes", v1_base[C_MEMORY]) == 0 &&
             access(path, F_OK) == 0;
  return 0;
}

static int set_limits_v1(struct sbx_cgroup *cg, const struct sbx_limits *l, sbx_error_t *err)
{
  char v[64];
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->memory_bytes) < 0)
    return -1;
  if (cg_write_at(cg->v1[C_MEMORY], "memory.limit_in_bytes", v) < 0)
    return sbx_error_errno(err, "cgroup: set memory.limit_in_bytes");
  /* memory+swap: the same value forbids swap. */
  if (v1_memsw && cg_write_at(cg->v1[C_MEMORY], "memory.memsw.limit_in_bytes", v) < 0)
    return sbx_error_errno(err, "cgroup: set memory.memsw.limit_in_bytes");
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->pids) < 0)
    return -1;
  if (cg_write_at(cg->v1[C_PIDS], "pids.max", v) < 0)
    return sbx_error_errno(err, "cgroup: set pids.max");
  /* The quota per period of 100 ms: a new cgroup's period (the kernel's default_cfs_period, not
   * inherited), so it is not written, which would apply the bandwidth a second time. */
  if (cg->v1[C_CPU][0]) {
    if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->cpus_milli * 100) < 0)
      return -1;
    if (cg_write_at(cg->v1[C_CPU], "cpu.cfs_quota_us", v) < 0)
      return sbx_error_errno(err, "cgroup: set cpu.cfs_quota_us");
  }
  return 0;
}

static bool has_procs(const char *dir)
{
  char buf[16];
  return dir[0] && cg_read_at(dir, "cgroup.procs", buf, sizeof buf) == 0 && buf[0] != '\0';
}

static void remove_v1(struct sbx_cgroup *cg)
{
  /* Normally nothing is left: the pid namespace died with its pid 1 (a forked call whose setup
   * failed may leave its process). Whatever is left cannot fork once pids.max is 0, so killing
   * what cgroup.procs lists leaves nothing behind; every process of the sandbox is in its pids
   * cgroup (the probe requires the controller). The usage was read before (sandbox_wait).
   * The pids directory goes first: once it is gone (rmdir fails while it has a process), so is
   * every process of the sandbox, and the other directories go without a look at cgroup.procs. */
  const char *pids = cg->v1[C_PIDS];
  bool pids_gone = pids[0] && !v1_dup(C_PIDS) && (rmdir(pids) == 0 || errno == ENOENT);
  if (!pids_gone && has_procs(pids)) {
    cg_write_at(cg->v1[C_PIDS], "pids.max", "0");
    for (int c = 0; c < C_MAX; c++)
      if (cg->v1[c][0] && !v1_dup(c))
        cg_kill_procs(cg->v1[c], "cgroup.procs");
  }
  for (int c = 0; c < C_MAX; c++)
    if (!v1_dup(c) && !(c == C_PIDS && pids_gone))
      cg_remove_dir(cg->v1[c], false);
}

static void sweep_v1(void)
{
  for (int c = 0; c < C_MAX; c++)
    if (v1_base[c][0] && !v1_dup(c))
      cg_sweep(v1_base[c], false);
}

static int create_v1(struct sbx_cgroup *cg, const char *name, const struct sbx_limits *l, sbx_error_t *err)
{
  for (int c = 0; c < C_MAX; c++) {
    if (!v1_base[c][0])
      continue;
    if (bufprintf(cg->v1[c], PATH_MAX, err, "%s/%s", v1_base[c], name) < 0)
      return sbx_error_prefix(err, "cgroup");
    if (v1_dup(c)) /* made with its hierarchy's first controller */
      continue;
    if (mkdir(cg->v1[c], 0755) < 0) {
      sbx_error_errno(err, "cgroup: create `%s`", cg->v1[c]);
      cg->v1[c][0] = '\0';
      return -1;
    }
  }
  return set_limits_v1(cg, l, err);
}

/* The `tasks` file of each hierarchy's sandbox cgroup (to join it) or of the directory it was
 * made in (to leave it at the end), opened for writing with our credentials. */
static int tasks_fds_v1(struct sbx_cgroup *cg, bool leave, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err)
{
  int n = 0;
  char path[PATH_MAX + 64];
  /* `tasks`, not `cgroup.procs`. The process moves itself as a thread: the kernel takes its
   * global threadgroup lock only for process moves (and for moving another task), and taking it
   * for writing waits for an RCU grace period, 5-15 ms on every sandbox start. The writer is
   * single-threaded (just cloned, or pid 1 at its end), so the thread is the whole process, and
   * its future threads follow it. The kernel checks the opener's credentials (ours) since Linux
   * 5.16; before, the writer's, and a process may always move itself. */
  for (int c = 0; c < C_MAX; c++) {
    const char *dir = leave ? v1_base[c] : cg->v1[c];
    if (!cg->v1[c][0] || v1_dup(c))
      continue;
    if (bufprintf(path, sizeof path, err, "%s/tasks", dir) < 0 ||
        (fds[n] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
      if (path[0])
        sbx_error_errno(err, "cgroup: open `%s`", path);
      while (n > 0)
        close(fds[--n]);
      return -1;
    }
    n++;
  }
  return n;
}

static int attach_fds_v1(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err)
{
  return tasks_fds_v1(cg, false, fds, err);
}

static int leave_fds_v1(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err)
{
  return tasks_fds_v1(cg, true, fds, err);
}

static void kill_v1(struct sbx_cgroup *cg)
{
  for (int c = 0; c < C_MAX; c++)
    if (cg->v1[c][0] && !v1_dup(c))
      cg_kill_procs(cg->v1[c], "cgroup.procs");
}

static int read_cpu_v1(struct sbx_cgroup *cg, uint64_t *ret_usec)
{
  char buf[4096];
  if (!cg->v1[C_CPUACCT][0] || cg_read_at(cg->v1[C_CPUACCT], "cpuacct.usage", buf, sizeof buf) < 0)
    return -1;
  *ret_usec = strtoull(buf, NULL, 10) / 1000;
  return 0;
}

static void read_stats_v1(struct sbx_cgroup *cg, struct cgroup_stats *st)
{
  char buf[4096];
  if (cg_read_at(cg->v1[C_MEMORY], "memory.max_usage_in_bytes", buf, sizeof buf) == 0) {
    st->memory_peak = strtoull(buf, NULL, 10);
    st->have_peak = true;
  }
  if (cg->v1[C_CPUACCT][0] && cg_read_at(cg->v1[C_CPUACCT], "cpuacct.usage", buf, sizeof buf) == 0) {
    st->cpu_usec = strtoull(buf, NULL, 10) / 1000;
    st->have_cpu = true;
  }
  if (cg_read_at(cg->v1[C_MEMORY], "memory.oom_control", buf, sizeof buf) == 0)
    st->oom_kills = cg_keyed(buf, "oom_kill");
  if (cg_read_at(cg->v1[C_PIDS], "pids.events", buf, sizeof buf) == 0)
    st->pids_max_events = cg_keyed(buf, "max");
}

const struct cgroup_ops cgroup_v1_ops = {
    .mode = CGROUP_V1,
    .probe = probe_v1,
    .sweep = sweep_v1,
    .create = create_v1,
    .attach_fds = attach_fds_v1,
    .leave_fds = leave_fds_v1,
    .kill = kill_v1,
    .read_cpu = read_cpu_v1,
    .read_stats = read_stats_v1,
    .remove = remove_v1,
};
