/* Unit tests for safe host-file opening (src/base/hostfile.c) and the cache's HMAC (src/base/util.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hostfile.h"
#include "base/util.h"
#include "check.h"

static char base[64];

static const char *at(const char *rel)
{
  static char buf[4][256];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof buf[i], "%s/%s", base, rel);
  return buf[i];
}

static void hmac_vectors(void)
{
  /* RFC 4231 test cases 1, 2 and 6 (a key longer than the block). */
  char out[65], key1[20], key6[131];
  memset(key1, 0x0b, sizeof key1);
  hmac_sha256_hex(key1, sizeof key1, "Hi There", 8, out);
  CHECK(!strcmp(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
  const char *what = "what do ya want for nothing?";
  hmac_sha256_hex("Jefe", 4, what, strlen(what), out);
  CHECK(!strcmp(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
  memset(key6, 0xaa, sizeof key6);
  const char *big = "Test Using Larger Than Block-Size Key - Hash Key First";
  hmac_sha256_hex(key6, sizeof key6, big, strlen(big), out);
  CHECK(!strcmp(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"));
}

static void symlinks_in_guarded_trees(void)
{
  sbx_error_t err;
  int dfd = -1;
  const char *name = NULL;
  CHECK(mkdir(at("rw"), 0755) == 0 && mkdir(at("rw/sub"), 0755) == 0 && mkdir(at("elsewhere"), 0755) == 0);
  CHECK(symlink(at("elsewhere"), at("rw/sub/out")) == 0);
  CHECK(symlink(at("elsewhere"), at("link")) == 0);
  struct hostfile_tree trees[2];
  size_t n = 0;
  hostfile_guard_add(trees, &n, at("rw"));
  hostfile_guard_add(trees, &n, at("missing")); /* not a directory: ignored */
  CHECK(n == 1);
  struct hostfile_guard g = {.trees = trees, .n_trees = n};

  /* A symlink below a guarded tree is refused; without the guard, ours is followed. */
  CHECK(hostfile_open_parent(at("rw/sub/out/r.json"), &g, 0, &dfd, &name, &err) == HOSTFILE_UNSAFE);
  CHECK(strstr(err.msg, "--bind-rw") && strstr(err.msg, "rw/sub/out/r.json"));
  CHECK(hostfile_open_parent(at("rw/sub/out/r.json"), NULL, 0, &dfd, &name, &err) == 0);
  CHECK(!strcmp(name, "r.json"));
  struct stat a, b;
  CHECK(fstat(dfd, &a) == 0 && stat(at("elsewhere"), &b) == 0 && a.st_ino == b.st_ino);
  close(dfd);
  /* A symlink outside every guarded tree is followed even with the guard. */
  CHECK(hostfile_open_parent(at("link/x"), &g, 0, &dfd, &name, &err) == 0);
  close(dfd);
  /* Reached through `..` or a relative path, the same directory is still guarded. */
  CHECK(hostfile_open_parent(at("elsewhere/../rw/sub/out/r.json"), &g, 0, &dfd, &name, &err) ==
        HOSTFILE_UNSAFE);
  /* The last component must be a name. */
  CHECK(hostfile_open_parent(at("rw/"), &g, 0, &dfd, &name, &err) == -1);
  CHECK(hostfile_open_parent(at("rw/.."), &g, 0, &dfd, &name, &err) == -1);
  /* A missing directory is an ordinary error, not a refusal; MKDIR creates it. */
  CHECK(hostfile_open_parent(at("new/a/log"), NULL, 0, &dfd, &name, &err) == -1 && err.errnum == ENOENT);
  CHECK(hostfile_open_parent(at("new/a/log"), NULL, HOSTFILE_MKDIR, &dfd, &name, &err) == 0);
  close(dfd);
  CHECK(stat(at("new/a"), &a) == 0 && (a.st_mode & 0777) == 0700 && stat(at("new"), &a) == 0 &&
        (a.st_mode & 0777) == (0755 & ~(mode_t) 022));
  /* mkdir -p never creates through a guarded symlink. */
  CHECK(hostfile_open_parent(at("rw/sub/out/d/log"), &g, HOSTFILE_MKDIR, &dfd, &name, &err) ==
        HOSTFILE_UNSAFE);
  CHECK(access(at("elsewhere/d"), F_OK) < 0);
}

static void append_rules(void)
{
  sbx_error_t err;
  int dfd, fd = -1;
  CHECK(hostfile_open_dir(base, NULL, 0, &dfd, &err) == 0);
  CHECK(hostfile_open_append(dfd, "log", "log", &fd, &err) == 0);
  CHECK(write(fd, "x\n", 2) == 2);
  close(fd);
  CHECK(symlink("log", at("symlog")) == 0);
  CHECK(hostfile_open_append(dfd, "symlog", "symlog", &fd, &err) == HOSTFILE_UNSAFE &&
        strstr(err.msg, "symlink"));
  CHECK(link(at("log"), at("hardlog")) == 0);
  CHECK(hostfile_open_append(dfd, "log", "log", &fd, &err) == HOSTFILE_UNSAFE &&
        strstr(err.msg, "2 hard links"));
  CHECK(unlink(at("hardlog")) == 0 && chmod(at("log"), 0620) == 0);
  CHECK(hostfile_open_append(dfd, "log", "log", &fd, &err) == HOSTFILE_UNSAFE && strstr(err.msg, "writable"));
  CHECK(chmod(at("log"), 0600) == 0 && mkfifo(at("fifo"), 0600) == 0);
  /* A FIFO without a reader: an ordinary failure (the record is dropped), never a block. */
  CHECK(hostfile_open_append(dfd, "fifo", "fifo", &fd, &err) == -1 && err.errnum == ENXIO);

  /* Replace: a symlink at the name is replaced, its target untouched; no temporary is left. */
  int t = open(at("target"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  CHECK(t >= 0 && write(t, "keep", 4) == 4);
  close(t);
  CHECK(symlink(at("target"), at("report")) == 0);
  CHECK(hostfile_replace(dfd, "report", "report", "{}\n", 3, 0644, &err) == 0);
  struct stat st;
  char buf[8] = {0};
  CHECK(lstat(at("report"), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 3);
  t = open(at("target"), O_RDONLY | O_CLOEXEC);
  CHECK(t >= 0 && read(t, buf, sizeof buf) == 4 && !memcmp(buf, "keep", 4));
  close(t);
  /* Trusted files: ours, written by nobody else, never through a symlink. */
  CHECK(hostfile_open_trusted(dfd, "report", "report", &fd, &st, &err) == 0 && st.st_size == 3);
  close(fd);
  CHECK(chmod(at("report"), 0666) == 0);
  CHECK(hostfile_open_trusted(dfd, "report", "report", &fd, &st, &err) == HOSTFILE_UNSAFE);
  CHECK(hostfile_open_trusted(dfd, "symlog", "symlog", &fd, &st, &err) == HOSTFILE_UNSAFE);
  close(dfd);
}

int main(void)
{
  umask(022);
  snprintf(base, sizeof base, "/tmp/sbx-hostfile.XXXXXX");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    return 1;
  }
  hmac_vectors();
  symlinks_in_guarded_trees();
  append_rules();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0)
    checks_failed++;
  return check_summary("test_hostfile");
}
