"""Files out (#14 item 3), as root and as the unprivileged user: every sandbox starts with an empty
/workspace/out of the sandbox uid; `sandboxd mcp` reads it after the run through the workspace
descriptor, never following what the code planted, and saves it only under --output-dir, which is
refused at the start when it is a symlink or not writable. The TypeScript SDK tests
(tests/mcp/files.test.mjs) cover the result's blocks; these cover who sandboxd is while it reads
and writes the files."""
import hashlib
import json
import os
import subprocess

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
