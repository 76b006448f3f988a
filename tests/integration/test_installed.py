"""The package's layout for real: the .deb that `make deb` built (beside the binary under test),
unpacked with `dpkg -x` into a scratch root, and its /usr/bin/sandboxd run from there with no
SANDBOXD_* variable. It must find its policies, helpers, recipe and rootfs store through the
install layout alone (src/base/paths.c), and tell an installed user commands they have."""
import glob
import json
import os
import shutil
import subprocess

import pytest

import sbx


def _deb():
    # Beside the binary under test, else build/ (make deb packs build/sandboxd; the ASan run
    # tests build-asan/sandboxd, and the package's layout is the same).
    dirs = [os.path.dirname(sbx.SANDBOXD), os.path.join(sbx.REPO, "build")]
    debs = [d for dir_ in dirs for d in sorted(glob.glob(os.path.join(dir_, "sandboxd_*.deb")))[-1:]]
    if not debs:
        if sbx.CI:
            pytest.fail("CI=true and no .deb in %s (make check runs make deb)" % " or ".join(dirs))
        pytest.skip("no .deb in %s: run make deb" % " or ".join(dirs))
    return debs[0]


@pytest.fixture
def root(tmp_path):
    """The package's files under tmp_path/root, as `dpkg -x` puts them."""
    sbx.need(shutil.which("dpkg-deb"), "dpkg-deb not installed")
    r = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", _deb(), str(r)], check=True, capture_output=True)
    for p in (tmp_path, r):  # the sandbox's host uid must reach what is bound in
        os.chmod(p, 0o755)
    return r


def run(root, *args, timeout=60, cwd=None, path=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOXD_")}
    env["SANDBOXD_AUDIT_LOG"] = "off"  # not a layout variable: keeps the test off the user's log
    if path is not None:
        env["PATH"] = path
    return subprocess.run([str(root / "usr/bin/sandboxd"), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


def with_rootfs(root):
    """The test rootfs as the default one in the unpacked package's store."""
    store = root / "var/lib/sandboxd/rootfs"
    assert store.is_dir() and not os.listdir(store), "the package's store must ship empty"
    os.symlink(os.path.realpath(sbx.ROOTFS), store / "python-3.14-slim")
    (store / "python-3.14-slim.json").write_text(json.dumps({"source": "test-installed"}))
    return store


def test_finds_its_policies(root):
    r = run(root, "policy", "show")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("# sandboxd policy `default`, resolved from "), first
    shown = first.split("resolved from ", 1)[1].split(" (")[0]
    assert os.path.normpath(shown) == str(root / "usr/share/sandboxd/policy/default.policy"), first


def test_missing_rootfs_names_the_rootfs_build_command(root):
    r = run(root, "exec", "-c", "pass")
    assert r.returncode == 125 and r.stdout == "", (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    assert "`sandboxd rootfs build`" in r.stderr and "`sandboxd rootfs fetch`" in r.stderr, r.stderr
    assert "make" not in r.stderr, r.stderr
    # The store it looked in is the package's own, under the scratch root.
    assert str(root / "var/lib/sandboxd/rootfs") in r.stderr, r.stderr
    d = run(root, "doctor")
    assert "sandboxd rootfs build" in d.stdout + d.stderr and "make rootfs" not in d.stdout + d.stderr


def test_runs_from_its_store_with_its_helpers(root, tmp_path):
    """exec's default rootfs from the store, and the `mcp` helpers bound in for host servers."""
    store = with_rootfs(root)
    listed = run(root, "rootfs", "list")
    assert listed.returncode == 0 and "test-installed" in listed.stdout, listed.stdout + listed.stderr
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"host": {"command": "/bin/true"}}}))
    os.chmod(cfg, 0o644)
    # The default policy wants a cgroup; an unprivileged run without one uses ci's rlimits.
    pol = [] if sbx.IS_ROOT else ["--policy", "ci"]
    r = run(root, "exec", *pol, "--config", str(cfg), "-c",
            "import mcp, os; print(6 * 7, os.path.dirname(mcp.__file__))")
    if r.returncode == 125 and "cgroup" in r.stderr and not sbx.IS_ROOT:
        pytest.skip("sandboxd exec cannot run here as this user: " + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("42 /"), r.stdout
    assert os.readlink(store / "python-3.14-slim") == os.path.realpath(sbx.ROOTFS)


def stub_recipe(root, profiles):
    """Replace the package's build-rootfs with one that writes what mmdebstrap and the recipe log,
    then records its arguments and environment: the plumbing of `rootfs build` without a mirror."""
    recipe = root / "usr/libexec/sandboxd/build-rootfs"
    usage = "[--profile slim|data] " if profiles else ""
    recipe.write_text(f"""#!/bin/sh
case "$1" in --help) echo "usage: build-rootfs {usage}[--force] [--check] [OUTDIR]" >&2; exit 1 ;; esac
for a; do out=$a; done
log=$out.build.log
echo "$@" > "$out.args"
echo "SANDBOXD=$SANDBOXD" >> "$out.args"
echo "# build-rootfs" > "$log"
for m in "I: running apt-get update..." "I: downloading packages with apt..." "I: extracting archives..." \\
         "I: running --customize-hook in shell" "I: success in 1.0 seconds" "$out.oci.new: sha256:00 (layer 1 bytes)"; do
  echo "$m" >> "$log"; sleep 0.1
done
echo "rootfs: built $out"
""")
    recipe.chmod(0o755)


@pytest.mark.parametrize("profiles", [False, True])
def test_rootfs_build_runs_the_shipped_recipe_with_a_line_per_phase(root, profiles, tmp_path):
    stub_recipe(root, profiles)
    store = tmp_path / "store"
    r = run(root, "rootfs", "build", "--dir", str(store), timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("rootfs build: [")]
    assert [ln.split("]")[0] for ln in lines] == ["rootfs build: [%d/6" % i for i in range(1, 7)], r.stdout
    assert "rootfs: built %s/python-3.14-slim" % store in r.stdout
    args = (store / "python-3.14-slim.args").read_text().splitlines()
    assert args[0] == ("--profile slim " if profiles else "") + str(store / "python-3.14-slim"), args
    assert args[1] == "SANDBOXD=%s" % (root / "usr/bin/sandboxd"), args  # it imports with itself


def test_rootfs_build_data_profile_needs_a_recipe_that_has_it(root, tmp_path):
    stub_recipe(root, profiles=False)
    r = run(root, "rootfs", "build", "--profile", "data", "--dir", str(tmp_path / "s"))
    assert r.returncode == 125 and r.stderr.count("\n") == 1 and "only the slim profile" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()
    stub_recipe(root, profiles=True)
    r = run(root, "rootfs", "build", "--profile", "data", "--dir", str(tmp_path / "s"), timeout=30)
    assert r.returncode == 0, r.stderr
    args = (tmp_path / "s/python-3.14-data.args").read_text().splitlines()
    assert args[0] == "--profile data %s" % (tmp_path / "s/python-3.14-data"), args
    # The node profile's tree is node-slim, not python-3.14-node.
    r = run(root, "rootfs", "build", "--profile", "node", "--dir", str(tmp_path / "s"), timeout=30)
    assert r.returncode == 0, r.stderr
    args = (tmp_path / "s/node-slim.args").read_text().splitlines()
    assert args[0] == "--profile node %s" % (tmp_path / "s/node-slim"), args
    bad = run(root, "rootfs", "build", "--profile", "huge")
    assert bad.returncode == 125 and "slim, data or node" in bad.stderr


def test_rootfs_build_into_a_store_it_cannot_write_says_so(root, tmp_path):
    if sbx.IS_ROOT:
        pytest.skip("root writes any store: the unprivileged run checks this")
    store = tmp_path / "ro"
    store.mkdir(mode=0o555)
    r = run(root, "rootfs", "build", "--dir", str(store))
    assert r.returncode == 125 and r.stderr.count("\n") == 1, r.stderr
    assert "not writable" in r.stderr and "--dir" in r.stderr, r.stderr


def test_rootfs_build_names_the_packages_its_recipe_needs(root, tmp_path):
    """Without mmdebstrap, python3 or zstd on PATH, the installed user gets an apt-get line, not the
    recipe's `scripts/install-deps` (a source-tree script), and nothing runs."""
    stub_recipe(root, profiles=False)
    empty = tmp_path / "bin"
    empty.mkdir()
    r = run(root, "rootfs", "build", "--dir", str(tmp_path / "s"), path=str(empty))
    assert r.returncode == 125 and r.stderr.count("\n") == 1, r.stderr
    assert "apt-get install mmdebstrap python3 zstd" in r.stderr and "install-deps" not in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()
