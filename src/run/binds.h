/* --bind SRC:DST and --bind-rw SRC:DST: parsed, checked and resolved in one place for `sandboxd
 * exec` and `sandboxd mcp`, so both accept, refuse and say exactly the same. */
#ifndef SBX_BINDS_H
#define SBX_BINDS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "sandbox/sandbox.h"

#define BIND_OPTS_MAX 32

struct hostfile_tree;

/* The binds given on the command line, in order; src and dst are malloc'd. */
struct bind_opts {
  struct sbx_bind binds[BIND_OPTS_MAX];
  size_t n;
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
/* Replace each source by its canonical path; a source must exist, and not be on a file system
 * bind_source_refusal refuses. */
int bind_opts_resolve(struct bind_opts *b, sbx_error_t *err);
/* The trees the sandboxes can write (the --bind-rw sources): host files sandboxd writes must not
 * be reached through links planted there (hostfile.h). trees has room for BIND_OPTS_MAX. */
void bind_opts_writable_trees(const struct bind_opts *b, struct hostfile_tree *trees, size_t *n_trees);
void bind_opts_free(struct bind_opts *b);

#endif
