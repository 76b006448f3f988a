# SPDX-License-Identifier: Apache-2.0
# A session's interpreter (`sandboxd mcp`, session_start; src/mcp/mcp_sessions.c). sandboxd runs
# `python3 -c` on "_SANDBOXD_SESSION = True", runner.py and this file, assembled into one text
# (src/mcp/mcp_runner.c): one copy of the runner, which this loop calls once per call.
#
# fd 3 is the session's control socket. Per call, sandboxd sends one byte on it with three fds
# (SCM_RIGHTS): the call's stdout and stderr pipes and its own job socket. This process puts them
# at 1, 2 and 3, and the runner reads the call's job from fd 3 and answers on it (the done byte,
# or with a bridge the done frame) exactly as in a one-shot call; then they are closed here and
# 1 and 2 go back to /dev/null. The code runs in the same __main__ every call: its variables,
# imports, threads and processes stay. EOF on the control socket ends the session.
def _sandboxd_session():
    import os, struct, sys

    import _socket as socket

    main = sys.modules["__main__"].__dict__
    # Ours, out of the code's namespace (as the runner keeps its own).
    run = main.pop("_sandboxd_run")
    end_bridge = main["_end_bridge"]
    helpers = (main.pop("_exit_status"), main.pop("_done_frame"))
    main.pop("_sandboxd_session", None)
    main.pop("_end_bridge", None)
    main.pop("_SANDBOXD_SESSION", None)
    if sys.argv[1:] == ["bash"]:  # a bash session: this loop runs each call in one bash (_Bash)
        run = main.pop("_Bash")()
    main.pop("_Bash", None)
    del sys.argv[1:]
    ctl = socket.socket(fileno=os.dup(3))  # not inheritable: never in the code's children
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (1, 2, 3):
        os.dup2(null, fd)
    out_dir = "/workspace/out"
    while True:
        try:
            msg, anc, _, _ = ctl.recvmsg(1, socket.CMSG_SPACE(3 * 4))
        except (KeyboardInterrupt, InterruptedError):  # an interrupt that came late: no call runs
            continue
        if not msg:
            os._exit(0)
        fds = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += struct.unpack("%di" % (len(data) // 4), data[: len(data) - len(data) % 4])
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        try:
            # Each call's files out are its own: what an earlier call left there came back already.
            for entry in os.scandir(out_dir):
                if entry.is_dir(follow_symlinks=False):
                    import shutil

                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
        except OSError:
            pass
        for fd, at in zip(fds, (1, 2, 3)):
            os.dup2(fd, at)
            os.close(fd)
        try:
            run(helpers)
        except KeyboardInterrupt:  # an interrupt during the runner's own epilogue
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        end_bridge(sys, os, socket)
        # 1, 2 and 3 stay taken between calls, so that the next call's fds arrive above them.
        for fd in (1, 2, 3):
            os.dup2(null, fd)


class _Bash:
    """A bash session's shell: one bash for the session's life, so its variables, functions and
    working directory last. Per call (as the runner does for Python): the job from fd 3, its code
    run in that bash by `eval` in a function (an interrupt returns from it: the INT trap), its
    output relayed to fds 1 and 2, then its status as the done byte on fd 3. If bash exits (the
    code's `exit`), so does this process: the session is over."""

    def __init__(self):
        import os, subprocess

        self.os = os
        self.code_r, self.code_w = os.pipe()
        self.st_r, st_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        for fd in (self.out_r, self.err_r, self.st_r):
            os.set_blocking(fd, False)
        self.bash = subprocess.Popen(["/usr/bin/bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                                     stdout=out_w, stderr=err_w, pass_fds=(self.code_r, st_w),
                                     start_new_session=True)
        for fd in (out_w, err_w, st_w):  # bash's now (the status's number is the same in bash)
            os.close(fd)
        self.st_w = st_w
        # Its end, seen even while a process it started keeps the status pipe open.
        self.gone = os.pidfd_open(self.bash.pid)
        self.send('__sbx_run() { trap "trap - INT; return 130" INT; eval "$__sbx_code"; }\n')
        self.status = b""

    def send(self, text):
        self.bash.stdin.write(text.encode())
        self.bash.stdin.flush()

    def relay(self, timeout, copy=True):
        """Copy (or drop) what bash wrote; whether anything was there."""
        import select

        os = self.os
        ready = select.select([self.out_r, self.err_r, self.st_r, self.gone], [], [], timeout)[0]
        if self.gone in ready:  # bash is gone (the code's `exit`): so is the session
            os._exit(self.bash.wait() & 0xFF or 1)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if fd == self.st_r:
                self.status += data
            elif data and copy:
                try:
                    os.write(1 if fd == self.out_r else 2, data)
                except OSError:
                    pass
        return bool(ready)

    def __call__(self, helpers):
        import signal

        os = self.os
        code = self.read(int.from_bytes(self.read(4), "big")).partition(b"\n")[2]
        while self.relay(0, copy=False):  # what background processes wrote between calls
            pass
        self.status = b""
        self.send("LC_ALL=C IFS= read -r -N %d __sbx_code <&%d; __sbx_run </dev/null; printf '%%d\\n' $? >&%d\n"
                  % (len(code), self.code_r, self.st_w))
        view = memoryview(code)
        while True:
            try:
                while view:
                    view = view[os.write(self.code_w, view):]
                while not self.status.endswith(b"\n"):
                    self.relay(None)
                break
            except KeyboardInterrupt:  # the call's time limit: to bash's foreground command
                os.killpg(self.bash.pid, signal.SIGINT)
        while self.relay(0):  # the rest of its output
            pass
        status = int(self.status) & 0xFF
        try:
            os.write(3, bytes([status]))
        except OSError:
            pass
        return status

    def read(self, n):
        buf = b""
        while len(buf) < n:
            k = self.os.read(3, n - len(buf))
            if not k:
                self.os._exit(0)
            buf += k
        return buf


def _end_bridge(sys, os, socket):
    """The call's bridge to host servers (src/inside/mcp/_bridge.py) ends with the call: its reader
    thread, blocked on fd 3, would otherwise read the next call's job there. The next call with
    `servers` makes a new one on its own fd 3; one without has none (no SANDBOXD_MCP_SERVERS)."""
    os.environ.pop("SANDBOXD_MCP_SERVERS", None)
    mod = sys.modules.get("mcp._bridge")
    b = getattr(mod, "_bridge", None)
    if b is None:
        return
    mod._bridge = None
    try:
        b._sock.shutdown(socket.SHUT_RDWR)  # wakes its reader: EOF
    except OSError:
        pass
    b._reader.join(2)
    b._sock.close()  # fd 3 (the caller fills it again)


_sandboxd_session()
