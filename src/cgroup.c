/* One cgroup per sandbox, on cgroup v2 or, on hybrid and legacy hosts, the v1 controllers.
 *
 * Cgroups are created only below this process's own cgroup (or below $SANDBOXD_CGROUP, a
 * delegated subtree the user names), and only ones named sandboxd-<pid>-<n> are ever removed. */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

enum { C_MEMORY, C_PIDS, C_CPU, C_CPUACCT, C_FREEZER, C_MAX };
_Static_assert(C_MAX <= CGROUP_MAX_ATTACH_FDS, "one attach fd per v1 hierarchy");
static const char *const v1_names[C_MAX] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

struct probe {
  bool done;
  enum cgroup_mode mode;
  char v2_base[PATH_MAX]; /* where sandbox cgroups are created (v2) */
  bool v2_cpu;
  char v1_base[C_MAX][PATH_MAX]; /* per controller; "" if unavailable (v1) */
  bool v1_memsw;
  sbx_error_t why; /* why no cgroups, for the refusal message */
};
static struct probe probe;
static unsigned seq;

struct sbx_cgroup {
  enum cgroup_mode mode;
  char v2[PATH_MAX];
  char v1[C_MAX][PATH_MAX];
  int v2_fd;
};

const char *cgroup_mode_name(enum cgroup_mode m)
{
  return m == CGROUP_V2 ? "cgroup2" : m == CGROUP_V1 ? "cgroup1" : "none";
}

static int write_at(const char *dir, const char *file, const char *value)
{
  char path[PATH_MAX + 64];
  if (bufprintf(path, sizeof path, NULL, "%s/%s", dir, file) < 0)
    return -1;
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, value, strlen(value));
  int e = errno;
  close(fd);
  errno = e;
  return n == (ssize_t) strlen(value) ? 0 : -1;
}

static int read_at(const char *dir, const char *file, char *buf, size_t len)
{
  char path[PATH_MAX + 64];
  if (bufprintf(path, sizeof path, NULL, "%s/%s", dir, file) < 0)
    return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return 0;
}

/* "key value" lines: the value for key, or 0. */
static uint64_t keyed(const char *text, const char *key)
{
  size_t kl = strlen(key);
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
      return strtoull(l + kl + 1, NULL, 10);
  return 0;
}

static bool has_word(const char *list, const char *word)
{
  size_t wl = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += wl)
    if ((p == list || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\n' || p[wl] == '\0'))
      return true;
  return false;
}

/* Mount points of cgroup2 and of each v1 controller, from mountinfo. */
static void find_mounts(char *v2, char v1[C_MAX][PATH_MAX])
{
  v2[0] = '\0';
  for (int c = 0; c < C_MAX; c++)
    v1[c][0] = '\0';
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f)
    return;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    char mnt[PATH_MAX], *sep = strstr(line, " - ");
    if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
      continue;
    char fstype[64], opts[1024];
    if (sscanf(sep + 3, "%63s %*s %1023s", fstype, opts) != 2)
      continue;
    if (!strcmp(fstype, "cgroup2") && !v2[0] && bufprintf(v2, PATH_MAX, NULL, "%s", mnt) < 0)
      continue;
    if (strcmp(fstype, "cgroup") != 0)
      continue;
    for (int c = 0; c < C_MAX; c++) {
      char *o = opts, *tok, *save = NULL;
      char copy[1024];
      if (bufprintf(copy, sizeof copy, NULL, "%s", o) < 0)
        continue;
      for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (!strcmp(tok, v1_names[c]) && !v1[c][0] && bufprintf(v1[c], PATH_MAX, NULL, "%s", mnt) < 0)
          break;
    }
  }
  fclose(f);
}

/* /proc/self/cgroup, read once per probe: one line per hierarchy. */
static char self_cgroup[8192];

/* Our cgroup path in the v2 hierarchy ("0::/x") or for a v1 controller ("N:a,b:/x"). */
static int own_path(const char *controller, char *buf, size_t len)
{
  char line[4096];
  for (const char *l = self_cgroup; *l;) {
    size_t n = strcspn(l, "\n");
    int cut = bufprintf(line, sizeof line, NULL, "%.*s", (int) n, l);
    l += n + (l[n] == '\n');
    if (cut < 0) /* a cut line could name another cgroup */
      continue;
    char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (!b)
      continue;
    *b = '\0';
    bool match = !controller && !a[1];
    char *save = NULL;
    for (char *t = controller ? strtok_r(a + 1, ",", &save) : NULL; t && !match;
         t = strtok_r(NULL, ",", &save))
      match = !strcmp(t, controller);
    if (match)
      return bufprintf(buf, len, NULL, "%s", b + 1);
  }
  return -1;
}

static bool writable_dir(const char *dir)
{
  return access(dir, W_OK | X_OK) == 0;
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
  if (write_at(restore.base, "cgroup.subtree_control", off) == 0 &&
      write_at(restore.base, "cgroup.procs", pid) == 0)
    rmdir(restore.leaf);
  errno = saved;
  restore.leaf[0] = '\0';
}

/* v2: usable if our cgroup (or $SANDBOXD_CGROUP) offers memory and pids to its children. If the
 * controllers are available but not yet enabled for children, enable them, which the "no
 * internal processes" rule allows only when the cgroup holds no process: then we first move
 * ourselves into a leaf of our own (sandboxd-<pid>-supervisor), as systemd does for scopes. */
static int probe_v2(const char *mnt, sbx_error_t *err)
{
  char rel[PATH_MAX], base[PATH_MAX], buf[4096];
  const char *env = getenv("SANDBOXD_CGROUP");
  if (env && *env) {
    if (bufprintf(base, sizeof base, err, "%s", env) < 0)
      return sbx_error_prefix(err, "SANDBOXD_CGROUP");
  } else {
    if (own_path(NULL, rel, sizeof rel) < 0)
      return sbx_error_set(err, ENOENT, "cgroup2: this process has no cgroup2 path");
    if (bufprintf(base, sizeof base, err, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) < 0)
      return sbx_error_prefix(err, "cgroup2");
  }
  if (read_at(base, "cgroup.controllers", buf, sizeof buf) < 0)
    return sbx_error_errno(err, "cgroup2 `%s`", base);
  if (!has_word(buf, "memory") || !has_word(buf, "pids"))
    return sbx_error_set(err, 0, "cgroup2 `%s` offers no memory and pids controllers (it has: %s)", base,
                         buf[0] ? strtok(buf, "\n") : "none");
  bool cpu = has_word(buf, "cpu");
  if (!writable_dir(base))
    return sbx_error_set(err, EACCES, "cgroup2 `%s` is not delegated to this user", base);
  char sub[4096];
  if (read_at(base, "cgroup.subtree_control", sub, sizeof sub) < 0)
    return sbx_error_errno(err, "cgroup2 `%s`: read cgroup.subtree_control", base);
  if (!has_word(sub, "memory") || !has_word(sub, "pids") || (cpu && !has_word(sub, "cpu"))) {
    /* Only what is missing, so that restoring at exit turns off only what we turned on. */
    char want[64] = "";
    if ((!has_word(sub, "memory") && bufcatf(want, sizeof want, err, "%s+memory", *want ? " " : "") < 0) ||
        (!has_word(sub, "pids") && bufcatf(want, sizeof want, err, "%s+pids", *want ? " " : "") < 0) ||
        (cpu && !has_word(sub, "cpu") && bufcatf(want, sizeof want, err, "%s+cpu", *want ? " " : "") < 0))
      return -1;
    if (write_at(base, "cgroup.subtree_control", want) < 0) {
      if (errno != EBUSY)
        return sbx_error_errno(err, "cgroup2 `%s`: enable %s", base, want);
      /* Processes live in base. If it is only us, move into a leaf and retry. */
      char procs[4096];
      if (read_at(base, "cgroup.procs", procs, sizeof procs) < 0 || strtol(procs, NULL, 10) != getpid() ||
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
      if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) || write_at(leaf, "cgroup.procs", pid) < 0)
        return sbx_error_errno(err, "cgroup2: move sandboxd into `%s`", leaf);
      if (write_at(base, "cgroup.subtree_control", want) < 0)
        return sbx_error_errno(err, "cgroup2 `%s`: enable %s", base, want);
      /* Put it all back at exit: the delegated cgroup is the user's, not ours. */
      memcpy(restore.leaf, leaf,
             sizeof restore.leaf); /* the same size: restore_delegation runs once it is set */
      atexit(restore_delegation);
    }
  }
  if (bufprintf(probe.v2_base, sizeof probe.v2_base, err, "%s", base) < 0)
    return sbx_error_prefix(err, "cgroup2");
  probe.v2_cpu = cpu;
  probe.mode = CGROUP_V2;
  return 0;
}

static int probe_v1(char mnts[C_MAX][PATH_MAX], sbx_error_t *err)
{
  for (int c = 0; c < C_MAX; c++) {
    char rel[PATH_MAX];
    probe.v1_base[c][0] = '\0';
    if (!mnts[c][0] || own_path(v1_names[c], rel, sizeof rel) < 0)
      continue;
    char base[PATH_MAX];
    if (bufprintf(base, sizeof base, NULL, "%s%s", mnts[c], strcmp(rel, "/") == 0 ? "" : rel) < 0)
      continue;
    if (writable_dir(base))
      memcpy(probe.v1_base[c], base, PATH_MAX); /* the same size */
  }
  if (!probe.v1_base[C_MEMORY][0] || !probe.v1_base[C_PIDS][0])
    return sbx_error_set(err, EACCES,
                         "cgroup v1: the memory and pids controllers are not writable by this user");
  char path[PATH_MAX + 64];
  probe.v1_memsw =
      bufprintf(path, sizeof path, NULL, "%s/memory.memsw.limit_in_bytes", probe.v1_base[C_MEMORY]) == 0 &&
      access(path, F_OK) == 0;
  probe.mode = CGROUP_V1;
  return 0;
}

int cgroup_probe(enum cgroup_mode *ret, sbx_error_t *err)
{
  if (!probe.done) {
    char v2[PATH_MAX], v1[C_MAX][PATH_MAX];
    sbx_error_t e2 = {0}, e1 = {0};
    find_mounts(v2, v1);
    if (read_at("/proc/self", "cgroup", self_cgroup, sizeof self_cgroup) < 0)
      self_cgroup[0] = '\0';
    probe.done = true;
    probe.mode = CGROUP_NONE;
    /* v2 first; on a hybrid host its hierarchy usually has no controllers, then v1. */
    if (!(v2[0] && probe_v2(v2, &e2) == 0) && !(v1[C_MEMORY][0] && probe_v1(v1, &e1) == 0)) {
      probe.why = v2[0] && !v1[C_MEMORY][0] ? e2 : v1[C_MEMORY][0] && !v2[0] ? e1 : e2;
      if (v2[0] && v1[C_MEMORY][0])
        bufprintf_cut(probe.why.msg, sizeof probe.why.msg, "%s; %s", e2.msg, e1.msg);
      if (!v2[0] && !v1[C_MEMORY][0])
        sbx_error_set(&probe.why, ENOENT, "no cgroup filesystem is mounted");
    }
  }
  *ret = probe.mode;
  if (probe.mode == CGROUP_NONE && err)
    *err = probe.why;
  return probe.mode == CGROUP_NONE ? -1 : 0;
}

/* Kill whatever is left in a cgroup directory, then remove it. */
static void kill_procs(const char *dir, const char *file)
{
  char path[PATH_MAX + 64];
  if (bufprintf(path, sizeof path, NULL, "%s/%s", dir, file) < 0)
    return;
  FILE *f = fopen(path, "re");
  if (!f)
    return;
  int pid;
  while (fscanf(f, "%d", &pid) == 1)
    kill(pid, SIGKILL);
  fclose(f);
}

static void remove_dir(const char *dir, bool v2)
{
  if (!dir[0])
    return;
  /* Normally empty by now (the pid namespace died with its init): no need to look inside. */
  if (rmdir(dir) == 0 || errno == ENOENT)
    return;
  /* cgroup.kill kills atomically, even processes forking at the time (Linux 5.14). */
  if (!v2 || write_at(dir, "cgroup.kill", "1") < 0)
    kill_procs(dir, "cgroup.procs");
  /* rmdir fails with EBUSY until the killed processes are gone; they die within milliseconds. */
  for (int i = 0; i < 200; i++) {
    if (rmdir(dir) == 0 || errno == ENOENT)
      return;
    if (errno != EBUSY)
      return;
    kill_procs(dir, "cgroup.procs");
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static bool has_procs(const char *dir)
{
  char buf[16];
  return dir[0] && read_at(dir, "cgroup.procs", buf, sizeof buf) == 0 && buf[0] != '\0';
}

static void remove_v1_freezing(struct sbx_cgroup *cg)
{
  /* Freeze first so nothing forks between reading tasks and killing them. Only when something
   * is left: freezing flips a kernel static key (text patching and an IPI to every CPU), and
   * normally the pid namespace is already empty by now. */
  const char *fz = cg->v1[C_FREEZER];
  if (fz[0] && has_procs(cg->v1[C_PIDS])) {
    write_at(fz, "freezer.state", "FROZEN");
    for (int c = 0; c < C_MAX; c++)
      if (cg->v1[c][0])
        kill_procs(cg->v1[c], "cgroup.procs");
    write_at(fz, "freezer.state", "THAWED");
  }
  for (int c = 0; c < C_MAX; c++)
    remove_dir(cg->v1[c], false);
}

/* Remove sandboxd-<pid>-* cgroups whose sandboxd no longer runs (it was SIGKILLed). */
static void sweep(const char *base, bool v2)
{
  DIR *d = opendir(base);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    int pid;
    char rest[64];
    if (sscanf(e->d_name, "sandboxd-%d-%63s", &pid, rest) != 2 || pid <= 0)
      continue;
    /* Stale only if that process is gone. A live process of that pid is left alone even if it is
     * not sandboxd (pid reuse): better a late sweep than killing someone's sandboxes (sandboxd
     * under valgrind, or renamed, is not called "sandboxd"). */
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    char dir[PATH_MAX + 300];
    if (bufprintf(dir, sizeof dir, NULL, "%s/%s", base, e->d_name) < 0)
      continue;
    if (strcmp(rest, "supervisor") == 0 && v2) {
      rmdir(dir); /* empty once its sandboxd is gone */
      continue;
    }
    remove_dir(dir, v2);
  }
  closedir(d);
}

void cgroup_cleanup_stale(void)
{
  enum cgroup_mode m;
  if (cgroup_probe(&m, NULL) < 0)
    return;
  if (m == CGROUP_V2) {
    sweep(probe.v2_base, true);
    return;
  }
  for (int c = 0; c < C_MAX; c++)
    if (probe.v1_base[c][0])
      sweep(probe.v1_base[c], false);
}

static int set_limits_v2(struct sbx_cgroup *cg, const struct sbx_limits *l, sbx_error_t *err)
{
  char v[64];
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->memory_bytes) < 0)
    return -1;
  if (write_at(cg->v2, "memory.max", v) < 0)
    return sbx_error_errno(err, "cgroup: set memory.max");
  /* No swap, so the memory limit is the real one; absent without swap accounting. */
  if (write_at(cg->v2, "memory.swap.max", "0") < 0 && errno != ENOENT)
    return sbx_error_errno(err, "cgroup: set memory.swap.max");
  /* An OOM kills the whole sandbox, not one process of it: no half-dead program. */
  if (write_at(cg->v2, "memory.oom.group", "1") < 0 && errno != ENOENT)
    return sbx_error_errno(err, "cgroup: set memory.oom.group");
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->pids) < 0)
    return -1;
  if (write_at(cg->v2, "pids.max", v) < 0)
    return sbx_error_errno(err, "cgroup: set pids.max");
  if (probe.v2_cpu) {
    if (bufprintf(v, sizeof v, err, "%llu 100000", (unsigned long long) l->cpus_milli * 100) < 0)
      return -1;
    if (write_at(cg->v2, "cpu.max", v) < 0)
      return sbx_error_errno(err, "cgroup: set cpu.max");
  }
  return 0;
}

static int set_limits_v1(struct sbx_cgroup *cg, const struct sbx_limits *l, sbx_error_t *err)
{
  char v[64];
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->memory_bytes) < 0)
    return -1;
  if (write_at(cg->v1[C_MEMORY], "memory.limit_in_bytes", v) < 0)
    return sbx_error_errno(err, "cgroup: set memory.limit_in_bytes");
  /* memory+swap: the same value forbids swap. */
  if (probe.v1_memsw && write_at(cg->v1[C_MEMORY], "memory.memsw.limit_in_bytes", v) < 0)
    return sbx_error_errno(err, "cgroup: set memory.memsw.limit_in_bytes");
  if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->pids) < 0)
    return -1;
  if (write_at(cg->v1[C_PIDS], "pids.max", v) < 0)
    return sbx_error_errno(err, "cgroup: set pids.max");
  if (cg->v1[C_CPU][0]) {
    if (write_at(cg->v1[C_CPU], "cpu.cfs_period_us", "100000") < 0)
      return sbx_error_errno(err, "cgroup: set cpu.cfs_period_us");
    if (bufprintf(v, sizeof v, err, "%llu", (unsigned long long) l->cpus_milli * 100) < 0)
      return -1;
    if (write_at(cg->v1[C_CPU], "cpu.cfs_quota_us", v) < 0)
      return sbx_error_errno(err, "cgroup: set cpu.cfs_quota_us");
  }
  return 0;
}

int cgroup_create(const struct sbx_limits *l, struct sbx_cgroup **ret, sbx_error_t *err)
{
  enum cgroup_mode m;
  if (cgroup_probe(&m, err) < 0)
    return -1;
  struct sbx_cgroup *cg = calloc(1, sizeof *cg);
  if (!cg)
    return sbx_error_set(err, ENOMEM, "cgroup");
  cg->mode = m;
  cg->v2_fd = -1;
  char name[64];
  if (bufprintf(name, sizeof name, err, "sandboxd-%d-%u", (int) getpid(), seq++) < 0)
    goto fail;
  if (m == CGROUP_V2) {
    if (bufprintf(cg->v2, sizeof cg->v2, err, "%s/%s", probe.v2_base, name) < 0) {
      sbx_error_prefix(err, "cgroup");
      goto fail;
    }
    if (mkdir(cg->v2, 0755) < 0) {
      sbx_error_errno(err, "cgroup: create `%s`", cg->v2);
      cg->v2[0] = '\0';
      goto fail;
    }
    if (set_limits_v2(cg, l, err) < 0)
      goto fail;
    cg->v2_fd = open(cg->v2, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cg->v2_fd < 0) {
      sbx_error_errno(err, "cgroup: open `%s`", cg->v2);
      goto fail;
    }
  } else {
    for (int c = 0; c < C_MAX; c++) {
      if (!probe.v1_base[c][0])
        continue;
      if (bufprintf(cg->v1[c], PATH_MAX, err, "%s/%s", probe.v1_base[c], name) < 0) {
        sbx_error_prefix(err, "cgroup");
        goto fail;
      }
      if (mkdir(cg->v1[c], 0755) < 0) {
        sbx_error_errno(err, "cgroup: create `%s`", cg->v1[c]);
        cg->v1[c][0] = '\0';
        goto fail;
      }
    }
    if (set_limits_v1(cg, l, err) < 0)
      goto fail;
  }
  *ret = cg;
  return 0;
fail:
  cgroup_destroy(cg);
  return -1;
}

int cgroup_clone_fd(const struct sbx_cgroup *cg)
{
  return cg ? cg->v2_fd : -1;
}

int cgroup_attach_fds(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err)
{
  int n = 0;
  char path[PATH_MAX + 64];
  /* `tasks`, not `cgroup.procs`. The process moves itself as a thread: the kernel takes its
   * global threadgroup lock only for process moves (and for moving another task), and taking it
   * for writing waits for an RCU grace period, 5-15 ms on every sandbox start. The writer is
   * single-threaded (just cloned), so the thread is the whole process, and its future threads
   * follow it. The kernel checks the opener's credentials (ours) since Linux 5.16; before, the
   * writer's, and a process may always move itself. */
  for (int c = 0; c < C_MAX && cg->mode == CGROUP_V1; c++) {
    const char *dir = cg->v1[c];
    if (!dir[0])
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

int cgroup_attach_pid(struct sbx_cgroup *cg, pid_t pid, sbx_error_t *err)
{
  char v[32];
  if (bufprintf(v, sizeof v, err, "%d", (int) pid) < 0)
    return -1;
  if (cg->mode != CGROUP_V2 || write_at(cg->v2, "cgroup.procs", v) < 0)
    return sbx_error_errno(err, "cgroup: move the sandbox into `%s`", cg->v2);
  return 0;
}

int cgroup_attach_self(const int *fds, int n, sbx_error_t *err)
{
  for (int i = 0; i < n; i++)
    if (write(fds[i], "0", 1) != 1)
      return sbx_error_errno(err, "cgroup: move the sandbox into its cgroup");
  return 0;
}

void cgroup_kill(struct sbx_cgroup *cg)
{
  if (!cg)
    return;
  if (cg->mode == CGROUP_V2) {
    if (write_at(cg->v2, "cgroup.kill", "1") < 0)
      kill_procs(cg->v2, "cgroup.procs");
  } else {
    for (int c = 0; c < C_MAX; c++)
      if (cg->v1[c][0])
        kill_procs(cg->v1[c], "cgroup.procs");
  }
}

int cgroup_read_cpu(struct sbx_cgroup *cg, uint64_t *ret_usec)
{
  char buf[4096];
  if (cg->mode == CGROUP_V2) {
    if (read_at(cg->v2, "cpu.stat", buf, sizeof buf) < 0)
      return -1;
    *ret_usec = keyed(buf, "usage_usec");
    return 0;
  }
  if (!cg->v1[C_CPUACCT][0] || read_at(cg->v1[C_CPUACCT], "cpuacct.usage", buf, sizeof buf) < 0)
    return -1;
  *ret_usec = strtoull(buf, NULL, 10) / 1000;
  return 0;
}

void cgroup_read_stats(struct sbx_cgroup *cg, struct cgroup_stats *st)
{
  char buf[4096];
  *st = (struct cgroup_stats){0};
  if (cg->mode == CGROUP_V2) {
    if (read_at(cg->v2, "memory.peak", buf, sizeof buf) == 0) {
      st->memory_peak = strtoull(buf, NULL, 10);
      st->have_peak = true;
    }
    if (read_at(cg->v2, "cpu.stat", buf, sizeof buf) == 0) {
      st->cpu_usec = keyed(buf, "usage_usec");
      st->have_cpu = true;
    }
    if (read_at(cg->v2, "memory.events", buf, sizeof buf) == 0)
      st->oom_kills = keyed(buf, "oom_kill");
    if (read_at(cg->v2, "pids.events", buf, sizeof buf) == 0)
      st->pids_max_events = keyed(buf, "max");
    return;
  }
  if (read_at(cg->v1[C_MEMORY], "memory.max_usage_in_bytes", buf, sizeof buf) == 0) {
    st->memory_peak = strtoull(buf, NULL, 10);
    st->have_peak = true;
  }
  if (cg->v1[C_CPUACCT][0] && read_at(cg->v1[C_CPUACCT], "cpuacct.usage", buf, sizeof buf) == 0) {
    st->cpu_usec = strtoull(buf, NULL, 10) / 1000;
    st->have_cpu = true;
  }
  if (read_at(cg->v1[C_MEMORY], "memory.oom_control", buf, sizeof buf) == 0)
    st->oom_kills = keyed(buf, "oom_kill");
  if (read_at(cg->v1[C_PIDS], "pids.events", buf, sizeof buf) == 0)
    st->pids_max_events = keyed(buf, "max");
}

void cgroup_destroy(struct sbx_cgroup *cg)
{
  if (!cg)
    return;
  if (cg->v2_fd >= 0)
    close(cg->v2_fd);
  if (cg->mode == CGROUP_V2)
    remove_dir(cg->v2, true);
  else
    remove_v1_freezing(cg);
  free(cg);
}
