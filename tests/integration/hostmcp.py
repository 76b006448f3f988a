"""A small host MCP server (stdio, one JSON-RPC message per line) for the bridge tests: `echo`
answers at once with the size of its arguments, `hold` answers after `seconds`, `mirror` with its
argument `s` as the text."""
import json
import sys
import threading
import time

lock = threading.Lock()
TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object"}}
         for n, d in (("echo", "the size of the arguments"), ("hold", "answer after `seconds`"),
                      ("mirror", "`s` back as the text"))]


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def call(rid, params):
    args = params.get("arguments") or {}
    if params.get("name") == "hold":
        time.sleep(float(args.get("seconds", 1)))
    text = args.get("s", "") if params.get("name") == "mirror" else str(len(json.dumps(args)))
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})


for line in sys.stdin:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": msg["params"]["protocolVersion"],
                                                      "capabilities": {"tools": {}},
                                                      "serverInfo": {"name": "hostmcp", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        threading.Thread(target=call, args=(rid, msg.get("params") or {}), daemon=True).start()
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
