"""Image formats and layer semantics: compression, whiteouts, modes and times, archives, platform
selection, metadata, verify and list."""
import json
import os
import stat

import pytest

import imagelib
from imagelib import d, f, hard, sym


def ok(res):
    assert res.returncode == 0, res.stderr
    return res


@pytest.mark.parametrize("how", ["none", "gzip", "zstd"])
def test_compressions(area, how):
    ok(area.run(area.layout([[d("etc"), f("etc/hello", b"hi\n")], [f("etc/two", b"2")]], how=how)))
    assert open(os.path.join(area.tree(), "etc/hello")).read() == "hi\n"
    assert open(os.path.join(area.tree(), "etc/two")).read() == "2"


def test_whiteouts_and_opaque_dirs(area):
    l1 = [d("a"), f("a/x", b"x"), f("a/y", b"y"), d("b"), f("b/old", b"o"), d("b/sub"), f("b/sub/deep"),
          d("c"), f("c/z"), sym("s", "/a")]
    l2 = [f("a/.wh.x"), d("b"), f("b/.wh..wh..opq"), f("b/new", b"n"), f(".wh.c"), f(".wh.s"),
          f("a/.wh.missing")]
    l3 = [d("c"), f("c/again", b"again")]
    ok(area.run(area.layout([l1, l2, l3])))
    t = area.tree()
    assert sorted(os.listdir(os.path.join(t, "a"))) == ["y"]
    assert sorted(os.listdir(os.path.join(t, "b"))) == ["new"]
    assert sorted(os.listdir(os.path.join(t, "c"))) == ["again"]
    assert not os.path.lexists(os.path.join(t, "s"))
    assert not any(n.startswith(".wh.") for _, ds, fs in os.walk(t) for n in ds + fs)


def test_whiteout_does_not_hide_same_layer_file(area):
    ok(area.run(area.layout([[f("a", b"lower")], [f("a", b"upper"), f(".wh.a")]])))
    assert open(os.path.join(area.tree(), "a")).read() == "upper"


def test_replacements_between_layers(area):
    l1 = [d("x"), f("x/in"), f("y", b"file"), sym("z", "y")]
    l2 = [f("x", b"now a file"), d("y"), f("y/in", b"now a dir"), f("z", b"not a link")]
    ok(area.run(area.layout([l1, l2])))
    t = area.tree()
    assert open(os.path.join(t, "x")).read() == "now a file"
    assert open(os.path.join(t, "y/in")).read() == "now a dir"
    assert not os.path.islink(os.path.join(t, "z"))


def test_modes_and_mtimes_kept(area):
    entries = [d("ro", mode=0o555, mtime=1_500_000_000), f("ro/file", b"x", mode=0o640, mtime=1_400_000_000),
               f("exec", b"#!", mode=0o755, mtime=1_300_000_000), sym("link", "exec", mtime=1_200_000_000),
               d("sticky", mode=0o1777), f("uid", b"u", uid=1234, gid=4321)]
    ok(area.run(area.layout([entries])))
    t = area.tree()
    st = os.stat(os.path.join(t, "ro"))
    assert (stat.S_IMODE(st.st_mode), st.st_mtime) == (0o555, 1_500_000_000)
    st = os.stat(os.path.join(t, "ro/file"))
    assert (stat.S_IMODE(st.st_mode), st.st_mtime) == (0o640, 1_400_000_000)
    assert os.lstat(os.path.join(t, "link")).st_mtime == 1_200_000_000
    assert stat.S_IMODE(os.stat(os.path.join(t, "sticky")).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(t).st_mode) == 0o755
    if os.geteuid() == 0:
        st = os.stat(os.path.join(t, "uid"))
        assert (st.st_uid, st.st_gid) == (1234, 4321)


def test_oci_archive(area):
    lay = area.layout([[f("hello", b"from an oci-archive")]])
    arch = imagelib.tar_dir(lay, os.path.join(area.src, "img.oci.tar"))
    ok(area.run(arch))
    assert open(os.path.join(area.tree(), "hello")).read() == "from an oci-archive"


def test_docker_archive(area):
    arch = imagelib.make_docker_archive(os.path.join(area.src, "img.docker.tar"), os.path.join(area.src, "dw"),
                                        [[f("a", b"1"), f("b", b"2")], [f(".wh.a"), hard("c", "b")]])
    ok(area.run(arch))
    t = area.tree()
    assert sorted(os.listdir(t)) == ["b", "c"]
    meta = json.load(open(t + ".json"))
    assert meta["Env"] == ["A=1"] and meta["WorkingDir"] == "/w"


def test_docker_archive_bad_layer_refused(area):
    work = os.path.join(area.src, "dw")
    imagelib.make_docker_archive(os.path.join(area.src, "x.tar"), work, [[f("a", b"1")]])
    with open(os.path.join(work, "l0", "layer.tar"), "r+b") as fh:
        fh.seek(600)
        fh.write(b"X")
    arch = imagelib.tar_dir(work, os.path.join(area.src, "bad.tar"))
    res = area.run(arch)
    assert res.returncode != 0 and "digest" in res.stderr


def test_platform_selection(area):
    lay = os.path.join(area.src, "multi.oci")
    os.makedirs(lay)
    other = "arm64" if imagelib.HOST_ARCH != "arm64" else "amd64"
    wrong = imagelib.image_manifest(lay, [[f("which", b"wrong")]], arch=other)
    right = imagelib.image_manifest(lay, [[f("which", b"right")]])
    # A nested index, as skopeo writes a multi-platform image into a layout.
    inner = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [wrong, right]}
    desc = imagelib.blob(lay, json.dumps(inner).encode())
    desc["mediaType"] = inner["mediaType"]
    imagelib.write_index(lay, [desc])
    res = ok(area.run(lay))
    assert open(os.path.join(area.tree(), "which")).read() == "right"
    assert f"linux/{imagelib.HOST_ARCH}" in res.stdout


def test_wrong_platform_refused(area):
    lay = os.path.join(area.src, "arm.oci")
    os.makedirs(lay)
    other = "arm64" if imagelib.HOST_ARCH != "arm64" else "amd64"
    imagelib.write_index(lay, [imagelib.image_manifest(lay, [[f("x")]], arch=other)])
    res = area.run(lay)
    assert res.returncode != 0 and "no image for linux/" in res.stderr


def test_metadata_verify_and_list(area):
    cfg = {"Env": ["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"], "WorkingDir": "/workspace", "Cmd": ["python3"]}
    ok(area.run(area.layout([[d("etc"), f("etc/conf", b"v1"), sym("etc/l", "conf")]], config=cfg)))
    meta = json.load(open(area.tree() + ".json"))
    assert meta["name"] == "img" and meta["manifest_digest"].startswith("sha256:")
    assert meta["Env"] == cfg["Env"] and meta["WorkingDir"] == "/workspace"
    assert meta["platform"] == f"linux/{imagelib.HOST_ARCH}" and meta["created"] == "2026-01-02T03:04:05Z"
    assert meta["size"] == 2 and meta["files_manifest"] == "img.files"
    res = imagelib.rootfs_cmd("verify", "img", "--dir", area.store)
    assert res.returncode == 0 and "matches" in res.stdout
    res = imagelib.rootfs_cmd("list", "--dir", area.store)
    assert res.returncode == 0 and "img" in res.stdout and meta["manifest_digest"][7:19] in res.stdout
    # Change the tree: verify names what differs.
    with open(os.path.join(area.tree(), "etc/conf"), "w") as fh:
        fh.write("v2")
    open(os.path.join(area.tree(), "added"), "w").close()
    os.unlink(os.path.join(area.tree(), "etc/l"))
    res = imagelib.rootfs_cmd("verify", "img", "--dir", area.store)
    assert res.returncode == 1
    assert "changed:" in res.stdout and "/etc/conf" in res.stdout
    assert "added:" in res.stdout and "/added" in res.stdout
    assert "missing:" in res.stdout and "/etc/l" in res.stdout


def test_reimport_replaces_tree(area):
    ok(area.run(area.layout([[f("v", b"1"), f("only-in-1")]], name="one.oci")))
    ok(area.run(area.layout([[f("v", b"2")]], name="two.oci")))
    assert sorted(os.listdir(area.tree())) == ["v"]
    assert open(os.path.join(area.tree(), "v")).read() == "2"
    assert sorted(os.listdir(area.store)) == ["img", "img.files", "img.json"]


def test_usage_errors(area):
    for args in (["import"], ["import", "a", "b"], ["verify"], ["bogus"], ["import", "x", "--name", "../evil"],
                 ["import", "x", "--max-size", "lots"]):
        res = imagelib.rootfs_cmd(*args)
        assert res.returncode == 125, (args, res.stderr)
    res = area.run(os.path.join(area.src, "missing"))
    assert res.returncode == 1 and "missing" in res.stderr
