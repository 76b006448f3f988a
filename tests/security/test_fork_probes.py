"""The escape probes through `sandboxd mcp --warm-mode fork` (issue #19): a call forked from the
template must be held exactly as a cold sandbox is. The probes (tests/probes) that the escape suite
judges for cold sandboxes run in a forked call and in a cold call of the same server options, and
the answers must match: every syscall's seccomp verdict, every isolation fact, the daemon a call
leaves behind killed at its end. Where a forked call differs by construction (its mounts stacked
on the template's, its id maps, two more seccomp filters, pid 1's command line), the test says
what it checks instead. Runs as root and as the unprivileged user (tests/run)."""
import json
import os
import re
import secrets
import time

import pytest

import sbx
from mcpsession import Mcp

pytestmark = pytest.mark.security

PROBES = os.path.join(sbx.TESTS, "probes")


def run_probe(m, name, *args):
    with open(os.path.join(PROBES, name + ".py")) as f:
        src = f.read()
    code = "import sys\nsys.argv[:] = %r\n" % (["%s.py" % name] + list(args)) + src
    r = m.send("tools/call", {"name": "run_python", "arguments": {"code": code, "timeout": 20}})
    text = "".join(c["text"] for c in r["content"] if c["type"] == "text")
    return text


def probe_json(m, name, *args):
    text = run_probe(m, name, *args)
    out = text.split("\n--- ")[0].strip()
    assert out, text
    return json.loads(out.splitlines()[-1])


# --warm 0: each call forked on its path; --warm 1: by a sandbox forked and set up ahead of it (a
# ready fork; the server refills it before it reads the next request).
@pytest.fixture(scope="module", params=["0", "1"], ids=["on-path", "ready"])
def servers(request):
    sbx.require_sandboxd()
    fork, cold = Mcp("--warm-mode", "fork", warm=request.param), Mcp("--warm-mode", "prestart")
    fork.ready = request.param != "0"
    yield fork, cold
    fork.close()
    cold.close()


def visible_mounts(mounts):
    """The mount each path shows (the last at each target), host ids normalised."""
    top = {}
    for m in mounts:
        top[m["target"]] = m
    return {t: [m["fstype"], sorted(m["opts"]), sorted(re.sub(r"\b(uid|gid)=\d+", r"\1=ID", o) for o in m["super"])]
            for t, m in top.items()}


def test_every_syscall_gets_the_cold_verdict(servers):
    fork, cold = servers
    f, c = probe_json(fork, "syscalls"), probe_json(cold, "syscalls")
    assert set(f) == set(c)
    # The socket calls succeed in both and return the lowest free fd, which is not the point.
    diff = {k: (f[k], c[k]) for k in f if f[k] != c[k] and not (k.startswith("socket_") and f[k]["errno"] is None
                                                                 and c[k]["errno"] is None)}
    assert not diff


def test_every_isolation_fact_is_the_cold_one(servers):
    fork, cold = servers
    args = (sbx.REPO, sbx.SANDBOXD, sbx.WORK, "/work", "/home/sbxtest")
    f, c = probe_json(fork, "facts", *args), probe_json(cold, "facts", *args)
    by_construction = {"mounts", "uid_map", "gid_map", "setgroups", "status", "processes", "fds"}
    if fork.ready and f.get("rlimits") != c.get("rlimits"):
        # Without a cgroup, a ready fork's CPU backstop is the longest timeout a call may ask for,
        # as a prestarted sandbox's (sandboxd-mcp(7)); the call's own deadline applies at delivery.
        caps = fork.send("resources/read", {"uri": "sandboxd://capabilities"})
        top = (json.loads(caps["contents"][0]["text"])["max_limits"]["timeout_ms"] + 999) // 1000 + 1
        fr, cr = dict(f["rlimits"]), dict(c["rlimits"])
        assert fr.pop("CPU") == [top, top] and cr.pop("CPU") != [top, top]
        assert fr == cr
        by_construction.add("rlimits")
    for k in set(f) | set(c):
        if k not in by_construction:
            assert f.get(k) == c.get(k), k
    # What each path shows is the cold sandbox's, with the same flags.
    assert visible_mounts(f["mounts"]) == visible_mounts(c["mounts"])
    # One uid and one gid: as root each mapped to a host id of the sandbox's own, as the cold
    # sandbox's (the template maps host_id_range); else to itself, the template's, and
    # supplementary groups can never be changed.
    uid, gid = f["uid_map"][0][0], f["gid_map"][0][0]
    assert (uid, gid) == (c["uid_map"][0][0], c["gid_map"][0][0])
    if os.geteuid() == 0:
        start, count = sbx.host_id_range()
        for m in (f, c):
            host = m["uid_map"][0][1]
            assert m["uid_map"] == [[uid, host, "1"]] and m["gid_map"] == [[gid, host, "1"]]
            assert start <= int(host) < start + count, host
        assert f["setgroups"] == c["setgroups"]
    else:
        assert f["uid_map"] == [[uid, uid, "1"]] and f["gid_map"] == [[gid, gid, "1"]]
        assert f["setgroups"] == "deny"
    # Credentials, capabilities, no_new_privs and seccomp mode as cold; the template's filters
    # stay stacked beneath the call's own.
    fs, cs = dict(f["status"]), dict(c["status"])
    assert int(fs.pop("Seccomp_filters")) > int(cs.pop("Seccomp_filters"))
    assert fs == cs
    # The same processes (pid 1 and the code), the same open files by kind.
    assert f["processes"]["pids"] == c["processes"]["pids"]
    assert (f["processes"]["pid"], f["processes"]["ppid"]) == (c["processes"]["pid"], c["processes"]["ppid"])
    kind = lambda fds: {k: v.split(":")[0] for k, v in fds.items()}  # noqa: E731
    assert kind(f["fds"]) == kind(c["fds"])


def daemons(marker):
    found = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(int(p))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("mode", ["exit", "timeout"])
def test_a_daemon_the_call_leaves_dies_with_it(servers, mode):
    fork, _ = servers
    marker = "sbx-fork-leak-" + secrets.token_hex(6)
    out = run_probe(fork, "leak", marker, mode) if mode == "exit" else None
    if mode == "timeout":
        with open(os.path.join(PROBES, "leak.py")) as f:
            src = f.read()
        code = "import sys\nsys.argv[:] = %r\n" % ["leak.py", marker, mode] + src
        r = fork.send("tools/call", {"name": "run_python", "arguments": {"code": code, "timeout": 1}})
        out = "".join(c["text"] for c in r["content"] if c["type"] == "text")
        assert "timeout" in out, out
    deadline = time.monotonic() + 5
    while daemons(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not daemons(marker), out
