/* Unit tests for --bind/--bind-rw parsing, shared by exec and mcp (src/run/binds.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "run/binds.h"

static char base[64];

static const char *at(const char *rel)
{
  static char buf[4][256];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", base, rel);
  return buf[i];
}

static bool same_file(int fd, const char *path)
{
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Sources opened once (bind_source_open), refused inside a --bind-rw tree (bind_source_outside),
 * and opened again without links (hostfile_open_nofollow), as each sandbox does. */
static void sources(void)
{
  sbx_error_t e = {0};
  char *real = NULL;
  int fd = -1;
  CHECK(mkdir(at("rw"), 0755) == 0 && mkdir(at("rw/proj"), 0755) == 0 && mkdir(at("out"), 0755) == 0 &&
        mkdir(at("out/proj"), 0755) == 0 && mkdir(at("private"), 0755) == 0);
  CHECK(symlink(at("private"), at("rw/planted")) == 0 && symlink(at("out/proj"), at("mine")) == 0);
  FILE *f = fopen(at("out/proj/f.txt"), "w");
  CHECK(f && fclose(f) == 0);
  struct hostfile_tree trees[1];
  size_t n = 0;
  hostfile_guard_add(trees, &n, at("rw"));
  struct hostfile_guard rw = {.trees = trees, .n_trees = n};

  /* The user's own link is followed, once: the canonical path and the file it leads to. */
  CHECK(bind_source_open("--bind source", at("mine"), &rw, &real, &fd, &e) == 0 &&
        !strcmp(real, at("out/proj")) && same_file(fd, at("out/proj")));
  CHECK(bind_source_outside("--bind source", real, &rw, &e) == 0);
  free(real);
  close(fd);
  /* A file, not only a directory. */
  CHECK(bind_source_open("FILE", at("mine/f.txt"), &rw, &real, &fd, &e) == 0 &&
        !strcmp(real, at("out/proj/f.txt")));
  free(real);
  close(fd);
  /* A link inside the tree is not followed, at the end of the path or on the way. */
  CHECK(bind_source_open("--bind source", at("rw/planted"), &rw, &real, &fd, &e) == HOSTFILE_UNSAFE &&
        strstr(e.msg, "--bind source `") && strstr(e.msg, "it lies in a --bind-rw tree"));
  CHECK(bind_source_open("--bind source", at("rw/planted/x"), &rw, &real, &fd, &e) == HOSTFILE_UNSAFE);
  /* Without the tree it is followed (unprivileged, a sandbox's link is the user's own). */
  CHECK(bind_source_open("--bind source", at("rw/planted"), NULL, &real, &fd, &e) == 0 &&
        !strcmp(real, at("private")));
  free(real);
  close(fd);
  /* Inside the tree: refused; the tree itself, or a directory holding it: not. */
  CHECK(bind_source_outside("--bind source", at("rw/proj"), &rw, &e) == HOSTFILE_UNSAFE &&
        strstr(e.msg, "rw/proj` lies inside a --bind-rw tree"));
  CHECK(bind_source_outside("--bind source", at("rw"), &rw, &e) == 0);
  CHECK(bind_source_outside("--bind source", base, &rw, &e) == 0);
  CHECK(bind_source_outside("--bind source", "/", &rw, &e) == 0);

  /* Opened again, no link is followed: the canonical path of what was opened, and nothing else. */
  CHECK(hostfile_open_nofollow(at("out/proj"), &fd, &e) == 0 && same_file(fd, at("out/proj")));
  close(fd);
  CHECK(hostfile_open_nofollow(at("mine"), &fd, &e) < 0 && e.errnum == ELOOP);
  CHECK(hostfile_open_nofollow(at("mine/f.txt"), &fd, &e) < 0 && e.errnum == ELOOP);
  CHECK(hostfile_open_nofollow(at("out/../out/proj"), &fd, &e) < 0 && e.errnum == EINVAL);
  CHECK(hostfile_open_nofollow("relative", &fd, &e) < 0 && e.errnum == EINVAL);

  /* --bind and --bind-rw: each source held; one in another's tree refused, the tree again fine. */
  struct bind_opts b = {0};
  char arg[300];
  snprintf(arg, sizeof arg, "%s:/data", at("rw"));
  CHECK(bind_opts_add(&b, arg, true, &e) == 0);
  snprintf(arg, sizeof arg, "%s:/ro", at("rw"));
  CHECK(bind_opts_add(&b, arg, false, &e) == 0);
  snprintf(arg, sizeof arg, "%s:/p", at("mine"));
  CHECK(bind_opts_add(&b, arg, false, &e) == 0 && b.binds[2].fd == -1);
  CHECK(bind_opts_resolve(&b, &e) == 0 && b.n_rw_trees == 1 && same_file(b.binds[0].fd, at("rw")) &&
        same_file(b.binds[2].fd, at("out/proj")) && !strcmp(b.binds[2].src, at("out/proj")));
  bind_opts_free(&b);
  for (int rwi = 0; rwi < 2; rwi++) {
    snprintf(arg, sizeof arg, "%s:/data", at("rw"));
    CHECK(bind_opts_add(&b, arg, true, &e) == 0);
    snprintf(arg, sizeof arg, "%s:/proj", at("rw/proj"));
    CHECK(bind_opts_add(&b, arg, rwi, &e) == 0);
    CHECK(bind_opts_resolve(&b, &e) == HOSTFILE_UNSAFE &&
          strstr(e.msg, rwi ? "--bind-rw source `" : "--bind source `") &&
          strstr(e.msg, "inside a --bind-rw tree"));
    bind_opts_free(&b);
  }
}

int main(void)
{
  struct bind_opts b = {0};
  sbx_error_t e = {0};

  CHECK(bind_opts_add(&b, "/a:b:/data/", false, &e) == 0 && strcmp(b.binds[0].src, "/a:b") == 0 &&
        strcmp(b.binds[0].dst, "/data") == 0 && !b.binds[0].rw);
  CHECK(bind_opts_add(&b, "/tmp:/out", true, &e) == 0 && b.binds[1].rw);
  bind_opts_free(&b);
  CHECK(b.n == 0);

  /* The same refusals, and words, for exec and mcp. */
  CHECK(bind_opts_add(&b, "nocolon", false, &e) < 0 && strstr(e.msg, "--bind `nocolon`: expected SRC:DST"));
  CHECK(bind_opts_add(&b, "x:", true, &e) < 0 && strstr(e.msg, "--bind-rw `x:`"));
  CHECK(bind_opts_add(&b, ":/d", false, &e) < 0);
  CHECK(bind_opts_add(&b, "/a:/", false, &e) < 0 && strstr(e.msg, "DST must be an absolute path"));
  CHECK(bind_opts_add(&b, "/a:rel", false, &e) < 0);
  CHECK(bind_opts_add(&b, "/a:/w/../etc", false, &e) < 0);
  CHECK(bind_opts_add(&b, "/a:/w//x", false, &e) < 0);
  CHECK(b.n == 0);

  /* At most BIND_OPTS_MAX. */
  for (int i = 0; i < BIND_OPTS_MAX; i++)
    CHECK(bind_opts_add(&b, "/a:/d", false, &e) == 0);
  CHECK(bind_opts_add(&b, "/a:/d", false, &e) < 0 && strstr(e.msg, "at most 32"));
  bind_opts_free(&b);

  /* A destination of PATH_MAX bytes or more is refused, not cut short. */
  static char longarg[PATH_MAX + 16];
  memset(longarg, 'a', sizeof longarg - 1);
  memcpy(longarg, "/x:/", 4);
  CHECK(bind_opts_add(&b, longarg, false, &e) < 0 && e.errnum == ENAMETOOLONG);

  /* Sources resolve to their canonical path; a missing one names itself. */
  CHECK(bind_opts_add(&b, "/tmp/../tmp/:/t", false, &e) == 0 && bind_opts_resolve(&b, &e) == 0 &&
        strcmp(b.binds[0].src, "/tmp") == 0);
  bind_opts_free(&b);
  CHECK(bind_opts_add(&b, "/nonexistent-sbx:/t", false, &e) == 0 && bind_opts_resolve(&b, &e) < 0 &&
        strstr(e.msg, "--bind source `/nonexistent-sbx`: `nonexistent-sbx`: No such file"));
  bind_opts_free(&b);

  snprintf(base, sizeof base, "/tmp/sbx-binds-XXXXXX");
  CHECK(mkdtemp(base) != NULL);
  sources();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  CHECK(system(cmd) == 0);
  return check_summary("test_binds");
}
