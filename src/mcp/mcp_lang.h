/* SPDX-License-Identifier: Apache-2.0 */
/* The languages of `sandboxd mcp` (execute_code's `language`): how each one's sandbox is started
 * and takes its code, and the rootfs it runs in. */
#ifndef SBX_MCP_LANG_H
#define SBX_MCP_LANG_H

#include "base/error.h"

enum mcp_lang { MCP_LANG_PYTHON, MCP_LANG_BASH, MCP_LANG_JAVASCRIPT, MCP_LANG_COUNT };

#define MCP_LANG_BIT(l) (1u << (l))

/* "python", "bash", "javascript". */
const char *mcp_lang_name(enum mcp_lang l);
/* 0 and *ret for a language's name, else -1. */
int mcp_lang_parse(const char *s, enum mcp_lang *ret);
/* Parse "a,b" into a mask of MCP_LANG_BIT; -1 (with the name in err) for an unknown one. */
int mcp_lang_parse_list(const char *opt, const char *list, unsigned *ret_mask, sbx_error_t *err);
/* What a sandbox of l runs, other than Python (whose runner takes a job on fd 3, mcp_job.c): its
 * interpreter, reading the code from stdin to EOF and only then running it (never in argv). */
char **mcp_lang_argv(enum mcp_lang l);
/* The rootfs l runs in: its own tree in the store if lang.c gives it one (javascript), else the
 * server's (server_rootfs). 0 with *ret_path (malloc'd), or NULL when that language's
 * interpreter is not there (the tool does not offer it); -1 on error. */
int mcp_lang_rootfs(enum mcp_lang l, const char *server_rootfs, char **ret_path, sbx_error_t *err);

/* How to get l's rootfs, for messages (lang.c's hints). */
const char *mcp_lang_hint(enum mcp_lang l);

#endif
