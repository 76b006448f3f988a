/* The fork template's C pid 1 (inside/zygote.c) and the init it execs (inside/callinit.c): built
 * freestanding for x86_64 (Makefile), assembled into this object and handed to each template as
 * sealed memfds with its setup, which it loads (dlopen) and execs from. A template without them
 * keeps the Python pid 1 (template.py _call and _pid1): same sandbox, more CPU per call.
 *
 * SANDBOXD_FORK_ZYGOTE=0 leaves them out (the tests run the Python pid 1 that way too). */
#include "fork_zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "seccomp.h"
#include "util.h"

#if defined(__x86_64__) && defined(ZYGOTE_BUILD)
__asm__(".section .rodata\n"
        ".balign 16\n"
        "fork_zygote_so:\n"
        ".incbin \"" ZYGOTE_BUILD "/zygote.so\"\n"
        "fork_zygote_so_end:\n"
        ".balign 16\n"
        "fork_callinit:\n"
        ".incbin \"" ZYGOTE_BUILD "/callinit\"\n"
        "fork_callinit_end:\n"
        ".previous\n");
extern const char fork_zygote_so[], fork_zygote_so_end[], fork_callinit[], fork_callinit_end[];
#define HAVE_ZYGOTE 1
#else
#define HAVE_ZYGOTE 0
#endif

#if HAVE_ZYGOTE
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* A memfd holding data, sealed: nothing can change it once the template has it. Executable
 * (MFD_EXEC, where vm.memfd_noexec would seal it against exec otherwise; Linux 6.3); -1 with
 * err when memfds cannot be made so here (vm.memfd_noexec=2), which leaves the Python pid 1. */
static int sealed_memfd(const char *name, const char *data, size_t len, sbx_error_t *err)
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
#endif

int fork_zygote_fds(const struct sbx_policy *p, int ret[2], const char **why, sbx_error_t *err)
{
  ret[0] = ret[1] = -1;
  *why = NULL;
  const char *env = getenv("SANDBOXD_FORK_ZYGOTE");
  if (env && strcmp(env, "0") == 0) {
    *why = "SANDBOXD_FORK_ZYGOTE=0";
    return 0;
  }
#if HAVE_ZYGOTE
  /* pid 1 leaves the template's memory by an exec under the call's filter (zygote.c). */
  if (!seccomp_policy_allows(p, "execveat") && !seccomp_policy_allows(p, "execve")) {
    *why = "the policy allows neither execve nor execveat, by which it leaves the template's memory";
    return 0;
  }
  static char said[300];
  if ((ret[0] = sealed_memfd("sandboxd-zygote", fork_zygote_so,
                             (size_t) (fork_zygote_so_end - fork_zygote_so), err)) < 0 ||
      (ret[1] = sealed_memfd("sandboxd-init", fork_callinit, (size_t) (fork_callinit_end - fork_callinit),
                             err)) < 0) {
    if (ret[0] >= 0)
      close(ret[0]);
    ret[0] = -1;
    bufprintf_cut(said, sizeof said, "%s", err->msg);
    *why = said;
  }
  return 0;
#else
  (void) p, (void) err;
  *why = "not built for this architecture";
  return 0;
#endif
}
