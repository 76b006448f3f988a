/* SPDX-License-Identifier: Apache-2.0 */
/* --bind and --bind-rw, shared by `sandboxd exec` and `sandboxd mcp` (binds.h). Where a
 * destination lands and what it may be is decided inside the sandbox (mount.c); this is the
 * command-line side: the syntax, the limits, and the host source. */
#include "run/binds.h"

#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/hostfile.h"
#include "base/util.h"

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
  b->binds[b->n++] = (struct sbx_bind){.src = s, .dst = d, .rw = rw, .fd = -1};
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

/* A bind source is opened here, once, and each sandbox opens its canonical path again in its own
 * mount namespace (a bind can only be made from a mount of that namespace: the kernel refuses
 * this process's fd with EINVAL) following no symlink, and binds it only if it is the inode held
 * here (sandbox.c). The user's own symlinks (~/proj -> /data/proj) are followed once, here, as
 * they meant; later ones are not. Refusing every symlink (openat2's RESOLVE_NO_SYMLINKS on the
 * path given) would refuse /var/run -> /run and the user's own links; following them in every
 * sandbox follows whatever sandboxed code planted since. The held fd keeps the inode alive, so
 * its number cannot be given to another file while sandboxes are made from it. */
static int source_open(const char *path, const struct hostfile_guard *rw, char **ret_real, int *ret_fd,
                       sbx_error_t *err)
{
  _cleanup_close_ int fd = -1;
  int rc = hostfile_open_dir(path, rw, HOSTFILE_ANY, &fd, err);
  if (rc < 0)
    return rc;
  /* The canonical path: what the kernel says fd is, checked to lead there without a symlink. */
  char self[32], real[PATH_MAX];
  if (bufprintf(self, sizeof self, err, "/proc/self/fd/%d", fd) < 0)
    return -1;
  ssize_t n = readlink(self, real, sizeof real);
  if (n <= 0 || (size_t) n >= sizeof real || real[0] != '/')
    return n < 0 ? sbx_error_errno(err, "`%s`: its canonical path", path)
                 : sbx_error_set(err, ENAMETOOLONG, "`%s`: its canonical path", path);
  real[n] = '\0';
  _cleanup_close_ int again = -1;
  struct stat a, b;
  if (hostfile_open_nofollow(real, &again, err) < 0)
    return sbx_error_prefix(err, "`%s`", path);
  if (fstat(fd, &a) < 0 || fstat(again, &b) < 0)
    return sbx_error_errno(err, "`%s`", path);
  if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return sbx_error_set(err, EAGAIN, "`%s`: changed while it was opened", path);
  if (!(*ret_real = strdup(real)))
    return sbx_error_set(err, ENOMEM, "`%s`", path);
  *ret_fd = TAKE_FD(fd);
  return 0;
}

/* "WHAT `path`: why", the message every refusal of a source gives. */
static int labelled(const char *what, int rc, sbx_error_t *err)
{
  char old[sizeof err->msg];
  memcpy(old, err->msg, sizeof old);
  bufprintf_cut(err->msg, sizeof err->msg, "%s %s", what, old);
  return rc;
}

int bind_source_open(const char *what, const char *path, const struct hostfile_guard *rw, char **ret_real,
                     int *ret_fd, sbx_error_t *err)
{
  int rc = source_open(path, rw, ret_real, ret_fd, err);
  return rc < 0 ? labelled(what, rc, err) : 0;
}

/* The same check as --output-dir's (mcp_files.c) and every host file's (hostfile.h), on the
 * source's directory: a source that is itself a tree (the --bind-rw source, bound again
 * read-only) is fine, as the name it has lies outside the tree. */
int bind_source_outside(const char *what, const char *real, const struct hostfile_guard *rw, sbx_error_t *err)
{
  if (!rw || !rw->n_trees || !strcmp(real, "/"))
    return 0;
  char dir[PATH_MAX];
  if (bufprintf(dir, sizeof dir, err, "%s", real) < 0)
    return -1;
  char *slash = strrchr(dir, '/');
  slash[slash == dir] = '\0';
  _cleanup_close_ int fd = -1;
  bool inside;
  if (hostfile_open_nofollow(dir, &fd, err) < 0 || hostfile_in_tree(fd, rw, &inside, err) < 0)
    return labelled(what, -1, err);
  if (!inside)
    return 0;
  sbx_error_set(err, 0,
                "%s `%s` lies inside a --bind-rw tree, where sandboxed code could replace it for later "
                "sandboxes; bind the tree itself, or a directory outside it",
                what, real);
  return HOSTFILE_UNSAFE;
}

int bind_opts_resolve(struct bind_opts *b, sbx_error_t *err)
{
  /* The trees first: every source is then opened without following a symlink inside one, so a
   * --bind-rw source reached through a link in another tree is refused too. */
  b->n_rw_trees = 0;
  bind_opts_writable_trees(b, b->rw_trees, &b->n_rw_trees);
  struct hostfile_guard rw = bind_opts_guard(b);
  for (size_t i = 0; i < b->n; i++) {
    struct sbx_bind *x = &b->binds[i];
    const char *what = x->rw ? "--bind-rw source" : "--bind source";
    char *real = NULL;
    int fd = -1;
    int rc = bind_source_open(what, x->src, &rw, &real, &fd, err);
    if (rc == 0 && (rc = bind_source_outside(what, real, &rw, err)) < 0) {
      free(real);
      close(fd);
    }
    if (rc < 0)
      return rc;
    const char *why = bind_source_refusal(real, fd);
    if (why) {
      sbx_error_set(err, 0, "%s `%s`: %s", what, x->src, why);
      free(real);
      close(fd);
      return -1;
    }
    free((char *) x->src);
    x->src = real;
    x->fd = fd;
  }
  return 0;
}

struct hostfile_guard bind_opts_guard(const struct bind_opts *b)
{
  return (struct hostfile_guard){.trees = b->rw_trees, .n_trees = b->n_rw_trees};
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
    if (b->binds[i].fd >= 0)
      close(b->binds[i].fd);
  }
  b->n = 0;
}
