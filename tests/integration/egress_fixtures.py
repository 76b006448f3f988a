"""Servers on the host's loopback for the egress tests (#17), made at test time, no network:

- build_wheel(): a pure-Python `demo` wheel written by hand (a zip with METADATA, WHEEL,
  entry_points.txt and RECORD; no setuptools), whose `demo.hello()` returns a token made now;
- Server: an HTTP server on 127.0.0.1:random-port (or HTTPS, `tls=`) that serves a PEP 503
  simple index of the wheels it is given (`/simple/`, `/simple/NAME/`, `/files/WHEEL`) and
  `/hello` (the token), and records every request it gets;
- TestCA: a self-signed CA and a server certificate for 127.0.0.1 and localhost, made with the
  `openssl` command (scripts/install-deps), the CA alone in a directory the sandbox may read (bind
  it with --bind and name it with SSL_CERT_FILE or pip's --cert).

Importable by every test_egress*.py (tests/integration is on sys.path)."""
import base64
import contextlib
import hashlib
import html
import http.server
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import threading
import zipfile

import sbx

# Where a test binds TestCA.ca_dir in the sandbox, and the CA file there.
CA_DIR_IN_SANDBOX = "/workspace/ca"
CA_IN_SANDBOX = CA_DIR_IN_SANDBOX + "/ca.pem"


def shared_dir(prefix):
    """A fresh directory under the test work dir that the sandbox's uid may enter and read
    (as root it is an id of host_id_range, not the test's)."""
    d = tempfile.mkdtemp(prefix=prefix, dir=sbx.WORK)
    os.chmod(d, 0o755)
    return d


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(directory, name="demo", version="1.0", token=None):
    """Write NAME-VERSION-py3-none-any.whl into DIRECTORY; returns (path, token). The package's
    hello() returns f"hello from {name} {version} {token}"; `{name}-hello` is its console script."""
    token = token or secrets.token_hex(8)
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": (f'__version__ = "{version}"\nTOKEN = "{token}"\n\n\n'
                                f'def hello():\n    return "hello from {name} " + __version__ + " " + TOKEN\n\n\n'
                                f'def main():\n    print(hello())\n').encode(),
        f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             f"Summary: a wheel sandboxd's tests build\n").encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandboxd-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": f"[console_scripts]\n{name}-hello = {name}:main\n".encode(),
    }
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items()) + f"{dist}/RECORD,,\n"
    files[f"{dist}/RECORD"] = record.encode()
    path = os.path.join(directory, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            z.writestr(zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0)), d)
    os.chmod(path, 0o644)
    return path, token


class TestCA:
    """A CA and a server certificate (127.0.0.1, localhost), valid for a day. ca_dir holds only
    ca.pem (world-readable); the keys stay in a private directory. close() removes both."""

    __test__ = False  # not a pytest class

    def __init__(self):
        openssl = shutil.which("openssl")
        sbx.need(openssl, "the openssl command (scripts/install-deps)")
        self.ca_dir = shared_dir("egress-ca.")
        self._keys = tempfile.mkdtemp(prefix="egress-keys.", dir=sbx.WORK)
        self.ca_file = os.path.join(self.ca_dir, "ca.pem")
        k = lambda n: os.path.join(self._keys, n)  # noqa: E731
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        with open(k("leaf.ext"), "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
                    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
        for cmd in (
            ["req", "-x509", *ec, "-keyout", k("ca.key"), "-out", self.ca_file, "-days", "1",
             "-subj", "/CN=sandboxd test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", *ec, "-keyout", k("server.key"), "-out", k("server.csr"), "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", k("server.csr"), "-CA", self.ca_file, "-CAkey", k("ca.key"),
             "-CAcreateserial", "-out", k("server.pem"), "-days", "1", "-extfile", k("leaf.ext")],
        ):
            p = subprocess.run([openssl, *cmd], capture_output=True, text=True)
            assert p.returncode == 0, f"openssl {' '.join(cmd)}: {p.stderr}"
        os.chmod(self.ca_file, 0o644)
        self.cert_file, self.key_file = k("server.pem"), k("server.key")

    def server_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def bind_opts(self):
        """exec options that put the CA at CA_IN_SANDBOX and name it in SSL_CERT_FILE."""
        return ["--bind", f"{self.ca_dir}:{CA_DIR_IN_SANDBOX}", "--env", f"SSL_CERT_FILE={CA_IN_SANDBOX}"]

    def close(self):
        shutil.rmtree(self.ca_dir, ignore_errors=True)
        shutil.rmtree(self._keys, ignore_errors=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 20  # a stuck client does not hold a thread for ever

    def setup(self):
        ctx = self.server.tls
        if ctx is not None:  # the handshake in this request's thread, not the accept loop's
            self.request.settimeout(self.timeout)
            self.request = ctx.wrap_socket(self.request, server_side=True)
        super().setup()

    def log_message(self, fmt, *args):
        pass

    def _send(self, status, body, ctype="text/html; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection and self.server.echo_close:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.requests.append((self.command, self.path, self.headers.get("Host")))
        path = self.path.split("?", 1)[0]
        if "://" in path:  # a proxy that forwards the absolute URI: serve its path
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        if path == "/hello":
            return self._send(200, srv.token.encode(), "text/plain")
        if path == "/simple/":
            links = "".join(f'<a href="{html.escape(n)}/">{html.escape(n)}</a>\n' for n in sorted(srv.wheels))
            return self._send(200, f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode())
        if path.startswith("/simple/") and path.endswith("/"):
            name = path[len("/simple/"):-1]
            if name in srv.wheels:
                links = "".join(f'<a href="/files/{html.escape(os.path.basename(w))}#sha256={h}">'
                                f'{html.escape(os.path.basename(w))}</a>\n' for w, h in srv.wheels[name])
                return self._send(200, f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode())
        if path.startswith("/files/"):
            for w, _ in (x for ws in srv.wheels.values() for x in ws):
                if path == "/files/" + os.path.basename(w):
                    with open(w, "rb") as f:
                        return self._send(200, f.read(), "application/octet-stream")
        self._send(404, b"not found\n", "text/plain")

    do_HEAD = do_GET


class Server(http.server.ThreadingHTTPServer):
    """An HTTP (tls=None) or HTTPS (tls=TestCA) server on 127.0.0.1:0 in a thread. wheels: paths
    of .whl files, served as a PEP 503 index; `requests` lists (method, path, Host) as they came.
    HTTP/1.1 with keep-alive; a request with `Connection: close` gets it back, as nginx answers
    (echo_close=False: not, as Python's http.server and others do)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, wheels=(), tls=None, token=None, echo_close=True):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.echo_close = echo_close
        self.tls = tls.server_context() if tls else None
        self.token = token or secrets.token_hex(8)
        self.lock = threading.Lock()
        self.requests = []
        self.errors = 0
        self.wheels = {}
        for w in wheels:
            with open(w, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            self.wheels.setdefault(os.path.basename(w).split("-")[0].lower(), []).append((w, digest))
        self.port = self.server_address[1]
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.index_url = self.url + "/simple/"
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    def handle_error(self, request, client_address):
        with self.lock:  # e.g. a TLS client that does not trust the CA: kept, not printed
            self.errors += 1

    def paths(self):
        with self.lock:
            return [p for _, p, _ in self.requests]

    def close(self):
        self.shutdown()
        self.server_close()
        self._thread.join(5)


@contextlib.contextmanager
def serving(*args, **kw):
    s = Server(*args, **kw)
    try:
        yield s
    finally:
        s.close()
