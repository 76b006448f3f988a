"""GET /healthz, the probes' path (scripts/deploy/kubernetes): 200 without a token, answered by the
server's own loop, so it fails when the server stops serving, where a TCP connect (what a
tcpSocket probe checks) still succeeds: the kernel accepts into the listen backlog."""
import http.client
import signal
import socket

from httpmcp import HttpMcp, token_file

TOKEN = "healthz-test-token-0123456789"


def test_healthz_needs_no_token_and_nothing_else_is_opened(tmp_path):
    s = HttpMcp("--stateless", "--token-file", token_file(tmp_path, TOKEN))
    try:
        status, _, body = s.raw("GET", "/healthz")
        assert (status, body) == (200, b"")
        # Only GET, only that path: the MCP endpoint still wants the token.
        assert s.raw("POST", "/healthz", body=b"{}")[0] == 404
        assert s.raw("GET", "/healthz/x")[0] == 404
        assert s.post({"jsonrpc": "2.0", "id": 1, "method": "ping"})[0] == 401
    finally:
        s.stop()


def test_healthz_fails_when_the_server_stops_serving_and_tcp_does_not():
    s = HttpMcp("--stateless")
    try:
        assert s.raw("GET", "/healthz")[0] == 200
        s.p.send_signal(signal.SIGSTOP)  # a server that no longer runs its loop
        try:
            with socket.create_connection((s.host, s.port), timeout=2):
                pass  # a tcpSocket probe passes
            c = http.client.HTTPConnection(s.host, s.port, timeout=1)
            try:
                c.request("GET", "/healthz")
                c.getresponse()
                assert False, "a stopped server answered /healthz"
            except (TimeoutError, socket.timeout):
                pass  # an httpGet probe fails
            finally:
                c.close()
        finally:
            s.p.send_signal(signal.SIGCONT)
        assert s.raw("GET", "/healthz")[0] == 200
    finally:
        s.stop()
