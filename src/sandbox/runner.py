# sandboxd run_python entry point: runs sys.argv[1] as the __main__ module, with top-level await.
# sandboxd passes this file's text to `python3 -c`, so keep it self-contained (src/mcp_server.c
# holds a copy that tests/unit/test_jsonrpc.c checks against this file).
def _sandboxd_run():
    import ast, asyncio, inspect, linecache, sys, traceback

    code = sys.argv[1]
    del sys.argv[1:]
    name = "<run_python>"
    # Show the user's lines in tracebacks.
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    # A killed run still shows what it printed up to then.
    sys.stdout.reconfigure(line_buffering=True)
    main = sys.modules["__main__"].__dict__
    main.pop("_sandboxd_run", None)
    try:
        co = compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        if co.co_flags & inspect.CO_COROUTINE:
            asyncio.run(eval(co, main))
        else:
            exec(co, main)
    except SystemExit:
        raise
    except BaseException as e:
        # Drop this runner's (and asyncio's) frames: the traceback starts in the user's code.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != name:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        sys.stderr.flush()
        sys.exit(1)


_sandboxd_run()
