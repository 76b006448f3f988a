"""Runs INSIDE the sandbox: leaves a daemon behind, then ends in the way the test asks.

The daemon double-forks, calls setsid, ignores SIGTERM/SIGHUP/SIGINT and execs a sleeper whose
argv carries MARKER, so the host side can look for it with /proc/*/cmdline (like pgrep -f).

Usage: leak.py MARKER exit|timeout|crash|wait
  exit:    exit 0 at once        timeout: spin until killed
  crash:   die of SIGSEGV        wait:    print READY and sleep (the test signals sandboxd)"""
import os
import signal
import sys
import time

marker, mode = sys.argv[1], sys.argv[2]


def daemon():
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    fd = os.open("/dev/null", os.O_RDWR)
    for i in (0, 1, 2):
        os.dup2(fd, i)
    os.execv("/usr/bin/python3", ["/usr/bin/python3", "-c", "import time; time.sleep(1000)", marker])


daemon()
# Also a plain child in our own session and process group.
if os.fork() == 0:
    os.execv("/usr/bin/python3", ["/usr/bin/python3", "-c", "import time; time.sleep(1000)", marker + "-child"])
# Wait until the daemon has exec'd, so it is really there when we end.
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    found = 0
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    data = f.read()
                # Only the exec'd sleepers: forks of this script carry the marker in argv too.
                if marker.encode() in data and b"time.sleep(1000)" in data:
                    found += 1
            except OSError:
                pass
    if found >= 2:
        break
    time.sleep(0.02)
print("READY", found, flush=True)
if mode == "exit":
    sys.exit(0)
if mode == "timeout":
    while True:
        pass
if mode == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "wait":
    time.sleep(1000)
