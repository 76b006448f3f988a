/* Unit tests for --bind/--bind-rw parsing, shared by exec and mcp (src/run/binds.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "run/binds.h"

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
        strstr(e.msg, "--bind source `/nonexistent-sbx`: No such file"));
  bind_opts_free(&b);
  return check_summary("test_binds");
}
