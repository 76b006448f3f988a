/* SPDX-License-Identifier: Apache-2.0 */
/* Host MCP servers' processes: spawning one with its environment and pipes, and shutting them
 * down in the spec's order (mcp_client_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "hostmcp/mcp_client_internal.h"

/* The environment every server gets from ours, as the MCP SDKs do; then its configured env. */
static const char *const inherited_env[] = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"};

void mcp_client_reap_dying(struct mcp_hosts *h, uint64_t now)
{
  for (size_t i = 0; i < h->n_dying;) {
    struct dying *d = &h->dying[i];
    pid_t r = waitpid(d->pid, NULL, WNOHANG);
    if (r == d->pid || (r < 0 && errno == ECHILD)) {
      h->dying[i] = h->dying[--h->n_dying];
      continue;
    }
    if (now >= d->kill_at_ns)
      kill(d->pid, SIGKILL);
    else if (!d->termed && now >= d->term_at_ns) {
      d->termed = true;
      kill(d->pid, SIGTERM);
    }
    i++;
  }
}

/* Hand a process over to be shut down: its stdin is already closed. */
void mcp_client_add_dying(struct mcp_hosts *h, pid_t pid, uint64_t term_after_ms)
{
  uint64_t now = now_ns();
  if (h->n_dying == ARRAY_SIZE(h->dying)) {
    /* Full: do not wait, SIGKILL now and reap what we can. */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, WNOHANG);
    return;
  }
  h->dying[h->n_dying++] = (struct dying){
      .pid = pid,
      .term_at_ns = now + term_after_ms * 1000000ULL,
      .kill_at_ns = now + (term_after_ms + KILL_AFTER_MS - TERM_AFTER_MS) * 1000000ULL,
  };
}

static char **build_env(const struct mcp_server_config *cfg)
{
  char **env = calloc(ARRAY_SIZE(inherited_env) + cfg->n_env + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < ARRAY_SIZE(inherited_env); i++) {
    const char *v = getenv(inherited_env[i]);
    size_t nl = strlen(inherited_env[i]);
    bool overridden = false;
    for (size_t j = 0; j < cfg->n_env; j++)
      if (strncmp(cfg->env[j], inherited_env[i], nl) == 0 && cfg->env[j][nl] == '=')
        overridden = true;
    if (v && !overridden && asprintf(&env[k], "%s=%s", inherited_env[i], v) >= 0)
      k++;
  }
  for (size_t j = 0; j < cfg->n_env; j++)
    if ((env[k] = strdup(cfg->env[j])))
      k++;
  return env;
}

static void free_env(char **env)
{
  for (size_t i = 0; env && env[i]; i++)
    free(env[i]);
  free(env);
}

int mcp_client_spawn_server(struct mcp_hosts *h, struct client *c, sbx_error_t *err)
{
  const struct mcp_server_config *cfg = c->cfg;
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) < 0)
    return sbx_error_errno(err, "pipe");
  if (pipe2(out, O_CLOEXEC) < 0) {
    close(in[0]);
    close(in[1]);
    return sbx_error_errno(err, "pipe");
  }
  _cleanup_close_ int in_r = in[0], in_w = in[1], out_r = out[0], out_w = out[1];
  _cleanup_close_ int devnull = -1;
  int errfd = h->stderr_fd;
  if (errfd < 0 && (errfd = devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
    return sbx_error_errno(err, "open `/dev/null`");
  char **env = build_env(cfg);
  if (!env)
    return sbx_error_set(err, ENOMEM, "host server `%s`", cfg->name);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in_r, 0);
  posix_spawn_file_actions_adddup2(&fa, out_w, 1);
  posix_spawn_file_actions_adddup2(&fa, errfd, 2);
  if (cfg->cwd)
    posix_spawn_file_actions_addchdir_np(&fa, cfg->cwd);
  /* Our blocked signals (sandboxd takes them through a signalfd) must not be inherited; its own
   * process group keeps a terminal's Ctrl-C from reaching it before we shut it down in order. */
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid;
  int r = posix_spawnp(&pid, cfg->argv[0], &fa, &attr, cfg->argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  free_env(env);
  if (r != 0)
    return sbx_error_set(err, r, "cannot start host server `%s` (`%s`%s%s)", cfg->name, cfg->argv[0],
                         cfg->cwd ? " in " : "", cfg->cwd ? cfg->cwd : "");
  if (fcntl(in_w, F_SETFL, O_NONBLOCK) < 0 || fcntl(out_r, F_SETFL, O_NONBLOCK) < 0) {
    int e = errno;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return sbx_error_set(err, e, "host server `%s`", cfg->name);
  }
  c->pid = pid;
  c->in_fd = TAKE_FD(in_w);
  c->out_fd = TAKE_FD(out_r);
  c->outq.len = c->outq_off = 0;
  jsonrpc_framer_free(&c->framer);
  jsonrpc_framer_init(&c->framer, MCP_CLIENT_MAX_MESSAGE);
  return 0;
}
