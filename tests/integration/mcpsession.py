"""A `sandboxd mcp` session over pipes, for the integration and security tests that call its tools
(initialize done). Not a test file: imported by test_execute_code.py and test_bash_probes.py."""
import json
import subprocess
import time

import sbx


class Mcp:
    def __init__(self, *args, warm="0", audit="off", preexec_fn=None, version="2025-06-18"):
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", warm, "--audit-log", audit,
                                   *sbx.EGRESS_OPTS, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, preexec_fn=preexec_fn)
        self.n = 0
        self.init = self.send("initialize", {"protocolVersion": version, "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "1"}})
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    def request(self, method, params):
        """The whole response (result or error)."""
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            assert line, "sandboxd mcp closed its output: " + self.p.stderr.read()
            m = json.loads(line)
            if m.get("id") == self.n:
                return m

    def send(self, method, params):
        m = self.request(method, params)
        assert "result" in m, m
        return m["result"]

    def tools(self):
        return {t["name"]: t for t in self.send("tools/list", {})["tools"]}

    def execute(self, language, src, timeout=None):
        """execute_code's result, and how long the call took (s)."""
        args = {"language": language, "code": src}
        if timeout is not None:
            args["timeout"] = timeout
        start = time.monotonic()
        r = self.send("tools/call", {"name": "execute_code", "arguments": args})
        return r, time.monotonic() - start

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=30)
        err = self.p.stderr.read()
        assert rc == 0, err
        return err
