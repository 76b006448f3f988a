/* SPDX-License-Identifier: Apache-2.0 */
/* The files a run returns: what the code left in /workspace/out, read after the sandbox has ended
 * through the workspace tmpfs the sandbox handed over (sandbox_workspace_fd), within the policy's
 * max_artifacts and artifact_limit; copied to the host (--output-dir) and written into the MCP
 * result.
 *
 * The tree is the code's, so the walk trusts nothing in it: each name is opened by itself beneath
 * its directory's fd (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
 * RESOLVE_NO_XDEV, O_NOFOLLOW|O_NONBLOCK), after fstatat(AT_SYMLINK_NOFOLLOW) said it is a regular
 * file or a directory and before fstat says it is still that inode; symlinks, FIFOs, sockets and
 * devices are listed, never opened. Bounded everywhere: directory depth, entries looked at, files
 * and bytes read (a file larger than what is left is omitted by its size, never read), entries
 * listed. Names are bytes: one that is not valid UTF-8 or holds a control character is never used
 * on the host (its file is omitted, with the reason). */
#ifndef SBX_ARTIFACTS_H
#define SBX_ARTIFACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "base/json.h"
#include "base/util.h"

#define ARTIFACT_MAX_DEPTH 16           /* directories below out */
#define ARTIFACT_MAX_SCAN 10000         /* entries looked at in all; then the walk stops, and says so */
#define ARTIFACT_MAX_OMITTED 64         /* omitted entries listed; more are only counted */
#define ARTIFACT_MAX_PATH 1024          /* bytes of a path below out */
#define ARTIFACT_EMBED_TEXT (64u << 10) /* without --output-dir: text files up to this are embedded */

struct artifact {
  char *path;          /* below out, as the code named it (bytes) */
  uint64_t size;       /* st_size; 0 for what is not a regular file */
  const char *mime;    /* static; NULL if not read */
  char sha256[65];     /* of the bytes read; "" if not read */
  char *data;          /* what was read (size bytes), or NULL: omitted */
  const char *omitted; /* why it was not returned (static), or NULL */
  char *uri;           /* file:// of the host copy (artifacts_save), or NULL */
  bool image, text;    /* by content: PNG/JPEG/GIF/WebP; valid UTF-8 without NUL */
};

struct artifacts {
  struct artifact *v;
  size_t n, cap;
  size_t returned;     /* entries with data */
  uint64_t bytes;      /* read in all */
  size_t not_listed;   /* omitted entries beyond ARTIFACT_MAX_OMITTED */
  size_t scanned;      /* entries looked at */
  bool scan_stopped;   /* more than ARTIFACT_MAX_SCAN: the rest was not looked at */
  const char *problem; /* out itself was not a directory of the workspace (static), or NULL */
};

/* One fstatat: whether `out` under the workspace is (still) an empty directory. The fast path of
 * every call: anything else (files, or out replaced) is collected properly. */
bool artifacts_out_empty(int workspace_fd);
/* Walk `out` under the workspace and read what may come back. Fails only for lack of memory; what
 * the code did wrong is in the entries' `omitted` and in ret->problem. */
int artifacts_collect(int workspace_fd, uint64_t max_files, uint64_t max_bytes, struct artifacts *ret,
                      sbx_error_t *err);
/* Copy every returned file to dirfd (a fresh directory of ours; its absolute path is dir_path),
 * creating subdirectories without following links and files O_EXCL|O_NOFOLLOW, and set their
 * uri. A file that cannot be written is omitted, with the reason. */
void artifacts_save(struct artifacts *a, int dirfd, const char *dir_path);
void artifacts_free(struct artifacts *a);
/* Create name in dirfd (O_EXCL|O_NOFOLLOW, 0644) holding data. -1 with errno. */
int artifacts_write_new(int dirfd, const char *name, const void *data, size_t len);

/* MCP content blocks: images as `image` (base64), saved files as `resource_link` when the
 * protocol has them (links), unsaved text up to ARTIFACT_EMBED_TEXT as embedded `resource`. */
void artifacts_write_blocks(json_writer_t *w, const struct artifacts *a, bool links);
/* structuredContent's `files`: {path, size, mime_type, sha256, uri?, omitted?} each. */
void artifacts_write_files(json_writer_t *w, const struct artifacts *a);
/* Lines for the model about what did not come back, and (where) where the files were saved. */
int artifacts_note(const struct artifacts *a, const char *saved_dir, bool list_saved, strbuf_t *sb);

/* Pure helpers (unit-tested). The mime type of a file by its content (images: magic bytes; text:
 * valid UTF-8 without NUL, then by the name's extension); sets *image and *text. */
const char *artifact_sniff(const char *name, const unsigned char *data, size_t len, bool *image, bool *text);
/* Why name (one path component, len bytes) must not be used on the host, or NULL. */
const char *artifact_name_problem(const char *name, size_t len);
/* Append path percent-encoded for a URI (RFC 3986: unreserved and '/' as they are). */
int artifact_uri_append(strbuf_t *sb, const char *path);

#endif
