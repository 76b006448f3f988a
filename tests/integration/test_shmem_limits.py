"""Memory held outside RLIMIT_AS (issue #34, item 4). Without a cgroup (rlimit mode: the policy's
`cgroup fallback-rlimit`, an ordinary user without a delegated cgroup) the memory limit is
RLIMIT_AS, per process, which counts what a process maps. A file's or a segment's pages that
nothing maps are not counted: 12 memfds of 64 MiB under --memory 256M held 767 MiB of host Shmem.
So in rlimit mode memfd_create and memfd_secret fail with ENOMEM and shmget with ENOSPC, whatever
the policy allows, and POSIX shared memory lives in /dev/shm, a tmpfs of shm_size. With a cgroup,
its memory controller charges those pages to the sandbox: bounded, by the OOM killer or ENOMEM.

Each test tries to hold 768 MiB under --memory 256M and checks what it held, the error, and the
rise of the host's Shmem while it held it (other tests on the host add to that: the bound is the
memory limit, well under the 768 MiB tried)."""
import pytest

import sbx

LIMIT_MIB = 256
TRY = ("12", "64")  # 12 objects of 64 MiB


def hold(way, policy=None):
    r = sbx.run("shmem", way, *TRY, policy=policy, opts=["--memory", f"{LIMIT_MIB}M"], timeout=120)
    return r, sbx.enforcement(policy)


def check_bounded(r, mode, want_error, cap_mib):
    if mode != "degraded" and r.rc != 0:
        # A memory cgroup ended it (its OOM killer: SIGKILL) before it could hold more.
        assert r.rc == 137, r.describe()
        return
    assert r.rc == 0, r.describe()
    d = r.json()
    assert d["held_mib"] <= cap_mib, f"held {d['held_mib']} MiB outside RLIMIT_AS under --memory {LIMIT_MIB}M: {d}"
    assert d["shmem_rise_mib"] < LIMIT_MIB, f"host Shmem rose {d['shmem_rise_mib']} MiB: {d}"
    if mode == "degraded":
        assert d["error"] == want_error, d


@pytest.mark.parametrize("way,want_error,cap_mib", [
    ("memfd", "ENOMEM", 0),          # refused by the filter in rlimit mode
    ("sysv", "ENOSPC", 0),           # shmget refused by the filter in rlimit mode
    ("posix_shm", "ENOSPC", 64),     # a file in /dev/shm: its tmpfs is shm_size (64M)
])
def test_memory_outside_rlimit_as_is_bounded(way, want_error, cap_mib):
    r, mode = hold(way)
    check_bounded(r, mode, want_error, cap_mib if mode == "degraded" else LIMIT_MIB)


def test_memfd_secret_is_refused_on_rlimits_whatever_the_policy():
    """A policy that allows memfd_secret (the shipped ones leave it to the default, ENOSYS) gets
    ENOMEM on rlimits: its pages, locked and unmapped, would be held outside RLIMIT_AS too."""
    if sbx.enforcement() != "degraded":
        pytest.skip(f"limits are {sbx.enforcement()}: the cgroup charges memfd_secret's pages")
    pol = sbx.weak_policy("memfd-secret", "syscalls", r"allow utime utimes utimensat futimesat memfd_create.*",
                          lambda l: l.split("#")[0].rstrip() + " memfd_secret")
    r = sbx.run("shmem", "memfd_secret", "1", "1", policy=pol, timeout=60)
    assert r.rc == 0, r.describe()
    assert r.json()["error"] == "ENOMEM" and r.json()["held_mib"] == 0, r.json()


def test_programs_run_without_memfd_on_rlimits():
    """What refusing memfd_create costs: bash's here-documents and Python's own modules do not
    need it (bash falls back to a pipe or a file in /tmp)."""
    src = ("import os, subprocess, multiprocessing.shared_memory as sm\n"
           "s = sm.SharedMemory(create=True, size=1 << 20); s.buf[0] = 7; s.close(); s.unlink()\n"
           "big = 'a' * 100000\n"
           "out = subprocess.run(['bash', '-c', 'cat <<EOF | wc -c\\n' + big + '\\nEOF\\ncat <<< x'],\n"
           "                     capture_output=True, text=True, check=True).stdout.split()\n"
           "print(*out)\n")
    r = sbx.code(src, opts=["--memory", f"{LIMIT_MIB}M"])
    assert r.rc == 0, r.describe()
    assert r.stdout.split() == ["100001", "x"], r.describe()


HOLD_IN_CALL = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
try:
    os.memfd_create('hold')
    memfd = 'ok'
except OSError as e:
    memfd = errno.errorcode[e.errno]
sysv = 'ok' if libc.shmget(0, ctypes.c_size_t(1 << 20), 0o1600) >= 0 else errno.errorcode[ctypes.get_errno()]
print(memfd, sysv)
"""


@pytest.mark.parametrize("warm_mode", ["fork", "prestart"])
def test_mcp_calls_on_rlimits_are_refused_memory_outside_rlimit_as(warm_mode):
    """`sandboxd mcp`'s calls get the same filter: a forked call's comes from its template's setup
    (fork_template.c), a prestarted one's from sandbox.c."""
    from mcpsession import Mcp
    sbx.require_sandboxd()
    mode = sbx.enforcement()
    m = Mcp("--warm-mode", warm_mode)
    try:
        r = m.send("tools/call", {"name": "run_python", "arguments": {"code": HOLD_IN_CALL}})
        out = "".join(c["text"] for c in r["content"] if c["type"] == "text")
    finally:
        m.close()
    assert out.split()[:2] == (["ENOMEM", "ENOSPC"] if mode == "degraded" else ["ok", "ok"]), (mode, out)
