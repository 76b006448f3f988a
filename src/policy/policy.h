/* SPDX-License-Identifier: Apache-2.0 */
/* Policy files -> plain structs. Pure: no syscalls beyond reading the files, so it is unit-testable.
 * The format is described in sandboxd.policy(5) and at the top of policy/default.policy. */
#ifndef SBX_POLICY_H
#define SBX_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "policy/egress_rules.h"

#define SBX_POLICY_VERSION 1
/* The most a policy file (and its include) may hold. */
#define SBX_POLICY_MAX_BYTES (1 << 20)

enum sbx_action {
  SBX_ACT_ALLOW,
  SBX_ACT_ERRNO, /* fail with errno_value */
  SBX_ACT_KILL,  /* kill the whole process */
};

enum sbx_cmp {
  SBX_CMP_ANY,       /* no condition */
  SBX_CMP_EQ32,      /* (arg & 0xffffffff) == value: int arguments, kernel ignores high bits */
  SBX_CMP_MASKED_EQ, /* (arg & mask) == value, all 64 bits */
};

struct sbx_rule {
  char *syscall;
  uint32_t name_hash; /* FNV-1a of syscall, to find same-name rules quickly */
  enum sbx_action action;
  int errno_value;
  enum sbx_cmp cmp;
  unsigned arg;
  uint64_t mask, value;
  char *cond_text;  /* the condition as written, or the floor's note, for `policy show`; or NULL */
  size_t group;     /* index into groups */
  const char *file; /* where it was defined, for diagnostics (one of rule_files) */
  int line;
};

struct sbx_group {
  char *name;
  char *reason;
};

/* Limits: what the policy grants by default and the most a command line may ask for. */
struct sbx_limits {
  uint64_t timeout_ms;
  uint64_t memory_bytes;
  uint64_t pids;
  uint64_t cpus_milli; /* 1000 = one core; 0 = unlimited */
  uint64_t tmp_bytes;
  uint64_t workspace_bytes;
  uint64_t shm_bytes;
  uint64_t nofile;
  uint64_t fsize_bytes;
  uint64_t output_bytes;
  /* Files a run returns from /workspace/out (MCP): how many, and their bytes in all. No ceilings
   * (max_*): no command line or call can ask for more. */
  uint64_t artifacts;
  uint64_t artifact_bytes;
};

/* Kernel counts that are charged per user or per user namespace, not to a cgroup: without these a
 * sandbox spends the budget of its namespace's owner (sandboxd.policy(5), "Kernel budgets"). Fixed
 * by the policy; a command line cannot change them. */
struct sbx_budgets {
  uint64_t inotify_instances; /* user.max_inotify_instances in the sandbox's user namespace */
  uint64_t inotify_watches;   /* user.max_inotify_watches */
  uint64_t fanotify_groups;   /* user.max_fanotify_groups */
  uint64_t fanotify_marks;    /* user.max_fanotify_marks */
  uint64_t namespaces;        /* user.max_*_namespaces, each kind, counting the sandbox's own */
  uint64_t sigpending;        /* RLIMIT_SIGPENDING (soft and hard) of every sandbox process */
  uint64_t msgqueue_bytes;    /* RLIMIT_MSGQUEUE (soft and hard) */
  uint64_t memlock_bytes;     /* RLIMIT_MEMLOCK (soft and hard): shmctl(SHM_LOCK) counts per user */
};

/* Setup holds two cgroup namespaces of the sandbox uid for a moment (clone's, and the one it
 * re-roots at its own cgroup), so `namespaces` is at least this. */
#define SBX_MIN_NAMESPACES 2

enum sbx_cgroup_policy {
  SBX_CGROUP_REQUIRED,        /* refuse to run without a cgroup to enforce limits */
  SBX_CGROUP_FALLBACK_RLIMIT, /* degrade to rlimits, warn, and say so in reports */
};

/* Network (issue #17): `none` is loopback only; `proxy` is egress to the allow_host list through
 * the host-side proxy (egress_proxy.h). */
enum sbx_network {
  SBX_NET_NONE,
  SBX_NET_PROXY,
};

/* approve_host_calls: which calls code makes to host MCP servers wait for the user's approval
 * (sandboxd-mcp(7), THE PROXY, "Approval"): none; writes, every tool whose server does not say
 * `readOnlyHint: true` of it; all. Ordered: `sandboxd mcp --approve` may raise it, never lower it. */
enum sbx_approve {
  SBX_APPROVE_NONE,
  SBX_APPROVE_WRITES,
  SBX_APPROVE_ALL,
};
/* "none", "writes", "all": 0, or -1 for anything else. */
int policy_approve_parse(const char *s, enum sbx_approve *ret);
const char *policy_approve_name(enum sbx_approve a);

/* The most allow_host lines a policy may hold, and --allow-host options a command line may add. */
#define SBX_POLICY_MAX_ALLOW_HOSTS 256
#define SBX_CLI_MAX_ALLOW_HOSTS 64

/* What one sandbox may use of the egress proxy (sandboxd.policy(5), "Network"). */
struct sbx_egress_limits {
  uint64_t connections;        /* open at once */
  uint64_t bytes_up;           /* sent, over all its connections */
  uint64_t bytes_down;         /* received, over all its connections */
  uint64_t connection_time_ms; /* one connection's life, from accept to close */
};
/* The most `egress_connections` a policy may name: each is a host process for its life. */
#define SBX_EGRESS_MAX_CONNECTIONS 256

/* proxy_request_limit's range. At most what sandboxd takes in one message from a host server
 * (MCP_CLIENT_MAX_MESSAGE): what one side may send, the other may. */
#define SBX_PROXY_REQUEST_MIN (4u << 10)
#define SBX_PROXY_REQUEST_MAX (32u << 20)

/* fork_template_calls' ceiling: a template serves at least one call. */
#define SBX_FORK_TEMPLATE_CALLS_MAX 65536u

/* max_tasks' ceiling: the tasks one MCP client may hold (each keeps its result until its ttl). */
#define SBX_MAX_TASKS_MAX 1024u
/* Sessions (sandboxd-mcp(7), SESSIONS): their lifetimes' and number's ceilings. */
#define SBX_SESSION_MAX_S (7u * 86400)
#define SBX_MAX_SESSIONS 4096u

/* In an `env` value: the run's memory limit in MiB, written in when the sandbox starts (the one
 * variable; sandboxd.policy(5)). */
#define POLICY_ENV_MEMORY_MIB "${memory_mib}"

struct sbx_policy {
  char *name;
  char *path; /* the top-level file */
  char *description;
  struct sbx_limits limits; /* defaults */
  struct sbx_limits max;    /* ceilings for command-line values */
  struct sbx_budgets budgets;

  unsigned uid, gid; /* identity of the code inside */
  /* When sandboxd runs as root: each concurrent sandbox gets one id of this range as its host uid
   * and gid (hostid.h), and its user namespace is owned by that uid. */
  unsigned host_id_start, host_id_count;
  char *hostname;

  bool no_new_privs;
  bool drop_capabilities;
  bool readonly_root;
  bool mask_proc;
  enum sbx_cgroup_policy cgroup;

  char **env; /* NAME=VALUE, in order; VALUE may name POLICY_ENV_MEMORY_MIB */
  size_t n_env;
  char **proc_masked; /* paths hidden behind /dev/null or an empty dir */
  size_t n_proc_masked;
  char **proc_readonly; /* paths made read-only */
  size_t n_proc_readonly;
  char **proxy_servers; /* host MCP servers code may call through the proxy; "*" = any configured */
  size_t n_proxy_servers;
  uint64_t proxy_request_bytes; /* proxy_request_limit: the largest request frame over the bridge */
  /* With `sandboxd mcp --warm-mode fork`, the sandboxes one template forks before it is replaced:
   * they share its str hash secret and address-space layout (sandboxd-mcp(7)). */
  uint64_t fork_template_calls;
  enum sbx_approve approve_host_calls; /* approve_host_calls: which host tool calls ask the user */
  /* `sandboxd mcp`: the tasks (long calls answered later, MCP's tasks) one client may hold at once,
   * running or kept until their ttl ends. */
  uint64_t max_tasks;
  /* Sessions of `sandboxd mcp` (session_start): idle TTL and maximum life, and how many at once,
   * in all and per bearer token. max_sessions 0: no sessions. */
  uint64_t session_idle_ms, session_max_life_ms;
  uint64_t max_sessions, max_sessions_per_token;

  enum sbx_network network;        /* what a run gets */
  enum sbx_network max_network;    /* the most --allow-host may ask: proxy, or none (refused) */
  struct egress_rule *allow_hosts; /* the allowlist, in order: the policy's, then --allow-host's */
  size_t n_allow_hosts;
  struct sbx_egress_limits egress; /* the proxy's limits, per sandbox */

  enum sbx_action default_action; /* for syscalls no rule names */
  int default_errno;
  enum sbx_action badarch_action; /* for syscalls of another ABI (i386, x32) */

  struct sbx_group *groups;
  size_t n_groups;
  struct sbx_rule *rules;
  size_t n_rules;
  char **rule_files; /* the files the rules came from, one copy each */
  size_t n_rule_files;

  char sha256[65];       /* of the canonical text printed by policy_format() */
  unsigned floor_raised; /* SBX_FLOOR_*: what policy_apply_floor changed, for `policy show` */
};

/* What policy_apply_floor raised. */
#define SBX_FLOOR_CAPABILITIES 1u /* drop_capabilities was no */
#define SBX_FLOOR_NO_NEW_PRIVS 2u /* no_new_privs was no */
#define SBX_FLOOR_SYSCALLS 4u     /* a namespace or mount call was allowed */

/* Loading (policy_load.c). Find and parse a policy. name_or_path: a path if it contains '/' or
 * ends in .policy, else a name looked up in the policy directories. NULL means "default". */
int policy_load(const char *name_or_path, struct sbx_policy **ret, sbx_error_t *err);
/* Parse one file (and its includes). */
int policy_load_file(const char *path, struct sbx_policy **ret, sbx_error_t *err);
/* Where named policies are looked up (colon-separated), for diagnostics. */
const char *policy_search_path(void);

/* The unprivileged floor (policy_floor.c; sandboxd.policy(5), UNPRIVILEGED FLOOR): whatever p
 * says, capabilities dropped, no_new_privs, and no call that makes or enters a namespace or
 * changes mounts (unshare, setns, clone with a CLONE_NEW* flag, clone3, mount, umount2,
 * pivot_root, chroot, the fs*, move_mount, open_tree, mount_setattr). policy_load applies it
 * whenever sandboxd is not root: the user namespace sandboxd makes may come from a right the
 * caller lacks (an AppArmor profile's `userns`), and the caller's own policy must not pass it on
 * to the code. A policy that already holds it is left as it is; else the rules change and the
 * sha256 is computed again. */
int policy_apply_floor(struct sbx_policy *p, sbx_error_t *err);

/* The parser (policy.c). Parse from memory; `file` names it in diagnostics, `dir` resolves includes. */
int policy_parse_string(const char *text, const char *file, const char *dir, struct sbx_policy **ret,
                        sbx_error_t *err);
void policy_free(struct sbx_policy *p);

/* The fully resolved policy as stable, diffable text (what `policy show` prints, minus the hash).
 * sha256 is over the same text without its trailing comments: policy_format_canonical(). Both
 * in policy_format.c. */
char *policy_format(const struct sbx_policy *p);
char *policy_format_canonical(const struct sbx_policy *p);

/* May code under this policy call host MCP server `name` through the proxy? */
bool policy_allows_server(const struct sbx_policy *p, const char *name);

/* One allowlist entry appended to p, refusing duplicates and more than cap (the parser's and
 * --allow-host's; messages without a place). policy_network.c. */
int policy_push_allow_host(struct sbx_policy *p, const char *pattern, const char *reason, size_t cap,
                           sbx_error_t *err);

/* Add a command line's --allow-host PATTERN[:PORT]: only when max_network permits, which turns the
 * run's network to proxy. `option` names the option in messages. */
int policy_add_allow_host(struct sbx_policy *p, const char *option, const char *pattern, sbx_error_t *err);
/* The --allow-host options of one command line (exec, mcp), checked for syntax as they are read. */
struct policy_allow_opts {
  const char *patterns[SBX_CLI_MAX_ALLOW_HOSTS];
  size_t n;
};
int policy_allow_opts_add(struct policy_allow_opts *o, const char *pattern, sbx_error_t *err);
/* After the policy is loaded: add the options (policy_add_allow_host), then policy_check_network. */
int policy_apply_network(struct sbx_policy *p, const struct policy_allow_opts *o, sbx_error_t *err);
/* The run-time check of the network settings (kept for the callers; nothing is refused today). */
int policy_check_network(const struct sbx_policy *p, sbx_error_t *err);

/* Constants a policy may name (AF_UNIX, CLONE_NEWUSER, TIOCSTI, EPERM...). */
int policy_constant(const char *name, uint64_t *ret);
/* FNV-1a of a syscall name: struct sbx_rule's name_hash. */
uint32_t policy_name_hash(const char *syscall);
const char *policy_errno_name(int e);
/* The errno value of an errno action's name (EPERM ...), or -1. */
int policy_errno_by_name(const char *name);

/* Apply requested limits (fields set to UINT64_MAX mean "not requested") on top of the policy's
 * defaults, refusing any value above the policy's max. */
int policy_resolve_limits(const struct sbx_policy *p, const struct sbx_limits *requested,
                          struct sbx_limits *ret, sbx_error_t *err);
void limits_unset(struct sbx_limits *l);

#endif
