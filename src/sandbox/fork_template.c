/* SPDX-License-Identifier: Apache-2.0 */
/* The fork template, the mechanism: a trusted sandbox that has started Python and never runs user
 * code (inside/template.py), and each call's sandbox forked from it, which makes fresh namespaces
 * of its own. Its owner (`sandboxd mcp`, mcp/fork_pool.c) decides which template serves a call
 * and when one is replaced; here is how one starts and how a call's sandbox is forked from it.
 *
 * The template is a sandbox like any other (sandbox_spawn, the call's spec), under a policy
 * derived from its calls' (fork_policy.c): /proc unmasked (the kernel refuses a fresh proc mount
 * in a nested namespace where a proc mount is partly hidden), clone and unshare with namespace
 * flags and mount allowed (a call's pid 1 is forked into its namespaces and makes its mounts; its
 * filter, the calls' policy's own, stacks on top before the code runs; as root also the id
 * changes by which the call's pid 1 takes its own host id), and room in its user namespace's
 * budgets for its calls'. It has no capabilities (a user namespace needs none) and no_new_privs.
 *
 * Per call, here: the call's cgroup (v1: files opened for the child to move itself in; v2: moved
 * in by pid after the child's hello, before its ack), a SOCK_SEQPACKET socket whose credentials
 * give the child's pids in our namespace, and the call's pipes and fd 3; the child answers READY
 * with its workspace tmpfs. The result is a struct sbx_sandbox like a cold one's (sandbox_adopt).
 * Time runs down (what the call's pid 1 does is in sandbox.c's timeline and zygote.c):
 *
 *   sandboxd (here)                   the template (template.py)     the call's pid 1 (zygote.c)
 *   --------------------------------  -----------------------------  ----------------------------
 *   fork_template_begin: its sandbox
 *   its source, SETUP (the calls' ---> loads the C pid 1 (fork_zygote.c)
 *     lines, the runner, the filters;
 *     the C pid 1 and its init: fds)
 *   <------------------------------- "ok" (fork_template_step)
 *   per call, fork_pending_begin:
 *   "fork SECONDS" and the call's ---> clone into fresh namespaces --> v1: into its cgroup
 *     socket, stdio, fd 3 (v1: the
 *     cgroup's files)
 *   <-------------------------------------------------------------- "hello" (its pid, as ours)
 *   v2: into the cgroup; root: a host
 *     id and its maps; "ack" ------------------------------------> the steps of contain.c
 *   <-------------------------------------------------------------- "ready INO DEV", the
 *                                                                     workspace (the listener)
 *   pidfd_open; "go" --------------------------------------------> forks the code, execs
 *   sandbox_adopt (sandbox_fork.c)                                   callinit
 *
 * The str hash secret and the address-space layout are the template's, shared by every call it
 * serves: its owner replaces it (mcp/fork_pool.c says when). */
#include "sandbox/fork_template.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "base/warn.h"
#include "egress/egress_proxy.h"
#include "kernel/cgroup.h"
#include "kernel/hostid.h"
#include "kernel/ns.h"
#include "kernel/seccomp.h"
#include "policy/policy.h"
#include "sandbox/fork_policy.h"
#include "sandbox/fork_zygote.h"
#include "sandbox/sandbox.h"

/* The template's argv: it reads its source, the first message on fd 3, and runs it in __main__
 * without a name of its own there (template.py takes __main__'s names as a cold runner's). */
#define TEMPLATE_BOOT "exec(__import__('os').read(3, 1 << 20)) # sandboxd fork template"

/* How long the template may take to start, and a child to answer a step of its setup. */
#define TEMPLATE_START_MS 10000
#define CHILD_STEP_MS 5000

struct fork_template {
  struct sbx_sandbox *sb;
  struct sbx_policy policy; /* its calls', with the template's differences (fork_policy.c) */
  struct sbx_rule *rules;
  const struct sbx_policy *call_policy;                 /* each call's (the config's spec->policy) */
  enum { TMPL_SPAWNING, TMPL_SETUP, TMPL_READY } state; /* sandbox setup, then Python's */
  int ctl_fd;                                           /* our end of its fd 3 */
  int log_fd;                                           /* its stdout and stderr: read only when it died */
  int userns_fd;             /* root: its user namespace, where a call's id maps are written from; else -1 */
  unsigned long long rss_kb; /* its Python's size once ready, preload and all ("ok RSS_KB") */
};

void fork_template_free(struct fork_template *t)
{
  if (!t)
    return;
  sandbox_free(t->sb);
  if (t->ctl_fd >= 0)
    close(t->ctl_fd);
  if (t->log_fd >= 0)
    close(t->log_fd);
  if (t->userns_fd >= 0)
    close(t->userns_fd);
  free(t->rules);
  free(t);
}

/* Wait up to ms for fd to be readable. */
static int wait_readable(int fd, int ms, const char *what, sbx_error_t *err)
{
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  int r;
  do
    r = poll(&pfd, 1, ms);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return sbx_error_errno(err, "fork template: poll");
  if (r == 0)
    return sbx_error_set(err, ETIMEDOUT, "fork template: no %s in %d ms", what, ms);
  return 0;
}

/* Said once per process: why its calls' pid 1 is a copy of the template (fork_zygote.c). */
static bool zygote_said;

/* The call's fresh tmpfs mounts and the rest of what each call's C pid 1 needs (inside/zygote.c
 * parse_line: "key value" lines), as the cold path's sandbox_child has them. */
static int setup_lines(strbuf_t *sb, const struct fork_template *t, const struct sbx_policy *p,
                       const struct sbx_limits *l, bool degraded, const struct fork_zygote_mode *mode)
{
  const struct sbx_budgets *b = &p->budgets;
  int r = strbuf_printf(
      sb,
      "nofile %llu\nfsize %llu\nmemory %llu\npids %llu\ndegraded %d\nmask_proc %d\nsigpending %llu\n"
      "msgqueue %llu\nmemlock %llu\nproxy %d\nserver_maps %d\nshare_memory %d\n"
      "fresh tmp %d size=%llu,mode=1777\nfresh workspace %d size=%llu,mode=755\n"
      "fresh dev/shm %d size=%llu,mode=1777\nfresh run %d size=1048576,mode=755\n",
      (unsigned long long) l->nofile, (unsigned long long) l->fsize_bytes,
      (unsigned long long) l->memory_bytes, (unsigned long long) l->pids, degraded, p->mask_proc,
      (unsigned long long) b->sigpending, (unsigned long long) b->msgqueue_bytes,
      (unsigned long long) b->memlock_bytes, p->network == SBX_NET_PROXY ? EGRESS_PROXY_PORT : 0,
      t->userns_fd >= 0, mode->share_memory, MS_NOSUID | MS_NODEV, (unsigned long long) l->tmp_bytes,
      MS_NOSUID | MS_NODEV, (unsigned long long) l->workspace_bytes, MS_NOSUID | MS_NODEV | MS_NOEXEC,
      (unsigned long long) l->shm_bytes, MS_NOSUID | MS_NODEV | MS_NOEXEC);
  struct contain_budget budget[CONTAIN_N_BUDGETS];
  int n = sandbox_budgets(b, budget);
  for (int i = 0; r == 0 && i < n; i++)
    r = strbuf_printf(sb, "budget %s %llu\n", budget[i].name, (unsigned long long) budget[i].value);
  for (size_t i = 0; r == 0 && i < p->n_proc_masked; i++)
    r = strbuf_printf(sb, "mask %s\n", p->proc_masked[i]);
  for (size_t i = 0; r == 0 && i < p->n_proc_readonly; i++)
    r = strbuf_printf(sb, "ro %s\n", p->proc_readonly[i]);
  return r;
}

/* Its source, then its setup: l, the calls' limits, and the calls' filter. */
static int send_setup(struct fork_template *t, const struct fork_template_config *cfg,
                      const struct sbx_limits *l, bool degraded, sbx_error_t *err)
{
  const struct sbx_policy *p = t->call_policy;
  struct sbx_bpf bpf = {0};
  if (seccomp_prepare(p, degraded ? SBX_SECCOMP_RLIMIT : 0, &bpf, err) < 0)
    return -1;
  /* Queued for its Python, which reads it once started: sent now, without waiting. With it the C
   * pid 1 and its init (fork_zygote.c), which the template hands each call to. */
  int zfd[2];
  struct fork_zygote_mode mode;
  if (fork_zygote_fds(zfd, &mode, err) < 0) {
    seccomp_bpf_free(&bpf);
    return -1;
  }
  if (mode.why && !zygote_said) {
    sbx_warn(SBX_WARN_FORK_COPY,
             "fork template: each call's pid 1 is a copy of the template, which costs more CPU: %s",
             mode.why);
    zygote_said = true;
  }
  strbuf_t sb = {0};
  size_t runner_len = strlen(cfg->runner_source);
  int r = setup_lines(&sb, t, p, l, degraded, &mode);
  if (r == 0)
    r = strbuf_printf(&sb, "runner %zu\nmain %zu\nexcept %zu\n", runner_len, bpf.main_len * 8,
                      bpf.except_len * 8);
  /* The modules it imports before any call (--preload; template.py _preload). */
  if (r == 0 && cfg->preload && *cfg->preload)
    r = strbuf_printf(&sb, "preload %s\n", cfg->preload);
  if (r == 0)
    r = strbuf_append(&sb, "\n", 1);
  if (r == 0)
    r = strbuf_append(&sb, cfg->runner_source, runner_len);
  if (r == 0)
    r = strbuf_append(&sb, bpf.main_prog, bpf.main_len * 8);
  if (r == 0 && bpf.except_len)
    r = strbuf_append(&sb, bpf.except_prog, bpf.except_len * 8);
  seccomp_bpf_free(&bpf);
  size_t src_len = strlen(cfg->template_source);
  if (r < 0)
    sbx_error_set(err, ENOMEM, "fork template setup");
  else if (send(t->ctl_fd, cfg->template_source, src_len, MSG_NOSIGNAL) != (ssize_t) src_len)
    r = sbx_error_errno(err, "send its source");
  if (r < 0) {
    strbuf_free(&sb);
    for (int i = 0; i < 2; i++)
      close(zfd[i]);
    return -1;
  }
  union {
    char buf[CMSG_SPACE(sizeof zfd)];
    struct cmsghdr align;
  } u;
  struct iovec iov = {.iov_base = sb.data, .iov_len = sb.len};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  {
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof u.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof zfd);
    memcpy(CMSG_DATA(cm), zfd, sizeof zfd);
  }
  ssize_t n = sendmsg(t->ctl_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  size_t len = sb.len;
  strbuf_free(&sb);
  for (int i = 0; i < 2; i++)
    close(zfd[i]);
  if (n < 0 || (size_t) n != len)
    return sbx_error_errno(err, "send its setup");
  return 0;
}

/* The next step of its start, once the fd it waits on (fork_template_wait_fd) is readable: 1 when
 * it is ready, 0 when it is not yet, -1 when it failed. */
int fork_template_step(struct fork_template *t, sbx_error_t *err)
{
  if (t->state == TMPL_SPAWNING) {
    if (sandbox_spawn_finish(t->sb, err) < 0)
      return -1;
    t->state = TMPL_SETUP;
    return 0;
  }
  char ok[300];
  ssize_t n = recv(t->ctl_fd, ok, sizeof ok - 1, MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN)
    return 0;
  ok[n > 0 ? n : 0] = '\0';
  char *end = ok + (n > 0 ? n : 0);
  if (n > 3 && memcmp(ok, "ok ", 3) == 0)
    t->rss_kb = strtoull(ok + 3, &end, 10);
  if (n < 2 || memcmp(ok, "ok", 2) != 0 || (n > 2 && (ok[2] != ' ' || *end != '\0'))) {
    /* "error WHY": it could not preload or load the C pid 1 (template.py); else its stderr says. */
    if (n > 6 && memcmp(ok, "error ", 6) == 0)
      return sbx_error_set(err, 0, "fork template did not start: %s", ok + 6);
    char buf[400];
    size_t k = fork_template_output(t, buf, sizeof buf);
    return sbx_error_set(err, 0, "fork template did not start%s%s", k ? ": " : "", buf);
  }
  t->state = TMPL_READY;
  return 1;
}

int fork_template_wait_fd(const struct fork_template *t)
{
  return t->state == TMPL_SPAWNING ? sandbox_spawn_fd(t->sb) : t->ctl_fd;
}

bool fork_template_ready(const struct fork_template *t)
{
  return t->state == TMPL_READY;
}

/* The rest of its start, blocking. */
int fork_template_wait_ready(struct fork_template *t, sbx_error_t *err)
{
  int r = t->state == TMPL_READY;
  while (r == 0) {
    if (wait_readable(fork_template_wait_fd(t), TEMPLATE_START_MS, "start of the fork template", err) < 0)
      return -1;
    r = fork_template_step(t, err);
  }
  return r < 0 ? -1 : 0;
}

/* Start a template: its sandbox created and its setup queued; fork_template_step finishes it. */
int fork_template_begin(const struct fork_template_config *cfg, struct fork_template **ret, sbx_error_t *err)
{
  const struct sbx_spec *base = cfg->spec;
  char *argv[] = {base->argv[0], "-c", TEMPLATE_BOOT, NULL};
  struct fork_template *t = calloc(1, sizeof *t);
  if (!t)
    return sbx_error_set(err, ENOMEM, "fork template");
  t->ctl_fd = t->log_fd = t->userns_fd = -1;
  t->call_policy = base->policy;
  int sv[2];
  _cleanup_close_ int log_w = -1, inside = -1;
  /* The calls' limits, as a call with the longest timeout gets them (its degraded RLIMIT_CPU). */
  struct sbx_limits limits = base->limits;
  if (fork_policy_make(t->call_policy, cfg->max_calls, &t->policy, &t->rules, err) < 0 ||
      open_pipe(&t->log_fd, &log_w, err) < 0)
    goto fail;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    sbx_error_errno(err, "fork template: socketpair");
    goto fail;
  }
  t->ctl_fd = sv[0];
  inside = sv[1];
  struct sbx_spec spec = *base;
  spec.policy = &t->policy;
  spec.stdout_fd = spec.stderr_fd = log_w;
  spec.bridge_fd = inside;
  enum cgroup_mode mode;
  sbx_error_t why = {0};
  bool degraded = cgroup_probe(&mode, &why) < 0;
  if (degraded)
    spec.limits.pids = fork_policy_pids(cfg->max_calls, limits.pids);
  spec.argv = argv;
  spec.keep_workspace = false;
  /* As root each call gets a host id of its own (as a cold sandbox does), mapped from the
   * template's user namespace, which maps the whole host_id_range for that. */
  spec.map_host_range = geteuid() == 0;
  if (sandbox_spawn_start(&spec, &t->sb, err) < 0 ||
      (spec.map_host_range && (t->userns_fd = sandbox_userns_fd(t->sb, err)) < 0))
    goto fail;
  sandbox_set_deadline(t->sb, UINT64_MAX);
  close(TAKE_FD(inside));
  close(TAKE_FD(log_w));
  if (send_setup(t, cfg, &limits, degraded, err) < 0) {
    /* Its sandbox's setup failed already (a bind the rootfs cannot take): say that. */
    sbx_error_t setup = {0};
    if (err->errnum == EPIPE && sandbox_spawn_finish(t->sb, &setup) < 0)
      *err = setup;
    goto fail;
  }
  *ret = t;
  return 0;
fail:
  sbx_error_prefix(err, "fork template");
  fork_template_free(t);
  return -1;
}

int fork_template_start(const struct fork_template_config *cfg, struct fork_template **ret, sbx_error_t *err)
{
  if (fork_template_begin(cfg, ret, err) < 0)
    return -1;
  if (fork_template_wait_ready(*ret, err) < 0) {
    sbx_error_prefix(err, "fork template");
    fork_template_free(TAKE_PTR(*ret));
    return -1;
  }
  return 0;
}

/* Its sandbox has not ended, and its Python still holds fd 3 and has not written to it (it only
 * answers its setup): its Python may die a moment before the sandbox's init does. */
unsigned long long fork_template_bytes(const struct fork_template *t)
{
  return t->rss_kb * 1024;
}

bool fork_template_alive(const struct fork_template *t)
{
  struct pollfd pfd[2] = {{.fd = sandbox_pidfd(t->sb), .events = POLLIN},
                          {.fd = t->ctl_fd, .events = POLLIN}};
  return poll(pfd, 2, 0) == 0;
}

int fork_template_pidfd(const struct fork_template *t)
{
  return sandbox_pidfd(t->sb);
}

size_t fork_template_output(struct fork_template *t, char *buf, size_t size)
{
  ssize_t n = read(t->log_fd, buf, size - 1);
  buf[n > 0 ? n : 0] = '\0';
  return n > 0 ? (size_t) n : 0;
}

/* One message from the child: its text (NUL-terminated), the sender's pid in our namespace, and
 * at most one fd. */
static int child_recv(int fd, char *buf, size_t size, pid_t *ret_pid, int *ret_fd, int *ret_fd2,
                      sbx_error_t *err)
{
  if (wait_readable(fd, CHILD_STEP_MS, "answer from the call's sandbox", err) < 0)
    return -1;
  union {
    char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct iovec iov = {.iov_base = buf, .iov_len = size - 1};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
  if (n <= 0)
    return sbx_error_set(err, 0, "the call's sandbox ended during its setup");
  buf[n] = '\0';
  *ret_pid = 0;
  if (ret_fd)
    *ret_fd = -1;
  if (ret_fd2)
    *ret_fd2 = -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      struct ucred cr;
      memcpy(&cr, CMSG_DATA(c), sizeof cr);
      *ret_pid = cr.pid;
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int nfds = (int) ((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < nfds; i++) {
        int f;
        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        if (ret_fd && *ret_fd < 0)
          *ret_fd = f;
        else if (ret_fd2 && *ret_fd2 < 0)
          *ret_fd2 = f;
        else
          close(f);
      }
    }
  }
  if (strncmp(buf, "error ", 6) == 0) {
    if (ret_fd && *ret_fd >= 0)
      close(TAKE_FD(*ret_fd));
    if (ret_fd2 && *ret_fd2 >= 0)
      close(TAKE_FD(*ret_fd2));
    return sbx_error_set(err, 0, "the call's sandbox: %s", buf + 6);
  }
  if (*ret_pid <= 0)
    return sbx_error_set(err, 0, "the call's sandbox: no credentials");
  return 0;
}

/* The call's cgroup, and on v1 the files its child moves itself in through. */
static int call_cgroup(const struct sbx_policy *policy, const struct sbx_limits *limits,
                       struct sbx_cgroup **ret, int fds[CGROUP_MAX_ATTACH_FDS], int *n_fds, sbx_error_t *err)
{
  enum cgroup_mode mode;
  sbx_error_t why = {0};
  *ret = NULL;
  *n_fds = 0;
  if (cgroup_probe(&mode, &why) < 0) {
    if (policy->cgroup != SBX_CGROUP_FALLBACK_RLIMIT) {
      *err = why;
      return sbx_error_prefix(err, "no cgroup to enforce limits");
    }
    sbx_warn(SBX_WARN_DEGRADED, "no cgroup for limits (%s); running with rlimits only, as policy `%s` allows",
             why.msg, policy->name);
    return 0;
  }
  if (cgroup_create(limits, ret, err) < 0)
    return -1;
  if (mode == CGROUP_V1 && (*n_fds = cgroup_attach_fds(*ret, fds, err)) < 0) {
    cgroup_destroy(TAKE_PTR(*ret));
    return -1;
  }
  return 0;
}

/* A sandbox being forked: asked of the template, its child's answers not all in yet. */
struct fork_pending {
  struct sbx_cgroup *cg; /* the call's, until sandbox_adopt takes it */
  int sv;                /* our end of the child's socket */
  bool acked;            /* its hello answered; its READY next */
  struct sbx_limits limits;
  uint64_t deadline_ns;            /* for its next answer */
  const struct sbx_policy *policy; /* the calls': network proxy gets the call a proxy */
  int userns_fd;                   /* root: the template's user namespace; else -1 */
  unsigned host_id;                /* root: the call's own host id (its proxy runs as it); else 0 */
  int host_id_lock;                /* root: holds host_id until the call's sandbox is torn down */
};

void fork_pending_free(struct fork_pending *fp)
{
  if (!fp)
    return;
  if (fp->sv >= 0)
    close(fp->sv);
  cgroup_destroy(fp->cg); /* kills whatever moved in */
  if (fp->userns_fd >= 0)
    close(fp->userns_fd);
  if (fp->host_id_lock >= 0)
    close(fp->host_id_lock);
  free(fp);
}

int fork_pending_fd(const struct fork_pending *fp)
{
  return fp->sv;
}

uint64_t fork_pending_deadline(const struct fork_pending *fp)
{
  return fp->deadline_ns;
}

/* Ask the template for the call's sandbox, with out_w, err_w and inside (its fd 3) as a cold
 * sandbox's spec has them; fork_pending_step collects its child's answers. */
int fork_pending_begin(struct fork_template *t, const struct sbx_limits *limits, int out_w, int err_w,
                       int inside, struct fork_pending **ret, sbx_error_t *err)
{
  struct fork_pending *fp = calloc(1, sizeof *fp);
  if (!fp)
    return sbx_error_set(err, ENOMEM, "fork");
  fp->sv = fp->host_id_lock = -1;
  fp->limits = *limits;
  fp->policy = t->call_policy;
  fp->userns_fd = t->userns_fd >= 0 ? fcntl(t->userns_fd, F_DUPFD_CLOEXEC, 3) : -1;
  if (t->userns_fd >= 0 && fp->userns_fd < 0) {
    sbx_error_errno(err, "fork: dup");
    free(fp);
    return -1;
  }
  int cgfds[CGROUP_MAX_ATTACH_FDS], n_cg = 0;
  if (call_cgroup(t->call_policy, limits, &fp->cg, cgfds, &n_cg, err) < 0) {
    fork_pending_free(fp);
    return -1;
  }
  int sv[2] = {-1, -1};
  int one = 1;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    sbx_error_errno(err, "fork: socketpair");
    goto fail;
  }
  fp->sv = sv[0];
  if (setsockopt(fp->sv, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0) {
    sbx_error_errno(err, "fork: SO_PASSCRED");
    goto fail;
  }
  int fds[4 + CGROUP_MAX_ATTACH_FDS] = {sv[1], out_w, err_w, inside};
  for (int i = 0; i < n_cg; i++)
    fds[4 + i] = cgfds[i];
  union {
    char buf[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } u;
  /* The call's own CPU backstop (degraded: RLIMIT_CPU), one second past its timeout. */
  char req[40];
  if (bufprintf(req, sizeof req, err, "fork %llu",
                (unsigned long long) ((limits->timeout_ms + 999) / 1000 + 1)) < 0)
    goto fail;
  struct iovec iov = {.iov_base = req, .iov_len = strlen(req)};
  struct msghdr mh = {.msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = u.buf,
                      .msg_controllen = CMSG_SPACE((size_t) (4 + n_cg) * sizeof(int))};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN((size_t) (4 + n_cg) * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, (size_t) (4 + n_cg) * sizeof(int));
  ssize_t sent = sendmsg(t->ctl_fd, &mh, MSG_NOSIGNAL);
  close(TAKE_FD(sv[1]));
  while (n_cg > 0)
    close(cgfds[--n_cg]);
  if (sent < 0) {
    sbx_error_errno(err, "fork: ask the template");
    goto fail;
  }
  fp->deadline_ns = now_ns() + CHILD_STEP_MS * 1000000ULL;
  *ret = fp;
  return 0;
fail:
  if (sv[1] >= 0)
    close(sv[1]);
  while (n_cg > 0)
    close(cgfds[--n_cg]);
  fork_pending_free(fp);
  return -1;
}

/* Its child's next answer: 1 when the sandbox is built (*ret, fp freed), 0 when another answer
 * is due (fp->sv turns readable), -1 when it failed (fp freed). Blocks up to CHILD_STEP_MS. */
int fork_pending_step(struct fork_pending *fp, struct sbx_sandbox **ret, sbx_error_t *err)
{
  char buf[600];
  pid_t pid;
  int ws = -1, lfd = -1;
  if (!fp->acked) {
    /* The child's pid reaches us translated; on v2 it goes into the cgroup before it goes on. */
    if (child_recv(fp->sv, buf, sizeof buf, &pid, NULL, NULL, err) < 0 ||
        (fp->cg && cgroup_clone_fd(fp->cg) >= 0 && cgroup_attach_pid(fp->cg, pid, err) < 0))
      goto fail;
    /* As root: a host id of the call's own, as a cold sandbox's (sandbox_spawn_start). */
    if (fp->userns_fd >= 0 && (hostid_acquire(fp->policy->host_id_start, fp->policy->host_id_count,
                                              &fp->host_id, &fp->host_id_lock, err) < 0 ||
                               ns_write_call_maps(fp->userns_fd, pid, fp->policy, fp->host_id, err) < 0))
      goto fail;
    if (send(fp->sv, "ack", 3, MSG_NOSIGNAL) != 3) {
      sbx_error_errno(err, "fork: ack");
      goto fail;
    }
    fp->acked = true;
    fp->deadline_ns = now_ns() + CHILD_STEP_MS * 1000000ULL;
    return 0;
  }
  /* READY: the workspace, then (network proxy) the egress listener it made in its netns. */
  if (child_recv(fp->sv, buf, sizeof buf, &pid, &ws, &lfd, err) < 0)
    goto fail; /* (it has exited, or is about to: its pid is not ours to signal) */
  unsigned long long ino = 0, dev = 0;
  if (sscanf(buf, "ready %llu %llu", &ino, &dev) != 2 || ws < 0) {
    sbx_error_set(err, 0, "fork: unexpected answer `%.80s`", buf);
    goto fail; /* pid 1 waits for a go that never comes: it exits when fp->sv closes */
  }
  /* pid 1 waits for "go" before it forks the code, so it cannot have exited (and its pid cannot
   * name another process) until this pidfd holds it; without the go it exits on its own, when
   * fp->sv closes. */
  int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) {
    sbx_error_errno(err, "fork: pidfd_open");
    goto fail;
  }
  if (send(fp->sv, "go", 2, MSG_NOSIGNAL) != 2) {
    sbx_error_errno(err, "fork: go");
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    close(pidfd);
    goto fail;
  }
  /* sandbox_adopt takes the fds and the cgroup (and kills it on failure). */
  int r = sandbox_adopt(pid, pidfd, TAKE_FD(fp->sv), TAKE_PTR(fp->cg), ws, ino, dev, &fp->limits, fp->policy,
                        lfd, fp->host_id, TAKE_FD(fp->host_id_lock), ret, err);
  fork_pending_free(fp);
  return r < 0 ? -1 : 1;
fail:
  if (ws >= 0)
    close(ws);
  if (lfd >= 0)
    close(lfd);
  fork_pending_free(fp);
  return -1;
}

/* fork_pending_begin, then its answers, blocking. */
int fork_template_fork(struct fork_template *t, const struct sbx_limits *limits, int out_w, int err_w,
                       int inside, struct sbx_sandbox **ret, sbx_error_t *err)
{
  struct fork_pending *fp;
  if (fork_pending_begin(t, limits, out_w, err_w, inside, &fp, err) < 0)
    return -1;
  int r;
  while ((r = fork_pending_step(fp, ret, err)) == 0)
    ;
  return r < 0 ? -1 : 0;
}
