#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The reference stub: the simplest MCP server that runs Python in a sandbox. A benchmark peer for
`bench/mcp`, NOT a product: do not deploy it.

It speaks MCP over stdio (newline-delimited JSON-RPC 2.0, as `sandboxd mcp` does), offers one tool,
`run_python` {code}, and answers each call by starting one bubblewrap sandbox on the slim rootfs:

    bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --ro-bind ROOTFS /
          --proc /proc --dev /dev --tmpfs /tmp --tmpfs /workspace --chdir /workspace
          --clearenv ... /usr/bin/python3 -    (the code on stdin, stdout and stderr back)

Each call runs in a thread of its own (no limit on how many at once); the result carries the
output as text and as structuredContent {status, exit_code, stdout, stderr}, the shape
tests/mcp/output.mjs reads, so tests/mcp/bench.mjs drives this and sandboxd mcp alike.

What it leaves out, and sandboxd does not: no cgroup or any other limit (memory, pids, CPU, output
size), no seccomp policy of its own, no timeout, no cancellation, no warm pool, no audit record,
the whole output held in memory. It is what a naive launcher costs, nothing more.

Usage: bench/bwrap-stub.py [--rootfs DIR]   (default: rootfs/python-3.14-slim of this tree)
"""
import json
import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTOCOL = "2025-06-18"


def bwrap_argv(rootfs):
    return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--ro-bind", rootfs, "/", "--proc", "/proc", "--dev", "/dev",
            "--tmpfs", "/tmp", "--tmpfs", "/workspace", "--chdir", "/workspace",
            "--hostname", "sandbox", "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/workspace",
            "/usr/bin/python3", "-"]


class Server:
    def __init__(self, rootfs):
        self.argv = bwrap_argv(rootfs)
        self.out_lock = threading.Lock()

    def send(self, msg):
        line = json.dumps(msg, separators=(",", ":")) + "\n"
        with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def run_python(self, rid, code):
        try:
            p = subprocess.run(self.argv, input=code.encode(), capture_output=True)
        except OSError as e:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": f"bwrap: {e}"}})
            return
        out = p.stdout.decode(errors="replace")
        err = p.stderr.decode(errors="replace")
        status = "ok" if p.returncode == 0 else "error"
        self.send({"jsonrpc": "2.0", "id": rid, "result": {
            "content": [{"type": "text", "text": out + err}],
            "structuredContent": {"status": status, "exit_code": p.returncode, "stdout": out, "stderr": err},
            "isError": status != "ok"}})

    def handle(self, msg):
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            return  # a notification (initialized, cancelled): nothing to answer
        if method == "initialize":
            self.send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg.get("params", {}).get("protocolVersion", PROTOCOL),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bwrap-stub", "version": "0"}}})
        elif method == "tools/list":
            self.send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [{
                "name": "run_python", "description": "Run Python code in a bubblewrap sandbox.",
                "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}},
                                "required": ["code"]}}]}})
        elif method == "ping":
            self.send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call" and msg.get("params", {}).get("name") == "run_python":
            code = msg["params"].get("arguments", {}).get("code", "")
            threading.Thread(target=self.run_python, args=(rid, code), daemon=True).start()
        else:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


def main():
    rootfs = os.path.join(ROOT, "rootfs/python-3.14-slim")
    if sys.argv[1:2] == ["--rootfs"] and len(sys.argv) == 3:
        rootfs = sys.argv[2]
    elif len(sys.argv) > 1:
        sys.exit("usage: bench/bwrap-stub.py [--rootfs DIR]")
    rootfs = os.path.realpath(rootfs)
    if not os.path.isfile(os.path.join(rootfs, "usr/bin/python3")):
        sys.exit(f"bwrap-stub: no usr/bin/python3 in {rootfs} (make rootfs)")
    server = Server(rootfs)
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            server.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if isinstance(msg, dict):
            server.handle(msg)
    for t in threading.enumerate():  # stdin closed: let the calls in flight answer
        if t is not threading.current_thread():
            t.join()


if __name__ == "__main__":
    main()
