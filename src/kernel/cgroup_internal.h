/* SPDX-License-Identifier: Apache-2.0 */
/* What cgroup.c shares with its two versions, cgroup_v2.c and cgroup_v1.c: the operations each
 * provides (the probe picks one), the sandbox cgroup, and the file helpers both use. Only the
 * cgroup files include this. (crun's cgroup-internal.h is the model.) */
#ifndef SBX_CGROUP_INTERNAL_H
#define SBX_CGROUP_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "kernel/cgroup.h"
#include "policy/policy.h"

/* The v1 controllers sandboxd uses, one hierarchy each. */
enum { C_MEMORY, C_PIDS, C_CPU, C_CPUACCT, C_MAX };
_Static_assert(C_MAX <= CGROUP_MAX_ATTACH_FDS, "one attach fd per v1 hierarchy");
extern const char *const cgroup_v1_names[C_MAX];
/* first[c]: the first controller whose directory base[c] is too (co-mounted controllers, such as
 * systemd's cpu,cpuacct, are one hierarchy), else c. */
void cgroup_v1_shared(const char (*base)[PATH_MAX], int first[C_MAX]);

/* Mount points of cgroup2 and of each v1 controller ("" where not mounted), and the cgroup each
 * shows there (mountinfo's root: "/" for a whole hierarchy; a container's mount of its own
 * cgroup shows that cgroup's path, such as /docker/ID on a cgroup v1 host). */
struct cgroup_mounts {
  char v2[PATH_MAX], v2_root[PATH_MAX];
  char v1[C_MAX][PATH_MAX], v1_root[C_MAX][PATH_MAX];
};

/* Whether the mount of device maj:min is what a lookup of mnt finds (not covered by a later mount
 * there or above it). */
typedef bool (*cg_visible_fn)(const char *mnt, unsigned maj, unsigned min);

/* Parse /proc/self/mountinfo's text into m: for each, the first such mount that visible (NULL:
 * every one) says is visible (pure but for visible: the probe's part that tests can reach). */
void cg_parse_mountinfo(const char *text, struct cgroup_mounts *m, cg_visible_fn visible);

struct cgroup_ops;

struct sbx_cgroup {
  const struct cgroup_ops *ops;
  char v2[PATH_MAX];
  char v1[C_MAX][PATH_MAX];
  int v2_fd;
};

/* One cgroup version. A NULL operation is one the version does not have. */
struct cgroup_ops {
  enum cgroup_mode mode;
  /* Usable by this process? On success the version remembers where to create cgroups. */
  int (*probe)(const struct cgroup_mounts *mnt, sbx_error_t *err);
  /* Remove the stale cgroups below where this version creates them (cg_sweep). */
  void (*sweep)(void);
  /* Create the cgroup(s) named name with the limits set. On failure, the cgroup directories
   * set in cg are the ones to remove. */
  int (*create)(struct sbx_cgroup *cg, const char *name, const struct sbx_limits *l, sbx_error_t *err);
  int (*attach_fds)(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err);
  /* v1: the files pid 1 moves itself back out through at its end (cgroup_leave_fds). */
  int (*leave_fds)(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err);
  int (*attach_pid)(struct sbx_cgroup *cg, pid_t pid, sbx_error_t *err);
  void (*kill)(struct sbx_cgroup *cg);
  int (*read_cpu)(struct sbx_cgroup *cg, uint64_t *ret_usec);
  /* st is zeroed by the caller. */
  void (*read_stats)(struct sbx_cgroup *cg, struct cgroup_stats *st);
  /* Kill what is left and remove the cgroup directories. */
  void (*remove)(struct sbx_cgroup *cg);
};

extern const struct cgroup_ops cgroup_v2_ops, cgroup_v1_ops;

/* Shared helpers (cgroup.c). They set errno and return -1 on failure. */
int cg_write_at(const char *dir, const char *file, const char *value);
int cg_read_at(const char *dir, const char *file, char *buf, size_t len);
/* "key value" lines: the value for key, or 0. */
uint64_t cg_keyed(const char *text, const char *key);
/* Our cgroup path in the v2 hierarchy (controller NULL) or for a v1 controller. */
int cg_own_path(const char *controller, char *buf, size_t len);
/* The directory of cgroup `own` (a path as /proc/self/cgroup gives it) through mount point mnt,
 * which shows cgroup `root`: mnt followed by what own has below root. -1 when own is not root or
 * below it (that mount cannot reach it; a root outside our cgroup namespace reads "/.." and so
 * never matches), or when the path does not fit len. */
int cg_dir_below(const char *mnt, const char *root, const char *own, char *buf, size_t len);
bool cg_writable_dir(const char *dir);
/* SIGKILL every pid listed in dir/file. */
void cg_kill_procs(const char *dir, const char *file);
/* Kill whatever is left in a cgroup directory, then remove it. */
void cg_remove_dir(const char *dir, bool v2);
/* Remove sandboxd-<pid>-* cgroups below base whose sandboxd no longer runs. */
void cg_sweep(const char *base, bool v2);

#endif
