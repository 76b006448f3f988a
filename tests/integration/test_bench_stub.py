"""bench/bwrap-stub.py, the reference peer bench/mcp measures sandboxd mcp against, answers
run_python over stdio MCP (one bubblewrap sandbox per call). Cheap (two short calls); skips
where bubblewrap is missing or cannot create its namespaces here."""
import json
import os
import shutil
import subprocess

import sbx

STUB = os.path.join(sbx.REPO, "bench", "bwrap-stub.py")


def rpc(i, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n"


def test_stub_answers_run_python():
    sbx.need(shutil.which("bwrap"), "bubblewrap is not installed (scripts/install-deps)", security=False)
    probe = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", sbx.ROOTFS, "/", "/usr/bin/python3", "-c", ""],
                           capture_output=True, text=True)
    sbx.need(probe.returncode == 0, f"bwrap cannot sandbox here: {probe.stderr.strip()}", security=False)
    msgs = (rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "0"}})
            + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
            + rpc(2, "tools/list", {})
            + rpc(3, "tools/call", {"name": "run_python", "arguments": {"code": "import os; print(os.getpid())"}})
            + rpc(4, "tools/call", {"name": "run_python", "arguments": {"code": "raise SystemExit(3)"}}))
    p = subprocess.run(["python3", STUB, "--rootfs", sbx.ROOTFS], input=msgs, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    replies = {m["id"]: m for m in map(json.loads, p.stdout.splitlines())}
    assert replies[1]["result"]["serverInfo"]["name"] == "bwrap-stub"
    assert [t["name"] for t in replies[2]["result"]["tools"]] == ["run_python"]
    ok = replies[3]["result"]["structuredContent"]
    # A pid namespace of its own: the code is pid 2 below bubblewrap's pid 1.
    assert ok["status"] == "ok" and ok["stdout"] == "2\n", ok
    bad = replies[4]["result"]
    assert bad["isError"] and bad["structuredContent"]["exit_code"] == 3, bad
