"""Runs INSIDE the sandbox: pushes one resource limit until it bites, prints JSON of what happened.

Usage: limits.py memory|forkbomb|threads|tmpfill|workspacefill|shmfill|fsize|nofile [ARG]"""
import errno
import json
import os
import sys
import time

mode = sys.argv[1]
arg = sys.argv[2] if len(sys.argv) > 2 else None
MiB = 1 << 20


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if getattr(e, "errno", None) else type(e).__name__


def fill(directory, mib):
    """Write up to mib MiB into directory, in files of at most 32 MiB (so the file size limit
    is not what stops us); report how far it got."""
    chunk = b"\xa5" * MiB
    written = 0
    paths = []
    result = None
    try:
        while written < mib:
            paths.append(os.path.join(directory, f"fill{len(paths)}"))
            with open(paths[-1], "wb", buffering=0) as f:
                for _ in range(min(32, mib - written)):
                    f.write(chunk)
                    written += 1
    except OSError as e:
        result = ename(e)
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass
    return {"written_mib": written, "error": result}


out = {"mode": mode}
if mode == "memory":
    size = int(arg or 1 << 30)
    try:
        b = bytearray(size)
        for i in range(0, size, 4096):  # touch every page: the memory must really exist
            b[i] = 1
        out["allocated"] = True
    except MemoryError:
        out["allocated"] = False
        out["error"] = "MemoryError"
elif mode == "forkbomb":
    # Forks sleepers until the kernel says no; the sandbox's end kills them all.
    n = 0
    out["error"] = None
    start = time.monotonic()
    while n < 10000 and time.monotonic() - start < 20:
        try:
            pid = os.fork()
        except OSError as e:
            out["error"] = ename(e)
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    out["forked"] = n
elif mode == "threads":
    import threading
    ev = threading.Event()
    n = 0
    out["error"] = None
    while n < 10000:
        try:
            threading.Thread(target=ev.wait, daemon=True).start()
        except RuntimeError as e:
            out["error"] = str(e)
            break
        n += 1
    out["started"] = n
    ev.set()
elif mode == "tmpfill":
    out.update(fill("/tmp", int(arg or 80)))
elif mode == "workspacefill":
    out.update(fill("/workspace", int(arg or 160)))
elif mode == "shmfill":
    out.update(fill("/dev/shm", int(arg or 80)))
elif mode == "fsize":
    # One byte past the limit, sparse: no memory or disk is used, only the offset counts.
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # Python ignores it already; be explicit
    offset = int(arg)
    try:
        with open("/workspace/big", "wb", buffering=0) as f:
            f.seek(offset)
            f.write(b"x")
        out["error"] = None
    except OSError as e:
        out["error"] = ename(e)
    try:
        with open("/workspace/small", "wb", buffering=0) as f:
            f.seek(offset - 4096)
            f.write(b"x")
        out["below_limit"] = "ok"
    except OSError as e:
        out["below_limit"] = ename(e)
elif mode == "nofile":
    fds = []
    out["error"] = None
    try:
        for _ in range(int(arg or 2000)):
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        out["error"] = ename(e)
    out["opened"] = len(fds)
    out["highest"] = max(fds) if fds else None
    for fd in fds:
        os.close(fd)
elif mode == "cpu":
    # Spin for ARG seconds of wall time; the report's cpu_time_ms shows the share we got.
    end = time.monotonic() + float(arg or 1)
    while time.monotonic() < end:
        pass
else:
    sys.exit(f"unknown mode {mode}")
print(json.dumps(out), flush=True)
