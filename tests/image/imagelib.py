"""Build OCI image layouts (and oci-/docker-archives) with hand-made, possibly hostile, layers,
and run `sandboxd rootfs import` on them. Used by tests/image/."""
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile

import sbx

HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
MT_LAYER = {
    "none": "application/vnd.oci.image.layer.v1.tar",
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}


# ---- layer entries: (TarInfo, data) ----
def _info(name, type_, mode, mtime=1_700_000_000, **kw):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.mtime = type_, mode, mtime
    ti.uid = kw.pop("uid", 0)
    ti.gid = kw.pop("gid", 0)
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def f(name, data=b"", mode=0o644, **kw):
    ti = _info(name, tarfile.REGTYPE, mode, **kw)
    ti.size = len(data)
    return ti, data


def d(name, mode=0o755, **kw):
    return _info(name, tarfile.DIRTYPE, mode, **kw), None


def sym(name, target, **kw):
    return _info(name, tarfile.SYMTYPE, 0o777, linkname=target, **kw), None


def hard(name, target, **kw):
    return _info(name, tarfile.LNKTYPE, 0o644, linkname=target, **kw), None


def dev(name, char=True, **kw):
    return _info(name, tarfile.CHRTYPE if char else tarfile.BLKTYPE, 0o666, devmajor=1, devminor=3, **kw), None


def fifo(name, **kw):
    return _info(name, tarfile.FIFOTYPE, 0o644, **kw), None


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries:
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def compress(data, how):
    if how == "none":
        return data
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE, check=True).stdout
    raise ValueError(how)


# ---- layouts ----
def blob(layout, data):
    h = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(layout, "blobs", "sha256", h), "wb") as fh:
        fh.write(data)
    return {"digest": "sha256:" + h, "size": len(data)}


def image_manifest(layout, layers, how="gzip", arch=HOST_ARCH, config=None):
    """Write config + layer blobs + manifest blob; return the manifest's descriptor."""
    descs, diff_ids = [], []
    for entries in layers:
        raw = entries if isinstance(entries, bytes) else tar_bytes(entries)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        desc = blob(layout, compress(raw, how))
        desc["mediaType"] = MT_LAYER[how]
        descs.append(desc)
    cfg = {"architecture": arch, "os": "linux", "created": "2026-01-02T03:04:05Z",
           "config": config if config is not None else {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
                                                        "WorkingDir": "/workspace"},
           "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    cdesc = blob(layout, json.dumps(cfg).encode())
    cdesc["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cdesc, "layers": descs}
    mdesc = blob(layout, json.dumps(manifest).encode())
    mdesc["mediaType"] = manifest["mediaType"]
    mdesc["platform"] = {"architecture": arch, "os": "linux"}
    return mdesc


def write_index(layout, manifests):
    with open(os.path.join(layout, "index.json"), "w") as fh:
        json.dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                   "manifests": manifests}, fh)
    with open(os.path.join(layout, "oci-layout"), "w") as fh:
        json.dump({"imageLayoutVersion": "1.0.0"}, fh)


def make_layout(layout, layers, how="gzip", config=None):
    os.makedirs(layout, exist_ok=True)
    write_index(layout, [image_manifest(layout, layers, how, config=config)])
    return layout


def layer_blob_paths(layout):
    """Blob paths of the layers of the single image in layout, in order."""
    idx = json.load(open(os.path.join(layout, "index.json")))
    mpath = os.path.join(layout, "blobs", "sha256", idx["manifests"][0]["digest"][7:])
    m = json.load(open(mpath))
    return [os.path.join(layout, "blobs", "sha256", l["digest"][7:]) for l in m["layers"]]


def tar_dir(src, dst):
    """An archive (oci-archive / docker-archive) of a directory's contents."""
    with tarfile.open(dst, "w") as t:
        for name in sorted(os.listdir(src)):
            t.add(os.path.join(src, name), arcname=name)
    return dst


def make_docker_archive(path, work, layers):
    """docker save's classic format: manifest.json, <id>.json config, <id>/layer.tar."""
    os.makedirs(work)
    diff_ids, names = [], []
    for i, entries in enumerate(layers):
        raw = tar_bytes(entries)
        h = hashlib.sha256(raw).hexdigest()
        diff_ids.append("sha256:" + h)
        os.makedirs(os.path.join(work, f"l{i}"))
        with open(os.path.join(work, f"l{i}", "layer.tar"), "wb") as fh:
            fh.write(raw)
        names.append(f"l{i}/layer.tar")
    cfg = json.dumps({"architecture": HOST_ARCH, "os": "linux", "config": {"Env": ["A=1"], "WorkingDir": "/w"},
                      "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    ch = hashlib.sha256(cfg).hexdigest()
    with open(os.path.join(work, ch + ".json"), "wb") as fh:
        fh.write(cfg)
    with open(os.path.join(work, "manifest.json"), "w") as fh:
        json.dump([{"Config": ch + ".json", "RepoTags": ["t:latest"], "Layers": names}], fh)
    return tar_dir(work, path)


# ---- running the importer ----
def rootfs_cmd(*args, env=None, timeout=120):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sbx.SANDBOXD, "rootfs", *args], capture_output=True, text=True, env=e,
                          timeout=timeout)


def snapshot(top, skip=()):
    """Everything under top (not following symlinks): path -> (mode, size, mtime, nlink, content hash)."""
    out = {}
    for dp, dns, fns in os.walk(top):
        dns[:] = [x for x in dns if os.path.join(dp, x) not in skip]
        for n in dns + fns:
            p = os.path.join(dp, n)
            if p in skip:
                continue
            st = os.lstat(p)
            h = None
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256(open(p, "rb").read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                h = os.readlink(p)
            out[p] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_nlink, h)
    return out


def leftovers(store, name):
    """Temporary entries an import may have left in the store."""
    return [n for n in os.listdir(store) if n.startswith("." + name + ".")] if os.path.isdir(store) else []


def rmtree(path):
    if os.path.lexists(path):
        shutil.rmtree(path)
