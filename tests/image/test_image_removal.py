"""Removing what an import built, however deep: a hostile layer can build a tree deeper than any
path (a symlink to its deepest directory, then more below that), which the import refuses and must
still remove completely, with no more than RM_MAX_DEPTH (64) directory fds open at once."""
import os
import resource
import subprocess

import pytest

import sbx
from imagelib import d, f, sym

pytestmark = pytest.mark.security

DEEP = "a/" * 1900  # each entry's path stays under PATH_MAX
NOFILE = 512  # fewer fds than the tree has levels


def few_fds():
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def test_deeper_than_fds_is_refused_and_removed(area):
    layer = [f(DEEP + "x"), sym("l", DEEP.rstrip("/")), d("l/" + "b/" * 1100)]
    src = area.layout([layer])
    env = dict(os.environ, **area.env)
    res = subprocess.run([sbx.SANDBOXD, "rootfs", "import", src, "--dir", area.store, "--name", "img"],
                         capture_output=True, text=True, env=env, timeout=120, preexec_fn=few_fds)
    assert res.returncode != 0, res.stdout
    assert res.stderr.count("\n") == 1, res.stderr
    # openat2 builds all 3000 levels and the file manifest refuses them; the fallback walk, which
    # holds a directory fd per level, stops on EMFILE first. Either way nothing is left behind
    # (the area fixture checks the store and the host).
    assert "deeper than 256 levels" in res.stderr or "Too many open files" in res.stderr, res.stderr
    assert not os.path.exists(area.tree())
