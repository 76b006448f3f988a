/* SPDX-License-Identifier: Apache-2.0 */
/* The languages `sandboxd exec` (and the MCP server) run, and the one table that maps each to
 * its interpreter, its file extensions and its rootfs. Pure: no files, no syscalls. */
#ifndef SBX_LANG_H
#define SBX_LANG_H

struct sbx_lang {
  const char *name;    /* --lang NAME: python, bash, javascript */
  const char *program; /* the interpreter, found along the image's PATH inside its rootfs */
  /* The rootfs (a name in the store) this language runs in unless --rootfs says otherwise; NULL:
   * the default rootfs ($SANDBOXD_ROOTFS, else PATHS_DEFAULT_ROOTFS). */
  const char *rootfs;
  const char *build_hint;     /* how the build tree makes that rootfs (NULL: the default's) */
  const char *installed_hint; /* how an installed sandboxd gets it */
  const char *extensions[3];  /* ".py", ...; NULL-terminated */
};

/* By --lang name; NULL if unknown. */
const struct sbx_lang *lang_by_name(const char *name);
/* By the file name's extension; NULL if none matches. */
const struct sbx_lang *lang_by_file(const char *path);
/* By an interpreter's name (a #! line's program, or env's argument), base name only: python3,
 * python3.14, bash, sh, node; NULL if none matches. */
const struct sbx_lang *lang_by_program(const char *program);
/* "python|bash|javascript", for usage and error messages. */
const char *lang_names(void);

#endif
