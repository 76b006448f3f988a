"""pip in the python rootfs, and pip and TLS through the egress proxy (#17).

The servers are on the host's loopback (tests/integration/egress_fixtures.py): a PEP 503 index of a
wheel built now, over HTTP and over HTTPS with a CA made now. The sandbox reaches them only
through the proxy, and only with `--allow-host 127.0.0.1:PORT` (an IP literal: loopback is
refused otherwise). Each served wheel prints a token made at test time, so an import that works
can only have come from this run's server."""
import os
import shutil

import pytest

import egress_fixtures as ef
from mcpsession import Mcp
from sbx import ROOTFS, run

WHEELS_IN_SANDBOX = "/workspace/wheels"
# Debian's python (scripts/build-rootfs) is marked externally managed; python:3.14-slim's is not.
EXTERNALLY_MANAGED = os.path.exists(os.path.join(ROOTFS, "usr/lib/python3.14/EXTERNALLY-MANAGED"))
# No retries (a refusal fails at once), no self-check of pip's version (no request but ours).
PIP_ARGS = "-m pip --disable-pip-version-check --retries 0 --timeout 20"
PIP = "python3 " + PIP_ARGS
VENV_PIP = "/workspace/venv/bin/python " + PIP_ARGS


@pytest.fixture(scope="module")
def wheel():
    d = ef.shared_dir("egress-wheel.")
    path, token = ef.build_wheel(d)
    yield d, path, token
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def ca():
    c = ef.TestCA()
    yield c
    c.close()


@pytest.fixture
def index(wheel):
    with ef.serving([wheel[1]]) as s:
        yield s


@pytest.fixture
def tls_index(wheel, ca):
    with ef.serving([wheel[1]], tls=ca) as s:
        yield s


def sh(script, opts=()):
    return run(("--", "sh", "-c", "set -e\n" + script), opts=["--timeout", "60", *opts], timeout=90)


def allow(server):
    return ["--allow-host", f"127.0.0.1:{server.port}"]


def imports_demo(prefix, python="python3", bindir=None):
    """Shell lines: the installed package imports, and its console script runs (from BINDIR,
    default PREFIX/bin, or the venv's)."""
    env = f"PYTHONPATH={prefix} " if prefix else ""
    bindir = bindir or (f"{prefix}/bin" if prefix else "/workspace/venv/bin")
    return (f"{env}{python} -c 'import demo; print(\"import:\", demo.hello())'\n"
            f"{env}{bindir}/demo-hello\n")


def egress(r, allowed=None, refused=0):
    """The report's egress summary, checked: ALLOWED connections (None: at least one), REFUSED."""
    eg = r.report["egress"]
    assert eg["refused"] == refused and eg["limits_hit"] == [], r.report
    assert eg["allowed"] == allowed if allowed is not None else eg["allowed"] >= 1, r.report
    return eg


def assert_demo_ran(r, token):
    want = f"hello from demo 1.0 {token}"
    assert r.rc == 0, r.describe()
    assert f"import: {want}\n{want}\n" in r.stdout, r.describe()


# ------------------------------------------------------------------ pip in the rootfs, no network

def test_pip_is_in_the_rootfs_and_writes_only_to_home_and_tmp():
    """`pip`, `pip3` and `python3 -m pip` run; pip's cache and user config are under HOME
    (/workspace), the only writable places pip would use."""
    r = sh("pip --version\npip3 --version\npython3 -m pip --version\npip cache dir\n"
           "python3 -m pip config debug | grep -E '^  [^ ]+, exists:' | cut -d, -f1")
    assert r.rc == 0, r.describe()
    lines = r.stdout.splitlines()
    for line in lines[:3]:  # Debian's in /usr/lib/python3/dist-packages, the image's in /usr/local
        assert line.startswith("pip ") and line.endswith("/pip (python 3.14)"), r.describe()
    assert lines[3] == "/workspace/.cache/pip", r.describe()
    config_files = [p.strip() for p in lines[4:]]
    assert "/workspace/.config/pip/pip.conf" in config_files, r.describe()
    assert all(p.startswith(("/etc/", "/usr/", "/workspace/")) for p in config_files), r.describe()


def test_pip_installs_a_bound_wheel_into_tmp_without_network(wheel):
    d, path, token = wheel
    r = sh(f"{PIP} install --no-index --target /tmp/pkgs {WHEELS_IN_SANDBOX}/demo-1.0-py3-none-any.whl\n"
           + imports_demo("/tmp/pkgs"), opts=["--bind", f"{d}:{WHEELS_IN_SANDBOX}"])
    assert_demo_ran(r, token)


def test_venv_under_workspace_without_network(wheel):
    """python3 -m venv works (ensurepip installs pip from the wheel python3.14-venv ships, no
    index), and the venv's pip installs into it."""
    d, path, token = wheel
    r = sh("python3 -m venv /workspace/venv\n"
           f"{VENV_PIP} install --no-index "
           f"{WHEELS_IN_SANDBOX}/demo-1.0-py3-none-any.whl\n"
           + imports_demo(None, python="/workspace/venv/bin/python"),
           opts=["--bind", f"{d}:{WHEELS_IN_SANDBOX}"])
    assert_demo_ran(r, token)


def test_plain_pip_install(wheel):
    """Debian's python is marked externally managed (PEP 668): a bare `pip install` says to use a
    venv; --target and a venv are the ways (sandboxd(1) EXAMPLES, sandboxd.policy(5)).
    python:3.14-slim's pip falls back to a user install under HOME (/workspace/.local), which
    imports."""
    d, path, token = wheel
    r = sh(f"{PIP} install --no-index {WHEELS_IN_SANDBOX}/demo-1.0-py3-none-any.whl\n"
           + imports_demo(None, bindir="/workspace/.local/bin"),
           opts=["--bind", f"{d}:{WHEELS_IN_SANDBOX}"])
    if EXTERNALLY_MANAGED:
        assert r.rc != 0, r.describe()
        assert "externally-managed-environment" in r.stderr, r.describe()
    else:
        assert "Defaulting to user installation" in r.stdout + r.stderr, r.describe()
        assert_demo_ran(r, token)


# ------------------------------------------------------------------ through the egress proxy

def test_pip_install_from_an_allowed_index(index, wheel):
    token = wheel[2]
    r = sh(f"{PIP} install --index-url {index.index_url} --target /tmp/pkgs demo\n"
           + imports_demo("/tmp/pkgs"), opts=allow(index))
    assert_demo_ran(r, token)
    assert index.paths() == ["/simple/demo/", "/files/demo-1.0-py3-none-any.whl"], index.paths()
    egress(r, allowed=2)  # plain HTTP: a connection per request


def test_venv_pip_install_from_an_allowed_index(index, wheel):
    token = wheel[2]
    r = sh("python3 -m venv /workspace/venv\n"
           f"{VENV_PIP} install --index-url {index.index_url} demo\n"
           + imports_demo(None, python="/workspace/venv/bin/python"), opts=allow(index))
    assert_demo_ran(r, token)


def test_pip_without_network_reaches_nothing(index):
    """No --allow-host: no proxy, only the sandbox's own loopback, where nothing listens, and no
    resolver for PyPI's name. (One retry: pip warns with the error; without, it drops it.)"""
    r = sh(f"{PIP} --retries 1 install --index-url {index.index_url} --target /tmp/pkgs demo || echo rc=$?\n"
           f"{PIP} --retries 1 install --target /tmp/pkgs demo || echo rc=$?")
    assert r.stdout.count("rc=1\n") == 2, r.describe()
    assert r.report.get("egress") is None, r.report
    assert "[Errno 111] Connection refused" in r.stderr, r.describe()
    assert "Failed to resolve 'pypi.org'" in r.stderr, r.describe()
    assert index.paths() == [], index.paths()


def test_pip_from_an_index_not_allowed_is_refused_by_the_proxy(index, tls_index):
    """The proxy is on (another port of 127.0.0.1 is allowed) but the index's port is not: pip
    gets the proxy's refusal and the index gets no request."""
    r = sh(f"{PIP} -vv install --index-url {index.index_url} --target /tmp/pkgs demo", opts=allow(tls_index))
    assert r.rc != 0, r.describe()
    # pip says why only at -vv (a 403 page is "skipped"); the answer is the proxy's.
    assert f"403 Client Error: Forbidden for url: {index.index_url}demo/" in r.stdout, r.describe()
    assert "No matching distribution found for demo" in r.stderr, r.describe()
    assert index.paths() == [], index.paths()
    egress(r, allowed=0, refused=1)


def test_tls_through_connect_with_the_test_ca(tls_index, ca):
    """urllib through CONNECT to the HTTPS server: with the CA (SSL_CERT_FILE) it gets the
    server's token; without it the certificate is refused, so the TLS session is the server's own
    (end to end, not one the proxy made)."""
    get = ("python3 -c 'import urllib.request; "
           f"print(urllib.request.urlopen(\"{tls_index.url}/hello\").read().decode())'")
    r = sh(get, opts=[*allow(tls_index), *ca.bind_opts()])
    assert r.rc == 0, r.describe()
    assert r.stdout == tls_index.token + "\n", r.describe()
    egress(r, allowed=1)
    r = sh(get, opts=allow(tls_index))
    assert r.rc != 0 and "CERTIFICATE_VERIFY_FAILED" in r.stderr, r.describe()


def test_pip_https_index_with_cert(tls_index, ca, wheel):
    token = wheel[2]
    r = sh(f"{PIP} install --index-url {tls_index.index_url} --cert {ef.CA_IN_SANDBOX} --target /tmp/pkgs demo\n"
           + imports_demo("/tmp/pkgs"),
           opts=[*allow(tls_index), "--bind", f"{ca.ca_dir}:{ef.CA_DIR_IN_SANDBOX}"])
    assert_demo_ran(r, token)
    assert tls_index.paths() == ["/simple/demo/", "/files/demo-1.0-py3-none-any.whl"], tls_index.paths()
    egress(r)


def test_tls_server_not_allowed_is_refused(tls_index, index, ca):
    """CONNECT to a port not in the allowlist: urllib's tunnel is refused with the proxy's 403;
    pip with --cert fails the same way; the server sees no connection."""
    r = sh(f"python3 -c 'import urllib.request; urllib.request.urlopen(\"{tls_index.url}/hello\")'",
           opts=[*allow(index), *ca.bind_opts()])
    assert r.rc != 0, r.describe()
    assert "Tunnel connection failed: 403" in r.stderr, r.describe()
    egress(r, allowed=0, refused=1)
    # (one retry: pip warns about a failed retry, and drops the error of the last attempt)
    r = sh(f"{PIP} --retries 1 install --index-url {tls_index.index_url} --cert {ef.CA_IN_SANDBOX} "
           "--target /tmp/pkgs demo", opts=[*allow(index), "--bind", f"{ca.ca_dir}:{ef.CA_DIR_IN_SANDBOX}"])
    assert r.rc != 0, r.describe()
    assert "Tunnel connection failed: 403" in r.stderr, r.describe()
    egress(r, allowed=0, refused=2)
    assert tls_index.paths() == [] and tls_index.errors == 0, (tls_index.paths(), tls_index.errors)


# ------------------------------------------------------------------ sandboxd mcp

@pytest.mark.parametrize("warm", ["0", "1"])
def test_mcp_run_python_pip_installs_and_imports(index, wheel, warm):
    """`sandboxd mcp --allow-host ...`: a run_python call installs from the index and imports the
    package in the same call (a warm sandbox has the proxy too); the next call, in a fresh
    sandbox, does not have it."""
    token = wheel[2]
    code = ("import subprocess, sys\n"
            f"subprocess.run([sys.executable, *{PIP_ARGS.split()!r}, 'install', '-q', '--index-url',"
            f" {index.index_url!r}, '--target', '/tmp/pkgs', 'demo'], check=True)\n"
            "sys.path.insert(0, '/tmp/pkgs')\nimport demo\nprint(demo.hello())\n")
    m = Mcp("--allow-host", f"127.0.0.1:{index.port}", warm=warm)
    try:
        r = m.send("tools/call", {"name": "run_python", "arguments": {"code": code, "timeout": 60}})
        assert r["structuredContent"]["status"] == "ok", r
        assert f"hello from demo 1.0 {token}" in r["content"][0]["text"], r
        eg = r["structuredContent"]["egress"]
        assert eg["allowed"] == 2 and eg["refused"] == 0, eg
        r = m.send("tools/call", {"name": "run_python", "arguments": {
            "code": "import sys; sys.path.insert(0, '/tmp/pkgs'); import demo"}})
        assert r["structuredContent"]["status"] == "error", r
        assert "No module named 'demo'" in r["content"][0]["text"], r
    finally:
        m.close()
    assert "/files/demo-1.0-py3-none-any.whl" in index.paths(), index.paths()


def test_plain_http_proxy_says_when_it_closes(wheel):
    """An origin that answers HTTP/1.1 without `Connection: close` (Python's http.server): the
    client must either be told the proxy closes, or get its second request answered."""
    with ef.serving([wheel[1]], echo_close=False) as origin:
        r = sh("python3 -c '\n"
               "import json, os, socket\n"
               "host, port = os.environ[\"HTTP_PROXY\"].rsplit(\"/\", 1)[1].split(\":\")\n"
               "s = socket.create_connection((host, int(port)), timeout=10)\n"
               f"req = b\"GET {origin.url}/hello HTTP/1.1\\r\\nHost: 127.0.0.1:{origin.port}\\r\\n\\r\\n\"\n"
               "s.sendall(req)\n"
               "f = s.makefile(\"rb\")\n"
               "head = []\n"
               "while (line := f.readline()) not in (b\"\\r\\n\", b\"\"):\n"
               "    head.append(line.decode().strip().lower())\n"
               "n = int(next(h.split(\":\")[1] for h in head if h.startswith(\"content-length:\")))\n"
               "f.read(n)\n"
               "try:\n"
               "    s.sendall(req)\n"
               "    second = f.readline().decode()\n"
               "except OSError as e:\n"
               "    second = str(e)\n"
               "print(json.dumps({\"head\": head, \"second\": second}))'",
               opts=allow(origin))
        assert r.rc == 0, r.describe()
        f = r.json()
        assert f["head"][0].startswith("http/1.1 200"), f
        # The proxy serves one request per connection and says so (egress_response_head): exactly
        # one Connection header, `close`, whatever the origin said.
        assert [h for h in f["head"] if h.startswith("connection:")] == ["connection: close"], f
