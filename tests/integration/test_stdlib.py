"""The policy leaves the standard library working: tests/probes/stdlib.py exercises asyncio,
threading, subprocess, multiprocessing (fork and spawn), ctypes, sqlite3, ssl, json, statistics,
loopback sockets and more, and reports per module."""
import pytest

import sbx
from sbx import probe

MODULES = ["json", "statistics", "threading", "asyncio", "subprocess", "multiprocessing",
           "multiprocessing_spawn", "ctypes", "sqlite3", "ssl", "hashlib", "tempfile", "socket_loopback",
           "os_basics", "decimal_zlib_lzma"]


@pytest.fixture(scope="module")
def results():
    sbx.require_sandboxd()
    return probe("stdlib", timeout=120)


@pytest.mark.parametrize("module", MODULES)
def test_stdlib_works(results, module):
    assert results.get(module) == "ok", f"{module}:\n{results.get(module)}"


def test_python_version_is_314():
    d = probe("facts")
    assert d["python"]["version"][:2] == [3, 14], d["python"]


# A thread in a timed wait and the main thread asleep while the process is stopped and continued:
# both resume through restart_syscall, which the policies must allow (denied, glibc aborted with
# "The futex facility returned an unexpected error code"; matplotlib's font scan hit it).
STOP_CONT = """
import os, signal, threading, time
ev = threading.Event()
t = threading.Thread(target=lambda: print("thread", ev.wait(5)))
t.start()
time.sleep(0.1)
pid = os.fork()
if pid == 0:
    os.kill(os.getppid(), signal.SIGSTOP)
    time.sleep(0.2)
    os.kill(os.getppid(), signal.SIGCONT)
    os._exit(0)
time.sleep(0.5)
os.waitpid(pid, 0)
ev.set()
t.join()
print("main ok")
"""


@pytest.mark.parametrize("policy", [None, "strict"])
def test_stopped_and_continued_waits_resume(policy):
    sbx.require_sandboxd()
    r = sbx.code(STOP_CONT, policy=policy and sbx.shipped_policy(policy),
                 opts=["--env", "PYTHONWARNINGS=ignore::DeprecationWarning"])
    assert r.rc == 0 and r.stdout == "thread True\nmain ok\n", r.describe()
