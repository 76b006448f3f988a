/* Unit tests for `sandboxd exec` option parsing (src/cli/cli_exec.c). */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "cli/cli.h"

static int parse(struct exec_options *o, sbx_error_t *err, int argc, char **argv)
{
  memset(err, 0, sizeof *err);
  return exec_parse_args(argc, argv, o, err);
}

/* exec_options points into argv, so argv must outlive each CHECK: copy the (static) strings'
 * pointers into a static array rather than parse a block-scoped compound literal. */
static char *argbuf[64];

static int parse_static(struct exec_options *o, sbx_error_t *err, int argc, char **argv)
{
  for (int i = 0; i <= argc; i++)
    argbuf[i] = argv[i];
  return parse(o, err, argc, argbuf);
}

#define ARGV(...) ((char *[]){"exec", __VA_ARGS__, NULL})
#define ARGC(...) ((int) (sizeof((char *[]){"exec", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, e, ...) parse_static(o, e, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

int main(void)
{
  struct exec_options o;
  sbx_error_t e;

  CHECK(PARSE(&o, &e, "x.py") == 0 && strcmp(o.file, "x.py") == 0 && o.n_args == 0 && !o.code);
  CHECK(o.limits.timeout_ms == UINT64_MAX && o.limits.memory_bytes == UINT64_MAX);

  /* Options stop at FILE: the script's own options pass through. */
  CHECK(PARSE(&o, &e, "--timeout", "5", "x.py", "--timeout", "9", "-c") == 0);
  CHECK(o.limits.timeout_ms == 5000 && o.n_args == 3 && strcmp(o.args[0], "--timeout") == 0);

  CHECK(PARSE(&o, &e, "-c", "print(1)", "a", "b") == 0 && strcmp(o.code, "print(1)") == 0 && !o.file &&
        o.n_args == 2);
  CHECK(PARSE(&o, &e, "--memory", "256M", "--pids", "32", "--cpus", "0.5", "--timeout", "1.5", "-c", "x") ==
        0);
  CHECK(o.limits.memory_bytes == 256ULL << 20 && o.limits.pids == 32 && o.limits.cpus_milli == 500 &&
        o.limits.timeout_ms == 1500);
  CHECK(PARSE(&o, &e, "--tmp-size", "1G", "--workspace-size", "10M", "--fsize", "1K", "--nofile", "64", "-c",
              "x") == 0);
  CHECK(o.limits.tmp_bytes == 1ULL << 30 && o.limits.workspace_bytes == 10ULL << 20 &&
        o.limits.fsize_bytes == 1024 && o.limits.nofile == 64);

  CHECK(PARSE(&o, &e, "--bind", "/a:/data", "--bind-rw", "/b/c:/workspace/out/", "-c", "x") == 0);
  CHECK(o.binds.n == 2 && !o.binds.binds[0].rw && o.binds.binds[1].rw &&
        strcmp(o.binds.binds[0].src, "/a") == 0 && strcmp(o.binds.binds[1].dst, "/workspace/out") == 0);
  bind_opts_free(&o.binds);
  CHECK(PARSE(&o, &e, "--env", "A=1", "--env", "B=", "--policy", "strict", "--report", "r.json", "-c", "x") ==
        0);
  CHECK(o.n_env == 2 && strcmp(o.env[1], "B=") == 0 && strcmp(o.policy, "strict") == 0 &&
        strcmp(o.report, "r.json") == 0);
  CHECK(PARSE(&o, &e, "--help") == 0 && o.help);

  /* Usage errors: one line naming the problem. */
  CHECK(PARSE(&o, &e, "--timeout", "soon", "x.py") < 0 && strstr(e.msg, "--timeout `soon`"));
  CHECK(PARSE(&o, &e, "--timeout", "0", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--memory", "-5", "x.py") < 0 && strstr(e.msg, "--memory"));
  CHECK(PARSE(&o, &e, "--pids", "0", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--cpus", "abc", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--bind", "nocolon", "x.py") < 0 && strstr(e.msg, "SRC:DST"));
  CHECK(PARSE(&o, &e, "--bind", "/a:relative", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--bind", "/a:/workspace/../etc", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--bind", "/a:/", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--bind", "/a:/x/./y", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--env", "NOEQUALS", "x.py") < 0 && strstr(e.msg, "NAME=VALUE"));
  CHECK(PARSE(&o, &e, "--env", "=v", "x.py") < 0);
  /* --allow-host: checked as read, repeatable; whether the policy permits it is decided later. */
  CHECK(PARSE(&o, &e, "--allow-host", "pypi.org", "--allow-host", "[::1]:8080", "x.py") == 0 &&
        o.allow_hosts.n == 2 && strcmp(o.allow_hosts.patterns[1], "[::1]:8080") == 0);
  CHECK(PARSE(&o, &e, "--allow-host", "foo.*.org", "x.py") < 0 &&
        strstr(e.msg, "--allow-host `foo.*.org`: "));
  CHECK(PARSE(&o, &e, "--allow-host", "pypi.org:99999", "x.py") < 0 && strstr(e.msg, "1-65535"));
  CHECK(PARSE(&o, &e, "--workdir", "rel", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--workdir", "/a/../b", "x.py") < 0);
  CHECK(PARSE(&o, &e, "--frobnicate", "x.py") < 0 && strstr(e.msg, "--frobnicate"));
  CHECK(PARSE(&o, &e, "--timeout") < 0);
  CHECK(parse(&o, &e, 1, (char *[]){"exec", NULL}) < 0 && strstr(e.msg, "missing FILE"));
  CHECK(PARSE(&o, &e, "-c") < 0);
  CHECK(PARSE(&o, &e, "") < 0);

  /* -m MODULE ends the options, like -c; its arguments pass through. */
  CHECK(PARSE(&o, &e, "--timeout", "2", "-m", "unittest", "-v", "--timeout", "x") == 0 &&
        strcmp(o.module, "unittest") == 0 && !o.file && !o.code && !o.program && o.n_args == 3 &&
        strcmp(o.args[1], "--timeout") == 0 && o.limits.timeout_ms == 2000);
  CHECK(PARSE(&o, &e, "-m") < 0 && strstr(e.msg, "-m needs MODULE"));
  CHECK(PARSE(&o, &e, "-m", "") < 0 && strstr(e.msg, "module name"));
  CHECK(PARSE(&o, &e, "-m", "-x") < 0);
  CHECK(PARSE(&o, &e, "--lang", "bash", "-m", "json.tool") < 0 && strstr(e.msg, "--lang bash"));
  CHECK(PARSE(&o, &e, "--lang", "python", "-m", "json.tool") == 0 && strcmp(o.lang, "python") == 0);

  /* -- PROGRAM: any program; what follows is its argv, options included. */
  CHECK(PARSE(&o, &e, "--workdir", "/w", "--", "python3", "-m", "unittest", "--", "-c") == 0 &&
        strcmp(o.program, "python3") == 0 && !o.file && !o.module && o.n_args == 4 &&
        strcmp(o.args[2], "--") == 0 && strcmp(o.workdir, "/w") == 0);
  CHECK(PARSE(&o, &e, "--", "x.py") == 0 && strcmp(o.program, "x.py") == 0 && !o.file);
  CHECK(PARSE(&o, &e, "--") < 0 && strstr(e.msg, "-- PROGRAM"));
  CHECK(PARSE(&o, &e, "--", "") < 0 && strstr(e.msg, "PROGRAM is empty"));
  /* A `--` that is an option's argument is not the end of the options. */
  CHECK(PARSE(&o, &e, "--policy", "--", "x.py") == 0 && strcmp(o.policy, "--") == 0 &&
        strcmp(o.file, "x.py") == 0 && !o.program);
  /* After FILE, a `--` is the script's. */
  CHECK(PARSE(&o, &e, "x.sh", "--", "y") == 0 && strcmp(o.file, "x.sh") == 0 && o.n_args == 2);

  /* --lang names a known language. */
  CHECK(PARSE(&o, &e, "--lang", "javascript", "-c", "1") == 0 && strcmp(o.lang, "javascript") == 0);
  CHECK(PARSE(&o, &e, "--lang", "ruby", "x.rb") < 0 && strstr(e.msg, "--lang `ruby`") &&
        strstr(e.msg, "python|bash|javascript"));
  return check_summary("test_exec_args");
}
