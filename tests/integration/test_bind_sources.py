"""Bind and root sources (issue 34, item 1): each is resolved and opened once, when sandboxd starts
(or, for a root, when the client lists it), and every later sandbox binds it only if its path
still leads to that inode without a symlink; a source inside a --bind-rw tree, which sandboxed code
can change, is refused (a root is skipped and logged). Before, each sandbox opened the source by
path, following symlinks: a call that swapped a source in its writable tree for a link to
elsewhere had later sandboxes bind elsewhere. Runs as root and as the unprivileged user."""
import json
import os
import subprocess

import pytest

import sbx
from mcpsession import Mcp

# The policy's fork_template_calls in the fork case's policy (sbx.fork_calls_policy): the template
# binds the sources once; its successor binds them again.
TEMPLATE_CALLS = 8

SWAP = ("import os\nos.rename('/data/proj', '/data/proj.orig')\nos.symlink(%r, '/data/proj')\nprint('swapped')\n")
LIST = "import os\nprint(sorted(os.listdir(%r)))\n"


@pytest.fixture
def tree(host_dir):
    """host_dir/rw (the --bind-rw tree, with proj/), host_dir/src/proj (a source outside it) and
    host_dir/private/id_rsa, which no bind names (readable by the sandbox's host uid, so that a
    sandbox which got it bound would read it)."""
    for d in ("rw/proj", "src/proj", "private"):
        (host_dir / d).mkdir(parents=True)
    (host_dir / "rw").chmod(0o777)
    for d in ("rw/proj", "src/proj"):
        (host_dir / d / "notes.txt").write_text("notes\n")
    (host_dir / "private/id_rsa").write_text("SECRET\n")
    return host_dir


def text(r):
    return "".join(c.get("text", "") for c in r["content"] if c["type"] == "text")


def call(m, code):
    r = m.send("tools/call", {"name": "run_python", "arguments": {"code": code}})
    return r.get("isError", False), text(r)


def swap_on_host(tree):
    """What a sandbox with tree/src writable could do: the source replaced by a link to private."""
    os.rename(tree / "src/proj", tree / "src/proj.orig")
    os.symlink(tree / "private", tree / "src/proj")


# ---------------------------------------------------------------- exec


def test_exec_source_inside_a_bind_rw_tree_is_refused(tree):
    """--bind or --bind-rw of a directory inside another --bind-rw tree: one line, exit 125. The
    tree itself bound again read-only is fine (its name is outside the tree)."""
    sbx.require_sandboxd()
    rw = tree / "rw"
    for opt in ("--bind", "--bind-rw"):
        r = sbx.code("print('must not run')", opts=["--bind-rw", f"{rw}:/data", opt, f"{rw}/proj:/proj"])
        sbx.assert_usage_error(r, f"{opt} inside the tree")
        assert "lies inside a --bind-rw tree" in r.stderr, r.describe()
    r = sbx.code(LIST % "/ro", opts=["--bind-rw", f"{rw}:/data", "--bind", f"{rw}:/ro"])
    assert r.rc == 0 and r.stdout == "['proj']\n", r.describe()


def test_exec_run_does_not_bind_what_an_earlier_run_swapped_in(tree):
    """Two runs sharing a --bind-rw tree: the first swaps tree/proj for a link to private; the
    second, asked to bind tree/proj, must not bind private (before: it printed SECRET)."""
    sbx.require_sandboxd()
    rw = tree / "rw"
    r = sbx.code(SWAP % str(tree / "private"), opts=["--bind-rw", f"{rw}:/data"])
    assert r.rc == 0 and r.stdout == "swapped\n", r.describe()
    r = sbx.code("print(open('/proj/id_rsa').read())", opts=["--bind-rw", f"{rw}:/data", "--bind", f"{rw}/proj:/proj"])
    assert "SECRET" not in r.stdout, "bound the directory the first run's link points to\n" + r.describe()
    sbx.assert_usage_error(r, "a source in the tree")


def test_exec_does_not_follow_a_link_a_sandbox_planted(tree):
    """As root a sandbox's files are its host uid's, not root's: a later run that binds a path
    through a link one planted refuses it, even without that tree's --bind-rw (unprivileged they
    are the user's own, and only the --bind-rw of the same run tells them apart)."""
    sbx.require_sandboxd()
    sbx.root_only("the sandbox's host uid is the invoking user's")
    rw = tree / "rw"
    r = sbx.code(SWAP % str(tree / "private"), opts=["--bind-rw", f"{rw}:/data"])
    assert r.rc == 0, r.describe()
    r = sbx.code("print(open('/proj/id_rsa').read())", opts=["--bind", f"{rw}/proj:/proj"])
    assert "SECRET" not in r.stdout, r.describe()
    sbx.assert_usage_error(r, "a sandbox's link")
    assert "not following the symlink `proj`: it belongs to uid" in r.stderr, r.describe()


def test_exec_file_in_a_bind_rw_tree_is_run_but_a_planted_link_is_not_followed(tree):
    """FILE may lie in the run's --bind-rw tree (`--bind-rw .:/w tool.py`): its one sandbox binds
    it before any code runs. A link there, which an earlier run could have planted, is refused."""
    sbx.require_sandboxd()
    rw = tree / "rw"
    (rw / "tool.py").write_text("print('tool')\n")
    r = sbx.run(str(rw / "tool.py"), opts=["--bind-rw", f"{rw}:/data"])
    assert r.rc == 0 and r.stdout == "tool\n", r.describe()
    (tree / "private/key.py").write_text("print('SECRET')\n")
    os.symlink(tree / "private/key.py", rw / "run.py")
    r = sbx.run(str(rw / "run.py"), opts=["--bind-rw", f"{rw}:/data"])
    assert "SECRET" not in r.stdout, r.describe()
    sbx.assert_usage_error(r, "FILE through a link in the tree")
    assert "it lies in a --bind-rw tree" in r.stderr, r.describe()


# ---------------------------------------------------------------- mcp: --bind


@pytest.mark.parametrize("mode", ["prestart", "fork"])
def test_mcp_source_inside_a_bind_rw_tree_is_refused(tree, mode):
    """The issue's setup, `--bind-rw T:/data --bind T/proj:/proj`: refused at start, one line,
    exit 125 (before: call 1 swapped T/proj, and a later call read private's SECRET)."""
    sbx.require_sandboxd()
    rw = tree / "rw"
    p = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm-mode", mode, "--warm", "1",
                        "--bind-rw", f"{rw}:/data", "--bind", f"{rw}/proj:/proj"],
                       input="", capture_output=True, text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 125 and len(lines) == 1, p
    assert "--bind source" in lines[0] and "lies inside a --bind-rw tree" in lines[0], p


@pytest.mark.parametrize("mode", ["prestart", "fork"])
def test_mcp_later_sandboxes_bind_the_source_opened_at_start(tree, mode):
    """A source replaced by a link after start (as a sandbox that could write its directory
    would): no later call reads what the link points to; each gets an error that says why. In
    fork mode the template binds the sources once, so its successor (after its calls) is the one
    that must check (before: from then on every call read SECRET)."""
    sbx.require_sandboxd()
    m = Mcp("--warm-mode", mode, "--policy", sbx.fork_calls_policy(TEMPLATE_CALLS), "--bind", f"{tree}/src/proj:/proj",
            warm="1")
    try:
        assert call(m, LIST % "/proj") == (False, "['notes.txt']\n")
        swap_on_host(tree)
        outs = [call(m, LIST % "/proj") for _ in range(3 if mode == "prestart" else TEMPLATE_CALLS + 2)]
    finally:
        err = m.close()
    assert not any("id_rsa" in t for _, t in outs), outs
    assert all(e or t == "['notes.txt']\n" for e, t in outs), outs
    assert outs[-1][0] and "changed since sandboxd opened it" in outs[-1][1], outs[-1]
    assert "id_rsa" not in err


# ---------------------------------------------------------------- mcp: roots


class RootsMcp(Mcp):
    """A client with roots: answers the server's roots/list with self.roots (file:// URIs)."""

    def __init__(self, roots, *args, warm="0"):
        self.roots = roots
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", warm, "--audit-log", "off",
                                   *sbx.EGRESS_OPTS, "--roots", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.n = 0
        self.answered = 0
        self.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": True}},
                                 "clientInfo": {"name": "t", "version": "1"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        self.p.stdin.flush()
        self.wait_answered(1)

    def _answer(self, m):
        if m.get("method") == "roots/list" and "id" in m:
            self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                                           "result": {"roots": [{"uri": u} for u in self.roots]}}) + "\n")
            self.p.stdin.flush()
            self.answered += 1
            return True
        return False

    def wait_answered(self, n):
        """Until n roots/list were answered, then a ping: the server has read the answer."""
        while self.answered < n:
            line = self.p.stdout.readline()
            assert line, "sandboxd mcp closed its output: " + self.p.stderr.read()
            self._answer(json.loads(line))
        self.send("ping", {})

    def request(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            assert line, "sandboxd mcp closed its output: " + self.p.stderr.read()
            m = json.loads(line)
            if not self._answer(m) and m.get("id") == self.n:
                return m


@pytest.mark.parametrize("mode", ["prestart", "fork"])
def test_mcp_root_inside_a_bind_rw_tree_is_skipped(tree, mode):
    """The issue's roots setup: `--bind-rw T:/data --roots` and the root T/proj. The root is skipped
    with a log line; call 1 swaps T/proj, and no later call reads private's SECRET (before: the
    root was bound, and a later sandbox bound what the link points to)."""
    sbx.require_sandboxd()
    rw = tree / "rw"
    m = RootsMcp([(rw / "proj").as_uri()], "--warm-mode", mode, "--policy", sbx.fork_calls_policy(TEMPLATE_CALLS),
                 "--bind-rw", f"{rw}:/data", warm="1")
    try:
        assert call(m, SWAP % str(tree / "private")) == (False, "swapped\n")
        outs = [call(m, "import os\nprint(os.path.isdir('/roots/proj') and sorted(os.listdir('/roots/proj')))\n")
                for _ in range(3 if mode == "prestart" else TEMPLATE_CALLS + 2)]
    finally:
        err = m.close()
    assert not any("id_rsa" in t for _, t in outs), outs
    assert all(not e and t == "False\n" for e, t in outs), outs
    assert "skipped: its directory" in err and "lies inside a --bind-rw tree" in err, err


@pytest.mark.parametrize("mode", ["prestart", "fork"])
def test_mcp_root_replaced_after_it_was_listed_is_not_followed(tree, mode):
    """A root (outside any --bind-rw tree) replaced by a link after the client listed it: later
    sandboxes do not bind what the link points to (before: they did, once built anew)."""
    sbx.require_sandboxd()
    m = RootsMcp([(tree / "src/proj").as_uri()], "--warm-mode", mode, "--policy", sbx.fork_calls_policy(TEMPLATE_CALLS),
                 warm="1")
    try:
        assert call(m, LIST % "/roots/proj") == (False, "['notes.txt']\n")
        swap_on_host(tree)
        outs = [call(m, LIST % "/roots/proj") for _ in range(3 if mode == "prestart" else TEMPLATE_CALLS + 2)]
    finally:
        err = m.close()
    assert not any("id_rsa" in t for _, t in outs), outs
    assert outs[-1][0] and "changed since sandboxd opened it" in outs[-1][1], outs[-1]
    assert "id_rsa" not in err


@pytest.mark.parametrize("mode", ["prestart", "fork"])
def test_mcp_root_made_anew_is_bound_anew_when_listed_again(tree, mode):
    """A root's directory replaced by a new one at the same path (not a link): the next roots/list
    binds the new one, in fork mode too (its template is replaced for it)."""
    sbx.require_sandboxd()
    m = RootsMcp([(tree / "src/proj").as_uri()], "--warm-mode", mode, warm="1")
    try:
        assert call(m, LIST % "/roots/proj") == (False, "['notes.txt']\n")
        os.rename(tree / "src/proj", tree / "src/proj.old")
        (tree / "src/proj").mkdir()
        (tree / "src/proj/new.txt").write_text("new\n")
        m.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}) + "\n")
        m.p.stdin.flush()
        m.wait_answered(2)
        out = call(m, LIST % "/roots/proj")
    finally:
        m.close()
    assert out == (False, "['new.txt']\n"), out
