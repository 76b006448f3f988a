# SPDX-License-Identifier: Apache-2.0
"""The sandbox end of sandboxd's bridge: framed JSON over the socket at fd 3.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (src/bridge.h). Requests
carry an id; one reader thread matches answers to waiting futures, so calls may overlap and work
from synchronous code and from asyncio alike.
"""
import concurrent.futures
import json
import os
import select
import socket
import struct
import threading
import time

BRIDGE_FD = 3
# sandboxd's limit for a request (the policy's proxy_request_limit), refused here before it is sent
MAX_FRAME = int(os.environ.get("SANDBOXD_MCP_MAX_REQUEST") or 16 << 20)
MAX_INFLIGHT = 64  # sandboxd answers more than this many concurrent calls with an error; wait instead


class MCPError(Exception):
    """A proxied call failed: not allowed, unknown server or tool, timeout, host server crash,
    or a protocol error. `code` is the JSON-RPC error code; `server` and `tool` say which call."""

    def __init__(self, message, code=None, server=None, tool=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.server = server
        self.tool = tool


class Bridge:
    def __init__(self, fd=BRIDGE_FD):
        try:
            self._sock = socket.socket(fileno=fd)
        except OSError as e:
            raise MCPError("no host MCP servers are available to this run (fd %d is not sandboxd's bridge: %s)"
                           % (fd, e)) from None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending = {}
        self._next_id = 0
        self._closed = None
        self._note = None
        self._slots = threading.BoundedSemaphore(MAX_INFLIGHT)
        self._reader = threading.Thread(target=self._read_loop, name="sandboxd-bridge", daemon=True)
        self._reader.start()

    def request(self, method, params=None, on_progress=None):
        """Send a request; returns a concurrent.futures.Future of its result (or MCPError)."""
        fut = concurrent.futures.Future()
        # A slot per request in flight, given back when its answer (or the end) arrives.
        self._slots.acquire()
        fut.add_done_callback(lambda _f: self._slots.release())
        with self._lock:
            if self._closed:
                fut.cancel()
                raise MCPError(self._closed, code=-32002 if self._note else None)
            self._next_id += 1
            rid = self._next_id
            self._pending[rid] = (fut, on_progress)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        data = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        if len(data) > MAX_FRAME:
            with self._lock:
                self._pending.pop(rid, None)
            fut.cancel()
            raise MCPError("request of %d bytes is above the bridge's limit of %d bytes" % (len(data), MAX_FRAME),
                           code=-32002)
        with self._send_lock:
            try:
                self._sock.sendall(struct.pack(">I", len(data)) + data)
            except OSError as e:
                with self._lock:
                    self._pending.pop(rid, None)
                fut.cancel()
                # sandboxd may have said why just before it stopped reading: let the reader
                # take what is waiting (at most a second).
                deadline = time.monotonic() + 1
                while time.monotonic() < deadline and select.select([self._sock], [], [], 0)[0]:
                    time.sleep(0.01)
                time.sleep(0.01)
                raise MCPError("the bridge to sandboxd is closed: %s" % (self._note or e),
                               code=-32002 if self._note else None) from None
        return fut

    def _recv_exact(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                return None
            got += k
        return buf

    def _read_loop(self):
        reason = "sandboxd closed the bridge"
        try:
            while True:
                hdr = self._recv_exact(4)
                if hdr is None:
                    break
                (n,) = struct.unpack(">I", hdr)
                body = self._recv_exact(n)
                if body is None:
                    break
                try:
                    msg = json.loads(body.decode("utf-8", "surrogateescape"))
                except ValueError:
                    continue
                self._dispatch(msg)
        except OSError as e:
            reason = "the bridge to sandboxd failed: %s" % e
        if self._note:
            reason = "sandboxd closed the bridge: %s" % self._note
        with self._lock:
            self._closed = reason
            pending, self._pending = self._pending, {}
        for fut, _ in pending.values():
            _settle(fut, exc=MCPError(reason, code=-32002 if self._note else None))

    def _dispatch(self, msg):
        if not isinstance(msg, dict):
            return
        if msg.get("method") == "notifications/progress":
            params = msg.get("params") or {}
            with self._lock:
                entry = self._pending.get(params.get("id"))
            if entry and entry[1]:
                try:
                    entry[1](params)
                except Exception:
                    pass
            return
        rid = msg.get("id")
        with self._lock:
            entry = self._pending.pop(rid, None) if rid is not None else None
        if entry is None:
            # An answer to nothing of ours (e.g. an error about a malformed frame). One that says
            # the bridge is closed (the run's budget is spent) is the reason the next calls get.
            message = str((msg.get("error") or {}).get("message", "")) if rid is None else ""
            if "the bridge is closed" in message:
                self._note = message
            return
        fut = entry[0]
        if "error" in msg:
            err = msg.get("error") or {}
            _settle(fut, exc=MCPError(str(err.get("message", "error")), code=err.get("code")))
        else:
            _settle(fut, result=msg.get("result"))


def _settle(fut, result=None, exc=None):
    # The caller may have given up (a cancelled gather): the reader thread must live on regardless.
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


_bridge = None
_bridge_lock = threading.Lock()


def present():
    """Whether this run has a bridge: sandboxd sets SANDBOXD_MCP_SERVERS (maybe empty) exactly
    then. Without one, fd 3 is not ours to write to (in run_python it is the done channel)."""
    return "SANDBOXD_MCP_SERVERS" in os.environ


def get():
    global _bridge
    with _bridge_lock:
        if _bridge is None:
            if not present():
                raise MCPError("no host MCP servers are configured for this sandbox (see sandboxd-mcp(7))")
            _bridge = Bridge(int(os.environ.get("SANDBOXD_BRIDGE_FD", BRIDGE_FD)))
        return _bridge
