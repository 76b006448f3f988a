/* Unit tests for fs_root.c: lookups stay inside the root, under openat2 and the fallback walk
 * alike; removal never follows a symlink out and copes with deep trees. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "image/fs_root.h"

static char base[64];

static const char *at(const char *rel)
{
  static char buf[4][PATH_MAX];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", base, rel);
  return buf[i];
}

static void mk(const char *rel, const char *content)
{
  FILE *f = fopen(at(rel), "w");
  CHECK(f && fputs(content, f) >= 0 && fclose(f) == 0);
}

/* fd (consumed) is the file at base/rel itself, not some other one. -1 and a failed check if not. */
static int same(int fd, const char *rel)
{
  struct stat a, b;
  int ok = fd >= 0 && fstat(fd, &a) == 0 && lstat(at(rel), &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
  if (fd >= 0)
    close(fd);
  return ok;
}

static int fails(int fd, int want_errno)
{
  int e = errno;
  if (fd >= 0)
    close(fd);
  return fd < 0 && e == want_errno;
}

static int join(const char *dir, const char *target, const char *want)
{
  char out[PATH_MAX];
  if (fs_join_in_root(dir, target, out) < 0)
    return want == NULL;
  return want && !strcmp(out, want);
}

static void pure(void)
{
  CHECK(join("a/b", "c", "a/b/c"));
  CHECK(join("a/b", "../c", "a/c"));
  CHECK(join("a/b", "../../../../etc/passwd", "etc/passwd")); /* clamped at the root */
  CHECK(join("a/b", "/etc/../../x", "x"));                    /* absolute: from the root */
  CHECK(join("", "..", ""));
  CHECK(join("a", "./b/./", "a/b"));
  CHECK(join("a", "b//c", "a/b/c"));
  static char longt[PATH_MAX + 2];
  memset(longt, 'x', PATH_MAX);
  CHECK(join("a", longt, NULL));
  longt[PATH_MAX - 2] = '\0'; /* "a/" and PATH_MAX-2 bytes: no room for the NUL */
  CHECK(join("a", longt, NULL));
  longt[PATH_MAX - 3] = '\0'; /* the longest that fits */
  char out[PATH_MAX];
  CHECK(fs_join_in_root("a", longt, out) == 0 && strlen(out) == PATH_MAX - 1);

  char dir[PATH_MAX];
  const char *b;
  fs_split_path("a/b/c", dir, &b);
  CHECK(!strcmp(dir, "a/b") && !strcmp(b, "c"));
  fs_split_path("top", dir, &b);
  CHECK(!strcmp(dir, "") && !strcmp(b, "top"));
}

/* root/ and outside/ side by side; the symlinks in root aim out of it every way they can. */
static void build(void)
{
  CHECK(mkdir(at("outside"), 0755) == 0 && mkdir(at("outside/odir"), 0755) == 0);
  mk("outside/secret", "secret\n");
  CHECK(mkdir(at("root"), 0755) == 0 && mkdir(at("root/dir"), 0755) == 0 && mkdir(at("root/etc"), 0755) == 0);
  mk("root/dir/file", "inside\n");
  mk("root/etc/secret", "decoy\n");
  CHECK(symlink("/etc", at("root/abs")) == 0);            /* absolute: the root's etc */
  CHECK(symlink(at("outside"), at("root/hostabs")) == 0); /* the host path of outside/ */
  CHECK(symlink("../../../..", at("root/dir/up")) == 0);  /* climbs to the root, no further */
  CHECK(symlink("../outside", at("root/rel")) == 0);      /* root's parent's outside/ */
  CHECK(symlink("../outside/secret", at("root/relfile")) == 0);
  CHECK(symlink("dir/file", at("root/flink")) == 0);
  CHECK(symlink("loop", at("root/loop")) == 0);
  CHECK(symlink("nowhere/at/all", at("root/dangling")) == 0);
  CHECK(mkfifo(at("root/fifo"), 0600) == 0);
  /* A chain of 41 links: one more than the kernel follows. */
  char name[32], target[32];
  for (int i = 0; i <= 40; i++) {
    snprintf(name, sizeof name, "root/c%d", i);
    snprintf(target, sizeof target, i == 40 ? "dir" : "c%d", i + 1);
    CHECK(symlink(target, at(name)) == 0);
  }
}

static void resolve(bool fallback)
{
  sbx_error_t err = {0};
  struct fs_root r;
  int basefd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(basefd >= 0 && fs_root_open(basefd, "root", &r, fallback, &err) == 0);
  close(basefd);

  CHECK(same(fs_root_resolve_dir(&r, ""), "root"));
  CHECK(same(fs_root_resolve_dir(&r, "dir"), "root/dir"));
  CHECK(same(fs_root_resolve_dir(&r, "abs"), "root/etc"));
  CHECK(same(fs_root_resolve_dir(&r, "dir/up"), "root"));
  CHECK(same(fs_root_resolve_dir(&r, "dir/up/dir"), "root/dir"));
  CHECK(same(fs_root_resolve_dir(&r, ".."), "root"));
  CHECK(same(fs_root_resolve_dir(&r, "../../dir/./../etc"), "root/etc"));
  CHECK(same(fs_root_resolve_dir(&r, "abs/../dir"), "root/dir"));
  CHECK(same(fs_root_resolve_dir(&r, "c1"), "root/dir")); /* 40 links: still followed */
  /* Out of the root: the names resolve inside it, where they do not exist. */
  CHECK(fails(fs_root_resolve_dir(&r, "../outside"), ENOENT));
  CHECK(fails(fs_root_resolve_dir(&r, "rel"), ENOENT));
  CHECK(fails(fs_root_resolve_dir(&r, "rel/odir"), ENOENT));
  CHECK(fails(fs_root_resolve_dir(&r, "hostabs"), ENOENT));
  CHECK(fails(fs_root_resolve_dir(&r, "dir/up/../outside"), ENOENT));
  CHECK(fails(fs_root_resolve_dir(&r, "dangling"), ENOENT));
  CHECK(fails(fs_root_resolve_dir(&r, "loop"), ELOOP));
  CHECK(fails(fs_root_resolve_dir(&r, "c0"), ELOOP));
  CHECK(fails(fs_root_resolve_dir(&r, "dir/file"), ENOTDIR));
  CHECK(fails(fs_root_resolve_dir(&r, "flink"), ENOTDIR));

  CHECK(same(fs_root_open_file(&r, "dir/file"), "root/dir/file"));
  CHECK(same(fs_root_open_file(&r, "flink"), "root/dir/file"));
  CHECK(same(fs_root_open_file(&r, "abs/secret"), "root/etc/secret"));
  CHECK(same(fs_root_open_file(&r, "dir/up/abs/secret"), "root/etc/secret"));
  CHECK(same(fs_root_open_file(&r, "fifo"), "root/fifo")); /* O_NONBLOCK: does not hang */
  CHECK(fails(fs_root_open_file(&r, "relfile"), ENOENT));
  CHECK(fails(fs_root_open_file(&r, "hostabs/secret"), ENOENT));
  CHECK(fails(fs_root_open_file(&r, "../outside/secret"), ENOENT));
  CHECK(fails(fs_root_open_file(&r, "loop"), ELOOP));
  /* A last component of ".." is not clamped by the lookup of its directory: never the parent. */
  CHECK(fails(fs_root_open_file(&r, ".."), EISDIR));
  CHECK(fails(fs_root_open_file(&r, "../.."), EISDIR));
  CHECK(fails(fs_root_open_file(&r, "dir/up/.."), EISDIR));
  CHECK(fails(fs_root_open_file(&r, "dir/."), EISDIR));

  /* Created where the symlinks lead inside, never outside. */
  CHECK(same(fs_root_ensure_dir(&r, "new/a/b"), "root/new/a/b"));
  struct stat st;
  CHECK(stat(at("root/new/a"), &st) == 0 && (st.st_mode & 07777) == 0755);
  CHECK(same(fs_root_ensure_dir(&r, "abs/made"), "root/etc/made"));
  CHECK(same(fs_root_ensure_dir(&r, "dir/up/made2"), "root/made2"));
  CHECK(fails(fs_root_ensure_dir(&r, "rel/x"), ENOENT));
  CHECK(fails(fs_root_ensure_dir(&r, "hostabs/x"), ENOENT));
  CHECK(fails(fs_root_ensure_dir(&r, "dangling/x"), ENOENT));
  CHECK(fails(fs_root_ensure_dir(&r, "dir/file/x"), ENOTDIR));
  CHECK(access(at("outside/x"), F_OK) < 0 && access(at("root/nowhere"), F_OK) < 0);
  CHECK(rmdir(at("root/new/a/b")) == 0 && rmdir(at("root/new/a")) == 0 && rmdir(at("root/new")) == 0);
  CHECK(rmdir(at("root/etc/made")) == 0 && rmdir(at("root/made2")) == 0);
  close(r.fd);
}

static int count_entries(const char *rel)
{
  char **names;
  size_t n;
  int fd = open(at(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fs_list_dir(fd, &names, &n) < 0)
    return -1;
  close(fd);
  fs_free_names(names, n);
  return (int) n;
}

static void removal(void)
{
  /* Symlinks to outside/ are removed, not followed; a read-only directory is no obstacle. */
  CHECK(mkdir(at("doomed"), 0755) == 0 && mkdir(at("doomed/ro"), 0755) == 0);
  mk("doomed/ro/f", "x");
  CHECK(symlink(at("outside"), at("doomed/ro/out")) == 0 && symlink("../../outside", at("doomed/rel")) == 0);
  CHECK(chmod(at("doomed/ro"), 0500) == 0);
  /* Deeper than RM_MAX_DEPTH (64): moved up in steps, removed all the same. */
  char deep[PATH_MAX] = "doomed";
  for (int i = 0; i < 150; i++) {
    CHECK(strlen(deep) + 3 < sizeof deep);
    strcat(deep, "/d");
    CHECK(mkdir(at(deep), 0755) == 0);
  }
  strcat(deep, "/leaf");
  mk(deep, "leaf");
  int basefd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(count_entries("doomed") == 3);
  /* 100 fds: too few for one per level, enough for RM_MAX_DEPTH of them. */
  struct rlimit old, few = {100, 100};
  CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
  few.rlim_max = old.rlim_max;
  CHECK(setrlimit(RLIMIT_NOFILE, &few) == 0);
  CHECK(fs_remove_tree(basefd, "doomed") == 0);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK(access(at("doomed"), F_OK) < 0 && errno == ENOENT);
  CHECK(count_entries("outside") == 2 && access(at("outside/secret"), F_OK) == 0);
  CHECK(fs_remove_tree(basefd, "doomed") == 0); /* gone already: nothing to do */
  mk("plain", "x");
  CHECK(fs_remove_tree(basefd, "plain") == 0 && access(at("plain"), F_OK) < 0);

  /* Inside a root: the entry goes, the root and what the link names stay. */
  sbx_error_t err = {0};
  struct fs_root r;
  CHECK(fs_root_open(basefd, "root", &r, false, &err) == 0);
  int dfd = open(at("root"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK(fs_root_rm_tree(&r, dfd, "hostabs") == 0 && access(at("outside/odir"), F_OK) == 0);
  CHECK(fs_root_rm_tree(&r, dfd, "dir") == 0 && access(at("root/dir"), F_OK) < 0);
  CHECK(fs_root_rm_tree(&r, dfd, "dir") < 0 && errno == ENOENT);
  /* Deep inside a root: moved to its top meanwhile, a file of the image's own there is kept. */
  char deep2[PATH_MAX] = "root/deep";
  CHECK(mkdir(at(deep2), 0755) == 0);
  for (int i = 0; i < 150; i++) {
    strcat(deep2, "/d");
    CHECK(mkdir(at(deep2), 0755) == 0);
  }
  mk("root/.sandboxd-rm.0", "the image's own");
  CHECK(setrlimit(RLIMIT_NOFILE, &few) == 0);
  CHECK(fs_root_rm_tree(&r, dfd, "deep") == 0);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK(access(at("root/deep"), F_OK) < 0 && access(at("root/.sandboxd-rm.0"), F_OK) == 0);
  CHECK(access(at("root/.sandboxd-rm.1"), F_OK) < 0 && access(at("root/.sandboxd-rm.2"), F_OK) < 0);
  CHECK(unlink(at("root/.sandboxd-rm.0")) == 0);
  CHECK(count_entries("root") > 0 && access(at("root/etc/secret"), F_OK) == 0);
  close(dfd);
  close(r.fd);
  CHECK(fs_root_open(basefd, "root/abs", &r, false, &err) < 0); /* a symlink is no root */
  CHECK(fs_remove_tree(basefd, "root") == 0 && fs_remove_tree(basefd, "outside") == 0);
  CHECK(count_entries(".") == 0);
  close(basefd);
}

int main(void)
{
  const char *tmp = getenv("TMPDIR");
  snprintf(base, sizeof base, "%s/fsroot-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  pure();
  build();
  resolve(false);
  resolve(true);
  removal();
  rmdir(base);
  return check_summary("test_fs_root");
}
