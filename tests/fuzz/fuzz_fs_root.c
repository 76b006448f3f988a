/* libFuzzer target: resolving inside a root (fs_root.c), the code that keeps an image's paths and
 * symlinks inside the tree being built. The input is a symlink target and a path ("TARGET\0PATH",
 * or just PATH): the target is planted as root/a/b/fz, next to fixed links that aim out of the root
 * every way there is, then PATH is resolved as a directory and opened as a file, with openat2 and
 * with the fallback walk. Whatever the input:
 *   - whatever is opened is inside the root (its /proc/self/fd path starts with the root's);
 *   - the two resolvers agree: both fail, or both open the same inode;
 *   - a lexical join of the target is relative and has no ".", ".." or empty component. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/fs_root.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[PATH_MAX], root[PATH_MAX];
static int basefd = -1;
static struct fs_root r2, rw; /* openat2, the fallback walk */

static void cleanup(void);

static void die(const char *what, const char *detail)
{
  fprintf(stderr, "fuzz_fs_root: %s: %s\n", what, detail);
  cleanup(); /* abort() runs no atexit handler */
  abort();
}

static void at(char *out, const char *rel)
{
  if ((size_t) snprintf(out, PATH_MAX, "%s/%s", base, rel) >= PATH_MAX)
    die("path too long", rel);
}

static void plant(const char *target, const char *rel)
{
  char p[PATH_MAX];
  at(p, rel);
  if (symlink(target, p) < 0)
    die("symlink", p);
}

static void make(const char *rel, bool dir)
{
  char p[PATH_MAX];
  at(p, rel);
  int fd = dir ? mkdir(p, 0755) : open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    die("create", p);
  if (!dir)
    close(fd);
}

static void cleanup(void)
{
  if (basefd >= 0) {
    fs_remove_tree(basefd, "root");
    fs_remove_tree(basefd, "outside");
    close(basefd);
    rmdir(base);
    basefd = -1;
  }
}

static void setup(void)
{
  const char *tmp = getenv("TMPDIR");
  if ((size_t) snprintf(base, sizeof base, "%s/fuzz-fs-root-XXXXXX", tmp && *tmp ? tmp : "/tmp") >= sizeof base ||
      !mkdtemp(base) || !realpath(base, root))
    die("mkdtemp", base);
  memcpy(base, root, sizeof base);
  basefd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
  atexit(cleanup);
  static const char *dirs[] = { "outside", "outside/odir", "root", "root/a", "root/a/b", "root/a/b/c", "root/etc" };
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
    make(dirs[i], true);
  make("outside/secret", false);
  make("root/f", false);
  make("root/a/file", false);
  make("root/etc/secret", false);
  char out[PATH_MAX + 16];
  at(out, "outside");
  plant(out, "root/host");          /* the host path of outside/ */
  plant("/etc", "root/abs");
  plant("../../..", "root/a/up");
  plant("../outside", "root/rel");
  plant("../../../outside/secret", "root/a/b/relf");
  plant("loop", "root/loop");
  plant(".", "root/self");
  plant("..", "root/a/dotdot");
  plant("a/b", "root/l1");
  plant("l1/c/../../up/rel", "root/l2");
  plant("a/file", "root/fl");
  plant("nowhere", "root/dangling");
  at(root, "root");
  if (fs_root_open(basefd, "root", &r2, false, &(sbx_error_t){ 0 }) < 0 ||
      fs_root_open(basefd, "root", &rw, true, &(sbx_error_t){ 0 }) < 0)
    die("open root", root);
}

/* fd (if any) is inside the root; returns its inode (0 for a failure) and closes it. */
static ino_t inside(int fd, const char *what, const char *path)
{
  if (fd < 0)
    return 0;
  char proc[64], real[PATH_MAX + 1];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(proc, real, sizeof real - 1);
  struct stat st;
  if (n < 0 || fstat(fd, &st) < 0)
    die("readlink/fstat", proc);
  real[n] = '\0';
  size_t rl = strlen(root);
  if (strncmp(real, root, rl) || (real[rl] && real[rl] != '/')) {
    fprintf(stderr, "%s `%s` opened `%s`\n", what, path, real);
    die("outside the root", real);
  }
  close(fd);
  return st.st_ino;
}

static void check_join(const char *target)
{
  char out[PATH_MAX];
  if (fs_join_in_root("a/b", target, out) < 0)
    return;
  if (out[0] == '/' || strstr(out, "//") || (*out && out[strlen(out) - 1] == '/'))
    die("join: not a clean relative path", out);
  for (const char *c = out; *c;) {
    const char *e = strchrnul(c, '/');
    if ((e - c == 1 && c[0] == '.') || (e - c == 2 && c[0] == '.' && c[1] == '.'))
      die("join: `.` or `..` component", out);
    c = *e ? e + 1 : e;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (basefd < 0)
    setup();
  char in[2 * PATH_MAX];
  if (size >= sizeof in)
    return 0;
  memcpy(in, data, size);
  in[size] = '\0';
  const char *nul = memchr(in, '\0', size);
  const char *target = nul ? in : NULL, *path = nul ? nul + 1 : in;
  /* Callers pass normalised names (image_path_normalize): shorter than PATH_MAX. */
  if (strlen(path) >= PATH_MAX)
    return 0;
  char fz[PATH_MAX];
  at(fz, "root/a/b/fz");
  bool planted = target && *target && strlen(target) < PATH_MAX && symlink(target, fz) == 0;
  if (target)
    check_join(target);

  int e2, ew;
  int fd = fs_root_resolve_dir(&r2, path);
  e2 = errno;
  ino_t i2 = inside(fd, "resolve_dir (openat2)", path);
  fd = fs_root_resolve_dir(&rw, path);
  ew = errno;
  ino_t iw = inside(fd, "resolve_dir (walk)", path);
  if (i2 != iw) {
    fprintf(stderr, "resolve_dir `%s`: openat2 %s (%s), walk %s (%s)\n", path, i2 ? "opened" : "failed",
            strerror(e2), iw ? "opened" : "failed", strerror(ew));
    die("resolvers disagree", path);
  }
  i2 = inside(fs_root_open_file(&r2, path), "open_file (openat2)", path);
  iw = inside(fs_root_open_file(&rw, path), "open_file (walk)", path);
  if (i2 != iw)
    die("open_file: resolvers disagree", path);
  if (planted)
    unlink(fz);
  return 0;
}
