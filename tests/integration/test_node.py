"""JavaScript in the node rootfs (make rootfs-node): what Node programs do works under the shipped
policies (tests/probes/workload.js), io_uring stays denied and Node falls back, and the limits
bite: a memory bomb reports memory_limit, a busy loop the timeout."""
import json
import os
import re
import shutil
import subprocess

import pytest

import sbx
from sbx import MiB

WORKLOAD = ["fs_sync", "fs_async", "fs_watch", "child_process", "worker_threads", "http_loopback",
            "tcp_ipv6_loopback", "crypto", "webassembly", "timers_and_os"]


@pytest.fixture(autouse=True)
def _node_rootfs():
    sbx.require_node_rootfs()


def degraded(policy=None):
    return sbx.enforcement(policy) == "degraded"


def node_opts(policy=None):
    """Without a cgroup the memory limit is an address-space rlimit, and V8 reserves about 1.3 GiB
    of address space per isolate (the main thread, each worker) before running anything
    (sandboxd.policy(5)): node needs 3G there for a worker."""
    return ["--memory", "3G"] if degraded(policy) else []


def policy_path(name):
    """The shipped policy as the suite runs it (cgroup fallback-rlimit where this user has none)."""
    return sbx.shipped_policy(name)


@pytest.mark.parametrize("policy", ["default", "ci", "strict"])
def test_node_programs_work_under_the_shipped_policies(policy):
    if policy == "strict" and degraded(policy_path(policy)):
        pytest.skip("strict's max_memory (512M) is below what V8 reserves as address space on rlimits")
    r = sbx.node("workload", policy=policy_path(policy), opts=node_opts(policy_path(policy)))
    assert r.rc == 0, r.describe()
    got = r.json()
    # strict denies inotify (sandboxd.policy(5)): fs.watch fails with a plain ENOSYS error.
    want = {k: "ok" for k in WORKLOAD}
    if policy == "strict":
        assert got.pop("fs_watch").startswith("ERROR: ENOSYS"), got
        want.pop("fs_watch")
    assert got == want, r.describe()


def test_node_falls_back_from_io_uring():
    """libuv asks for an io_uring (and gets EPERM: group kernel-surface); the same programs work
    on epoll and its thread pool. strace shows the attempt, from outside the sandbox."""
    strace = shutil.which("strace")
    sbx.need(strace, "strace not installed (scripts/install-deps)")
    log = os.path.join(sbx.WORK, f"node-strace-{os.getpid()}.log")
    cmd = sbx.exec_cmd(("--", "node", "-e", open(os.path.join(sbx.PROBES, "workload.js")).read()),
                       rootfs=sbx.NODE_ROOTFS, opts=node_opts())
    # LeakSanitizer cannot run under ptrace (the ASan build in make check).
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([strace, "-f", "-qq", "-o", log, "-e", "trace=io_uring_setup"] + cmd,
                       capture_output=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    with open(log) as f:
        calls = f.read()
    os.unlink(log)
    if p.returncode != 0 and "ptrace" in p.stderr.decode(errors="replace"):
        pytest.skip("strace cannot trace here: " + p.stderr.decode(errors="replace").strip()[-200:])
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert re.search(r"io_uring_setup\(.*= -1 EPERM", calls), calls[-2000:]
    assert "= -1 EPERM" in calls and not re.search(r"io_uring_setup\(.*= [0-9]", calls), calls[-2000:]
    assert json.loads(p.stdout.decode().strip().splitlines()[-1]) == {k: "ok" for k in WORKLOAD}


def heap_limit_mib(memory):
    r = sbx.node(("-e", "console.log(require('v8').getHeapStatistics().heap_size_limit)"),
                 opts=["--memory", memory])
    assert r.rc == 0, r.describe()
    return int(r.stdout) / MiB


def test_v8_heap_follows_the_memory_limit():
    """V8 sizes its heap from the host's RAM; the policy's NODE_OPTIONS ties it to --memory (its
    heap_size_limit adds the young generation, the same at both sizes)."""
    small, big = (3072, 4096) if degraded() else (256, 1280)
    a, b = heap_limit_mib(f"{small}M"), heap_limit_mib(f"{big}M")
    assert b - a == 1024, (a, b)
    assert small <= a < small + 256, a


def test_node_options_of_the_caller_replace_the_policys():
    r = sbx.node(("-e", "console.log(process.env.NODE_OPTIONS)"),
                 opts=node_opts() + ["--env", "NODE_OPTIONS=--no-warnings"])
    assert r.rc == 0 and r.stdout.strip() == "--no-warnings", r.describe()


@pytest.mark.parametrize("mode", ["heap", "buffer"])
def test_node_memory_bomb_reports_memory_limit(mode):
    """JavaScript objects (V8's heap) or Buffers (outside it) past the limit: the sandbox's limit
    stops them, not V8's own heap limit (an abort, SIGABRT, would be a bare crash)."""
    if degraded() and mode == "heap":
        pytest.skip("no cgroup: the buffer bomb shows the rlimit (each costs GiBs of real memory there)")
    memory = "3G" if degraded() else "256M"
    r = sbx.node("limits", mode, 4096, opts=["--memory", memory, "--timeout", "60"], timeout=90)
    assert b"allocated_mib" not in r.out, r.describe()
    assert r.elapsed < 60, r.describe()
    if degraded():
        # rlimits: an allocation fails (RangeError for a Buffer, V8's fatal out-of-memory for its
        # heap); no counter says which limit it was.
        assert r.rc != 0 and r.report["limits"] == "degraded", r.describe()
        return
    assert r.report["status"] == "memory_limit" and r.rc == 137, (r.report, r.describe())
    assert "memory limit" in r.stderr and "JavaScript heap out of memory" not in r.stderr, r.describe()


def test_v8_own_heap_limit_is_a_bare_crash_without_the_policy_line():
    """What the policy line prevents: with V8's heap limit below the sandbox's (here set by hand),
    V8 aborts and the run reports a signal, not memory_limit."""
    if degraded():
        pytest.skip("no cgroup: memory_limit is never reported on rlimits")
    r = sbx.node("limits", "heap", 4096, opts=["--memory", "512M", "--env", "NODE_OPTIONS=--max-old-space-size=64"],
                 timeout=90)
    assert r.report["status"] == "killed" and r.report["signal"] == 6, r.describe()
    assert "JavaScript heap out of memory" in r.stderr, r.describe()


@pytest.mark.parametrize("mode", ["spin", "sleep"])
def test_node_timeout(mode):
    r = sbx.node("limits", mode, opts=node_opts() + ["--timeout", "1"], timeout=30)
    assert r.rc == 124 and r.report["status"] == "timeout", r.describe()
    assert r.elapsed < 10, r.describe()


def test_policy_env_names_only_the_memory_variable(tmp_path):
    """`${memory_mib}` is the one variable of an `env` value; anything else is an error, not
    passed on as text."""
    p = tmp_path / "bad.policy"
    text = open(policy_path("default")).read().replace(
        "env LANG=C.UTF-8", "env LANG=C.UTF-8\nenv X=${HOME}", 1)
    p.write_text(text.replace("include syscalls.inc", "include " + os.path.join(sbx.POLICY_SRC, sbx.syscalls_file())))
    r = sbx.sandboxd("policy", "check", str(p))
    assert r.rc != 0 and "`${HOME}` is not a variable" in r.stderr, r.describe()


def test_node_rootfs_verifies_like_the_python_one():
    if not sbx.IS_ROOT:
        pytest.skip("verify reads every file, and the tree has root-only ones (/etc/shadow): root run")
    store, name = os.path.split(sbx.NODE_ROOTFS)
    if not os.path.exists(sbx.NODE_ROOTFS + ".json"):
        pytest.skip(f"{sbx.NODE_ROOTFS} is a copy without its import metadata")
    r = sbx.sandboxd("rootfs", "verify", name, "--dir", store, timeout=120)
    assert r.rc == 0, r.describe()
    with open(sbx.NODE_ROOTFS + ".json") as f:
        meta = json.load(f)
    assert meta["Labels"]["org.sandboxd.node-version"].startswith("24."), meta["Labels"]
    assert not os.path.exists(os.path.join(sbx.NODE_ROOTFS, "usr/bin/python3"))


def test_mcp_refuses_the_node_rootfs_as_its_own():
    """The server's runner is Python: a tree without it is refused at start, in one line."""
    r = sbx.sandboxd("mcp", "--rootfs", sbx.NODE_ROOTFS, input=b"")
    sbx.assert_usage_error(r, "mcp --rootfs node-slim")
    assert "has no python3 in /usr/local/bin or /usr/bin" in r.stderr, r.describe()


def test_node_fetch_goes_through_the_egress_proxy():
    """With network proxy, Node's own fetch uses HTTP_PROXY (NODE_USE_ENV_PROXY, which sandboxd
    sets): an allowed host answers through the proxy; without the variable fetch connects directly
    and gets the sandbox's own loopback (refused)."""
    import egresshost
    web = egresshost.HttpServer()
    src = ("fetch('http://127.0.0.1:%d/').then(async (r) => console.log(r.status, (await r.text()).trim()))"
           ".catch((e) => console.log('error', e.cause ? e.cause.code : e.message))" % web.port)
    try:
        r = sbx.node(("-e", src), opts=["--allow-host", f"127.0.0.1:{web.port}", *node_opts()])
        assert r.rc == 0 and r.stdout.strip().startswith("200 hello from the host"), r.describe()
        r = sbx.node(("-e", src), opts=["--allow-host", f"127.0.0.1:{web.port}", "--env", "NODE_USE_ENV_PROXY=",
                                        *node_opts()])
        assert r.rc == 0 and r.stdout.strip() == "error ECONNREFUSED", r.describe()
    finally:
        web.close()
