"""valgrind memcheck on the exec path and on an MCP session: no errors, nothing definitely lost,
in sandboxd and in the sandbox's init (a fork of sandboxd, so memcheck follows it)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOXD = os.environ.get("SANDBOXD") or os.path.join(REPO, "build/sandboxd")
ROOTFS = os.environ.get("SANDBOXD_ROOTFS") or os.path.join(REPO, "rootfs/python-3.14-slim")
VALGRIND = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=99",
            "--child-silent-after-fork=no", "--trace-children=no"]

pytestmark = pytest.mark.skipif(not shutil.which("valgrind") and os.environ.get("CI") not in ("1", "true"),
                                reason="valgrind is not installed")


def check_clean(stderr):
    summaries = re.findall(r"==(\d+)== ERROR SUMMARY: (\d+) errors", stderr)
    lost = re.findall(r"==(\d+)==\s+definitely lost: ([\d,]+) bytes", stderr)
    assert summaries, f"no valgrind summary:\n{stderr[-3000:]}"
    bad = [(pid, n) for pid, n in summaries if n != "0"]
    assert not bad, f"valgrind errors in {bad}:\n{stderr[-6000:]}"
    assert all(n == "0" for _, n in lost), f"definitely lost: {lost}\n{stderr[-6000:]}"


def env():
    e = dict(os.environ, SANDBOXD_AUDIT_LOG="off")
    return e


@pytest.mark.parametrize("code,want", [("print('hi')", 0), ("import sys; sys.exit(3)", 3),
                                       ("import os; os.kill(os.getpid(), 9)", 137)])
def test_exec_path(tmp_path, code, want):
    report = tmp_path / "r.json"
    p = subprocess.run(VALGRIND + [SANDBOXD, "exec", "--rootfs", ROOTFS, "--report", str(report), "-c", code],
                       capture_output=True, text=True, timeout=300, env=env())
    assert p.returncode == want, p.stderr[-3000:]
    check_clean(p.stderr)
    assert json.loads(report.read_text())["exit_code"] == want


def test_exec_timeout_and_setup_error(tmp_path):
    p = subprocess.run(VALGRIND + [SANDBOXD, "exec", "--rootfs", ROOTFS, "--timeout", "2", "-c", "while True: pass"],
                       capture_output=True, text=True, timeout=300, env=env())
    assert p.returncode == 124, p.stderr[-3000:]
    check_clean(p.stderr)
    p = subprocess.run(VALGRIND + [SANDBOXD, "exec", "--rootfs", ROOTFS, "--memory", "1T", "-c", "pass"],
                       capture_output=True, text=True, timeout=300, env=env())
    assert p.returncode == 125, p.stderr[-3000:]
    check_clean(p.stderr)


def test_mcp_session():
    msgs = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_python", "arguments": {"code": "print(6*7)"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in msgs) + "garbage\n"
    p = subprocess.Popen(VALGRIND + [SANDBOXD, "mcp", "--rootfs", ROOTFS], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    # Keep stdin open until the call has answered, then EOF ends the session.
    p.stdin.write(stdin)
    p.stdin.flush()
    lines = []
    while not any(m.get("id") == 2 for m in lines):
        line = p.stdout.readline()
        if not line:
            break
        lines.append(json.loads(line))
    p.stdin.close()  # EOF: the server kills what runs, reaps, and exits 0
    lines += [json.loads(l) for l in p.stdout.read().splitlines() if l.strip()]
    err = p.stderr.read()
    p.wait(timeout=300)
    assert any(m.get("id") is None and m.get("error", {}).get("code") == -32700 for m in lines), lines
    assert p.returncode == 0, err[-3000:]
    call = [m for m in lines if m.get("id") == 2]
    assert call and "42" in json.dumps(call[0]), lines
    check_clean(err)
