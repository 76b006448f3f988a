/* SPDX-License-Identifier: Apache-2.0 */
/* One disposable sandbox: namespaces, rootfs, limits, seccomp, then the code.
 * sandbox_spawn() returns once the sandbox is built and the code is starting; the caller watches
 * sandbox_pidfd() (readable when the sandbox has ended) and calls sandbox_wait(). */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "policy/policy.h"
#include "sandbox/contain.h"

/* The fd at which the bridge socket (if any) appears inside the sandbox. */
#define SBX_BRIDGE_FD 3
/* The exec-error pipe, where the code's exec helper finds it (inside/execshim.c's EXEC_ERR_FD). */
#define SBX_EXEC_ERR_FD 100

/* The most binds one sandbox gets: --bind (32), the MCP client's roots (32), sandboxd's own. */
#define SBX_MAX_BINDS 96

struct sbx_bind {
  const char *src; /* host path, canonical */
  const char *dst; /* absolute path inside */
  bool rw;
  /* src opened at start (bind_source_open), held by the spec's owner for as long as sandboxes are
   * made from it: the sandbox binds src only while it is this inode (sandbox.c says why). */
  int fd;
};

struct sbx_spec {
  const struct sbx_policy *policy;
  struct sbx_limits limits; /* resolved with policy_resolve_limits() */
  const char *rootfs;       /* host directory holding the root filesystem */
  char *const *argv;        /* run inside, argv[0] is an absolute path */
  char *const *extra_env;   /* NAME=VALUE overriding/adding to the policy's env; may be NULL */
  size_t n_extra_env;
  char *const *base_env; /* NAME=VALUE below the policy's env (the image's Env); may be NULL */
  size_t n_base_env;
  const struct sbx_bind *binds;
  size_t n_binds;
  const char *workdir;                /* inside; NULL means /workspace */
  int stdin_fd, stdout_fd, stderr_fd; /* parent fds that become 0, 1, 2 inside */
  int bridge_fd;                      /* -1, or a socket that becomes SBX_BRIDGE_FD inside */
  /* Hand the parent the workspace tmpfs (sandbox_workspace_fd), to collect /workspace/out from
   * after the run (`sandboxd mcp`): the fd pins the tmpfs past the sandbox's mount namespace. */
  bool keep_workspace;
  /* The fork template's (as root): its user namespace maps the policy's whole host_id_range too,
   * so that each of its calls gets a host id of its own (ns_write_call_maps). */
  bool map_host_range;
  /* `exec`: when the code has ended and nothing else of the sandbox is left, sandboxd returns
   * without waiting for pid 1's exit (its namespaces' teardown, ~0.5 ms, which then runs beside
   * sandboxd's own exit): on v1 once pid 1 has moved itself out of the cgroups, which sandboxd
   * then removes; without a cgroup at once; on v2 (pid 1 cloned into its cgroup, where a move
   * out waits for an RCU grace period) never. sandbox_run_hooks() only: pid 1 is not reaped,
   * so the caller must be about to exit. */
  bool leave_at_exit;
};

/* Every sandbox starts with this empty directory, the sandbox uid's, for the files it returns. */
#define SBX_OUT_DIR "out"

enum sbx_status {
  SBX_STATUS_OK,           /* exited 0 */
  SBX_STATUS_ERROR,        /* exited non-zero */
  SBX_STATUS_KILLED,       /* killed by a signal */
  SBX_STATUS_TIMEOUT,      /* killed at the deadline */
  SBX_STATUS_MEMORY_LIMIT, /* killed by the memory limit */
};

const char *sbx_status_name(enum sbx_status s);

struct sbx_result {
  enum sbx_status status;
  int exit_code; /* what sandboxd exits with: the code's status, 128+N for signal N, 124 timeout */
  int signal;    /* the signal that killed the code, or 0 */
  bool timed_out;
  uint64_t execution_time_ms;
  uint64_t cpu_time_ms;
  uint64_t memory_peak_bytes;
  bool pids_limit_hit; /* a fork was refused at the pids limit */
  const char *limits;  /* how limits were enforced: "cgroup2", "cgroup1" or "degraded" */
};

struct sbx_sandbox;

/* The policy's user namespace budgets as contain.c writes them (both paths: fork_template.c hands
 * them to each call's pid 1). Returns how many: CONTAIN_N_BUDGETS. */
int sandbox_budgets(const struct sbx_budgets *b, struct contain_budget out[CONTAIN_N_BUDGETS]);

/* The environment the code gets: base (image), overridden by the policy's, overridden by
 * extra. NULL-terminated; the strings are borrowed from spec. */
char **sandbox_build_env(const struct sbx_spec *spec);

/* Tell the sandbox where sandboxd's own argv strings live (from main), so the sandbox's init can
 * overwrite them: /proc/1/cmdline is readable by anyone and must not show host paths. */
void sandbox_set_argv_area(char *start, size_t len);

int sandbox_spawn(const struct sbx_spec *spec, struct sbx_sandbox **ret, sbx_error_t *err);
/* sandbox_spawn() in two halves, for event loops: start returns once the child is created and
 * told to go; when sandbox_spawn_fd() is readable, finish says whether setup worked. On a failed
 * finish the caller frees the sandbox. spec may be released after start. */
int sandbox_spawn_start(const struct sbx_spec *spec, struct sbx_sandbox **ret, sbx_error_t *err);
int sandbox_spawn_fd(const struct sbx_sandbox *s);
int sandbox_spawn_finish(struct sbx_sandbox *s, sbx_error_t *err);
/* The workspace tmpfs's root, O_PATH, once spawn finished with spec.keep_workspace; else -1. Owned
 * by the sandbox (closed by sandbox_free). Resolve beneath it only (artifacts.h): the code wrote
 * everything in it. */
int sandbox_workspace_fd(const struct sbx_sandbox *s);
/* A `network proxy` sandbox's egress log (egress_proxy.h), from spawn_finish until sandbox_free;
 * else NULL. */
const struct egress_log *sandbox_egress(const struct sbx_sandbox *s);
/* Readable (POLLIN) once every process of the sandbox has exited. */
int sandbox_pidfd(const struct sbx_sandbox *s);
/* Absolute CLOCK_MONOTONIC deadline in ns, from the spec's timeout. */
uint64_t sandbox_deadline_ns(const struct sbx_sandbox *s);
/* Warm sandboxes (`sandboxd mcp --warm`): spawned ahead of their job, so their clock starts when
 * the job is delivered, not at spawn. sandbox_start_clock() makes execution_time_ms and (with a
 * cgroup) cpu_time_ms count from now; memory_peak_bytes still covers the warm-up (the cgroup's
 * peak cannot be reset for good). sandbox_set_deadline() replaces the spawn-time deadline. */
void sandbox_start_clock(struct sbx_sandbox *s);
void sandbox_set_deadline(struct sbx_sandbox *s, uint64_t deadline_ns);
/* Forward a signal to the code (through the sandbox's init). */
int sandbox_signal(struct sbx_sandbox *s, int sig);
/* Kill every process of the sandbox now. `timed_out` marks the result as a timeout. */
void sandbox_kill(struct sbx_sandbox *s, bool timed_out);
/* Reap the sandbox (blocks until it has ended) and fill res. */
int sandbox_wait(struct sbx_sandbox *s, struct sbx_result *res, sbx_error_t *err);
/* The result of a run whose code reported, while still running, that it ended with exit_code
 * and has written all its output (the MCP runner's done byte): usage from the cgroup, so the
 * answer need not wait for the processes to exit. -1 without a cgroup (usage then comes from
 * the reaped processes: use sandbox_wait()). */
int sandbox_result_now(struct sbx_sandbox *s, int exit_code, struct sbx_result *res);
/* A sandbox made outside sandbox_spawn (a fork of `sandboxd mcp`'s template, fork_template.c):
 * pid 1 (pid, pidfd, not our child), the socket it reports the code's status on, its cgroup (or
 * NULL), workspace tmpfs and pid namespace. With network proxy (policy), listen_fd is the egress
 * listener pid 1 made in its network namespace: its proxy is started here, as host_id. host_id:
 * root: the call's own host uid and gid, held by host_id_lock (hostid.h) until the sandbox is
 * torn down; else 0 and -1. Takes pidfd, sync_fd, cg, workspace_fd, listen_fd and host_id_lock,
 * even on failure (then it is killed). */
struct sbx_cgroup;
int sandbox_adopt(pid_t pid, int pidfd, int sync_fd, struct sbx_cgroup *cg, int workspace_fd,
                  unsigned long long pidns_ino, unsigned long long pidns_dev, const struct sbx_limits *limits,
                  const struct sbx_policy *policy, int listen_fd, unsigned host_id, int host_id_lock,
                  struct sbx_sandbox **ret, sbx_error_t *err);
/* Root: an fd of the user namespace of a sandbox being spawned (the fork template's), which its
 * forked calls' maps are written from (ns_write_call_maps). */
int sandbox_userns_fd(const struct sbx_sandbox *s, sbx_error_t *err);
/* Kill if still running, reap, release everything. NULL is fine. */
void sandbox_free(struct sbx_sandbox *s);

#endif
