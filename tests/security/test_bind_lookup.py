"""A program looked up in a --bind source is resolved inside that source, never on the host (issue
34, item 9). With `--bind DIR:/usr/local/bin -- NAME`, the lookup used to stat DIR/NAME on the host
following links: a link in DIR to a host-only file was "found" (and then failed inside the sandbox
with another message and status), while a link to a missing file was "not found": the difference
told whether any host path existed. Now a link is followed inside DIR only, as if DIR were `/`."""
import os
import subprocess

import pytest

import sbx

pytestmark = pytest.mark.security


@pytest.fixture(autouse=True)
def _binary():
    sbx.require_sandboxd()


def run(*args):
    cmd = [sbx.SANDBOXD, "exec", "--rootfs", sbx.ROOTFS, *[str(a) for a in args]]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                       env=dict(os.environ, SANDBOXD_AUDIT_LOG="off"))
    return sbx.Result(cmd, p.returncode, p.stdout, p.stderr, 0.0)


@pytest.fixture
def tree(tmp_path):
    """DIR (bin/) with links out of it to a host-only executable and to nothing, and a program of
    its own reached directly and through a link inside it."""
    tmp_path.chmod(0o755)
    secret = tmp_path / "secret"
    secret.mkdir()
    tool = secret / "tool"
    tool.write_text("#!/bin/sh\necho host-only\n")
    tool.chmod(0o755)
    b = tmp_path / "bin"
    b.mkdir()
    b.chmod(0o755)
    (b / "abs-exists").symlink_to(tool)
    (b / "abs-missing").symlink_to(secret / "missing")
    (b / "rel-exists").symlink_to("../secret/tool")
    (b / "rel-missing").symlink_to("../secret/missing")
    own = b / "own"
    own.write_text("#!/bin/sh\necho own \"$1\"\n")
    own.chmod(0o755)
    (b / "own-link").symlink_to("own")
    return b


def _shape(r, name):
    """What a caller learns from a run: the status and stderr with the name taken out."""
    return r.rc, r.stderr.replace(name, "NAME"), r.out


def test_links_out_of_the_bind_tell_nothing_about_the_host(tree):
    results = {n: run("--bind", f"{tree}:/usr/local/bin", "--", n)
               for n in ("abs-exists", "abs-missing", "rel-exists", "rel-missing")}
    shapes = {n: _shape(r, n) for n, r in results.items()}
    assert len(set(shapes.values())) == 1, "\n\n".join(r.describe() for r in results.values())
    r = results["abs-exists"]
    assert r.rc == 127 and "not found along the sandbox's PATH" in r.stderr and r.out == b"", r.describe()


def test_programs_in_the_bind_are_still_found(tree):
    r = run("--bind", f"{tree}:/usr/local/bin", "--", "own", "a")
    assert r.rc == 0 and r.stdout == "own a\n", r.describe()
    r = run("--bind", f"{tree}:/usr/local/bin", "--", "own-link", "b")
    assert r.rc == 0 and r.stdout == "own b\n", r.describe()
    # Through a bind of the parent: the lookup descends inside the source.
    r = run("--bind", f"{tree.parent}:/usr/local", "--env", "PATH=/usr/local/bin:/usr/bin:/bin", "--", "own", "c")
    assert r.rc == 0 and r.stdout == "own c\n", r.describe()
