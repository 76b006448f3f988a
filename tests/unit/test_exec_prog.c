/* Unit tests for the language table (src/run/lang.c) and programs found inside a rootfs
 * (src/run/exec_prog.c): #! lines, PATH lookup, 126/127. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "check.h"
#include "run/exec_prog.h"
#include "run/lang.h"

static char root[PATH_MAX];

static void put(const char *rel, mode_t mode)
{
  char p[PATH_MAX];
  CHECK(bufprintf(p, sizeof p, NULL, "%s/%s", root, rel) == 0);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  CHECK(fd >= 0 && write(fd, "#!/bin/sh\n", 10) == 10 && fchmod(fd, mode) == 0);
  close(fd);
}

static void dir(const char *rel)
{
  char p[PATH_MAX];
  CHECK(bufprintf(p, sizeof p, NULL, "%s/%s", root, rel) == 0 && mkdir(p, 0755) == 0);
}

static void link_(const char *target, const char *rel)
{
  char p[PATH_MAX];
  CHECK(bufprintf(p, sizeof p, NULL, "%s/%s", root, rel) == 0 && symlink(target, p) == 0);
}

static int sb(const char *text, struct shebang *s, sbx_error_t *e)
{
  memset(s, 0x55, sizeof *s);
  return shebang_parse(text, strlen(text), s, e);
}

int main(void)
{
  sbx_error_t e;
  struct shebang s;

  /* The table: extensions, names, interpreters, and the one language with a rootfs of its own. */
  CHECK(!strcmp(lang_by_file("a/b/x.py")->name, "python") && !strcmp(lang_by_file("x.sh")->program, "bash") &&
        !strcmp(lang_by_file("x.mjs")->name, "javascript") && !strcmp(lang_by_file("x.js")->program, "node"));
  CHECK(!lang_by_file("x") && !lang_by_file(".py") && !lang_by_file("dir.py/x") && !lang_by_file("x.pyc"));
  CHECK(lang_by_name("bash") && !lang_by_name("Bash") && !lang_by_name("node"));
  CHECK(!strcmp(lang_by_name("javascript")->rootfs, "node-slim") && !lang_by_name("python")->rootfs &&
        !lang_by_name("bash")->rootfs);
  CHECK(!strcmp(lang_by_program("/usr/bin/python3.14")->name, "python") &&
        !strcmp(lang_by_program("sh")->name, "bash") && !strcmp(lang_by_program("node")->name, "javascript"));
  CHECK(!lang_by_program("python3-config") && !lang_by_program("/usr/bin/perl"));

  /* #! lines as the kernel reads them: one interpreter, the rest of the line one argument. */
  CHECK(sb("#!/bin/sh -e\nfalse\n", &s, &e) == 1 && !strcmp(s.interp, "/bin/sh") && !strcmp(s.arg, "-e"));
  CHECK(sb("#! /usr/bin/env  bash  \n", &s, &e) == 1 && !strcmp(s.interp, "/usr/bin/env") &&
        !strcmp(s.arg, "bash"));
  CHECK(sb("#!/usr/bin/env -S bash -e\n", &s, &e) == 1 && !strcmp(s.arg, "-S bash -e"));
  CHECK(sb("#!/bin/bash", &s, &e) == 1 && !strcmp(s.interp, "/bin/bash") && !s.arg[0]);
  CHECK(sb("#!\t/bin/bash\t\n", &s, &e) == 1 && !strcmp(s.interp, "/bin/bash") && !s.arg[0]);
  CHECK(sb("print(1)\n", &s, &e) == 0 && sb("", &s, &e) == 0 && sb("#", &s, &e) == 0);
  CHECK(sb("#!\n", &s, &e) < 0 && e.status == 126 && strstr(e.msg, "names no interpreter"));
  CHECK(sb("#!   \nx", &s, &e) < 0 && e.status == 126);
  /* The limit: a line of SHEBANG_MAX bytes or more without its newline. */
  char lng[SHEBANG_MAX + 1];
  memset(lng, 'a', sizeof lng);
  memcpy(lng, "#!/", 3);
  CHECK(shebang_parse(lng, SHEBANG_MAX, &s, &e) < 0 && e.status == 126 && strstr(e.msg, "longer than 255"));
  lng[SHEBANG_MAX - 1] = '\n';
  CHECK(shebang_parse(lng, SHEBANG_MAX, &s, &e) == 1 && strlen(s.interp) == SHEBANG_MAX - 3);

  /* A tree with /bin -> usr/bin, an executable, a symlinked one, one without x, a directory, and
   * a link out of the tree that must resolve inside it. */
  char tmpl[] = "/tmp/sbx-exec-prog-XXXXXX";
  CHECK(mkdtemp(tmpl) != NULL);
  CHECK(bufprintf(root, sizeof root, NULL, "%s", tmpl) == 0);
  dir("usr");
  dir("usr/bin");
  dir("usr/local");
  dir("usr/local/bin");
  dir("etc");
  link_("usr/bin", "bin");
  put("usr/bin/bash", 0755);
  put("usr/bin/python3.14", 0755);
  link_("python3.14", "usr/bin/python3");
  put("usr/bin/noexec", 0644);
  put("usr/local/bin/noexec", 0644);
  put("usr/bin/both", 0755);
  put("usr/local/bin/both", 0644);
  dir("usr/bin/adir");
  link_("loop2", "usr/bin/loop1");
  link_("loop1", "usr/bin/loop2");
  char fifo[PATH_MAX];
  CHECK(bufprintf(fifo, sizeof fifo, NULL, "%s/usr/bin/fifo", root) == 0 && mkfifo(fifo, 0755) == 0);
  link_("/etc/passwd", "usr/bin/hostlink"); /* the host has one; this tree does not */
  put("usr/bin/only-in-tree", 0755);        /* the host has none: a climb out would miss it */
  link_("../../../../../../usr/bin/only-in-tree", "usr/local/bin/climb");

  char *got = NULL;
  const char *path = "/usr/local/bin:/usr/bin:relative:/bin";
  CHECK(prog_find(root, path, "bash", &got, &e) == 0 && !strcmp(got, "/usr/bin/bash"));
  free(got);
  got = NULL;
  CHECK(prog_find(root, path, "python3", &got, &e) == 0 && !strcmp(got, "/usr/bin/python3"));
  free(got);
  got = NULL;
  /* A link that climbs out of the tree stays in it. */
  CHECK(prog_find(root, path, "climb", &got, &e) == 0 && !strcmp(got, "/usr/local/bin/climb"));
  free(got);
  got = NULL;
  /* The first executable wins over an earlier non-executable one, as in a shell. */
  CHECK(prog_find(root, path, "both", &got, &e) == 0 && !strcmp(got, "/usr/bin/both"));
  free(got);
  got = NULL;
  got = NULL;
  CHECK(prog_find(root, path, "nosuch", &got, &e) < 0 && e.status == 127 && !got &&
        strstr(e.msg, "`nosuch`: not found along the sandbox's PATH"));
  CHECK(prog_find(root, path, "noexec", &got, &e) < 0 && e.status == 126 &&
        strstr(e.msg, "not an executable"));
  CHECK(prog_find(root, path, "adir", &got, &e) < 0 && e.status == 126);
  CHECK(prog_find(root, path, "hostlink", &got, &e) < 0 && e.status == 127);
  CHECK(prog_find(root, path, "loop1", &got, &e) < 0 && e.status == 127);
  /* Not opened (nothing in the tree is, but directories): a FIFO neither hangs nor runs. */
  CHECK(prog_find(root, path, "fifo", &got, &e) < 0 && e.status == 126);
  /* Only absolute PATH entries: a relative one would be the workdir, not the rootfs. */
  CHECK(prog_find(root, "usr/bin", "bash", &got, &e) < 0 && e.status == 127);
  CHECK(prog_find(root, "", "bash", &got, &e) < 0 && e.status == 127);
  CHECK(prog_find("/nonexistent-root", path, "bash", &got, &e) < 0 && e.status == 125);

  char cmd[PATH_MAX + 16];
  CHECK(bufprintf(cmd, sizeof cmd, NULL, "rm -rf '%s'", root) == 0 && system(cmd) == 0);
  return check_summary("test_exec_prog");
}
