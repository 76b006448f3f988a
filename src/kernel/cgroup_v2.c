/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v2: one directory per sandbox below our own cgroup (or $SANDBOXD_CGROUP), which the
 * sandbox is cloned into (CLONE_INTO_CGROUP) and which cgroup.kill empties at once. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "kernel/cgroup_internal.h"

static char v2_base[PATH_MAX]; /* where sandbox cgroups are created */
static bool v2_cpu;

static bool has_word(const char *list, const char *word)
{
  size_t wl = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += wl)
    if ((p == list || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\n' || p[wl] == '\0'))
      return true;
  return false;
}

/* What probe_v2 changed in a delegated cgroup, undone at exit. */
static struct {
  char base[PATH_MAX], leaf[PATH_MAX + 64], enabled[64];
} restore;

static void restore_delegation(void)
{
  if (!restore.leaf[0])
    return;
  /* Controllers off first (the "no internal processes" rule forbids moving back while they are
   * on), then back into base, then the leaf. Best effort: a leftover leaf is swept later. */
  char off[64], pid[32];
  if (bufprintf(off, sizeof off, NULL, "%s", restore.enabled) < 0 ||
      bufprintf(pid, sizeof pid, NULL, "%d", (int) getpid()) < 0)
    return;
  for (char *c = off; *c; c++)
    if (*c == '+')
      *c = '-';
  int saved = errno;
  if (cg_write_at(restore.base, "cgroup.subtree_control", off) == 0 &&
      cg_write_at(restore.base, "cgroup.procs", pid) == 0)
    rmdir(restore.leaf);
  errno = saved;
  restore.leaf[0] = '\0';
}

/* v2: usable if our cgroup (or $SANDBOXD_CGROUP) offers memory and pids to its children. If the
 * controllers are available but not yet enabled for children, enable them, which the "no
 * internal processes" rule allows only when the cgroup holds no process: then we first move
 * ourselves into a leaf of our own (sandboxd-<pid>-supervisor), as systemd does for scopes. */
static int probe_v2(const struct cgroup_mounts *mnts, sbx_error_t *err)
{
  const char *mnt = mnts->v2;
  char rel[PATH_MAX], base[PATH_MAX], buf[4096];
  const char *env = getenv("SANDBOXD_CGROUP");
  if (env && *env) {
    if (bufprintf(base, sizeof base, err, "%s", env) < 0)
      return sbx_error_prefix(err, "SANDBOXD_CGROUP");
  } else {
    if (cg_own_path(NULL, rel, sizeof rel) < 0)
      return sbx_error_set(err, ENOENT, "cgroup2: this process has no cgroup2 path");
    if (cg_dir_below(mnt, mnts->v2_root, rel, base, sizeof base) < 0)
      return sbx_error_set(err, ENOENT,
                           "cgroup2: this process's cgroup `%s` is not under `%s`, which shows `%s`", rel,
                           mnt, mnts->v2_root);
  }
  if (cg_read_at(base, "cgroup.controllers", buf, sizeof buf) < 0)
    return sbx_error_errno(err, "cgroup2 `%s`", base);
  if (!has_word(buf, "memory") || !has_word(buf, "pids"))
    return sbx_error_set(err, 0, "cgroup2 `%s` offers no memory and pids controllers (it has: %s)", base,
                         buf[0] ? strtok(buf, "\n") : "none");
  bool cpu = has_word(buf, "cpu");
  if (!cg_writable_dir(base))
    return sbx_error_set(err, EACCES, "cgroup2 `%s` is not delegated to this user", base);
  char sub[4096];
  if (cg_read_at(base, "cgroup.subtree_control", sub, sizeof sub) < 0)
    return sbx_error_errno(err, "cgroup2 `%s`: read cgroup.subtree_control", base);
  if (!has_word(sub, "memory") || !has_word(sub, "pids") || (cpu && !has_word(sub, "cpu"))) {
    /* Only what is missing, so that restoring at exit turns off only what we turned on. */
    char want[64] = "";
    if ((!has_word(sub, "memory") && bufcatf(want, sizeof want, err, "%s+memory", *want ? " " : "") < 0) ||
        (!has_word(sub, "pids") && bufcatf(want, sizeof want, err, "%s+pids", *want ? " " : "") < 0) ||
        (cpu && !has_word(sub, "cpu") && bufcatf(want, sizeof want, err, "%s+cpu", *want ? " " : "") < 0))
      return -1;
    if (cg_write_at(base, "cgroup.subtree_control", want) < 0) {
      if (errno != EBUSY)
        return sbx_error_errno(err, "cgroup2 `%s`: enable %s", base, want);
      /* Processes live in base. If it is only us, move into a leaf and retry. */
      char procs[4096];
      if (cg_read_at(base, "cgroup.procs", procs, sizeof procs) < 0 || strtol(procs, NULL, 10) != getpid() ||
          strchr(procs, '\n') != procs + strlen(procs) - 1)
        return sbx_error_set(err, EBUSY,
                             "cgroup2 `%s` holds other processes, so it cannot hand controllers to sandboxes",
                             base);
      char leaf[PATH_MAX + 64], pid[32];
      if (bufprintf(leaf, sizeof leaf, err, "%s/sandboxd-%d-supervisor", base, (int) getpid()) < 0 ||
          bufprintf(pid, sizeof pid, err, "%d", (int) getpid()) < 0 ||
          bufprintf(restore.base, sizeof restore.base, err, "%s", base) < 0 ||
          bufprintf(restore.enabled, sizeof restore.enabled, err, "%s", want) < 0)
        return sbx_error_prefix(err, "cgroup2");
      if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) || cg_write_at(leaf, "cgroup.procs", pid) < 0)
        return sbx_error_errno(err, "cgroup2: move sandboxd into `%s`", leaf);
      if (cg_write_at(base, "cgroup.subtree_control", want) < 0)
        return sbx_error_errno(err, "cgroup2 `%s`: enable %s", base, want);
      /* Put it all back at exit: the delegated cgroup is the user's, not ours. */
      memcpy(restore.leaf, leaf,
             sizeof restore.leaf); /* the same size: restore_delegation runs once it is set */
      atexit(restore_delegation);
    }
  }
  if (bufprintf(v2_base, sizeof v2_base, err, "%s", base) < 0)
    return sbx_error_prefix(err, "cgroup2");
  v2_cpu = cpu;
  return 0;
}

static int set_limits_v2(struct sbx_cgroup *cg, const struct sbx_limits *l, sbx_error_t *err)
{
  char v[64];
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->memory_bytes) < 0)
    return -1;
  if (cg_write_at(cg->v2, "memory.max", v) < 0)
    return sbx_error_errno(err, "cgroup: set memory.max");
  /* No swap, so the memory limit is the real one; absent without swap accounting. */
  if (cg_write_at(cg->v2, "memory.swap.max", "0") < 0 && errno != ENOENT)
    return sbx_error_errno(err, "cgroup: set memory.swap.max");
  /* An OOM kills the whole sandbox, not one process of it: no half-dead program. */
  if (cg_write_at(cg->v2, "memory.oom.group", "1") < 0 && errno != ENOENT)
    return sbx_error_errno(err, "cgroup: set memory.oom.group");
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->pids) < 0)
    return -1;
  if (cg_write_at(cg->v2, "pids.max", v) < 0)
    return sbx_error_errno(err, "cgroup: set pids.max");
  if (v2_cpu) {
    if (bufprintf(v, sizeof v, err, "%llu 100000", (unsigned long long) l->cpus_milli * 100) < 0)
      return -1;
    if (cg_write_at(cg->v2, "cpu.max", v) < 0)
      return sbx_error_errno(err, "cgroup: set cpu.max");
  }
  return 0;
}

static void sweep_v2(void)
{
  cg_sweep(v2_base, true);
}

static int create_v2(struct sbx_cgroup *cg, const char *name, const struct sbx_limits *l, sbx_error_t *err)
{
  if (bufprintf(cg->v2, sizeof cg->v2, err, "%s/%s", v2_base, name) < 0)
    return sbx_error_prefix(err, "cgroup");
  if (mkdir(cg->v2, 0755) < 0) {
    sbx_error_errno(err, "cgroup: create `%s`", cg->v2);
    cg->v2[0] = '\0';
    return -1;
  }
  if (set_limits_v2(cg, l, err) < 0)
    return -1;
  cg->v2_fd = open(cg->v2, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cg->v2_fd < 0)
    return sbx_error_errno(err, "cgroup: open `%s`", cg->v2);
  return 0;
}

static int attach_pid_v2(struct sbx_cgroup *cg, pid_t pid, sbx_error_t *err)
{
  char v[32];
  if (bufprintf(v, sizeof v, err, "%d", (int) pid) < 0)
    return -1;
  if (cg_write_at(cg->v2, "cgroup.procs", v) < 0)
    return sbx_error_errno(err, "cgroup: move the sandbox into `%s`", cg->v2);
  return 0;
}

static void kill_v2(struct sbx_cgroup *cg)
{
  if (cg_write_at(cg->v2, "cgroup.kill", "1") < 0)
    cg_kill_procs(cg->v2, "cgroup.procs");
}

static int read_cpu_v2(struct sbx_cgroup *cg, uint64_t *ret_usec)
{
  char buf[4096];
  if (cg_read_at(cg->v2, "cpu.stat", buf, sizeof buf) < 0)
    return -1;
  *ret_usec = cg_keyed(buf, "usage_usec");
  return 0;
}

static void read_stats_v2(struct sbx_cgroup *cg, struct cgroup_stats *st)
{
  char buf[4096];
  if (cg_read_at(cg->v2, "memory.peak", buf, sizeof buf) == 0) {
    st->memory_peak = strtoull(buf, NULL, 10);
    st->have_peak = true;
  }
  if (cg_read_at(cg->v2, "cpu.stat", buf, sizeof buf) == 0) {
    st->cpu_usec = cg_keyed(buf, "usage_usec");
    st->have_cpu = true;
  }
  if (cg_read_at(cg->v2, "memory.events", buf, sizeof buf) == 0)
    st->oom_kills = cg_keyed(buf, "oom_kill");
  if (cg_read_at(cg->v2, "pids.events", buf, sizeof buf) == 0)
    st->pids_max_events = cg_keyed(buf, "max");
}

static void remove_v2(struct sbx_cgroup *cg)
{
  cg_remove_dir(cg->v2, true);
}

const struct cgroup_ops cgroup_v2_ops = {
    .mode = CGROUP_V2,
    .probe = probe_v2,
    .sweep = sweep_v2,
    .create = create_v2,
    .attach_pid = attach_pid_v2,
    .kill = kill_v2,
    .read_cpu = read_cpu_v2,
    .read_stats = read_stats_v2,
    .remove = remove_v2,
};
