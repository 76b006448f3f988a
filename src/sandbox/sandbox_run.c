/* SPDX-License-Identifier: Apache-2.0 */
/* `sandboxd exec`'s sandbox, run to completion: spawn (sandbox.c), forward signals, wait with
 * the timeout, then the result and teardown (sandbox_proc.c). */
#include "sandbox/sandbox_run.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/util.h"
#include "sandbox/sandbox_internal.h"

#define GRACE_MS 2000

int sandbox_run(const struct sbx_spec *spec, struct sbx_result *res, sbx_error_t *err)
{
  return sandbox_run_hooks(spec, NULL, res, err);
}

int sandbox_run_hooks(const struct sbx_spec *spec, const struct sbx_run_hooks *hooks, struct sbx_result *res,
                      sbx_error_t *err)
{
  /* Take the signals synchronously, so a Ctrl-C arriving during setup is not lost and a handler
   * never runs in the middle of it. The child unblocks them again. */
  sigset_t mask, old;
  sigemptyset(&mask);
  for (size_t i = 0; i < sizeof sandbox_forwarded_signals / sizeof *sandbox_forwarded_signals; i++)
    sigaddset(&mask, sandbox_forwarded_signals[i]);
  sigprocmask(SIG_BLOCK, &mask, &old);
  _cleanup_close_ int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    return sbx_error_errno(err, "signalfd");
  }
  struct sbx_sandbox *s = NULL;
  if (sandbox_spawn(spec, &s, err) < 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    return -1;
  }
  uint64_t kill_at = s->deadline_ns;
  bool killed = false;
  for (;;) {
    uint64_t now = now_ns();
    if (now >= kill_at) {
      sandbox_kill(s, !killed);
      break;
    }
    uint64_t left_ms = (kill_at - now + 999999) / 1000000;
    int timeout = left_ms > INT32_MAX ? INT32_MAX : (int) left_ms;
    /* pid 1 exits (its pidfd), or with spec.leave_at_exit says the code ended (the sync socket:
     * after READY, MSG_EXIT is all it sends). */
    struct pollfd pfd[3 + SBX_RUN_MAX_HOOK_FDS] = {{.fd = s->pidfd, .events = POLLIN},
                                                   {.fd = sfd, .events = POLLIN},
                                                   {.fd = s->leave ? s->sync_fd : -1, .events = POLLIN}};
    size_t n_hook =
        hooks && hooks->fill ? hooks->fill(hooks->ctx, pfd + 3, SBX_RUN_MAX_HOOK_FDS, &timeout) : 0;
    int r = poll(pfd, 3 + n_hook, timeout);
    if (r < 0 && errno != EINTR)
      break;
    if (pfd[0].revents || pfd[2].revents)
      break;
    if (r > 0 && n_hook)
      hooks->dispatch(hooks->ctx, pfd + 3, n_hook);
    if (pfd[1].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
        /* Relay to the code; if it has not ended within the grace period, kill it. */
        sandbox_signal(s, (int) si.ssi_signo);
        if (!killed) {
          killed = true;
          uint64_t grace = now_ns() + GRACE_MS * 1000000ULL;
          if (grace < kill_at)
            kill_at = grace;
        }
      }
    }
  }
  int rc = sandbox_wait(s, res, err);
  if (rc == 0 && hooks && hooks->ended)
    hooks->ended(hooks->ended_ctx, s);
  sandbox_free(s);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return rc;
}
