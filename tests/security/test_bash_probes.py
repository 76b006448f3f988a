"""The essentials of the isolation, probed in bash (issue #16 item 4): identity, capabilities,
seccomp mode, no host files, loopback only, a read-only root, a fork bomb and a timeout; through
`sandboxd mcp`'s execute_code (a cold sandbox, and a warm one: --warm-lang bash) and through
`sandboxd exec`. tests/run runs them as root and as the unprivileged sbxtest.

Through exec, bash is started by Python's subprocess until `sandboxd exec -- PROGRAM` (item 1)
lands; the sandbox, policy and limits are the same either way."""
import os
import re
import threading
import time

import pytest

import sbx
from mcpsession import Mcp

pytestmark = pytest.mark.security

# Facts as key=value lines. {marker}: a host file that must not be visible.
PROBE = r"""
echo "uid=$(id -u)"
echo "gid=$(id -g)"
while IFS=$':\t' read -r k v; do
  case $k in CapInh|CapPrm|CapEff|CapBnd|CapAmb|Seccomp|NoNewPrivs) echo "$k=${v//[[:space:]]/}" ;; esac
done < /proc/self/status
echo "net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "loopback=$( (exec 3<>/dev/tcp/127.0.0.1/1) 2>&1 | sed 's/.*: //' )"
echo "outside=$( (exec 3<>/dev/tcp/192.0.2.1/80) 2>&1 | sed 's/.*: //' )"
for f in {marker} {repo}/README.md /etc/shadow-host-probe; do [ -e "$f" ] && echo "visible=$f"; done
echo "usr=$( (: > /usr/probe) 2>&1 | sed 's/.*: //' )"
echo "etc=$( (: > /etc/probe) 2>&1 | sed 's/.*: //' )"
: > /tmp/probe && : > /workspace/probe && echo writable=tmp,workspace
"""

# A fork bomb (the classic one) while the shell waits for a sleep started first: the pids limit
# holds the bomb and the deadline ends it all. Its processes carry BOMB_MARKER in their command
# line (exec -a), to find any the sandbox left on the host.
BOMB_MARKER = f"sbx-bomb-{os.getpid()}"
BOMB = f"exec -a {BOMB_MARKER} /usr/bin/bash -c 'sleep 30 & s=$!; :(){{ :|:& }};:; wait $s'"

# What every run must say (run as root or not: the sandbox's own ids are the same).
WANT = {
    "uid": "1000", "gid": "1000",
    "CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
    "CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
    "Seccomp": "2", "NoNewPrivs": "1",
    "net": "lo ",
    "loopback": "Connection refused",  # lo is up: nothing listens on port 1
    "outside": "Network is unreachable",  # no route off the sandbox's loopback
    "usr": "Read-only file system", "etc": "Read-only file system",
    "writable": "tmp,workspace",
}


def facts(text):
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out.setdefault(k, v)
            if k == "visible":
                out[k] = out[k] + "," + v if out[k] != v else v
    return out


@pytest.fixture(scope="module")
def servers():
    sbx.require_sandboxd()
    made = {}

    def get(kind):
        if kind not in made:
            made[kind] = Mcp("--warm-lang", "bash", warm="1") if kind == "warm" else Mcp()
        return made[kind]
    yield get
    for m in made.values():
        m.close()


def exec_bash(src, timeout_s=None):
    """(stdout, exit status, seconds) of bash -c SRC in a sandbox of `sandboxd exec`."""
    opts = ["--timeout", str(timeout_s)] if timeout_s else []
    start = time.monotonic()
    # bash itself as the sandbox's program (exec -- PROGRAM, found along the image's PATH).
    r = sbx.run(("--", "bash", "-c", src), opts=opts, timeout=60, want_report=False)
    return r.stdout, r.rc, time.monotonic() - start


def run_bash(servers, via, src, timeout_s=None):
    """(stdout, status, exit code, seconds) through exec or execute_code."""
    if via == "exec":
        out, rc, took = exec_bash(src, timeout_s)
        return out, {0: "ok", 124: "timeout"}.get(rc, "error"), rc, took
    r, took = servers(via).execute("bash", src, timeout_s)
    sc = r["structuredContent"]
    assert sc["success"] == (sc["status"] == "ok") and r["isError"] == (not sc["success"]), r
    return sc["stdout"], sc["status"], sc["exit_code"], took


@pytest.mark.parametrize("via", ["cold", "warm", "exec"])
def test_bash_sees_the_sandbox_and_nothing_else(servers, via, tmp_path):
    marker = tmp_path / "host-marker"
    marker.write_text("host")
    out, status, rc, _ = run_bash(servers, via, PROBE.replace("{marker}", str(marker)).replace("{repo}", sbx.REPO))
    assert status == "ok" and rc == 0, out
    got = facts(out)
    assert "visible" not in got, f"host files visible inside: {got['visible']}"
    assert {k: got.get(k) for k in WANT} == WANT


def policy_pids():
    with open(os.path.join(sbx.POLICY_SRC, "default.policy")) as f:
        return int(re.search(r"(?m)^pids\s+(\d+)", f.read()).group(1))


@pytest.mark.parametrize("via", ["cold", "exec"])
def test_a_bash_fork_bomb_is_held_and_ended(servers, via):
    # The bomb's processes as the host sees them, sampled while it runs: it ran, and the
    # policy's pids limit held it.
    most, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            most[0] = max(most[0], len(sbx.processes_with(BOMB_MARKER)))
            time.sleep(0.02)
    t = threading.Thread(target=sample)
    t.start()
    try:
        out, status, rc, took = run_bash(servers, via, BOMB, timeout_s=2)
    finally:
        stop.set()
        t.join()
    assert status == "timeout" and rc == 124, (status, rc, out)
    assert took < 15
    assert 10 < most[0] <= policy_pids(), f"{most[0]} bomb processes at most"
    # Every process of the bomb went with its sandbox, and the server still serves.
    assert not sbx.wait_gone(BOMB_MARKER, timeout=5)
    if via != "exec":
        out, status, _, _ = run_bash(servers, via, "echo alive")
        assert (status, out) == ("ok", "alive\n")


@pytest.mark.parametrize("via", ["cold", "warm", "exec"])
def test_a_bash_timeout_kills_at_the_deadline(servers, via):
    out, status, rc, took = run_bash(servers, via, "echo started; sleep 60; echo never", timeout_s=1)
    assert (status, rc) == ("timeout", 124) and out == "started\n", (status, rc, out)
    assert 0.9 < took < 10
