"""Bind destinations resolve inside the sandbox's root, never on the host (issue 12, item 5).

The rootfs is untrusted content (an imported image). Its symlinks, absolute or relative, with `..`
in their targets or not, must lead a `--bind` destination where they lead for the code inside the
sandbox; nothing may be created or mounted on the host through them. Each test builds a small
hostile rootfs: the real rootfs's /usr (with python3) bound over an otherwise tiny tree that holds
the symlinks. The symlinks name a host directory the sandbox's host uid could write, so that
following one on the host would leave a file there (what the code did before the fix)."""
import os
import shutil
import subprocess
import tempfile

import pytest

import sbx

pytestmark = pytest.mark.security

# Enough `..` to climb from any test directory to the host's /.
UP = "../" * 41  # odd: a walk that let ".." climb one level at the root would end above it


@pytest.fixture
def host_target():
    """A host directory under /tmp that the sandbox's host uid may write into. Under /tmp, so
    that the same path inside the sandbox falls in its own /tmp tmpfs."""
    d = tempfile.mkdtemp(prefix="sandboxd-bind-target.", dir="/tmp")
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def hostile(tmp_path, host_target):
    """A rootfs whose symlinks point at host_target in every way an image can spell it."""
    root = tmp_path / "root"
    for d in ("tmp", "workspace", "run", "dev", "proc", "usr/bin", "etc", "var"):
        (root / d).mkdir(parents=True)
    (root / "usr/bin/python3").touch()  # covered by the real /usr (see run_in)
    for name, target in {
        "bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64",
        "var/lock": "/run/lock",                      # as in Debian images
        "abs": host_target,                           # an absolute path that exists on the host
        "rel": UP + host_target.lstrip("/"),          # relative, climbing out of the rootfs
        "mid": "/run/" + UP + host_target.lstrip("/"),  # `..` after an absolute start
        "chain": "rel",                               # a symlink to a symlink
        "ro": "/etc",                                 # a directory of the read-only rootfs
        "final": host_target + "/final",              # a symlink as the last component
        "magic": "/proc/self/root" + host_target,     # a magic link: the host's root on the host
        "loop": "loop",
    }.items():
        os.symlink(target, root / name)
    os.chmod(tmp_path, 0o755)
    sbx_readable(root)
    return root


def sbx_readable(path):
    """Searchable up to / by the sandbox's host uid (as root: nobody)."""
    d = path
    while str(d) != "/":
        try:
            os.chmod(d, os.stat(d).st_mode | 0o055)
        except PermissionError:
            break
        d = d.parent


# The command prefix of the current setup path (see the `setup_path` fixture).
PREFIX = []


@pytest.fixture(params=["openat2", "fallback"], autouse=True)
def setup_path(request):
    """Every test twice: with openat2 and the new mount API, and with the fallbacks sandboxd uses
    where they are missing (Linux < 5.6 and < 5.2). The fallbacks run under valgrind, which
    implements neither call, so both fail with ENOSYS in the sandbox's setup (a fork of
    sandboxd, so under valgrind too; the code itself runs natively)."""
    global PREFIX
    if request.param == "fallback":
        sbx.need(shutil.which("valgrind"), "valgrind is not installed (it runs the fallback path)", security=True)
        PREFIX = ["valgrind", "-q", "--trace-children=no", "--error-exitcode=99"]
    yield
    PREFIX = []


def run_in(root, binds, src="pass", *args):
    """Run src in root (None: the real rootfs), then binds; a tree of its own gets the real
    rootfs's /usr (python3) bound over its own."""
    opts = ["--bind", os.path.join(os.path.realpath(sbx.ROOTFS), "usr") + ":/usr"] if root else []
    for flag, source, dst in binds:
        opts += [flag, f"{source}:{dst}"]
    cmd = PREFIX + sbx.exec_cmd(("-c", src), args, rootfs=str(root) if root else None, opts=opts)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    # valgrind's own lines (unhandled syscalls) are not sandboxd's output.
    err = b"".join(l for l in p.stderr.splitlines(True) if not l.startswith((b"--", b"==")))
    return sbx.Result(cmd, p.returncode, p.stdout, err, 0.0)


def source_file(tmp_path, token):
    f = tmp_path / "src.txt"
    f.write_text(token)
    f.chmod(0o644)
    return f


READ = "import sys; print(open(sys.argv[1]).read())"


def host_left(host_target):
    return sorted(os.listdir(host_target))


@pytest.mark.parametrize("link", ["abs", "rel", "mid", "chain"])
def test_symlinked_parent_resolves_inside(tmp_path, hostile, host_target, link):
    """/LINK/y with LINK pointing at a host directory: the mount point is created inside the
    sandbox (there, the path falls in its /tmp), the code reads the bound file at /LINK/y, and
    nothing appears in the host directory."""
    token = f"token-{link}"
    src = source_file(tmp_path, token)
    r = run_in(hostile, [("--bind", src, f"/{link}/sub/y")], READ, f"/{link}/sub/y")
    assert host_left(host_target) == [], f"created on the host through /{link}: {host_left(host_target)}\n" \
                                         + r.describe()
    assert r.rc == 0, r.describe()
    assert r.stdout.strip() == token, r.describe()


@pytest.mark.parametrize("link", ["abs", "rel", "mid", "chain"])
def test_symlinked_parent_resolves_inside_a_skeleton_root(tmp_path, hostile, host_target, link):
    """The same beside a bind at a new top-level directory, which gives the sandbox a skeleton
    root (the image's top-level entries bound, its links copied): the links still lead inside,
    and the new directory is made in the skeleton, neither on the host nor in the image."""
    token = f"token-{link}"
    src = source_file(tmp_path, token)
    r = run_in(hostile, [("--bind", src, "/newtop/a/y"), ("--bind", src, f"/{link}/sub/y")],
               "import sys; print(open(sys.argv[1]).read(), open(sys.argv[2]).read())", f"/{link}/sub/y",
               "/newtop/a/y")
    assert host_left(host_target) == [], f"created on the host through /{link}: {host_left(host_target)}\n" \
                                         + r.describe()
    assert not os.path.lexists(hostile / "newtop"), "made /newtop in the image on the host"
    assert r.rc == 0, r.describe()
    assert r.stdout.split() == [token, token], r.describe()


def test_debian_var_lock(tmp_path, hostile):
    """/var/lock -> /run/lock: the bind lands in the sandbox's own /run (a fresh tmpfs, where
    /run/lock is created), not in the host's /run/lock."""
    name = f"sandboxd-test-{os.getpid()}-{os.urandom(4).hex()}"
    host_path = os.path.join("/run/lock", name)
    src = source_file(tmp_path, "lock-token")
    try:
        r = run_in(hostile, [("--bind", src, f"/var/lock/{name}")], READ, f"/var/lock/{name}")
        assert not os.path.lexists(host_path), f"created the host's {host_path}\n" + r.describe()
        assert r.rc == 0, r.describe()
        assert r.stdout.strip() == "lock-token", r.describe()
    finally:
        if os.path.lexists(host_path):
            os.unlink(host_path)


@pytest.mark.parametrize("dst,why", [
    ("/magic/y", "Too many levels of symbolic links"),  # a magic link is never followed
    ("/loop/y", "Too many levels of symbolic links"),
    ("/final", "is a symlink"),
    ("/ro/new", "does not exist in the read-only rootfs"),
    ("/etc/new/y", "does not exist in the read-only rootfs"),
])
def test_refused_destinations(tmp_path, hostile, host_target, dst, why):
    """Destinations that lead out of the root, loop, end in a symlink, or need a directory in
    the read-only rootfs: one line on stderr, exit 125, nothing on the host."""
    src = source_file(tmp_path, "x")
    r = run_in(hostile, [("--bind", src, dst)])
    assert host_left(host_target) == [], f"created on the host through {dst}: {host_left(host_target)}\n" \
                                         + r.describe()
    sbx.assert_usage_error(r, f"--bind to {dst}")
    assert why in r.stderr, r.describe()
    assert f"`{dst}`" in r.stderr, r.describe()


def test_tmpfs_parents_are_created(tmp_path, hostile, host_target):
    """Missing directories under the writable places are still created (mkdir -p), for a file
    and for a directory; the read-only bind is read-only, both are nosuid and nodev."""
    src = source_file(tmp_path, "deep")
    d = tmp_path / "dir"
    d.mkdir()
    d.chmod(0o777)
    r = run_in(hostile, [("--bind", src, "/workspace/a/b/c.txt"), ("--bind-rw", d, "/tmp/x/y")], """
import json
opts = {}
for line in open('/proc/self/mountinfo'):
    f = line.split()
    opts[f[4]] = sorted(set(f[5].split(',')) & {'ro', 'rw', 'nosuid', 'nodev'})
try:
    open('/workspace/a/b/c.txt', 'w')
    ro = 'WROTE'
except OSError as e:
    ro = e.strerror
open('/tmp/x/y/out', 'w').write('rw')
print(json.dumps({"read": open('/workspace/a/b/c.txt').read(), "ro": ro,
                  "file": opts.get('/workspace/a/b/c.txt'), "dir": opts.get('/tmp/x/y')}))
""")
    assert r.rc == 0, r.describe()
    facts = r.json()
    assert facts["read"] == "deep" and facts["ro"] == "Read-only file system", facts
    assert facts["file"] == ["nodev", "nosuid", "ro"] and facts["dir"] == ["nodev", "nosuid", "rw"], facts
    assert (d / "out").read_text() == "rw"
    assert host_left(host_target) == []


def test_deep_destination(tmp_path, hostile):
    """A destination 300 directories deep, below a symlink whose target climbs with `..`: no
    depth limit of its own in either setup path, only the kernel's PATH_MAX."""
    src = source_file(tmp_path, "deep-down")
    dst = "/mid/" + "/".join(["d"] * 300) + "/f"
    r = run_in(hostile, [("--bind", src, dst)], READ, dst)
    assert r.rc == 0, r.describe()
    assert r.stdout.strip() == "deep-down"


def test_bind_into_rw_bind_with_planted_symlink(tmp_path, host_target):
    """A --bind-rw directory is host content the code may have filled with symlinks in an
    earlier run; a later bind below it resolves them inside the sandbox too (real rootfs)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    os.symlink(host_target, shared / "planted")
    src = source_file(tmp_path, "planted-token")
    r = run_in(None, [("--bind-rw", shared, "/workspace/shared"), ("--bind", src, "/workspace/shared/planted/y")],
               READ, "/workspace/shared/planted/y")
    assert host_left(host_target) == [], f"created on the host: {host_left(host_target)}\n" + r.describe()
    assert r.rc == 0, r.describe()
    assert r.stdout.strip() == "planted-token"
