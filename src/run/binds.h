/* SPDX-License-Identifier: Apache-2.0 */
/* --bind SRC:DST and --bind-rw SRC:DST: parsed, checked and resolved in one place for `sandboxd
 * exec` and `sandboxd mcp`, so both accept, refuse and say exactly the same. */
#ifndef SBX_BINDS_H
#define SBX_BINDS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "sandbox/sandbox.h"

#define BIND_OPTS_MAX 32

#include "base/hostfile.h"

/* The binds given on the command line, in order; src and dst are malloc'd, fd is held (-1 until
 * bind_opts_resolve). */
struct bind_opts {
  struct sbx_bind binds[BIND_OPTS_MAX];
  size_t n;
  /* From bind_opts_resolve: the --bind-rw sources that are directories (bind_opts_guard). */
  struct hostfile_tree rw_trees[BIND_OPTS_MAX];
  size_t n_rw_trees;
};

/* Absolute, not "/", and no empty, "." or ".." components. */
bool path_is_clean_abs(const char *p);
/* Add one option's argument (SRC:DST, split at the last colon). Pure: touches no files. */
int bind_opts_add(struct bind_opts *b, const char *arg, bool rw, sbx_error_t *err);
/* Why a bind source (its canonical path and the f_type of its file system) must not be bound, or
 * NULL: /proc, /sys and /dev and what is below them, and any kernel pseudo-filesystem wherever it
 * is mounted (the host's processes, devices, kernel and cgroup state, not files). Pure. */
const char *bind_source_kernel_fs(const char *real, unsigned long f_type);
/* The same for a source on the host: fstatfs of fd when fd >= 0, else statfs of real. NULL when it
 * may be bound; a reason otherwise (also when its file system cannot be examined). */
const char *bind_source_refusal(const char *real, int fd);
/* Open each source once (bind_source_open) and replace it by its canonical path; a source must
 * exist, must not be on a file system bind_source_refusal refuses, and must not lie inside another
 * bind's --bind-rw tree (bind_source_outside). */
int bind_opts_resolve(struct bind_opts *b, sbx_error_t *err);
/* The --bind-rw trees of resolved binds, for bind_source_open and bind_source_outside. */
struct hostfile_guard bind_opts_guard(const struct bind_opts *b);

/* A host path a sandbox will bind, resolved and opened once, now: its symlinks are followed as
 * hostfile.h's rules say (root's or yours, and none inside a tree of rw), and the canonical path
 * that results must lead to the same inode without any symlink, as each sandbox opens it again
 * (sandbox.c). *ret_real (malloc'd) and *ret_fd (O_PATH) on success; refusals are
 * HOSTFILE_UNSAFE. Messages start "WHAT `path`". rw may be NULL. */
int bind_source_open(const char *what, const char *path, const struct hostfile_guard *rw, char **ret_real,
                     int *ret_fd, sbx_error_t *err);
/* Refuse a source (canonical, from bind_source_open) whose directory is, or lies inside, one of
 * rw's trees: sandboxed code could replace it between sandboxes. HOSTFILE_UNSAFE then. */
int bind_source_outside(const char *what, const char *real, const struct hostfile_guard *rw,
                        sbx_error_t *err);
/* The trees the sandboxes can write (the --bind-rw sources): host files sandboxd writes must not
 * be reached through links planted there (hostfile.h). trees has room for BIND_OPTS_MAX. */
void bind_opts_writable_trees(const struct bind_opts *b, struct hostfile_tree *trees, size_t *n_trees);
void bind_opts_free(struct bind_opts *b);

#endif
