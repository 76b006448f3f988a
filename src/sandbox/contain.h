/* SPDX-License-Identifier: Apache-2.0 */
/* The steps that make a process a sandbox, written once (contain.c) and run by both paths: the
 * cold one (sandbox.c, sandbox_child) and the fork template's C pid 1 (inside/zygote.c). The order
 * both run them in, and what each path does between them, is the timeline at the top of
 * sandbox.c. Each step returns 0 (or an fd), or -1 with *e saying what failed. */
#ifndef SBX_SANDBOX_CONTAIN_H
#define SBX_SANDBOX_CONTAIN_H

#include <stdbool.h>
#include <stdint.h>

/* What failed: the operation, its path or name (or NULL), the errno. Static strings only. */
struct contain_err {
  const char *what;
  const char *arg;
  int errnum;
};

/* A mount to put back over a fresh tmpfs (the fork path: the template's binds under /workspace
 * and /run), with the flags it had. */
struct contain_under {
  const char *dst; /* absolute */
  uint64_t flags;  /* MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC */
  bool dir;
};

/* A fresh tmpfs, relative to the root being built (the current directory). */
struct contain_tmpfs {
  const char *path; /* "tmp", "workspace", "dev/shm", "run" */
  uint64_t flags;
  const char *data; /* "size=N,mode=M" */
  const struct contain_under *under;
  int n_under;
};

/* A user namespace budget: a file of /proc/sys/user, without its "max_". */
struct contain_budget {
  const char *name;
  uint64_t value;
};

#define CONTAIN_N_BUDGETS 12 /* the policy's: inotify, fanotify (2 each), 8 namespace kinds */

/* The sandbox's own mounts, relative to the root being built (the current directory). */
struct contain_fs {
  const struct contain_tmpfs *tmpfs;
  int n_tmpfs;
  const struct contain_budget *budgets;
  int n_budgets;
  bool mask_proc;
  const char *const *masked; /* absolute, under /proc */
  int n_masked;
  const char *const *readonly;
  int n_readonly;
};

struct contain_limits {
  uint64_t nofile, fsize;
  uint64_t sigpending, msgqueue, memlock; /* ceilings: a lower hard limit of the caller's stays */
  bool degraded;                          /* no cgroup: the limits below are rlimits */
  uint64_t as, nproc, cpu_seconds;
  bool nofile_soft_only; /* valgrind's: it keeps the hard limit; set the soft one where refused */
};

struct contain_privs {
  bool drop_caps, no_new_privs;
  bool undumpable;       /* not for the fork template's C pid 1: that flag is the shared memory's */
  const void *main_prog; /* struct sock_filter[]; NULL: no filter (bench/parts only) */
  uint64_t main_len;     /* instructions */
  const void *except_prog;
  uint64_t except_len;
};

/* Into the cgroup (v1) through its cgroup.procs files, which the caller holds open. */
int contain_join_cgroup(const int *fds, int n, struct contain_err *e);
/* The fork path's user namespace: its uid and gid mapped to the same ids outside (the
 * template's), setgroups denied. (The cold path's are written by sandboxd, from outside.) */
int contain_map_self(uint32_t uid, uint32_t gid, struct contain_err *e);
/* The sandbox uid and gid, with no supplementary groups if drop_groups. */
int contain_become(uint32_t uid, uint32_t gid, bool drop_groups, struct contain_err *e);
/* Nothing mounted from here on propagates back to where the mount namespace came from. */
int contain_private(struct contain_err *e);
/* The tmpfs mounts (each with what goes back over it; /workspace/out made), a fresh /proc, the
 * user namespace's budgets through it, then its masks. *ret_sys_fd: /proc/sys, O_PATH. */
int contain_mounts(const struct contain_fs *fs, int *ret_sys_fd, struct contain_err *e);
/* The egress proxy's listener on 127.0.0.1:port in this network namespace: the fd. */
int contain_listen(uint16_t port, struct contain_err *e);
int contain_rlimits(const struct contain_limits *l, struct contain_err *e);
/* Capabilities (bounding, ambient, then the sets), no_new_privs, dumpable, the filters last. */
int contain_drop_privileges(const struct contain_privs *p, struct contain_err *e);

#endif
