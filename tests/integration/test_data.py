"""The data rootfs (make rootfs-data): numpy, pandas and matplotlib work in a sandbox on a
read-only tree; matplotlib's font list is the one built into the image (nothing scanned or
written at import); `--rootfs NAME` finds it in the store; and the plots backend
(src/inside/sandboxd/plots.py) saves plt.show()'s figures to /workspace/out as PNG files.
Skipped when the data rootfs is absent, except with CI=true (make check builds it)."""
import json
import os
import shutil
import struct
import subprocess
import tempfile

import pytest

import sbx

HELPERS = os.path.join(sbx.REPO, "src", "inside")
# What the runner gives run_python; for exec the test binds the helpers itself.
PLOTS = ["--bind", f"{HELPERS}:/run/sandboxd/python", "--env", "PYTHONPATH=/run/sandboxd/python",
         "--env", "MPLBACKEND=module://sandboxd.plots"]


@pytest.fixture(autouse=True)
def _data_rootfs():
    sbx.require_data_rootfs()


def data(src, opts=(), **kw):
    r = sbx.code(src, rootfs=sbx.DATA_ROOTFS, opts=list(opts), **kw)
    assert r.rc == 0, r.describe()
    return r


@pytest.fixture
def bound_dir():
    d = tempfile.mkdtemp(prefix="data-", dir=sbx.WORK)
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_pandas_reads_a_bound_csv(bound_dir):
    rows = [("alice", 3, 1.5), ("bob", 4, 2.25), ("carol", 5, -0.75)]
    with open(os.path.join(bound_dir, "people.csv"), "w") as f:
        f.write("name,n,x\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    os.chmod(os.path.join(bound_dir, "people.csv"), 0o644)
    r = data("import json, pandas as pd\n"
             "df = pd.read_csv('/workspace/data/people.csv')\n"
             "print(json.dumps({'cols': list(df.columns), 'n': int(df.n.sum()), 'x': float(df.x.mean()),"
             " 'names': df.sort_values('x').name.tolist(), 'version': pd.__version__}))",
             opts=["--bind", f"{bound_dir}:/workspace/data"])
    d = r.json()
    assert d["cols"] == ["name", "n", "x"] and d["n"] == 12, d
    assert d["x"] == pytest.approx(1.0) and d["names"] == ["carol", "alice", "bob"], d


def test_numpy_computes():
    r = data("import json, numpy as np\n"
             "a = np.array([[3.0, 1.0], [1.0, 2.0]]); b = np.array([9.0, 8.0])\n"
             "x = np.linalg.solve(a, b)\n"
             "m = np.arange(1, 200001, dtype=np.int64)\n"
             "print(json.dumps({'x': x.tolist(), 'sum': int(m.sum()), 'dot': float((np.ones((300, 300)) @ np.ones(300)).sum()),"
             " 'version': np.__version__}))")
    d = r.json()
    assert d["x"] == pytest.approx([2.0, 3.0]), d
    assert d["sum"] == 200000 * 200001 // 2 and d["dot"] == 300.0 * 300, d


def png_facts(names):
    """Code that prints, per file of /workspace/out, its size, PNG magic and IHDR dimensions."""
    return ("import json, os, struct\n"
            "out = {}\n"
            "for n in sorted(os.listdir('/workspace/out')):\n"
            "    p = '/workspace/out/' + n\n"
            "    if os.path.islink(p):\n"
            "        out[n] = 'link'; continue\n"
            "    b = open(p, 'rb').read(24)\n"
            "    out[n] = [os.path.getsize(p), b[:8].hex(), *struct.unpack('>II', b[16:24])]\n"
            f"print(json.dumps({{'files': out, {names}}}))\n")


PNG = b"\x89PNG\r\n\x1a\n".hex()


def test_plt_show_saves_each_open_figure_as_png():
    # Two figures shown at once, then one more: figure-1..3, N counting across the run; the
    # figures are closed by show(); a name that exists (here a link to a host path) is skipped,
    # never followed or replaced.
    r = data("import os, matplotlib.pyplot as plt\n"
             "backend = plt.get_backend()\n"
             "plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2, 3], [1, 4, 9])\n"
             "plt.figure(figsize=(2, 2), dpi=50); plt.bar([1, 2], [3, 4])\n"
             "plt.show()\n"
             "open_after = plt.get_fignums()\n"
             "os.symlink('/etc/passwd', '/workspace/out/figure-3.png')\n"
             "plt.figure(figsize=(3, 1), dpi=100); plt.show()\n"
             + png_facts("'backend': backend, 'open_after': open_after, 'open_end': plt.get_fignums()"),
             opts=PLOTS)
    d = r.json()
    assert d["backend"] == "module://sandboxd.plots" and d["open_after"] == [] and d["open_end"] == [], d
    f = d["files"]
    assert sorted(f) == ["figure-1.png", "figure-2.png", "figure-3.png", "figure-4.png"], d
    assert f["figure-3.png"] == "link", d
    for name, (w, h) in {"figure-1.png": (400, 300), "figure-2.png": (100, 100), "figure-4.png": (300, 100)}.items():
        size, magic, width, height = f[name]
        assert magic == PNG and (width, height) == (w, h) and size > 100, (name, f[name])


def test_no_backend_without_mplbackend_and_none_where_matplotlib_is_absent():
    # The backend is opt-in (MPLBACKEND): without it matplotlib keeps its own (Agg here) and
    # plt.show() writes nothing; the helpers in a rootfs without matplotlib change nothing.
    r = data("import os, matplotlib.pyplot as plt\n"
             "plt.plot([1]); plt.show()\n"
             "print(plt.get_backend(), len(os.listdir('/workspace/out')))")
    # Every sandbox starts with an empty /workspace/out; nothing was written there.
    assert r.stdout.split() == ["agg", "0"], r.describe()
    r = sbx.code("import importlib.util, os\n"
                 "print(importlib.util.find_spec('matplotlib') is None, len(os.listdir('/workspace/out')))",
                 opts=PLOTS)
    assert r.rc == 0 and r.stdout.split() == ["True", "0"], r.describe()


def test_rootfs_is_read_only_and_the_font_list_is_not_rebuilt():
    # matplotlib loads the font list built into the image (through the link in MPLCONFIGDIR),
    # writes none, and nothing is compiled at import: every imported module has its .pyc.
    r = data("import logging, os, sys, json\n"
             "logging.basicConfig(level=logging.DEBUG, format='LOG %(name)s %(message)s')\n"
             "import numpy, pandas, matplotlib.pyplot as plt\n"
             "cache = plt.matplotlib.get_cachedir()\n"
             "lists = [n for n in os.listdir(cache) if n.startswith('fontlist-')]\n"
             "try:\n"
             "    open('/usr/lib/python3/dist-packages/sandboxd-write-test', 'w'); ro = False\n"
             "except OSError as e:\n"
             "    ro = e.errno\n"
             "nopyc = sorted(n for n, m in sys.modules.items() if getattr(m, '__cached__', None)"
             " and getattr(m, '__file__', None) and not os.path.exists(m.__cached__))\n"
             "print(json.dumps({'cache': cache, 'lists': lists, 'link': os.readlink(os.path.join(cache, lists[0])),"
             " 'ro': ro, 'nopyc': nopyc, 'dont_write': sys.flags.dont_write_bytecode}))")
    d = r.json()
    assert d["ro"] == 30 and d["dont_write"] == 1, d  # EROFS
    assert d["cache"] == "/tmp/matplotlib" and len(d["lists"]) == 1, d
    assert d["link"].startswith("/var/cache/matplotlib/fontlist-"), d
    assert d["nopyc"] == [], d
    assert "Using fontManager instance from /tmp/matplotlib/fontlist-" in r.stderr, r.describe()
    assert "generated new fontManager" not in r.stderr and "building the font cache" not in r.stderr
    assert "is not a writable directory" not in r.stderr and "WARNING" not in r.stderr, r.describe()


def test_font_list_is_seeded_when_the_launcher_drops_the_image_env():
    # A launcher that does not apply the image's Env (or code that drops MPLCONFIGDIR): unset, it
    # is set and seeded too; a directory the user chose is left alone (matplotlib builds its own
    # list there).
    r = data("import logging, os\n"
             "logging.basicConfig(level=logging.DEBUG, format='LOG %(message)s')\n"
             "del os.environ['MPLCONFIGDIR']\n"
             "import matplotlib.font_manager\n"
             "print(os.environ['MPLCONFIGDIR'])")
    assert r.stdout == "/tmp/matplotlib\n" and "Using fontManager instance from /tmp/matplotlib/" in r.stderr, \
        r.describe()
    r = data("import logging, os\n"
             "logging.basicConfig(level=logging.DEBUG, format='LOG %(message)s')\n"
             "import matplotlib.font_manager\n"
             "print(sorted(os.listdir('/workspace/mine')), os.path.islink('/workspace/mine/' + os.listdir('/workspace/mine')[0]))",
             opts=["--env", "MPLCONFIGDIR=/workspace/mine"], timeout=120)
    assert r.stdout.startswith("['fontlist-") and r.stdout.endswith(" False\n"), r.describe()
    assert "generated new fontManager" in r.stderr, r.describe()


def test_rootfs_by_name_from_the_store():
    store = os.path.dirname(sbx.DATA_ROOTFS)
    name = os.path.basename(sbx.DATA_ROOTFS)
    env = dict(os.environ, SANDBOXD_ROOTFS_DIR=store)
    p = subprocess.run([sbx.SANDBOXD, "exec", "--rootfs", name, "-c", "import numpy; print('ok')"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and p.stdout == "ok\n", p
    p = subprocess.run([sbx.SANDBOXD, "exec", "--rootfs", "no-such-rootfs", "-c", "pass"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 125 and p.stdout == "", p
    assert p.stderr.count("\n") == 1 and "--rootfs `no-such-rootfs`: no such rootfs in the store" in p.stderr, p
    if os.path.exists(sbx.DATA_ROOTFS + ".json"):  # imported: listed
        assert name in p.stderr, p
    for bad in ("..", "a b", "x;y"):
        p = subprocess.run([sbx.SANDBOXD, "exec", "--rootfs", bad, "-c", "pass"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 125 and "not a rootfs name" in p.stderr and p.stderr.count("\n") == 1, p


def test_mcp_rootfs_by_name():
    store = os.path.dirname(sbx.DATA_ROOTFS)
    env = dict(os.environ, SANDBOXD_ROOTFS_DIR=store, SANDBOXD_AUDIT_LOG="off")
    p = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", "no-such-rootfs"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30, env=env)
    assert p.returncode == 125 and p.stdout == "" and p.stderr.count("\n") == 1, p
    assert "--rootfs `no-such-rootfs`: no such rootfs in the store" in p.stderr, p
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_python", "arguments": {"code": "import numpy, pandas; print(numpy.int64(6) * 7)"}}}]
    srv = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", os.path.basename(sbx.DATA_ROOTFS)], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        srv.stdin.write("".join(json.dumps(m) + "\n" for m in msgs))
        srv.stdin.flush()
        for line in srv.stdout:
            reply = json.loads(line)
            if reply.get("id") == 2:
                break
        assert reply["result"]["structuredContent"]["status"] == "ok", reply
        assert reply["result"]["content"][0]["text"] == "42\n", reply
    finally:
        srv.stdin.close()  # EOF: sandboxd mcp ends its sandboxes and exits
        try:
            assert srv.wait(timeout=20) == 0
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()


ENV_CODE = "import json, os; print(json.dumps(dict(os.environ)))"


@pytest.mark.parametrize("mode", [("prestart", "0"), ("prestart", "1"), ("fork", "0")],
                         ids=["cold", "warm", "fork"])
def test_mcp_applies_the_image_env_as_exec_does(mode):
    """The image's Env (the rootfs's metadata, NAME.json) is under the policy's env in every
    sandbox, `sandboxd mcp`'s (cold, warm or forked) as `sandboxd exec`'s: the data rootfs's
    MPLCONFIGDIR and PYTHONDONTWRITEBYTECODE are there before anything imports matplotlib."""
    from mcpsession import Mcp
    with open(sbx.DATA_ROOTFS + ".json") as f:
        image = dict(e.split("=", 1) for e in json.load(f)["Env"])
    assert image.get("MPLCONFIGDIR") == "/tmp/matplotlib", image
    exec_env = json.loads(data(ENV_CODE).stdout)
    warm_mode, warm = mode
    m = Mcp("--rootfs", sbx.DATA_ROOTFS, "--warm-mode", warm_mode, warm=warm)
    try:
        for _ in range(2):  # the second from the refilled pool, or a second fork
            r = m.send("tools/call", {"name": "run_python", "arguments": {"code": ENV_CODE}})
            assert r["structuredContent"]["status"] == "ok", r
            mcp_env = json.loads(r["structuredContent"]["stdout"])
            assert {k: mcp_env.get(k) for k in image} == {k: exec_env[k] for k in image}, (mcp_env, exec_env)
            assert mcp_env["MPLCONFIGDIR"] == "/tmp/matplotlib", mcp_env
    finally:
        m.close()
