/* SPDX-License-Identifier: Apache-2.0 */
/* bench/bwrap-cg: a reference for bench/run, not a product. Runs a command (bubblewrap, in
 * bench/run) inside a cgroup of its own with sandboxd's default limits, the least a careful user
 * would do to give bubblewrap what it lacks: one directory per controller hierarchy below this
 * process's own cgroup (cgroup v1: memory, pids, cpu, cpuacct; cgroup v2: one), the limits
 * written, the child cloned into it (v2) or moving itself in before it execs (v1), the directories
 * removed after. No stats, no probe beyond /proc/self/cgroup, no audit: close to the least
 * "bubblewrap with cgroup limits" can cost, plus this wrapper's own start, which `none` prices.
 *
 * Usage: bwrap-cg MEMORY_BYTES PIDS CPU_QUOTA_US COMMAND [ARG...]; exits with the command's
 * status, or 125 when the cgroup cannot be set up. Root (or a delegated cgroup) is needed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define CGROUP2_SUPER_MAGIC 0x63677270
#define MAX_DIRS 4

static char dirs[MAX_DIRS][4096];
static int n_dirs;

/* A process the kernel has reported dead may still count in its cgroup until it has switched out
 * for the last time: rmdir says EBUSY for a few microseconds. Retry (at most ~1 s). */
static void cleanup(void)
{
  while (n_dirs > 0) {
    const char *d = dirs[--n_dirs];
    for (int i = 0; i < 20000 && rmdir(d) < 0 && errno == EBUSY; i++)
      usleep(50);
  }
}

static _Noreturn void die(const char *what)
{
  fprintf(stderr, "bwrap-cg: %s: %s\n", what, strerror(errno));
  cleanup();
  exit(125);
}

/* optional: a file that is not there (no swap accounting) is left alone. */
static void put_file(const char *dir, const char *file, const char *value, bool optional)
{
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 && optional && errno == ENOENT)
    return;
  if (fd < 0 || write(fd, value, strlen(value)) != (ssize_t) strlen(value))
    die(path);
  close(fd);
}

static void put(const char *dir, const char *file, const char *value)
{
  put_file(dir, file, value, false);
}

/* Whether the comma-separated list (len bytes) names `name`. */
static bool listed(const char *list, size_t len, const char *name)
{
  size_t nl = strlen(name);
  for (const char *p = list, *end = list + len; p < end;) {
    const char *c = memchr(p, ',', (size_t) (end - p));
    const char *e = c ? c : end;
    if ((size_t) (e - p) == nl && !memcmp(p, name, nl))
      return true;
    p = e + 1;
  }
  return false;
}

/* This process's cgroup in the hierarchy of controller `ctl` ("" for cgroup2), and that
 * hierarchy's number in *id (co-mounted controllers share one). */
static const char *own_path(const char *self, const char *ctl, char *buf, size_t len, int *id)
{
  for (const char *l = self; *l;) {
    const char *a = strchr(l, ':'), *b = a ? strchr(a + 1, ':') : NULL, *e = strchr(l, '\n');
    if (!b || !e)
      break;
    size_t cl = (size_t) (b - a - 1);
    if (!*ctl ? cl == 0 : listed(a + 1, cl, ctl)) {
      *id = atoi(l);
      snprintf(buf, len, "%.*s", (int) (e - b - 1), b + 1);
      return buf;
    }
    l = e + 1;
  }
  return NULL;
}

static void make(const char *hier, const char *rel)
{
  if (n_dirs == MAX_DIRS)
    return;
  snprintf(dirs[n_dirs], sizeof dirs[0], "/sys/fs/cgroup%s%s%s/bwrap-cg-%d", *hier ? "/" : "", hier,
           strcmp(rel, "/") ? rel : "", (int) getpid());
  if (mkdir(dirs[n_dirs], 0755) < 0)
    die(dirs[n_dirs]);
  n_dirs++;
}

/* cgroup v2: one directory, which the child is cloned into (CLONE_INTO_CGROUP, as sandboxd does). */
static int setup_v2(const char *self, const char *mem, const char *pids, const char *quota)
{
  char rel[4096], cpu[64];
  int id;
  errno = ENOENT;
  if (!own_path(self, "", rel, sizeof rel, &id))
    die("no cgroup2 path");
  make("", rel);
  put(dirs[0], "memory.max", mem);
  put_file(dirs[0], "memory.swap.max", "0", true);
  put(dirs[0], "pids.max", pids);
  snprintf(cpu, sizeof cpu, "%s 100000", quota);
  put(dirs[0], "cpu.max", cpu);
  int fd = open(dirs[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    die(dirs[0]);
  return fd;
}

/* cgroup v1: a directory in each controller's hierarchy, which the child moves itself into
 * through `tasks` (as sandboxd's pid 1 does) before it execs. */
static void setup_v1(const char *self, const char *mem, const char *pids, const char *quota)
{
  static const char *const hier[] = {"memory", "pids", "cpu", "cpuacct"};
  char rel[4096];
  int ids[4], dir_of[4];
  for (int i = 0; i < 4; i++) {
    errno = ENOENT;
    if (!own_path(self, hier[i], rel, sizeof rel, &ids[i]))
      die(hier[i]);
    dir_of[i] = -1; /* cpu,cpuacct: one hierarchy, one directory */
    for (int j = 0; j < i; j++)
      if (ids[j] == ids[i])
        dir_of[i] = dir_of[j];
    if (dir_of[i] < 0) {
      dir_of[i] = n_dirs;
      make(hier[i], rel);
    }
  }
  put(dirs[dir_of[0]], "memory.limit_in_bytes", mem);
  put_file(dirs[dir_of[0]], "memory.memsw.limit_in_bytes", mem, true);
  put(dirs[dir_of[1]], "pids.max", pids);
  put(dirs[dir_of[2]], "cpu.cfs_quota_us", quota);
}

int main(int argc, char **argv)
{
  if (argc < 5) {
    fprintf(stderr, "usage: bwrap-cg MEMORY_BYTES PIDS CPU_QUOTA_US COMMAND [ARG...]\n");
    return 125;
  }
  char self[8192];
  int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, self, sizeof self - 1) : -1;
  if (n < 0)
    die("/proc/self/cgroup");
  self[n] = '\0';
  close(fd);
  /* `none`: the wrapper alone, what it costs without a cgroup. */
  bool none = strcmp(argv[1], "none") == 0;
  struct statfs sf;
  bool v2 = !none && statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
  int cg_fd = v2 ? setup_v2(self, argv[1], argv[2], argv[3]) : -1;
  if (!none && !v2)
    setup_v1(self, argv[1], argv[2], argv[3]);
  struct clone_args args = {
      .flags = v2 ? CLONE_INTO_CGROUP : 0, .exit_signal = SIGCHLD, .cgroup = (uint64_t) (v2 ? cg_fd : 0)};
  pid_t pid = (pid_t) syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0)
    die("clone3");
  if (pid == 0) {
    for (int i = 0; !v2 && i < n_dirs; i++)
      put(dirs[i], "tasks", "0");
    execvp(argv[4], argv + 4);
    fprintf(stderr, "bwrap-cg: exec %s: %s\n", argv[4], strerror(errno));
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR)
      die("waitpid");
  cleanup();
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
