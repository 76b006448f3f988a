/* SPDX-License-Identifier: Apache-2.0 */
/* Host files sandboxd writes or trusts (the report, the audit log, the seccomp cache, and any
 * later output file), opened so that nothing a sandbox planted can steer them.
 *
 * A sandbox can write the trees bound into it with --bind-rw; unprivileged it is the invoking
 * user's own uid there, so file ownership alone cannot tell its work from the user's. So:
 *  - a path's directory is resolved one component at a time, and a symlink on the way is
 *    followed only if root or the effective uid owns it AND it does not lie inside a tree the
 *    sandbox can write (its containing directory or an ancestor is a --bind-rw source: compared
 *    by device and inode, so host bind mounts that alias the tree are caught too);
 *  - the directory is opened once, before the sandbox starts, and everything after goes through
 *    that fd, so what the code does during the run cannot change where the file lands;
 *  - the last component is never followed (O_NOFOLLOW); a replaced file is written to a fresh
 *    temporary (O_CREAT|O_EXCL) in the same directory and renamed over the name, which replaces a
 *    planted symlink or hardlink instead of writing through it; an appended file must be a
 *    regular file of ours with one link (or a FIFO or device of ours or root's, for collectors).
 *
 * Functions return 0, HOSTFILE_UNSAFE when the path was refused by these rules (a usage error:
 * the caller refuses to run), or -1 for any other failure (errno in err). */
#ifndef SBX_HOSTFILE_H
#define SBX_HOSTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/error.h"

#define HOSTFILE_UNSAFE (-2)

/* A directory tree the sandbox can write: a --bind-rw source, by device and inode. */
struct hostfile_tree {
  dev_t dev;
  ino_t ino;
};

struct hostfile_guard {
  const struct hostfile_tree *trees;
  size_t n_trees;
};

enum {
  HOSTFILE_MKDIR = 1 << 0,   /* create missing directories (0755, the last one 0700) */
  HOSTFILE_PRIVATE = 1 << 1, /* with MKDIR: every created directory 0700 */
  HOSTFILE_ANY = 1 << 2,     /* hostfile_open_dir: the last component may be any file (a bind source) */
};

/* Record path as a tree the sandbox can write (ignored unless it is a directory). */
void hostfile_guard_add(struct hostfile_tree *trees, size_t *n, const char *path);

/* Whether dirfd is one of guard's trees or lies below one (walked up by `..`, compared by device
 * and inode); guard may be NULL. */
int hostfile_in_tree(int dirfd, const struct hostfile_guard *guard, bool *ret, sbx_error_t *err);

/* Open the directory path names, O_PATH|O_DIRECTORY (with HOSTFILE_ANY: whatever it names,
 * O_PATH; a symlink at the end is judged and followed as the ones before it). guard may be NULL. */
int hostfile_open_dir(const char *path, const struct hostfile_guard *guard, unsigned flags, int *ret_dirfd,
                      sbx_error_t *err);
/* Open the directory holding path's last component; *ret_name points into path. The last
 * component must be a plain name (not empty, `.` or `..`). */
int hostfile_open_parent(const char *path, const struct hostfile_guard *guard, unsigned flags, int *ret_dirfd,
                         const char **ret_name, sbx_error_t *err);

/* Open path, absolute, without `.` or `..` and canonical (realpath's), O_PATH, following no
 * symlink at all: one on the way fails with ELOOP. What was resolved once with the rules above is
 * opened again this way, and compared by device and inode. */
int hostfile_open_nofollow(const char *path, int *ret_fd, sbx_error_t *err);

/* Open name in dirfd for appending (created 0600 if missing), O_NONBLOCK. display names it in
 * messages. A regular file must belong to the effective uid, have one link and not be writable
 * by group or others; a FIFO or character device must belong to the effective uid or root. */
int hostfile_open_append(int dirfd, const char *name, const char *display, int *ret_fd, sbx_error_t *err);
/* Open name in dirfd to read a file we trust: a regular file of the effective uid, not writable
 * by group or others; *ret_st is its fstat. */
int hostfile_open_trusted(int dirfd, const char *name, const char *display, int *ret_fd, struct stat *ret_st,
                          sbx_error_t *err);
/* Replace name in dirfd with data, atomically: readers see the old file or the whole new one. */
int hostfile_replace(int dirfd, const char *name, const char *display, const void *data, size_t len,
                     mode_t mode, sbx_error_t *err);

#endif
