/* SPDX-License-Identifier: Apache-2.0 */
/* The code's first exe (exec_shim.h): inside/execshim.c, built freestanding for x86_64 (Makefile)
 * and assembled into this object, handed to pid 1 as a sealed memfd. */
#include "sandbox/exec_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(EXEC_SHIM_BUILD)
__asm__(".section .rodata\n"
        ".balign 16\n"
        "exec_shim_elf:\n"
        ".incbin \"" EXEC_SHIM_BUILD "/execshim\"\n"
        "exec_shim_elf_end:\n"
        ".previous\n");
extern const char exec_shim_elf[], exec_shim_elf_end[];
#define HAVE_EXEC_SHIM 1
#else
#define HAVE_EXEC_SHIM 0
#endif

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

int memfd_sealed(const char *name, const char *data, size_t len, sbx_error_t *err)
{
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) /* before Linux 6.3 */
    fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return sbx_error_errno(err, "memfd_create");
  for (size_t off = 0; off < len;) {
    ssize_t n = write(fd, data + off, len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      sbx_error_errno(err, "write the memfd");
      close(fd);
      return -1;
    }
    off += (size_t) n;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
    sbx_error_errno(err, "seal the memfd");
    close(fd);
    return -1;
  }
  return fd;
}

int exec_shim_fd(sbx_error_t *err)
{
#if HAVE_EXEC_SHIM
  return memfd_sealed("sandboxd-exec", exec_shim_elf, (size_t) (exec_shim_elf_end - exec_shim_elf), err);
#else
  return sbx_error_set(err, ENOSYS, "no exec helper in this build (x86_64 only)");
#endif
}
