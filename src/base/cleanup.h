/* SPDX-License-Identifier: Apache-2.0 */
/* Scope-bound ownership of fds and heap pointers (the systemd/crun idiom). */
#ifndef SBX_CLEANUP_H
#define SBX_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static inline void sbx_freep(void *p)
{
  free(*(void **) p);
}
static inline void sbx_closep(int *fd)
{
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
  }
}

#define _cleanup_free_ __attribute__((cleanup(sbx_freep)))
#define _cleanup_close_ __attribute__((cleanup(sbx_closep)))

/* Hand ownership out of a cleanup-scoped variable. */
#define TAKE_FD(fd)                                                                                          \
  ({                                                                                                         \
    int _fd = (fd);                                                                                          \
    (fd) = -1;                                                                                               \
    _fd;                                                                                                     \
  })
#define TAKE_PTR(p)                                                                                          \
  ({                                                                                                         \
    __typeof__(p) _p = (p);                                                                                  \
    (p) = NULL;                                                                                              \
    _p;                                                                                                      \
  })

#endif
