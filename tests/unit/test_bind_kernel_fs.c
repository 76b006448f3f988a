/* Unit tests for the refusal of bind and root sources on kernel pseudo-filesystems (src/run/binds.c). */
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "run/binds.h"

static bool refused(const char *path, unsigned long f_type, const char *why)
{
  const char *r = bind_source_kernel_fs(path, f_type);
  return r && strstr(r, why);
}

int main(void)
{
  /* By path: the host's /proc, /sys and /dev and everything below them, whatever the file system
   * (devtmpfs and /dev/shm report tmpfs's magic). */
  CHECK(refused("/proc", PROC_SUPER_MAGIC, "/proc is never bound"));
  CHECK(refused("/proc/1/root", 0xEF53, "/proc is never bound"));
  CHECK(refused("/sys", SYSFS_MAGIC, "/sys is never bound"));
  CHECK(refused("/sys/fs/cgroup", CGROUP2_SUPER_MAGIC, "/sys is never bound"));
  CHECK(refused("/dev", TMPFS_MAGIC, "/dev is never bound"));
  CHECK(refused("/dev/shm", TMPFS_MAGIC, "/dev is never bound"));
  /* Names that only start alike are other directories. */
  CHECK(!bind_source_kernel_fs("/procedures", 0xEF53));
  CHECK(!bind_source_kernel_fs("/system", 0xEF53));
  CHECK(!bind_source_kernel_fs("/devel/x", TMPFS_MAGIC));
  CHECK(!bind_source_kernel_fs("/home/u/proc", 0xEF53));
  CHECK(!bind_source_kernel_fs("/tmp/x", TMPFS_MAGIC));
  CHECK(!bind_source_kernel_fs("/mnt/big", RAMFS_MAGIC));
  /* By file system, wherever it is mounted. */
  CHECK(refused("/mnt/p", PROC_SUPER_MAGIC, "kernel pseudo-filesystem (proc)"));
  CHECK(refused("/run/x", SYSFS_MAGIC, "(sysfs)"));
  CHECK(refused("/mnt/cg", CGROUP_SUPER_MAGIC, "(cgroup)"));
  CHECK(refused("/mnt/cg2", CGROUP2_SUPER_MAGIC, "(cgroup2)"));
  CHECK(refused("/mnt/d", DEBUGFS_MAGIC, "(debugfs)"));
  CHECK(refused("/mnt/t", TRACEFS_MAGIC, "(tracefs)"));
  CHECK(refused("/mnt/s", SECURITYFS_MAGIC, "(securityfs)"));
  CHECK(refused("/mnt/b", BPF_FS_MAGIC, "(bpf)"));
  CHECK(refused("/mnt/pts", DEVPTS_SUPER_MAGIC, "(devpts)"));
  CHECK(refused("/mnt/e", EFIVARFS_MAGIC, "(efivarfs)"));
  CHECK(refused("/mnt/bf", BINFMTFS_MAGIC, "(binfmt_misc)"));
  CHECK(refused("/mnt/h", HUGETLBFS_MAGIC, "(hugetlbfs)"));
  CHECK(refused("/mnt/ps", PSTOREFS_MAGIC, "(pstore)"));
  CHECK(refused("/mnt/ns", NSFS_MAGIC, "(nsfs)"));
  CHECK(refused("/mnt/cfg", 0x62656570, "(configfs)"));
  CHECK(refused("/mnt/fc", 0x65735543, "(fusectl)"));
  CHECK(refused("/mnt/mq", 0x19800202, "(mqueue)"));

  /* On the host: by path and through an fd (fstatfs), as the callers use it. */
  CHECK(bind_source_refusal("/proc/self", -1) != NULL);
  int fd = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(fd >= 0 && bind_source_refusal("/elsewhere", fd) &&
        strstr(bind_source_refusal("/elsewhere", fd), "(proc)"));
  if (fd >= 0)
    close(fd);
  CHECK(bind_source_refusal("/usr", -1) == NULL);
  CHECK(bind_source_refusal("/nonexistent-sbx-dir", -1) &&
        strstr(bind_source_refusal("/nonexistent-sbx-dir", -1), "cannot be examined"));
  return check_summary("bind_kernel_fs");
}
