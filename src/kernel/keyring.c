/* SPDX-License-Identifier: Apache-2.0 */
#include "kernel/keyring.h"

#include <errno.h>
#include <linux/keyctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Permission bits of the possessor (keyutils.h, not in the kernel's uapi headers). */
#define KEY_POS_VIEW 0x01000000u
#define KEY_POS_READ 0x02000000u
#define KEY_POS_SEARCH 0x08000000u

static long find(const char *desc)
{
  /* The user keyring named by its special id is possessed, so a possessor-only key is found. */
  return syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", desc, 0);
}

int keyring_secret(const char *desc, void *out, size_t len, sbx_error_t *err)
{
  /* Two rounds: a concurrent sandboxd may create the key between our search and add_key. */
  for (int round = 0; round < 2; round++) {
    long id = find(desc);
    if (id >= 0) {
      long n = syscall(SYS_keyctl, KEYCTL_READ, id, out, len);
      if (n == (long) len)
        return 0;
      if (n < 0)
        return sbx_error_errno(err, "keyring: read key `%s`", desc);
      return sbx_error_set(err, EINVAL, "keyring: key `%s` holds %ld bytes, not %zu", desc, n, len);
    }
    if (errno != ENOKEY)
      return sbx_error_errno(err, "keyring: search for `%s`", desc);
    if (getrandom(out, len, 0) != (ssize_t) len)
      return sbx_error_errno(err, "keyring: getrandom");
    id = syscall(SYS_add_key, "user", desc, out, len, KEY_SPEC_USER_KEYRING);
    if (id < 0 && errno == EACCES) /* another sandboxd's key, already read-only: use it */
      continue;
    if (id < 0)
      return sbx_error_errno(err, "keyring: add key `%s`", desc);
    /* add_key grants the user too; narrow to possessors, and to reading (no update, no link). */
    if (syscall(SYS_keyctl, KEYCTL_SETPERM, id, KEY_POS_VIEW | KEY_POS_READ | KEY_POS_SEARCH) < 0) {
      int e = errno;
      syscall(SYS_keyctl, KEYCTL_INVALIDATE, id);
      return sbx_error_set(err, e, "keyring: restrict key `%s`", desc);
    }
    return 0;
  }
  return sbx_error_set(err, EAGAIN, "keyring: key `%s` keeps changing", desc);
}

void keyring_forget(const char *desc)
{
  long id = find(desc);
  if (id >= 0)
    syscall(SYS_keyctl, KEYCTL_INVALIDATE, id);
}

int keyring_join_anonymous(sbx_error_t *err)
{
  if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0)
    return sbx_error_errno(err, "join a session keyring of the sandbox's own");
  return 0;
}
