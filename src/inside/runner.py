# SPDX-License-Identifier: Apache-2.0
# sandboxd run_python entry point: runs the code as the __main__ module, with top-level await.
# sandboxd passes this file's text to `python3 -c`, so keep it self-contained (the build links
# this file into the binary: src/mcp_runner.c).
# The code never comes in argv (the kernel limits one argument to 128 KiB): the runner, cold or
# warm (started ahead of the call), reads one job from fd 3 (src/mcp_job.c): a 4-byte big-endian
# length, then that many bytes of UTF-8: "bridge SERVERS" or "bridge" or "done", a newline, the
# code. "bridge": fd 3 goes on as the bridge to host MCP servers (src/inside/mcp), and SERVERS,
# "a,b", are the ones the code may call (with none listed, for discovery); the runner's last frame
# on it, sandboxd/done, carries the exit status. "done": no bridge (no host server is
# configured), fd 3 is the done channel, and the runner's last byte on it is the exit status.
# Either lets sandboxd answer once the run is over and its output flushed, without waiting for
# this process and the sandbox to be torn down. sandboxd then kills the sandbox.
def _sandboxd_run(session=None):
    # session: (exit_status, done_frame) when a session's interpreter (session.py) runs this per
    # call: the code runs in the same __main__ every call, and this returns the status instead of
    # leaving (no interpreter shutdown: the session's threads and atexit handlers live on).
    # Only what every run needs: asyncio and traceback cost tens of milliseconds to import, so
    # they are imported when the code awaits or fails.
    import linecache, os, sys

    PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    CO_COROUTINE = 0x80  # inspect.CO_COROUTINE

    def read(n, first=b""):
        buf = bytearray(n)
        buf[: len(first)] = first
        view, got = memoryview(buf), len(first)
        while got < n:  # one copy, however large the code (up to --max-message-size)
            k = os.readv(3, [view[got:]])
            if not k:  # sandboxd dropped this sandbox before giving it a job
                os._exit(0)
            got += k
        return buf

    # A call waiting already (cold, or a warm sandbox taken while it was being built): serve it at
    # once. Otherwise, while idle, pay the compiler's first-call cost off the call's clock. No
    # module is imported ahead: this process serves one call, so whatever it imports is CPU spent
    # on every call, used or not (`json`, with `re` and `enum`, is about half again Python's own
    # startup), and a warm sandbox holds exactly the modules a cold one does.
    os.set_blocking(3, False)
    try:
        head = os.read(3, 4)
    except BlockingIOError:
        head = None
    os.set_blocking(3, True)
    if head is None:
        compile("pass", "<warm-up>", "exec", flags=PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        head = b""
    elif not head:
        os._exit(0)
    job = read(int.from_bytes(read(4, head), "big"))
    line, _, code = job.decode("utf-8", "surrogateescape").partition("\n")
    mode, _, servers = line.partition(" ")
    del read, head, job, line
    bridge = mode == "bridge"
    done_fd = None
    if bridge:
        # The servers this run may call (src/inside/mcp/runtime.py); set, even empty, it says fd 3
        # is the bridge.
        os.environ["SANDBOXD_MCP_SERVERS"] = servers
    else:
        try:
            os.set_inheritable(3, False)  # not into programs the code runs
            done_fd = 3
        except OSError:
            pass
    if session is None:
        del sys.argv[1:]
    name = "<run_python>"
    # Show the user's lines in tracebacks.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    # A killed run still shows what it printed up to then.
    sys.stdout.reconfigure(line_buffering=True)
    main = sys.modules["__main__"].__dict__
    # Ours, out of the code's namespace (the code cannot replace them by defining those names).
    if session is None:
        exit_status, done_frame = main.pop("_exit_status"), main.pop("_done_frame")
        main.pop("_sandboxd_run", None)
    else:
        exit_status, done_frame = session
    # With `servers`: mcp_<alias> and mcp_servers for the host MCP servers (src/inside/mcp).
    if servers:
        from mcp import runtime
        runtime.install(main)
    # Plots: where the helpers are importable, matplotlib (if the rootfs has it, and only when the
    # code picks no backend) saves figures to /workspace/out (src/inside/sandboxd/plots.py).
    if "MPLBACKEND" not in os.environ and "/run/sandboxd/python" in sys.path:
        os.environ["MPLBACKEND"] = "module://sandboxd.plots"
    del mode, servers
    status = 0
    try:
        co = compile(code, name, "exec", flags=PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        if co.co_flags & CO_COROUTINE:
            import asyncio

            asyncio.run(eval(co, main))
        else:
            exec(co, main)
    except SystemExit as e:
        status = exit_status(e.code)
    except BaseException as e:
        # Drop this runner's (and asyncio's) frames: the traceback starts in the user's code.
        import traceback

        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != name:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        status = 130 if isinstance(e, KeyboardInterrupt) else 1
    # What interpreter shutdown does that a program can see: wait for non-daemon threads, run
    # atexit handlers, flush. Then leave without the rest of finalization (module teardown and
    # garbage collection of a process about to vanish cost a millisecond or more per call).
    try:
        threading = sys.modules.get("threading") if session is None else None
        if threading is not None:
            threading._shutdown()
        # Figures still open are saved as plt.show() saves them; before atexit, where matplotlib
        # closes them. Costs nothing where the code did not use pyplot with that backend.
        plots = sys.modules.get("sandboxd.plots") if "matplotlib.pyplot" in sys.modules else None
        if plots is not None:
            try:
                plots.save_at_exit()
            except Exception as e:  # only if the code replaced the module: still finish the run
                print("sandboxd: figures not saved: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        if session is None:
            import atexit

            atexit._run_exitfuncs()
    except SystemExit as e:
        status = exit_status(e.code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if done_fd is not None:
        try:
            os.write(done_fd, bytes([status & 0xFF]))
        except OSError:  # the code closed or replaced fd 3: sandboxd waits for the exit instead
            pass
    elif bridge:
        done_frame(status & 0xFF)
    if session is not None:
        return status
    os._exit(status)


def _done_frame(status):
    """The bridge's last frame: after the package's own (whole) frames, never inside one, and
    without blocking (a bridge sandboxd stopped reading means the call ends at the exit instead)."""
    import os, sys

    body = b'{"jsonrpc":"2.0","method":"sandboxd/done","params":{"status":%d}}' % status
    b = getattr(sys.modules.get("mcp._bridge"), "_bridge", None)
    lock = getattr(b, "_send_lock", None)
    if lock is not None and not lock.acquire(timeout=1):
        return
    try:
        os.set_blocking(3, False)
        os.write(3, len(body).to_bytes(4, "big") + body)
    except OSError:  # the code closed or replaced fd 3, or the socket is full
        pass


def _exit_status(code):
    """sys.exit(code) as the interpreter maps it to a process exit status."""
    import sys

    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


if not globals().get("_SANDBOXD_SESSION"):  # a session's interpreter runs it per call (session.py)
    _sandboxd_run()
