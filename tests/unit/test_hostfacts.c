/* Unit tests for what doctor reads (src/cli/hostfacts.c), on the text Ubuntu 24.04, Docker 20.10+
 * (runc) and a plain Debian host show. */
#include <linux/capability.h>
#include <string.h>

#include "check.h"
#include "cli/hostfacts.h"

/* Ubuntu 24.04 (noble), AppArmor 4.0, with the package's profile loaded. */
static const char UBUNTU_PROFILES[] = "unprivileged_userns (enforce)\n"
                                      "bwrap (unconfined)\n"
                                      "unix-chkpwd (enforce)\n"
                                      "/usr/bin/man (enforce)\n"
                                      "man_filter (enforce)\n"
                                      "lsb_release (enforce)\n"
                                      "sandboxd-helper (unconfined)\n"
                                      "sandboxd (unconfined)\n"
                                      "rsyslogd (enforce)\n";
/* The same without it (only a lookalike name). */
static const char UBUNTU_PROFILES_NO[] = "unprivileged_userns (enforce)\n"
                                         "bwrap (unconfined)\n"
                                         "sandboxd-helper (unconfined)\n"
                                         "/usr/bin/sandboxd2 (enforce)\n";

/* /proc/self/status of root in `docker run debian` (default seccomp profile and capabilities). */
static const char DOCKER_STATUS[] = "Name:\tcat\n"
                                    "Umask:\t0022\n"
                                    "State:\tR (running)\n"
                                    "CapInh:\t0000000000000000\n"
                                    "CapPrm:\t00000000a80425fb\n"
                                    "CapEff:\t00000000a80425fb\n"
                                    "CapBnd:\t00000000a80425fb\n"
                                    "CapAmb:\t0000000000000000\n"
                                    "NoNewPrivs:\t0\n"
                                    "Seccomp:\t2\n"
                                    "Seccomp_filters:\t1\n"
                                    "Speculation_Store_Bypass:\tthread force mitigated\n";
static const char HOST_STATUS[] = "Name:\tcat\n"
                                  "CapEff:\t000001ffffffffff\n"
                                  "NoNewPrivs:\t0\n"
                                  "Seccomp:\t0\n"
                                  "Seccomp_filters:\t0\n";

/* /proc/self/mountinfo in that container (abridged; runc's masked and read-only paths). */
static const char DOCKER_MOUNTINFO[] =
    "626 571 0:52 / / rw,relatime master:281 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/"
    "ABC:/var/lib/docker/overlay2/l/DEF,upperdir=/var/lib/docker/overlay2/123/diff,workdir=/var/lib/docker/"
    "overlay2/123/work\n"
    "627 626 0:56 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "628 626 0:57 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
    "634 626 0:60 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
    "577 627 0:56 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "578 627 0:56 /fs /proc/fs ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "579 627 0:56 /irq /proc/irq ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "580 627 0:56 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "582 627 0:62 / /proc/acpi ro,relatime - tmpfs tmpfs ro\n"
    "583 627 0:57 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n";
/* The same container run with --security-opt systempaths=unconfined: /proc whole. */
static const char DOCKER_MOUNTINFO_UNMASKED[] =
    "626 571 0:52 / / rw,relatime master:281 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/"
    "ABC,upperdir=/var/lib/docker/overlay2/123/diff,workdir=/var/lib/docker/overlay2/123/work\n"
    "627 626 0:56 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "628 626 0:57 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n";
/* A Debian host with systemd (binfmt_misc under /proc is allowed). */
static const char HOST_MOUNTINFO[] =
    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    "23 27 0:22 / /sys rw,relatime - sysfs sysfs rw\n"
    "27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
    "40 22 0:35 / /proc/sys/fs/binfmt_misc rw,relatime - autofs systemd-1 rw\n"
    "41 27 0:36 / /processes rw,relatime - tmpfs tmpfs rw\n";
static const char PODMAN_MOUNTINFO[] =
    "500 480 0:44 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/containers/storage/overlay/l/X,"
    "upperdir=/var/lib/containers/storage/overlay/Y/diff,workdir=/var/lib/containers/storage/overlay/Y/"
    "work\n";

int main(void)
{
  char buf[256];
  const char *why = NULL;

  /* Sysctls. */
  CHECK(hf_number("1\n") == 1);
  CHECK(hf_number("0\n") == 0);
  CHECK(hf_number("15000\n") == 15000);
  CHECK(hf_number(NULL) == -1);
  CHECK(hf_number("") == -1);
  CHECK(hf_number("x") == -1);

  /* AppArmor on Ubuntu 24.04. */
  CHECK(hf_apparmor_enabled("Y\n"));
  CHECK(!hf_apparmor_enabled("N\n"));
  CHECK(!hf_apparmor_enabled(NULL));
  CHECK(hf_apparmor_loaded(UBUNTU_PROFILES, "sandboxd"));
  CHECK(hf_apparmor_loaded(UBUNTU_PROFILES, "bwrap"));
  CHECK(!hf_apparmor_loaded(UBUNTU_PROFILES_NO, "sandboxd"));
  CHECK(!hf_apparmor_loaded(NULL, "sandboxd"));
  CHECK(hf_apparmor_label("sandboxd (unconfined)\n", buf, sizeof buf) == 0 && !strcmp(buf, "sandboxd"));
  CHECK(hf_apparmor_label("unconfined\n", buf, sizeof buf) == 0 && !strcmp(buf, "unconfined"));
  CHECK(hf_apparmor_label("docker-default (enforce)\n", buf, sizeof buf) == 0 &&
        !strcmp(buf, "docker-default"));
  CHECK(hf_apparmor_label(NULL, buf, sizeof buf) == -1);
  CHECK(hf_apparmor_label("\n", buf, sizeof buf) == -1);
  CHECK(hf_apparmor_label("sandboxd (unconfined)\n", buf, 4) == -1);

  /* Seccomp and capabilities from /proc/self/status. */
  CHECK(hf_seccomp_mode(DOCKER_STATUS) == 2);
  CHECK(hf_seccomp_mode(HOST_STATUS) == 0);
  CHECK(hf_seccomp_mode("Name:\tx\n") == -1);
  CHECK(hf_seccomp_mode(NULL) == -1);
  CHECK(hf_cap_effective(DOCKER_STATUS, CAP_SETUID) && hf_cap_effective(DOCKER_STATUS, CAP_SETGID));
  CHECK(!hf_cap_effective(DOCKER_STATUS, CAP_SYS_ADMIN) && !hf_cap_effective(DOCKER_STATUS, CAP_SYS_PTRACE));
  CHECK(hf_cap_effective(HOST_STATUS, CAP_SYS_ADMIN) && hf_cap_effective(HOST_STATUS, 40));
  CHECK(!hf_cap_effective(HOST_STATUS, 64) && !hf_cap_effective(NULL, CAP_SETUID));

  /* Containers: marker files first, then $container, cgroup paths, the root mount, PID 1. */
  CHECK(!strcmp(hf_container(true, false, NULL, NULL, NULL, NULL, &why), "docker") &&
        !strcmp(why, "/.dockerenv"));
  CHECK(!strcmp(hf_container(false, true, "podman", NULL, NULL, NULL, &why), "podman") &&
        !strcmp(why, "/run/.containerenv"));
  CHECK(!strcmp(hf_container(false, false, "systemd-nspawn", NULL, NULL, NULL, &why), "systemd-nspawn"));
  CHECK(!strcmp(hf_container(false, false, NULL, "12:pids:/docker/0123abcd\n0::/\n", NULL, NULL, &why),
                "docker") &&
        !strcmp(why, "/proc/self/cgroup"));
  CHECK(!strcmp(hf_container(false, false, NULL, "0::/system.slice/docker-0123.scope\n", NULL, NULL, &why),
                "docker"));
  CHECK(!strcmp(hf_container(false, false, NULL, "0::/kubepods/besteffort/pod1/abc\n", NULL, NULL, &why),
                "kubernetes"));
  CHECK(!strcmp(hf_container(false, false, NULL, "0::/\n", DOCKER_MOUNTINFO, NULL, &why), "docker") &&
        !strcmp(why, "the root mount"));
  CHECK(!strcmp(hf_container(false, false, "", "0::/\n", PODMAN_MOUNTINFO, NULL, &why), "podman"));
  CHECK(!strcmp(hf_container(false, false, NULL, "0::/\n", HOST_MOUNTINFO, "tini\n", &why), "container") &&
        !strcmp(why, "PID 1's name"));
  /* A host: systemd as PID 1, cgroups of its own, an ext4 root. */
  CHECK(hf_container(false, false, NULL, "0::/user.slice/user-1000.slice/session-2.scope\n", HOST_MOUNTINFO,
                     "systemd\n", &why) == NULL);
  CHECK(hf_container(false, false, NULL, NULL, NULL, "tinier\n", &why) == NULL);

  /* Masked /proc: the first mount under it; binfmt_misc and /processes do not count. */
  CHECK(hf_proc_overmount(DOCKER_MOUNTINFO, buf, sizeof buf) == 1 && !strcmp(buf, "/proc/bus"));
  CHECK(hf_proc_overmount(DOCKER_MOUNTINFO_UNMASKED, buf, sizeof buf) == 0);
  CHECK(hf_proc_overmount(HOST_MOUNTINFO, buf, sizeof buf) == 0);
  CHECK(hf_proc_overmount(NULL, buf, sizeof buf) == 0);
  CHECK(hf_proc_overmount("583 627 0:57 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw\n", buf, sizeof buf) ==
            1 &&
        !strcmp(buf, "/proc/kcore"));

  return check_summary("test_hostfacts");
}
