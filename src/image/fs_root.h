/* SPDX-License-Identifier: Apache-2.0 */
/* Paths inside an untrusted directory tree (an image being unpacked, an image source): every
 * lookup stays inside the tree's root, as if it were "/", and on the root's file system.
 *
 * openat2 with RESOLVE_IN_ROOT where the kernel has it (5.6+), else an equivalent walk, one
 * component at a time with O_NOFOLLOW, that splices symlink targets into the rest of the path.
 * Removal never follows a symlink and never leaves the root's file system. Like the syscalls they
 * wrap, these return -1 with errno set; the caller names the operation in its message. */
#ifndef SBX_FS_ROOT_H
#define SBX_FS_ROOT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/error.h"

struct fs_root {
  int fd;        /* O_PATH directory: the root of the tree */
  dev_t dev;     /* nothing below it may be on another file system */
  bool fallback; /* no openat2: walk component by component */
  unsigned rm_seq;
};

/* r for dirfd/name (a directory, not a symlink): an O_PATH fd the caller closes. fallback: walk
 * even where openat2 exists (for tests). */
int fs_root_open(int dirfd, const char *name, struct fs_root *r, bool fallback, sbx_error_t *err);

/* An O_PATH fd for directory `path` (relative to the root; "" is the root), or -1 with errno. */
int fs_root_resolve_dir(struct fs_root *r, const char *path);
/* The same, creating missing directories (0755) on the way; a dangling symlink is ENOENT. */
int fs_root_ensure_dir(struct fs_root *r, const char *path);
/* A regular file for reading (O_NONBLOCK: a FIFO does not hang), symlinks followed in the root. */
int fs_root_open_file(struct fs_root *r, const char *path);
/* Remove dirfd/name inside r: a file, or a directory and everything below it. */
int fs_root_rm_tree(struct fs_root *r, int dirfd, const char *name);
/* Remove dirfd/name: a file, or a directory and everything below it as a root of its own (a
 * temporary or replaced tree). 0 if it does not exist. */
int fs_remove_tree(int dirfd, const char *name);

/* Lexically join a symlink target onto the directory holding it, clamped at the root: the result
 * has no "." or ".." component. -1 if it would be PATH_MAX bytes or longer. Pure. */
int fs_join_in_root(const char *dir, const char *target, char out[PATH_MAX]);
/* The symlink base in pfd (the directory dir, relative to the root) replaced by its target, as
 * the path to look up next: "cur" (PATH_MAX) becomes the join of dir and the target, clamped at
 * the root. -1 with errno (ENAMETOOLONG for a result too long). */
int fs_follow_link(int pfd, const char *base, const char *dir, char cur[PATH_MAX]);
/* Split "a/b/c" into "a/b" and "c" (dir "" for a top-level name). Pure. */
void fs_split_path(const char *path, char dir[PATH_MAX], const char **ret_base);

/* Names in a directory (not . and ..), unsorted, each and the array malloc'd; fd is not consumed. */
int fs_list_dir(int fd, char ***ret_names, size_t *ret_n);
void fs_free_names(char **names, size_t n);

#endif
