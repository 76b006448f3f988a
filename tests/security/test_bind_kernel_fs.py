"""Bind and root sources on kernel pseudo-filesystems are refused (issue 34, item 6).

`--bind /proc:/x` (or a client's root `file:///proc`) handed the code the host's process table:
about 80 host command lines, environments where readable, and every other process's /proc files.
Refused: the host's /proc, /sys and /dev and anything below them (by path: devtmpfs and /dev/shm
report tmpfs), and any source on a kernel pseudo-filesystem wherever it is mounted (statfs magic).
The roots' side is in tests/mcp/kernel_fs.test.mjs."""
import os
import subprocess

import pytest

import sbx
from sbx import assert_usage_error, sandboxd

pytestmark = pytest.mark.security

HOST_KERNEL_DIRS = ["/proc", "/proc/1", "/proc/self/", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm"]


@pytest.mark.parametrize("src", HOST_KERNEL_DIRS)
@pytest.mark.parametrize("opt", ["--bind", "--bind-rw"])
def test_host_kernel_dirs_are_refused(src, opt):
    r = sandboxd("exec", "--rootfs", sbx.ROOTFS, opt, f"{src}:/data", "-c", "print(open('/data').name)")
    assert_usage_error(r, f"{opt} {src}")
    assert "is never bound" in r.stderr, r.describe()


def test_a_link_to_proc_is_refused_as_proc(tmp_path):
    link = tmp_path / "innocent"
    link.symlink_to("/proc")
    r = sandboxd("exec", "--rootfs", sbx.ROOTFS, "--bind", f"{link}:/data", "-c", "pass")
    assert_usage_error(r, "a link to /proc")
    assert "/proc is never bound" in r.stderr, r.describe()


def test_an_ordinary_directory_is_still_bound(tmp_path):
    d = tmp_path / "proc"  # named like one, and that is all
    d.mkdir()
    (d / "f").write_text("ok")
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o755)
    os.chmod(d / "f", 0o644)
    r = sbx.run(("-c", "print(open('/data/f').read())"), opts=["--bind", f"{d}:/data"])
    assert r.rc == 0 and r.out == b"ok\n", r.describe()


@pytest.mark.parametrize("fstype,name", [("proc", "proc"), ("sysfs", "sysfs"), ("cgroup2", "cgroup2"),
                                         ("mqueue", "mqueue")])
def test_a_pseudo_filesystem_mounted_elsewhere_is_refused(tmp_path, fstype, name):
    """By statfs magic, wherever it is mounted: mounted in a private mount namespace of the test's
    own, so the host's mount table never changes."""
    sbx.root_only("mounting a file system for the test needs root")
    d = tmp_path / "mnt"
    d.mkdir()
    script = ('mount -t "$1" none "$2" || exit 3; "$3" exec --rootfs "$4" --bind "$2:/data" -c "pass"')
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", fstype, str(d),
                        sbx.SANDBOXD, sbx.ROOTFS], capture_output=True, timeout=60)
    r = sbx.Result(["sandboxd", "exec", "--bind", f"{d}:/data"], p.returncode, p.stdout, p.stderr, 0.0)
    assert p.returncode != 3, f"could not mount {fstype}: {p.stderr!r}"
    assert_usage_error(r, f"{fstype} at {d}")
    assert f"on a kernel pseudo-filesystem ({name}): never bound" in r.stderr, r.describe()
