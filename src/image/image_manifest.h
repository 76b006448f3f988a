/* SPDX-License-Identifier: Apache-2.0 */
/* The file manifest of a tree: "TYPE MODE UID GID SIZE MTIME DIGEST /PATH" per file, depth first,
 * names sorted (by their escaped form) within each directory. image_manifest_diff compares a
 * tree with the manifest recorded at import (image_verify, image.h). */
#ifndef SBX_IMAGE_MANIFEST_H
#define SBX_IMAGE_MANIFEST_H

#include <stdint.h>

#include "base/error.h"
#include "base/util.h"

struct image_manifest {
  strbuf_t out; /* the manifest; the caller frees it, also on failure */
  struct {
    uint64_t files, dirs, symlinks, bytes;
  } counts;
};

/* Walk the tree at rootfd (not leaving its file system, at most 256 levels deep) into *w. */
int image_manifest_walk(int rootfd, struct image_manifest *w, sbx_error_t *err);

/* Compare the tree at rootfd with want (a manifest as written at import). Each difference is
 * passed to report (a one-line description); *ret_differences counts them. Returns 0 when the
 * comparison ran (whatever its outcome). */
int image_manifest_diff(int rootfd, const char *want, void (*report)(const char *line, void *userdata),
                        void *userdata, uint64_t *ret_differences, sbx_error_t *err);

#endif
