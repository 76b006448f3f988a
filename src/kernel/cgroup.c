/* SPDX-License-Identifier: Apache-2.0 */
/* One cgroup per sandbox, on cgroup v2 or, on hybrid and legacy hosts, the v1 controllers.
 *
 * Here: the probe, which picks the version (cgroup_v2.c or cgroup_v1.c, behind struct
 * cgroup_ops), the sweep of stale cgroups, and the file helpers both versions use.
 *
 * Cgroups are created only below this process's own cgroup (or below $SANDBOXD_CGROUP, a
 * delegated subtree the user names), and only ones named sandboxd-<pid>-<n> are ever removed. */
#include "kernel/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "kernel/cgroup_internal.h"

struct probe {
  bool done;
  const struct cgroup_ops *ops; /* NULL: no cgroups */
  sbx_error_t why;              /* why no cgroups, for the refusal message */
};
static struct probe probe;
static unsigned seq;

const char *cgroup_mode_name(enum cgroup_mode m)
{
  return m == CGROUP_V2 ? "cgroup2" : m == CGROUP_V1 ? "cgroup1" : "none";
}

int cg_write_at(const char *dir, const char *file, const char *value)
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

int cg_read_at(const char *dir, const char *file, char *buf, size_t len)
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

uint64_t cg_keyed(const char *text, const char *key)
{
  size_t kl = strlen(key);
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (strncmp(l, key, kl) == 0 && l[kl] == ' ')
      return strtoull(l + kl + 1, NULL, 10);
  return 0;
}

/* The next field of a mountinfo line, from *p up to end: its start and length (0: none left);
 * *p moves past it. Fields hold no raw blank: the kernel writes one as \040. */
static size_t mi_field(const char **p, const char *end, const char **start)
{
  const char *s = *p;
  while (s < end && (*s == ' ' || *s == '\t'))
    s++;
  const char *e = s;
  while (e < end && *e != ' ' && *e != '\t')
    e++;
  *start = s;
  *p = e;
  return (size_t) (e - s);
}

/* Whether the comma-separated opts (len bytes) hold name as one option. */
static bool mi_has_opt(const char *opts, size_t len, const char *name)
{
  size_t nl = strlen(name);
  for (const char *o = opts, *end = opts + len; o < end;) {
    const char *comma = memchr(o, ',', (size_t) (end - o));
    const char *e = comma ? comma : end;
    if ((size_t) (e - o) == nl && !memcmp(o, name, nl))
      return true;
    o = comma ? comma + 1 : end;
  }
  return false;
}

static bool mi_octal(char c)
{
  return c >= '0' && c <= '7';
}

/* The byte a mountinfo escape at s (len bytes left) stands for, or -1: the kernel writes a blank,
 * a newline or a backslash in a path as \ooo; other text (and a NUL) stays as written. */
static int mi_escape(const char *s, size_t len)
{
  if (len < 4 || s[0] != '\\' || s[1] < '0' || s[1] > '3' || !mi_octal(s[2]) || !mi_octal(s[3]))
    return -1;
  int c = (s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0');
  return c ? c : -1;
}

/* A field of len bytes into dst (PATH_MAX), which the caller has checked it fits, unescaped. */
static void mi_copy(char *dst, const char *field, size_t len)
{
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    int c = mi_escape(field + i, len - i);
    dst[o++] = c < 0 ? field[i] : (char) c;
    i += c < 0 ? 0 : 3;
  }
  dst[o] = '\0';
}

/* "MAJ:MIN" of len bytes: false if it is not that. */
static bool mi_dev(const char *field, size_t len, unsigned *maj, unsigned *min)
{
  unsigned v[2] = {0, 0};
  int k = 0;
  size_t digits = 0;
  for (size_t i = 0; i < len; i++) {
    if (field[i] == ':' && k == 0 && digits) {
      k = 1, digits = 0;
    } else if (field[i] >= '0' && field[i] <= '9' && v[k] < 100000000u) {
      v[k] = v[k] * 10 + (unsigned) (field[i] - '0'), digits++;
    } else {
      return false;
    }
  }
  *maj = v[0], *min = v[1];
  return k == 1 && digits;
}

/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS": the
 * first visible cgroup2 mount, and the first visible cgroup (v1) mount whose super options name
 * each controller, each with its ROOT (the cgroup it shows at its mount point). A mount point or
 * root that does not fit PATH_MAX is skipped (a cut one is another path). A mount covered by a
 * later one (a tmpfs over /sys/fs/cgroup/memory, say) is passed over: a bind of the same hierarchy
 * elsewhere, or nothing, is used instead of whatever covers it. */
void cg_parse_mountinfo(const char *text, struct cgroup_mounts *m, cg_visible_fn visible)
{
  m->v2[0] = m->v2_root[0] = '\0';
  for (int c = 0; c < C_MAX; c++)
    m->v1[c][0] = m->v1_root[c][0] = '\0';
  for (const char *l = text; *l;) {
    const char *end = strchr(l, '\n');
    if (!end)
      end = l + strlen(l);
    const char *line = l;
    l = *end ? end + 1 : end;
    const char *sep = memmem(line, (size_t) (end - line), " - ", 3);
    if (!sep)
      continue;
    const char *p = line, *field[5], *fstype, *src, *opts;
    size_t len[5] = {0};
    int n = 0;
    while (n < 5 && (len[n] = mi_field(&p, sep, &field[n])) > 0)
      n++;
    if (n < 5 || len[3] >= PATH_MAX || len[4] >= PATH_MAX)
      continue;
    p = sep + 3;
    size_t fs_len = mi_field(&p, end, &fstype);
    size_t opts_len = mi_field(&p, end, &src) ? mi_field(&p, end, &opts) : 0;
    if (!fs_len || !opts_len)
      continue;
    bool v2 = fs_len == 7 && !memcmp(fstype, "cgroup2", 7);
    bool v1 = fs_len == 6 && !memcmp(fstype, "cgroup", 6);
    bool wanted = v2 && !m->v2[0];
    for (int c = 0; v1 && c < C_MAX; c++)
      wanted |= !m->v1[c][0] && mi_has_opt(opts, opts_len, cgroup_v1_names[c]);
    if (!wanted)
      continue;
    char mnt[PATH_MAX];
    unsigned maj, min;
    mi_copy(mnt, field[4], len[4]);
    if (visible && (!mi_dev(field[2], len[2], &maj, &min) || !visible(mnt, maj, min)))
      continue;
    if (v2) {
      memcpy(m->v2, mnt, sizeof mnt);
      mi_copy(m->v2_root, field[3], len[3]);
    }
    for (int c = 0; v1 && c < C_MAX; c++)
      if (!m->v1[c][0] && mi_has_opt(opts, opts_len, cgroup_v1_names[c])) {
        memcpy(m->v1[c], mnt, sizeof mnt);
        mi_copy(m->v1_root[c], field[3], len[3]);
      }
  }
}

int cg_dir_below(const char *mnt, const char *root, const char *own, char *buf, size_t len)
{
  size_t rl = strlen(root);
  while (rl > 0 && root[rl - 1] == '/')
    rl--;
  if (strncmp(own, root, rl) != 0 || (own[rl] != '/' && own[rl] != '\0'))
    return -1;
  const char *rest = strcmp(own + rl, "/") == 0 ? "" : own + rl;
  return bufprintf(buf, len, NULL, "%s%s", mnt, rest);
}

/* The mount point itself, not a symlink's target: its device is the mount's if nothing covers it. */
static bool mount_visible(const char *mnt, unsigned maj, unsigned min)
{
  struct stat st;
  return fstatat(AT_FDCWD, mnt, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
         major(st.st_dev) == maj && minor(st.st_dev) == min;
}

/* Mount points of cgroup2 and of each v1 controller, from mountinfo: one read, no stdio. */
static void find_mounts(struct cgroup_mounts *m)
{
  char *text = NULL;
  if (read_file("/proc/self/mountinfo", 64 << 20, &text, NULL, NULL) < 0)
    text = NULL;
  cg_parse_mountinfo(text ? text : "", m, mount_visible);
  free(text);
}

/* /proc/self/cgroup, read once per probe: one line per hierarchy. */
static char self_cgroup[8192];

/* "0::/x" (v2) or "N:a,b:/x" (v1). Read in place: a line is not copied, nor its controllers. */
int cg_own_path(const char *controller, char *buf, size_t len)
{
  for (const char *l = self_cgroup; *l;) {
    size_t n = strcspn(l, "\n");
    const char *line = l, *eol = l + n;
    l += n + (l[n] == '\n');
    if (n >= 4096) /* skipped, as when lines were copied to 4 KiB: a cut one could name another cgroup */
      continue;
    const char *a = memchr(line, ':', n), *b = a ? memchr(a + 1, ':', (size_t) (eol - a - 1)) : NULL;
    if (!b)
      continue;
    bool match = controller ? mi_has_opt(a + 1, (size_t) (b - a - 1), controller) : b == a + 1;
    if (match)
      return bufprintf(buf, len, NULL, "%.*s", (int) (eol - b - 1), b + 1);
  }
  return -1;
}

bool cg_writable_dir(const char *dir)
{
  return access(dir, W_OK | X_OK) == 0;
}

void cg_kill_procs(const char *dir, const char *file)
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

void cg_remove_dir(const char *dir, bool v2)
{
  if (!dir[0])
    return;
  /* Normally empty by now (the pid namespace died with its init): no need to look inside. */
  if (rmdir(dir) == 0 || errno == ENOENT)
    return;
  /* cgroup.kill kills atomically, even processes forking at the time (Linux 5.14). */
  if (!v2 || cg_write_at(dir, "cgroup.kill", "1") < 0)
    cg_kill_procs(dir, "cgroup.procs");
  /* rmdir fails with EBUSY until the killed processes are gone; they die within milliseconds. */
  for (int i = 0; i < 200; i++) {
    if (rmdir(dir) == 0 || errno == ENOENT)
      return;
    if (errno != EBUSY)
      return;
    cg_kill_procs(dir, "cgroup.procs");
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Stale: its sandboxd was SIGKILLed. */
void cg_sweep(const char *base, bool v2)
{
  DIR *d = opendir(base);
  if (!d)
    return;
  struct dirent *e;
  const pid_t self = getpid();
  while ((e = readdir(d))) {
    int pid;
    char rest[64];
    if (strncmp(e->d_name, "sandboxd-", 9) != 0 || sscanf(e->d_name, "sandboxd-%d-%63s", &pid, rest) != 2 ||
        pid <= 0)
      continue;
    /* Stale only if that process is gone. A live process of that pid is left alone even if it is
     * not sandboxd (pid reuse): better a late sweep than killing someone's sandboxes (sandboxd
     * under valgrind, or renamed, is not called "sandboxd"). */
    if (pid == self || kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    char dir[PATH_MAX + 300];
    if (bufprintf(dir, sizeof dir, NULL, "%s/%s", base, e->d_name) < 0)
      continue;
    if (strcmp(rest, "supervisor") == 0 && v2) {
      rmdir(dir); /* empty once its sandboxd is gone */
      continue;
    }
    cg_remove_dir(dir, v2);
  }
  closedir(d);
}

int cgroup_probe(enum cgroup_mode *ret, sbx_error_t *err)
{
  if (!probe.done) {
    static struct cgroup_mounts mnt; /* 40 KiB: not on the stack */
    const char *v2 = mnt.v2, (*v1)[PATH_MAX] = mnt.v1;
    sbx_error_t e2 = {0}, e1 = {0};
    find_mounts(&mnt);
    if (cg_read_at("/proc/self", "cgroup", self_cgroup, sizeof self_cgroup) < 0)
      self_cgroup[0] = '\0';
    probe.done = true;
    /* v2 first; on a hybrid host its hierarchy usually has no controllers, then v1. */
    if (v2[0] && cgroup_v2_ops.probe(&mnt, &e2) == 0)
      probe.ops = &cgroup_v2_ops;
    else if (v1[C_MEMORY][0] && cgroup_v1_ops.probe(&mnt, &e1) == 0)
      probe.ops = &cgroup_v1_ops;
    else {
      probe.why = v2[0] && !v1[C_MEMORY][0] ? e2 : v1[C_MEMORY][0] && !v2[0] ? e1 : e2;
      if (v2[0] && v1[C_MEMORY][0])
        bufprintf_cut(probe.why.msg, sizeof probe.why.msg, "%s; %s", e2.msg, e1.msg);
      if (!v2[0] && !v1[C_MEMORY][0])
        sbx_error_set(&probe.why, ENOENT, "no cgroup filesystem is mounted");
    }
  }
  *ret = probe.ops ? probe.ops->mode : CGROUP_NONE;
  if (!probe.ops && err)
    *err = probe.why;
  return probe.ops ? 0 : -1;
}

void cgroup_cleanup_stale(void)
{
  enum cgroup_mode m;
  if (cgroup_probe(&m, NULL) < 0)
    return;
  probe.ops->sweep();
}

int cgroup_create(const struct sbx_limits *l, struct sbx_cgroup **ret, sbx_error_t *err)
{
  enum cgroup_mode m;
  if (cgroup_probe(&m, err) < 0)
    return -1;
  struct sbx_cgroup *cg = calloc(1, sizeof *cg);
  if (!cg)
    return sbx_error_set(err, ENOMEM, "cgroup");
  cg->ops = probe.ops;
  cg->v2_fd = -1;
  char name[64];
  if (bufprintf(name, sizeof name, err, "sandboxd-%d-%u", (int) getpid(), seq++) < 0 ||
      cg->ops->create(cg, name, l, err) < 0) {
    cgroup_destroy(cg);
    return -1;
  }
  *ret = cg;
  return 0;
}

int cgroup_clone_fd(const struct sbx_cgroup *cg)
{
  return cg ? cg->v2_fd : -1;
}

int cgroup_attach_fds(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err)
{
  return cg->ops->attach_fds ? cg->ops->attach_fds(cg, fds, err) : 0;
}

int cgroup_leave_fds(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err)
{
  return cg && cg->ops->leave_fds ? cg->ops->leave_fds(cg, fds, err) : 0;
}

int cgroup_attach_pid(struct sbx_cgroup *cg, pid_t pid, sbx_error_t *err)
{
  if (!cg->ops->attach_pid)
    return sbx_error_set(err, EOPNOTSUPP, "cgroup: %s cannot move another process in",
                         cgroup_mode_name(cg->ops->mode));
  return cg->ops->attach_pid(cg, pid, err);
}

void cgroup_kill(struct sbx_cgroup *cg)
{
  if (cg)
    cg->ops->kill(cg);
}

int cgroup_read_cpu(struct sbx_cgroup *cg, uint64_t *ret_usec)
{
  return cg->ops->read_cpu(cg, ret_usec);
}

void cgroup_read_stats(struct sbx_cgroup *cg, struct cgroup_stats *st)
{
  *st = (struct cgroup_stats){0};
  cg->ops->read_stats(cg, st);
}

void cgroup_destroy(struct sbx_cgroup *cg)
{
  if (!cg)
    return;
  if (cg->v2_fd >= 0)
    close(cg->v2_fd);
  cg->ops->remove(cg);
  free(cg);
}
