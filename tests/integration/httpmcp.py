"""`sandboxd mcp --http` on a loopback port, driven with http.client and raw sockets (the SDK's
transport runs in tests/mcp). Not a test file: imported by test_mcp_http*.py."""
import http.client
import json
import os
import re
import select
import signal
import subprocess
import time

import sbx

ACCEPT = "application/json, text/event-stream"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def sleeper(marker):
    """Code that sleeps a minute in a process carrying marker on its command line."""
    return ('import os\nos.execv("/usr/bin/python3", ["python3", "-c", "import time; time.sleep(60)", "%s"])'
            % marker)


class HttpMcp:
    def __init__(self, *args, warm="0", audit="off", expect_fail=False):
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", warm, "--audit-log",
                                   audit, "--http", "127.0.0.1:0", *args], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err = b""
        self.url = None
        if expect_fail:
            return
        deadline = time.monotonic() + 20
        while not self.url:
            assert time.monotonic() < deadline and self.p.poll() is None, "no listening line: %r" % self.err
            r, _, _ = select.select([self.p.stderr], [], [], 0.2)
            if r:
                chunk = os.read(self.p.stderr.fileno(), 65536)
                self.err += chunk
                m = re.search(rb"sandboxd: listening on http://([0-9.]+):(\d+)/mcp\n", self.err)
                if m:
                    self.host, self.port = m.group(1).decode(), int(m.group(2))
                    self.url = "http://%s:%d/mcp" % (self.host, self.port)
        self.n = 0

    def conn(self, timeout=30):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def post(self, msg, headers=None, session=None, token=None, conn=None):
        """(status, headers, body bytes) of one POST of msg (a dict, or raw bytes)."""
        h = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if session:
            h["Mcp-Session-Id"] = session
        if token:
            h["Authorization"] = "Bearer " + token
        h.update(headers or {})
        c = conn or self.conn()
        body = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        c.request("POST", "/mcp", body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        if not conn:
            c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def request(self, method, params=None, **kw):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        return self.post(msg, **kw)

    def initialize(self, **kw):
        """The session id (None when stateless)."""
        st, h, body = self.request("initialize", INIT, **kw)
        assert st == 200, (st, body)
        sid = h.get("mcp-session-id")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid, **kw)
        return sid

    def call(self, code, session=None, **kw):
        st, h, body = self.request("tools/call", {"name": "run_python", "arguments": {"code": code}},
                                   session=session, **kw)
        assert st == 200, (st, body)
        return json.loads(body)

    def raw(self, method, path="/mcp", headers=None, body=None):
        c = self.conn()
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def alive(self):
        st, _, body = self.post({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        return st == 200 and json.loads(body).get("result") == {}

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.err += self.p.stderr.read()
        return rc, self.err.decode("utf-8", "replace")


def token_file(tmp_path, *tokens, mode=0o600, name="tokens"):
    path = tmp_path / name
    path.write_text("# test tokens\n" + "".join(t + "\n" for t in tokens))
    os.chmod(path, mode)
    return str(path)
