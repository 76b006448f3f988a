# sandboxd run_python entry point: runs the code as the __main__ module, with top-level await.
# sandboxd passes this file's text to `python3 -c`, so keep it self-contained (the build links
# this file into the binary: src/mcp_runner.c).
# Cold: the code is sys.argv[1]. Warm (no argument): started ahead of the call, the runner waits
# for one job on the bridge at fd 3 (a 4-byte big-endian length, then that many bytes of UTF-8:
# the servers, "a,b" or nothing, a newline, the code); with servers the same socket goes on as the
# bridge.
# Without servers, fd 3 (warm or cold) is the done channel: once the run is over and its output
# flushed, one byte, the exit status, lets sandboxd answer without waiting for this process and
# the sandbox to be torn down. sandboxd then kills the sandbox.
def _sandboxd_run():
    # Only what every run needs: asyncio and traceback cost tens of milliseconds to import, so
    # they are imported when the code awaits or fails.
    import linecache, os, sys

    PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    CO_COROUTINE = 0x80  # inspect.CO_COROUTINE

    if len(sys.argv) > 1:
        code = sys.argv[1]
    else:
        def read(n, buf=b""):
            while len(buf) < n:
                chunk = os.read(3, n - len(buf))
                if not chunk:  # sandboxd dropped this sandbox before giving it a job
                    os._exit(0)
                buf += chunk
            return buf

        # A call that took this sandbox while it was being built is waiting already: serve it at
        # once. Otherwise, while idle, import the common modules and pay first-call costs (the
        # first compile() of a process takes a millisecond or more) off the call's clock.
        os.set_blocking(3, False)
        try:
            head = os.read(3, 4)
        except BlockingIOError:
            head = None
        os.set_blocking(3, True)
        if head is None:
            import json

            json.loads('{"warm": "up"}')
            compile("pass", "<warm-up>", "exec", flags=PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
            del json
            head = b""
        elif not head:
            os._exit(0)
        head = read(4, head)
        job = read(int.from_bytes(head, "big")).decode("utf-8", "surrogateescape")
        servers, _, code = job.partition("\n")
        if servers:
            # What the cold path puts in the environment for a run with servers.
            os.environ["PYTHONPATH"] = "/run/sandboxd/python"
            os.environ["SANDBOXD_MCP_SERVERS"] = servers
            sys.path.insert(1, "/run/sandboxd/python")
        del read, head, job, servers
    done_fd = None
    if not os.environ.get("SANDBOXD_MCP_SERVERS"):
        try:
            os.set_inheritable(3, False)  # not into programs the code runs
            done_fd = 3
        except OSError:
            pass
    del sys.argv[1:]
    name = "<run_python>"
    # Show the user's lines in tracebacks.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    # A killed run still shows what it printed up to then.
    sys.stdout.reconfigure(line_buffering=True)
    main = sys.modules["__main__"].__dict__
    main.pop("_sandboxd_run", None)
    # With `servers`: mcp_<alias> and mcp_servers for the host MCP servers (src/inside/mcp).
    if os.environ.get("SANDBOXD_MCP_SERVERS"):
        from mcp import runtime
        runtime.install(main)
    # Plots: where the helpers are importable, matplotlib (if the rootfs has it, and only when the
    # code picks no backend) saves figures to /workspace/out (src/inside/sandboxd/plots.py).
    if "MPLBACKEND" not in os.environ and "/run/sandboxd/python" in sys.path:
        os.environ["MPLBACKEND"] = "module://sandboxd.plots"
    status = 0
    try:
        co = compile(code, name, "exec", flags=PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        if co.co_flags & CO_COROUTINE:
            import asyncio

            asyncio.run(eval(co, main))
        else:
            exec(co, main)
    except SystemExit as e:
        status = _exit_status(e.code)
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
        threading = sys.modules.get("threading")
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
        import atexit

        atexit._run_exitfuncs()
    except SystemExit as e:
        status = _exit_status(e.code)
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
    os._exit(status)


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


_sandboxd_run()
