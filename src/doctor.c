/* `sandboxd doctor`: what this host supports, and the fix for what it lacks. */
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "cli.h"
#include "util.h"

static int report(bool ok, const char *what, const char *detail, const char *fix)
{
  printf("%-4s %-18s %s\n", ok ? "ok" : "FAIL", what, detail);
  if (!ok && fix)
    printf("     fix: %s\n", fix);
  return ok ? 0 : 1;
}

static int try_userns(char *detail, size_t len)
{
  pid_t pid = (pid_t) syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | SIGCHLD,
                              NULL, NULL, NULL, 0);
  if (pid < 0) {
    bufprintf_cut(detail, len, "cannot create namespaces: %s", strerror(errno));
    return -1;
  }
  if (pid == 0)
    _exit(0);
  waitpid(pid, NULL, 0);
  bufprintf_cut(detail, len, "user, mount, pid and net namespaces can be created");
  return 0;
}

int cmd_doctor(int argc, char **argv)
{
  (void) argc;
  (void) argv;
  int bad = 0;
  char detail[512];
  bool userns = try_userns(detail, sizeof detail) == 0;
  const char *fix = "enable unprivileged user namespaces: sysctl -w user.max_user_namespaces=15000";
  _cleanup_free_ char *apparmor = NULL;
  if (read_file("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 16, &apparmor, NULL, NULL) == 0 &&
      apparmor[0] == '1')
    fix = "Ubuntu restricts unprivileged user namespaces with AppArmor: install the profile shipped in "
          "policy/apparmor.d/sandboxd (sudo install -m 0644 policy/apparmor.d/sandboxd /etc/apparmor.d/ && "
          "sudo apparmor_parser -r /etc/apparmor.d/sandboxd)";
  bad += report(userns, "user namespaces", detail, fix);

  bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  bad +=
      report(seccomp, "seccomp", seccomp ? "seccomp filters are available" : "prctl(PR_GET_SECCOMP) failed",
             "use a kernel built with CONFIG_SECCOMP_FILTER");

  int pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
  bad += report(pidfd >= 0, "pidfd", pidfd >= 0 ? "pidfd_open works" : "pidfd_open is missing (Linux < 5.3)",
                "use Linux 5.3 or newer");
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

  long clone3 = syscall(SYS_clone3, NULL, 0);
  bool have_clone3 = !(clone3 < 0 && errno == ENOSYS);
  report(have_clone3, "clone3",
         have_clone3 ? "clone3 is available (CLONE_INTO_CGROUP)"
                     : "no clone3 (Linux < 5.3): falls back to clone",
         NULL);

  _cleanup_free_ char *rootfs = NULL;
  sbx_error_t err = {0};
  bool have_rootfs = rootfs_find(NULL, &rootfs, &err) == 0;
  bad += report(have_rootfs, "rootfs", have_rootfs ? rootfs : err.msg,
                paths_build_tree() ? "run `make rootfs` in the source tree" : PATHS_GET_ROOTFS);
  return bad ? 1 : 0;
}
