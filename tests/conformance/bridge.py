#!/usr/bin/env python3
"""A small HTTP front for `sandboxd mcp` over stdio, so the conformance suite (which speaks only
HTTP) can test the stdio transport: each POSTed JSON-RPC message is written to one sandboxd's
stdin as a line; a request's answer (matched by a fresh id of the bridge's, mapped back) is the
HTTP response. It adds nothing of MCP: no sessions, no header checks, no Origin rule (those are the
HTTP transport's, tested against `sandboxd mcp --http`). For a 2026-07-28 request it gives the
status that revision's HTTP binding gives an error (404 for -32601; 400 for -32602 and -32020 to
-32022), so scenarios about the body can be judged; the notifications sandboxd sends on stdio are
not relayed.

Usage: bridge.py PORT_FILE SANDBOXD [ARGS...]: listens on 127.0.0.1 (a free port, written to
PORT_FILE once listening) until killed; then ends sandboxd."""
import http.server
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading

MODERN = "2026-07-28"
STATUS = {-32601: 404, -32602: 400, -32020: 400, -32021: 400, -32022: 400}


class Bridge:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ids = itertools.count(1)
        self.waiting = {}
        self.lock = threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            q = self.waiting.get(msg.get("id")) if "method" not in msg else None
            if q:
                q.put(msg)

    def send(self, msg):
        with self.lock:
            self.p.stdin.write(json.dumps(msg).encode() + b"\n")
            self.p.stdin.flush()

    def request(self, msg, timeout=60):
        own = "bridge-%d" % next(self.ids)
        q = queue.Queue()
        self.waiting[own] = q
        try:
            self.send(dict(msg, id=own))
            return q.get(timeout=timeout)
        finally:
            del self.waiting[own]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply(405)

    do_DELETE = do_GET

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            msg = json.loads(body)
        except ValueError:
            return self.reply(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        if not isinstance(msg, dict) or "method" not in msg:
            return self.reply(400)
        if "id" not in msg:
            self.server.bridge.send(msg)
            return self.reply(202)
        try:
            answer = self.server.bridge.request(msg)
        except queue.Empty:
            return self.reply(504)
        answer["id"] = msg["id"]
        meta = (msg.get("params") or {}).get("_meta") or {}
        modern = self.headers.get("MCP-Protocol-Version") == MODERN or "io.modelcontextprotocol/protocolVersion" in meta
        code = (answer.get("error") or {}).get("code")
        self.reply(STATUS.get(code, 200) if modern else 200, answer)


def main():
    port_file, argv = sys.argv[1], sys.argv[2:]
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.bridge = Bridge(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.bridge.p.stdin.close()
        srv.bridge.p.wait(timeout=10)


if __name__ == "__main__":
    main()
