/* SPDX-License-Identifier: Apache-2.0 */
/* Layer extraction: tar streams (an image's layers, or an oci-/docker-archive itself) applied to a
 * tree under construction, one after another.
 *
 * Entry names are normalised (image_path_normalize) and every path resolved inside the tree
 * (fs_root); whatever is in an entry's way is replaced, never written through; symlinks are stored
 * as they are; hard links must name a file already inside; device nodes and sockets are skipped;
 * setuid/setgid bits and file capabilities are dropped unless asked to keep them; OCI whiteouts
 * (.wh.NAME, .wh..wh..opq) remove what the layers below put there. Directory modes and times are
 * applied last (image_layer_finish), children before parents. */
#ifndef SBX_IMAGE_LAYER_H
#define SBX_IMAGE_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/strset.h"
#include "image/fs_root.h"
#include "image/image.h"

struct dirfix;

struct extractor {
  struct fs_root root;
  const struct image_import_options *o;
  struct image_import_stats *st;
  uint64_t max_bytes, max_files, nbytes, nentries;
  bool chown;                /* we are root: keep the archive's numeric owners */
  bool plain;                /* an outer archive (oci-archive, docker-archive): plain files, no owners */
  struct strset layer_paths; /* written by the current layer, with their parents */
  struct dirfix *fix;
  size_t nfix, capfix;
};

/* Apply one tar stream (already in memory) to x's tree; loads libarchive on first use. */
int image_layer_apply(struct extractor *x, const void *data, size_t len, sbx_error_t *err);
/* After the last layer: directory owners, modes and times. */
int image_layer_finish(struct extractor *x, sbx_error_t *err);
/* ECANCELED if the import was asked to stop (x->o->cancel). */
int image_layer_cancelled(const struct extractor *x, sbx_error_t *err);
/* Frees what x allocated, not x->root. */
void image_layer_free(struct extractor *x);

#endif
