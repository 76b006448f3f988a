/* --bind and --bind-rw, shared by `sandboxd exec` and `sandboxd mcp` (binds.h). Where a
 * destination lands and what it may be is decided inside the sandbox (mount.c); this is the
 * command-line side: the syntax, the limits, and the host source. */
#include "run/binds.h"

#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "base/hostfile.h"

bool path_is_clean_abs(const char *p)
{
  if (p[0] != '/' || !p[1])
    return false;
  for (const char *c = p; *c;) {
    const char *next = strchr(c + 1, '/');
    size_t len = next ? (size_t) (next - c - 1) : strlen(c + 1);
    if (len == 0 && next)
      return false;
    if ((len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
      return false;
    if (!next)
      break;
    c = next;
  }
  return true;
}

int bind_opts_add(struct bind_opts *b, const char *arg, bool rw, sbx_error_t *err)
{
  if (b->n >= BIND_OPTS_MAX)
    return sbx_error_set(err, 0, "too many --bind options (at most %d)", BIND_OPTS_MAX);
  const char *colon = strrchr(arg, ':');
  if (!colon || colon == arg || !colon[1])
    return sbx_error_set(err, 0, "--bind%s `%s`: expected SRC:DST", rw ? "-rw" : "", arg);
  const char *dst = colon + 1;
  if (!path_is_clean_abs(dst))
    return sbx_error_set(err, 0, "--bind `%s`: DST must be an absolute path without `..`, and not `/`", arg);
  size_t slen = (size_t) (colon - arg), dlen = strlen(dst);
  if (slen >= PATH_MAX || dlen >= PATH_MAX)
    return sbx_error_set(err, ENAMETOOLONG, "--bind `%s`", arg);
  while (dlen > 1 && dst[dlen - 1] == '/')
    dlen--;
  char *s = strndup(arg, slen), *d = strndup(dst, dlen);
  if (!s || !d) {
    free(s);
    free(d);
    return sbx_error_set(err, ENOMEM, "--bind");
  }
  b->binds[b->n++] = (struct sbx_bind){.src = s, .dst = d, .rw = rw};
  return 0;
}

/* Not in <linux/magic.h> (their values are the kernel's, fs/configfs/mount.c and the others). */
#define SBX_CONFIGFS_MAGIC 0x62656570
#define SBX_FUSECTL_MAGIC 0x65735543
#define SBX_MQUEUE_MAGIC 0x19800202
#define SBX_RPC_PIPEFS_MAGIC 0x67596969
#define SBX_NFSD_MAGIC 0x6e667364

/* Kernel pseudo-filesystems: what is in them is the host's kernel state (processes, devices,
 * cgroups, security modules, BPF objects, message queues), reached by reading or writing a file,
 * never data of the invoker's. A bind of one would hand it to the code, as root in its namespace.
 * Refused wherever they are mounted. tmpfs and ramfs hold files like any other (and devtmpfs has
 * tmpfs's magic: /dev is refused by its path instead); hugetlbfs is listed for the huge pages a
 * file in it pins outside the sandbox's memory limit. */
#define KERNEL_FS(magic, name)                                                                               \
  {                                                                                                          \
    magic, "on a kernel pseudo-filesystem (" name "): never bound"                                           \
  }
static const struct {
  unsigned long magic;
  const char *why;
} kernel_fs[] = {
    KERNEL_FS(PROC_SUPER_MAGIC, "proc"),
    KERNEL_FS(SYSFS_MAGIC, "sysfs"),
    KERNEL_FS(DEVPTS_SUPER_MAGIC, "devpts"),
    KERNEL_FS(DEBUGFS_MAGIC, "debugfs"),
    KERNEL_FS(TRACEFS_MAGIC, "tracefs"),
    KERNEL_FS(SECURITYFS_MAGIC, "securityfs"),
    KERNEL_FS(SELINUX_MAGIC, "selinuxfs"),
    KERNEL_FS(SMACK_MAGIC, "smackfs"),
    KERNEL_FS(CGROUP_SUPER_MAGIC, "cgroup"),
    KERNEL_FS(CGROUP2_SUPER_MAGIC, "cgroup2"),
    KERNEL_FS(BPF_FS_MAGIC, "bpf"),
    KERNEL_FS(SBX_CONFIGFS_MAGIC, "configfs"),
    KERNEL_FS(SBX_FUSECTL_MAGIC, "fusectl"),
    KERNEL_FS(PSTOREFS_MAGIC, "pstore"),
    KERNEL_FS(EFIVARFS_MAGIC, "efivarfs"),
    KERNEL_FS(BINFMTFS_MAGIC, "binfmt_misc"),
    KERNEL_FS(HUGETLBFS_MAGIC, "hugetlbfs"),
    KERNEL_FS(NSFS_MAGIC, "nsfs"),
    KERNEL_FS(SBX_MQUEUE_MAGIC, "mqueue"),
    KERNEL_FS(SBX_RPC_PIPEFS_MAGIC, "rpc_pipefs"),
    KERNEL_FS(SBX_NFSD_MAGIC, "nfsd"),
    KERNEL_FS(XENFS_SUPER_MAGIC, "xenfs"),
    KERNEL_FS(USBDEVICE_SUPER_MAGIC, "usbdevfs"),
};

static bool path_at_or_under(const char *p, const char *dir)
{
  size_t n = strlen(dir);
  return !strncmp(p, dir, n) && (p[n] == '\0' || p[n] == '/');
}

const char *bind_source_kernel_fs(const char *real, unsigned long f_type)
{
  if (path_at_or_under(real, "/proc"))
    return "the host's /proc is never bound";
  if (path_at_or_under(real, "/sys"))
    return "the host's /sys is never bound";
  if (path_at_or_under(real, "/dev"))
    return "the host's /dev is never bound";
  for (size_t i = 0; i < sizeof kernel_fs / sizeof *kernel_fs; i++)
    if (kernel_fs[i].magic == f_type)
      return kernel_fs[i].why;
  return NULL;
}

const char *bind_source_refusal(const char *real, int fd)
{
  struct statfs sfs;
  if ((fd >= 0 ? fstatfs(fd, &sfs) : statfs(real, &sfs)) < 0)
    return "its file system cannot be examined (statfs failed)";
  return bind_source_kernel_fs(real, (unsigned long) sfs.f_type);
}

int bind_opts_resolve(struct bind_opts *b, sbx_error_t *err)
{
  /* Bind sources must exist; they are opened by the sandbox itself. */
  for (size_t i = 0; i < b->n; i++) {
    char *real = realpath(b->binds[i].src, NULL);
    if (!real)
      return sbx_error_errno(err, "--bind source `%s`", b->binds[i].src);
    const char *why = bind_source_refusal(real, -1);
    if (why) {
      sbx_error_set(err, 0, "--bind%s source `%s`: %s", b->binds[i].rw ? "-rw" : "", b->binds[i].src, why);
      free(real);
      return -1;
    }
    free((char *) b->binds[i].src);
    b->binds[i].src = real;
  }
  return 0;
}

void bind_opts_writable_trees(const struct bind_opts *b, struct hostfile_tree *trees, size_t *n_trees)
{
  for (size_t i = 0; i < b->n; i++)
    if (b->binds[i].rw)
      hostfile_guard_add(trees, n_trees, b->binds[i].src);
}

void bind_opts_free(struct bind_opts *b)
{
  for (size_t i = 0; i < b->n; i++) {
    free((char *) b->binds[i].src);
    free((char *) b->binds[i].dst);
  }
  b->n = 0;
}
