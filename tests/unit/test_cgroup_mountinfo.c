/* Unit tests for the probe's mountinfo parser (cg_parse_mountinfo, src/kernel/cgroup.c): which cgroup2
 * mount and which v1 mount per controller the probe starts from, and the cgroup each shows; and
 * cg_dir_below, which joins a mount and our cgroup's path into the directory to work in. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernel/cgroup_internal.h"

static struct cgroup_mounts m;

static void parse_with(const char *text, cg_visible_fn visible)
{
  memset(&m, 'x', sizeof m); /* every field is set, found or not */
  cg_parse_mountinfo(text, &m, visible);
}

static void parse(const char *text)
{
  parse_with(text, NULL);
}

/* A stand-in for the probe's stat: /sys/fs/cgroup/memory is covered (by a tmpfs of device 0:99,
 * as `mount -t tmpfs none /sys/fs/cgroup/memory` would); every other mount is visible. The mount
 * points asked about are recorded. */
static char asked[8][PATH_MAX];
static int n_asked;

static bool fake_visible(const char *mnt, unsigned maj, unsigned min)
{
  if (n_asked < 8)
    snprintf(asked[n_asked++], PATH_MAX, "%s", mnt);
  if (!strcmp(mnt, "/sys/fs/cgroup/memory"))
    return maj == 0 && min == 99;
  return true;
}

int main(void)
{
  /* This development host: hybrid, each v1 controller its own hierarchy, an empty unified one. */
  parse("25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "32 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
        "33 32 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 "
        "rw,nsdelegate\n"
        "36 32 0:31 / /sys/fs/cgroup/cpuset rw,nosuid shared:14 - cgroup cgroup rw,cpuset\n"
        "37 32 0:32 / /sys/fs/cgroup/cpu rw,nosuid shared:15 - cgroup cgroup rw,cpu\n"
        "38 32 0:33 / /sys/fs/cgroup/cpuacct rw,nosuid shared:16 - cgroup cgroup rw,cpuacct\n"
        "39 32 0:34 / /sys/fs/cgroup/memory rw,nosuid shared:17 - cgroup cgroup rw,memory\n"
        "40 32 0:35 / /sys/fs/cgroup/pids rw,nosuid shared:18 - cgroup cgroup rw,pids\n");
  CHECK(!strcmp(m.v2, "/sys/fs/cgroup/unified"));
  CHECK(!strcmp(m.v1[C_MEMORY], "/sys/fs/cgroup/memory") && !strcmp(m.v1[C_PIDS], "/sys/fs/cgroup/pids"));
  /* Whole options only: cpuset is not cpu, cpu is not cpuacct. */
  CHECK(!strcmp(m.v1[C_CPU], "/sys/fs/cgroup/cpu") && !strcmp(m.v1[C_CPUACCT], "/sys/fs/cgroup/cpuacct"));

  /* systemd's hybrid layout: cpu and cpuacct co-mounted, no optional fields, no final newline. */
  parse("30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,nosuid,cpu,cpuacct\n"
        "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "32 25 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids");
  CHECK(m.v2[0] == '\0');
  CHECK(!strcmp(m.v1[C_CPU], "/sys/fs/cgroup/cpu,cpuacct") && !strcmp(m.v1[C_CPUACCT], m.v1[C_CPU]));
  CHECK(!strcmp(m.v1[C_PIDS], "/sys/fs/cgroup/pids"));

  /* Pure v2: the first cgroup2 mount; a second one and a v1 line without ours change nothing. */
  parse("35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 master:2 - cgroup2 cgroup2 rw,nsdelegate\n"
        "36 24 0:30 / /run/other rw - cgroup2 cgroup2 rw\n"
        "37 24 0:31 / /mnt/named rw - cgroup cgroup rw,none,name=systemd\n");
  CHECK(!strcmp(m.v2, "/sys/fs/cgroup"));
  for (int c = 0; c < C_MAX; c++)
    CHECK(m.v1[c][0] == '\0');

  /* The kernel's escapes (\ooo for a blank, tab, newline or backslash) are undone in mount points
   * and roots, as /proc/self/cgroup writes paths raw; lines without " - " or with too few fields
   * are skipped; a mount point longer than PATH_MAX is skipped, not cut, and the next one counts. */
  static char text[3 * PATH_MAX];
  char long_mnt[PATH_MAX + 2];
  memset(long_mnt, 'a', sizeof long_mnt - 1);
  long_mnt[0] = '/';
  long_mnt[sizeof long_mnt - 1] = '\0';
  snprintf(text, sizeof text,
           "garbage line\n"
           "1 2 3 - cgroup cgroup rw,memory\n"
           "40 32 0:35 / %s rw - cgroup cgroup rw,memory\n"
           "41 32 0:35 /a\\134b\\011c /sys/fs/cgroup/my\\040memory rw - cgroup cgroup rw,memory\n"
           "42 32 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup\n",
           long_mnt);
  parse(text);
  CHECK(!strcmp(m.v1[C_MEMORY], "/sys/fs/cgroup/my memory"));
  CHECK(!strcmp(m.v1_root[C_MEMORY], "/a\\b\tc"));
  CHECK(m.v1[C_PIDS][0] == '\0'); /* no super options field */
  /* Not an escape the kernel writes: kept as it is (a backslash is written as \134). */
  parse("1 2 0:35 / /m\\09x\\7\\400\\000 rw - cgroup cgroup rw,memory\n");
  CHECK(!strcmp(m.v1[C_MEMORY], "/m\\09x\\7\\400\\000"));

  /* Super options longer than the old parser's 1023-byte copy: the controller is still found. */
  char opts[1500];
  memset(opts, 'o', sizeof opts);
  memcpy(opts + sizeof opts - 8, ",memory", 8);
  snprintf(text, sizeof text, "40 32 0:35 / /m rw - cgroup cgroup %s\n", opts);
  parse(text);
  CHECK(!strcmp(m.v1[C_MEMORY], "/m"));

  parse("");
  CHECK(m.v2[0] == '\0' && m.v1[C_MEMORY][0] == '\0');

  /* Roots: "/" for whole hierarchies (above), a container's own cgroup where its runtime mounted
   * that (Docker on a cgroup v1 host: /sys/fs/cgroup/memory shows /docker/ID). */
  parse("35 24 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
        "36 24 0:31 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
        "37 24 0:32 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n");
  CHECK(!strcmp(m.v2_root, "/"));
  CHECK(!strcmp(m.v1_root[C_MEMORY], "/docker/abc") && !strcmp(m.v1[C_MEMORY], "/sys/fs/cgroup/memory"));
  CHECK(!strcmp(m.v1_root[C_CPUACCT], "/docker/abc") && m.v1_root[C_PIDS][0] == '\0');
  /* A root longer than PATH_MAX: the line is skipped like a long mount point. */
  snprintf(text, sizeof text, "40 32 0:35 %s /m rw - cgroup cgroup rw,memory\n", long_mnt);
  parse(text);
  CHECK(m.v1[C_MEMORY][0] == '\0' && m.v1_root[C_MEMORY][0] == '\0');

  /* Visibility: a hierarchy's first mount, covered by a later one, is passed over for a bind of
   * it that is visible; covered with no other mount of it, the controller has none. Only the lines
   * that would be taken are asked about (not cpuset's, nor pids' second mount). */
  static const char covered[] = "39 32 0:34 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                                "40 32 0:35 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
                                "41 32 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
                                "68 47 0:34 / /tmp/mm rw - cgroup cgroup rw,memory\n"
                                "69 47 0:35 / /tmp/pp rw - cgroup cgroup rw,pids\n"
                                "70 39 0:99 / /sys/fs/cgroup/memory rw - tmpfs none rw\n";
  n_asked = 0;
  parse_with(covered, fake_visible);
  CHECK(!strcmp(m.v1[C_MEMORY], "/tmp/mm") && !strcmp(m.v1[C_PIDS], "/sys/fs/cgroup/pids"));
  CHECK(n_asked == 3 && !strcmp(asked[0], "/sys/fs/cgroup/memory") &&
        !strcmp(asked[1], "/sys/fs/cgroup/pids") && !strcmp(asked[2], "/tmp/mm"));
  parse_with("39 32 0:34 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
             "40 32 0:35 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
             fake_visible);
  CHECK(m.v1[C_MEMORY][0] == '\0' && m.v1_root[C_MEMORY][0] == '\0' &&
        !strcmp(m.v1[C_PIDS], "/sys/fs/cgroup/pids"));
  /* The same for cgroup2; and a device field that is not MAJ:MIN is not taken. */
  parse_with("35 24 0:34 / /sys/fs/cgroup/memory rw - cgroup2 cgroup2 rw\n"
             "36 24 0:34 / /run/cg2 rw - cgroup2 cgroup2 rw\n",
             fake_visible);
  CHECK(!strcmp(m.v2, "/run/cg2"));
  parse_with("35 24 0 / /a rw - cgroup2 cgroup2 rw\n"
             "36 24 0: / /b rw - cgroup2 cgroup2 rw\n"
             "37 24 :1 / /c rw - cgroup2 cgroup2 rw\n"
             "38 24 0:1:2 / /d rw - cgroup2 cgroup2 rw\n"
             "39 24 x:1 / /e rw - cgroup2 cgroup2 rw\n"
             "40 24 12:34 / /f rw - cgroup2 cgroup2 rw\n",
             fake_visible);
  CHECK(!strcmp(m.v2, "/f"));

  /* cg_dir_below: the mount followed by what our path has below the mount's root. */
  char dir[PATH_MAX];
  CHECK(cg_dir_below("/sys/fs/cgroup/memory", "/", "/user.slice/x", dir, sizeof dir) == 0 &&
        !strcmp(dir, "/sys/fs/cgroup/memory/user.slice/x"));
  CHECK(cg_dir_below("/sys/fs/cgroup/pids", "/", "/", dir, sizeof dir) == 0 &&
        !strcmp(dir, "/sys/fs/cgroup/pids"));
  CHECK(cg_dir_below("/sys/fs/cgroup/memory", "/docker/abc", "/docker/abc", dir, sizeof dir) == 0 &&
        !strcmp(dir, "/sys/fs/cgroup/memory"));
  CHECK(cg_dir_below("/sys/fs/cgroup/memory", "/docker/abc/", "/docker/abc/sub", dir, sizeof dir) == 0 &&
        !strcmp(dir, "/sys/fs/cgroup/memory/sub"));
  /* Not below the root: a sibling, a longer name with the root as its prefix, a parent. */
  CHECK(cg_dir_below("/m", "/docker/abc", "/docker/other", dir, sizeof dir) == -1);
  CHECK(cg_dir_below("/m", "/docker/abc", "/docker/abcdef", dir, sizeof dir) == -1);
  CHECK(cg_dir_below("/m", "/docker/abc", "/docker", dir, sizeof dir) == -1);
  CHECK(cg_dir_below("/m", "/docker/abc", "/", dir, sizeof dir) == -1);
  /* Too long for the buffer: -1, not a cut path. */
  CHECK(cg_dir_below("/sys/fs/cgroup/memory", "/", "/x", dir, 10) == -1);
  return check_summary("test_cgroup_mountinfo");
}
