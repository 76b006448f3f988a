/* SPDX-License-Identifier: Apache-2.0 */
/* Reading an image source: which manifest, config and layers it holds, each verified against its
 * digest. The source is a directory (an OCI layout, or what an oci-archive or docker-archive
 * unpacked to); its contents are untrusted and read only through its fs_root. */
#ifndef SBX_IMAGE_SOURCE_H
#define SBX_IMAGE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/json.h"
#include "image/fs_root.h"
#include "image/image.h"
#include "image/image_util.h"

struct image_source {
  const char *src; /* as given, for messages */
  struct fs_root root;
  bool docker; /* docker-archive (manifest.json) rather than an OCI layout */
};

struct image {
  json_node_t *manifest; /* NULL for a docker-archive */
  json_node_t *config;
  char manifest_digest[72], config_digest[72];
  /* Layers: OCI descriptors, or docker-archive paths with their diff_ids. */
  const json_node_t *layers;
  json_node_t *docker_manifest;
};

/* The image for this host: manifest (through nested indexes), config and the layer list. */
int image_source_load(struct image_source *s, struct image *im, sbx_error_t *err);
/* The config's platform against the host's (an index without platforms says nothing); sets
 * st->platform. */
int image_source_check_platform(const struct image *im, struct image_import_stats *st, sbx_error_t *err);
/* Layer i (0-based, < json_array_len(im->layers)) mapped, its digest checked; digest: "sha256:<hex>". */
int image_source_map_layer(struct image_source *s, const struct image *im, size_t i, struct mapping *ret,
                           char digest[72], sbx_error_t *err);
void image_free(struct image *im);

#endif
