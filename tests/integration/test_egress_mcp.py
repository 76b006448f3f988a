"""The egress proxy under `sandboxd mcp --allow-host` (#17): cold and warm sandboxes alike get it,
structuredContent carries the summary, and when a call ends nothing of its proxy is left in the
server (no child process, no socket)."""
import os
import time

import pytest

import egresshost
from mcpsession import Mcp


def children(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/children") as f:
            out += [int(x) for x in f.read().split()]
    return sorted(out)


def sockets(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def settle(pid, want_children, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(children(pid)) != want_children:
        time.sleep(0.05)
    return children(pid)


CALL = '''
import urllib.request, urllib.error
print(urllib.request.urlopen("http://127.0.0.1:{port}/mcp").read().decode())
try:
    urllib.request.urlopen("http://127.0.0.1:{port2}/")
except urllib.error.HTTPError as e:
    print(e.code)
'''


@pytest.mark.parametrize("warm", ["0", "1"])
def test_mcp_calls_get_the_proxy_and_leave_nothing(warm):
    web, other = egresshost.HttpServer(), egresshost.HoldServer()
    m = Mcp("--allow-host", f"127.0.0.1:{web.port}", warm=warm)
    try:
        pid = m.p.pid
        r, _ = m.execute("python", "print(1)")
        base_kids = len(settle(pid, 1 if warm == "1" else 0))
        base_socks = sockets(pid)
        for i in range(3):
            r, _ = m.execute("python", CALL.format(port=web.port, port2=other.port))
            sc = r["structuredContent"]
            assert sc["stdout"] == "hello from the host /mcp\n403\n", sc
            eg = sc["egress"]
            assert eg["allowed"] == 1 and eg["refused"] == 1 and eg["bytes_down"] > 0, eg
            assert "records" not in eg  # the audit record has them, the model gets the summary
        assert len(settle(pid, base_kids)) == base_kids, children(pid)
        assert sockets(pid) == base_socks
        assert other.accepted == 0
    finally:
        m.close()
        web.close()
        other.close()
