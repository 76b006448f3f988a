/* SPDX-License-Identifier: Apache-2.0 */
/* OCI images -> root filesystem trees: an OCI image layout, an oci-archive or a docker-archive
 * is unpacked, layer by layer, into a new directory of a rootfs store, then renamed into place.
 *
 * Image content is untrusted. Every path is resolved inside the tree being built (openat2 with
 * RESOLVE_IN_ROOT, or an equivalent component-by-component walk on kernels without openat2);
 * symlinks are stored, never followed out of the tree; hard links must name a file inside it;
 * device nodes are skipped; setuid/setgid bits and file capabilities are dropped unless asked.
 *
 * The module's files, each one concern, dependencies pointing down:
 *   image.c           the import sequence: store, temporary trees, the atomic swap
 *   image_source.c    reading an OCI layout or docker-archive: index, manifest, config, blobs
 *   image_layer.c     applying a tar stream to the tree; the only file that includes <archive.h>
 *                     (libarchive, loaded with dlopen on first use)
 *   image_manifest.c  the file manifest (NAME.files) and image_verify
 *   image_meta.c      the metadata (NAME.json) and image_load_config
 *   image_util.c      message quoting and file mappings shared by the above
 *   fs_root.c         resolving and removing inside an untrusted tree (no image knowledge)
 *   strset.c          a string set */
#ifndef SBX_IMAGE_H
#define SBX_IMAGE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define IMAGE_DEFAULT_MAX_BYTES (16ULL << 30) /* unpacked bytes per import */
#define IMAGE_DEFAULT_MAX_FILES 1000000ULL    /* archive entries per import */
#define IMAGE_NAME_MAX 128

struct image_import_options {
  const char *src;               /* OCI layout directory, oci-archive or docker-archive tarball */
  const char *store;             /* directory that holds the trees (created if missing) */
  const char *name;              /* the tree: STORE/NAME, metadata STORE/NAME.json, STORE/NAME.files */
  const char *source_ref;        /* recorded as "source" in the metadata; NULL: the absolute SRC path */
  uint64_t max_bytes;            /* 0: IMAGE_DEFAULT_MAX_BYTES */
  uint64_t max_files;            /* 0: IMAGE_DEFAULT_MAX_FILES */
  bool keep_privileges;          /* keep setuid/setgid bits and security.capability xattrs */
  bool resolve_fallback;         /* resolve paths without openat2 even where it exists (for tests) */
  volatile sig_atomic_t *cancel; /* optional: non-zero makes the import stop and clean up */
};

struct image_import_stats {
  unsigned layers;
  uint64_t entries;                          /* archive entries applied (all layers) */
  uint64_t files, dirs, symlinks, hardlinks; /* in the final tree */
  uint64_t bytes;                            /* regular-file bytes in the final tree */
  uint64_t devices_skipped, setid_stripped, caps_stripped, whiteouts;
  char manifest_digest[72]; /* "sha256:<hex>" (docker-archive: the config digest) */
  char platform[64];        /* "linux/amd64" */
};

/* Import o->src as STORE/NAME, atomically: unpacked into a temporary directory next to the
 * destination, renamed into place when complete. On failure nothing is left behind and a previous
 * tree of that name is untouched. */
int image_import(const struct image_import_options *o, struct image_import_stats *ret, sbx_error_t *err);

/* Remove STORE/NAME, its metadata and manifest (and what `rootfs build` keeps beside it: NAME.oci,
 * NAME.build.log). The tree is renamed away first, in one step: a concurrent lookup finds all of
 * it or nothing. A sandbox already running on it sees its files go. */
int image_remove(const char *store, const char *name, sbx_error_t *err);

/* NAME is usable as a tree name: [A-Za-z0-9][A-Za-z0-9._-]*, at most IMAGE_NAME_MAX bytes. */
bool image_name_valid(const char *name);

/* Normalise an archive member name: leading "/" and "./", empty and "." components dropped.
 * Fails on "..", control characters (newline...), a component over NAME_MAX or a result over
 * PATH_MAX. "" means the root itself. Pure (unit-testable). */
int image_path_normalize(const char *in, char *out, size_t outlen, sbx_error_t *err);

/* Image config for `sandboxd exec`, from the metadata next to a tree (ROOTFS.json).
 * A tree without metadata (or without these keys) gives an empty config and returns 0. */
struct image_config {
  char **env; /* "NAME=VALUE", n_env of them (malloc'd) */
  size_t n_env;
  char *workdir; /* absolute path inside, or NULL */
  char *preload; /* the label org.sandboxd.preload: modules a fork template imports ("a,b.c"), or NULL */
};
int image_load_config(const char *rootfs, struct image_config *ret, sbx_error_t *err);
void image_config_free(struct image_config *c);

/* Compare STORE/NAME with the file manifest recorded at import (STORE/NAME.files). Each
 * difference is passed to report (a one-line description); *ret_differences counts them.
 * Returns 0 when the comparison ran (whatever its outcome). */
typedef void (*image_report_fn)(const char *line, void *userdata);
int image_verify(const char *store, const char *name, image_report_fn report, void *userdata,
                 uint64_t *ret_differences, sbx_error_t *err);

#endif
