"""Host-side servers for the egress proxy tests (test_egress*.py): on the host's loopback only,
each in a thread of the test process. Not a test file."""
import http.server
import socket
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, body, code=200):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.server.seen.append((self.command, self.path, self.headers.get_all("Host")))
        if self.path.startswith("/big/"):
            self._send(b"x" * int(self.path[5:]))
        else:
            self._send(b"hello from the host " + self.path.encode())

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        got = 0
        try:
            while got < n:
                chunk = self.rfile.read(min(65536, n - got))
                if not chunk:
                    break
                got += len(chunk)
        finally:
            self.server.posted.append(got)
        self._send(b"got %d" % got)


class HttpServer:
    """An HTTP server on 127.0.0.1 (or ::1): GET / says hello, GET /big/N sends N bytes, POST counts."""

    def __init__(self, family=socket.AF_INET):
        host = "::1" if family == socket.AF_INET6 else "127.0.0.1"

        class S(http.server.ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        self.srv = S((host, 0), _Handler)
        self.srv.seen, self.srv.posted = [], []
        self.port = self.srv.server_address[1]
        self.seen, self.posted = self.srv.seen, self.srv.posted
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class HoldServer:
    """Accepts on 127.0.0.1, reads, never answers or closes: records when each peer closed (EOF)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.closed_at = []
        self.received = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._peer, args=(c,), daemon=True).start()

    def _peer(self, c):
        n = 0
        while True:
            try:
                b = c.recv(65536)
            except OSError:
                b = b""
            if not b:
                break
            n += len(b)
        self.received.append(n)
        self.closed_at.append(time.monotonic())
        c.close()

    def close(self):
        self.sock.close()


def udp_listener():
    """A UDP socket on 127.0.0.1 (port, socket): what reaches it is readable."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.5)
    return s.getsockname()[1], s


def name_resolving_to_loopback():
    """A host name (not `localhost`, no IP literal) that the host resolves to a loopback address:
    the machine's own name from /etc/hosts on Debian (127.0.1.1), or another common alias."""
    for name in (socket.gethostname(), "localhost.localdomain", "ip6-localhost", "ip6-loopback"):
        if not name or name == "localhost":
            continue
        try:
            addrs = {a[4][0] for a in socket.getaddrinfo(name, None)}
        except OSError:
            continue
        if addrs and all(a.startswith("127.") or a == "::1" for a in addrs):
            return name
    return None
