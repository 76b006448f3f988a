/* SPDX-License-Identifier: Apache-2.0 */
/* sandboxd: the subcommand table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/version.h"
#include "cli/cli.h"
#include "sandbox/sandbox.h"

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
};

static const struct command commands[] = {
    {"exec", cmd_exec, "run a Python file or -c CODE in a fresh sandbox"},
    {"mcp", cmd_mcp, "serve run_python and execute_code over the Model Context Protocol on stdio"},
    {"policy", cmd_policy, "check, show or diff policies"},
    {"rootfs", cmd_rootfs, "build, fetch, import, list, verify and remove root filesystems"},
    {"doctor", cmd_doctor, "say what this host supports and how to fix what is missing"},
};

static void usage(FILE *f)
{
  fprintf(f, "usage: sandboxd COMMAND [ARGS...]\n\nCommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "  %-8s %s\n\nSee sandboxd(1). Exit status 125: usage, policy or setup error.\n", "version",
          "print the version");
}

static int dispatch(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return 125;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
    printf("sandboxd %s\n", SANDBOXD_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].run(argc - 1, argv + 1);
  log_error("unknown command `%s` (see sandboxd --help)", argv[1]);
  return 125;
}

int main(int argc, char **orig_argv)
{
  sbx_warn_set_handler(log_warning); /* what library code warns about, on stderr */
  /* Work on a heap copy of argv: the sandbox's init blanks the original strings (contiguous,
   * from argv[0] to the end of the last) so /proc/1/cmdline shows no host paths. */
  char **argv = calloc((size_t) argc + 1, sizeof *argv);
  if (!argv)
    return 125;
  for (int i = 0; i < argc; i++)
    if (!(argv[i] = strdup(orig_argv[i])))
      return 125;
  sandbox_set_argv_area(orig_argv[0],
                        (size_t) (orig_argv[argc - 1] + strlen(orig_argv[argc - 1]) + 1 - orig_argv[0]));
  int rc = dispatch(argc, argv);
  for (int i = 0; i < argc; i++)
    free(argv[i]);
  free(argv);
  return rc;
}
