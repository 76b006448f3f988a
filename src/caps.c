/* Capabilities, by the kernel's own calls (prctl, capset, capget). Not libcap-ng, as before: its
 * constructor read /proc/sys/kernel/cap_last_cap and probed the process in every sandboxd, and
 * capng_apply read /proc/self/status three times per sandbox, for the same system calls as here. */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* More than any kernel defines (40 in 6.x); the kernel says EINVAL past its last one. */
#define CAP_LIMIT (32 * _LINUX_CAPABILITY_U32S_3)

static int capget_self(struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3])
{
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  return (int) syscall(SYS_capget, &h, d);
}

int caps_drop_all(sbx_error_t *err)
{
  /* Ambient first: it may only hold what is permitted and inheritable. EINVAL: a kernel before
   * 4.3, which has no ambient set. */
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return sbx_error_errno(err, "clear ambient capabilities");
  /* The bounding set, while CAP_SETPCAP is still held: every capability the kernel knows, up to
   * the first it calls invalid (cap 0 always exists, so an EINVAL there is a real error). */
  int cap = 0;
  for (; cap < CAP_LIMIT; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
      continue;
    if (errno == EINVAL && cap > 0)
      break;
    return sbx_error_errno(err, "drop capability %d from the bounding set", cap);
  }
  if (cap == CAP_LIMIT)
    return sbx_error_set(err, EPERM, "drop the bounding set: the kernel knows more than %d capabilities",
                         CAP_LIMIT);
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {{0}};
  if (syscall(SYS_capset, &h, d) < 0)
    return sbx_error_errno(err, "drop capabilities");
  /* What the kernel now holds for this process: nothing, in every set capget reports (each
   * PR_CAPBSET_DROP above succeeded only once its capability was gone). */
  if (capget_self(d) < 0)
    return sbx_error_errno(err, "drop capabilities: read them back");
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
    if (d[i].effective || d[i].permitted || d[i].inheritable)
      return sbx_error_set(err, EPERM, "drop capabilities: some remain");
  return 0;
}

/* By capget itself, for this process as it is now. */
bool caps_effective(int cap)
{
  struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
  if (cap < 0 || cap >= CAP_LIMIT || capget_self(d) < 0)
    return false;
  return d[cap / 32].effective & (1U << (cap % 32));
}
