"""`make image` (scripts/make-image): the OCI layout is valid (every digest and size right, the
config's entrypoint what the Kubernetes manifests expect), every file in its one layer is owned by
root, and the tree unpacked from it serves MCP the way a pod runs it: the tree as a read-only root,
/tmp a tmpfs, uid 65532 without capabilities (tests/deploy/pod-run). About 4 s: the image is
built once (tar + zstd of the 130 MB tree) and unpacked once."""
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import threading

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOXD = os.environ.get("SANDBOXD", os.path.join(REPO, "build", "sandboxd"))
ROOTFS = os.environ.get("SANDBOXD_ROOTFS", os.path.join(REPO, "rootfs", "python-3.14-slim"))

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pod-run needs root (mount, pivot_root)")


def blob(layout, digest):
    assert digest.startswith("sha256:")
    with open(os.path.join(layout, "blobs", "sha256", digest[7:]), "rb") as f:
        return f.read()


def checked(layout, desc):
    """The blob a descriptor names, after checking its size and digest."""
    data = blob(layout, desc["digest"])
    assert len(data) == desc["size"], desc
    assert "sha256:" + hashlib.sha256(data).hexdigest() == desc["digest"], desc
    return data


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    out = tmp_path_factory.mktemp("image") / "sandboxd.oci"
    subprocess.run([os.path.join(REPO, "scripts", "make-image"), "--build", os.path.dirname(SANDBOXD),
                    "--rootfs", ROOTFS, str(out)], check=True, capture_output=True, text=True)
    index = json.load(open(out / "index.json"))
    (mdesc,) = index["manifests"]
    manifest = json.loads(checked(out, mdesc))
    config = json.loads(checked(out, manifest["config"]))
    return {"layout": str(out), "index": index, "mdesc": mdesc, "manifest": manifest, "config": config}


@pytest.fixture(scope="module")
def tree(image, tmp_path_factory):
    (layer,) = image["manifest"]["layers"]
    path = tmp_path_factory.mktemp("unpacked")
    src = os.path.join(image["layout"], "blobs", "sha256", layer["digest"][7:])
    subprocess.run(["tar", "--zstd", "--numeric-owner", "-xpf", src, "-C", str(path)], check=True)
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def test_layout_digests_and_media_types(image):
    lay = image["layout"]
    assert json.load(open(os.path.join(lay, "oci-layout"))) == {"imageLayoutVersion": "1.0.0"}
    assert image["index"]["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert image["mdesc"]["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert image["manifest"]["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    (layer,) = image["manifest"]["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+zstd"
    data = checked(lay, layer)
    raw = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True).stdout
    assert image["config"]["rootfs"] == {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}
    # Nothing in blobs/ that the index does not reach (a half-written layer, a stale config).
    reached = {image["mdesc"]["digest"], image["manifest"]["config"]["digest"], layer["digest"]}
    assert {"sha256:" + n for n in os.listdir(os.path.join(lay, "blobs", "sha256"))} == reached


def test_layout_is_read_by_skopeo(image):
    """An independent reader of OCI layouts (the one `rootfs fetch` uses) accepts it."""
    if not shutil.which("skopeo"):
        pytest.skip("no skopeo (scripts/install-deps installs it)")
    ref = "oci:" + image["layout"] + ":" + image["mdesc"]["annotations"]["org.opencontainers.image.ref.name"]
    out = subprocess.run(["skopeo", "inspect", "--config", ref], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["config"]["Entrypoint"] == ["/usr/bin/sandboxd"]


def test_config_is_what_the_manifests_run(image):
    cfg = image["config"]["config"]
    assert cfg["Entrypoint"] == ["/usr/bin/sandboxd"]
    assert cfg["Cmd"] == ["mcp", "--http", "0.0.0.0:8080", "--stateless", "--token-file",
                          "/run/secrets/sandboxd/tokens", "--policy", "ci"]
    assert cfg["User"] == "65532:65532"
    assert cfg["ExposedPorts"] == {"8080/tcp": {}}
    assert "HOME=/tmp" in cfg["Env"]
    deploy = open(os.path.join(REPO, "scripts", "deploy", "kubernetes", "deployment.yaml")).read()
    assert "runAsUser: 65532" in deploy and "/run/secrets/sandboxd" in deploy and "containerPort: 8080" in deploy


def test_layer_is_root_owned_and_holds_the_install(image):
    (layer,) = image["manifest"]["layers"]
    raw = subprocess.run(["zstd", "-dc", os.path.join(image["layout"], "blobs", "sha256", layer["digest"][7:])],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(raw)) as tf:
        members = tf.getmembers()
    assert members and all(m.uid == 0 and m.gid == 0 for m in members)
    names = {m.name.removeprefix("./") for m in members}
    name = os.path.basename(os.path.realpath(ROOTFS))
    for want in ["usr/bin/sandboxd", "usr/share/sandboxd/policy/ci.policy", "usr/share/sandboxd/python",
                 f"var/lib/sandboxd/rootfs/{name}/usr/bin/python3", f"var/lib/sandboxd/rootfs/{name}.json",
                 "etc/passwd", "tmp"]:
        assert want in names, want
    # What is for the host, not the container, stays out.
    assert not [n for n in names if n.startswith(("usr/share/man", "etc/apparmor.d", "usr/libexec"))]
    assert not [m.name for m in members if m.isfile() and m.mode & 0o6000], "no setuid or setgid file"


def pod_cmd(tree, config, args, net=False, secret=None):
    env = list(config["config"]["Env"])
    assert all(" " not in e for e in env)
    return ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
            *(["--net"] if net else []), "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            os.path.join(REPO, "tests", "deploy", "pod-run"), *(["--secret", secret] if secret else []),
            tree, *env, "--", *config["config"]["Entrypoint"], *args]


def pod_mcp(tree, config, args, msgs):
    """Send msgs to the server in the pod, one at a time, each request's reply awaited (EOF on
    stdin ends the server and its calls); returns the replies by id and stderr."""
    cmd = pod_cmd(tree, config, args)
    replies = {}
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as p:
        timer = threading.Timer(60, p.kill)
        timer.start()
        try:
            for m in msgs:
                p.stdin.write(json.dumps(m) + "\n")
                p.stdin.flush()
                while "id" in m and m["id"] not in replies:
                    line = p.stdout.readline()
                    if not line:
                        break
                    reply = json.loads(line)
                    if "id" in reply:
                        replies[reply["id"]] = reply
            p.stdin.close()
            p.wait()
        finally:
            timer.cancel()
        return replies, p.stderr.read()


def test_unpacked_tree_serves_mcp_as_a_pod_runs_it(image, tree):
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "sandboxd://capabilities"}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "run_python", "arguments": {"code": "import os; print(6 * 7, os.getuid())"}}},
    ]
    # The image's Cmd less its transport: stdio here, so the test needs no port (the HTTP
    # transport has its own suite); the policy is the image's (--policy ci).
    args = ["mcp", "--warm", "0", "--policy", "ci"]
    replies, stderr = pod_mcp(tree, image["config"], args, msgs)
    assert set(replies) == {1, 2, 3}, stderr
    assert replies[1]["result"]["serverInfo"]["name"] == "sandboxd"
    caps = json.loads(replies[2]["result"]["contents"][0]["text"])
    name = os.path.basename(os.path.realpath(ROOTFS))
    # The installed layout found from the binary alone: the store beside /usr/bin, the shipped policy.
    assert caps["rootfs"] == f"/var/lib/sandboxd/rootfs/{name}"
    assert caps["policy"]["name"] == "ci"
    res = replies[3]["result"]
    assert not res["isError"], res
    assert res["structuredContent"]["stdout"] == f"42 {caps['policy']['uid']}\n"
    # Nothing the server wanted to write failed (HOME=/tmp is the one writable place).
    assert "Read-only file system" not in stderr, stderr


# Run inside the pod's network namespace (nsenter): the statuses and the run_python result.
HTTP_CLIENT = r"""
import json, sys, urllib.request, urllib.error
token = sys.argv[1]
def post(auth):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "run_python", "arguments": {"code": "print(6 * 7)"}}}).encode()
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if auth:
        h["Authorization"] = "Bearer " + auth
    try:
        with urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8080/mcp", body, h), timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None
with urllib.request.urlopen("http://127.0.0.1:8080/healthz", timeout=30) as r:
    health = r.status
print(json.dumps({"none": post(None), "wrong": post("x" + token), "right": post(token), "health": health}))
"""


def test_image_command_serves_http_with_a_secret_token(image, tree, tmp_path):
    """The image's own entrypoint and command, unchanged: HTTP on 0.0.0.0:8080, stateless, the
    token from /run/secrets/sandboxd/tokens as Kubernetes mounts a Secret (root:fsGroup 0440),
    the probes' /healthz."""
    token = hashlib.sha256(os.urandom(16)).hexdigest()
    secret = tmp_path / "tokens"
    secret.write_text(token + "\n")
    cfg = image["config"]["config"]
    with subprocess.Popen(pod_cmd(tree, image["config"], cfg["Cmd"], net=True, secret=str(secret)),
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as p:
        timer = threading.Timer(60, p.kill)
        timer.start()
        try:
            err = ""
            while "listening on" not in err:
                line = p.stderr.readline()
                assert line, f"the server exited: {err}"
                err += line
            assert "http://0.0.0.0:8080/mcp" in err, err
            r = subprocess.run(["nsenter", f"--net=/proc/{p.pid}/ns/net", "/usr/bin/python3", "-c", HTTP_CLIENT, token],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            got = json.loads(r.stdout)
            # As the kubelet stops a pod: SIGTERM to the container's pid 1, the server (unshare
            # itself ignores SIGTERM); it stops at once, well inside terminationGracePeriodSeconds.
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                (init,) = map(int, f.read().split())
            os.kill(init, signal.SIGTERM)
            assert p.wait(timeout=10) == 0
        finally:
            timer.cancel()
            if p.poll() is None:
                p.kill()
                p.wait()
    assert got["none"][0] == 401 and got["wrong"][0] == 401 and got["health"] == 200
    status, reply = got["right"]
    assert status == 200 and reply["result"]["structuredContent"]["stdout"] == "42\n", got
