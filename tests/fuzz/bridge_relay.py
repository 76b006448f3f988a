"""Host MCP server for fuzz_bridge's live mode (SANDBOXD_FUZZ_BRIDGE=live): its one tool, `next`,
hands the relay code inside the sandbox the next fuzz input, read from the fuzzer's FIFO $FUZZ_IN
(a 4-byte big-endian length, then the bytes), after acknowledging the previous input with one
byte on $FUZZ_OUT. The relay calls `next` on the same bridge right after sending an input's
frames, and sandboxd handles a bridge's frames in order: the ack means sandboxd has handled that
input. One message per line on stdio, as MCP's stdio transport."""
import base64
import json
import os
import struct
import sys

fin = open(os.environ["FUZZ_IN"], "rb", buffering=0)
fout = open(os.environ["FUZZ_OUT"], "wb", buffering=0)
given = False


def read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = fin.read(n - len(buf))
        if not chunk:
            sys.exit(0)
        buf += chunk
    return buf


def next_input():
    global given
    if given:
        fout.write(b"A")
    (n,) = struct.unpack(">I", read_exact(4))
    given = True
    return base64.b64encode(read_exact(n)).decode()


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "bridge-relay", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "next", "description": "the next fuzz input, base64",
                             "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": next_input()}]}
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": rid, "result": result})
