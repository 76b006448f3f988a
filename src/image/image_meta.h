/* SPDX-License-Identifier: Apache-2.0 */
/* The metadata file next to an imported tree (STORE/NAME.json). image_load_config (image.h)
 * reads it back for `sandboxd exec`. */
#ifndef SBX_IMAGE_META_H
#define SBX_IMAGE_META_H

#include "base/error.h"
#include "image/image.h"
#include "image/image_source.h"

/* Write the metadata of an import to storefd/file (created or truncated, not following a symlink,
 * fsync'd). source: what to record as its source; files_sha: the file manifest's sha256. */
int image_meta_write(int storefd, const char *file, const struct image_import_options *o, const char *source,
                     const struct image *im, const struct image_import_stats *st, const char *files_sha,
                     sbx_error_t *err);

#endif
