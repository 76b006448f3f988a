"""The Makefile: header dependencies (-MMD), the hardening flags in the objects, and install /
uninstall. Run by tests/run (--only build) on the build tree it tests (SANDBOXD's directory)."""
import os
import platform
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOXD = os.path.abspath(os.environ.get("SANDBOXD") or os.path.join(REPO, "build", "sandboxd"))
BUILD = os.path.dirname(SANDBOXD)
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(*tools):
    for t in tools + ("make",):
        if not shutil.which(t):
            if CI:
                pytest.fail(f"CI=true and {t} is missing")
            pytest.skip(f"{t} is not installed")
    if not os.path.isdir(os.path.join(BUILD, "obj")):
        pytest.skip(f"{BUILD} is not a build tree of this Makefile (run make)")


def built():
    """The build tree is up to date (never rebuilt here: tests/run --build build-asan is built with
    other flags by `make asan`)."""
    if make("-q", "all", check=False).returncode != 0:
        pytest.fail(f"{BUILD} is not up to date: run make (BUILD={BUILD})")


def make(*args, check=True):
    p = subprocess.run(["make", "-C", REPO, f"BUILD={BUILD}", *args], capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def includes(path, seen):
    """The src/ headers path includes, directly or not (its #include "..." lines)."""
    with open(path) as f:
        for name in re.findall(r'(?m)^\s*#\s*include\s+"([^"]+)"', f.read()):
            h = os.path.join(REPO, "src", name)
            if os.path.exists(h) and h not in seen:
                seen.add(h)
                includes(h, seen)
    return seen


def test_a_header_change_rebuilds_exactly_its_includers():
    need()
    built()
    # Each layer's directory (src/README.md); src/inside/ is built apart.
    srcs = sorted(os.path.join(d, f) for d in os.listdir(os.path.join(REPO, "src"))
                  if d != "inside" and os.path.isdir(os.path.join(REPO, "src", d))
                  for f in os.listdir(os.path.join(REPO, "src", d)) if f.endswith(".c"))
    deps = {s: includes(os.path.join(REPO, "src", s), set()) for s in srcs}
    header = os.path.join(REPO, "src", "base", "json.h")
    want = {s for s in srcs if header in deps[s]}
    assert want and len(want) < len(srcs)
    out = make("-n", "-W", "src/base/json.h", "all").stdout
    got = {s for s in srcs if re.search(rf"-o {re.escape(BUILD)}/obj/{s[:-2]}\.o\b", out)}
    assert got == want


@pytest.mark.skipif(platform.machine() != "x86_64", reason="CET notes and these probe instructions are x86-64's")
def test_objects_carry_cet_and_stack_clash_probes():
    need("readelf", "objdump")
    built()
    obj = os.path.join(BUILD, "obj")
    for o in files_under(obj):
        if o.endswith(".o"):
            notes = subprocess.run(["readelf", "-n", os.path.join(obj, o)], capture_output=True, text=True).stdout
            assert re.search(r"x86 feature: IBT, SHSTK", notes), f"{o} built without -fcf-protection"
    # A frame over a page (cli_exec.c's PATH_MAX buffers) is grown a page at a time, each probed.
    asm = subprocess.run(["objdump", "-d", os.path.join(obj, "cli", "cli_exec.o")], capture_output=True,
                         text=True).stdout
    assert re.search(r"sub\s+\$0x1000,%rsp\n.*(or|mov)q\s+\$0x0,\(%rsp\)", asm), "no stack-clash probes"


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_install_then_uninstall_leaves_nothing(tmp_path):
    need()
    dest = tmp_path / "dest"
    make("install", f"DESTDIR={dest}", "PREFIX=/usr/local")
    files = files_under(dest)
    for want in ("usr/local/bin/sandboxd", "usr/local/share/sandboxd/policy/default.policy",
                 "usr/local/share/man/man1/sandboxd.1", "usr/local/share/man/man5/sandboxd.policy.5"):
        assert want in files, files
    # The store where `rootfs list` and exec look once installed.
    store = dest / "var/lib/sandboxd/rootfs"
    assert store.is_dir()
    env = {k: v for k, v in os.environ.items() if k != "SANDBOXD_POLICY_DIR"}
    r = subprocess.run([str(dest / "usr/local/bin/sandboxd"), "policy", "check", "default"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr  # found in PREFIX/share/sandboxd/policy, beside the binary
    make("uninstall", f"DESTDIR={dest}", "PREFIX=/usr/local")
    assert files_under(dest) == []
    assert not (dest / "usr/local/share/sandboxd").exists() and not (dest / "var/lib/sandboxd").exists()


def test_uninstall_keeps_imported_rootfs_trees(tmp_path):
    need()
    dest = tmp_path / "dest"
    make("install", f"DESTDIR={dest}", "PREFIX=/usr/local")
    tree = dest / "var/lib/sandboxd/rootfs/imported"
    tree.mkdir()
    (tree / "file").write_text("user data")
    make("uninstall", f"DESTDIR={dest}", "PREFIX=/usr/local")
    assert files_under(dest) == ["var/lib/sandboxd/rootfs/imported/file"]


def test_sources_state_their_license():
    """Every source file of the tree says its license in its first lines, as LICENSE is
    Apache-2.0 (issue #35 item 5): C and headers, the Python inside the sandbox, scripts, bench."""
    files = subprocess.run(["git", "-C", REPO, "ls-files", "src", "scripts", "bench"], capture_output=True,
                           text=True, check=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    checked, missing = 0, []
    for f in files:
        path = os.path.join(REPO, f)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            head = open(path, encoding="utf-8").read(400)
        except UnicodeDecodeError:
            continue
        first = head.split("\n", 1)[0]
        source = f.endswith((".c", ".h", ".py", ".mjs", ".sh")) or (
            first.startswith("#!") and re.search(r"python|bash|/sh\b|node", first))
        if not source:
            continue
        checked += 1
        if "SPDX-License-Identifier: Apache-2.0" not in head:
            missing.append(f)
    assert checked > 150, checked
    assert not missing, missing
