/* Unit tests for cgroup v1's co-mounted controllers (cgroup_v1_shared, src/kernel/cgroup_v1.c): systemd
 * mounts cpu and cpuacct as one hierarchy (/sys/fs/cgroup/cpu,cpuacct, with cpu and cpuacct as
 * symlinks to it), where a sandbox gets one directory, made once and removed once. */
#include <limits.h>
#include <string.h>

#include "check.h"
#include "kernel/cgroup_internal.h"

static void bases(char b[C_MAX][PATH_MAX], const char *mem, const char *pids, const char *cpu,
                  const char *acct)
{
  strcpy(b[C_MEMORY], mem);
  strcpy(b[C_PIDS], pids);
  strcpy(b[C_CPU], cpu);
  strcpy(b[C_CPUACCT], acct);
}

int main(void)
{
  static char b[C_MAX][PATH_MAX];
  int first[C_MAX];

  /* Separate hierarchies (this development host): each its own. */
  bases(b, "/sys/fs/cgroup/memory/u", "/sys/fs/cgroup/pids/u", "/sys/fs/cgroup/cpu/u",
        "/sys/fs/cgroup/cpuacct/u");
  cgroup_v1_shared((const char(*)[PATH_MAX]) b, first);
  for (int c = 0; c < C_MAX; c++)
    CHECK(first[c] == c);

  /* systemd's hybrid layout: cpu and cpuacct are one directory, cpu's stands for both. */
  bases(b, "/sys/fs/cgroup/memory/u", "/sys/fs/cgroup/pids/u", "/sys/fs/cgroup/cpu,cpuacct/u",
        "/sys/fs/cgroup/cpu,cpuacct/u");
  cgroup_v1_shared((const char(*)[PATH_MAX]) b, first);
  CHECK(first[C_MEMORY] == C_MEMORY && first[C_PIDS] == C_PIDS && first[C_CPU] == C_CPU);
  CHECK(first[C_CPUACCT] == C_CPU);

  /* Controllers that are not there ("") are never one another's. */
  bases(b, "/sys/fs/cgroup/memory/u", "/sys/fs/cgroup/pids/u", "", "");
  cgroup_v1_shared((const char(*)[PATH_MAX]) b, first);
  CHECK(first[C_CPU] == C_CPU && first[C_CPUACCT] == C_CPUACCT);

  /* Any pair, in any order of the enum: the earlier one stands for the later. */
  bases(b, "/sys/fs/cgroup/memory,pids/u", "/sys/fs/cgroup/memory,pids/u", "/c/u", "/c/u");
  cgroup_v1_shared((const char(*)[PATH_MAX]) b, first);
  CHECK(first[C_PIDS] == C_MEMORY && first[C_CPUACCT] == C_CPU);
  return check_summary("test_cgroup_v1");
}
