/* SPDX-License-Identifier: Apache-2.0 */
/* The names a policy may use for numbers: the constants of syscall conditions and the errno
 * values of errno actions (sandboxd.policy(5)), the levels of approve_host_calls, and the hash the
 * parser indexes rules by. */
#include "policy/policy.h"

#include <errno.h>
#include <linux/sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "base/util.h"

/* ------------------------------------------------------------------ named constants */

struct named_value {
  const char *name;
  uint64_t value;
};

static const struct named_value constants[] = {
    {"AF_UNIX", AF_UNIX},
    {"AF_INET", AF_INET},
    {"AF_INET6", AF_INET6},
    {"AF_NETLINK", AF_NETLINK},
    {"AF_PACKET", AF_PACKET},
    {"CLONE_NEWNS", CLONE_NEWNS},
    {"CLONE_NEWUTS", CLONE_NEWUTS},
    {"CLONE_NEWIPC", CLONE_NEWIPC},
    {"CLONE_NEWUSER", CLONE_NEWUSER},
    {"CLONE_NEWPID", CLONE_NEWPID},
    {"CLONE_NEWNET", CLONE_NEWNET},
    {"CLONE_NEWCGROUP", CLONE_NEWCGROUP},
    {"CLONE_NEWTIME", 0x00000080},
    {"TIOCSTI", TIOCSTI},
    {"TIOCLINUX", TIOCLINUX},
    /* Terminal ioctls that change more than a terminal's modes (policy/syscalls.inc, group ioctl). */
    {"TIOCSETD", TIOCSETD},
    {"TIOCSCTTY", TIOCSCTTY},
    {"TIOCSPGRP", TIOCSPGRP},
    {"TIOCSWINSZ", TIOCSWINSZ},
    {"TIOCEXCL", TIOCEXCL},
    {"TIOCNXCL", TIOCNXCL},
    {"TIOCCONS", TIOCCONS},
    {"TIOCVHANGUP", TIOCVHANGUP},
    {"TIOCSIG", TIOCSIG},
    {"TIOCPKT", TIOCPKT},
    {"TIOCSPTLCK", TIOCSPTLCK},
    {"TIOCGPTPEER", TIOCGPTPEER},
    {"TIOCSLCKTRMIOS", TIOCSLCKTRMIOS},
    {"TIOCMSET", TIOCMSET},
    {"TIOCMBIS", TIOCMBIS},
    {"TIOCMBIC", TIOCMBIC},
    {"TIOCSBRK", TIOCSBRK},
    {"TIOCCBRK", TIOCCBRK},
    {"TIOCSSOFTCAR", TIOCSSOFTCAR},
    {"TIOCSSERIAL", TIOCSSERIAL},
    {"TIOCSERCONFIG", TIOCSERCONFIG},
    {"TIOCSRS485", TIOCSRS485},
    {"TIOCSISO7816",
     0xc0285443}, /* _IOWR('T', 0x43, struct serial_iso7816): its struct is in linux/serial.h */
};

static const struct named_value errnos[] = {
    {"EPERM", EPERM},   {"ENOSYS", ENOSYS},   {"EACCES", EACCES}, {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EINVAL", EINVAL}, {"ENOTSUP", ENOTSUP},
};

uint32_t policy_name_hash(const char *syscall)
{
  uint32_t h = 2166136261u;
  for (const char *c = syscall; *c; c++)
    h = (h ^ (unsigned char) *c) * 16777619u;
  return h;
}

int policy_constant(const char *name, uint64_t *ret)
{
  for (size_t i = 0; i < ARRAY_SIZE(constants); i++)
    if (strcmp(constants[i].name, name) == 0) {
      *ret = constants[i].value;
      return 0;
    }
  return -1;
}

int policy_errno_by_name(const char *name)
{
  for (size_t i = 0; i < ARRAY_SIZE(errnos); i++)
    if (strcmp(errnos[i].name, name) == 0)
      return (int) errnos[i].value;
  return -1;
}

const char *policy_errno_name(int e)
{
  for (size_t i = 0; i < ARRAY_SIZE(errnos); i++)
    if ((int) errnos[i].value == e)
      return errnos[i].name;
  return "?";
}

/* ------------------------------------------------------------------ approve_host_calls */

static const char *const approve_names[] = {"none", "writes", "all"};

int policy_approve_parse(const char *s, enum sbx_approve *ret)
{
  for (size_t i = 0; i < ARRAY_SIZE(approve_names); i++)
    if (strcmp(s, approve_names[i]) == 0) {
      *ret = (enum sbx_approve) i;
      return 0;
    }
  return -1;
}

const char *policy_approve_name(enum sbx_approve a)
{
  return (size_t) a < ARRAY_SIZE(approve_names) ? approve_names[a] : "?";
}
