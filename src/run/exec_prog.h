/* SPDX-License-Identifier: Apache-2.0 */
/* What `sandboxd exec` runs, found inside the rootfs, never on the host: a program along the
 * image's PATH, and a script's #! line (a path is the kernel's, inside the sandbox). A program that is not
 * there is an error with status SBX_EXIT_NOT_FOUND (127), one that cannot be run SBX_EXIT_CANNOT_EXEC (126),
 * as shells and podman say. */
#ifndef SBX_EXEC_PROG_H
#define SBX_EXEC_PROG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* As the kernel reads a #! line (binfmt_script): at most this many bytes, newline included. */
#define SHEBANG_MAX 256

struct shebang {
  char interp[SHEBANG_MAX];
  char arg[SHEBANG_MAX]; /* the rest of the line, one argument, trimmed; "" if none */
};

/* The #! line at the start of buf (len bytes, the file's first SHEBANG_MAX or fewer): 1 and
 * *ret filled, 0 if buf does not start with #!, -1 with err (status 126) if the line is longer
 * than SHEBANG_MAX or names no interpreter. Pure. */
int shebang_parse(const char *buf, size_t len, struct shebang *ret, sbx_error_t *err);

/* name (no slash) along path (colon-separated, absolute directories only) in the tree at
 * rootfs, symlinks resolved inside it: *ret_path is "DIR/name" (malloc'd) for the first
 * executable regular file. Else -1: status 127 if none exists, 126 if one exists but is not an
 * executable file. */
int prog_find(const char *rootfs, const char *path, const char *name, char **ret_path, sbx_error_t *err);

/* Is sub/name (sub relative, "" for the top) an executable regular file in the bind source src,
 * symlinks resolved inside src as if it were "/", never on the host? A link that leaves src finds
 * nothing, so what the host has at its target is never told. 1 yes, 0 no (nothing there, not
 * executable, or src cannot be opened as a directory). */
int prog_in_bind(const char *src, const char *sub, const char *name);

#endif
