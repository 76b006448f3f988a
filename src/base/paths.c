/* SPDX-License-Identifier: Apache-2.0 */
/* The install layout (paths.h): one function per path, each trying the environment, then the
 * build tree, then the installed layout, then the system default. */
#include "base/paths.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

/* Where python3 is looked for when the image's PATH does not say: python:3.14-slim has
 * /usr/local/bin/python3, Debian's python3 package /usr/bin/python3. */
static const char *const python_dirs[] = {"/usr/local/bin", "/usr/bin"};

static char bindir_override[PATH_MAX];

void paths_set_bindir(const char *dir)
{
  if (!dir || bufprintf(bindir_override, sizeof bindir_override, NULL, "%s", dir) < 0)
    bindir_override[0] = '\0';
}

int paths_exe(char out[PATH_MAX], sbx_error_t *err)
{
  ssize_t len = readlink("/proc/self/exe", out, PATH_MAX - 1);
  if (len <= 0) {
    out[0] = '\0';
    return sbx_error_errno(err, "readlink `/proc/self/exe`");
  }
  out[len] = '\0';
  return 0;
}

int paths_bindir(char out[PATH_MAX], sbx_error_t *err)
{
  if (bindir_override[0])
    return bufprintf(out, PATH_MAX, err, "%s", bindir_override);
  if (paths_exe(out, err) < 0)
    return -1;
  char *slash = strrchr(out, '/');
  if (slash)
    *slash = '\0';
  return 0;
}

static bool is_dir(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool paths_build_tree(void)
{
  char bin[PATH_MAX], src[PATH_MAX];
  struct stat st;
  return paths_bindir(bin, NULL) == 0 && bufprintf(src, sizeof src, NULL, "%s/../src/cli/main.c", bin) == 0 &&
         stat(src, &st) == 0;
}

/* The first of bindir/REL... that is a directory, made real; 1 if found, 0 if none. */
static int first_dir_beside_binary(const char *const *rels, size_t n, char out[PATH_MAX])
{
  char bin[PATH_MAX], cand[PATH_MAX];
  if (paths_bindir(bin, NULL) < 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    /* A candidate that does not fit is not one. */
    if (bufprintf(cand, sizeof cand, NULL, "%s/../%s", bin, rels[i]) == 0 && is_dir(cand) &&
        realpath(cand, out))
      return 1;
  return 0;
}

int paths_rootfs_store(char out[PATH_MAX], sbx_error_t *err)
{
  const char *env = getenv("SANDBOXD_ROOTFS_DIR");
  if (env && *env)
    return bufprintf(out, PATH_MAX, err, "%s", env) < 0 ? sbx_error_prefix(err, "SANDBOXD_ROOTFS_DIR") : 0;
  static const char *const rels[] = {"rootfs", "share/sandboxd/rootfs"};
  if (first_dir_beside_binary(rels, ARRAY_SIZE(rels), out))
    return 0;
  /* ROOT/usr/bin/sandboxd (the package, or its contents unpacked under ROOT): ROOT/var/lib/...,
   * which for ROOT=/ is the system store below. The binary's directory is already real (it is
   * /proc/self/exe's), so a lexical test does: one stat, and none for "/usr/bin" itself. */
  char bin[PATH_MAX], cand[PATH_MAX];
  size_t n;
  if (paths_bindir(bin, NULL) == 0 && (n = strlen(bin)) > 8 && !strcmp(bin + n - 8, "/usr/bin")) {
    bin[n - 8] = '\0';
    if (bufprintf(cand, sizeof cand, NULL, "%s" PATHS_SYSTEM_STORE, bin) == 0 && is_dir(cand))
      return bufprintf(out, PATH_MAX, err, "%s", cand);
  }
  return bufprintf(out, PATH_MAX, err, PATHS_SYSTEM_STORE);
}

int paths_rootfs_recipe(char out[PATH_MAX], sbx_error_t *err)
{
  char bin[PATH_MAX];
  if (paths_bindir(bin, err) < 0)
    return -1;
  /* build/sandboxd -> scripts/; PREFIX/bin/sandboxd -> PREFIX/libexec/sandboxd (make install). */
  static const char *const rels[] = {"scripts/build-rootfs", "libexec/sandboxd/build-rootfs"};
  for (size_t i = 0; i < ARRAY_SIZE(rels); i++) {
    char cand[PATH_MAX];
    struct stat st;
    if (bufprintf(cand, sizeof cand, NULL, "%s/../%s", bin, rels[i]) == 0 && stat(cand, &st) == 0 &&
        S_ISREG(st.st_mode) && realpath(cand, out))
      return 0;
  }
  return sbx_error_set(err, ENOENT,
                       "the rootfs recipe (build-rootfs) was not found next to sandboxd "
                       "(scripts/ or libexec/sandboxd/)");
}

bool paths_rootfs_is_name(const char *s)
{
  if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
          *s == '_' || *s == '-'))
      return false;
  return true;
}

static int cmp_names(const void *a, const void *b)
{
  return strcmp(*(char *const *) a, *(char *const *) b);
}

/* What the store holds, for the error: the trees `rootfs list` shows (NAME.json beside a
 * directory NAME), the first 32 read, sorted, ", "-separated, ", ..." when there are more or
 * they do not fit; "" if none. */
static void store_names(const char *store, char *out, size_t len)
{
  out[0] = '\0';
  DIR *d = opendir(store);
  if (!d || len < 8) {
    if (d)
      closedir(d);
    return;
  }
  char *names[32];
  size_t n = 0;
  bool more = false;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    char dir[PATH_MAX];
    if (l <= 5 || strcmp(de->d_name + l - 5, ".json") || de->d_name[0] == '.' ||
        bufprintf(dir, sizeof dir, NULL, "%s/%.*s", store, (int) (l - 5), de->d_name) < 0 || !is_dir(dir))
      continue;
    if (n == ARRAY_SIZE(names)) {
      more = true;
      break;
    }
    if ((names[n] = strndup(de->d_name, l - 5)))
      n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  /* The names in len - 5 bytes, so that ", ..." always fits after them. */
  bool cut = false;
  for (size_t i = 0; i < n; i++) {
    cut = cut || bufcatf(out, len - 5, NULL, "%s%s", i ? ", " : "", names[i]) < 0;
    free(names[i]);
  }
  more = more || cut;
  if (more && bufcatf(out, len, NULL, "%s...", out[0] ? ", " : "") < 0)
    out[0] = '\0'; /* cannot happen: the room was kept */
}

int rootfs_find(const char *requested, char **ret_path, sbx_error_t *err)
{
  return rootfs_find_for(requested, NULL, "python3", ret_path, err);
}

int rootfs_find_for(const char *requested, const char *store_name, const char *need, char **ret_path,
                    sbx_error_t *err)
{
  char cand[PATH_MAX], store[PATH_MAX] = "";
  const char *env = getenv("SANDBOXD_ROOTFS");
  if (!requested && store_name) {
    /* A language's own rootfs (lang.c): in the store, whatever $SANDBOXD_ROOTFS says. */
    if (paths_rootfs_store(store, err) < 0)
      return -1;
    if (bufprintf(cand, PATH_MAX, err, "%s/%s", store, store_name) < 0)
      return sbx_error_prefix(err, "rootfs `%s`", store_name);
    if (!is_dir(cand))
      return sbx_error_set(err, ENOENT, "rootfs `%s` not found in the rootfs store `%s`", store_name, store);
  } else if (requested && !strchr(requested, '/')) {
    /* A name: the tree of that name in the store (a path has a slash: ./NAME for one here). */
    if (!paths_rootfs_is_name(requested))
      return sbx_error_set(err, 0,
                           "--rootfs `%s`: not a rootfs name ([A-Za-z0-9._-], not . or ..) nor a path "
                           "(a path has a `/`)",
                           requested);
    if (paths_rootfs_store(store, err) < 0)
      return -1;
    if (bufprintf(cand, PATH_MAX, err, "%s/%s", store, requested) < 0)
      return sbx_error_prefix(err, "--rootfs");
    if (!is_dir(cand)) {
      char have[160]; /* the message is one line of at most 480 bytes (error.h) */
      store_names(store, have, sizeof have);
      return sbx_error_set(err, ENOENT, "--rootfs `%s`: no such rootfs in the store `%s` (%s%s)", requested,
                           store, have[0] ? "it has: " : "it has none", have);
    }
  } else if (requested) {
    if (bufprintf(cand, PATH_MAX, err, "%s", requested) < 0)
      return sbx_error_prefix(err, "--rootfs");
  } else if (env && *env) {
    if (bufprintf(cand, PATH_MAX, err, "%s", env) < 0)
      return sbx_error_prefix(err, "SANDBOXD_ROOTFS");
  } else {
    if (paths_rootfs_store(store, err) < 0)
      return -1;
    if (bufprintf(cand, PATH_MAX, err, "%s/%s", store, PATHS_DEFAULT_ROOTFS) < 0)
      return sbx_error_prefix(err, "the default rootfs");
  }
  bool build = paths_build_tree();
  char real[PATH_MAX], py[PATH_MAX + 32];
  if (realpath(cand, real) && is_dir(real)) {
    bool have = !need;
    struct stat st;
    for (size_t d = 0; d < ARRAY_SIZE(python_dirs) && !have; d++) {
      have =
          bufprintf(py, sizeof py, NULL, "%s%s/%s", real, python_dirs[d], need) == 0 && lstat(py, &st) == 0;
    }
    if (!have) {
      sbx_error_set(err, ENOENT, "rootfs `%s` has no %s in /usr/local/bin or /usr/bin", real, need);
      return sbx_error_hint(
          err, "%s", build ? "rebuild it with `make rootfs`" : "build it again with `sandboxd rootfs build`");
    }
    if (!(*ret_path = strdup(real)))
      return sbx_error_set(err, ENOMEM, "rootfs");
    return 0;
  }
  if (requested)
    return sbx_error_set(err, ENOENT, "rootfs `%s` not found", requested);
  if (env && *env)
    return sbx_error_set(err, ENOENT, "rootfs `%s` ($SANDBOXD_ROOTFS) not found", env);
  sbx_error_set(err, ENOENT, "no rootfs found: `%s` in the rootfs store `%s`", PATHS_DEFAULT_ROOTFS, store);
  return sbx_error_hint(err, "%s or pass --rootfs DIR (see sandboxd doctor)",
                        build ? "run `make rootfs`" : PATHS_GET_ROOTFS);
}

int paths_policy_search(char *buf, size_t len, sbx_error_t *err)
{
  const char *env = getenv("SANDBOXD_POLICY_DIR");
  char bin[PATH_MAX];
  if (paths_bindir(bin, NULL) < 0)
    bin[0] = '.', bin[1] = '\0';
  /* build/sandboxd -> policy/; PREFIX/bin/sandboxd -> PREFIX/share/sandboxd/policy. */
  return bufprintf(buf, len, err, "%s%s%s/../policy:%s/../share/sandboxd/policy:/etc/sandboxd/policy",
                   env && *env ? env : "", env && *env ? ":" : "", bin, bin);
}

int paths_python_dir(char **ret_path, sbx_error_t *err)
{
  char cand[3][PATH_MAX];
  int n = 0;
  const char *env = getenv("SANDBOXD_PYTHON_DIR");
  if (env && *env && bufprintf(cand[n++], PATH_MAX, err, "%s", env) < 0)
    return sbx_error_prefix(err, "SANDBOXD_PYTHON_DIR");
  char bin[PATH_MAX];
  if (paths_bindir(bin, NULL) == 0) {
    /* build/sandboxd -> src/inside; PREFIX/bin/sandboxd -> PREFIX/share/sandboxd/python. */
    static const char *const rels[] = {"src/inside", "share/sandboxd/python"};
    for (size_t i = 0; i < ARRAY_SIZE(rels); i++)
      /* A candidate that does not fit is not one. */
      n += bufprintf(cand[n], PATH_MAX, NULL, "%s/../%s", bin, rels[i]) == 0;
  }
  for (int i = 0; i < n; i++) {
    char real[PATH_MAX], pkg[PATH_MAX + 32];
    struct stat st;
    if (!realpath(cand[i], real))
      continue;
    if (bufprintf(pkg, sizeof pkg, NULL, "%s/mcp/__init__.py", real) < 0 || stat(pkg, &st) < 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (!(*ret_path = strdup(real)))
      return sbx_error_set(err, ENOMEM, "python dir");
    return 0;
  }
  return sbx_error_set(err, ENOENT,
                       "the sandbox's Python helpers (mcp package) were not found next to sandboxd "
                       "(src/inside or share/sandboxd/python)");
}

/* $XDG_x_HOME/sandboxd if absolute, else $HOME/home_rel; ENOENT if neither is absolute. */
static int user_dir(const char *xdg_var, const char *home_rel, char out[PATH_MAX], sbx_error_t *err)
{
  const char *xdg = getenv(xdg_var), *home = getenv("HOME");
  if (xdg && xdg[0] == '/')
    return bufprintf(out, PATH_MAX, err, "%s/sandboxd", xdg) < 0 ? sbx_error_prefix(err, "$%s", xdg_var) : 0;
  if (home && home[0] == '/')
    return bufprintf(out, PATH_MAX, err, "%s/%s", home, home_rel) < 0 ? sbx_error_prefix(err, "$HOME") : 0;
  out[0] = '\0';
  return sbx_error_set(err, ENOENT, "neither $%s nor $HOME is an absolute path", xdg_var);
}

int paths_config_dir(char out[PATH_MAX], sbx_error_t *err)
{
  const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  if (xdg && *xdg)
    return bufprintf(out, PATH_MAX, err, "%s/sandboxd", xdg);
  return bufprintf(out, PATH_MAX, err, "%s/.config/sandboxd", home ? home : "/");
}

int paths_state_dir(char out[PATH_MAX], sbx_error_t *err)
{
  if (geteuid() == 0)
    return bufprintf(out, PATH_MAX, err, "/var/log/sandboxd");
  return user_dir("XDG_STATE_HOME", ".local/state/sandboxd", out, err);
}

int paths_cache_dir(char out[PATH_MAX], sbx_error_t *err)
{
  const char *env = getenv("SANDBOXD_CACHE_DIR");
  if (env && !*env) {
    out[0] = '\0';
    return sbx_error_set(err, ENOENT, "SANDBOXD_CACHE_DIR is empty: no cache");
  }
  if (env)
    return bufprintf(out, PATH_MAX, err, "%s", env) < 0 ? sbx_error_prefix(err, "SANDBOXD_CACHE_DIR") : 0;
  if (geteuid() == 0)
    return bufprintf(out, PATH_MAX, err, "/var/cache/sandboxd");
  return user_dir("XDG_CACHE_HOME", ".cache/sandboxd", out, err);
}
