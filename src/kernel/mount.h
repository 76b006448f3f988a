/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystem setup inside the new mount namespace. Paths given as `rel` are relative to the
 * current directory, which is the new root while it is being built. */
#ifndef SBX_MOUNT_H
#define SBX_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "policy/policy.h"

/* Bind the rootfs (an O_PATH fd) onto itself and chdir into it: it becomes the root-to-be. */
int mount_enter_rootfs(int rootfs_fd, const char *path, sbx_error_t *err);
/* Or, for a bind at a new top-level directory (/data) in a read-only rootfs, a skeleton root: a
 * small tmpfs on path, entered; *ret_dirfd reads the rootfs below it. Then, once the setup runs
 * as the sandbox's uid (entries on a tmpfs must belong to a mapped uid), mount_fill_skeleton
 * puts the rootfs's top-level entries in (directories and files bound, symlinks copied) and the
 * paths extra[] names (each a directory if dir[i], else a file, with its parents); it closes dirfd. A mount
 * per top-level entry: only for a sandbox that needs it. */
int mount_enter_skeleton(int rootfs_fd, const char *path, unsigned uid, unsigned gid, int *ret_dirfd,
                         sbx_error_t *err);
int mount_fill_skeleton(int dirfd, const char *const *extra, const bool *dir, size_t n_extra, bool readonly,
                        sbx_error_t *err);
/* A minimal /dev: null zero full random urandom, fd/stdio links, and a size-limited /dev/shm. */
int mount_dev(uint64_t shm_bytes, sbx_error_t *err);
/* Bind an O_PATH fd at dst, an absolute path resolved inside the new root (root_fd, an O_PATH
 * fd of it): symlinks there lead where they lead inside the sandbox, never to the host. A
 * missing dst is created where the sandbox may write; read-only (recursively nosuid, nodev) unless rw. */
int mount_bind_fd(int root_fd, int src_fd, const char *dst, bool rw, sbx_error_t *err);
/* Make the root-to-be (and any host mounts inside it) read-only, nosuid, nodev. Call before
 * mounting the writable places on top, which must stay writable. */
int mount_root_readonly(sbx_error_t *err);
/* pivot_root into the current directory and detach the old root. */
int mount_pivot(sbx_error_t *err);

#endif
