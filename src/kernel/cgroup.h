/* SPDX-License-Identifier: Apache-2.0 */
/* One cgroup per sandbox: exact memory, pids and cpu limits, honest usage figures, and a
 * teardown that leaves nothing behind. cgroup v2, or the v1 controllers on hybrid/legacy hosts. */
#ifndef SBX_CGROUP_H
#define SBX_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "policy/policy.h"

enum cgroup_mode { CGROUP_NONE, CGROUP_V2, CGROUP_V1 };

struct cgroup_stats {
  uint64_t memory_peak; /* bytes */
  uint64_t cpu_usec;
  uint64_t oom_kills;       /* OOM kills inside the sandbox */
  uint64_t pids_max_events; /* forks refused at pids.max */
  bool have_peak, have_cpu;
};

struct sbx_cgroup;

/* Where may this process create cgroups? Probed once. On CGROUP_NONE, err says why. */
int cgroup_probe(enum cgroup_mode *ret, sbx_error_t *err);
const char *cgroup_mode_name(enum cgroup_mode m);
/* Remove cgroups left by a sandboxd that was killed (its pid no longer runs sandboxd). */
void cgroup_cleanup_stale(void);
/* Create sandboxd-<pid>-<n> with the limits set. */
int cgroup_create(const struct sbx_limits *l, struct sbx_cgroup **ret, sbx_error_t *err);
/* v2: a directory fd for clone3(CLONE_INTO_CGROUP); -1 on v1. */
int cgroup_clone_fd(const struct sbx_cgroup *cg);
/* v1, where clone3 cannot place the sandbox: the files it moves itself in through, opened for
 * writing here (one per hierarchy). Returns how many, or -1. The sandbox then moves itself in
 * through them (sandbox/contain.c contain_join_cgroup: single-threaded, as on v1 this moves the
 * calling thread). */
#define CGROUP_MAX_ATTACH_FDS 5
int cgroup_attach_fds(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err);
/* v1: the same files of the directories the sandbox's cgroups were made in, for pid 1 to move
 * itself back out through once nothing else of the sandbox is left (spec.leave_at_exit), so
 * that they can be removed without waiting for its exit. Returns how many (0 on v2), or -1. */
int cgroup_leave_fds(struct sbx_cgroup *cg, int fds[CGROUP_MAX_ATTACH_FDS], sbx_error_t *err);
/* v2 without CLONE_INTO_CGROUP (Linux < 5.7): move process pid in. */
int cgroup_attach_pid(struct sbx_cgroup *cg, pid_t pid, sbx_error_t *err);
/* Kill every process in the cgroup. */
void cgroup_kill(struct sbx_cgroup *cg);
void cgroup_read_stats(struct sbx_cgroup *cg, struct cgroup_stats *st);
/* CPU time used so far (microseconds). */
int cgroup_read_cpu(struct sbx_cgroup *cg, uint64_t *ret_usec);
/* Kill what is left, remove the cgroup(s), free. NULL is fine. */
void cgroup_destroy(struct sbx_cgroup *cg);

#endif
