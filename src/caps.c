#include "caps.h"

#include <cap-ng.h>
#include <errno.h>
#include <sys/prctl.h>

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

void caps_prepare(void)
{
  capng_clear(CAPNG_SELECT_BOTH);
}
