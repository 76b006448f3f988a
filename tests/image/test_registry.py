"""The registry path for real: a local OCI distribution registry (Debian's docker-registry) on
127.0.0.1, the built image pushed to it with skopeo, pulled back with scripts/fetch-rootfs,
imported, and Python run from it with `sandboxd exec`."""
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

import imagelib
import sbx

REPO = sbx.REPO
REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    sbx.need(os.access(REGISTRY, os.X_OK), "docker-registry not installed (scripts/install-deps)")
    sbx.need(shutil.which("skopeo"), "skopeo not installed (scripts/install-deps)")
    port = free_port()
    storage = tmp_path / "registry"
    storage.mkdir()
    config = tmp_path / "registry.yml"
    config.write_text(f"""version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: {storage}
http:
  addr: 127.0.0.1:{port}
""")
    log = open(tmp_path / "registry.log", "w")
    proc = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("docker-registry did not start: " + (tmp_path / "registry.log").read_text())
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    # Nothing keeps listening.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


@pytest.fixture
def built_layout(tmp_path):
    """The OCI layout scripts/build-rootfs wrote next to the rootfs, or one packed from the tree."""
    lay = sbx.ROOTFS + ".oci"
    if os.path.exists(os.path.join(lay, "index.json")):
        return lay
    lay = str(tmp_path / "packed.oci")
    subprocess.run([os.path.join(REPO, "scripts/oci-pack"), sbx.ROOTFS, lay, "--env", "PATH=/usr/bin:/bin",
                    "--env", "LANG=C.UTF-8", "--workdir", "/workspace"], check=True, capture_output=True)
    return lay


def test_push_fetch_import_run(registry, built_layout, tmp_path):
    ref = f"{registry}/python:3.14-slim"
    push = subprocess.run(["skopeo", "copy", "--dest-tls-verify=false", f"oci:{built_layout}", f"docker://{ref}"],
                          capture_output=True, text=True, timeout=300)
    assert push.returncode == 0, push.stderr

    store = tmp_path / "store"
    out = str(store / "python-3.14-slim")
    env = dict(os.environ, SANDBOXD=sbx.SANDBOXD)
    fetch = subprocess.run([os.path.join(REPO, "scripts/fetch-rootfs"), "--registry", registry, "--tls-verify=false",
                            out], capture_output=True, text=True, env=env, timeout=300)
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr
    assert "imported" in fetch.stdout and f"{registry}/python@sha256:" in fetch.stdout

    meta = json.load(open(out + ".json"))
    assert meta["source"].startswith(f"docker://{registry}/python@sha256:")  # pinned by digest
    assert meta["Env"] and meta["WorkingDir"] == "/workspace"
    assert imagelib.rootfs_cmd("verify", "python-3.14-slim", "--dir", str(store)).returncode == 0

    # Pinned and intact: a second fetch does nothing, and says so.
    again = subprocess.run([os.path.join(REPO, "scripts/fetch-rootfs"), "--registry", registry,
                            "--tls-verify=false", out], capture_output=True, text=True, env=env, timeout=30)
    assert again.returncode == 0 and "up to date" in again.stdout
    assert imagelib.leftovers(str(store), "python-3.14-slim") == []

    for p in (tmp_path, store):  # the sandbox's host uid must reach the tree
        os.chmod(p, 0o755)
    run = sbx.code("import sys; print(sys.version)", rootfs=out, want_report=False)
    if run.rc == 125 and b"no cgroup" in run.err and not sbx.IS_ROOT:
        pytest.skip("sandboxd exec cannot run here as this user: " + run.err.decode().strip())
    assert run.rc == 0, run.err
    assert run.out.startswith(b"3.14")


@pytest.mark.no_binary
def test_fetch_fails_fast_without_registry(tmp_path):
    port = free_port()  # nothing listens there
    t = time.monotonic()
    res = subprocess.run([os.path.join(REPO, "scripts/fetch-rootfs"), "--registry", f"127.0.0.1:{port}",
                          "--tls-verify=false", str(tmp_path / "x")], capture_output=True, text=True, timeout=30)
    assert res.returncode != 0
    assert time.monotonic() - t < 5
    assert res.stderr.count("\n") == 1 and "cannot reach registry" in res.stderr
    assert os.listdir(tmp_path) == []


def test_sandboxd_rootfs_fetch_pulls_pins_and_imports(registry, built_layout, tmp_path):
    """`sandboxd rootfs fetch` (no script: what an installed user has): skopeo into a temporary OCI
    layout in the store, the safe import, the digest pulled recorded as the source, the layout gone."""
    ref = f"{registry}/python:3.14-slim"
    push = subprocess.run(["skopeo", "copy", "--dest-tls-verify=false", f"oci:{built_layout}", f"docker://{ref}"],
                          capture_output=True, text=True, timeout=300)
    assert push.returncode == 0, push.stderr
    store = tmp_path / "store"
    fetch = subprocess.run([sbx.SANDBOXD, "rootfs", "fetch", ref, "--tls-verify=false", "--dir", str(store)],
                           capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert fetch.returncode == 0, fetch.stdout + fetch.stderr
    assert f"pulling {ref}" in fetch.stdout and "imported" in fetch.stdout, fetch.stdout
    meta = json.load(open(store / "python-3.14-slim.json"))  # the name: the reference's last component
    assert meta["source"].startswith(f"docker://{registry}/python@sha256:"), meta["source"]
    assert meta["WorkingDir"] == "/workspace"
    assert sorted(os.listdir(store)) == ["python-3.14-slim", "python-3.14-slim.files", "python-3.14-slim.json"]
    assert imagelib.rootfs_cmd("verify", "python-3.14-slim", "--dir", str(store)).returncode == 0
    # --name, and a tag that does not exist: skopeo's reason in one line, nothing left behind.
    bad = subprocess.run([sbx.SANDBOXD, "rootfs", "fetch", f"{registry}/python:nope", "--tls-verify=false",
                          "--name", "other", "--dir", str(store)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "skopeo copy" in bad.stderr, bad.stderr
    assert sorted(os.listdir(store)) == ["python-3.14-slim", "python-3.14-slim.files", "python-3.14-slim.json"]
    # And it goes again with remove.
    rm = subprocess.run([sbx.SANDBOXD, "rootfs", "remove", "python-3.14-slim", "--dir", str(store)],
                        capture_output=True, text=True, timeout=60)
    assert rm.returncode == 0 and os.listdir(store) == [], rm.stderr
