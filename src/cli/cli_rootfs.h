/* SPDX-License-Identifier: Apache-2.0 */
/* The `rootfs` subcommands that bring a tree in with a host tool (cli_rootfs_get.c), for
 * cli_rootfs.c, which owns the command line and the import. */
#ifndef SBX_CLI_ROOTFS_H
#define SBX_CLI_ROOTFS_H

#include <limits.h>
#include <stdbool.h>

#include "base/error.h"

#define ROOTFS_FETCH_DEFAULT_IMAGE "docker.io/library/python:3.14-slim"
#define ROOTFS_FETCH_TIMEOUT_MS 3000

struct rootfs_build_options {
  const char *store;   /* the store the tree goes into */
  const char *name;    /* STORE/NAME */
  const char *profile; /* "slim" or "data" */
  bool force;          /* rebuild even if the recipe says the tree is up to date */
};
/* Run the offline recipe (paths_rootfs_recipe) into STORE/NAME, printing a line per phase.
 * Returns the exit status: 0, 1 if the recipe failed (it says why), 125 for setup errors. */
int rootfs_build(const struct rootfs_build_options *o);

struct rootfs_fetch_options {
  const char *image; /* a skopeo docker:// reference without the transport */
  const char *store, *name;
  bool tls_verify;     /* false: plain HTTP or unverified TLS (a local registry) */
  unsigned timeout_ms; /* how long the registry may take to accept a connection */
};
struct rootfs_fetched {
  char tmp[PATH_MAX];    /* the temporary directory in the store, removed by rootfs_fetched_free */
  char layout[PATH_MAX]; /* the OCI layout in it */
  char source[700];      /* docker://REPO@sha256:... (the pin, recorded as the source) */
};
/* Pull o->image with skopeo into a temporary OCI layout in the store. Fails within about
 * o->timeout_ms when the registry cannot be reached. */
int rootfs_fetch_pull(const struct rootfs_fetch_options *o, struct rootfs_fetched *ret, sbx_error_t *err);
void rootfs_fetched_free(struct rootfs_fetched *f);

#endif
