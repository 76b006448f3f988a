"""Files out (#14 item 3), as root and as the unprivileged user: every sandbox starts with an empty
/workspace/out of the sandbox uid; `sandboxd mcp` reads it after the run through the workspace
descriptor, never following what the code planted, and saves it only under --output-dir, which is
refused at the start when it is a symlink or not writable. The TypeScript SDK tests
(tests/mcp/files.test.mjs) cover the result's blocks; these cover who sandboxd is while it reads
and writes the files."""
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import time

import pytest

import sbx
from sbx import code

pytestmark = pytest.mark.security


class Mcp:
    """A `sandboxd mcp` session over pipes (initialize done)."""

    def __init__(self, *args, warm="0"):
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", warm, "--audit-log", "off",
                                   *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.n = 0
        self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}})

    def send(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.n:
                return m["result"]

    def run(self, src):
        return self.send("tools/call", {"name": "run_python", "arguments": {"code": src}})

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=30) == 0, self.p.stderr.read()


def files(result):
    return {f["path"]: f for f in result["structuredContent"]["files"]}


def test_exec_starts_with_an_empty_out_of_the_sandbox_uid():
    r = code("import os, json; s = os.stat('/workspace/out'); "
             "print(json.dumps([os.listdir('/workspace'), os.listdir('/workspace/out'), s.st_uid, oct(s.st_mode)]))")
    assert r.rc == 0, r.stderr
    assert json.loads(r.stdout) == [["out"], [], 1000, "0o40755"]


@pytest.mark.parametrize("warm", ["0", "1", "fork"])
def test_mcp_reads_out_as_this_user_and_never_through_what_the_code_planted(tmp_path, warm):
    secret = tmp_path / "secret"
    secret.write_text("host secret\n")
    s = Mcp("--warm-mode", "fork") if warm == "fork" else Mcp(warm=warm)
    try:
        r = s.run(f"""
import os
os.chdir("/workspace/out")
open("plain.txt", "w").write("plain")
open("locked.txt", "w").write("locked"); os.chmod("locked.txt", 0)
os.mkdir("shut"); open("shut/f", "w").write("f"); os.chmod("shut", 0)
os.symlink({str(secret)!r}, "link")
os.link("plain.txt", "hard.txt")
""")
    finally:
        s.close()
    f = files(r)
    assert f["plain.txt"]["sha256"] == hashlib.sha256(b"plain").hexdigest()
    assert f["hard.txt"]["sha256"] == f["plain.txt"]["sha256"]  # a hard link inside out is just a file
    assert f["link"]["omitted"] == "symlink, not followed"
    assert "host secret" not in json.dumps(r)
    if sbx.IS_ROOT:
        # root reads what the code made unreadable to itself: it is all the sandbox's own.
        assert f["locked.txt"]["sha256"] == hashlib.sha256(b"locked").hexdigest()
        assert "shut/f" in f
    else:
        # The sandbox is this user: mode 0 holds for sandboxd too, and says so.
        assert f["locked.txt"]["omitted"] == "could not be opened"
        assert f["shut"]["omitted"] == "directory could not be opened"


def test_output_dir_files_are_ours_and_only_under_the_call_dir(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    s = Mcp("--output-dir", str(out))
    try:
        r = s.run("open('/workspace/out/a.csv', 'w').write('1,2\\n'); print('hi')")
    finally:
        s.close()
    [call] = os.listdir(out)
    saved = out / call
    assert sorted(os.listdir(saved)) == ["a.csv", "stdout.txt"]
    for name in ("a.csv", "stdout.txt"):
        st = (saved / name).lstat()
        assert st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o644
    assert files(r)["a.csv"]["uri"] == f"file://{saved}/a.csv"
    assert (saved / "stdout.txt").read_text() == "hi\n"


def start(*args):
    return subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--audit-log", "off", *args],
                          input="", capture_output=True, text=True, timeout=30)


def one_line(p):
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_output_dir_that_is_a_symlink_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    p = start("--output-dir", str(tmp_path / "link"))
    assert p.returncode == 125
    assert "is a symlink; give the directory itself" in one_line(p)
    assert os.listdir(real) == []


def test_output_dir_that_is_not_writable_is_refused(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    mounted = False
    if sbx.IS_ROOT:
        # Permissions do not stop root: a read-only file system does.
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(d)], capture_output=True, text=True)
        sbx.need(m.returncode == 0, f"cannot mount a read-only tmpfs: {m.stderr.strip()}")
        mounted = True
    else:
        d.chmod(0o555)
    try:
        p = start("--output-dir", str(d))
        assert p.returncode == 125
        assert "not writable" in one_line(p)
    finally:
        if mounted:
            subprocess.run(["umount", str(d)])


def test_output_dir_missing_or_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    for d in (tmp_path / "missing", tmp_path / "f"):
        p = start("--output-dir", str(d))
        assert p.returncode == 125
        assert "--output-dir" in one_line(p)


class Tracer:
    """Stops `pid` (a `sandboxd mcp` of ours: same uid, dumpable) at the entry of its next
    pidfd_send_signal, with ptrace, then lets it go on untraced."""
    SEIZE, INTERRUPT, SYSCALL, DETACH, GET_SYSCALL_INFO = 0x4206, 0x4207, 24, 17, 0x420E
    NR_PIDFD_SEND_SIGNAL = 424  # x86_64

    def __init__(self, pid):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.pid = pid
        if self.libc.ptrace(self.SEIZE, pid, None, ctypes.c_void_p(1)) < 0:  # PTRACE_O_TRACESYSGOOD
            pytest.fail(f"ptrace sandboxd: {os.strerror(ctypes.get_errno())}")
        self.libc.ptrace(self.INTERRUPT, pid, None, None)
        os.waitpid(pid, 0x40000000)  # __WALL

    def stop_at_signal(self, timeout=60):
        info = ctypes.create_string_buffer(88)
        deadline, sig = time.monotonic() + timeout, 0
        while time.monotonic() < deadline:
            self.libc.ptrace(self.SYSCALL, self.pid, None, ctypes.c_void_p(sig))
            _, st = os.waitpid(self.pid, 0x40000000)
            assert os.WIFSTOPPED(st), f"sandboxd ended while traced: {st:#x}"
            stop, sig = os.WSTOPSIG(st), 0
            if stop == signal.SIGTRAP | 0x80:
                self.libc.ptrace(self.GET_SYSCALL_INFO, self.pid, ctypes.c_void_p(88), info)
                op, nr = info.raw[0], int.from_bytes(info.raw[24:32], "little")
                if op == 1 and nr == self.NR_PIDFD_SEND_SIGNAL:  # PTRACE_SYSCALL_INFO_ENTRY
                    return
            elif stop != signal.SIGTRAP and st >> 16 == 0:
                sig = stop  # a signal for sandboxd: delivered as it would have been
        pytest.fail("sandboxd signalled no sandbox")

    def detach(self):
        self.libc.ptrace(self.DETACH, self.pid, None, None)


# The code of test_files_are_collected_only_once_the_sandbox_has_ended: once the test traces
# sandboxd, it writes the done byte; a child moves a directory holding a file into the empty
# /workspace/out when the test says so: after sandboxd has read the done byte and looked at out,
# before it signals the sandbox.
RACE = r"""
import os, time
def wait(name):
    while not os.path.exists("/log/" + name):
        time.sleep(0.001)
def say(name):
    open("/log/" + name, "w").close()
os.makedirs("/workspace/d")
open("/workspace/d/late.txt", "w").write("written after the done byte")
if os.fork() == 0:
    wait("go")
    os.rename("/workspace/d", "/workspace/out/d")
    say("moved")
    time.sleep(30)
say("ready")
wait("traced")
os.write(3, b"\0")
time.sleep(30)
"""


@pytest.mark.parametrize("warm", ["0", "fork"])
def test_files_are_collected_only_once_the_sandbox_has_ended(tmp_path, warm):
    """#34 item 10: a call answered at its done byte with /workspace/out empty then was
    collected right after SIGKILL to pid 1, without waiting: files a process of the sandbox put
    there in between (here while sandboxd is held by ptrace before it sends the signal) came back
    from a sandbox still running. sandboxd reads out only once pid 1 is reaped, which the kernel
    allows only after every process of its pid namespace is gone; an answer at the done byte
    returns what out held then: nothing."""
    logdir = tmp_path / "log"
    logdir.mkdir()
    logdir.chmod(0o777)
    tmp_path.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    args = ["--bind-rw", f"{logdir}:/log", "--output-dir", str(out)]
    s = Mcp("--warm-mode", "fork", *args) if warm == "fork" else Mcp(*args, warm=warm)
    try:
        # Without a cgroup no call is answered at its done byte: it ends with its sandbox.
        sbx.need(s.run("pass")["structuredContent"]["limits"] != "degraded",
                 "no cgroup: calls are answered when their sandbox has ended", security=False)
        s.n += 1
        s.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": s.n, "method": "tools/call",
                                    "params": {"name": "run_python", "arguments": {"code": RACE}}}) + "\n")
        s.p.stdin.flush()
        deadline = time.monotonic() + 60
        while not (logdir / "ready").exists():
            assert time.monotonic() < deadline and s.p.poll() is None, "the call did not start"
            time.sleep(0.01)
        t = Tracer(s.p.pid)
        try:
            (logdir / "traced").touch()
            t.stop_at_signal()
            (logdir / "go").touch()
            while not (logdir / "moved").exists():
                assert time.monotonic() < deadline, "the sandbox's child did not move the file"
                time.sleep(0.001)
        finally:
            t.detach()
        while True:
            m = json.loads(s.p.stdout.readline())
            if m.get("id") == s.n:
                r = m["result"]
                break
    finally:
        s.close()
    assert r["structuredContent"]["exit_code"] == 0, r["content"][0]["text"]
    assert r["structuredContent"]["files"] == [], "files read out of a sandbox still running"
    assert "late.txt" not in json.dumps(r)
    assert os.listdir(out) == []


def saved_calls(out):
    return sorted(os.listdir(out))


def test_output_dir_keeps_within_its_size_budget_oldest_first(tmp_path):
    """#34 item 10: every call left its files under --output-dir forever. The call directories
    take at most --output-max-size: the oldest go first; a call that alone is over the budget
    saves nothing, removes nothing, and its result says so."""
    out = tmp_path / "out"
    out.mkdir()
    s = Mcp("--output-dir", str(out), "--output-max-size", "64K")
    write = "open('/workspace/out/{0}.bin', 'wb').write(b'{0}' * {1})"
    try:
        s.run(write.format("a", 30000))
        [a] = saved_calls(out)
        s.run(write.format("b", 30000))
        assert len(saved_calls(out)) == 2
        r = s.run(write.format("c", 30000))
        # a + b + c is over 64K: a, the oldest, went.
        assert a not in saved_calls(out) and len(saved_calls(out)) == 2
        assert files(r)["c.bin"]["uri"].startswith(f"file://{out}/")
        kept = saved_calls(out)
        r = s.run(write.format("d", 70000))
    finally:
        s.close()
    assert saved_calls(out) == kept
    text = "\n".join(b["text"] for b in r["content"] if b["type"] == "text")
    assert "Not saved under --output-dir" in text and "--output-max-size 65536 bytes" in text, text
    assert "uri" not in files(r)["d.bin"]


def test_output_dir_budget_at_start_and_by_age(tmp_path):
    """What earlier servers left counts too: at start, call directories (named like a request id,
    ours) older than --output-max-age, or beyond --output-max-size, oldest first, are removed;
    anything else in the directory is left alone. A call's save removes the expired ones."""
    out = tmp_path / "out"
    out.mkdir()
    old, big, fresh = ("%032x" % i for i in (1, 2, 3))
    for name, size, age in ((old, 10, 3 * 86400), (big, 50000, 3600), (fresh, 20000, 60)):
        (out / name).mkdir()
        (out / name / "stdout.txt").write_bytes(b"x" * size)
        t = time.time() - age
        os.utime(out / name, (t, t))
    (out / "mine").mkdir()
    (out / ("f" * 32)).write_text("a file, not a call directory")
    s = Mcp("--output-dir", str(out), "--output-max-size", "64K", "--output-max-age", "2d")
    try:
        # old is over 2 days; big + fresh (70000) is over 64K: big, the older, goes.
        assert saved_calls(out) == sorted([fresh, "mine", "f" * 32])
        s.close()
        s = Mcp("--output-dir", str(out), "--output-max-age", "2s")
        assert fresh not in saved_calls(out)
        s.run("open('/workspace/out/a.txt', 'w').write('a')")
        [a] = set(saved_calls(out)) - {"mine", "f" * 32}
        time.sleep(3)
        s.run("open('/workspace/out/b.txt', 'w').write('b')")
        assert a not in saved_calls(out) and len(saved_calls(out)) == 3
    finally:
        s.close()


@pytest.mark.parametrize("opt,arg", [("--output-max-size", "10"), ("--output-max-size", "2000T"),
                                     ("--output-max-age", "0"), ("--output-max-age", "1w"),
                                     ("--output-max-age", "3651d"), ("--output-max-age", "1ds")])
def test_output_budget_options_out_of_range_are_refused(tmp_path, opt, arg):
    p = start("--output-dir", str(tmp_path), opt, arg)
    assert p.returncode == 125
    assert one_line(p).startswith(f"sandboxd: {opt} `{arg}`: expected")
