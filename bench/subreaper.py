#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run a command as a child subreaper, for tests/mcp/bench.mjs's CPU meters (not a product).

Usage: bench/subreaper.py [--cgroup PROCS_FILE]... -- COMMAND [ARG...]

Joins each cgroup whose cgroup.procs is a PROCS_FILE first (one per v1 hierarchy) (so COMMAND and all it starts are counted
there), then runs COMMAND with the same stdio, reaping every orphan below it until none is left,
and exits with COMMAND's status. Why: /proc's cutime/cstime count a process only when its parent
waits for it; bubblewrap's outer process exits without waiting for the sandbox's pid 1, so that
pid 1's CPU (Python's) would be lost. Reparented here, it is reaped here, and this process's
cutime + cstime hold it. SIGTERM and SIGINT are passed on to COMMAND.
"""
import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def main():
    args = sys.argv[1:]
    while args[:1] == ["--cgroup"] and len(args) > 2:
        with open(args[1], "w") as f:
            f.write(str(os.getpid()))
        args = args[2:]
    if args[:1] != ["--"] or len(args) < 2:
        sys.exit("usage: bench/subreaper.py [--cgroup PROCS_FILE]... -- COMMAND [ARG...]")
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"subreaper: prctl: {os.strerror(ctypes.get_errno())}")
    child = os.fork()
    if child == 0:
        try:
            os.execvp(args[1], args[1:])
        finally:
            os._exit(127)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    status = 1
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            status = os.waitstatus_to_exitcode(st)
    sys.exit(status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main()
