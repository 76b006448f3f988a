#include "caps.h"

#include <cap-ng.h>
#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int caps_drop_all(sbx_error_t *err)
{
  /* Ambient first: it may only hold what is permitted and inheritable, and capng may not
   * clear it on every version. */
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return sbx_error_errno(err, "clear ambient capabilities");
  capng_clear(CAPNG_SELECT_BOTH);
  if (capng_apply(CAPNG_SELECT_BOTH) != 0)
    return sbx_error_set(err, EPERM, "drop capabilities and bounding set");
  if (capng_have_capabilities(CAPNG_SELECT_BOTH) != CAPNG_NONE)
    return sbx_error_set(err, EPERM, "drop capabilities: some remain");
  return 0;
}

/* By capget itself: libcap-ng's state names the process that read it, which a child that later
 * drops its capabilities through it must not inherit. */
bool caps_effective(int cap)
{
  struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
  if (cap < 0 || cap >= 32 * _LINUX_CAPABILITY_U32S_3 || syscall(SYS_capget, &h, d) < 0)
    return false;
  return d[cap / 32].effective & (1U << (cap % 32));
}
