/* SPDX-License-Identifier: Apache-2.0 */
/* Subcommands, and the pure option parser for `exec` (unit-tested). */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "base/paths.h" /* rootfs_find */
#include "policy/policy.h"
#include "run/binds.h"
#include "sandbox/sandbox.h"

#define EXEC_MAX_ENV 128

struct exec_options {
  const char *policy;     /* name or path; NULL = default */
  const char *rootfs;     /* NULL = search */
  const char *report;     /* JSON report path or NULL */
  const char *workdir;    /* NULL = /workspace */
  const char *code;       /* -c CODE, or NULL */
  const char *audit_log;  /* path, "syslog", "off", or NULL for the default */
  bool audit_code;        /* put the code text itself into the audit record */
  const char *mcp_config; /* --config FILE: host MCP servers the code may call, or NULL */
  bool import_claude;     /* --import-claude: also Claude Code's servers */
  const char *file;       /* FILE, or NULL with -c, -m and -- */
  const char *module;     /* -m MODULE: python3 -m MODULE, or NULL */
  const char *program;    /* -- PROGRAM: a program of the rootfs, or NULL */
  const char *lang;       /* --lang NAME (lang.h), or NULL: from FILE */
  char **args;            /* arguments after FILE/CODE/MODULE/PROGRAM */
  int n_args;
  struct sbx_limits limits; /* requested; UINT64_MAX = not given */
  struct bind_opts binds;   /* --bind, --bind-rw; bind_opts_free */
  char *env[EXEC_MAX_ENV];
  size_t n_env;
  struct policy_allow_opts allow_hosts; /* --allow-host */
  bool help;
};

/* Parse `exec` arguments (argv[0] is "exec"). Pure: touches no files. */
int exec_parse_args(int argc, char **argv, struct exec_options *o, sbx_error_t *err);

int cmd_exec(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_rootfs(int argc, char **argv);
int cmd_mcp(int argc, char **argv); /* cli_mcp.c */

#endif
