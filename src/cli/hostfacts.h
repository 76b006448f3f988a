/* SPDX-License-Identifier: Apache-2.0 */
/* What `sandboxd doctor` reads about the host, as pure functions over the text of the /proc and
 * /sys files it reads (doctor.c reads them), so each is unit-tested with what Ubuntu 24.04 and
 * Docker show (tests/unit/test_hostfacts.c). A NULL text is a file that could not be read. */
#ifndef SBX_HOSTFACTS_H
#define SBX_HOSTFACTS_H

#include <stdbool.h>
#include <stddef.h>

/* A sysctl holding one number (kernel.apparmor_restrict_unprivileged_userns,
 * kernel.unprivileged_userns_clone, user.max_user_namespaces); -1 if none. */
long hf_number(const char *text);
/* /sys/module/apparmor/parameters/enabled: "Y". */
bool hf_apparmor_enabled(const char *text);
/* /sys/kernel/security/apparmor/profiles ("NAME (MODE)" lines): whether profile name is loaded. */
bool hf_apparmor_loaded(const char *profiles, const char *name);
/* /proc/self/attr/apparmor/current ("sandboxd (unconfined)", "unconfined"): the profile this
 * process runs under, into buf; -1 if there is none or it does not fit. */
int hf_apparmor_label(const char *text, char *buf, size_t len);

/* /proc/self/status: Seccomp (0 none, 1 strict, 2 filter), or -1. */
int hf_seccomp_mode(const char *status);
/* /proc/self/status: whether CapEff holds cap (CAP_*). */
bool hf_cap_effective(const char *status, int cap);

/* The container we run in, or NULL: "docker" or "podman" by their marker files (/.dockerenv,
 * /run/.containerenv), else $container (podman, systemd-nspawn, lxc set it), else hints in
 * /proc/self/cgroup (docker, libpod, kubepods, lxc paths), the root mount's overlay upperdir
 * (/var/lib/docker, /var/lib/containers) and PID 1's name (docker-init, tini, dumb-init,
 * catatonit). *ret_why: what gave it away. */
const char *hf_container(bool dockerenv, bool containerenv, const char *container_env, const char *cgroup,
                         const char *mountinfo, const char *pid1_comm, const char **ret_why);

/* /proc/self/mountinfo: the first mount on a path under /proc that hides part of it (a
 * container's masked paths and read-only /proc/sys), into buf: while one exists, the kernel
 * refuses a new proc in a user namespace (mount_too_revealing). Empty directories the kernel
 * made for mounts (binfmt_misc) do not count. Returns 1 with one, else 0. */
int hf_proc_overmount(const char *mountinfo, char *buf, size_t len);

#endif
