"""`sandboxd exec` for any program of the rootfs (issue #16 item 1): FILE by its extension or its
#! line, --lang, -m MODULE, -- PROGRAM; everything resolved inside the rootfs, never on the host;
127 for a program that is not there, 126 for one that cannot be executed."""
import hashlib
import json
import os
import shutil
import subprocess

import pytest

import sbx
from sbx import assert_usage_error

# The JavaScript rootfs (make rootfs-node): $SANDBOXD_NODE_ROOTFS, else beside the rootfs.
NODE_ROOTFS = sbx._abs(os.environ.get("SANDBOXD_NODE_ROOTFS") or
                       os.path.join(os.path.dirname(sbx.ROOTFS), "node-slim"))


@pytest.fixture(autouse=True)
def _binary():
    sbx.require_sandboxd()


def run(*args, rootfs=True, env=None, input=None, report=None):
    """`sandboxd exec [--rootfs ROOTFS] ARGS...`; rootfs=False: the command picks it."""
    cmd = [sbx.SANDBOXD, "exec"]
    if rootfs is True:
        cmd += ["--rootfs", sbx.ROOTFS]
    elif rootfs:
        cmd += ["--rootfs", rootfs]
    if report:
        cmd += ["--report", str(report)]
    cmd += [str(a) for a in args]
    full_env = dict(os.environ, SANDBOXD_AUDIT_LOG="off", **(env or {}))
    p = subprocess.run(cmd, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                       capture_output=True, timeout=60, env=full_env)
    return sbx.Result(cmd, p.returncode, p.stdout, p.stderr, 0.0)


def script(tmp_path, name, text, mode=0o644):
    p = tmp_path / name
    p.write_text(text)
    p.chmod(mode)
    return p


def assert_one_line(res, rc, *needles):
    """Exit rc, exactly one stderr line `sandboxd: ...` holding each needle, nothing on stdout."""
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert res.rc == rc, f"expected exit {rc}\n{res.describe()}"
    assert len(lines) == 1 and lines[0].startswith("sandboxd: "), res.describe()
    for n in needles:
        assert n in lines[0], f"{n!r} not in the message\n{res.describe()}"
    assert res.out == b"", res.describe()


# ---------------------------------------------------------------- FILE: extension, #! line, --lang

def test_sh_file_runs_bash_with_its_arguments(tmp_path):
    f = script(tmp_path, "a.sh", 'printf "%s|" "$0" "${BASH_VERSION%%.*}" "$#" "$@"\n')
    r = run(f, "x y", "")
    assert r.rc == 0, r.describe()
    zero, major, argc, *args = r.stdout.split("|")[:-1]
    assert zero == "/workspace/a.sh" and int(major) >= 5 and argc == "2" and args == ["x y", ""], r.stdout


def test_py_file_runs_python3_whatever_its_shebang(tmp_path):
    # The extension decides, as `python3 FILE` would: a host-only #! line is just a comment here.
    f = script(tmp_path, "p.py", "#!/opt/nowhere/bin/python2\nimport sys; print(sys.argv[1:])\n")
    r = run(f, "a")
    assert r.rc == 0 and r.stdout == "['a']\n", r.describe()


def test_file_without_extension_or_shebang_is_python(tmp_path):
    r = run(script(tmp_path, "noext", "print('py', 6 * 7)\n"))
    assert r.rc == 0 and r.stdout == "py 42\n", r.describe()


def test_shebang_env_bash(tmp_path):
    f = script(tmp_path, "tool", '#!/usr/bin/env bash\necho "$BASH $0 $*"\n')
    r = run(f, "1", "2")
    assert r.rc == 0, r.describe()
    bash, zero, *args = r.stdout.split()
    # env found bash along the sandbox's PATH: the image's bash, not the host's.
    assert bash.endswith("/bash") and zero == "/workspace/tool" and args == ["1", "2"], r.stdout


def test_shebang_sh_with_its_argument(tmp_path):
    # `-e` reaches sh as the kernel passes it: the script stops at `false`.
    f = script(tmp_path, "strict", "#!/bin/sh -e\necho before\nfalse\necho unreached\n")
    r = run(f)
    assert r.rc == 1 and r.stdout == "before\n", r.describe()


def test_shebang_naming_a_host_only_path_is_127(tmp_path):
    # An interpreter that exists on the host (and runs there) but not in the rootfs.
    host_interp = script(tmp_path, "host-only-interp", "#!/bin/sh\necho RAN-ON-HOST\n", 0o755)
    assert subprocess.run([str(host_interp)], capture_output=True).stdout == b"RAN-ON-HOST\n"
    f = script(tmp_path, "uses-host", f"#!{host_interp}\necho x\n")
    r = run(f)
    assert_one_line(r, 127, str(host_interp), "No such file or directory")


def test_shebang_relative_interpreter_is_127(tmp_path):
    r = run(script(tmp_path, "rel", "#!bash\necho x\n"))
    assert_one_line(r, 127, "`bash` is not an absolute path")


def test_shebang_longer_than_the_kernel_reads_is_126(tmp_path):
    # The limit: the kernel reads 256 bytes of a #! line (BINPRM_BUF_SIZE); so do we.
    r = run(script(tmp_path, "long", "#!/bin/sh " + "x" * 300 + "\n"))
    assert_one_line(r, 126, "longer than 255 bytes")
    r = run(script(tmp_path, "fits", "#!/bin/sh -e" + " " * 240 + "\necho fits\n"))
    assert r.rc == 0 and r.stdout == "fits\n", r.describe()


def test_script_that_is_a_symlink(tmp_path):
    real = script(tmp_path, "real.sh", 'echo "$0 $1"\n')
    link = tmp_path / "run"
    link.symlink_to(real)
    # The link's name has no extension; the file it names does.
    r = run(link, "arg")
    assert r.rc == 0 and r.stdout == "/workspace/real.sh arg\n", r.describe()
    alias = tmp_path / "alias.sh"
    alias.symlink_to(script(tmp_path, "target", "#!/usr/bin/env python3\nprint('by-link-name')\n"))
    # Here the link's own name says bash: the name given comes first.
    r = run(alias)
    assert r.rc != 0 and "print" in r.stderr, r.describe()


def test_lang_overrides_extension_and_shebang(tmp_path):
    f = script(tmp_path, "code.txt", "#!/bin/sh\necho \"${BASH_VERSINFO[0]}\"\n")
    r = run("--lang", "bash", f)
    assert r.rc == 0 and int(r.stdout) >= 5, r.describe()
    f = script(tmp_path, "really-python.sh", "import sys; print(sys.version_info[0])\n")
    r = run("--lang", "python", f)
    assert r.rc == 0 and r.stdout == "3\n", r.describe()


def test_lang_bash_code_takes_arguments_as_positional(tmp_path):
    r = run("--lang", "bash", "-c", 'printf "%s|" "$0" "$#" "$@"', "a b", "c\nd")
    assert r.rc == 0 and r.stdout == "bash|2|a b|c\nd|", r.describe()


# ---------------------------------------------------------------- -m MODULE, -- PROGRAM

def test_m_module_with_arguments():
    r = run("-m", "json.tool", "--sort-keys", "--indent", "1", input=b'{"b": 1, "a": "x y"}')
    assert r.rc == 0 and r.stdout == '{\n "a": "x y",\n "b": 1\n}\n', r.describe()
    r = run("-m", "no_such_module_here")
    assert r.rc == 1 and "No module named no_such_module_here" in r.stderr, r.describe()


def test_dashdash_program_gets_arguments_verbatim():
    args = ["a b", "c\nd", "", "--timeout", "-c", "--", "\t$HOME *"]
    r = run("--", "python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *args)
    assert r.rc == 0 and json.loads(r.stdout) == args, r.describe()
    r = run("--", "bash", "-c", 'exit "$1"', "bash", "7")
    assert r.rc == 7, r.describe()


def test_dashdash_unittest_in_a_bound_tree(tmp_path):
    # The CI form from the issue: the project bound read-only, its tests run by the rootfs's Python.
    tmp_path.chmod(0o755)  # the sandbox's uid enters it
    (tmp_path / "test_thing.py").write_text(
        "import unittest\nclass T(unittest.TestCase):\n    def test_ok(self):\n        self.assertEqual(6 * 7, 42)\n")
    r = run("--bind", f"{tmp_path}:/workspace/src", "--workdir", "/workspace/src", "--", "python3", "-m",
            "unittest", "-v")
    assert r.rc == 0 and "test_ok" in r.stderr and "OK" in r.stderr, r.describe()


def test_dashdash_path_in_a_bind_runs(tmp_path):
    # A path is resolved by the kernel inside the sandbox, where the bind is.
    tmp_path.chmod(0o755)
    script(tmp_path, "run.sh", "#!/bin/sh\necho from-bind \"$1\"\n", 0o755)
    r = run("--bind", f"{tmp_path}:/tools", "--", "/tools/run.sh", "z")
    assert r.rc == 0 and r.stdout == "from-bind z\n", r.describe()


def test_program_not_in_the_rootfs_is_127(tmp_path):
    report, log = tmp_path / "r.json", tmp_path / "audit.log"
    r = run("--audit-log", log, "--", "no-such-program-xyz", "arg", report=report)
    assert_one_line(r, 127, "`no-such-program-xyz`: not found along the sandbox's PATH")
    assert json.loads(report.read_text())["exit_code"] == 127
    # The audit record says 127 too, and hashes the command line (one word per line).
    rec = json.loads(log.read_text().splitlines()[-1])
    assert rec["status"] == "setup_error" and rec["exit_code"] == 127, rec
    assert rec["code_sha256"] == hashlib.sha256(b"no-such-program-xyz\narg").hexdigest(), rec
    r = run("--", "/no/such/program")
    assert_one_line(r, 127, "/no/such/program", "No such file or directory")


def test_host_programs_are_not_found(tmp_path):
    # A program the host has along its PATH but the rootfs does not: never run from the host.
    host_only = [p for p in ("gcc", "make", "git", "node", "clang", "strace", "pytest")
                 if shutil.which(p) and not any(os.path.lexists(os.path.join(sbx.ROOTFS, d.lstrip("/"), p))
                                                for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"))]
    sbx.need(host_only, "no program on this host's PATH that the rootfs lacks")
    r = run("--", host_only[0], "--version")
    assert_one_line(r, 127, f"`{host_only[0]}`: not found")
    # Nor by the host path itself, which is not inside the sandbox.
    r = run("--", shutil.which(host_only[0]), "--version")
    assert r.rc in (126, 127) and r.out == b"", r.describe()


def test_not_executable_is_126():
    # Found along PATH (here the image's /etc) but not executable.
    r = run("--env", "PATH=/etc", "--", "passwd")
    assert_one_line(r, 126, "`passwd`: found along the sandbox's PATH", "not an executable file")
    # A path: the kernel inside says EACCES.
    r = run("--", "/etc/passwd")
    assert_one_line(r, 126, "/etc/passwd", "Permission denied")
    r = run("--", "/etc")
    assert_one_line(r, 126, "/etc")


def test_missing_workdir_stays_a_setup_error():
    r = run("--workdir", "/no/such/dir", "--", "true")
    assert_usage_error(r, "--workdir that does not exist")
    assert "workdir `/no/such/dir`" in r.stderr, r.describe()


def test_usage_errors():
    for args, needle in ((["--lang", "ruby", "x.rb"], "--lang `ruby`"), (["-m"], "-m needs MODULE"),
                         (["--"], "-- PROGRAM"), (["--", ""], "PROGRAM is empty"),
                         (["--lang", "bash", "-m", "json.tool"], "--lang bash")):
        r = run(*args)
        assert_usage_error(r, " ".join(args))
        assert needle in r.stderr, r.describe()


# ---------------------------------------------------------------- a language picks its rootfs

def test_javascript_picks_its_own_rootfs(tmp_path):
    # Without --rootfs, .js runs in the store's node-slim (src/run/lang.c), not $SANDBOXD_ROOTFS.
    store = tmp_path / "store"
    store.mkdir()
    f = script(tmp_path, "x.js", "console.log(1)\n")
    r = run(f, rootfs=False, env={"SANDBOXD_ROOTFS_DIR": str(store), "SANDBOXD_ROOTFS": sbx.ROOTFS})
    assert_one_line(r, 125, "rootfs `node-slim` not found", str(store), "--rootfs (javascript)")
    # Python still runs in $SANDBOXD_ROOTFS with the same store.
    r = run(script(tmp_path, "x.py", "print(7)\n"), rootfs=False,
            env={"SANDBOXD_ROOTFS_DIR": str(store), "SANDBOXD_ROOTFS": sbx.ROOTFS})
    assert r.rc == 0 and r.stdout == "7\n", r.describe()


def test_rootfs_overrides_the_language(tmp_path):
    # --rootfs wins; this one has no node, so that is a 127 naming node, not a missing rootfs.
    r = run(script(tmp_path, "x.mjs", "console.log(1)\n"))
    assert_one_line(r, 127, "`node`: not found", os.path.realpath(sbx.ROOTFS))


def need_node():
    sbx.need(os.access(os.path.join(NODE_ROOTFS, "usr/bin/node"), os.X_OK) or
             os.access(os.path.join(NODE_ROOTFS, "usr/local/bin/node"), os.X_OK),
             f"no node rootfs at {NODE_ROOTFS} (make rootfs-node)")


def test_javascript_in_node_slim(tmp_path):
    need_node()
    env = {"SANDBOXD_ROOTFS_DIR": os.path.dirname(NODE_ROOTFS)}
    # Without a cgroup the memory limit is an address-space rlimit, below what V8 reserves at
    # start (sandboxd.policy(5), Node.js): give node room there.
    mem = ("--memory", "2G") if sbx.enforcement() == "degraded" else ()
    r = run(*mem, script(tmp_path, "v.js", "console.log(process.version, process.argv.slice(2))\n"), "a b",
            rootfs=False, env=env)
    assert r.rc == 0 and r.stdout.startswith("v") and "[ 'a b' ]" in r.stdout, r.describe()
    r = run(*mem, script(tmp_path, "m.mjs", "console.log(await Promise.resolve(42))\n"), rootfs=False, env=env)
    assert r.rc == 0 and r.stdout == "42\n", r.describe()
    # node -e puts the arguments at process.argv[1:] (no script name), options included.
    r = run(*mem, "--lang", "javascript", "-c", "console.log(await 6 * 7, process.argv.slice(1))", "--x",
            rootfs=False, env=env)
    assert r.rc == 0 and r.stdout == "42 [ '--x' ]\n", r.describe()
    r = run(*mem, script(tmp_path, "nodetool", "#!/usr/bin/env node\nconsole.log('shebang-node')\n"), rootfs=False,
            env=env)
    assert r.rc == 0 and r.stdout == "shebang-node\n", r.describe()
