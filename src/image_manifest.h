/* The file manifest of a tree: "TYPE MODE UID GID SIZE MTIME DIGEST /PATH" per file, depth first,
 * names sorted (by their escaped form) within each directory. image_verify (image.h) compares a
 * tree with the manifest recorded at import. */
#ifndef SBX_IMAGE_MANIFEST_H
#define SBX_IMAGE_MANIFEST_H

#include "error.h"
#include "image.h"
#include "util.h"

struct image_manifest {
  strbuf_t out;                     /* the manifest; the caller frees it, also on failure */
  struct image_import_stats counts; /* files, dirs, symlinks, bytes */
};

/* Walk the tree at rootfd (not leaving its file system, at most 256 levels deep) into *w. */
int image_manifest_walk(int rootfd, struct image_manifest *w, sbx_error_t *err);

#endif
