"""`sandboxd rootfs remove` and `rootfs fetch` without a registry (the success path of fetch, with
a local registry, is in tests/image/test_registry.py)."""
import os
import shutil
import socket
import subprocess
import time

import pytest

import sbx


def rootfs(*args, timeout=30):
    return subprocess.run([sbx.SANDBOXD, "rootfs", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def tree(store, name, files=3):
    """A tree as import and build leave it: NAME/, NAME.json, NAME.files, NAME.oci/, NAME.build.log."""
    t = store / name
    (t / "usr/bin").mkdir(parents=True)
    for i in range(files):
        (t / "usr/bin" / f"f{i}").write_text("x")
    (store / f"{name}.json").write_text("{}")
    (store / f"{name}.files").write_text("")
    (store / f"{name}.oci/blobs").mkdir(parents=True)
    (store / f"{name}.build.log").write_text("log")
    return t


def listing(d):
    return sorted(os.listdir(d))


def test_remove_takes_the_tree_and_everything_beside_it(tmp_path):
    store = tmp_path / "store"
    tree(store, "one")
    tree(store, "one-two")  # a name that begins like it stays
    (store / "one.json.bak").write_text("not ours")
    r = rootfs("remove", "one", "--dir", str(store))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"removed {store}/one\n"
    assert listing(store) == ["one-two", "one-two.build.log", "one-two.files", "one-two.json", "one-two.oci",
                              "one.json.bak"]


@pytest.mark.parametrize("name", ["../outside", "..", ".", "a/b", "/etc", "", ".hidden", "x y"])
def test_remove_refuses_what_is_not_a_name(tmp_path, name):
    store = tmp_path / "store"
    store.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    r = rootfs("remove", name, "--dir", str(store))
    assert r.returncode == 125 and r.stderr.count("\n") == 1 and "not a rootfs name" in r.stderr, r.stderr
    assert (outside / "keep").read_text() == "keep"


def test_remove_of_a_missing_name_says_so(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    r = rootfs("remove", "nothing", "--dir", str(store))
    assert r.returncode == 125 and r.stderr.count("\n") == 1 and "No such file" in r.stderr, r.stderr
    # A symlink in the store is not a tree: refused, and its target untouched.
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", store / "link")
    r = rootfs("remove", "link", "--dir", str(store))
    assert r.returncode != 0 and "not a tree" in r.stderr, r.stderr
    assert (tmp_path / "target").is_dir() and (store / "link").is_symlink()


def test_remove_renames_the_tree_away_before_deleting_anything(tmp_path):
    """A concurrent lookup of STORE/NAME must find the whole tree or nothing: the first change
    remove makes is one rename of the tree to a hidden name; no file inside goes before it."""
    sbx.need(shutil.which("strace"), "strace not installed (scripts/install-deps)")
    store = tmp_path / "store"
    tree(store, "t", files=50)
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=rename,renameat,renameat2,unlink,unlinkat,rmdir",
                        sbx.SANDBOXD, "rootfs", "remove", "t", "--dir", str(store)],
                       capture_output=True, text=True, timeout=60,
                       # LeakSanitizer cannot run under ptrace (the ASan build in make check).
                       env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
    assert r.returncode == 0, r.stderr
    calls = [ln for ln in r.stderr.splitlines() if ln.startswith(("rename", "unlink", "rmdir"))]
    # The probe for a free temporary name (mkdirat + unlinkat of an empty dot-directory) may come
    # first; the tree itself is touched first by the rename.
    touched = [c for c in calls if '".t.remove-' not in c.split(",")[1] or c.startswith("rename")]
    assert touched and touched[0].startswith("renameat2(") and '"t"' in touched[0] and ".t.remove-" in touched[0], \
        calls[:5]
    assert listing(store) == []


def test_a_killed_removal_is_finished_by_the_next_one(tmp_path):
    store = tmp_path / "store"
    tree(store, "t")
    left = store / ".t.remove-abc123"
    (left / "usr").mkdir(parents=True)  # what a removal killed after its rename left
    (left / "usr/file").write_text("x")
    r = rootfs("remove", "t", "--dir", str(store))
    assert r.returncode == 0, r.stderr
    assert listing(store) == []


def test_fetch_fails_fast_offline_and_suggests_build(tmp_path):
    """No registry answers (nothing listens on the port, or the address does not route): one line
    within a few seconds, naming `sandboxd rootfs build`, and nothing left in the store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = tmp_path / "store"
    store.mkdir()
    for ref, extra in ((f"127.0.0.1:{port}/python:3.14-slim", ["--tls-verify=false"]),
                       ("192.0.2.1:5000/python:3.14-slim", ["--timeout", "1"])):  # TEST-NET-1: no route
        t = time.monotonic()
        r = rootfs("fetch", ref, *extra, "--dir", str(store))
        took = time.monotonic() - t
        assert r.returncode == 1, (ref, r.returncode, r.stderr)
        assert took < 4, (ref, took)
        assert r.stderr.count("\n") == 1 and "cannot reach registry" in r.stderr, r.stderr
        assert "`sandboxd rootfs build`" in r.stderr, r.stderr
        assert listing(store) == []


def test_fetch_default_image_offline(tmp_path):
    """The default (docker.io/library/python:3.14-slim) on this machine, which has no registry."""
    try:
        socket.create_connection(("registry-1.docker.io", 443), timeout=2).close()
        pytest.skip("Docker Hub is reachable from here: the offline case cannot be shown")
    except OSError:
        pass
    t = time.monotonic()
    r = rootfs("fetch", "--dir", str(tmp_path / "store"))
    assert time.monotonic() - t < 5
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "registry-1.docker.io:443" in r.stderr and "`sandboxd rootfs build`" in r.stderr, r.stderr


@pytest.mark.parametrize("args, what", [
    (["fetch", "a", "b"], "usage"),
    (["fetch", "-x"], "unknown"),
    (["fetch", "http://x/y"], "not an image reference"),
    (["fetch", "--timeout", "0"], "--timeout"),
    (["fetch", "--tls-verify=maybe"], "true or false"),
    (["build", "extra"], "usage"),
])
def test_bad_arguments_are_usage_errors(tmp_path, args, what):
    r = rootfs(*args, "--dir", str(tmp_path / "s"))
    assert r.returncode == 125 and r.stderr.count("\n") == 1 and what in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()
