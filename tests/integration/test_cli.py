"""The `sandboxd exec` contract as a caller sees it: exit statuses, usage errors, the report,
stdio, arguments, environment, binds, workdir, and the `policy` subcommands."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

import sbx
from sbx import MiB, assert_usage_error, code, run, sandboxd

# ---------------------------------------------------------------- exit status


def test_exit_zero_and_output():
    r = code("print('hello from the sandbox')")
    assert r.rc == 0, r.describe()
    assert r.out == b"hello from the sandbox\n"


def test_exit_status_is_the_programs_own():
    r = code("import sys; sys.exit(3)")
    assert r.rc == 3, r.describe()


def test_exit_status_255():
    r = code("import os; os._exit(255)")
    assert r.rc == 255, r.describe()


def test_uncaught_exception_exits_1_with_traceback():
    r = code("raise ValueError('boom')")
    assert r.rc == 1, r.describe()
    assert "ValueError: boom" in r.stderr


def test_killed_by_signal_is_128_plus_n():
    r = code("import os; os.kill(os.getpid(), 9)")
    assert r.rc == 137, r.describe()
    r = code("import os, signal; signal.signal(signal.SIGTERM, signal.SIG_DFL); os.kill(os.getpid(), 15)")
    assert r.rc == 143, r.describe()


def test_segfault_is_139():
    r = code("import ctypes; ctypes.string_at(0)")
    assert r.rc == 139, r.describe()


def test_timeout_is_124_and_prompt():
    start = time.monotonic()
    r = code("while True: pass", opts=["--timeout", "1"])
    elapsed = time.monotonic() - start
    assert r.rc == 124, r.describe()
    assert elapsed < 5, f"took {elapsed:.1f}s for --timeout 1"
    assert elapsed >= 0.9, f"returned after {elapsed:.2f}s, before the 1s timeout"


def test_timeout_with_sigterm_ignored_and_children():
    src = ("import os, signal, time\n"
           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
           "for _ in range(3):\n"
           "    if os.fork() == 0:\n"
           "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
           "        time.sleep(1000)\n"
           "time.sleep(1000)\n")
    start = time.monotonic()
    r = code(src, opts=["--timeout", "1"])
    assert r.rc == 124, r.describe()
    assert time.monotonic() - start < 5


def test_fractional_timeout():
    r = code("import time; time.sleep(10)", opts=["--timeout", "0.5"])
    assert r.rc == 124, r.describe()
    assert r.elapsed < 4


# ---------------------------------------------------------------- usage errors (125)


def test_bad_option():
    assert_usage_error(sandboxd("exec", "--rootfs", sbx.ROOTFS, "--no-such-option", "-c", "pass"),
                       "unknown option")


def test_missing_file():
    assert_usage_error(sandboxd("exec", "--rootfs", sbx.ROOTFS, "/nonexistent/file.py"), "missing FILE")


def test_no_file_at_all():
    assert_usage_error(sandboxd("exec", "--rootfs", sbx.ROOTFS), "no FILE")


def test_unknown_command():
    r = sandboxd("frobnicate")
    assert r.rc == 125, r.describe()
    assert r.stderr.startswith("sandboxd: ") or "usage" in r.stderr.lower(), r.describe()


@pytest.mark.parametrize("opts,why", [
    (["--memory", "8G"], "above max_memory 4G"),
    (["--timeout", "121"], "above max_timeout 120s"),
    (["--pids", "2000"], "above max_pids 1024"),
    (["--cpus", "3"], "above max_cpus 2"),
    (["--tmp-size", "2G"], "above max_tmp_size 1G"),
    (["--workspace-size", "3G"], "above max_workspace_size 2G"),
    (["--timeout", "0"], "zero timeout"),
    (["--timeout", "soon"], "not a duration"),
    (["--memory", "lots"], "not a size"),
    (["--pids", "-1"], "negative count"),
    (["--bind", "/nonexistent-sbx:/data"], "bind source missing"),
    (["--bind", "relative"], "bind without DST"),
    (["--env", "NOEQUALS"], "env without ="),
    (["--policy", "no-such-policy"], "unknown policy name"),
    (["--policy", "/nonexistent/x.policy"], "missing policy file"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_usage_errors(opts, why):
    r = sandboxd("exec", "--rootfs", sbx.ROOTFS, *opts, "-c", "print('must not run')")
    assert_usage_error(r, why)


def test_bad_rootfs_is_125():
    assert_usage_error(sandboxd("exec", "--rootfs", "/nonexistent-rootfs", "-c", "pass"), "bad rootfs")


def test_limit_within_max_is_accepted():
    r = code("print('ok')", opts=["--memory", "1G", "--timeout", "60", "--pids", "200"])
    assert r.rc == 0 and r.out == b"ok\n", r.describe()


# ---------------------------------------------------------------- report


REPORT_KEYS = {"status", "exit_code", "signal", "timed_out", "execution_time_ms", "cpu_time_ms",
               "memory_peak_bytes", "policy", "policy_sha256"}


def _policy_sha(name_or_path="default"):
    r = sandboxd("policy", "show", name_or_path)
    assert r.rc == 0, r.describe()
    m = re.search(r"(?m)^(?:# )?sha256 ([0-9a-f]{64})\s*$", r.stdout)
    assert m, f"no `sha256 <hex>` line in policy show\n{r.describe()}"
    return m.group(1)


def test_report_normal_exit():
    r = code("import sys; x = bytearray(20 << 20); sys.exit(3)")
    assert r.rc == 3, r.describe()
    rep = r.report
    assert rep is not None, f"no report: {r.report_error}\n{r.describe()}"
    assert REPORT_KEYS <= set(rep), f"missing keys {REPORT_KEYS - set(rep)}: {rep}"
    assert rep["exit_code"] == 3
    assert rep["signal"] in (None, 0)
    assert rep["timed_out"] is False
    assert isinstance(rep["status"], str) and rep["status"]
    assert rep["execution_time_ms"] > 0
    assert rep["cpu_time_ms"] >= 0
    assert rep["execution_time_ms"] < 30000
    assert rep["memory_peak_bytes"] > 1 * MiB, rep
    assert rep["memory_peak_bytes"] < 4 << 30, rep
    assert rep["policy"] == "default"
    assert re.fullmatch(r"[0-9a-f]{64}", rep["policy_sha256"]), rep
    assert rep["policy_sha256"] == _policy_sha("default")


def test_report_success_status_differs_from_error():
    ok = code("pass").report
    bad = code("raise SystemExit(2)").report
    assert ok and bad
    assert ok["exit_code"] == 0 and bad["exit_code"] == 2
    assert ok["status"] != bad["status"], (ok, bad)


def test_report_signal():
    r = code("import os; os.kill(os.getpid(), 9)")
    assert r.rc == 137
    assert r.report and r.report["signal"] == 9 and r.report["exit_code"] == 137, r.report
    assert r.report["timed_out"] is False


def test_report_timeout():
    r = code("while True: pass", opts=["--timeout", "1"])
    assert r.rc == 124, r.describe()
    rep = r.report
    assert rep and rep["timed_out"] is True and rep["exit_code"] == 124, rep
    assert 900 <= rep["execution_time_ms"] < 5000, rep
    assert rep["cpu_time_ms"] > 300, f"a busy loop for 1s used {rep['cpu_time_ms']}ms CPU: {rep}"


def test_report_cpu_time_counts_children():
    """cpu_time_ms covers every process of the sandbox, not just the first."""
    src = ("import os, time, resource\n"
           "pid = os.fork()\n"
           "end = time.monotonic() + 0.6\n"
           "while time.monotonic() < end: pass\n"
           "if pid == 0: os._exit(0)\n"
           "os.waitpid(pid, 0)\n"
           "s, c = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
           "print(int(1000 * (s.ru_utime + s.ru_stime)), int(1000 * (c.ru_utime + c.ru_stime)))\n")
    r = code(src, opts=["--cpus", "2"])
    assert r.rc == 0, r.describe()
    me, child = map(int, r.stdout.split())
    rep = r.report
    assert rep, r.report_error
    assert child > 100, f"the child got {child}ms of CPU"
    assert rep["cpu_time_ms"] >= 0.8 * (me + child), f"inside: self {me}ms + child {child}ms; report {rep}"


def test_report_names_a_policy_file(tmp_path):
    path = sbx.weak_policy("renamed", "default.policy", r"name\s+default", "name renamed-for-test")
    r = code("pass", policy=path)
    assert r.rc == 0, r.describe()
    assert r.report["policy"] == "renamed-for-test", r.report
    assert r.report["policy_sha256"] == _policy_sha(path)
    assert r.report["policy_sha256"] != _policy_sha("default")


def test_report_written_on_setup_error(tmp_path):
    """A run that fails in setup still exits 125; a report, if written, says so."""
    rep = tmp_path / "r.json"
    r = sandboxd("exec", "--rootfs", "/nonexistent-rootfs", "--report", rep, "-c", "pass")
    assert r.rc == 125
    if rep.exists() and rep.stat().st_size:
        data = json.loads(rep.read_text())
        assert data.get("exit_code") in (125, None), data


# ---------------------------------------------------------------- stdio, arguments


def test_stdin_passes_through():
    r = code("import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(data[::-1])",
             input=bytes(range(256)) * 1000)
    assert r.rc == 0, r.describe()
    assert r.out == (bytes(range(256)) * 1000)[::-1]


def test_stdout_stderr_unmodified_binary():
    payload = bytes(range(256)) * 64 + b"no newline at end \r\x00"
    r = code("import sys; sys.stdout.buffer.write(bytes(range(256)) * 64 + b'no newline at end \\r\\x00');"
             "sys.stderr.buffer.write(b'\\xff\\xfeerr')")
    assert r.rc == 0, r.describe()
    assert r.out == payload
    assert r.err == b"\xff\xfeerr"


def test_large_output():
    r = code("import sys; sys.stdout.write('x' * (8 << 20))")
    assert r.rc == 0 and len(r.out) == 8 << 20, (r.rc, len(r.out), r.stderr)


def test_output_streams_before_exit():
    cmd = sbx.exec_cmd(("-c", "import time; print('first', flush=True); time.sleep(3); print('second')"))
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline()
        first_at = time.monotonic() - start
        rest, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert line == b"first\n", err
    assert first_at < 2.5, f"first line arrived after {first_at:.1f}s: output is buffered, not streamed"
    assert rest == b"second\n" and p.returncode == 0


def test_file_arguments_and_location(tmp_path):
    script = tmp_path / "my_prog.py"
    script.write_text("import json, os, sys\n"
                      "print(json.dumps({'argv': sys.argv, 'cwd': os.getcwd(), 'file': __file__,"
                      " 'exe': sys.executable, 'home': os.environ.get('HOME'),"
                      " 'listing': sorted(os.listdir('/workspace'))}))\n")
    script.chmod(0o644)
    os.chmod(tmp_path, 0o755)
    r = run(str(script), "a b", "--not-an-option", "", "ü")
    assert r.rc == 0, r.describe()
    d = r.json()
    assert d["argv"] == ["/workspace/my_prog.py", "a b", "--not-an-option", "", "ü"]
    assert d["cwd"] == "/workspace" and d["home"] == "/workspace"
    assert d["exe"] == "/usr/bin/python3"
    assert "my_prog.py" in d["listing"]


def test_file_is_read_only_inside(tmp_path):
    script = tmp_path / "selfmod.py"
    script.write_text("import errno\ntry:\n    open(__file__, 'a').write('#')\n    print('WROTE')\n"
                      "except OSError as e:\n    print(errno.errorcode[e.errno])\n")
    script.chmod(0o666)
    os.chmod(tmp_path, 0o755)
    r = run(str(script))
    assert r.rc == 0, r.describe()
    assert r.out.strip() in (b"EROFS", b"EACCES", b"EPERM"), r.describe()
    assert script.read_text().endswith(")\n")


def test_dash_c_arguments():
    r = code("import sys, json; print(json.dumps(sys.argv))", "x", "-y")
    assert r.rc == 0, r.describe()
    assert json.loads(r.stdout) == ["-c", "x", "-y"]


# ---------------------------------------------------------------- environment


def test_environment_is_exactly_the_policys():
    env = dict(os.environ, SBX_SECRET_FROM_HOST="leak", PYTHONPATH="/evil", PYTHONSTARTUP="/evil.py")
    r = code("import os, json; print(json.dumps(dict(os.environ)))", env=env)
    assert r.rc == 0, r.describe()
    assert json.loads(r.stdout) == {
        "PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/workspace", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
        "NODE_OPTIONS": "--max-old-space-size=512"}


def test_env_option_adds_and_overrides():
    r = code("import os, json; print(json.dumps(dict(os.environ)))",
             opts=["--env", "FOO=bar baz", "--env", "LANG=C", "--env", "EMPTY="])
    assert r.rc == 0, r.describe()
    env = json.loads(r.stdout)
    assert env["FOO"] == "bar baz" and env["LANG"] == "C" and env["EMPTY"] == ""
    assert env["HOME"] == "/workspace"


# ---------------------------------------------------------------- binds and workdir


def test_bind_read_only(host_dir):
    (host_dir / "data.txt").write_text("from the host\n")
    (host_dir / "data.txt").chmod(0o644)
    r = code("import errno\nprint(open('/mnt/data.txt').read(), end='')\n"
             "try:\n    open('/mnt/new', 'w')\n    print('WROTE')\nexcept OSError as e:\n"
             "    print(errno.errorcode[e.errno])\n",
             opts=["--bind", f"{host_dir}:/mnt"])
    assert r.rc == 0, r.describe()
    assert r.stdout.splitlines() == ["from the host", "EROFS"], r.describe()
    assert not (host_dir / "new").exists()


def test_bind_rw(host_dir):
    r = code("open('/workspace/out/result.txt', 'w').write('written inside')",
             opts=["--bind-rw", f"{host_dir}:/workspace/out"])
    assert r.rc == 0, r.describe()
    assert (host_dir / "result.txt").read_text() == "written inside"


def test_bind_does_not_follow_symlink_out(host_dir):
    """A symlink in a bound directory resolves inside the sandbox, not on the host."""
    (host_dir / "escape").symlink_to("/etc/shadow")
    r = code("import os\ntry:\n    print(open('/workspace/data/escape').read()[:20])\nexcept OSError as e:\n"
             "    print('ERR', e.errno)\n", opts=["--bind", f"{host_dir}:/workspace/data"])
    assert r.rc == 0, r.describe()
    assert r.stdout.startswith("ERR"), f"read the host's /etc/shadow through a symlink: {r.stdout!r}"


def test_setup_error_is_reported_every_time(host_dir):
    """A sandbox that fails early in its setup exits with messages from sandboxd's side still
    unread (its network namespace, its cgroup); the kernel then reports a reset once before the
    child's own error. Forty tries: the error is the child's every time, never a generic one."""
    seen = set()
    for _ in range(40):
        r = code("pass", opts=["--bind", f"{host_dir}:/usr/no-such-dir-in-rootfs"], want_report=False)
        assert r.rc == 125, r.describe()
        seen.add(r.stderr.strip().split(":")[1].strip() if ":" in r.stderr else r.stderr)
    assert seen == {"bind target `/usr/no-such-dir-in-rootfs` does not exist in the read-only rootfs"}, seen


def test_bind_to_new_path_outside_tmpfs(host_dir):
    """A DST missing from the read-only rootfs cannot be created inside it: a usage error that
    says where binds can go (sandboxd(1), --bind)."""
    (host_dir / "f").write_text("x")
    r = code("print(open('/usr/data/f').read())", opts=["--bind", f"{host_dir}:/usr/data"])
    assert_usage_error(r, "--bind to a path missing from the rootfs")
    assert "onto an existing path, below /workspace or /tmp, or at a new top-level directory" in r.stderr, \
        r.describe()
    r = code("print(open('/mnt/data/f').read())", opts=["--bind", f"{host_dir}:/mnt"])
    assert r.rc != 0  # /mnt itself is the mount point: /mnt/data does not exist
    r = code("print(open('/mnt/f').read())", opts=["--bind", f"{host_dir}:/mnt"])
    assert r.rc == 0 and r.stdout.strip() == "x", r.describe()


def test_bind_at_new_top_level_dir(host_dir):
    """A DST whose first component the rootfs lacks (/data, /a/b/c) is made in a skeleton root: the
    rest of the rootfs is there as before and as read-only, the bind is read-only, nothing lands
    in the rootfs on the host, and a sandbox without such a bind has no skeleton."""
    (host_dir / "f").write_text("x")
    check = ("import os\nprint(open('/data/f').read(), open('/a/b/c/f').read(), os.readlink('/bin'),\n"
             "      os.path.exists('/usr/bin/python3'), sorted(os.listdir('/a')))\n"
             "for p in ('/data/new', '/newtop', '/usr/new', '/a/new'):\n"
             "    try:\n        open(p, 'w')\n        print('wrote', p)\n"
             "    except OSError as e:\n        print(e.errno == 30)\n"
             "print(sum(' / / ' in l and ' tmpfs ' in l for l in open('/proc/self/mountinfo')))\n")
    r = code(check, opts=["--bind", f"{host_dir}:/data", "--bind", f"{host_dir}:/a/b/c"])
    assert r.rc == 0, r.describe()
    assert r.stdout.split() == ["x", "x", "usr/bin", "True", "['b']", "True", "True", "True", "True", "1"], \
        r.describe()
    for p in ("data", "a"):
        assert not os.path.lexists(os.path.join(sbx.ROOTFS, p)), f"made /{p} in the rootfs on the host"
    r = code("print(sum(' / / ' in l and ' tmpfs ' in l for l in open('/proc/self/mountinfo')))",
             opts=["--bind", f"{host_dir}:/workspace/d"])
    assert r.rc == 0 and r.stdout.strip() == "0", r.describe()


def test_workdir():
    r = code("import os; print(os.getcwd())", opts=["--workdir", "/tmp"])
    assert r.rc == 0, r.describe()
    assert r.stdout.strip() == "/tmp"


def test_tmp_and_workspace_are_fresh_each_run():
    # The first run must really leave the markers behind in its own /tmp and /workspace, or the
    # second one finding none proves nothing.
    check = "import os; print(os.path.exists('/tmp/marker'), os.path.exists('/workspace/marker'))"
    first = code("open('/tmp/marker', 'w').write('x'); open('/workspace/marker', 'w').write('x')\n" + check)
    assert first.rc == 0 and first.stdout.strip() == "True True", first.describe()
    r = code(check)
    assert r.rc == 0 and r.stdout.strip() == "False False", r.describe()


# ---------------------------------------------------------------- policy subcommands


def test_policy_check_shipped():
    r = sandboxd("policy", "check", os.path.join(sbx.POLICY_SRC, "default.policy"))
    assert r.rc == 0, r.describe()


def _bad_policies():
    out = []
    for name in sorted(os.listdir(sbx.POLICIES)):
        if name.startswith("bad-") and name.endswith(".policy"):
            with open(os.path.join(sbx.POLICIES, name)) as f:
                m = re.search(r"(?m)^# expect: line (\d+): (.+)$", f.read())
            out.append(pytest.param(name, int(m.group(1)) if m else None, m.group(2) if m else "", id=name))
    return out


@pytest.mark.parametrize("name,line,words", _bad_policies())
def test_policy_check_rejects(name, line, words):
    path = os.path.join(sbx.POLICIES, name)
    r = sandboxd("policy", "check", path)
    assert r.rc == 125, r.describe()
    if line is not None:
        assert re.search(re.escape(name) + rf":{line}:", r.stderr), f"want {name}:{line}:\n{r.describe()}"
    for w in words.split("|"):
        assert w.lower() in r.stderr.lower(), f"want `{w}` in the message\n{r.describe()}"
    # And exec refuses to run with it.
    assert_usage_error(sandboxd("exec", "--rootfs", sbx.ROOTFS, "--policy", path, "-c", "print(1)"), name)


def test_policy_check_rejects_root_uid():
    path = sbx.weak_policy("uid0", "default.policy", r"uid\s+1000.*", "uid 0")
    r = sandboxd("policy", "check", path)
    assert r.rc == 125 and "uid" in r.stderr, r.describe()


def test_policy_check_duplicate_key_rejected():
    path = sbx.weak_policy("dupkey", "default.policy", r"hostname\s+sandbox", "hostname sandbox\nhostname other")
    r = sandboxd("policy", "check", path)
    assert r.rc == 125 and re.search(r"default\.policy:\d+:", r.stderr), r.describe()


def test_policy_check_several_files():
    ok = os.path.join(sbx.POLICY_SRC, "default.policy")
    bad = os.path.join(sbx.POLICIES, "bad-unknown-key.policy")
    assert sandboxd("policy", "check", ok, ok).rc == 0
    assert sandboxd("policy", "check", ok, bad).rc == 125


def test_policy_show_lists_every_rule():
    r = sandboxd("policy", "show", "default")
    assert r.rc == 0, r.describe()
    text = sbx.policy_text("syscalls")
    names = set()
    for line in text.splitlines():
        line = line.split("#")[0].split()
        if not line or line[0] not in ("allow", "errno", "kill"):
            continue
        words = line[2:] if line[0] == "errno" else line[1:]
        if "when" in words:
            words = words[:words.index("when")]
        names.update(words)
    shown = set(re.findall(r"[a-z_0-9]+", r.stdout))
    assert names - shown == set(), f"not shown: {sorted(names - shown)}"
    assert re.search(r"(?m)^(?:# )?sha256 [0-9a-f]{64}\s*$", r.stdout), r.describe()
    for key in ("no_new_privs", "drop_capabilities", "readonly_root", "mask_proc", "seccomp_default"):
        assert key in r.stdout


def test_policy_show_default_is_stable_and_path_equivalent():
    a = _policy_sha("default")
    b = _policy_sha(os.path.join(sbx.POLICY_SRC, "default.policy"))
    assert a == b == _policy_sha()


def test_policy_show_hash_changes_with_content():
    weak = sbx.weak_policy("show-hash", "syscalls", r"errno EPERM ioctl when arg1 == TIOCSTI.*", None)
    assert _policy_sha(weak) != _policy_sha("default")


def test_shipped_default_refuses_without_cgroup_or_enforces_with_one():
    """The shipped default policy says `cgroup required`: with a cgroup this user may create,
    every limit is a cgroup limit; without one, exec refuses with one line naming the fix."""
    shipped = os.path.join(os.environ.get("SANDBOXD_SHIPPED_POLICY_DIR") or sbx.POLICY_SRC, "default.policy")
    r = code("print('ran')", policy=shipped)
    doctor = sandboxd("doctor")
    if "FAIL cgroups" in doctor.stdout:
        assert_usage_error(r, "shipped default without a cgroup")
        assert "systemd-run --user --scope -p Delegate=yes" in r.stderr and "fallback-rlimit" in r.stderr
    else:
        assert r.rc == 0 and r.stdout.strip() == "ran", r.describe()
        assert r.report["limits"] in ("cgroup1", "cgroup2"), r.report


def _servers_json(tmp_path):
    # Never started: the policy check comes first.
    cfg = tmp_path / "servers.json"
    cfg.write_text(json.dumps({"mcpServers": {"memory": {"command": "/bin/false"}}}))
    return str(cfg)


def test_policy_proxy_servers_none_refuses_exec(tmp_path):
    """strict says `proxy_servers none`: exec with a host-server config is refused up front."""
    r = code("print(1)", policy="strict", opts=["--config", _servers_json(tmp_path)])
    assert_usage_error(r, "strict policy with --config")
    assert "proxy_servers" in r.stderr


def test_policy_proxy_servers_none_refuses_mcp_call(tmp_path):
    """In `sandboxd mcp`, a run_python call naming a server the policy does not allow gets an
    isError result, and the server keeps serving."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run_python", "arguments": {"code": "print(1)", "servers": ["memory"]}}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    p = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--policy", "strict",
                        "--config", _servers_json(tmp_path)],
                       input="".join(json.dumps(m) + "\n" for m in msgs), capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, SANDBOXD_AUDIT_LOG="off"))
    out = {m.get("id"): m for m in map(json.loads, p.stdout.splitlines())}
    assert out[2]["result"]["isError"] is True, out
    assert "not allowed by policy `strict`" in json.dumps(out[2]), out
    assert out[3]["result"] == {}, out


def test_cgroup_namespace_is_rooted_at_the_sandbox():
    """The sandbox sees itself at "/" in every cgroup hierarchy (its own cgroup namespace, rooted
    at its own cgroup also where it joins that cgroup after clone, as on cgroup v1)."""
    r = code("print(open('/proc/self/cgroup').read())")
    assert r.rc == 0, r.describe()
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    assert lines and all(l.endswith(":/") for l in lines), lines


def test_import_claude_starts_only_approved_project_servers(tmp_path):
    """--import-claude: a repository's .mcp.json is not the user's choice. Its servers run only when
    Claude Code's settings approve them (here by name, in ~/.claude.json projects[cwd]); the rest
    are never started, and one warning line names them."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    os.chmod(tmp_path, 0o755)

    def server(tag):  # leaves a mark on the host when it starts, then exits (not a real MCP server)
        return {"command": "/bin/sh", "args": ["-c", f"echo {tag} >> {tmp_path}/started"]}

    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "approved": server("approved"), "evil": server("evil"), "evil2": server("evil2")}}))
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"user": server("user")}, "projects": {
        os.path.realpath(proj): {"enabledMcpjsonServers": ["approved"], "mcpServers": {"local": server("local")}}}}))
    src = ("from mcp import runtime\n"
           "print(runtime.discovered_servers())\n"
           "for s in ('approved', 'evil', 'evil2', 'local', 'user'):\n"
           "    try:\n"
           "        runtime.call_tool_sync(s, 'x', {})\n"
           "    except Exception as e:\n"
           "        print(s, type(e).__name__)\n")
    cmd = sbx.exec_cmd(("-c", src), opts=["--import-claude"])
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    p = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "('local', 'approved', 'user')", p.stdout
    started = sorted((tmp_path / "started").read_text().split()) if (tmp_path / "started").exists() else []
    assert started == ["approved", "local", "user"], f"host processes started: {started}\n{p.stderr}"
    warn = [l for l in p.stderr.splitlines() if "not importing" in l]
    assert len(warn) == 1 and "`evil`, `evil2`" in warn[0] and "enabledMcpjsonServers" in warn[0], p.stderr


def test_exec_config_with_64_long_server_names(tmp_path):
    """64 servers of 64-character names: SANDBOXD_MCP_SERVERS is sized from the names (a fixed
    4096-byte buffer once overflowed and aborted every run with `buffer overflow detected`)."""
    names = [f"s{i:02d}".ljust(64, "x") for i in range(64)]
    cfg = tmp_path / "many.json"
    cfg.write_text(json.dumps({"mcpServers": {n: {"command": "/bin/false"} for n in names}}))
    r = code("import os; v = os.environ['SANDBOXD_MCP_SERVERS']; print(len(v.split(',')), len(v))",
             opts=["--config", str(cfg)])
    assert r.rc == 0, r.describe()
    assert r.stdout.split() == ["64", str(64 * 64 + 63)], r.describe()
    assert "overflow" not in r.stderr, r.describe()
