"""The fork template's C pid 1 (src/inside/zygote.c, issue #19): each call's pid 1 shares the
template's memory while it builds the sandbox, forks the code process (the one copy of the
template per call), and execs callinit before the code may run. What must hold: no process the
code can reach shares the template's memory; the code process holds no other call's pid 1 stack;
and it is a whole libc child (its cached thread id, its robust futex list and its rseq area), as
os.fork's child would be. Runs as root and as the unprivileged user (tests/run)."""
import json
import platform

import pytest

import sbx
from mcpsession import Mcp
from test_mcp_fork import code_pids, run, start_sleeper, wait_for


@pytest.fixture
def zygote():
    sbx.require_sandboxd()
    sbx.need(platform.machine() == "x86_64", "the C pid 1 is built for x86_64 only", security=False)
    m = Mcp("--warm-mode", "fork")
    yield m
    err = m.close()
    assert "is a copy of the template" not in err, err


def facts(m, code):
    out = run(m, code)
    assert out.startswith("{"), out
    return json.loads(out.split("\n--- ")[0])


PID1 = r'''
import json
st = dict(l.split(":", 1) for l in open("/proc/1/status") if ":" in l)
print(json.dumps(dict(cmdline=open("/proc/1/cmdline").read(), name=st["Name"].strip(),
                      rss_kb=int(st["VmRSS"].split()[0]))))
'''


def test_pid_1_has_left_the_templates_memory(zygote):
    """callinit, exec'd: pid 1's memory is its own few pages, not the template's (tens of MiB),
    which the code could otherwise write through pid 1 (/proc/1/mem, were pid 1 dumpable)."""
    f = facts(zygote, PID1)
    assert f["cmdline"] == "sandboxd-init\0", f
    assert f["name"] == "sandboxd", f  # a cold sandbox's pid 1's
    assert f["rss_kb"] < 1024, f


STACKS = r'''
import json
maps = [l.split() for l in open("/proc/self/maps")]
# zygote.c's pid 1 stacks: a 4 KiB guard page (---p), then the rest of 128 KiB (rw-p), anonymous.
found = 0
for a, b in zip(maps, maps[1:]):
    lo_a, hi_a = (int(x, 16) for x in a[0].split("-"))
    lo_b, hi_b = (int(x, 16) for x in b[0].split("-"))
    if (len(a) == 5 and len(b) == 5 and a[1] == "---p" and b[1] == "rw-p" and hi_a - lo_a == 4096
            and hi_a == lo_b and hi_b - lo_b == 128 * 1024 - 4096):
        found += 1
print(json.dumps(dict(stacks=found)))
'''


def test_the_code_holds_no_pid_1_stack(zygote):
    """Other calls' pid 1s run on their stacks in the template's memory while a call's code
    process is copied from it; the copy unmaps every one (its own pid 1's too)."""
    for i in range(3):
        start_sleeper(zygote, 900 + i)
    assert wait_for(lambda: len(code_pids(zygote)) == 3, 20)
    assert facts(zygote, STACKS)["stacks"] == 0


LIBC = r'''
import ctypes, json, signal, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
# The thread id libc cached, which a mutex records as its owner (glibc: __owner, at offset 8 of
# pthread_mutex_t on x86_64, futex owner-died detection goes by it): the kernel wrote the code's
# there (CLONE_CHILD_SETTID), not the template's.
mutex = (ctypes.c_int * 10)()
libc.pthread_mutex_lock(mutex)
out["owner"] = [mutex[2], threading.get_native_id()]
libc.pthread_mutex_unlock(mutex)
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
signal.raise_signal(signal.SIGUSR1)
out["raise"] = got
# The robust futex list libc keeps, registered with the kernel for this thread (get_robust_list).
head, size = ctypes.c_void_p(), ctypes.c_size_t()
libc.syscall(274, 0, ctypes.byref(head), ctypes.byref(size))
out["robust"] = bool(head.value)
# The rseq area: registered again, so the kernel refuses it a second time (EBUSY).
try:
    n = ctypes.c_uint.in_dll(libc, "__rseq_size").value
    off = ctypes.c_ssize_t.in_dll(libc, "__rseq_offset").value
except ValueError:
    n = 0
if n:
    fs = ctypes.c_ulong()
    libc.syscall(158, 0x1003, ctypes.byref(fs))  # arch_prctl(ARCH_GET_FS)
    r = libc.syscall(334, ctypes.c_ulong(fs.value + off), max(n, 32), 0, 0x53053053)
    out["rseq"] = "EBUSY" if r < 0 and ctypes.get_errno() == 16 else "registered it now (it was not)"
    out["cpu"] = [libc.sched_getcpu(), int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])]
print(json.dumps(out))
'''


def test_the_code_process_is_a_whole_libc_child(zygote):
    f = facts(zygote, LIBC)
    assert f["owner"][0] == f["owner"][1], f
    assert f["raise"] == [1], f
    assert f["robust"], f
    if "rseq" in f:
        assert f["rseq"] == "EBUSY", f
        assert f["cpu"][0] == f["cpu"][1], f


def test_without_execveat_pid_1_execs_callinit_by_its_proc_path():
    """A policy without execveat (the shipped ones allow it): pid 1 execs callinit through
    /proc/self/fd, and the calls are the C pid 1's still."""
    sbx.require_sandboxd()
    sbx.need(platform.machine() == "x86_64", "the C pid 1 is built for x86_64 only", security=False)
    policy = sbx.weak_policy("no-execveat", "syscalls", r"allow fork vfork execve execveat (.*)",
                             lambda line: line.replace(" execveat ", " "))
    m = Mcp("--warm-mode", "fork", "--policy", policy)
    f = facts(m, PID1)
    # (the policy took: execveat fails in the call with ENOSYS, as any call the policy does not name)
    nr = run(m, "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "print(libc.syscall(322, -100, b'/bin/true', None, None, 0), ctypes.get_errno())")
    err = m.close()
    assert nr == "-1 38\n", nr
    assert f["cmdline"] == "sandboxd-init\0" and f["rss_kb"] < 1024, f
    assert "is a copy of the template" not in err, err


def test_the_copy_pid_1_is_said_once_however_many_templates(monkeypatch):
    """SANDBOXD_FORK_ZYGOTE=0: each call's pid 1 is a copy of the template (the same C steps, no
    shared memory), which execs callinit all the same; one warning for the server, not one per
    template (a template is replaced after its 32 calls)."""
    sbx.require_sandboxd()
    sbx.need(platform.machine() == "x86_64", "the C pid 1 is built for x86_64 only", security=False)
    monkeypatch.setenv("SANDBOXD_FORK_ZYGOTE", "0")
    m = Mcp("--warm-mode", "fork")
    for _ in range(40):
        assert run(m, "print(1)") == "1\n"
    assert json.loads(run(m, PID1).split("\n--- ")[0])["cmdline"] == "sandboxd-init\0"
    err = m.close()
    assert err.count("is a copy of the template, which costs more CPU: SANDBOXD_FORK_ZYGOTE=0") == 1, err
