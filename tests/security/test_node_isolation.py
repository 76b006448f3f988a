"""The same isolation for JavaScript: tests/probes/facts.js, run by node in the node rootfs
(make rootfs-node) under the shipped default policy, reports the essentials from inside, and
each is judged here as test_security.py judges the Python probe's. Run by tests/run as root and
as the unprivileged user."""
import pytest

import sbx

pytestmark = pytest.mark.security


def node_opts():
    """Without a cgroup the memory limit is an address-space rlimit, and V8 reserves about 1.3 GiB
    of address space before running anything (sandboxd.policy(5)): node needs 2G there."""
    return ["--memory", "2G"] if sbx.enforcement() == "degraded" else []


@pytest.fixture(scope="module")
def facts():
    sbx.require_node_rootfs()
    host = [sbx.REPO, sbx.SANDBOXD, sbx.WORK, sbx.NODE_ROOTFS, "/work", "/home/sbxtest"]
    r = sbx.node("facts", *host, opts=node_opts())
    if r.rc != 0:
        raise sbx.ProbeError(r, f"facts.js exited {r.rc}")
    f = r.json()
    f["_host_paths_asked"] = host
    return f


def test_node_runs_as_the_sandbox_user(facts):
    ids = facts["ids"]
    assert (ids["uid"], ids["euid"], ids["gid"], ids["egid"]) == (1000,) * 4, ids
    assert set(ids["groups"]) <= {1000} and ids["user"] == "sandbox", ids
    um, gm = facts["uid_map"], facts["gid_map"]
    assert len(um) == 1 and um[0][0] == "1000" and um[0][2] == "1", um
    assert len(gm) == 1 and gm[0][0] == "1000" and gm[0][2] == "1", gm
    assert sbx.is_host_id(int(um[0][1]), int(gm[0][1])), (um, gm)


def test_node_has_no_capabilities_and_no_new_privs(facts):
    st = facts["status"]
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[k], 16) == 0, (k, st[k])
    assert st["NoNewPrivs"] == "1", st


def test_node_runs_under_the_seccomp_filter(facts):
    st = facts["status"]
    assert st["Seccomp"] == "2" and int(st["Seccomp_filters"]) >= 1, st


def test_node_sees_no_host_files(facts):
    seen = facts["host_paths"]
    assert set(seen) == set(facts["_host_paths_asked"]), seen
    assert all(v == "ENOENT" for v in seen.values()), seen
    assert facts["hostname"] == "sandbox"
    # Its own pid namespace: init and node, nothing of the host's.
    assert len(facts["processes"]) <= 3 and 1 in facts["processes"], facts["processes"]


def test_node_has_loopback_only(facts):
    assert facts["interfaces"] == ["lo"], facts["interfaces"]
    out = facts["outside_network"]
    assert all(v in ("ENETUNREACH", "EHOSTUNREACH") for v in out.values()), out
    assert facts["loopback"] == "hi", facts["loopback"]


def test_node_root_is_read_only(facts):
    w = facts["writable"]
    for d in ("/", "/usr", "/usr/bin", "/etc", "/bin", "/lib", "/var", "/root", "/home", "/opt"):
        assert w[d] in ("EROFS", "EACCES", "ENOENT"), (d, w[d])
    for f in ("/etc/passwd", "/usr/bin/node", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger"):
        assert w[f] in ("EROFS", "EACCES", "ENOENT", "ETXTBSY"), (f, w[f])
    for d in ("/tmp", "/workspace", "/dev/shm"):
        assert w[d] == "yes", (d, w[d])
    m = facts["mounts"]
    assert {"ro", "nosuid", "nodev"} <= set(m["/"]), m["/"]


def test_node_environment_is_the_policys(facts):
    env = facts["env"]
    mib = 2048 if node_opts() else 512
    want = {"PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/workspace",
            "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1",
            "NODE_OPTIONS": f"--max-old-space-size={mib}"}
    if sbx.EGRESS_OPTS:  # network proxy (SANDBOXD_TEST_ALLOW_HOST): the proxy's variables too
        want.update({k: "http://127.0.0.1:3128" for k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY",
                                                           "https_proxy", "ALL_PROXY", "all_proxy")})
        want.update(NO_PROXY="", no_proxy="", NODE_USE_ENV_PROXY="1")
    assert env == want, env
