/* Unit tests for the install layout (src/base/paths.c): each lookup for the build tree, the installed
 * layout and the environment, in a scratch tree standing in for the binary's directory. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/paths.h"
#include "base/util.h"
#include "check.h"

static char root[PATH_MAX];

/* mkdir -p root/rel (and an empty file when rel ends in a name with a dot). */
static void make(const char *rel, int file)
{
  char path[PATH_MAX * 2], cmd[PATH_MAX * 2 + 32];
  if (bufprintf(path, sizeof path, NULL, "%s/%s", root, rel) < 0 ||
      bufprintf(cmd, sizeof cmd, NULL, file ? "mkdir -p \"$(dirname '%s')\" && : > '%s'" : "mkdir -p '%s'",
                path, path) < 0 ||
      system(cmd) != 0)
    abort();
}

static int under(const char *path, const char *rel)
{
  char want[PATH_MAX * 2];
  return path && bufprintf(want, sizeof want, NULL, "%s/%s", root, rel) == 0 && strcmp(path, want) == 0;
}

static void clean_env(void)
{
  static const char *const vars[] = {
      "SANDBOXD_ROOTFS",    "SANDBOXD_ROOTFS_DIR", "SANDBOXD_POLICY_DIR", "SANDBOXD_PYTHON_DIR",
      "SANDBOXD_CACHE_DIR", "XDG_CACHE_HOME",      "XDG_STATE_HOME",      "HOME"};
  for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
    unsetenv(vars[i]);
}

static void test_rootfs(void)
{
  char store[PATH_MAX], bin[PATH_MAX];
  sbx_error_t err = {0};
  char *found = NULL;

  /* Installed: PREFIX/bin/sandboxd, no store beside it -> the system store. */
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/inst/bin", root) == 0);
  make("inst/bin", 0);
  paths_set_bindir(bin);
  CHECK(paths_rootfs_store(store, &err) == 0 && strcmp(store, "/var/lib/sandboxd/rootfs") == 0);
  CHECK(!paths_build_tree());
  /* PREFIX/share/sandboxd/rootfs, once it exists, is the store, and the default rootfs is in it:
   * `rootfs list` and exec agree. */
  make("inst/share/sandboxd/rootfs/python-3.14-slim/usr/local/bin/python3", 1);
  CHECK(paths_rootfs_store(store, &err) == 0 && under(store, "inst/share/sandboxd/rootfs"));
  CHECK(rootfs_find(NULL, &found, &err) == 0 && under(found, "inst/share/sandboxd/rootfs/python-3.14-slim"));
  free(found), found = NULL;

  /* $SANDBOXD_ROOTFS_DIR is the store for both as well. */
  make("elsewhere/python-3.14-slim/usr/bin/python3", 1);
  char dir[PATH_MAX];
  CHECK(bufprintf(dir, sizeof dir, NULL, "%s/elsewhere", root) == 0);
  setenv("SANDBOXD_ROOTFS_DIR", dir, 1);
  CHECK(paths_rootfs_store(store, &err) == 0 && under(store, "elsewhere"));
  CHECK(rootfs_find(NULL, &found, &err) == 0 && under(found, "elsewhere/python-3.14-slim"));
  free(found), found = NULL;
  /* $SANDBOXD_ROOTFS names the rootfs itself, before the store; --rootfs before both. */
  char one[PATH_MAX];
  CHECK(bufprintf(one, sizeof one, NULL, "%s/inst/share/sandboxd/rootfs/python-3.14-slim", root) == 0);
  setenv("SANDBOXD_ROOTFS", one, 1);
  CHECK(rootfs_find(NULL, &found, &err) == 0 && strcmp(found, one) == 0);
  free(found), found = NULL;
  CHECK(bufprintf(one, sizeof one, NULL, "%s/elsewhere/python-3.14-slim", root) == 0);
  CHECK(rootfs_find(one, &found, &err) == 0 && strcmp(found, one) == 0);
  free(found), found = NULL;
  clean_env();

  /* A rootfs without python3 is refused, and an installed user is told a command they have. */
  make("noproc/share/sandboxd/rootfs/python-3.14-slim/usr/bin", 0);
  make("noproc/bin", 0);
  make("none/bin", 0);
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/noproc/bin", root) == 0);
  paths_set_bindir(bin);
  CHECK(rootfs_find(NULL, &found, &err) < 0 && err.errnum == ENOENT && strstr(err.msg, "has no python3") &&
        strstr(err.msg, "sandboxd rootfs build") && !strstr(err.msg, "make rootfs"));
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/none/bin", root) == 0);
  paths_set_bindir(bin);
  /* (The system store, not this host's: /var/lib/sandboxd/rootfs may hold one.) */
  setenv("SANDBOXD_ROOTFS_DIR", "/nonexistent-store", 1);
  CHECK(rootfs_find(NULL, &found, &err) < 0 && err.errnum == ENOENT && strstr(err.msg, "no rootfs found") &&
        !strstr(err.msg, "make rootfs"));
  /* The hint follows the errno text. */
  CHECK(strstr(err.msg,
               "no rootfs found: `python-3.14-slim` in the rootfs store `/nonexistent-store`: No such "
               "file or directory; build one with `sandboxd rootfs build` (offline, from Debian packages) "
               "or pull one with `sandboxd rootfs fetch` or pass --rootfs DIR") &&
        strstr(err.msg, "(see sandboxd doctor)") == err.msg + strlen(err.msg) - 21);
  unsetenv("SANDBOXD_ROOTFS_DIR");

  /* The package's contents unpacked under ROOT (dpkg -x): ROOT/usr/bin/sandboxd uses
   * ROOT/var/lib/sandboxd/rootfs once it exists, and only for a binary in a usr/bin. */
  make("pkg/usr/bin", 0);
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/pkg/usr/bin", root) == 0);
  paths_set_bindir(bin);
  CHECK(paths_rootfs_store(store, &err) == 0 && strcmp(store, "/var/lib/sandboxd/rootfs") == 0);
  make("pkg/var/lib/sandboxd/rootfs", 0);
  CHECK(paths_rootfs_store(store, &err) == 0 && under(store, "pkg/var/lib/sandboxd/rootfs"));
  make("notusr/bin", 0);
  make("var/lib/sandboxd/rootfs", 0);
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/notusr/bin", root) == 0);
  paths_set_bindir(bin);
  CHECK(paths_rootfs_store(store, &err) == 0 && strcmp(store, "/var/lib/sandboxd/rootfs") == 0);
  CHECK(rootfs_find("/nonexistent-rootfs", &found, &err) < 0 &&
        strstr(err.msg, "`/nonexistent-rootfs` not found"));

  /* The build tree: build/sandboxd in a clone (src/cli/main.c beside it), the store is rootfs/. */
  make("clone/src/cli/main.c", 1);
  make("clone/build", 0);
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/clone/build", root) == 0);
  paths_set_bindir(bin);
  CHECK(paths_build_tree());
  CHECK(rootfs_find(NULL, &found, &err) < 0 && strstr(err.msg, "make rootfs"));
  make("clone/rootfs/python-3.14-slim/usr/local/bin/python3", 1);
  CHECK(paths_rootfs_store(store, &err) == 0 && under(store, "clone/rootfs"));
  CHECK(rootfs_find(NULL, &found, &err) == 0 && under(found, "clone/rootfs/python-3.14-slim"));
  free(found), found = NULL;

  /* --rootfs NAME: a tree in the store (the build tree's rootfs/ here, $SANDBOXD_ROOTFS_DIR
   * alike); a path has a slash, so ./NAME is the directory here, not the store's. */
  make("clone/rootfs/python-3.14-data/usr/bin/python3", 1);
  make("clone/rootfs/python-3.14-data.json", 1);
  make("clone/rootfs/python-3.14-slim.json", 1);
  make("clone/rootfs/python-3.14-slim.oci", 0);
  make("clone/rootfs/stray.json", 1);
  CHECK(rootfs_find("python-3.14-data", &found, &err) == 0 && under(found, "clone/rootfs/python-3.14-data"));
  free(found), found = NULL;
  setenv("SANDBOXD_ROOTFS", "/nonexistent-rootfs", 1); /* --rootfs wins, as for a path */
  CHECK(rootfs_find("python-3.14-slim", &found, &err) == 0 && under(found, "clone/rootfs/python-3.14-slim"));
  free(found), found = NULL;
  unsetenv("SANDBOXD_ROOTFS");
  /* An unknown name: one line listing what the store has (trees with metadata, sorted). */
  CHECK(rootfs_find("python-3.13-slim", &found, &err) < 0 && err.errnum == ENOENT && !found);
  CHECK(strstr(err.msg, "--rootfs `python-3.13-slim`: no such rootfs in the store `") &&
        strstr(err.msg, "/clone/rootfs` (it has: python-3.14-data, python-3.14-slim)") &&
        !strchr(err.msg, '\n'));
  CHECK(rootfs_find("python-3.14-slim.json", &found, &err) < 0 && strstr(err.msg, "no such rootfs"));
  /* At most 32 names, then ", ...". */
  char many[PATH_MAX * 2];
  for (int i = 0; i < 40; i++) {
    CHECK(bufprintf(many, sizeof many, NULL, "clone/rootfs/t%02d/usr/bin/python3", i) == 0);
    make(many, 1);
    CHECK(bufprintf(many, sizeof many, NULL, "clone/rootfs/t%02d.json", i) == 0);
    make(many, 1);
  }
  CHECK(rootfs_find("python-3.13-slim", &found, &err) < 0 && strstr(err.msg, ", ...)") &&
        strlen(strstr(err.msg, "(it has: ")) < 200);
  setenv("SANDBOXD_ROOTFS_DIR", "/nonexistent-store", 1);
  CHECK(rootfs_find("python-3.14-data", &found, &err) < 0 &&
        strstr(err.msg, "`/nonexistent-store` (it has none)"));
  unsetenv("SANDBOXD_ROOTFS_DIR");
  /* Not a name, not a path: refused before any lookup. */
  static const char *const bad[] = {".", "..", "", "a b", "x\n", "data;rm", "\xc3\xa9"};
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    CHECK(!paths_rootfs_is_name(bad[i]));
    CHECK(rootfs_find(bad[i], &found, &err) < 0 && strstr(err.msg, "not a rootfs name") && !found);
  }
  CHECK(paths_rootfs_is_name("...") && paths_rootfs_is_name("A-z_0.9"));
  /* A slash makes it a path: `..`-relative and ./ paths are as before. */
  CHECK(chdir(root) == 0);
  CHECK(rootfs_find("./clone/rootfs/python-3.14-data", &found, &err) == 0 &&
        under(found, "clone/rootfs/python-3.14-data"));
  free(found);
}

static void test_policy_and_python(void)
{
  char bin[PATH_MAX], buf[PATH_MAX * 3], want[PATH_MAX * 3];
  sbx_error_t err = {0};
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/clone/build", root) == 0);
  paths_set_bindir(bin);
  CHECK(paths_policy_search(buf, sizeof buf, &err) == 0);
  CHECK(bufprintf(want, sizeof want, NULL, "%s/../policy:%s/../share/sandboxd/policy:/etc/sandboxd/policy",
                  bin, bin) == 0);
  CHECK(strcmp(buf, want) == 0);
  setenv("SANDBOXD_POLICY_DIR", "/my/policies", 1);
  CHECK(paths_policy_search(buf, sizeof buf, &err) == 0 && strncmp(buf, "/my/policies:", 13) == 0 &&
        strcmp(buf + 13, want) == 0);
  /* Too long: an error, never a cut directory. */
  char small[16];
  CHECK(paths_policy_search(small, sizeof small, &err) < 0 && err.errnum == ENAMETOOLONG && small[0] == '\0');
  clean_env();

  /* The helpers: none yet; then the build tree's (an old src/sandbox is not one); the installed ones. */
  char *dir = NULL;
  CHECK(paths_python_dir(&dir, &err) < 0 && err.errnum == ENOENT);
  make("clone/src/sandbox/mcp/__init__.py", 1);
  CHECK(paths_python_dir(&dir, &err) < 0 && err.errnum == ENOENT);
  make("clone/src/inside/mcp/__init__.py", 1);
  CHECK(paths_python_dir(&dir, &err) == 0 && under(dir, "clone/src/inside"));
  free(dir), dir = NULL;
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/inst/bin", root) == 0);
  paths_set_bindir(bin);
  make("inst/share/sandboxd/python/mcp/__init__.py", 1);
  CHECK(paths_python_dir(&dir, &err) == 0 && under(dir, "inst/share/sandboxd/python"));
  free(dir), dir = NULL;
  /* $SANDBOXD_PYTHON_DIR first, if it holds the package. */
  char env[PATH_MAX];
  CHECK(bufprintf(env, sizeof env, NULL, "%s/clone/src/sandbox", root) == 0);
  setenv("SANDBOXD_PYTHON_DIR", env, 1);
  CHECK(paths_python_dir(&dir, &err) == 0 && under(dir, "clone/src/sandbox"));
  free(dir);
  clean_env();
}

/* build-rootfs: scripts/ in the build tree, libexec/sandboxd/ when installed, nothing else. */
static void test_recipe(void)
{
  char bin[PATH_MAX], out[PATH_MAX];
  sbx_error_t err = {0};
  make("rcp/bin", 0);
  CHECK(bufprintf(bin, sizeof bin, NULL, "%s/rcp/bin", root) == 0);
  paths_set_bindir(bin);
  CHECK(paths_rootfs_recipe(out, &err) < 0 && err.errnum == ENOENT && strstr(err.msg, "libexec/sandboxd"));
  make("rcp/libexec/sandboxd/build-rootfs", 1);
  CHECK(paths_rootfs_recipe(out, &err) == 0 && under(out, "rcp/libexec/sandboxd/build-rootfs"));
  make("rcp/scripts/build-rootfs", 1);
  CHECK(paths_rootfs_recipe(out, &err) == 0 && under(out, "rcp/scripts/build-rootfs"));
}

static void test_state_and_cache(void)
{
  char out[PATH_MAX];
  sbx_error_t err = {0};
  bool root_user = geteuid() == 0;
  clean_env();
  CHECK(paths_cache_dir(out, &err) == (root_user ? 0 : -1));
  CHECK(paths_state_dir(out, &err) == (root_user ? 0 : -1));
  if (!root_user)
    CHECK(err.errnum == ENOENT);
  setenv("HOME", "/home/u", 1);
  CHECK(paths_cache_dir(out, &err) == 0 &&
        !strcmp(out, root_user ? "/var/cache/sandboxd" : "/home/u/.cache/sandboxd"));
  CHECK(paths_state_dir(out, &err) == 0 &&
        !strcmp(out, root_user ? "/var/log/sandboxd" : "/home/u/.local/state/sandboxd"));
  CHECK(paths_config_dir(out, &err) == 0 && !strcmp(out, "/home/u/.config/sandboxd"));
  setenv("XDG_CONFIG_HOME", "/x/config", 1);
  CHECK(paths_config_dir(out, &err) == 0 && !strcmp(out, "/x/config/sandboxd"));
  unsetenv("XDG_CONFIG_HOME");
  /* XDG_CACHE_HOME and XDG_STATE_HOME only if absolute. */
  setenv("XDG_CACHE_HOME", "relative", 1);
  setenv("XDG_STATE_HOME", "relative", 1);
  CHECK(paths_cache_dir(out, &err) == 0 &&
        !strcmp(out, root_user ? "/var/cache/sandboxd" : "/home/u/.cache/sandboxd"));
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  setenv("XDG_STATE_HOME", "/x/state", 1);
  CHECK(paths_cache_dir(out, &err) == 0 &&
        !strcmp(out, root_user ? "/var/cache/sandboxd" : "/x/cache/sandboxd"));
  CHECK(paths_state_dir(out, &err) == 0 &&
        !strcmp(out, root_user ? "/var/log/sandboxd" : "/x/state/sandboxd"));
  /* $SANDBOXD_CACHE_DIR wins for everyone; set but empty: no cache. */
  setenv("SANDBOXD_CACHE_DIR", "/c", 1);
  CHECK(paths_cache_dir(out, &err) == 0 && !strcmp(out, "/c"));
  setenv("SANDBOXD_CACHE_DIR", "", 1);
  CHECK(paths_cache_dir(out, &err) < 0 && err.errnum == ENOENT && out[0] == '\0');
  /* Too long: ENAMETOOLONG, nothing cut. */
  static char lng[PATH_MAX + 8];
  memset(lng, 'a', sizeof lng - 1);
  lng[0] = '/';
  setenv("SANDBOXD_CACHE_DIR", lng, 1);
  CHECK(paths_cache_dir(out, &err) < 0 && err.errnum == ENAMETOOLONG && out[0] == '\0');
  if (!root_user) {
    setenv("XDG_STATE_HOME", lng, 1);
    CHECK(paths_state_dir(out, &err) < 0 && err.errnum == ENAMETOOLONG && out[0] == '\0');
  }
  clean_env();
}

int main(void)
{
  char tmpl[] = "/tmp/sandboxd-test-paths.XXXXXX";
  if (!mkdtemp(tmpl) || !realpath(tmpl, root))
    return 1;
  clean_env();
  test_rootfs();
  test_policy_and_python();
  test_recipe();
  test_state_and_cache();
  paths_set_bindir(NULL);
  char bin[PATH_MAX];
  sbx_error_t err;
  CHECK(paths_bindir(bin, &err) == 0 && bin[0] == '/'); /* the test binary's own directory */
  char exe[PATH_MAX];
  CHECK(paths_exe(exe, &err) == 0 && strncmp(exe, bin, strlen(bin)) == 0 &&
        !strcmp(exe + strlen(bin), "/test_paths"));
  char cmd[PATH_MAX + 16];
  if (bufprintf(cmd, sizeof cmd, NULL, "rm -rf '%s'", root) == 0 && system(cmd) != 0)
    CHECK(!"rm");
  return check_summary("test_paths");
}
