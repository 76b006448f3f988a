/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp filter, built from policy rules with libseccomp. */
#ifndef SBX_SECCOMP_H
#define SBX_SECCOMP_H

#include <stddef.h>

#include "base/error.h"
#include "policy/policy.h"

/* Compiled BPF, ready to install without libseccomp. Built once in the parent, so the sandbox
 * child does no compilation and a bad rule is reported before any process is created. */
struct sbx_bpf {
  void *main_prog;   /* struct sock_filter[] */
  size_t main_len;   /* number of instructions */
  void *except_prog; /* conditional denials, stacked on top; NULL if none */
  size_t except_len;
};

/* Check every rule resolves on this architecture; errors name file:line. */
int seccomp_validate(const struct sbx_policy *p, sbx_error_t *err);
/* Variants of a policy's filter (seccomp_compile's variant, a set of these). */
enum {
  /* Without a cgroup (rlimit mode): what holds memory outside RLIMIT_AS is refused whatever the
   * policy allows: memfd_create and memfd_secret (ENOMEM), shmget (ENOSPC). */
  SBX_SECCOMP_RLIMIT = 1 << 0,
};
int seccomp_compile(const struct sbx_policy *p, unsigned variant, struct sbx_bpf *ret, sbx_error_t *err);
void seccomp_bpf_free(struct sbx_bpf *bpf);
/* seccomp_compile() through a per-user cache of compiled filters ($SANDBOXD_CACHE_DIR, else
 * /var/cache/sandboxd for root, else $XDG_CACHE_HOME/sandboxd or ~/.cache/sandboxd; an empty
 * SANDBOXD_CACHE_DIR disables it). Unknown syscalls are reported as by seccomp_validate(). */
int seccomp_prepare(const struct sbx_policy *p, unsigned variant, struct sbx_bpf *ret, sbx_error_t *err);
/* No rule allows keyctl, add_key or request_key, and each is denied: the kernel keyrings are out
 * of the sandbox's reach (else it gets a session keyring of its own, and no filter is cached). */
bool seccomp_policy_denies_keyrings(const struct sbx_policy *p);
/* p allows the call whatever its arguments: an unconditional allow, or the default, and no errno
 * or kill rule for it. */
bool seccomp_policy_allows(const struct sbx_policy *p, const char *call);
/* The filter of sandboxd's host-side helpers that read what a sandbox sends (the egress proxy):
 * everything allowed but, with EPERM, other programs (execve), other processes (ptrace,
 * process_vm_*), namespaces and mounts, identity and capability changes, kernel keyrings,
 * modules, BPF, perf, io_uring, userfaultfd and the like, and sockets other than AF_UNIX, IPv4
 * and IPv6; other architectures' calls kill. Compiled once, installed with seccomp_install. */
int seccomp_helper_compile(struct sbx_bpf *ret, sbx_error_t *err);
/* Install the compiled filters in the calling thread. Async-signal-safe (no allocation). */
int seccomp_install(const struct sbx_bpf *bpf, sbx_error_t *err);
const char *seccomp_arch_name(void);

#endif
