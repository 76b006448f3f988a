/* SPDX-License-Identifier: Apache-2.0 */
/* The install layout: the one place that knows where sandboxd finds what it ships and keeps, for
 * the build tree (build/sandboxd in a clone) and the installed binary (PREFIX/bin/sandboxd)
 * alike. Everything starts from the binary's own directory (/proc/self/exe) and the documented
 * environment variables (sandboxd(1) ENVIRONMENT and FILES). Nothing here creates anything. */
#ifndef SBX_PATHS_H
#define SBX_PATHS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* The root filesystem `exec` and `mcp` use when neither --rootfs nor $SANDBOXD_ROOTFS names one. */
#define PATHS_DEFAULT_ROOTFS "python-3.14-slim"

/* The rootfs store of an installed sandboxd (`make install`, the package). */
#define PATHS_SYSTEM_STORE "/var/lib/sandboxd/rootfs"
/* What an installed user without the default rootfs runs (no `make` there). */
#define PATHS_GET_ROOTFS                                                                                     \
  "build one with `sandboxd rootfs build` (offline, from Debian packages) or pull one with `sandboxd "       \
  "rootfs fetch`"

/* Pretend the binary is in dir (unit tests); NULL: /proc/self/exe again. */
void paths_set_bindir(const char *dir);
/* The sandboxd executable (/proc/self/exe), and its directory (or the one paths_set_bindir set). */
int paths_exe(char out[PATH_MAX], sbx_error_t *err);
int paths_bindir(char out[PATH_MAX], sbx_error_t *err);
/* Whether the binary runs from a source tree (bindir/../src/cli/main.c exists): messages then name
 * `make rootfs`, else commands an installed user has. */
bool paths_build_tree(void);

/* The rootfs store (`rootfs` subcommands and the default rootfs): $SANDBOXD_ROOTFS_DIR, else
 * bindir/../rootfs (build tree) or bindir/../share/sandboxd/rootfs, whichever is a directory,
 * else, for ROOT/usr/bin/sandboxd, ROOT/var/lib/sandboxd/rootfs if it is one (the package's
 * contents unpacked under ROOT), else /var/lib/sandboxd/rootfs. */
int paths_rootfs_store(char out[PATH_MAX], sbx_error_t *err);
/* The offline rootfs recipe `rootfs build` runs: bindir/../scripts/build-rootfs (build tree), else
 * bindir/../libexec/sandboxd/build-rootfs (installed; its oci-pack beside it). Made real. */
int paths_rootfs_recipe(char out[PATH_MAX], sbx_error_t *err);
/* Whether s is a rootfs name in the store ([A-Za-z0-9._-]+, not . or ..), not a path. */
bool paths_rootfs_is_name(const char *s);
/* The rootfs to run: requested (--rootfs: a path if it has a slash, else a name in the store),
 * else $SANDBOXD_ROOTFS (a path), else PATHS_DEFAULT_ROOTFS in the store; it must hold python3 (or node)
 * in /usr/local/bin or /usr/bin. *ret_path is malloc'd, real. */
int rootfs_find(const char *requested, char **ret_path, sbx_error_t *err);
/* The same for a language (lang.h): store_name (its own rootfs, a name in the store) replaces
 * $SANDBOXD_ROOTFS and the default when --rootfs is not given; need (NULL: nothing) is the program
 * the tree must hold in /usr/local/bin or /usr/bin. */
int rootfs_find_for(const char *requested, const char *store_name, const char *need, char **ret_path,
                    sbx_error_t *err);

/* Named policies' search path, colon-separated: $SANDBOXD_POLICY_DIR, bindir/../policy,
 * bindir/../share/sandboxd/policy, /etc/sandboxd/policy. */
int paths_policy_search(char *buf, size_t len, sbx_error_t *err);

/* The directory holding the `mcp` package that code in a sandbox imports: $SANDBOXD_PYTHON_DIR,
 * else bindir/../src/inside (build tree), else bindir/../share/sandboxd/python (installed). *ret_path is
 * malloc'd, real. */
int paths_python_dir(char **ret_path, sbx_error_t *err);

/* Per-user configuration (mcp.json): $XDG_CONFIG_HOME/sandboxd if set, else
 * $HOME/.config/sandboxd (/.config/sandboxd without HOME). */
int paths_config_dir(char out[PATH_MAX], sbx_error_t *err);

/* Per-user state (the audit log): /var/log/sandboxd for root, else $XDG_STATE_HOME/sandboxd if
 * absolute, else $HOME/.local/state/sandboxd. -1 with ENOENT if there is none (no absolute HOME),
 * ENAMETOOLONG if it does not fit. */
int paths_state_dir(char out[PATH_MAX], sbx_error_t *err);
/* The seccomp filter cache: $SANDBOXD_CACHE_DIR (set but empty: none), else /var/cache/sandboxd
 * for root, else $XDG_CACHE_HOME/sandboxd if absolute, else $HOME/.cache/sandboxd. -1 with
 * ENOENT if there is none, ENAMETOOLONG if it does not fit. */
int paths_cache_dir(char out[PATH_MAX], sbx_error_t *err);

#endif
