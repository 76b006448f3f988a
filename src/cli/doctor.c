/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd doctor`: what this host supports, and the fix for what it lacks. It probes what a
 * sandbox needs (a user namespace with mount, pid and net namespaces, a new proc in it), and
 * blames what stopped it in this order: AppArmor's user namespace restriction (Ubuntu 23.10+),
 * a container's seccomp filter, AppArmor profile or masked /proc, the sysctls. The facts come
 * from hostfacts.c (pure, unit-tested); this file reads the files and runs the probes. */
#include <errno.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "cli/cli.h"
#include "cli/hostfacts.h"
#include "kernel/cgroup.h"

/* Where the package puts what the fixes name (make install, scripts/deb). */
#define APPARMOR_PROFILE "/etc/apparmor.d/sandboxd"
#define DOCKER_SECCOMP_INSTALLED "/usr/share/sandboxd/docker/seccomp.json"
#define DOCKER_SECCOMP_SOURCE "scripts/docker/seccomp.json"

static int report(bool ok, const char *what, const char *detail, const char *fix)
{
  printf("%-4s %-18s %s\n", ok ? "ok" : "FAIL", what, detail);
  if (!ok && fix)
    printf("     fix: %s\n", fix);
  return ok ? 0 : 1;
}

static void info(const char *what, const char *detail)
{
  printf("%-4s %-18s %s\n", "", what, detail);
}

/* A small /proc or /sys file's text, or NULL. */
static char *slurp(const char *path)
{
  char *s = NULL;
  return read_file(path, 1 << 20, &s, NULL, NULL) == 0 ? s : NULL;
}

enum probe_step { PROBE_OK, PROBE_CLONE, PROBE_PRIVATE, PROBE_PROC };
static const char *const step_name[] = {"", "create user, mount, pid and net namespaces",
                                        "make the mounts private in them", "mount a new proc in them"};

/* What a sandbox needs first: the namespaces, then (as pid 1 of the new pid namespace) a new
 * proc. The child reports the step that failed and its errno in its exit status. */
static enum probe_step probe_userns(int *ret_errno)
{
  pid_t pid = (pid_t) syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | SIGCHLD,
                              NULL, NULL, NULL, 0);
  if (pid < 0) {
    *ret_errno = errno;
    return PROBE_CLONE;
  }
  if (pid == 0) {
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
      _exit(PROBE_PRIVATE << 6 | (errno & 63));
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
      _exit(PROBE_PROC << 6 | (errno & 63));
    _exit(0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  *ret_errno = code & 63;
  return (enum probe_step)(code >> 6);
}

/* Linux >= major.minor. */
static bool kernel_at_least(int major, int minor)
{
  struct utsname u;
  int ma = 0, mi = 0;
  if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
    return true;
  return ma > major || (ma == major && mi >= minor);
}

struct host {
  const char *container, *container_why;
  int seccomp;                          /* Seccomp: of /proc/self/status */
  long aa_restrict;                     /* kernel.apparmor_restrict_unprivileged_userns, or -1 */
  bool aa_enabled, aa_loaded, aa_known; /* aa_known: the profile list was readable (root) */
  char aa_label[128];                   /* the AppArmor profile we run under, or "" */
  char proc_over[256];                  /* a mount hiding part of /proc, or "" */
  char *status;
};

/* The docker run flags that lift what stops sandboxes in a container. */
static void container_fix(char *buf, size_t len, bool seccomp, bool apparmor, bool systempaths)
{
  if (!seccomp && !apparmor && !systempaths) {
    bufprintf_cut(buf, len, "see Containers in sandboxd(1) for the docker run flags sandboxd needs");
    return;
  }
  bufprintf_cut(buf, len, "run the container with `docker run%s%s%s ...`%s%s",
                seccomp ? " --security-opt seccomp=" DOCKER_SECCOMP_INSTALLED : "",
                apparmor ? " --security-opt apparmor=unconfined" : "",
                systempaths ? " --security-opt systempaths=unconfined" : "",
                seccomp ? " (the profile is also " DOCKER_SECCOMP_SOURCE " in the source)" : "",
                systempaths ? " (podman: --security-opt unmask=ALL for systempaths)" : "");
}

/* Why the probe failed, and the fix, from what the host shows. */
static void diagnose(const struct host *h, enum probe_step step, int e, char *why, size_t wlen, char *fix,
                     size_t flen)
{
  char exe[PATH_MAX] = "sandboxd";
  paths_exe(exe, NULL);
  bool seccomp_blocks = h->seccomp == 2 && (e == EPERM || e == ENOSYS) && step == PROBE_CLONE;
  bool aa_docker = !strncmp(h->aa_label, "docker-", 7) || !strcmp(h->aa_label, "containers-default");
  if (h->aa_restrict == 1 && h->aa_enabled && strcmp(h->aa_label, "sandboxd") != 0 && !h->container) {
    bufprintf_cut(why, wlen,
                  "AppArmor restricts unprivileged user namespaces "
                  "(kernel.apparmor_restrict_unprivileged_userns=1) and %s",
                  h->aa_loaded  ? "the sandboxd profile is loaded but not for this binary"
                  : h->aa_known ? "the sandboxd profile is not loaded"
                                : "this binary does not run under the sandboxd profile");
    if (!access(APPARMOR_PROFILE, R_OK) && strstr(exe, "/usr/bin/sandboxd"))
      bufprintf_cut(fix, flen,
                    "sudo apparmor_parser -r %s (or, for every program: sudo sysctl -w "
                    "kernel.apparmor_restrict_unprivileged_userns=0)",
                    APPARMOR_PROFILE);
    else
      bufprintf_cut(
          fix, flen,
          "sed 's|/usr/local/bin/sandboxd|%s|' %s | sudo tee %s >/dev/null && sudo apparmor_parser "
          "-r %s (or, for every program: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0)",
          exe, paths_build_tree() ? "policy/apparmor.d/sandboxd" : APPARMOR_PROFILE, APPARMOR_PROFILE,
          APPARMOR_PROFILE);
  } else if (seccomp_blocks) {
    bufprintf_cut(why, wlen, "%s: %s: the %s seccomp filter (Seccomp: 2) denies it", step_name[step],
                  strerror(e), h->container ? "container's" : "process's");
    if (h->container)
      container_fix(fix, flen, true, aa_docker, h->proc_over[0] != 0);
    else
      bufprintf_cut(fix, flen, "run sandboxd outside that seccomp filter");
  } else if (step == PROBE_PRIVATE && aa_docker) {
    bufprintf_cut(why, wlen, "%s: %s: AppArmor profile %s denies mount", step_name[step], strerror(e),
                  h->aa_label);
    container_fix(fix, flen, h->seccomp == 2, true, h->proc_over[0] != 0);
  } else if (step == PROBE_PROC && h->proc_over[0]) {
    bufprintf_cut(why, wlen, "%s: %s: %s is mounted over part of /proc, so the kernel refuses a new one",
                  step_name[step], strerror(e), h->proc_over);
    if (h->container)
      container_fix(fix, flen, h->seccomp == 2, aa_docker, true);
    else
      bufprintf_cut(fix, flen, "unmount %s (and every other mount under /proc)", h->proc_over);
  } else if (step == PROBE_CLONE && e == ENOSPC) {
    bufprintf_cut(why, wlen, "%s: %s: user.max_user_namespaces is used up or 0", step_name[step],
                  strerror(e));
    bufprintf_cut(fix, flen, "sudo sysctl -w user.max_user_namespaces=15000");
  } else {
    _cleanup_free_ char *clone_ok = slurp("/proc/sys/kernel/unprivileged_userns_clone");
    bufprintf_cut(why, wlen, "%s: %s", step_name[step], strerror(e));
    if (hf_number(clone_ok) == 0)
      bufprintf_cut(fix, flen, "sudo sysctl -w kernel.unprivileged_userns_clone=1");
    else if (h->container)
      container_fix(fix, flen, h->seccomp == 2, aa_docker, h->proc_over[0] != 0);
    else
      bufprintf_cut(fix, flen, "sudo sysctl -w user.max_user_namespaces=15000");
  }
}

static void read_host(struct host *h)
{
  *h = (struct host){.seccomp = -1};
  h->status = slurp("/proc/self/status");
  h->seccomp = hf_seccomp_mode(h->status);
  _cleanup_free_ char *restrict_ = slurp("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  _cleanup_free_ char *enabled = slurp("/sys/module/apparmor/parameters/enabled");
  _cleanup_free_ char *profiles = slurp("/sys/kernel/security/apparmor/profiles");
  _cleanup_free_ char *label = slurp("/proc/self/attr/apparmor/current");
  if (!label)
    label = slurp("/proc/self/attr/current");
  h->aa_restrict = hf_number(restrict_);
  h->aa_enabled = hf_apparmor_enabled(enabled);
  h->aa_loaded = hf_apparmor_loaded(profiles, "sandboxd");
  h->aa_known = profiles != NULL;
  if (hf_apparmor_label(label, h->aa_label, sizeof h->aa_label) < 0)
    h->aa_label[0] = 0;
  struct stat st;
  _cleanup_free_ char *cgroup = slurp("/proc/self/cgroup");
  _cleanup_free_ char *mountinfo = slurp("/proc/self/mountinfo");
  _cleanup_free_ char *comm = slurp("/proc/1/comm");
  h->container = hf_container(stat("/.dockerenv", &st) == 0, stat("/run/.containerenv", &st) == 0,
                              getenv("container"), cgroup, mountinfo, comm, &h->container_why);
  if (!hf_proc_overmount(mountinfo, h->proc_over, sizeof h->proc_over))
    h->proc_over[0] = 0;
}

int cmd_doctor(int argc, char **argv)
{
  (void) argc;
  (void) argv;
  int bad = 0;
  char detail[512], fix[768];
  struct host h;
  read_host(&h);

  if (h.container) {
    bufprintf_cut(detail, sizeof detail, "%s (%s); seccomp filter: %s; /proc: %s%s", h.container,
                  h.container_why, h.seccomp == 2 ? "yes" : "no", h.proc_over[0] ? "masked at " : "whole",
                  h.proc_over[0] ? h.proc_over : "");
    info("container", detail);
  }
  if (h.aa_enabled) {
    bufprintf_cut(detail, sizeof detail,
                  "restrict_unprivileged_userns=%ld; profile sandboxd %s; running as %s", h.aa_restrict,
                  h.aa_loaded  ? "loaded"
                  : h.aa_known ? "not loaded"
                               : "unknown (root can tell)",
                  h.aa_label[0] ? h.aa_label : "?");
    info("apparmor", detail);
  }

  int e = 0;
  enum probe_step step = probe_userns(&e);
  if (step == PROBE_OK) {
    report(true, "user namespaces", "user, mount, pid and net namespaces and a new proc in them work", NULL);
  } else {
    diagnose(&h, step, e, detail, sizeof detail, fix, sizeof fix);
    bad += report(false, "user namespaces", detail, fix);
  }
  /* As root, each sandbox's user namespace belongs to its own host id (ns.c), which takes these. */
  if (geteuid() == 0 && !(hf_cap_effective(h.status, CAP_SETUID) && hf_cap_effective(h.status, CAP_SETGID)))
    bad += report(
        false, "capabilities", "root without CAP_SETUID and CAP_SETGID cannot act as a sandbox's host id",
        h.container ? "run the container with --cap-add SETUID --cap-add SETGID, or as a non-root user"
                    : "run sandboxd with CAP_SETUID and CAP_SETGID, or as an ordinary user");

  bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  bad +=
      report(seccomp, "seccomp", seccomp ? "seccomp filters are available" : "prctl(PR_GET_SECCOMP) failed",
             "use a kernel built with CONFIG_SECCOMP_FILTER");

  int pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
  e = errno;
  /* ENOSYS on a kernel that has it, or EPERM: a seccomp filter (Docker's before 20.10 lacks it). */
  bool filtered = pidfd < 0 && h.seccomp == 2 && (e == EPERM || kernel_at_least(5, 3));
  if (filtered)
    container_fix(fix, sizeof fix, true, false, false);
  bad += report(pidfd >= 0, "pidfd",
                pidfd >= 0 ? "pidfd_open works"
                : filtered ? "pidfd_open is denied by the seccomp filter"
                           : "pidfd_open is missing (Linux < 5.3)",
                filtered ? (h.container ? fix : "run sandboxd outside that seccomp filter")
                         : "use Linux 5.3 or newer");
  if (pidfd >= 0)
    close(pidfd);

  enum cgroup_mode cg;
  sbx_error_t why = {0};
  if (cgroup_probe(&cg, &why) == 0) {
    bufprintf_cut(detail, sizeof detail, "%s: each sandbox gets its own cgroup (memory, pids, cpu)",
                  cgroup_mode_name(cg));
    report(true, "cgroups", detail, NULL);
  } else {
    bufprintf_cut(detail, sizeof detail, "%s", why.msg);
    bad += report(false, "cgroups", detail,
                  "run under a delegated cgroup: `systemd-run --user --scope -p Delegate=yes sandboxd ...`, "
                  "or use a policy with `cgroup fallback-rlimit` (e.g. --policy ci) to run on rlimits");
  }

  /* Information only: without clone3 sandboxd falls back to clone. */
  long clone3 = syscall(SYS_clone3, NULL, 0);
  if (!(clone3 < 0 && errno == ENOSYS))
    report(true, "clone3", "clone3 is available (CLONE_INTO_CGROUP)", NULL);
  else
    info("clone3", h.seccomp == 2 && kernel_at_least(5, 3)
                       ? "clone3 is denied (ENOSYS) by the seccomp filter: falls back to clone"
                       : "no clone3 (Linux < 5.3): falls back to clone");

  _cleanup_free_ char *rootfs = NULL;
  sbx_error_t err = {0};
  bool have_rootfs = rootfs_find(NULL, &rootfs, &err) == 0;
  bad += report(have_rootfs, "rootfs", have_rootfs ? rootfs : err.msg,
                paths_build_tree() ? "run `make rootfs` in the source tree" : PATHS_GET_ROOTFS);
  free(h.status);
  return bad ? 1 : 0;
}
