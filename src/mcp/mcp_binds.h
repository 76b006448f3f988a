/* SPDX-License-Identifier: Apache-2.0 */
/* The host directories every sandbox of `sandboxd mcp` gets: --bind/--bind-rw (binds.h), chosen by
 * whoever starts the server, and with --roots the client's roots, read-only under ROOTS_DIR. The
 * URI and name rules are pure and unit-tested; mcp_roots_update checks the host. */
#ifndef SBX_MCP_BINDS_H
#define SBX_MCP_BINDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "sandbox/sandbox.h"

/* A new top-level directory: the sandboxes that have roots get a skeleton root to make it in
 * (mount.h), the others enter the rootfs as it is. */
#define ROOTS_DIR "/roots"
#define ROOTS_MAX 32
/* Of a longer list, only this many entries are looked at, and this many skipped ones logged. */
#define ROOTS_EXAMINED_MAX 256
#define ROOTS_LOGGED_MAX 16
#define ROOT_NAME_MAX 64
/* How long the client may take to answer roots/list before it counts as lost (and a later
 * list_changed asks again); calls meanwhile run with the roots known so far. */
#define ROOTS_REQUEST_TIMEOUT_NS (10ULL * 1000000000ULL)

struct mcp_root {
  char *src;                    /* canonical host path */
  int fd;                       /* src, held (sbx_bind.fd) */
  char name[ROOT_NAME_MAX + 8]; /* unique, [A-Za-z0-9._-] */
  char *dst;                    /* ROOTS_DIR "/" name */
};

struct mcp_roots {
  bool enabled;    /* --roots */
  bool client_has; /* the client declared the roots capability in initialize */
  bool asking;     /* a roots/list is in flight */
  bool stale;      /* list_changed came while it was: ask again once it is answered */
  uint64_t asked_ns;
  struct mcp_root r[ROOTS_MAX];
  size_t n;
};

struct server;

/* A file:// URI's absolute, percent-decoded path in path[len], or -1 and why. Refused: other
 * schemes, a host other than empty or localhost, a query or fragment, %00 and %2F, ".", ".."
 * and empty components. */
int root_uri_path(const char *uri, char *path, size_t len, const char **why);
/* The mount name for path: its base name in [A-Za-z0-9._-] (others become `_`, a leading `.`
 * too), at most ROOT_NAME_MAX bytes, "root" if nothing is left; then made unique among
 * taken[0..n) as name, name-2, name-3, ... */
void root_name(const char *path, const struct mcp_root *taken, size_t n, char name[ROOT_NAME_MAX + 8]);
void mcp_roots_free(struct mcp_roots *roots);

/* The spec binds of every sandbox: the `mcp` package, --bind, the roots. */
void mcp_binds_rebuild(struct server *srv);
/* The answer to roots/list (result, or error when the client refused). Logs what it skips; when the
 * set changed, later sandboxes get the new one, and it returns true: the caller drops the warm
 * sandboxes built with the old. */
bool mcp_roots_update(struct server *srv, const json_node_t *result, const json_node_t *error);
/* "binds" and "roots" of the capabilities resource. */
void mcp_binds_write_capabilities(const struct server *srv, json_writer_t *w);

#endif
