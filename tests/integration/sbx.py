"""Helpers shared by the integration tests: find sandboxd and the rootfs, run code in a sandbox,
parse what the probes (tests/probes/*.py, run INSIDE the sandbox) report, and build weakened
copies of the shipped policy.

Environment:
  SANDBOXD            the binary (default: build/sandboxd in the repository)
  SANDBOXD_ROOTFS     the root filesystem (default: rootfs/python-3.14-slim)
  SANDBOXD_DATA_ROOTFS the data rootfs (default: python-3.14-data beside SANDBOXD_ROOTFS)
  SANDBOXD_POLICY_SRC directory holding default.policy and syscalls.policy (default: policy/)
  SANDBOXD_TEST_WORK  scratch directory for generated policies and reports (default: tests/.work,
                      or a fresh temporary directory when that is not writable)
  CI=true             tests that cannot run fail instead of skipping (security tests always)
"""
import dataclasses
import errno as errno_mod
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
PROBES = os.path.join(TESTS, "probes")
POLICIES = os.path.join(TESTS, "policies")


def _abs(path):
    return path if os.path.isabs(path) else os.path.join(REPO, path)


SANDBOXD = _abs(os.environ.get("SANDBOXD") or "build/sandboxd")
ROOTFS = _abs(os.environ.get("SANDBOXD_ROOTFS") or "rootfs/python-3.14-slim")
POLICY_SRC = _abs(os.environ.get("SANDBOXD_POLICY_SRC") or "policy")
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# The data rootfs (make rootfs-data): $SANDBOXD_DATA_ROOTFS, else beside the rootfs.
DATA_ROOTFS = _abs(os.environ.get("SANDBOXD_DATA_ROOTFS") or
                   os.path.join(os.path.dirname(ROOTFS), "python-3.14-data"))


def _work_dir():
    wanted = os.environ.get("SANDBOXD_TEST_WORK")
    if wanted:
        os.makedirs(wanted, exist_ok=True)
        return os.path.abspath(wanted)
    default = os.path.join(TESTS, ".work")
    try:
        os.makedirs(default, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=default)
        probe.close()
        return default
    except OSError:
        return tempfile.mkdtemp(prefix="sandboxd-tests-work.")


WORK = _work_dir()
IS_ROOT = os.geteuid() == 0


def host_id_range(policy_file="default.policy"):
    """(start, count) of a shipped policy's host_id_range."""
    with open(os.path.join(POLICY_SRC, policy_file)) as f:
        m = re.search(r"(?m)^host_id_range\s+(\d+)\s+(\d+)", f.read())
    return int(m.group(1)), int(m.group(2))


def is_host_id(uid, gid):
    """Whether host (uid, gid) is what the sandbox's uid 1000 / gid 1000 may be outside: as root
    one id of the policy's host_id_range (the same for uid and gid), else the invoking user's."""
    if not IS_ROOT:
        return (uid, gid) == (os.getuid(), os.getgid())
    start, count = host_id_range()
    return uid == gid and start <= uid < start + count

MiB = 1 << 20
GiB = 1 << 30


class NotApplicable(pytest.skip.Exception):
    """A skip CI accepts in a security test (conftest.py fails any other there): what the test
    checks does not exist in this run, e.g. a root-only defense in the unprivileged run."""


def need(cond, reason, security=None):
    """Skip with a reason when a host feature is missing. security=True: CI fails instead;
    security=False: nothing to defend without the feature, so CI accepts the skip (NotApplicable);
    unsaid: a plain skip, which conftest.py turns into a failure in a security test in CI."""
    if cond:
        return
    if security and CI:
        pytest.fail("CI=true and a security test cannot run: " + reason)
    if security is False:
        raise NotApplicable(reason)
    pytest.skip(reason)


def root_only(reason):
    """Skip unless root. tests/run runs the suite as root first and says so to the unprivileged run
    (SANDBOXD_ROOT_RUN=1); without that root run, CI fails instead of skipping."""
    if IS_ROOT:
        return
    if CI and os.environ.get("SANDBOXD_ROOT_RUN") != "1":
        pytest.fail("CI=true, a root-only test and no root run of the suite: " + reason)
    raise NotApplicable("root mode only: " + reason)


def require_sandboxd():
    """The binary and the rootfs; without them a developer gets a skip, CI a failure."""
    for ok, what in ((os.access(SANDBOXD, os.X_OK), f"sandboxd binary {SANDBOXD} (run make)"),
                     (os.access(os.path.join(ROOTFS, "usr/bin/python3"), os.X_OK),
                      f"rootfs {ROOTFS} (run scripts/build-rootfs)")):
        if not ok:
            if CI:
                pytest.fail("CI=true and missing " + what)
            pytest.skip("missing " + what)


def require_data_rootfs():
    """The binary and the data rootfs; without the latter a developer gets a skip, CI a failure
    (make check builds it)."""
    require_sandboxd()
    if not os.access(os.path.join(DATA_ROOTFS, "usr/bin/python3"), os.X_OK):
        what = f"data rootfs {DATA_ROOTFS} (run make rootfs-data)"
        if CI:
            pytest.fail("CI=true and missing " + what)
        pytest.skip("missing " + what)


# The JavaScript rootfs (make rootfs-node): $SANDBOXD_NODE_ROOTFS, else beside the rootfs.
NODE_ROOTFS = _abs(os.environ.get("SANDBOXD_NODE_ROOTFS") or os.path.join(os.path.dirname(ROOTFS), "node-slim"))


def require_node_rootfs():
    """The binary and the node rootfs; without the latter a developer gets a skip, CI a failure
    (make check builds it)."""
    require_sandboxd()
    if not os.access(os.path.join(NODE_ROOTFS, "usr/bin/node"), os.X_OK):
        what = f"node rootfs {NODE_ROOTFS} (run make rootfs-node)"
        if CI:
            pytest.fail("CI=true and missing " + what)
        pytest.skip("missing " + what)


def node(script, *args, **kw):
    """Run tests/probes/SCRIPT.js (or ('-e', code)) with node in the node rootfs: `sandboxd exec
    --rootfs NODE_ROOTFS -- node -e CODE ARGS...` (the code in argv: no file to bind)."""
    if isinstance(script, tuple):
        src = script[1]
    else:
        with open(os.path.join(PROBES, script + ".js")) as f:
            src = f.read()
    return run(("--", "node", "-e", src), *args, rootfs=kw.pop("rootfs", NODE_ROOTFS), **kw)


def errno_name(e):
    return errno_mod.errorcode.get(e, str(e)) if e else None


@dataclasses.dataclass
class Result:
    cmd: list
    rc: int
    out: bytes
    err: bytes
    elapsed: float
    report: dict = None
    report_error: str = None

    @property
    def stdout(self):
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self):
        return self.err.decode("utf-8", "replace")

    def json(self):
        """The probe's facts: the last stdout line that parses as a JSON object."""
        for line in reversed(self.stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        raise ProbeError(self, "no JSON line on stdout")

    def describe(self):
        return (f"command: {' '.join(map(str, self.cmd))}\nexit status: {self.rc} "
                f"({self.elapsed:.2f}s)\nstdout: {self.stdout[-2000:]!r}\nstderr: {self.stderr[-2000:]!r}")


class ProbeError(AssertionError):
    """The sandbox or the probe did not run at all: not a verdict on the property under test."""

    def __init__(self, result, why):
        super().__init__(f"{why}\n{result.describe()}")
        self.result = result


_report_seq = 0
# SANDBOXD_TEST_ALLOW_HOST=HOST:PORT: every exec and mcp also gets `--allow-host HOST:PORT`, i.e.
# `network proxy`: the escape suites run so with the egress proxy on (tests/suites.sh).
EGRESS_OPTS = ["--allow-host", os.environ["SANDBOXD_TEST_ALLOW_HOST"]] if os.environ.get(
    "SANDBOXD_TEST_ALLOW_HOST") else []


def exec_cmd(target, args=(), *, policy=None, opts=(), rootfs=None, report=None):
    """The argv of `sandboxd exec`. target is a probe name, a path, or ('-c', code)."""
    cmd = [SANDBOXD, "exec", "--rootfs", rootfs or ROOTFS]
    if policy:
        cmd += ["--policy", policy]
    cmd += EGRESS_OPTS
    if report:
        cmd += ["--report", report]
    cmd += list(opts)
    if isinstance(target, tuple):
        cmd += list(target)
    elif os.sep in target or target.endswith(".py"):
        cmd.append(target)
    else:
        cmd.append(os.path.join(PROBES, target + ".py"))
    return cmd + [str(a) for a in args]


def run(target, *args, policy=None, opts=(), input=None, timeout=60, want_report=True, env=None,
        rootfs=None):
    """Run code in a fresh sandbox and wait; returns a Result (never raises on exit status)."""
    global _report_seq
    report = None
    if want_report:
        _report_seq += 1
        report = os.path.join(WORK, "reports", f"{os.getpid()}-{_report_seq}.json")
        os.makedirs(os.path.dirname(report), exist_ok=True)
        if os.path.exists(report):
            os.unlink(report)
    cmd = exec_cmd(target, args, policy=policy, opts=opts, rootfs=rootfs, report=report)
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"sandboxd did not return within {timeout}s: {' '.join(cmd)}\n"
                             f"stdout: {e.stdout!r}\nstderr: {e.stderr!r}")
    res = Result(cmd, p.returncode, p.stdout, p.stderr, time.monotonic() - start)
    if report:
        try:
            with open(report) as f:
                res.report = json.load(f)
        except (OSError, ValueError) as e:
            res.report_error = str(e)
    return res


_enforcement = {}


def enforcement(policy=None):
    """How the policy's limits are enforced on this host for this user: the report's `limits`
    (cgroup2, cgroup1 or degraded). Cached per policy."""
    if policy not in _enforcement:
        r = run(("-c", "pass"), policy=policy)
        _enforcement[policy] = (getattr(r, "report", None) or {}).get("limits")
    return _enforcement[policy]


def code(src, *args, **kw):
    return run(("-c", src), *args, **kw)


def probe(name, *args, expect_rc=0, **kw):
    """Run tests/probes/NAME.py and return its JSON facts; ProbeError when it did not run."""
    res = run(name, *args, **kw)
    if expect_rc is not None and res.rc != expect_rc:
        raise ProbeError(res, f"probe {name} exited {res.rc}, expected {expect_rc}")
    return res.json()


def sandboxd(*args, timeout=30, input=None):
    """Run `sandboxd ARGS...` (no sandbox implied)."""
    cmd = [SANDBOXD] + [str(a) for a in args]
    start = time.monotonic()
    p = subprocess.run(cmd, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                       capture_output=True, timeout=timeout)
    return Result(cmd, p.returncode, p.stdout, p.stderr, time.monotonic() - start)


def assert_usage_error(res, what=""):
    """Exit 125 and exactly one stderr line starting `sandboxd: `."""
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert res.rc == 125, f"{what}: expected exit 125\n{res.describe()}"
    assert len(lines) == 1, f"{what}: expected one stderr line, got {len(lines)}\n{res.describe()}"
    assert lines[0].startswith("sandboxd: "), f"{what}: stderr must start `sandboxd: `\n{res.describe()}"
    assert res.out == b"", f"{what}: nothing on stdout\n{res.describe()}"


# ---------------------------------------------------------------- weakened policies

def syscalls_file():
    """The file default.policy includes (its seccomp rules), e.g. syscalls.inc."""
    with open(os.path.join(POLICY_SRC, "default.policy")) as f:
        m = re.search(r"(?m)^include\s+(\S+)", f.read())
    return m.group(1) if m else "default.policy"


def policy_text(file):
    """The text of default.policy, or (file == 'syscalls') of the file it includes."""
    name = syscalls_file() if file == "syscalls" else file
    with open(os.path.join(POLICY_SRC, name)) as f:
        return f.read()


def shipped_policy(name):
    """A copy of the shipped policy NAME (and its include) in WORK/shipped-NAME/, as the suite runs
    it: where tests/run gave default.policy `cgroup fallback-rlimit` (no cgroup for this user), the
    copy says so too, since the cgroup mode is not what these tests judge. Returns its path."""
    src = os.environ.get("SANDBOXD_SHIPPED_POLICY_DIR") or POLICY_SRC
    d = os.path.join(WORK, f"shipped-{name}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(src, f"{name}.policy")) as f:
        text = f.read()
    with open(os.path.join(POLICY_SRC, "default.policy")) as f:
        no_cgroup = re.search(r"(?m)^cgroup\s+fallback-rlimit\b", f.read())
    if no_cgroup:
        text = re.sub(r"(?m)^cgroup\s+required\b", "cgroup           fallback-rlimit", text)
    for inc in re.findall(r"(?m)^include\s+(\S+)", text):
        shutil.copyfile(os.path.join(src, inc), os.path.join(d, inc))
    path = os.path.join(d, f"{name}.policy")
    with open(path, "w") as f:
        f.write(text)
    return path


def weak_policy(tag, file, old, new):
    """A copy of the shipped default policy (and its include) in WORK/weak-TAG/ with exactly one
    line changed.

    file: 'default.policy', or 'syscalls' for the included rules file; old: a regex that must
    match exactly one whole line (surrounding blanks ignored); new: its replacement (may hold
    newlines), None to delete the line, or a callable mapping the old line to the new one.
    Returns the path of the copy's default.policy."""
    d = os.path.join(WORK, f"weak-{tag}")
    os.makedirs(d, exist_ok=True)
    inc = syscalls_file()
    for name in {"default.policy", inc}:
        shutil.copyfile(os.path.join(POLICY_SRC, name), os.path.join(d, name))
    path = os.path.join(d, inc if file == "syscalls" else file)
    with open(path) as f:
        lines = f.read().split("\n")
    hits = [i for i, l in enumerate(lines) if re.fullmatch(old, l.strip())]
    if len(hits) != 1:
        raise AssertionError(f"weak policy {tag}: /{old}/ matches {len(hits)} lines of {path}, need 1")
    if callable(new):
        new = new(lines[hits[0]].strip())
    lines[hits[0]] = "# (line removed by the weak-policy test)" if new is None else new
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return os.path.join(d, "default.policy")


def fork_calls_policy(calls):
    """The default policy with `fork_template_calls CALLS` (a template replaced after CALLS
    sandboxes, so that a test reaches its successor in a few calls). Returns its path."""
    return weak_policy(f"fork-calls-{calls}", "default.policy", r"fork_template_calls\s+\d+",
                       f"fork_template_calls {calls}")


# ---------------------------------------------------------------- host-side observation

def processes_with(marker):
    """(pid, cmdline) of every host process whose command line contains marker."""
    found = []
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append((int(pid), cmdline.strip()))
    return found


# Runs a command (sandboxd exec) as the child of a child subreaper, and says what was there the
# moment it exited (sandbox cgroups named after it in the directories given) and which orphans
# came to the subreaper after (a sandbox's pid 1 that sandboxd did not wait for), with how long
# each took to end.
_SUBREAPER = r"""
import ctypes, json, os, re, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
parents = json.loads(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, st = os.waitpid(pid, 0)
t0 = time.monotonic()
left = [os.path.join(d, e) for d in parents for e in os.listdir(d) if re.fullmatch(rf"sandboxd-{pid}-\d+", e)]
orphans = []
while True:
    try:
        p, ost = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if p == 0:
        if time.monotonic() - t0 > 10:
            break
        time.sleep(0.001)
        continue
    orphans.append({"pid": p, "status": ost, "after_s": time.monotonic() - t0})
print(json.dumps({"rc": os.waitstatus_to_exitcode(st), "cgroups_left": left, "orphans": orphans}))
"""


def exec_under_subreaper(cmd, cgroup_parents=(), env=None):
    """({rc, cgroups_left, orphans}, stderr) of cmd run under a subreaper (_SUBREAPER)."""
    p = subprocess.run([sys.executable, "-c", _SUBREAPER, json.dumps(list(cgroup_parents)), *cmd],
                       capture_output=True, timeout=60, stdin=subprocess.DEVNULL, env=env)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return json.loads(p.stdout.decode().splitlines()[-1]), p.stderr.decode(errors="replace")


def host_mounts():
    """The host mount table as a multiset of (mount point, fs type, source)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            out.append((fields[4], fields[sep + 1], fields[sep + 2]))
    return sorted(out)


def temp_dirs():
    """The entries of /tmp and $TMPDIR (where sandboxd might leave temporary directories)."""
    seen = set()
    for d in {"/tmp", tempfile.gettempdir()}:
        try:
            for e in os.listdir(d):
                seen.add(os.path.join(d, e))
        except OSError:
            pass
    return seen


def process_tree(pid):
    """pid and its descendants, a line each: pid, state, kernel wait channel, command (what a hang
    was waiting for)."""
    kids = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                st = f.read()
            kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(e))
        except (OSError, ValueError, IndexError):
            pass
    lines, todo = [], [pid]
    while todo:
        q = todo.pop()
        todo += kids.get(q, [])
        info = []
        for name in ("stat", "wchan", "cmdline"):
            try:
                with open(f"/proc/{q}/{name}", "rb") as f:
                    info.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
            except OSError as e:
                info.append(f"({e.strerror})")
        state = info[0][info[0].rfind(")") + 2:][:1] if ")" in info[0] else "?"
        lines.append(f"  {q} {state} wchan={info[1]} {info[2][:120]}")
    return "\n".join(lines)


def read_line(p, timeout=60.0):
    """The next line of Popen p's stdout (bytes), waiting at most timeout seconds: a sandbox that
    never says READY fails the test with what it wrote to stderr, instead of hanging the suite.
    p.stdout must be unbuffered or only ever read through this (select sees the pipe, not
    Python's buffer)."""
    import select
    fd = p.stdout.fileno()
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            where = process_tree(p.pid)
            p.kill()
            err = b""
            while p.stderr and select.select([p.stderr.fileno()], [], [], 5)[0]:
                chunk = os.read(p.stderr.fileno(), 65536)  # until EOF, or 5 s without a byte
                if not chunk:
                    break
                err += chunk
            raise AssertionError(f"no line from {p.args!r} within {timeout}s (so far {bytes(buf)!r}); "
                                 f"stderr: {err!r}; its processes then:\n{where}")
        chunk = os.read(fd, 1)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def wait_gone(marker, timeout=0.0):
    """Processes still carrying marker after up to timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def kill_marker(marker):
    for pid, _ in processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
