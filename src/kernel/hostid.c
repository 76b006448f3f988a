/* SPDX-License-Identifier: Apache-2.0 */
/* Host id allocation: see hostid.h. Cheap on the setup path: one openat and, while ids are free,
 * one fcntl (the first try, at a random place in the range, almost always succeeds). */
#include "kernel/hostid.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"

static int lock_dir_fd = -1;

/* The directory, checked once per process: ours alone (root's, not writable by anyone else), so
 * no other user can plant the lock file or take ids from under us. */
static int open_lock_dir(sbx_error_t *err)
{
  if (lock_dir_fd >= 0)
    return lock_dir_fd;
  if (mkdir(HOSTID_LOCK_DIR, 0700) < 0 && errno != EEXIST)
    return sbx_error_errno(err, "host ids: mkdir `%s`", HOSTID_LOCK_DIR);
  _cleanup_close_ int fd = open(HOSTID_LOCK_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return sbx_error_errno(err, "host ids: open `%s`", HOSTID_LOCK_DIR);
  if (st.st_uid != 0 || (st.st_mode & 022))
    return sbx_error_set(err, EPERM,
                         "host ids: `%s` must be a directory owned by root and writable by no one else",
                         HOSTID_LOCK_DIR);
  lock_dir_fd = TAKE_FD(fd);
  return lock_dir_fd;
}

/* Each sandbox its own open file description: OFD locks of one description never conflict with
 * each other, so a shared one would hand the same id to two sandboxes of this process. */
static int open_lock_file(sbx_error_t *err)
{
  int dfd = open_lock_dir(err);
  if (dfd < 0)
    return -1;
  int fd = openat(dfd, HOSTID_LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {
    /* The directory was removed under a long-running sandboxd (`sandboxd mcp`): make it again. */
    close(lock_dir_fd);
    lock_dir_fd = -1;
    if ((dfd = open_lock_dir(err)) < 0)
      return -1;
    fd = openat(dfd, HOSTID_LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    return sbx_error_errno(err, "host ids: open `%s/%s`", HOSTID_LOCK_DIR, HOSTID_LOCK_NAME);
  return fd;
}

int hostid_acquire(unsigned start, unsigned count, unsigned *ret_id, int *ret_lock_fd, sbx_error_t *err)
{
  _cleanup_close_ int fd = open_lock_file(err);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) < 0)
    return sbx_error_errno(err, "host ids: stat `%s/%s`", HOSTID_LOCK_DIR, HOSTID_LOCK_NAME);
  if (!S_ISREG(st.st_mode) || st.st_uid != 0)
    return sbx_error_set(err, EPERM, "host ids: `%s/%s` must be a regular file owned by root",
                         HOSTID_LOCK_DIR, HOSTID_LOCK_NAME);
  /* A random first try keeps concurrent sandboxes from probing the same ids in turn, and spreads
   * reuse, so an id comes back only long after the kernel let go of its last counts. */
  unsigned r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
    r = (unsigned) getpid() * 2654435761u;
  for (unsigned i = 0; i < count; i++) {
    unsigned id = start + (unsigned) (((unsigned long long) r + i) % count);
    /* The byte at offset id: the same id in two policies' ranges is the same lock. */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t) id, .l_len = 1};
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
      *ret_id = id;
      *ret_lock_fd = TAKE_FD(fd);
      return 0;
    }
    if (errno != EAGAIN && errno != EACCES)
      return sbx_error_errno(err, "host ids: lock id %u", id);
  }
  return sbx_error_set(err, EUSERS,
                       "host ids: all %u ids of host_id_range %u %u are in use by running sandboxes", count,
                       start, count);
}
