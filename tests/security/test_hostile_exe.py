"""A hostile image must never get the host's sandboxd binary exec'd or opened inside the sandbox
(issue #34 item 2, the class of runc's CVE-2019-5736).

The image the tests build here: /usr/bin/python3 is a link to /proc/self/exe, with a regular file
of the image's own at proc/self/exe (for a lookup that resolves inside the tree), and as its
/lib64/ld-linux-x86-64.so.2 a tiny static program. If the process that execs the code were a
fork of sandboxd, the kernel would follow /proc/self/exe to the host's binary, load it, and run
its interpreter, the image's program, with the host binary as its /proc/self/exe: an O_PATH fd
and chmod through /proc/self/fd/N would then change the binary of an ordinary user who runs a
copy they own, and root's could be read. The program reports what /proc/self/exe is and tries
that chmod; the tests check from the host that it never ran on sandboxd's binary.

Run as root and as the unprivileged user; each run uses a copy of the binary it owns."""
import json
import os
import shutil
import stat
import subprocess

import pytest

import sbx

pytestmark = pytest.mark.security

# A freestanding x86_64 program: it runs as an ELF interpreter, where libc's start-up would read
# the main program's headers as its own. It prints "EXE dev ino" for /proc/self/exe and
# "CHMOD rc" for chmod("/proc/self/fd/N", 04777), then exits 42.
PROBE_C = r"""
typedef long i64;
static i64 sys(i64 n, i64 a, i64 b, i64 c, i64 d)
{
  register i64 r10 __asm__("r10") = d;
  i64 ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}
static char out[256];
static int len;
static void put(const char *s) { while (*s) out[len++] = *s++; }
static void num(i64 v)
{
  char b[24]; int i = 0;
  if (v < 0) { out[len++] = '-'; v = -v; }
  do { b[i++] = (char) ('0' + v % 10); v /= 10; } while (v);
  while (i) out[len++] = b[--i];
}
struct kstat { unsigned long dev, ino, nlink; unsigned mode, uid, gid, pad; unsigned long rest[12]; };
__attribute__((used)) static void probe_main(void)
{
  i64 fd = sys(2 /* open */, (i64) "/proc/self/exe", 010000000 | 02000000 /* O_PATH|O_CLOEXEC */, 0, 0);
  struct kstat st;
  put("EXE ");
  if (fd >= 0 && sys(262 /* newfstatat */, fd, (i64) "", (i64) &st, 0x1000 /* AT_EMPTY_PATH */) == 0) {
    num((i64) st.dev); put(" "); num((i64) st.ino);
  } else {
    put("none");
  }
  char path[32] = "/proc/self/fd/";
  int p = 14;
  if (fd >= 10) path[p++] = (char) ('0' + fd / 10);
  path[p++] = (char) ('0' + fd % 10);
  path[p] = 0;
  put("\nCHMOD ");
  num(fd >= 0 ? sys(90 /* chmod */, (i64) path, 04777, 0, 0) : -1);
  put("\n");
  sys(1 /* write */, 1, (i64) out, len, 0);
  sys(231 /* exit_group */, 42, 0, 0, 0);
}
__asm__(".text\n.globl _start\n_start:\n  and $-16,%rsp\n  call probe_main\n  hlt\n");
"""


def _cc():
    cc = shutil.which("cc") or shutil.which("gcc")
    sbx.need(cc, "no C compiler to build the hostile image's program", security=True)
    return cc


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(tree, binary): the hostile image and a copy of sandboxd that this user owns."""
    sbx.need(os.uname().machine == "x86_64", "the hostile image's program is x86_64", security=False)
    base = tmp_path_factory.mktemp("hostile-exe")
    base.chmod(0o755)
    tree = base / "tree"
    for d in ("usr/bin", "lib64", "proc/self", "dev", "tmp", "workspace", "run", "etc", "sys"):
        (tree / d).mkdir(parents=True, exist_ok=True)
    src = base / "probe.c"
    src.write_text(PROBE_C)
    interp = tree / "lib64/ld-linux-x86-64.so.2"
    subprocess.run([_cc(), "-O1", "-static", "-nostdlib", "-ffreestanding", "-fno-stack-protector",
                    "-fcf-protection=none", "-o", str(interp), str(src)], check=True)
    exe = tree / "proc/self/exe"
    exe.write_text("the image's own file, for a lookup that stays in the tree\n")
    exe.chmod(0o755)
    os.symlink("/proc/self/exe", tree / "usr/bin/python3")
    os.symlink("/proc/self/exe", tree / "usr/bin/hostile")
    script = tree / "usr/bin/shebang"
    script.write_text("#!/proc/self/exe\n")
    script.chmod(0o755)
    for root, dirs, files in os.walk(tree):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
    binary = base / "bin" / "sandboxd"
    binary.parent.mkdir()
    binary.parent.chmod(0o755)
    shutil.copy2(sbx.SANDBOXD, binary)
    binary.chmod(0o755)
    return tree, binary


def _env():
    env = dict(os.environ)
    env.setdefault("SANDBOXD_POLICY_DIR", sbx.POLICY_SRC)
    env.setdefault("SANDBOXD_PYTHON_DIR", os.path.join(sbx.REPO, "src/inside"))
    env["SANDBOXD_AUDIT_LOG"] = "off"
    return env


def _check_host_binary(binary, out):
    st = os.stat(binary)
    assert stat.S_IMODE(st.st_mode) == 0o755, f"the sandbox changed the host binary's mode: {oct(st.st_mode)}\n{out}"
    assert f"EXE {st.st_dev} {st.st_ino}" not in out, f"the sandbox held the host binary:\n{out}"


@pytest.mark.parametrize("argv", [["--", "/usr/bin/python3"], ["--", "/usr/bin/hostile"],
                                  ["--", "/usr/bin/shebang"], ["-c", "print(1)"]],
                         ids=["direct", "link", "shebang", "lookup"])
def test_hostile_image_never_runs_the_host_binary(hostile, argv):
    tree, binary = hostile
    r = subprocess.run([str(binary), "exec", "--rootfs", str(tree), *argv], env=_env(),
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    _check_host_binary(binary, out)
    # Whatever ran, it was not the image's program with our binary as its exe: that one exits 42
    # after printing its facts.
    assert r.returncode != 42 or "EXE none" in out or "EXE " not in out, out
    assert r.returncode != 0, out


def test_lookup_refuses_proc_targets(hostile):
    """`exec -c` finds python3 along the image's PATH: a link into /proc is refused by the lookup
    itself (126, one line), before any sandbox is made."""
    tree, binary = hostile
    r = subprocess.run([str(binary), "exec", "--rootfs", str(tree), "-c", "print(1)"], env=_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 126, (r.returncode, r.stderr)
    assert "leads into /proc" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr



@pytest.mark.parametrize("warm_mode", ["fork", "prestart"])
def test_hostile_image_under_mcp(hostile, warm_mode):
    """`sandboxd mcp --rootfs TREE`: the fork template's start and a prestarted sandbox exec the
    image's python3 as a cold sandbox does; neither reaches the host binary."""
    tree, binary = hostile
    p = subprocess.Popen([str(binary), "mcp", "--rootfs", str(tree), "--warm-mode", warm_mode, "--audit-log", "off"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, env=_env())
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_python", "arguments": {"code": "print(1)"}}}]
    answers, out = {}, ""
    try:
        p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode())
        while 2 not in answers:
            line = sbx.read_line(p, timeout=60).decode()
            if not line:  # it exited
                break
            out += line
            m = json.loads(line)
            answers[m.get("id")] = m
    finally:
        p.kill()
        err = p.communicate()[1].decode(errors="replace")
    _check_host_binary(binary, out + err)
    # Either the call fails (prestart) or the server cannot start its template and says why.
    if 2 in answers:
        assert "EXE " not in json.dumps(answers[2]), answers[2]
    else:
        assert "refused" in err, (out, err)
