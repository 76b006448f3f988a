/* SPDX-License-Identifier: Apache-2.0 */
/* Policy rules -> two BPF programs.
 *
 * libseccomp lets an unconditional rule replace every conditional rule of the same syscall, so
 * "allow ioctl, except TIOCSTI" cannot live in one filter. The main filter (default: the policy's
 * seccomp_default) holds every allow rule and every unconditional denial; conditional denials go
 * into a second filter whose default is allow. The kernel runs both and applies the most
 * restrictive result (seccomp(2): ERRNO and KILL take precedence over ALLOW). */
#include "kernel/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/hostfile.h"
#include "base/paths.h"
#include "base/util.h"
#include "kernel/keyring.h"

static uint32_t to_scmp(enum sbx_action a, int e)
{
  switch (a) {
  case SBX_ACT_ALLOW:
    return SCMP_ACT_ALLOW;
  case SBX_ACT_KILL:
    return SCMP_ACT_KILL_PROCESS;
  case SBX_ACT_ERRNO:
    break;
  }
  return SCMP_ACT_ERRNO((uint32_t) e);
}

int seccomp_validate(const struct sbx_policy *p, sbx_error_t *err)
{
  for (size_t i = 0; i < p->n_rules; i++) {
    const struct sbx_rule *r = &p->rules[i];
    if (seccomp_syscall_resolve_name(r->syscall) == __NR_SCMP_ERROR)
      return sbx_error_set(err, 0, "%s:%d: unknown syscall `%s` on %s", r->file, r->line, r->syscall,
                           seccomp_arch_name());
  }
  return 0;
}

const char *seccomp_arch_name(void)
{
  uint32_t a = seccomp_arch_native();
  return a == SCMP_ARCH_X86_64 ? "x86_64" : a == SCMP_ARCH_AARCH64 ? "aarch64" : "this architecture";
}

static int export_bpf(scmp_filter_ctx ctx, void **ret_prog, size_t *ret_len, sbx_error_t *err)
{
  int fd = memfd_create("sandboxd-bpf", MFD_CLOEXEC);
  if (fd < 0)
    return sbx_error_errno(err, "seccomp: memfd_create");
  int rc = seccomp_export_bpf(ctx, fd);
  if (rc < 0) {
    close(fd);
    return sbx_error_set(err, -rc, "seccomp: export filter");
  }
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0 || size % (off_t) sizeof(struct sock_filter) != 0) {
    close(fd);
    return sbx_error_set(err, EINVAL, "seccomp: exported filter has a bad size");
  }
  void *prog = malloc((size_t) size);
  if (!prog || pread(fd, prog, (size_t) size, 0) != size) {
    free(prog);
    close(fd);
    return sbx_error_set(err, EIO, "seccomp: read exported filter");
  }
  close(fd);
  *ret_prog = prog;
  *ret_len = (size_t) size / sizeof(struct sock_filter);
  return 0;
}

static int add_rule(scmp_filter_ctx ctx, const struct sbx_rule *r, sbx_error_t *err)
{
  int nr = seccomp_syscall_resolve_name(r->syscall);
  if (nr == __NR_SCMP_ERROR)
    return sbx_error_set(err, 0, "%s:%d: unknown syscall `%s`", r->file, r->line, r->syscall);
  int rc;
  uint32_t action = to_scmp(r->action, r->errno_value);
  if (r->cmp == SBX_CMP_ANY)
    rc = seccomp_rule_add_exact(ctx, action, nr, 0);
  else
    rc = seccomp_rule_add_exact(ctx, action, nr, 1, SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, r->mask, r->value));
  if (rc == -EACCES || rc == -EDOM) /* not on this ABI (e.g. a legacy call): nothing to filter */
    return 0;
  if (rc < 0)
    return sbx_error_set(err, -rc, "%s:%d: seccomp rule for `%s`", r->file, r->line, r->syscall);
  return 0;
}

static scmp_filter_ctx new_ctx(uint32_t def, uint32_t badarch)
{
  scmp_filter_ctx ctx = seccomp_init(def);
  if (!ctx)
    return NULL;
  /* x32 calls share the x86_64 audit arch; libseccomp rejects them (nr >= 0x40000000) with the
   * bad-arch action unless x32 is added, which we never do. */
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, badarch) < 0 ||
      /* We set no_new_privs ourselves, as the policy says; libseccomp must not. */
      seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0 ||
      /* A binary search over syscall numbers instead of a linear chain: fewer instructions per
       * syscall at run time, and a faster install (the kernel emulates the filter per syscall
       * number to build its action cache). */
      seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0) {
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

/* Without a cgroup (rlimit mode) RLIMIT_AS bounds what each process maps, but not what a file
 * holds while nothing maps it: an anonymous file (memfd_create, memfd_secret) or a SysV segment
 * lives in the kernel's internal tmpfs, charged to no size and no limit of the sandbox's (12
 * memfds of 64 MiB under `--memory 256M` held 767 MiB of host Shmem). A SysV budget would be the
 * IPC namespace's kernel.shmall, which only the namespace's uid 0 may write, and the sandbox has
 * no uid 0. So these are refused, whatever the policy says, with the errno each call's own limit
 * gives: ENOMEM for an anonymous file, ENOSPC for a segment over SHMALL. POSIX shared memory and
 * semaphores are files in /dev/shm, a tmpfs of shm_size, as /tmp and /workspace are of theirs. */
static const struct {
  const char *call;
  int errno_value;
} rlimit_denied[] = {{"memfd_create", ENOMEM}, {"memfd_secret", ENOMEM}, {"shmget", ENOSPC}};

static bool rlimit_denies(const char *call)
{
  for (size_t i = 0; i < ARRAY_SIZE(rlimit_denied); i++)
    if (strcmp(rlimit_denied[i].call, call) == 0)
      return true;
  return false;
}

/* Into the exception filter (default allow), so that they override the main filter's allow; its
 * unconditional errno for one of these calls replaces a conditional denial of the policy's, which
 * add_rule is not given (none ships). A denial in the main filter still wins: a kill outranks
 * an errno, and of two errnos the kernel keeps the last installed filter's, the main one's. */
static int add_rlimit_rules(scmp_filter_ctx ctx, sbx_error_t *err)
{
  for (size_t i = 0; i < ARRAY_SIZE(rlimit_denied); i++) {
    int nr = seccomp_syscall_resolve_name(rlimit_denied[i].call);
    if (nr == __NR_SCMP_ERROR)
      continue; /* not on this architecture */
    int rc = seccomp_rule_add_exact(ctx, SCMP_ACT_ERRNO((uint32_t) rlimit_denied[i].errno_value), nr, 0);
    if (rc < 0 && rc != -EACCES && rc != -EDOM)
      return sbx_error_set(err, -rc, "seccomp: rlimit-mode rule for `%s`", rlimit_denied[i].call);
  }
  return 0;
}

int seccomp_compile(const struct sbx_policy *p, unsigned variant, struct sbx_bpf *ret, sbx_error_t *err)
{
  struct sbx_bpf bpf = {0};
  uint32_t badarch = to_scmp(p->badarch_action, 0);
  scmp_filter_ctx main_ctx = new_ctx(to_scmp(p->default_action, p->default_errno), badarch);
  scmp_filter_ctx exc_ctx = new_ctx(SCMP_ACT_ALLOW, badarch);
  size_t n_exc = 0;
  int rc = -1;
  if (!main_ctx || !exc_ctx) {
    sbx_error_set(err, ENOMEM, "seccomp: create filter");
    goto out;
  }
  for (size_t i = 0; i < p->n_rules; i++) {
    const struct sbx_rule *r = &p->rules[i];
    bool exception = r->cmp != SBX_CMP_ANY && r->action != SBX_ACT_ALLOW;
    if (exception && (variant & SBX_SECCOMP_RLIMIT) && rlimit_denies(r->syscall))
      continue;
    if (add_rule(exception ? exc_ctx : main_ctx, r, err) < 0)
      goto out;
    n_exc += exception;
  }
  if (variant & SBX_SECCOMP_RLIMIT) {
    if (add_rlimit_rules(exc_ctx, err) < 0)
      goto out;
    n_exc++;
  }
  if (export_bpf(main_ctx, &bpf.main_prog, &bpf.main_len, err) < 0)
    goto out;
  if (n_exc && export_bpf(exc_ctx, &bpf.except_prog, &bpf.except_len, err) < 0)
    goto out;
  *ret = bpf;
  bpf = (struct sbx_bpf){0};
  rc = 0;
out:
  seccomp_bpf_free(&bpf);
  if (main_ctx)
    seccomp_release(main_ctx);
  if (exc_ctx)
    seccomp_release(exc_ctx);
  return rc;
}

/* The host-side helpers' filter (seccomp.h). Denied with EPERM: what neither relaying nor the
 * resolver (NSS: files, DNS, nscd or systemd-resolved over AF_UNIX) uses. */
static const char *const helper_denied[] = {
    /* other programs, other processes */
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    "kcmp",
    /* namespaces, mounts, roots */
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    /* identity and capabilities (set before the filter, for good) */
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
    "capset", "personality",
    /* the kernel's own state and attack surface */
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "bpf",
    "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "syslog",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "iopl",
    "ioperm", "vhangup", "uselib", "fanotify_init", "lookup_dcookie"};

static int helper_rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_args,
                       const struct scmp_arg_cmp *arg, sbx_error_t *err)
{
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR)
    return 0; /* not on this architecture */
  int rc =
      n_args ? seccomp_rule_add_exact(ctx, action, nr, 1, *arg) : seccomp_rule_add_exact(ctx, action, nr, 0);
  if (rc < 0 && rc != -EACCES && rc != -EDOM)
    return sbx_error_set(err, -rc, "seccomp: helper rule for `%s`", name);
  return 0;
}

int seccomp_helper_compile(struct sbx_bpf *ret, sbx_error_t *err)
{
  static const unsigned long newns[] = {CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                        CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET};
  /* The helpers are single-threaded: where libseccomp cannot use KILL_PROCESS (under valgrind,
   * which lacks seccomp(2)), KILL_THREAD ends them the same. */
  scmp_filter_ctx ctx = new_ctx(SCMP_ACT_ALLOW, SCMP_ACT_KILL_PROCESS);
  if (!ctx)
    ctx = new_ctx(SCMP_ACT_ALLOW, SCMP_ACT_KILL);
  if (!ctx)
    return sbx_error_set(err, 0, "seccomp: helper filter: libseccomp refused its attributes");
  int r = 0;
  uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (size_t i = 0; r == 0 && i < ARRAY_SIZE(helper_denied); i++)
    r = helper_rule(ctx, eperm, helper_denied[i], 0, NULL, err);
  /* clone3's flags are in memory, out of a filter's reach: ENOSYS sends glibc to clone, whose
   * namespace flags are refused here. */
  if (r == 0)
    r = helper_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err);
  for (size_t i = 0; r == 0 && i < ARRAY_SIZE(newns); i++) {
    struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, newns[i], newns[i]);
    r = helper_rule(ctx, eperm, "clone", 1, &c, err);
  }
  /* Sockets: IPv4 and IPv6 (the origins, DNS) and AF_UNIX (nscd, systemd-resolved); no netlink,
   * packet or other family. */
  for (int d = 0; r == 0 && d <= AF_INET6; d++) {
    struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) d);
    if (d != AF_UNIX && d != AF_INET && d != AF_INET6)
      r = helper_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &c, err);
  }
  if (r == 0) {
    struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_GT, AF_INET6);
    r = helper_rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &c, err);
  }
  *ret = (struct sbx_bpf){0};
  if (r == 0)
    r = export_bpf(ctx, &ret->main_prog, &ret->main_len, err);
  seccomp_release(ctx);
  return r;
}

void seccomp_bpf_free(struct sbx_bpf *bpf)
{
  free(bpf->main_prog);
  free(bpf->except_prog);
  *bpf = (struct sbx_bpf){0};
}

static int install_one(void *prog, size_t len, sbx_error_t *err)
{
  struct sock_fprog fprog = {.len = (unsigned short) len, .filter = prog};
  /* prctl is the older interface to the same operation (flags 0); kept for kernels and tools
   * (valgrind) that lack seccomp(2). */
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0 &&
      (errno != ENOSYS || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) < 0))
    return sbx_error_errno(err, "install seccomp filter");
  return 0;
}

int seccomp_install(const struct sbx_bpf *bpf, sbx_error_t *err)
{
  /* Exceptions first: the main filter does not allow seccomp(2) itself, so it must go last.
   * Order does not change the verdict; the kernel takes the most restrictive of the two. */
  if (bpf->except_prog && install_one(bpf->except_prog, bpf->except_len, err) < 0)
    return -1;
  return install_one(bpf->main_prog, bpf->main_len, err);
}

/* ------------------------------------------------------------------ compiled-filter cache
 * Compiling ~300 rules with libseccomp costs about a millisecond, a tenth of Python's startup.
 * The result depends only on the policy's canonical text, the architecture and libseccomp, so
 * it is cached under a name hashed from those (the label). Whoever writes a file can also
 * compute its checksum, and a sandbox can write any directory of the user's it is bound
 * (unprivileged, it runs as the user's own uid): so each file carries an HMAC-SHA256 under a
 * random key kept in the user's kernel keyring (keyring.h), which no file and no sandbox holds.
 * The HMAC covers the label as well as the bytes: a file is genuine only under the name it was
 * written for, so one policy's filter copied over another's name fails the check like a forged
 * one. A file that fails it is recompiled and replaced; without a keyring there is no cache. */

#define BPF_MAGIC "SBXBPF02"
#define BPF_MAX_INSNS 4096
#define CACHE_KEY "sandboxd:seccomp-cache"
#define MAC_LEN 64 /* hex */

struct bpf_header {
  char magic[8];
  uint32_t main_len, except_len;
};

struct cache {
  int dirfd;
  char name[96];
  char label[256]; /* what the filter was compiled from: its name hashes it, its HMAC covers it */
  size_t label_len;
  unsigned char key[32];
};

/* The key is out of a sandbox's reach only while its policy denies it the keyring calls: no
 * rule allows them, and a rule or the default denies each outright. */
bool seccomp_policy_denies_keyrings(const struct sbx_policy *p)
{
  static const char *const calls[] = {"keyctl", "add_key", "request_key"};
  for (size_t c = 0; c < ARRAY_SIZE(calls); c++) {
    bool denied = p->default_action != SBX_ACT_ALLOW;
    uint32_t h = policy_name_hash(calls[c]); /* each rule's name_hash first: ~400 rules, 2 calls per exec */
    for (size_t i = 0; i < p->n_rules; i++) {
      const struct sbx_rule *r = &p->rules[i];
      if (r->name_hash != h || strcmp(r->syscall, calls[c]) != 0)
        continue;
      if (r->action == SBX_ACT_ALLOW)
        return false;
      denied |= r->cmp == SBX_CMP_ANY;
    }
    if (!denied)
      return false;
  }
  return true;
}

bool seccomp_policy_allows(const struct sbx_policy *p, const char *call)
{
  bool allowed = p->default_action == SBX_ACT_ALLOW;
  uint32_t h = policy_name_hash(call);
  for (size_t i = 0; i < p->n_rules; i++) {
    const struct sbx_rule *r = &p->rules[i];
    if (r->name_hash != h || strcmp(r->syscall, call) != 0)
      continue;
    if (r->action != SBX_ACT_ALLOW)
      return false;
    allowed |= r->cmp == SBX_CMP_ANY;
  }
  return allowed;
}

static int cache_open(const struct sbx_policy *p, unsigned variant, struct cache *c)
{
  char dir[PATH_MAX];
  sbx_error_t err;
  struct stat st;
  if (paths_cache_dir(dir, &err) < 0 || keyring_secret(CACHE_KEY, c->key, sizeof c->key, &err) < 0)
    return -1;
  /* mkdir -p, private: ~/.cache may not exist yet. */
  if (hostfile_open_dir(dir, NULL, HOSTFILE_MKDIR | HOSTFILE_PRIVATE, &c->dirfd, &err) < 0)
    return -1;
  if (fstat(c->dirfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    close(c->dirfd);
    return -1;
  }
  const struct scmp_version *v = seccomp_version();
  char hash[65];
  /* NUL-terminated in what the HMAC covers: no label is a prefix of another's message. */
  if (bufprintf(c->label, sizeof c->label, NULL, "%s %s %u.%u.%u %s%s", p->sha256, seccomp_arch_name(),
                v->major, v->minor, v->micro, BPF_MAGIC, variant & SBX_SECCOMP_RLIMIT ? " rlimit" : "") < 0) {
    close(c->dirfd);
    return -1;
  }
  c->label_len = strlen(c->label) + 1;
  sha256_hex(c->label, c->label_len - 1, hash);
  if (bufprintf(c->name, sizeof c->name, NULL, "seccomp-%s.bpf", hash) < 0) {
    close(c->dirfd);
    return -1;
  }
  return 0;
}

/* The HMAC of msg: the label, then the file's body, which the caller placed right after it. */
static bool mac_ok(const struct cache *c, const char *msg, size_t len, const char *mac)
{
  char want[65];
  hmac_sha256_hex(c->key, sizeof c->key, msg, len, want);
  unsigned char diff = 0;
  for (size_t i = 0; i < MAC_LEN; i++)
    diff |= (unsigned char) (want[i] ^ mac[i]);
  return diff == 0;
}

static int cache_read(const struct cache *c, struct sbx_bpf *ret)
{
  struct stat st;
  sbx_error_t err;
  _cleanup_close_ int fd = -1;
  if (hostfile_open_trusted(c->dirfd, c->name, c->name, &fd, &st, &err) < 0 || st.st_size > (1 << 20) ||
      st.st_size < (off_t) (sizeof(struct bpf_header) + MAC_LEN))
    return -1;
  /* The label in front of the file's bytes: what the HMAC covers. */
  _cleanup_free_ char *msg = malloc(c->label_len + (size_t) st.st_size);
  if (!msg)
    return -1;
  memcpy(msg, c->label, c->label_len);
  char *buf = msg + c->label_len;
  if (read(fd, buf, (size_t) st.st_size) != st.st_size)
    return -1;
  size_t body = (size_t) st.st_size - MAC_LEN;
  if (!mac_ok(c, msg, c->label_len + body, buf + body))
    return -1;
  struct bpf_header h;
  memcpy(&h, buf, sizeof h);
  if (memcmp(h.magic, BPF_MAGIC, 8) != 0 || h.main_len == 0 || h.main_len > BPF_MAX_INSNS ||
      h.except_len > BPF_MAX_INSNS ||
      sizeof h + ((size_t) h.main_len + h.except_len) * sizeof(struct sock_filter) != body)
    return -1;
  struct sbx_bpf b = {.main_len = h.main_len, .except_len = h.except_len};
  size_t msz = h.main_len * sizeof(struct sock_filter), esz = h.except_len * sizeof(struct sock_filter);
  b.main_prog = malloc(msz);
  b.except_prog = esz ? malloc(esz) : NULL;
  if (!b.main_prog || (esz && !b.except_prog)) {
    seccomp_bpf_free(&b);
    return -1;
  }
  memcpy(b.main_prog, buf + sizeof h, msz);
  if (esz)
    memcpy(b.except_prog, buf + sizeof h + msz, esz);
  *ret = b;
  return 0;
}

static void cache_write(const struct cache *c, const struct sbx_bpf *b)
{
  size_t msz = b->main_len * sizeof(struct sock_filter), esz = b->except_len * sizeof(struct sock_filter);
  size_t body = sizeof(struct bpf_header) + msz + esz;
  _cleanup_free_ char *msg = malloc(c->label_len + body + MAC_LEN + 1);
  if (!msg)
    return;
  memcpy(msg, c->label, c->label_len);
  char *buf = msg + c->label_len; /* the file */
  struct bpf_header h = {.main_len = (uint32_t) b->main_len, .except_len = (uint32_t) b->except_len};
  memcpy(h.magic, BPF_MAGIC, 8);
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, b->main_prog, msz);
  if (esz)
    memcpy(buf + sizeof h + msz, b->except_prog, esz);
  hmac_sha256_hex(c->key, sizeof c->key, msg, c->label_len + body, buf + body);
  sbx_error_t err;
  /* Atomic: readers see the old file, no file, or the whole new one. */
  hostfile_replace(c->dirfd, c->name, c->name, buf, body + MAC_LEN, 0600, &err);
}

int seccomp_prepare(const struct sbx_policy *p, unsigned variant, struct sbx_bpf *ret, sbx_error_t *err)
{
  if (!seccomp_policy_denies_keyrings(p)) {
    /* Its sandboxes may call keyctl: each joins a session keyring of its own (sandbox.c), but
     * on kernels before 5.3 a user namespace shares the user's keyring: cache nothing, and
     * leave no key to read (best effort: a concurrent run may add it again). */
    keyring_forget(CACHE_KEY);
    return seccomp_compile(p, variant, ret, err);
  }
  struct cache c = {.dirfd = -1};
  bool cache = cache_open(p, variant, &c) == 0;
  int rc = 0;
  if (!cache || cache_read(&c, ret) < 0) {
    rc = seccomp_compile(p, variant, ret, err);
    if (rc == 0 && cache)
      cache_write(&c, ret);
  }
  if (c.dirfd >= 0)
    close(c.dirfd);
  explicit_bzero(c.key, sizeof c.key);
  return rc;
}
