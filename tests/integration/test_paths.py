"""The install layout (src/base/paths.c): an installed sandboxd (PREFIX/bin/sandboxd) finds its rootfs
store beside it, and `rootfs list` and `exec` agree on where that store is."""
import json
import os
import shutil
import subprocess

import pytest

import sbx


def installed(tmp_path, store_rel):
    """PREFIX/bin/sandboxd, a copy of the binary under test, with the test rootfs as the default
    rootfs in PREFIX/store_rel (a symlink: the store holds trees, whatever their kind)."""
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    binary = prefix / "bin" / "sandboxd"
    shutil.copy2(sbx.SANDBOXD, binary)
    store = prefix / store_rel
    store.mkdir(parents=True)
    os.symlink(os.path.realpath(sbx.ROOTFS), store / "python-3.14-slim")
    (store / "python-3.14-slim.json").write_text(json.dumps({"source": "test-paths"}))
    return binary, store


def run(binary, *args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("SANDBOXD_ROOTFS", "SANDBOXD_ROOTFS_DIR")}
    env.update(env_extra or {})
    return subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_installed_store_is_shared_by_list_and_exec(tmp_path):
    binary, store = installed(tmp_path, "share/sandboxd/rootfs")
    listed = run(binary, "rootfs", "list")
    assert listed.returncode == 0, listed.stderr
    assert "python-3.14-slim" in listed.stdout and "test-paths" in listed.stdout, listed.stdout
    r = run(binary, "exec", "-c", "print('from the store')")
    assert r.returncode == 0 and r.stdout == "from the store\n", (r.returncode, r.stdout, r.stderr)


def test_rootfs_dir_env_is_the_store_for_exec_too(tmp_path):
    binary, store = installed(tmp_path, "elsewhere")
    r = run(binary, "exec", "-c", "print('from $SANDBOXD_ROOTFS_DIR')", env_extra={"SANDBOXD_ROOTFS_DIR": str(store)})
    assert r.returncode == 0 and r.stdout == "from $SANDBOXD_ROOTFS_DIR\n", (r.returncode, r.stdout, r.stderr)
    listed = run(binary, "rootfs", "list", env_extra={"SANDBOXD_ROOTFS_DIR": str(store)})
    assert "test-paths" in listed.stdout, listed.stdout


def test_installed_without_rootfs_names_commands_an_installed_user_has(tmp_path):
    prefix = tmp_path / "empty"
    (prefix / "bin").mkdir(parents=True)
    shutil.copy2(sbx.SANDBOXD, prefix / "bin" / "sandboxd")
    r = run(prefix / "bin" / "sandboxd", "exec", "-c", "pass",
            env_extra={"SANDBOXD_ROOTFS_DIR": str(tmp_path / "no-store")})
    sbx.assert_usage_error(sbx.Result(r.args, r.returncode, r.stdout.encode(), r.stderr.encode(), 0), "no rootfs")
    assert "sandboxd rootfs build" in r.stderr and "make rootfs" not in r.stderr, r.stderr
    # What to do comes last, after why (the errno text), not between them.
    assert r.stderr.rstrip("\n").endswith(": No such file or directory; build one with "
                                          "`sandboxd rootfs build` (offline, from Debian packages) or pull "
                                          "one with `sandboxd rootfs fetch` or pass --rootfs DIR (see "
                                          "sandboxd doctor)"), r.stderr


def _exec_degraded(stderr):
    """exec under a policy that allows rlimits (the caller checked there is no cgroup)."""
    env = dict(os.environ, SANDBOXD_CGROUP="/nonexistent-cgroup")  # not even a delegated v2 one
    return subprocess.Popen([sbx.SANDBOXD, "exec", "--rootfs", sbx.ROOTFS, "--policy", "ci", "-c", "print('ran')"],
                            env=env, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL)


def test_degraded_warning_is_the_callers_choice():
    """sandbox.c reports that limits degraded; exec says so on a terminal only (piped stderr is the
    code's), once."""
    import pty
    if sbx.enforcement() != "degraded":
        pytest.skip(f"limits are {sbx.enforcement()}: they degrade only without a cgroup")
    p = _exec_degraded(subprocess.PIPE)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out == b"ran\n", (p.returncode, out, err)
    assert err == b"", err
    master, slave = pty.openpty()
    try:
        p = _exec_degraded(slave)
        os.close(slave)
        text = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer has closed it
                break
            if not chunk:
                break
            text += chunk
        out = p.stdout.read()
        p.wait(timeout=60)
    finally:
        os.close(master)
    assert p.returncode == 0 and out == b"ran\n", (p.returncode, out, text)
    text = text.decode()
    assert text.count("sandboxd: warning: no cgroup for limits (") == 1, text
    assert "running with rlimits only, as policy `ci` allows" in text, text
