"""The fork template's preload (issue #36 item 3): `sandboxd mcp --warm-mode fork` on the data rootfs
imports the modules the rootfs names (or --preload) in its template, before any call, so a call
that imports them pays nothing. Every call is still fresh: what one call changes in those modules
(pandas options, matplotlib rcParams, open figures, numpy's global random state) never reaches the
next, and the random state differs per call. Runs as root and as the unprivileged user (tests/run)."""
import json
import platform

import pytest

import sbx
from mcpsession import Mcp
from test_mcp_fork import run

MODS = "numpy,pandas,matplotlib.pyplot"


def data_server(*args):
    sbx.require_sandboxd()
    sbx.require_data_rootfs()
    sbx.need(platform.machine() == "x86_64", "fork mode needs the C pid 1, built for x86_64 only", security=False)
    return Mcp("--rootfs", sbx.DATA_ROOTFS, "--warm-mode", "fork", *args)


@pytest.fixture(scope="module")
def preloaded():
    m = data_server("--preload", MODS)
    yield m
    m.close()


def facts(m, code):
    out = run(m, code)
    assert out[:1] in "{[", out
    return json.loads(out.split("\n--- ")[0])


LOADED = "import sys, json\nprint(json.dumps({m: m in sys.modules for m in %r}))\n" % MODS.split(",")


def test_a_call_finds_the_modules_imported(preloaded):
    assert facts(preloaded, LOADED) == {m: True for m in MODS.split(",")}


def test_without_preload_a_call_imports_them_itself():
    m = data_server("--preload", "")
    try:
        assert facts(m, LOADED) == {m: False for m in MODS.split(",")}
    finally:
        m.close()


def test_the_data_rootfs_names_what_to_preload():
    """Without --preload, the rootfs's label org.sandboxd.preload (scripts/build-rootfs sets it for
    the data rootfs)."""
    with open(sbx.DATA_ROOTFS.rstrip("/") + ".json") as f:
        label = json.load(f).get("Labels", {}).get("org.sandboxd.preload")
    sbx.need(label is not None, "this data rootfs predates the preload label (make rootfs-data)", security=False)
    m = data_server()
    try:
        assert facts(m, LOADED) == {m: True for m in label.split(",")}
    finally:
        m.close()


CHANGE = r'''
import json, matplotlib.pyplot as plt, numpy as np, pandas as pd
before = dict(rows=pd.get_option("display.max_rows"), lw=plt.rcParams["lines.linewidth"],
              figs=len(plt.get_fignums()), rand=float(np.random.rand()))
pd.set_option("display.max_rows", 7)
plt.rcParams["lines.linewidth"] = 9.5
plt.figure()
np.random.seed(1)
print(json.dumps(before))
'''


def test_what_a_call_changes_never_reaches_the_next(preloaded):
    first = facts(preloaded, CHANGE)
    second = facts(preloaded, CHANGE)
    for f in (first, second):
        assert f["rows"] == 60 and f["lw"] == 1.5 and f["figs"] == 0, f
    # Each call's numpy random state is its own: not the template's copy, nor the seed the first
    # call set.
    assert first["rand"] != second["rand"], (first, second)
    assert second["rand"] != 0.417022004702574, second  # np.random.seed(1); np.random.rand()


def test_random_state_differs_per_call(preloaded):
    """numpy's uniform and normal draws (a normal cached by the template would repeat) and
    Python's random."""
    code = ("import json, random, numpy as np\n"
            "print(json.dumps([float(np.random.rand()), float(np.random.normal()), random.random()]))\n")
    draws = [facts(preloaded, code) for _ in range(4)]
    assert all(len({d[i] for d in draws}) == 4 for i in range(3)), draws


def test_a_chart_from_a_csv_is_saved(preloaded):
    code = ("import pandas as pd, matplotlib.pyplot as plt, io\n"
            "df = pd.read_csv(io.StringIO('x,y\\n' + '\\n'.join(f'{i},{i*i}' for i in range(1000))))\n"
            "df.plot(x='x', y='y')\nplt.savefig('/workspace/out/chart.png')\nprint(int(df.y.sum()))\n")
    r = preloaded.send("tools/call", {"name": "run_python", "arguments": {"code": code}})
    text = "".join(c["text"] for c in r["content"] if c["type"] == "text")
    assert text.startswith(str(sum(i * i for i in range(1000)))), r
    assert any(c.get("type") == "image" or "chart.png" in json.dumps(c) for c in r["content"]), r


def test_a_module_that_does_not_import_fails_at_start():
    sbx.require_sandboxd()
    m = None
    try:
        with pytest.raises(AssertionError) as e:
            m = data_server("--preload", "numpy,no_such_module_here")
            run(m, "print(1)")
        assert "no_such_module_here" in str(e.value), e.value
    finally:
        if m is not None:
            m.p.kill()


@pytest.mark.parametrize("bad", ["numpy,", ",numpy", "os.", "a..b", "1abc", "a b", "a;b"])
def test_a_bad_list_is_refused(bad):
    sbx.require_sandboxd()
    r = sbx.run_sandboxd("mcp", "--preload", bad) if hasattr(sbx, "run_sandboxd") else None
    if r is None:
        import subprocess
        r = subprocess.run([sbx.SANDBOXD, "mcp", "--preload", bad], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=30)
    assert r.returncode != 0 and "--preload" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def caps(m):
    return json.loads(m.send("resources/read", {"uri": "sandboxd://capabilities"})["contents"][0]["text"])


def test_the_capabilities_say_what_the_template_holds(preloaded):
    run(preloaded, "print(1)")  # the template is ready
    c = caps(preloaded)
    lim = c["concurrency"]
    m = data_server("--preload", "")
    try:
        run(m, "print(1)")
        bare = caps(m)
    finally:
        m.close()
    bare = bare["concurrency"]
    assert lim["preload"] == MODS and bare["preload"] == "", (lim, bare)
    # numpy, pandas and matplotlib hold tens of MiB that every call's fork starts from.
    assert lim["fork_template_bytes"] > bare["fork_template_bytes"] + (20 << 20), (lim, bare)


def test_a_backend_the_code_picks_is_kept_and_nothing_saved(preloaded):
    """As cold: code that picks its own backend gets it, and its open figures are not saved as the
    sandbox's plots backend would (matplotlib is imported already, in the template)."""
    code = ("import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1]); plt.show()\nprint('backend', plt.get_backend())\n")
    r = preloaded.send("tools/call", {"name": "run_python", "arguments": {"code": code}})
    text = "".join(c["text"] for c in r["content"] if c["type"] == "text")
    assert text.startswith("backend agg\n"), r
    assert r["structuredContent"]["files"] == [], r


GC = r'''
import gc, json, resource, weakref
class Node: pass
a = Node(); a.self = a; ref = weakref.ref(a); del a  # a cycle of the call's own
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
found = gc.collect()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps(dict(faults=faults, collected=ref() is None, enabled=gc.isenabled())))
'''


def test_a_full_collection_leaves_the_templates_pages_alone(preloaded):
    """The template's objects are frozen before the first fork (gc.freeze): a full collection in a
    call walks only the call's own, so it copies a few pages, not the template's tens of MiB (each
    object it visits would be written, and its page copied: about 7,700 page faults here before),
    and still frees the call's garbage."""
    f = facts(preloaded, GC)
    assert f["collected"] and f["enabled"], f
    assert f["faults"] < 1500, f
