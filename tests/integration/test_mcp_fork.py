"""`sandboxd mcp --warm-mode fork` (issue #19): each run_python call is a fork of one idle template
sandbox that makes the call's namespaces, mounts, cgroup and filter itself. What a call sees must
be a cold sandbox's (fds, MAP_SHARED mappings, modules, credentials, limits); its namespaces are
its own, neither the template's nor another call's; random state, uuid4, secrets and tempfile
names differ between calls; nothing one call leaves is seen by the next; the template is replaced
after its 32 calls (the str hash secret, shared by the calls of one template, changes then) and
when it dies. Runs as root and as the unprivileged user (tests/run)."""
import json
import os
import re
import resource
import signal
import subprocess
import time

import pytest

import sbx
from mcpsession import Mcp

# The policy's fork_template_calls in these tests' policy (sbx.fork_calls_policy): a template
# serves this many sandboxes.
TEMPLATE_CALLS = 8

PROBE = r'''
import sys
modules = sorted(sys.modules)
main = sorted(globals())
import json, os, random, secrets, tempfile, uuid
status = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    if k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
        status[k] = v.split()
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        t = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        continue
    fds[fd] = [t.split(":")[0] if t.startswith(("pipe:", "socket:")) else t, os.get_inheritable(int(fd))]
shared = sorted({l.split()[5] if len(l.split()) > 5 else "[anon]" for l in open("/proc/self/maps") if l.split()[1][3] == "s"})
ns = {k: os.readlink("/proc/self/ns/" + k) for k in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")}
limits = [l.split("  ")[0] + " " + " ".join(l.split()[-3:]) for l in open("/proc/self/limits")][1:]
print(json.dumps(dict(modules=modules, main=main, status=status, fds=fds, shared=shared, ns=ns, pid=os.getpid(),
                      cwd=os.getcwd(), env=dict(os.environ), limits=limits, argv=sys.argv,
                      procs=sorted(p for p in os.listdir("/proc") if p.isdigit()),
                      random=random.random(), uuid=str(uuid.uuid4()), secrets=secrets.token_hex(16),
                      tmp=next(tempfile._get_candidate_names()), hash=hash("sandboxd"))))
'''


def run(m, code, timeout=None):
    args = {"code": code}
    if timeout is not None:
        args["timeout"] = timeout
    r = m.send("tools/call", {"name": "run_python", "arguments": args})
    return "".join(c["text"] for c in r["content"] if c["type"] == "text")


def probe(m):
    out = run(m, PROBE)
    assert out.startswith("{"), out
    return json.loads(out.split("\n--- ")[0])


def children(pid, depth=None):
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    s = f.read()
                kids.setdefault(int(s[s.rindex(")") + 2:].split()[1]), []).append(int(p))
            except OSError:
                pass
    if depth == 1:
        return kids.get(pid, [])
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out += kids.get(q, [])
        todo += kids.get(q, [])
    return out


def template_pid(m):
    """The template's Python: a child of the init of a sandbox of sandboxd's, with the template's
    argv (the calls' pid 1s, its forks, have that argv too, but the template as their parent)."""
    for init in children(m.p.pid, depth=1):
        for p in children(init, depth=1):
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if len(cmd) >= 3 and b"sandboxd fork template" in cmd[2]:
                return p
    return None


def alive(pid):
    """Running (a zombie has no cmdline)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return bool(f.read())
    except OSError:
        return False


# Each call's pid 1 (src/inside/zygote.c) sharing the template's memory, and as a copy of the
# template, as where it cannot share it (SANDBOXD_FORK_ZYGOTE=0, fork_zygote.c): the same steps
# (src/sandbox/contain.c) and the same sandbox either way.
@pytest.fixture(params=["shared", "copy"])
def fork(request, monkeypatch):
    sbx.require_sandboxd()
    if request.param == "copy":
        monkeypatch.setenv("SANDBOXD_FORK_ZYGOTE", "0")
    m = Mcp("--warm-mode", "fork")
    yield m
    err = m.close()
    # The server says why a call's pid 1 is a copy, once (where the test has not read its stderr
    # already), and only then.
    assert err.count("is a copy of the template") <= (request.param == "copy"), err


@pytest.fixture(scope="module")
def cold_facts():
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "prestart")
    facts = probe(m)
    m.close()
    return facts


def test_a_call_sees_what_a_cold_sandbox_sees(fork, cold_facts):
    f = probe(fork)
    for k in ("fds", "modules", "main", "status", "cwd", "env", "limits", "argv", "procs"):
        assert f[k] == cold_facts[k], k


BUDGETS = "import os\nprint(sorted((f, int(open('/proc/sys/user/' + f).read())) for f in os.listdir('/proc/sys/user')))"


def test_a_calls_budgets_are_a_cold_sandboxs(fork):
    """A call's pid 1 writes the policy's budgets into the call's user namespace (through the
    call's own /proc, before its masks), as a cold sandbox's does (test_budgets): a new user
    namespace starts at 2147483647 for each."""
    cold = Mcp("--warm-mode", "prestart")
    want = run(cold, BUDGETS)
    cold.close()
    got = run(fork, BUDGETS)
    assert got == want, (got, want)
    assert "2147483647" not in got and "max_user_namespaces" in got, got


def test_no_shared_mapping_a_cold_sandbox_lacks(fork, cold_facts):
    assert set(probe(fork)["shared"]) <= set(cold_facts["shared"])


NS = r'''
import json, os, time
print(json.dumps({k: os.readlink("/proc/self/ns/" + k) for k in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")}))
time.sleep(1)
'''


def test_namespaces_differ_from_the_templates_and_between_calls(fork):
    """Two calls at once (a namespace's inode number is reused once it is gone), and the template."""
    for i in (1, 2):
        fork.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": "ns%d" % i, "method": "tools/call",
                                       "params": {"name": "run_python", "arguments": {"code": NS}}}) + "\n")
    fork.p.stdin.flush()
    got = {}
    while len(got) < 2:
        m = json.loads(fork.p.stdout.readline())
        if str(m.get("id", "")).startswith("ns"):
            got[m["id"]] = json.loads(m["result"]["content"][0]["text"].split("\n")[0])
    a, b = got["ns1"], got["ns2"]
    t = template_pid(fork)
    assert t, "no template process found"
    tmpl = {k: os.readlink("/proc/%d/ns/%s" % (t, k)) for k in a}
    for k in a:
        assert a[k] != tmpl[k], k
        assert b[k] != tmpl[k], k
        assert a[k] != b[k], k


def test_random_uuid_secrets_and_tempfile_names_differ_between_calls(fork):
    a, b = probe(fork), probe(fork)
    for k in ("random", "uuid", "secrets", "tmp"):
        assert a[k] != b[k], k


LEAVE = r'''
import os, sys, json
open("/tmp/left", "w").write("a")
open("/workspace/left", "w").write("a")
open("/dev/shm/left", "w").write("a")
os.environ["LEFT"] = "a"
json.left = "a"
sys.modules["left_module"] = json
sys.path.append("/left")
for p in ("/run/left", "/left"):
    try:
        open(p, "w").write("a")
    except OSError:  # / is read-only; /run is the call's own
        pass
print("ok")
'''

SEE = r'''
import os, sys, json
print(sorted(p for p in ("/tmp/left", "/workspace/left", "/dev/shm/left", "/run/left", "/left") if os.path.exists(p)),
      "LEFT" in os.environ, hasattr(json, "left"), "left_module" in sys.modules, "/left" in sys.path)
'''


def test_nothing_one_call_leaves_is_seen_by_the_next(fork):
    assert run(fork, LEAVE) == "ok\n"
    assert run(fork, SEE) == "[] False False False False\n"


@pytest.mark.parametrize("warm", ["0", "1"])
def test_the_template_is_replaced_after_its_calls(warm, cold_facts):
    """Calls of one template share its str hash secret: with the policy's fork_template_calls 8, the
    9th call has a new one. A ready forked sandbox (--warm 1) counts toward its template's calls
    from its fork. The successor's calls see what a cold sandbox sees, as the first template's do."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", "--policy", sbx.fork_calls_policy(TEMPLATE_CALLS), warm=warm)
    facts = [probe(m) for _ in range(TEMPLATE_CALLS + 1)]
    m.close()
    hashes = [f["hash"] for f in facts]
    if warm == "0":  # (a ready fork's RLIMIT_CPU, without a cgroup, is the longest timeout)
        for k in ("fds", "modules", "main", "status", "cwd", "env", "limits", "argv", "procs"):
            assert facts[-1][k] == cold_facts[k], k
        assert len(set(hashes[:TEMPLATE_CALLS])) == 1
        assert hashes[TEMPLATE_CALLS] != hashes[0]
    else:
        # Ready forks (and the start's probe) count from their fork, which the loop's refill
        # timing places: where the change falls varies, the bound does not.
        assert max(hashes.count(h) for h in set(hashes)) <= TEMPLATE_CALLS, hashes
        assert len(set(hashes)) >= 2


def test_the_template_restarts_when_killed(fork):
    assert run(fork, "print(1)") == "1\n"
    t = template_pid(fork)
    assert t
    os.kill(t, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(t) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Replaced at once, not by the next call.
    assert wait_for(lambda: template_pid(fork) not in (None, t)), children(fork.p.pid)
    assert run(fork, "print(2)") == "2\n"


def test_a_timeout_kills_the_call_and_leaves_nothing(fork):
    out = run(fork, "import subprocess, time\nsubprocess.Popen(['sleep', '60'])\ntime.sleep(60)", timeout=1)
    assert "timeout" in out, out
    assert run(fork, "print(3)") == "3\n"
    t = template_pid(fork)
    # Only the template sandbox is left: its init and its Python.
    deadline = time.monotonic() + 5
    while len(children(fork.p.pid)) > 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert t in children(fork.p.pid)
    assert len(children(fork.p.pid)) == 2, children(fork.p.pid)


def test_files_out_come_back(fork):
    r = fork.send("tools/call", {"name": "run_python", "arguments": {
        "code": "open('/workspace/out/a.txt', 'w').write('from the fork')"}})
    files = r.get("structuredContent", {}).get("files", [])
    assert [f["path"] for f in files] == ["a.txt"], r


def test_nothing_outlives_the_server():
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork")
    assert run(m, "print(1)") == "1\n"
    t = template_pid(m)
    assert t
    m.close()
    assert not alive(t)


@pytest.mark.parametrize("value", ["", "forks", "cold"])
def test_a_bad_warm_mode_is_a_usage_error(value):
    sbx.require_sandboxd()
    r = subprocess.run([sbx.SANDBOXD, "mcp", "--warm-mode", value], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True)
    assert r.returncode == 125
    assert "--warm-mode" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def start_call(m, rid, code):
    """Send a run_python call and do not wait for its answer."""
    m.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": code}}}) + "\n")
    m.p.stdin.flush()


def start_sleeper(m, rid, seconds=60):
    start_call(m, rid, "import time\nprint('up', flush=True)\ntime.sleep(%d)" % seconds)


def code_pids(m):
    """The host pids of the calls' code processes: pid 2 of a pid namespace below the template's
    (NSpid, read from /proc/PID/status, lists the pid in each namespace from ours down)."""
    out = []
    for p in children(m.p.pid):
        try:
            with open("/proc/%d/status" % p) as f:
                ns = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
        except OSError:
            continue
        if len(ns) >= 3 and ns[-1] == "2":
            out.append(p)
    return out


def code_running(m):
    """The call's code process exists. A count of processes is not that state: the call's pid 1
    and the template make the count the code would make before the code is forked."""
    return bool(code_pids(m))


# The waits for a call's processes allow 20 s: under a loaded full run (make check) a forked call
# has been seen to take over 5 s to appear (the server's start, or a template being replaced,
# blocks its loop up to CHILD_STEP_MS); they wait for a state, they time nothing.
def wait_for(pred, seconds=5):
    deadline = time.monotonic() + seconds
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)
    return pred()


def test_a_cancelled_call_is_killed_and_never_answered(fork):
    assert not code_running(fork)  # (no call yet, and --warm 0)
    start_sleeper(fork, "c1")
    t = template_pid(fork)
    # The template sandbox is two processes; the call adds its pid 1 and its code.
    assert wait_for(lambda: code_running(fork), seconds=20), children(fork.p.pid)
    fork.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                   "params": {"requestId": "c1", "reason": "test"}}) + "\n")
    fork.p.stdin.flush()
    assert wait_for(lambda: len(children(fork.p.pid)) == 2), children(fork.p.pid)
    assert t in children(fork.p.pid)
    # The next answer is the next call's: the cancelled one got none.
    assert run(fork, "print(4)") == "4\n"


def test_a_call_waiting_for_its_fork_does_not_hold_the_server(fork):
    """The loop serves everything else while a call's sandbox is set up: with the template stopped,
    a ping sent after the call is answered first, and the call completes once it goes on."""
    assert run(fork, "print(0)") == "0\n"
    t = template_pid(fork)
    os.kill(t, signal.SIGSTOP)
    try:
        for msg in ({"jsonrpc": "2.0", "id": "w1", "method": "tools/call",
                     "params": {"name": "run_python", "arguments": {"code": "print(7)"}}},
                    {"jsonrpc": "2.0", "id": "p1", "method": "ping"}):
            fork.p.stdin.write(json.dumps(msg) + "\n")
        fork.p.stdin.flush()
        first = answer(fork)
    finally:
        os.kill(t, signal.SIGCONT)
    assert first.get("id") == "p1", first
    m = answer(fork)
    assert m.get("id") == "w1" and m["result"]["content"][0]["text"] == "7\n", m


def test_a_call_whose_fork_does_not_answer_is_forked_once_more(fork):
    """Its fork's setup step past 5 s (the template stopped): dropped with a warning, and the call's
    sandbox forked once more, which serves it once the template goes on."""
    import select
    assert run(fork, "print(0)") == "0\n"
    t = template_pid(fork)
    os.kill(t, signal.SIGSTOP)
    try:
        fork.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": "r1", "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": "print(8)"}}}) + "\n")
        fork.p.stdin.flush()
        err, deadline = b"", time.monotonic() + 30
        while b"forking the call's sandbox again" not in err and time.monotonic() < deadline:
            if select.select([fork.p.stderr], [], [], 0.5)[0]:
                err += os.read(fork.p.stderr.fileno(), 4096)
    finally:
        os.kill(t, signal.SIGCONT)
    assert b"forking the call's sandbox again" in err, err
    m = answer(fork)
    assert m.get("id") == "r1" and m["result"]["content"][0]["text"] == "8\n", m


def answer(m):
    """The next message with an id (notifications skipped)."""
    while True:
        msg = json.loads(m.p.stdout.readline())
        if "id" in msg:
            return msg


def test_eof_kills_a_running_call_and_the_template():
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork")
    start_sleeper(m, "e1")
    assert wait_for(lambda: code_running(m), seconds=20), children(m.p.pid)
    procs = children(m.p.pid)
    m.p.stdin.close()
    assert m.p.wait(timeout=10) == 0
    assert not [p for p in procs if alive(p)]


def test_what_the_fork_path_cannot_do_fails_at_start(tmp_path):
    """A policy whose filter refuses capset (a cold sandbox drops its capabilities before its filter
    goes on; a forked call's setup runs under the template's): one line, exit 125, before any call."""
    import shutil
    sbx.require_sandboxd()
    for name in os.listdir(sbx.POLICY_SRC):
        if name.endswith((".policy", ".inc")):
            shutil.copy(os.path.join(sbx.POLICY_SRC, name), tmp_path / name)
    inc = (tmp_path / "syscalls.inc").read_text()
    assert " capset " in inc
    (tmp_path / "syscalls.inc").write_text(inc.replace(" capset ", " "))
    r = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--policy", str(tmp_path / "default.policy"),
                        "--warm-mode", "fork", "--audit-log", "off"], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 125, r
    # (Without a cgroup, the degraded warning comes first, as for any sandbox.)
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("sandboxd: warning: no cgroup")]
    assert len(lines) == 1 and "--warm-mode fork" in lines[0] and "capset" in lines[0], r.stderr
    # The same policy serves cold and prestart calls; auto (the default) says why it does not fork.
    m = Mcp("--policy", str(tmp_path / "default.policy"))
    assert run(m, "print(5)") == "5\n"
    err = m.close()
    assert "--warm-mode auto prestarts instead" in err, err


def test_sigterm_kills_a_running_call_and_the_template():
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork")
    start_sleeper(m, "t1")
    assert wait_for(lambda: code_running(m), seconds=20), children(m.p.pid)
    procs = children(m.p.pid)
    m.p.send_signal(signal.SIGTERM)
    m.p.wait(timeout=10)
    assert not [p for p in procs if alive(p)]


def test_numpy_global_random_state_differs_between_calls():
    """numpy seeds its legacy global state at first use: in each call, since the template never
    imports numpy (a template that had used np.random would hand every call the same stream)."""
    sbx.require_data_rootfs()
    m = Mcp("--warm-mode", "fork", "--rootfs", sbx.DATA_ROOTFS)
    a, b = (run(m, "import numpy\nprint(numpy.random.rand())", timeout=60) for _ in range(2))
    m.close()
    assert a != b and "status" not in a, (a, b)


# auto, the default, forks (as root too: each call has a host id of its own).
AUTO = "fork"


@pytest.mark.parametrize("args, mode", [((), AUTO), (("--warm-mode", "auto"), AUTO),
                                        (("--warm-mode", "prestart"), "prestart"), (("--warm-mode", "fork"), "fork")])
def test_the_capabilities_resource_says_the_warm_mode(args, mode):
    sbx.require_sandboxd()
    m = Mcp(*args)
    r = m.send("resources/read", {"uri": "sandboxd://capabilities"})
    m.close()
    assert json.loads(r["contents"][0]["text"])["concurrency"]["warm_mode"] == mode


def test_execute_code_python_is_forked_too(fork):
    r = fork.send("tools/call", {"name": "execute_code", "arguments": {"language": "python", "code": PROBE}})
    text = "".join(c["text"] for c in r["content"] if c["type"] == "text")
    facts = json.loads(text.split("\n--- ")[0])
    t = template_pid(fork)
    assert facts["ns"]["user"] != os.readlink("/proc/%d/ns/user" % t)
    # Forked: the calls of one template share its hash secret (a cold sandbox has its own).
    assert facts["hash"] == probe(fork)["hash"]


def test_binds_under_the_fresh_tmpfs_are_bound_again(tmp_path):
    """A call's /workspace, /tmp and /run are its own tmpfs; the binds the template had there (a
    --bind-rw with a space in its name, sandboxd's helpers at /run/sandboxd/python) are bound again."""
    sbx.require_sandboxd()
    host = tmp_path / "a dir"
    host.mkdir()
    host.chmod(0o777)
    tmp_path.chmod(0o755)
    m = Mcp("--warm-mode", "fork", "--bind-rw", "%s:/workspace/a b" % host)
    out = run(m, "import os\nopen('/workspace/a b/w.txt', 'w').write('from the call')\n"
                 "print(os.path.isdir('/run/sandboxd/python/mcp'))")
    m.close()
    assert out == "True\n", out
    assert (host / "w.txt").read_text() == "from the call"


# --warm N in fork mode: N sandboxes forked from the template ahead of the calls, set up all the way
# to reading their job. What shows a call was served by one: its pid namespace existed before the
# call was sent (seen from here in /proc/PID/ns/pid of the ready sandbox's code process, which is
# dumpable as an exec'd runner is).
PIDNS = "import os\nprint(os.readlink('/proc/self/ns/pid'))\n"


def pidns(pid):
    try:
        return os.readlink("/proc/%d/ns/pid" % pid)
    except OSError:
        return None


def ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        return int(s[s.rindex(")") + 2:].split()[1])
    except OSError:
        return None


def ready_procs(m):
    """{code process: its pid namespace} of the sandboxes forked from the template whose code
    process and pid 1 are alive: the ready ones, and a call's that has just ended."""
    t = template_pid(m)
    if not t:
        return {}
    procs = {p: pidns(p) for p in children(t) if alive(p) and ppid(ppid(p)) == t and alive(ppid(p))}
    return {p: ns for p, ns in procs.items() if ns}


def ready_pidns(m):
    return set(ready_procs(m).values())


def wait_ready(m, n, seconds=5):
    deadline = time.monotonic() + seconds
    while True:
        got = ready_procs(m)
        if len(got) == n or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def served_by_ready(m, code, n=1, timeout=None):
    """Run code once n sandboxes are ready (and the one of the call before, if it was one, is
    gone); its first line is its pid namespace: that it was one of those ready before the call was
    sent, and the rest of its output."""
    last = getattr(m, "last_served", None)
    assert last is None or wait_for(lambda: not alive(last)), last
    before = wait_ready(m, n)
    assert len(before) == n, children(m.p.pid)
    out = run(m, PIDNS + code, timeout)
    ns, _, rest = out.partition("\n")
    served = [p for p, pns in before.items() if pns == ns]
    assert served, (ns, before)
    m.last_served = served[0]
    return rest


def test_a_paced_call_is_served_by_a_sandbox_forked_before_it():
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", warm="1")
    try:
        assert served_by_ready(m, "print(1)") == "1\n"
        # Refilled once the call ended.
        assert served_by_ready(m, "print(2)") == "2\n"
    finally:
        m.close()


def test_nothing_passes_between_calls_served_by_ready_forked_sandboxes():
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", warm="1")
    try:
        assert served_by_ready(m, LEAVE) == "ok\n"
        assert served_by_ready(m, SEE) == "[] False False False False\n"
        a = json.loads(served_by_ready(m, PROBE).split("\n--- ")[0])
        b = json.loads(served_by_ready(m, PROBE).split("\n--- ")[0])
        for k in ("random", "uuid", "secrets", "tmp"):
            assert a[k] != b[k], k
    finally:
        m.close()


def test_a_killed_template_drops_its_ready_sandboxes():
    """They die with it and are dropped as such (not as warm sandboxes that failed, which would
    delay the refill); the pool is refilled from its successor, and the next call is served by one
    of those."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", warm="2")
    try:
        old = list(wait_ready(m, 2))
        assert len(old) == 2, children(m.p.pid)
        t = template_pid(m)
        assert old and t
        os.kill(t, signal.SIGKILL)
        assert wait_for(lambda: not [p for p in old + [t] if alive(p)]), children(m.p.pid)
        assert wait_for(lambda: template_pid(m) not in (None, t)), children(m.p.pid)
        new = template_pid(m)
        # Both refilled, both forked by the new template.
        assert len(wait_ready(m, 2)) == 2, children(m.p.pid)  # (children of the new template)
        assert served_by_ready(m, "print(6)", n=2) == "6\n"
    finally:
        err = m.close()
    assert not alive(new)
    assert "warm sandbox" not in err, err



def test_a_ready_forked_sandbox_gets_the_calls_timeout_at_delivery():
    """It waited with no deadline (longer than the call's timeout here); the call's starts when it
    takes it, and kills it."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", warm="1")
    try:
        assert len(wait_ready(m, 1)) == 1
        time.sleep(1.2)
        t0 = time.monotonic()
        out = served_by_ready(m, "import sys, time\nprint('up', flush=True)\ntime.sleep(30)", timeout=1)
        assert "timeout" in out and "up" in out, out
        assert time.monotonic() - t0 < 10
        assert served_by_ready(m, "print(7)") == "7\n"
    finally:
        m.close()


def test_a_fork_made_ahead_never_blocks_the_server_and_one_that_hangs_is_dropped():
    """The pool's fork is asked of the template and its answers collected by the server's loop: a
    template that does not answer (stopped here) delays nothing else, and after the step's limit
    (5 s, CHILD_STEP_MS) the fork is dropped and another made once the template answers again."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", warm="1")
    try:
        assert served_by_ready(m, "print(8)") == "8\n"
        assert len(wait_ready(m, 1)) == 1
        t = template_pid(m)
        os.kill(t, signal.SIGSTOP)
        try:
            # The refill after this call is asked of the stopped template.
            assert served_by_ready(m, "print(9)") == "9\n"
            t0 = time.monotonic()
            m.send("tools/list", {})
            assert time.monotonic() - t0 < 2.5  # not held for the fork's 5 s
            time.sleep(5.5)
        finally:
            os.kill(t, signal.SIGCONT)
        assert served_by_ready(m, "print(10)") == "10\n"
    finally:
        err = m.close()
    assert "did not answer in time" in err, err


def host_ids(pid):
    with open("/proc/%d/status" % pid) as f:
        st = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    return {int(x) for x in st["Uid"].split()}, {int(x) for x in st["Gid"].split()}


def test_as_root_each_forked_call_has_a_host_id_of_its_own():
    """As a cold sandbox does (test_budgets): the template maps the policy's host_id_range, and the
    server maps each call's ids to one of its own, held while the call runs and freed after."""
    sbx.root_only("unprivileged, every sandbox is the invoking user")
    start, count = sbx.host_id_range()
    m = Mcp("--warm-mode", "fork", "--warm", "0")
    start_sleeper(m, "h1")
    start_sleeper(m, "h2")
    assert wait_for(lambda: len(code_pids(m)) == 2, seconds=20), children(m.p.pid)
    tmpl = host_ids(template_pid(m))[0]
    seen = []
    for pid in code_pids(m):
        uids, gids = host_ids(pid)
        assert len(uids) == 1 and uids == gids, (uids, gids)
        uid = uids.pop()
        assert start <= uid < start + count, "host uid %d outside host_id_range %d %d" % (uid, start, count)
        assert {uid} != tmpl, "a call runs as its template's host uid %s" % tmpl
        seen.append(uid)
    assert seen[0] != seen[1], "two concurrent calls share host uid %d" % seen[0]
    m.close()


INOTIFY_HOG = """import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 1000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print('held', len(fds), ctypes.get_errno(), flush=True)
time.sleep(60)
"""


def test_a_call_at_its_inotify_budget_leaves_another_call_its_own():
    """What a call's user namespace is charged is charged to the template's owner in the
    template's too: that level has room for every call in flight at its budget (template_policy).
    Without it the second call's first inotify_init1 failed with EMFILE."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", "--warm", "0")
    start_call(m, "hog", INOTIFY_HOG)
    assert wait_for(lambda: code_running(m), seconds=20), children(m.p.pid)
    # The hog is at its budget once it has printed; its output is not read until it ends, so wait
    # on what it holds instead: the policy's inotify_instances (16 in the shipped policies).
    def inotify_held():
        for pid in code_pids(m):
            try:
                return sum(os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:inotify"
                           for fd in os.listdir("/proc/%d/fd" % pid))
            except OSError:
                return 0
        return 0
    assert wait_for(lambda: inotify_held() >= 16, seconds=20), inotify_held()
    out = run(m, "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "print(libc.inotify_init1(0) >= 0, ctypes.get_errno())")
    m.close()
    assert out.startswith("True"), out


def held(m):
    """What a hog call wrote to its /tmp/held once at its budget ("" before)."""
    for pid in code_pids(m):
        try:
            with open("/proc/%d/root/tmp/held" % pid) as f:
                return f.read()
        except OSError:
            return ""
    return ""


# Each holds its policy budget (msgqueue 128K: one default queue is ~81K; sigpending 1024 queued
# real-time signals), then waits; the probe asks for one of the same in another call.
BUDGET_HOGS = {
    "msgqueue": ("""import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 100 and libc.mq_open(("/hog%d" % n).encode(), os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
    n += 1
open('/tmp/held', 'w').write('%d %d' % (n, ctypes.get_errno()))
time.sleep(60)
""", "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
         "print(libc.mq_open(b'/mine', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0, ctypes.get_errno())"),
    "sigpending": ("""import os, signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
for i in range(5000):
    os.kill(os.getpid(), signal.SIGRTMIN)
open('/tmp/held', 'w').write([l for l in open('/proc/self/status') if l.startswith('SigQ')][0])
time.sleep(60)
""", "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\ntimer = ctypes.c_void_p()\n"
         "print(libc.timer_create(1, None, ctypes.byref(timer)) == 0, ctypes.get_errno())"),
}


@pytest.mark.parametrize("budget", sorted(BUDGET_HOGS))
def test_a_call_at_its_msgqueue_or_sigpending_budget_leaves_another_call_its_own(budget):
    """A call's user namespace takes its template's rlimits as the ceiling on all its calls
    together (kernel/ucount.c): the template's are room for the calls in flight (room_for_calls).
    Without it the template's were one call's budget, and the probe failed with EMFILE (message
    queues) or EAGAIN (timer_create, which holds a queued signal)."""
    sbx.require_sandboxd()
    hog, probe = BUDGET_HOGS[budget]
    m = Mcp("--warm-mode", "fork", "--warm", "0")
    start_call(m, "hog", hog)
    assert wait_for(lambda: code_running(m), seconds=20), children(m.p.pid)

    assert wait_for(lambda: held(m), seconds=20), "the hog did not reach its budget"
    # At its budget: one queue (a second would pass 128K), or the 1024 signals the policy allows.
    h = held(m)
    assert h == "1 24" if budget == "msgqueue" else h.split()[1] == "1024/1024", h
    out = run(m, probe)
    m.close()
    assert out.startswith("True"), out


PIDS_HOG = """import os, time
n, err = 0, 0
for i in range(2000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
open('/tmp/held', 'w').write('%d %d' % (n, err))
time.sleep(60)
"""


def test_a_call_at_its_pids_budget_leaves_another_call_room_to_start():
    """Without a cgroup (cgroup fallback-rlimit) a call's pids are its RLIMIT_NPROC, and its user
    namespace takes the template's as the ceiling on all calls' processes together: the template's
    has room for every call in flight. Without it the next call's sandbox could not be forked
    (clone: EAGAIN). With a cgroup, the call's pids.max holds the hog."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", "fork", "--warm", "0")
    start_call(m, "hog", PIDS_HOG)
    assert wait_for(lambda: code_running(m), seconds=20), children(m.p.pid)

    assert wait_for(lambda: held(m), seconds=30), "the hog did not reach its budget"
    assert held(m).split()[1] == "11", held(m)  # EAGAIN: at its pids
    out = run(m, "import os\npid = os.fork()\nif pid == 0:\n    os._exit(7)\nprint(os.waitpid(pid, 0)[1] >> 8)")
    m.close()
    assert out.strip() == "7", out

def test_a_forked_call_has_a_tcp_hash_table_of_its_own():
    """ns.c's set_child_tcp_ehash: the template's network namespace gives the ones made from it
    (each call's) a TCP hash table of their own, so a call's end walks its own for TIME_WAIT
    sockets, not the host's whole table."""
    sbx.require_sandboxd()
    sbx.need(os.path.exists("/proc/sys/net/ipv4/tcp_child_ehash_entries"), "Linux before 5.19", security=False)
    m = Mcp("--warm-mode", "fork", "--warm", "0")
    out = run(m, "print(open('/proc/sys/net/ipv4/tcp_ehash_entries').read().strip())")
    m.close()
    assert out.strip() == "1024", out

def test_without_a_cgroup_forked_calls_past_the_hard_nproc_limit_are_said():
    """room_for_calls for RLIMIT_NPROC, which bounds a call's processes only without a cgroup: with
    a hard limit that holds fewer calls at their pids than --max-concurrent, the server says so
    once, and still serves (the template's is the hard limit)."""
    sbx.require_sandboxd()
    sbx.need(sbx.enforcement() == "degraded", "with a cgroup, pids.max bounds a call's processes", security=False)
    per_call = int(re.search(r"(?m)^pids\s+(\d+)", sbx.policy_text("default.policy")).group(1))
    hard = per_call * 3
    m = Mcp("--warm-mode", "fork", "--max-concurrent", "4",
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard)))
    assert run(m, "print(1)").strip() == "1"
    err = m.close()
    said = "--max-concurrent 4: the hard RLIMIT_NPROC (%d) holds 3 forked calls at %d each" % (hard, per_call)
    assert err.count(said) == 1, err

def test_forked_calls_past_the_hard_msgqueue_limit_are_said_or_given_room():
    """room_for_calls: with one call more in flight than sandboxd's hard RLIMIT_MSGQUEUE holds at
    the policy's budget, root raises its own limit for the template (max_concurrent + 4 calls);
    without CAP_SYS_RESOURCE it cannot, and the server says how many calls it holds, once."""
    sbx.require_sandboxd()
    per_call = int(re.search(r"(?m)^msgqueue\s+(\d+)K", sbx.policy_text("default.policy")).group(1)) << 10
    hard = resource.getrlimit(resource.RLIMIT_MSGQUEUE)[1]
    sbx.need(hard != resource.RLIM_INFINITY, "no hard RLIMIT_MSGQUEUE here")
    n = hard // per_call + 1
    m = Mcp("--warm-mode", "fork", "--max-concurrent", str(n))
    assert run(m, "print(1)").strip() == "1"
    with open("/proc/%d/limits" % m.p.pid) as f:
        limit = int(re.search(r"Max msgqueue size\s+(\d+)\s+(\d+)", f.read()).group(2))
    err = m.close()
    said = "--max-concurrent %d: the hard RLIMIT_MSGQUEUE (%d) holds %d forked calls at %d each" % (
        n, hard, n - 1, per_call)
    with open("/proc/self/status") as f:
        cap_eff = int(re.search(r"CapEff:\s+([0-9a-f]+)", f.read()).group(1), 16)
    if sbx.IS_ROOT and cap_eff & (1 << 24):  # CAP_SYS_RESOURCE (a container's root may lack it)
        assert limit == per_call * (n + 4) and said not in err, (limit, err)
    else:
        assert limit == hard and err.count(said) == 1, (limit, err)
