/* SPDX-License-Identifier: Apache-2.0 */
/* The code's first exe: a tiny static program (inside/execshim.c) that pid 1's child execs from a
 * sealed memfd and that execs the code, so that no process in a sandbox ever has sandboxd's
 * binary as its exe when the code's path, #! line or ELF interpreter is resolved (a hostile
 * image's link to /proc/self/exe, runc's CVE-2019-5736). */
#ifndef SBX_EXEC_SHIM_H
#define SBX_EXEC_SHIM_H

#include <stddef.h>

#include "base/error.h"

/* A memfd holding len bytes of data, sealed against every change (F_SEAL_WRITE, SHRINK, GROW,
 * SEAL), close-on-exec, executable where vm.memfd_noexec would otherwise refuse it (MFD_EXEC,
 * Linux 6.3). name shows in /proc/PID/exe. -1 with err. */
int memfd_sealed(const char *name, const char *data, size_t len, sbx_error_t *err);

/* The exec helper as such a memfd. -1 with err when it cannot be made, and with errno ENOSYS in
 * err when this build has none (it is x86_64 only). */
int exec_shim_fd(sbx_error_t *err);

#endif
