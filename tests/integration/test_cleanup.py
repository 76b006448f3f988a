"""Nothing outlives a sandbox: no process (even a setsid daemon that ignores SIGTERM), no mount on
the host, no temporary directory, whatever way the sandbox ends."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

import sbx

pytestmark = pytest.mark.security


@pytest.fixture
def marker():
    m = f"sbx-leak-{uuid.uuid4().hex}"
    yield m
    sbx.kill_marker(m)  # never leave one behind for the next test, even on failure


@pytest.fixture
def env(tmp_path):
    """sandboxd's environment, with a private, initially empty TMPDIR."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    return dict(os.environ, TMPDIR=str(d))


@pytest.fixture
def host_state(env):
    return sbx.host_mounts(), sbx.temp_dirs(), env["TMPDIR"]


def _ours(path):
    """A /tmp entry sandboxd could have made. Other programs (compilers, other test phases)
    create and remove their own entries meanwhile, so the shared /tmp is checked by name; the
    private $TMPDIR given to sandboxd is checked strictly (it must stay empty)."""
    name = os.path.basename(path)
    return ("sandboxd" in name or "sbx" in name) and not name.startswith(("sandboxd-vm", "sandboxd-tests"))


def _assert_clean(marker, host_state, res=None):
    left = sbx.wait_gone(marker, timeout=0.0)
    assert not left, f"processes outlived the sandbox: {left}" + (f"\n{res.describe()}" if res else "")
    mounts_before, tmp_before, private_tmp = host_state
    after = sbx.host_mounts()
    assert after == mounts_before, f"host mounts changed: +{set(after) - set(mounts_before)} " \
                                   f"-{set(mounts_before) - set(after)}"
    assert os.listdir(private_tmp) == [], f"left in $TMPDIR: {os.listdir(private_tmp)}"
    new_tmp = {p for p in sbx.temp_dirs() - tmp_before if _ours(p)}
    if new_tmp:
        time.sleep(0.3)
        new_tmp = {p for p in sbx.temp_dirs() - tmp_before if _ours(p)}
    assert not new_tmp, f"left in the temp directory: {sorted(new_tmp)}"


def test_normal_exit(marker, host_state, env):
    r = sbx.run("leak", marker, "exit", env=env)
    assert r.rc == 0 and b"READY 2" in r.out, r.describe()
    _assert_clean(marker, host_state, r)


def test_timeout(marker, host_state, env):
    r = sbx.run("leak", marker, "timeout", opts=["--timeout", "2"], env=env)
    assert r.rc == 124 and b"READY 2" in r.out, r.describe()
    assert r.elapsed < 6, r.describe()
    _assert_clean(marker, host_state, r)


def test_crash(marker, host_state, env):
    r = sbx.run("leak", marker, "crash", env=env)
    assert r.rc == 128 + signal.SIGSEGV and b"READY 2" in r.out, r.describe()
    _assert_clean(marker, host_state, r)


def test_setup_error(host_state):
    r = sbx.sandboxd("exec", "--rootfs", sbx.ROOTFS, "--bind", "/nonexistent-sbx:/x", "-c", "pass")
    assert r.rc == 125, r.describe()
    _assert_clean("sbx-no-such-marker", host_state)


# Runs argv as uid/gid 1234 in a user namespace whose network namespace quota is 0, so every
# sandbox created below it fails to get one (the limit applies to nested namespaces too).
NO_NETNS = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(90)
    os.read(r, 1)  # the parent wrote our maps
    with open("/proc/sys/user/max_net_namespaces", "w") as f:
        f.write("0")
    os.setgroups([])
    os.setresgid(1234, 1234, 1234)
    os.setresuid(1234, 1234, 1234)
    os.execv(sys.argv[1], sys.argv[1:])
os.close(r)
while os.readlink(f"/proc/{pid}/ns/user") == os.readlink("/proc/self/ns/user"):
    pass
for m in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{m}", "w") as f:
        f.write("0 0 1\n1234 1234 1\n")
os.write(w, b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_no_network_namespace_is_a_setup_error(marker, host_state, env):
    """The network namespace is made by a thread of the sandbox's init. When the kernel refuses
    one, the sandbox never runs: exit 125 with one line, and init and
    the code are all gone."""
    sbx.root_only("needs root to map a second uid into a user namespace")
    # Readable by uid 1234: under sbx.WORK, not pytest's private tmp_path.
    base = pathlib.Path(sbx.WORK) / "no-netns"
    pol = base / "pol"
    pol.mkdir(parents=True, exist_ok=True)
    for name in ("default.policy", sbx.syscalls_file()):
        text = open(os.path.join(sbx.POLICY_SRC, name)).read()
        (pol / name).write_text(re.sub(r"(?m)^cgroup\s.*$", "cgroup fallback-rlimit", text))
    script = base / "no_netns.py"
    script.write_text(NO_NETNS)
    cmd = [sys.executable, str(script), sbx.SANDBOXD, "exec", "--rootfs", sbx.ROOTFS,
           "--policy", str(pol / "default.policy"), "-c", "print('ran')", marker]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                       env=dict(env, SANDBOXD_AUDIT_LOG="off", SANDBOXD_CACHE_DIR=str(base / "cache")))
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == "", p.stdout
    assert len(lines) == 1 and lines[0].startswith("sandboxd: cannot create the network namespace"), lines
    _assert_clean(marker, host_state)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_to_sandboxd(marker, host_state, env, sig):
    cmd = sbx.exec_cmd("leak", [marker, "wait"])
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        line = p.stdout.readline()
        assert line.startswith(b"READY 2"), (line, p.stderr.read() if p.poll() is not None else b"")
        p.send_signal(sig)
        start = time.monotonic()
        p.wait(timeout=15)
        took = time.monotonic() - start
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert took < 10, f"sandboxd took {took:.1f}s to end after {sig.name}"
    assert p.returncode != 0, f"exit status {p.returncode} after {sig.name}"
    _assert_clean(marker, host_state)


def test_sigkill_to_sandboxd(marker):
    """Even when sandboxd itself is SIGKILLed, the sandbox dies with it (its init is bound to the
    parent's life, e.g. PR_SET_PDEATHSIG, and the pid namespace takes the rest)."""
    cmd = sbx.exec_cmd("leak", [marker, "wait"])
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().startswith(b"READY 2")
        p.kill()
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    left = sbx.wait_gone(marker, timeout=5)
    assert not left, f"processes outlived a SIGKILLed sandboxd: {left}"


def test_many_sandboxes_leave_nothing(marker, host_state, env):
    for i in range(5):
        r = sbx.code(f"import os\nif os.fork() == 0:\n    os.setsid()\n    import time; time.sleep(1000)  # {marker}\n",
                     env=env)
        assert r.rc == 0, r.describe()
    _assert_clean(marker, host_state)


# ---------------------------------------------------------------- exec's end without waiting

# Leaves a daemon (setsid, then a grandchild) running when the code exits.
_DAEMON = """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/python3", ["/usr/bin/python3", "-c", "import time; time.sleep(1000)", {marker!r}])
    os._exit(0)
"""


def test_exec_does_not_wait_for_a_pid_1_that_is_alone(marker):
    """`exec` returns without waiting for its pid 1's exit (the namespaces' teardown) when the
    code has ended and nothing else of the sandbox is left: pid 1 then ends on its own, an orphan
    of whoever reaps for sandboxd (here a subreaper), within moments, with the code's status (or
    the SIGKILL of its parent-death signal, had sandboxd exited first). Without a cgroup
    (degraded) and on cgroup v1 (pid 1 leaves its cgroups first; tests/cgroup checks they are
    gone); on v2 sandboxd waits for pid 1 as before. With a process left, pid 1 is not alone:
    it exits, the kernel kills the rest of its pid namespace, and sandboxd reaps it."""
    out, err = sbx.exec_under_subreaper(sbx.exec_cmd(("-c", "import sys; print('hi'); sys.exit(3)")))
    assert out["rc"] == 3, (out, err)
    if sbx.enforcement() in ("cgroup1", "degraded"):
        assert len(out["orphans"]) == 1, (out, err)
        o = out["orphans"][0]
        assert os.waitstatus_to_exitcode(o["status"]) in (3, -signal.SIGKILL) and o["after_s"] < 5, (out, err)
    else:
        assert out["orphans"] == [], (out, err)
    out, err = sbx.exec_under_subreaper(sbx.exec_cmd(("-c", _DAEMON.format(marker=marker))))
    assert out["rc"] == 0 and out["orphans"] == [], (out, err)
    assert not sbx.wait_gone(marker, timeout=0.0), (out, err)
