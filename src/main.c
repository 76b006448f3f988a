/* sandboxd: the subcommand table. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"

#ifndef SANDBOXD_VERSION
#define SANDBOXD_VERSION "0.1.0"
#endif

struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
};

static const struct command commands[] = {
  { "exec", cmd_exec, "run a Python file or -c CODE in a fresh sandbox" },
  { "policy", cmd_policy, "check or show policies" },
  { "doctor", cmd_doctor, "say what this host supports and how to fix what is missing" },
};

static void usage(FILE *f)
{
  fprintf(f, "usage: sandboxd COMMAND [ARGS...]\n\nCommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "  %-8s %s\n\nSee sandboxd(1). Exit status 125: usage, policy or setup error.\n", "version",
          "print the version");
}

int main(int argc, char **argv)
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
