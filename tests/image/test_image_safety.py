"""Hostile layers: nothing outside the destination may be created, changed or deleted.

Every test runs under both path resolvers (openat2 RESOLVE_IN_ROOT, and the component-by-component
fallback forced with SANDBOXD_NO_OPENAT2=1); the `area` fixture then checks that the sentinel
directory outside the store is untouched and that no temporary directory was left behind."""
import os

import pytest

from imagelib import d, dev, f, fifo, hard, sym

pytestmark = pytest.mark.security


def ok(res):
    assert res.returncode == 0, res.stderr
    return res


def refused(res, *words):
    assert res.returncode != 0, res.stdout
    assert res.stderr.count("\n") == 1, res.stderr  # one line
    for w in words:
        assert w in res.stderr, res.stderr
    return res


def test_absolute_paths_land_inside(area):
    victim = os.path.join(area.outside, "victim")
    ok(area.run(area.layout([[f(victim, b"pwned\n"), f("/abs-top", b"x")]])))
    assert open(area.tree() + victim, "rb").read() == b"pwned\n"
    assert open(os.path.join(area.tree(), "abs-top"), "rb").read() == b"x"


@pytest.mark.parametrize("name", ["../victim", "a/../../victim", "../../../../../../../../" + "x", "./../x"])
def test_dotdot_refused(area, name):
    refused(area.run(area.layout([[d("a"), f(name, b"pwned\n")]])), "`..`")
    assert not os.path.exists(area.tree())


def test_write_through_symlink(area):
    # evil -> the outside dir (absolute), then a file "through" it.
    res = area.run(area.layout([[sym("evil", area.outside), f("evil/victim", b"pwned\n")]]))
    refused(res, "evil/victim")


def test_write_through_relative_symlink_stays_inside(area):
    # up -> ../../..: resolved inside the root, ".." stops at the root.
    depth = area.outside.count("/") + 2
    ok(area.run(area.layout([[sym("up", "../" * depth), f("up/escaped", b"x"),
                              sym("root", "/"), f("root/also", b"y")]])))
    assert open(os.path.join(area.tree(), "escaped")).read() == "x"
    assert open(os.path.join(area.tree(), "also")).read() == "y"
    assert os.path.islink(os.path.join(area.tree(), "up"))


def test_symlink_replaces_directory_partway(area):
    entries = [d("d"), f("d/a", b"a"), sym("d", area.outside), f("d/victim", b"pwned\n")]
    refused(area.run(area.layout([entries])), "d/victim")


def test_symlink_replaces_directory_across_layers(area):
    # Layer 2 turns d into a symlink to an in-tree directory; layer 3 writes through it: allowed,
    # but only inside.
    l1 = [d("d"), f("d/a", b"a"), d("real")]
    l2 = [sym("d", "/real")]
    l3 = [f("d/b", b"b")]
    ok(area.run(area.layout([l1, l2, l3])))
    t = area.tree()
    assert os.path.islink(os.path.join(t, "d"))
    assert open(os.path.join(t, "real", "b")).read() == "b"


def test_symlink_then_overwrite_of_symlink_target(area):
    # A regular file entry at a symlink's path replaces the symlink; it never writes through it.
    ok(area.run(area.layout([[sym("victim", os.path.join(area.outside, "victim")), f("victim", b"pwned\n")]])))
    t = os.path.join(area.tree(), "victim")
    assert not os.path.islink(t) and open(t).read() == "pwned\n"


@pytest.mark.parametrize("target", ["OUT/victim", "../outside/victim", "viasym/victim"])
def test_hardlink_outside_refused(area, target):
    target = target.replace("OUT", area.outside)
    entries = [sym("viasym", area.outside), hard("hl", target)]
    res = area.run(area.layout([entries]))
    refused(res, "hl")
    assert not os.path.exists(area.tree())


def test_hardlink_inside_works(area):
    ok(area.run(area.layout([[f("a", b"data"), hard("b", "a"), hard("c", "/a")]])))
    t = area.tree()
    assert os.stat(os.path.join(t, "a")).st_ino == os.stat(os.path.join(t, "b")).st_ino
    assert os.stat(os.path.join(t, "a")).st_nlink == 3


@pytest.mark.parametrize("name", [".wh...", "a/.wh...", ".wh.", "a/.wh..", "../.wh.outside", ".wh..wh.foo"])
def test_whiteout_naming_parent_refused(area, name):
    refused(area.run(area.layout([[d("a"), f("a/x", b"x")], [f(name)]])), "whiteout" if ".." not in name[:3] else "")
    assert not os.path.exists(area.tree())


def test_whiteout_outside_paths_stay_inside(area):
    # Absolute whiteouts and whiteouts through a symlink to the outside dir only touch the tree.
    l1 = [sym("out", area.outside), d("keep"), f("keep/victim", b"mine")]
    l2 = [f(os.path.join(area.outside, ".wh.victim")), f("out/.wh.victim"), f("out/.wh.dir"),
          f("out/.wh..wh..opq")]
    ok(area.run(area.layout([l1, l2])))
    assert open(os.path.join(area.tree(), "keep", "victim")).read() == "mine"


@pytest.mark.parametrize("entry", [f("new\nline", b"x"), d("dir\nname"), sym("s", "tar\nget"), f("tab\there")])
def test_control_characters_refused(area, entry):
    refused(area.run(area.layout([[entry]])), "control character")


def test_long_names_refused(area):
    refused(area.run(area.layout([[f("a" * 300, b"x")]])), "longer than 255")
    refused(area.run(area.layout([[f("/".join(["b" * 200] * 25), b"x")]], name="long2.oci")), "longer than 4095")
    refused(area.run(area.layout([[sym("s", "c" * 5000)]], name="long3.oci")), "longer than 4095")


def test_size_limit(area):
    refused(area.run(area.layout([[f("big", b"\0" * (3 << 20))]]), "--max-size", "1M"), "size limit")
    # A compression bomb: 64 MiB of zeros in a small gzip layer.
    bomb = area.layout([[f("bomb%d" % i, b"\0" * (8 << 20)) for i in range(8)]], name="bomb.oci")
    assert sum(os.path.getsize(os.path.join(dp, n)) for dp, _, ns in os.walk(bomb) for n in ns) < (1 << 20)
    refused(area.run(bomb, "--max-size", "16M"), "size limit")


def test_file_count_limit(area):
    refused(area.run(area.layout([[f("f%d" % i) for i in range(200)]]), "--max-files", "100"), "file-count limit")
    ok(area.run(area.layout([[f("f%d" % i) for i in range(50)]], name="small.oci"), "--max-files", "100"))


def test_device_nodes_skipped_and_counted(area):
    res = ok(area.run(area.layout([[d("dev"), dev("dev/null"), dev("dev/sda", char=False), fifo("dev/fifo"),
                                    f("dev/regular", b"x")]])))
    assert "skipped 2 device nodes" in res.stdout
    t = area.tree()
    assert not os.path.lexists(os.path.join(t, "dev", "null"))
    assert not os.path.lexists(os.path.join(t, "dev", "sda"))
    assert os.path.exists(os.path.join(t, "dev", "regular"))


def test_setuid_and_capabilities_stripped(area):
    su, caps = f("su", b"#!", mode=0o4755), f("ping", b"#!", mode=0o2755)
    capped = f("capped", b"x", mode=0o755)
    capped[0].pax_headers = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00"}
    res = ok(area.run(area.layout([[su, caps, capped]])))
    assert "stripped 2 setuid/setgid bits and 1 file capability" in res.stdout
    t = area.tree()
    assert os.stat(os.path.join(t, "su")).st_mode & 0o7777 == 0o755
    assert os.stat(os.path.join(t, "ping")).st_mode & 0o7777 == 0o755
    assert "security.capability" not in os.listxattr(os.path.join(t, "capped"))


def test_keep_setuid_option(area):
    ok(area.run(area.layout([[f("su", b"#!", mode=0o4755)]]), "--keep-setuid"))
    assert os.stat(os.path.join(area.tree(), "su")).st_mode & 0o7777 == 0o4755


def test_bad_digest_refused(area):
    import imagelib
    lay = area.layout([[f("a", b"hello")]])
    path = imagelib.layer_blob_paths(lay)[0]
    data = bytearray(open(path, "rb").read())
    data[-5] ^= 0xFF
    open(path, "wb").write(bytes(data))
    refused(area.run(lay), "digest")
    assert not os.path.exists(area.tree())


def test_bad_size_refused(area):
    import imagelib
    lay = area.layout([[f("a", b"hello")]])
    with open(imagelib.layer_blob_paths(lay)[0], "ab") as fh:
        fh.write(b"\0")
    refused(area.run(lay), "bytes, its descriptor says")


def test_failed_import_keeps_previous_tree(area):
    ok(area.run(area.layout([[f("version", b"1")]], name="good.oci")))
    before = os.stat(os.path.join(area.tree(), "version"))
    # A layer that fails partway: many files are written before the `..` entry.
    bad = area.layout([[f("f%d" % i, b"x") for i in range(100)] + [f("../x", b"x")]], name="bad.oci")
    refused(area.run(bad))
    assert open(os.path.join(area.tree(), "version")).read() == "1"
    assert os.stat(os.path.join(area.tree(), "version")).st_ino == before.st_ino
    assert sorted(os.listdir(area.store)) == ["img", "img.files", "img.json"]
    import imagelib
    assert imagelib.rootfs_cmd("verify", "img", "--dir", area.store).returncode == 0
