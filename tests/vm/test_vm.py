"""Self-test of the VM harness (tests/vm/run): the guest has a pure cgroup2 hierarchy with the
memory, pids, cpu and io controllers, exit statuses and output come back, unprivileged user
namespaces work, --delegate hands the command's cgroup to its user (and only then), and
--cgroup-v1 gives systemd's hybrid v1 layout instead.

Skips, with the reason, only when qemu itself cannot start here (`tests/vm/run --probe`);
with CI=true that is a failure instead.
"""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run")
REPO = os.path.dirname(os.path.dirname(HERE))
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# An unprivileged user that exists everywhere (the guest shares the host's /etc/passwd).
USER = "nobody"
TEST_CG = "/sys/fs/cgroup/vm.slice/vm-test.scope"


def vm(*args, timeout=300):
    """Run tests/vm/run ARGS from the repository; returns the CompletedProcess (text)."""
    return subprocess.run([RUN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module", autouse=True)
def qemu_can_start():
    p = vm("--probe", timeout=120)
    if p.returncode != 0:
        reason = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]
        if CI:
            pytest.fail(f"CI=true and the VM cannot start: {reason}")
        pytest.skip(f"the VM cannot start here: {reason}")


def test_pure_cgroup2_with_controllers():
    p = vm("--", "sh", "-c",
           "cat /sys/fs/cgroup/cgroup.controllers; cat /proc/self/cgroup; id; "
           f"cat {TEST_CG}/cgroup.controllers; pwd; stat -f -c %T /sys/fs/cgroup; echo to-stderr >&2")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert {"memory", "pids", "cpu", "io"} <= set(lines[0].split()), p.stdout
    # Pure v2: one hierarchy, no v1 lines ("N:controller:/path").
    assert lines[1] == "0::/vm.slice/vm-test.scope", p.stdout
    assert lines[2].startswith("uid=0(root) gid=0(root)"), p.stdout
    assert {"memory", "pids", "cpu", "io"} <= set(lines[3].split()), p.stdout
    assert lines[4] == os.path.realpath(REPO)
    assert lines[5] == "cgroup2fs"
    assert len(lines) == 6, p.stdout
    assert "to-stderr" in p.stderr and "to-stderr" not in p.stdout


def test_exit_status_propagates():
    assert vm("--", "sh", "-c", "exit 7").returncode == 7
    p = vm("--", "sh", "-c", "kill -KILL $$")
    assert p.returncode == 137, p.stderr


def test_unprivileged_user_namespaces():
    p = vm("--user", USER, "--", "sh", "-c", "id -u; unshare -Ur sh -c 'id -u'")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(65534), "0"], p.stdout


def test_delegation_only_when_asked():
    script = (f"cat /proc/self/cgroup; mkdir {TEST_CG}/child && echo mkdir-ok; "
              f"echo +memory > {TEST_CG}/cgroup.subtree_control && echo controllers-ok; true")
    # Without --delegate the user's cgroup stays root's: the user can do nothing with it.
    p = vm("--user", USER, "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    assert "mkdir-ok" not in p.stdout and "Permission denied" in p.stderr, (p.stdout, p.stderr)
    # With --delegate the user creates a child cgroup (a delegatee must first move its own
    # processes into a leaf before enabling controllers: "no internal processes").
    script = (f"mkdir {TEST_CG}/leaf {TEST_CG}/child && echo $$ > {TEST_CG}/leaf/cgroup.procs && "
              f"echo '+memory +pids +cpu' > {TEST_CG}/cgroup.subtree_control && "
              f"echo 64M > {TEST_CG}/child/memory.max && cat {TEST_CG}/child/cgroup.controllers")
    p = vm("--user", USER, "--delegate", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    assert set(p.stdout.split()) == {"memory", "pids", "cpu"}, p.stdout


def test_timeout_kills_the_vm():
    p = vm("--timeout", "12", "--", "sleep", "600")
    assert p.returncode == 124, p.stderr
    assert "timeout" in p.stderr


def test_root_options_refused_where_they_cannot_apply():
    # Refused before anything boots: --share without --root (the guest has the host's root),
    # --user with --root (the tree has its own users), --root without bash for stage 2.
    p = vm("--share", "/etc", "--", "true", timeout=30)
    assert p.returncode == 125 and "--share needs --root" in p.stderr, p.stderr
    p = vm("--root", "/", "--user", USER, "--", "true", timeout=30)
    assert p.returncode == 125 and "--user with --root" in p.stderr, p.stderr
    p = vm("--root", os.path.join(REPO, "tests"), "--", "true", timeout=30)
    assert p.returncode == 125 and "no /bin/bash there" in p.stderr, p.stderr


def test_cgroup_v1_is_systemds_hybrid_layout():
    # --cgroup-v1: memory, pids and cpu,cpuacct (co-mounted) v1 hierarchies and an empty cgroup2
    # at unified, the command in the same path in each; v1 has no delegation, so root only.
    p = vm("--cgroup-v1", "--", "sh", "-c",
           "cat /proc/self/cgroup; stat -f -c %T /sys/fs/cgroup; readlink /sys/fs/cgroup/cpuacct; "
           "grep -c ' - cgroup ' /proc/self/mountinfo")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert sorted(line.split(":", 1)[1] for line in lines[:4]) == [
        ":/vm.slice/vm-test.scope", "cpu,cpuacct:/vm.slice/vm-test.scope",
        "memory:/vm.slice/vm-test.scope", "pids:/vm.slice/vm-test.scope"], p.stdout
    assert lines[4:] == ["tmpfs", "cpu,cpuacct", "3"], p.stdout
    p = vm("--cgroup-v1", "--user", USER, "--", "true", timeout=30)
    assert p.returncode == 125 and "--cgroup-v1 is root's" in p.stderr, p.stderr
