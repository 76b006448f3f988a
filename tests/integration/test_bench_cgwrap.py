"""bench/bwrap-cg.c, the reference bench/run gives bubblewrap sandboxd's cgroup limits with, does
what its rows claim: the command runs in a cgroup of its own in every hierarchy, with the limits
written, its exit status comes back, and no directory is left; with `none`, no cgroup at all.
Root only (it makes cgroups below its own); cheap (a compile and three short runs)."""
import json
import os
import shutil
import subprocess

import pytest

import sbx

SRC = os.path.join(sbx.REPO, "bench", "bwrap-cg.c")
# What the command reports: its cgroup path per hierarchy, and the limit files it can read there.
REPORT = r"""
import json, os, sys
out = {}
for line in open("/proc/self/cgroup"):
    hid, ctl, path = line.rstrip("\n").split(":", 2)
    for c in (ctl.split(",") if ctl else [""]):
        out[c] = path
lim = {}
def read(*p):
    try:
        return open(os.path.join("/sys/fs/cgroup", *p)).read().strip()
    except OSError:
        return None
if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
    base = out[""].lstrip("/")
    lim = {"memory": read(base, "memory.max"), "pids": read(base, "pids.max"), "cpu": read(base, "cpu.max")}
else:
    lim = {"memory": read("memory", out["memory"].lstrip("/"), "memory.limit_in_bytes"),
           "pids": read("pids", out["pids"].lstrip("/"), "pids.max"),
           "cpu": read("cpu", out["cpu"].lstrip("/"), "cpu.cfs_quota_us")}
print(json.dumps({"paths": out, "limits": lim}))
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory):
    sbx.root_only("bench/bwrap-cg makes cgroups")
    cc = shutil.which("cc") or shutil.which("gcc")
    sbx.need(cc, "no C compiler", security=False)
    exe = str(tmp_path_factory.mktemp("cgwrap") / "bwrap-cg")
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, SRC], check=True)
    probe = subprocess.run([exe, "536870912", "128", "100000", "true"], capture_output=True, text=True)
    sbx.need(probe.returncode == 0, f"no writable cgroup here: {probe.stderr.strip()}", security=False)
    return exe


def leftovers():
    found = []
    for d, subdirs, _ in os.walk("/sys/fs/cgroup"):
        found += [os.path.join(d, s) for s in subdirs if s.startswith("bwrap-cg-")]
    return found


def run(exe, *limits, status=0):
    p = subprocess.run([exe, *limits, "python3", "-c", REPORT, str(status)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == status, p.stderr
    return json.loads(p.stdout)


def test_command_runs_in_its_own_cgroup_with_the_limits(wrapper):
    before = leftovers()
    outside = run(wrapper, "none", "0", "0")["paths"]
    got = run(wrapper, "536870912", "128", "100000", status=7)
    v2 = "" in got["paths"] and os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    hierarchies = [""] if v2 else ["memory", "pids", "cpu", "cpuacct"]
    for h in hierarchies:
        path = got["paths"][h]
        assert os.path.basename(path).startswith("bwrap-cg-"), (h, path)
        assert os.path.dirname(path) == (outside[h].rstrip("/") or "/"), (h, path, outside[h])
    if v2:
        assert got["limits"] == {"memory": "536870912", "pids": "128", "cpu": "100000 100000"}, got
    else:
        assert got["limits"] == {"memory": "536870912", "pids": "128", "cpu": "100000"}, got
    # `none`: the command stays where the wrapper was.
    assert all(not os.path.basename(p).startswith("bwrap-cg-") for p in outside.values()), outside
    assert leftovers() == before


def test_bad_usage_and_exec_failure(wrapper):
    p = subprocess.run([wrapper, "1"], capture_output=True, text=True)
    assert p.returncode == 125 and "usage" in p.stderr
    before = leftovers()
    p = subprocess.run([wrapper, "536870912", "128", "100000", "/nonexistent/cmd"], capture_output=True, text=True)
    assert p.returncode == 127 and "/nonexistent/cmd" in p.stderr
    assert leftovers() == before
