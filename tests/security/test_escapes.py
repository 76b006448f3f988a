"""The escape suite: one test per attack class, each asserting that the attack fails.

Each test attacks from inside a real sandbox (sandboxd exec) and checks the result from the host
where it can. Run by tests/run as root and as the unprivileged user, like tests/integration."""
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time

import pytest

import sbx
from sbx import code

pytestmark = pytest.mark.security


def inside(src, **kw):
    """Run src in a sandbox; its last stdout line is JSON."""
    r = code(src, **kw)
    return r, (r.json() if r.rc == 0 else None)


def test_host_files_through_proc_fds_and_dotdot(tmp_path):
    """A host file is out of reach by name, by /proc/*/root, /proc/*/cwd, /proc/*/fd and `..`."""
    secret = tmp_path / "secret"
    token = secrets.token_hex(16)
    secret.write_text(token)
    secret.chmod(0o644)
    tmp_path.chmod(0o755)
    paths = [str(secret), f"/proc/1/root{secret}", f"/proc/self/root/../../..{secret}",
             f"/proc/self/cwd/../../../../..{secret}", f"/../../..{secret}"]
    r, facts = inside(f"""
import json, os
found = {{}}
for p in {paths!r}:
    try:
        found[p] = open(p).read()
    except OSError as e:
        found[p] = e.strerror
fds = {{}}
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            for fd in os.listdir(f'/proc/{{pid}}/fd'):
                fds[f'{{pid}}/{{fd}}'] = os.readlink(f'/proc/{{pid}}/fd/{{fd}}')
        except OSError:
            pass
print(json.dumps({{"found": found, "fds": fds}}))
""")
    assert facts, r.describe()
    assert token not in json.dumps(facts["found"]), facts
    # No process in the sandbox holds a descriptor to a host path.
    host = [v for v in facts["fds"].values() if str(tmp_path) in v or v.startswith(sbx.REPO)]
    assert not host, facts["fds"]


def test_rootfs_proc_sys_and_proc_self_exe_writes():
    """The rootfs, /proc/sys and the interpreter binary (the CVE-2019-5736 class) are not writable."""
    py = os.path.join(sbx.ROOTFS, "usr/bin/python3")
    before = hashlib.sha256(open(os.path.realpath(py), "rb").read()).hexdigest()
    r, facts = inside("""
import json, os
out = {}
for p, mode in [('/usr/bin/python3', 'r+b'), ('/proc/self/exe', 'r+b'), ('/etc/passwd', 'a'),
                ('/proc/sys/kernel/hostname', 'w'), ('/proc/sys/vm/drop_caches', 'w'), ('/usr/evil', 'w'),
                ('/proc/sysrq-trigger', 'w')]:
    try:
        with open(p, mode) as f:
            f.write(b'x' if 'b' in mode else 'x')
        out[p] = 'WROTE'
    except OSError as e:
        out[p] = e.strerror
print(json.dumps(out))
""")
    assert facts, r.describe()
    assert "WROTE" not in facts.values(), facts
    after = hashlib.sha256(open(os.path.realpath(py), "rb").read()).hexdigest()
    assert before == after, "the rootfs interpreter changed"


def test_no_leaked_fds(tmp_path):
    """Only 0, 1 and 2 are open (the CVE-2024-21626 class), even when sandboxd had more open, and
    the working directory is inside the sandbox."""
    extra = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)  # inheritable on purpose
    os.set_inheritable(extra, True)
    try:
        probe = ("import os, json\n"
                 "fds = sorted(os.listdir('/proc/self/fd'))\n"
                 "links = []\n"
                 "for f in fds[3:]:\n"
                 "    try:\n"
                 "        links.append(os.readlink('/proc/self/fd/' + f))\n"
                 "    except OSError:\n"
                 "        pass  # the directory fd listdir used, closed since\n"
                 "print(json.dumps({'fds': fds, 'cwd': os.getcwd(), 'links': links}))\n")
        cmd = sbx.exec_cmd(("-c", probe))
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, pass_fds=(extra,))
    finally:
        os.close(extra)
    facts = json.loads(p.stdout.strip().splitlines()[-1])
    # One more entry is the directory fd listdir itself used.
    assert len(facts["fds"]) == 4 and facts["fds"][:3] == ["0", "1", "2"], facts
    assert all(str(tmp_path) not in l for l in facts["links"]), facts
    assert facts["cwd"] == "/workspace"


def test_loopback_and_abstract_sockets_do_not_reach_the_host():
    """The host's 127.0.0.1 listeners and abstract Unix sockets are in another network namespace."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    port = tcp.getsockname()[1]
    name = "sbx-escape-" + secrets.token_hex(6)
    ab = socket.socket(socket.AF_UNIX)
    ab.bind("\0" + name)
    ab.listen()
    try:
        r, facts = inside(f"""
import json, socket
out = {{}}
for what, fam, addr in [('tcp', socket.AF_INET, ('127.0.0.1', {port})), ('abstract', socket.AF_UNIX, '\\0{name}')]:
    s = socket.socket(fam)
    s.settimeout(2)
    try:
        s.connect(addr)
        out[what] = 'CONNECTED'
    except OSError as e:
        out[what] = e.strerror
print(json.dumps(out))
""")
    finally:
        tcp.close()
        ab.close()
    assert facts, r.describe()
    assert "CONNECTED" not in facts.values(), facts


def test_kernel_attack_surface_calls_fail():
    """Nested user namespaces, mount, bpf, keyctl, io_uring, perf, userfaultfd, modules, kexec."""
    r, facts = inside("""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {'unshare(CLONE_NEWUSER)': (272, 0x10000000), 'mount': (165, 0, 0, 0, 0, 0), 'bpf': (321, 0, 0, 0),
         'keyctl': (250, 0, 0), 'add_key': (248, 0, 0, 0, 0, 0), 'io_uring_setup': (425, 1, 0),
         'perf_event_open': (298, 0, 0, -1, -1, 0), 'userfaultfd': (323, 0), 'init_module': (175, 0, 0, 0),
         'finit_module': (313, -1, 0, 0), 'kexec_load': (246, 0, 0, 0, 0), 'setns': (308, 0, 0),
         'pivot_root': (155, 0, 0), 'open_tree': (428, -1, 0, 0)}
out = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    rc = libc.syscall(*[ctypes.c_long(a) for a in args])
    out[name] = 'OK' if rc >= 0 else os.strerror(ctypes.get_errno())
print(json.dumps(out))
""")
    assert facts, r.describe()
    allowed = {k: v for k, v in facts.items() if v not in ("Operation not permitted", "Function not implemented")}
    assert not allowed, facts


def test_ptrace_of_a_sibling_fails():
    r, facts = inside("""
import ctypes, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    time.sleep(5)
    os._exit(0)
rc = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
err = ctypes.get_errno()
os.kill(pid, 9)
print(json.dumps({'rc': rc, 'err': os.strerror(err)}))
""")
    assert facts, r.describe()
    assert facts["rc"] == -1 and facts["err"] == "Operation not permitted", facts


def test_tiocsti_is_denied():
    """TIOCSTI would push keystrokes into the controlling terminal; seccomp answers EPERM before
    the kernel even looks at the fd (so not ENOTTY), also with high bits set in the command."""
    r, facts = inside("""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for cmd in (0x5412, 0x100005412, 0x541C):
    ctypes.set_errno(0)
    libc.syscall(ctypes.c_long(16), ctypes.c_long(0), ctypes.c_ulong(cmd), ctypes.c_char_p(b'x'))
    out[hex(cmd)] = os.strerror(ctypes.get_errno())
print(json.dumps(out))
""")
    assert facts, r.describe()
    assert set(facts.values()) == {"Operation not permitted"}, facts


def test_kill_minus_one_does_not_reach_the_host():
    """kill(-1) inside reaches only the sandbox's own pid namespace: it kills a process of the
    sandbox (so it did run, and signals work), never a host process of the same user."""
    victim = subprocess.Popen(["sleep", "60"])
    try:
        r, facts = inside("""
import json, os, signal, subprocess, sys
inner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
err = None
try:
    os.kill(-1, signal.SIGKILL)
except OSError as e:
    err = e.errno
print(json.dumps({"errno": err, "inner": inner.wait()}))
""")
        assert facts == {"errno": None, "inner": -signal.SIGKILL}, r.describe()
        time.sleep(0.2)
        assert victim.poll() is None, "a host process of the same user was killed from inside"
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("bomb", ["fork", "memory", "disk"])
def test_bombs_stay_inside_their_limits(bomb, tmp_path):
    src = {
        "fork": "import os\nn = 0\ntry:\n    while n < 100000:\n        if os.fork() == 0:\n            import time; time.sleep(30)\n        n += 1\nexcept OSError:\n    pass\nprint('{\"forks\": %d}' % n)",
        "memory": "x = []\ntry:\n    while True:\n        x.append(bytearray(16 << 20))\nexcept MemoryError:\n    pass\nprint('{}')",
        "disk": "import os\nn = 0\ntry:\n    with open('/tmp/fill', 'wb') as f:\n        while True:\n            f.write(b'x' * (1 << 20)); n += 1\nexcept OSError:\n    pass\nprint('{\"mib\": %d}' % n)",
    }[bomb]
    opts = {"fork": ["--pids", "32", "--timeout", "20"], "memory": ["--memory", "128M", "--timeout", "20"],
            "disk": ["--tmp-size", "16M", "--timeout", "20"]}[bomb]
    start = time.monotonic()
    r = code(src, opts=opts, timeout=60)
    assert time.monotonic() - start < 30, r.describe()
    if bomb == "fork":
        assert r.rc == 0 and r.json()["forks"] < 32, r.describe()
    elif bomb == "memory":
        assert r.rc in (0, 137), r.describe()
        assert r.report["memory_peak_bytes"] <= 140 << 20, r.report
    else:
        assert r.rc == 0 and r.json()["mib"] <= 16, r.describe()


@pytest.mark.parametrize("mode", ["prestart", "fork"])
def test_output_bomb_is_capped_in_mcp(mode):
    """`sandboxd mcp` caps captured output at the policy's output_limit (1 MiB by default)."""
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_python", "arguments": {"code": "import sys\nfor i in range(200):\n    sys.stdout.write('x' * 65536)"}}}]
    p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm-mode", mode], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, SANDBOXD_AUDIT_LOG="off"))
    p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs))
    p.stdin.flush()
    out = {}
    while 2 not in out:  # keep stdin open until the call answers: EOF would end the session
        line = p.stdout.readline()
        if not line:
            break
        m = json.loads(line)
        out[m.get("id")] = m
    p.stdin.close()
    p.wait(timeout=60)
    res = out[2]["result"]
    sc = res["structuredContent"]
    # 12.5 MiB written, 1 MiB captured, 40,000 characters shown (--text-limit's default).
    assert sc["truncated"] is True and sc["stdout_bytes"] == 200 * 65536, {k: sc[k] for k in sc if k != "stdout"}
    assert len(res["content"][0]["text"]) <= 40000 and len(sc["stdout"]) <= 40000


def test_runaway_daemon_dies_at_timeout():
    marker = "sbx-daemon-" + secrets.token_hex(6)
    r = code(f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/usr/bin/python3', ['/usr/bin/python3', '-c', 'import time; time.sleep(600)', '{marker}'])
    os._exit(0)
while True:
    pass
""", opts=["--timeout", "1"])
    assert r.rc == 124, r.describe()
    assert not sbx.wait_gone(marker, timeout=2), "a daemon outlived the timed-out sandbox"
