/* Unit tests for error messages (src/base/error.c): the hint, what to do, follows the errno text. */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "check.h"

int main(void)
{
  sbx_error_t err = {0};
  sbx_error_set(&err, ENOENT, "no rootfs found");
  CHECK(sbx_error_hint(&err, "run `%s` (see sandboxd doctor)", "make rootfs") == -1);
  CHECK(strcmp(err.msg,
               "no rootfs found: No such file or directory; run `make rootfs` (see sandboxd doctor)") == 0);
  CHECK(err.errnum == ENOENT && err.status == SBX_EXIT_SETUP);

  /* Context added later goes in front; the hint stays last. */
  sbx_error_set(&err, EPERM, "write `uid_map`");
  sbx_error_prefix(&err, "write uid/gid maps");
  sbx_error_hint(&err, "see sandboxd doctor");
  CHECK(strcmp(err.msg,
               "write uid/gid maps: write `uid_map`: Operation not permitted; see sandboxd doctor") == 0);

  /* A message that fills the buffer is cut, visibly, and the hint survives whole. */
  char lng[sizeof err.msg + 10];
  memset(lng, 'm', sizeof lng - 1);
  lng[sizeof lng - 1] = '\0';
  sbx_error_set(&err, EIO, "%s", lng);
  sbx_error_hint(&err, "see sandboxd doctor");
  size_t n = strlen(err.msg);
  CHECK(n == sizeof err.msg - 1);
  CHECK(n > 24 && strcmp(err.msg + n - 24, "...; see sandboxd doctor") == 0);
  /* A hint longer than half the buffer is cut too: the message keeps its start. */
  char hint[sizeof err.msg];
  memset(hint, 'h', sizeof hint - 1);
  hint[sizeof hint - 1] = '\0';
  sbx_error_set(&err, 0, "what failed");
  sbx_error_hint(&err, "%s", hint);
  CHECK(strncmp(err.msg, "what failed; hhh", 16) == 0 && strlen(err.msg) < sizeof err.msg);
  CHECK(strcmp(err.msg + strlen(err.msg) - 4, "h...") == 0);
  /* No error struct: nothing to do, still -1. */
  CHECK(sbx_error_hint(NULL, "x") == -1);
  return check_summary("test_error");
}
