"""The egress proxy (#17): `--allow-host` (and `network proxy`) give a sandbox HTTP CONNECT and
plain-HTTP forwarding at 127.0.0.1:3128, to the allowlist only. Every server here is on the host's
loopback, allowed by IP literal; nothing leaves the machine. Runs as root and as sbxtest."""
import json
import os
import socket
import time

import pytest

import egresshost
import sbx
from sbx import code, weak_policy

PROXY_PORT = 3128

# Inside the sandbox: talk to the proxy by hand.
CLIENT = r'''
import json, os, socket, sys, time
def raw(data, read=True, timeout=20):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=timeout)
    s.sendall(data)
    if not read:
        return s
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except OSError:
            break
        if not b:
            break
        out += b
    return out
def status(resp):
    line = resp.split(b"\r\n", 1)[0].decode()
    return int(line.split()[1]) if line.startswith("HTTP/") else None
def body(resp):
    return resp.split(b"\r\n\r\n", 1)[1].decode() if b"\r\n\r\n" in resp else ""
def tunnel(host, port):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head
'''


def inside(src, hosts=(), policy=None, env=None, timeout=60, opts=()):
    o = list(opts)
    for h in hosts:
        o += ["--allow-host", h]
    return code(CLIENT + src, policy=policy, opts=o, env=env, timeout=timeout)


def facts(r):
    assert r.rc == 0, r.describe()
    return r.json()


@pytest.fixture
def web():
    s = egresshost.HttpServer()
    yield s
    s.close()


@pytest.fixture
def web2():
    s = egresshost.HttpServer()
    yield s
    s.close()


@pytest.fixture
def audit_env(tmp_path):
    path = tmp_path / "audit.log"
    return path, dict(os.environ, SANDBOXD_AUDIT_LOG=str(path))


def last_audit(path):
    with open(path) as f:
        return json.loads(f.read().strip().split("\n")[-1])


def test_allowed_by_ip_literal_urllib_http_client_and_raw_connect(web):
    r = inside(f'''
import urllib.request, http.client
u = urllib.request.urlopen("http://127.0.0.1:{web.port}/u").read().decode()
c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
c.set_tunnel("127.0.0.1", {web.port})
c.request("GET", "/tunnel")
t = c.getresponse().read().decode()
s, head = tunnel("127.0.0.1", {web.port})
s.sendall(b"GET /raw HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
rr = b""
while True:
    b = s.recv(65536)
    if not b: break
    rr += b
env = {{k: v for k, v in os.environ.items() if "proxy" in k.lower()}}
print(json.dumps({{"u": u, "t": t, "head": head.decode(), "raw": body(rr), "env": env}}))
''', hosts=[f"127.0.0.1:{web.port}"])
    f = facts(r)
    assert f["u"] == "hello from the host /u"
    assert f["t"] == "hello from the host /tunnel"
    assert f["head"].startswith("HTTP/1.1 200 "), f
    assert f["raw"] == "hello from the host /raw"
    url = f"http://127.0.0.1:{PROXY_PORT}"
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert f["env"][k] == url and f["env"][k.lower()] == url, f["env"]
    assert f["env"]["NO_PROXY"] == "" and f["env"]["no_proxy"] == ""
    # Plain forwarding sends the origin-form target, the client's one Host, and `close`.
    assert ("GET", "/u", [f"127.0.0.1:{web.port}"]) in web.seen, web.seen
    eg = r.report["egress"]
    assert eg["allowed"] == 3 and eg["refused"] == 0 and eg["bytes_down"] > 0 and eg["bytes_up"] > 0, eg


def test_not_allowed_is_refused_clearly_and_audited(web, web2, audit_env):
    path, env = audit_env
    r = inside(f'''
import urllib.request, urllib.error
try:
    urllib.request.urlopen("http://127.0.0.1:{web2.port}/")
    out = "reached"
except urllib.error.HTTPError as e:
    out = [e.code, e.read().decode()]
s, head = tunnel("127.0.0.1", {web2.port})
print(json.dumps({{"get": out, "connect": head.decode()}}))
''', hosts=[f"127.0.0.9:{web.port}"], env=env)
    f = facts(r)
    assert f["get"][0] == 403 and f"no allow_host names `127.0.0.1` (port {web2.port})" in f["get"][1], f
    assert f["connect"].startswith("HTTP/1.1 403 "), f
    assert web2.seen == []
    rec = last_audit(path)["egress"]
    assert rec["refused"] == 2 and rec["allowed"] == 0, rec
    assert [x["verdict"] for x in rec["records"]] == ["no_rule", "no_rule"], rec
    assert {x["method"] for x in rec["records"]} == {"GET", "CONNECT"}
    assert all(x["host"] == "127.0.0.1" and x["port"] == web2.port for x in rec["records"]), rec


def test_audit_record_of_an_allowed_connection(web, audit_env):
    path, env = audit_env
    r = inside(f'''
import urllib.request
print(json.dumps({{"n": len(urllib.request.urlopen("http://127.0.0.1:{web.port}/big/5000").read())}}))
''', hosts=[f"127.0.0.1:{web.port}"], env=env)
    assert facts(r)["n"] == 5000
    rec = last_audit(path)["egress"]["records"]
    assert len(rec) == 1 and rec[0]["verdict"] == "allowed" and rec[0]["address"] == "127.0.0.1", rec
    assert rec[0]["bytes_down"] > 5000 and rec[0]["bytes_up"] > 0 and rec[0]["end"] == "closed", rec
    assert "duration_ms" in rec[0]


def test_direct_connections_and_udp_go_nowhere(web):
    """The sandbox has only its own loopback: the host's servers, the host's other addresses, UDP
    and DNS are out of reach except through the proxy."""
    port, udp = egresshost.udp_listener()
    try:
        r = inside(f'''
import errno
out = {{}}
def attempt(name, fn):
    try:
        fn(); out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e))
attempt("tcp_host_loopback", lambda: socket.create_connection(("127.0.0.1", {web.port}), timeout=3))
attempt("tcp_outside", lambda: socket.create_connection(("192.0.2.1", 80), timeout=3))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("udp_host_loopback", lambda: u.sendto(b"hi", ("127.0.0.1", {port})))
attempt("udp_outside", lambda: u.sendto(b"hi", ("192.0.2.1", 53)))
q = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
attempt("dns_outside", lambda: u.sendto(q, ("8.8.8.8", 53)))
try:
    socket.getaddrinfo("example.com", 80); out["resolve"] = "resolved"
except socket.gaierror as e:
    out["resolve"] = "failed"
print(json.dumps(out))
''', hosts=[f"127.0.0.1:{web.port}"])
        f = facts(r)
        try:
            got = udp.recv(100)
        except socket.timeout:
            got = None
    finally:
        udp.close()
    assert f["tcp_host_loopback"] == "ECONNREFUSED", f  # the sandbox's own lo: nothing listens there
    assert f["tcp_outside"] == "ENETUNREACH", f
    assert f["udp_outside"] == "ENETUNREACH" and f["dns_outside"] == "ENETUNREACH", f
    assert f["resolve"] == "failed", f
    assert got is None, "a UDP packet from the sandbox reached the host"
    assert web.seen == []


def test_ipv6_literal():
    try:
        web6 = egresshost.HttpServer(socket.AF_INET6)
    except OSError as e:
        sbx.need(False, f"no IPv6 loopback on this host: {e}", security=False)
    try:
        r = inside(f'''
s, h1 = tunnel("[::1]", {web6.port})
s2, h2 = tunnel("[::ffff:127.0.0.1]", {web6.port})
import urllib.request
u = urllib.request.urlopen("http://[::1]:{web6.port}/six").read().decode()
print(json.dumps({{"v6": h1.decode(), "mapped": h2.decode(), "u": u}}))
''', hosts=[f"[::1]:{web6.port}"])
        f = facts(r)
    finally:
        web6.close()
    assert f["v6"].startswith("HTTP/1.1 200 "), f
    assert f["mapped"].startswith("HTTP/1.1 403 "), f  # 127.0.0.1 is another address than ::1
    assert f["u"] == "hello from the host /six"


def test_allowed_name_on_another_port_is_refused(web, web2):
    r = inside(f'''
other = raw(b"CONNECT localhost:{web2.port} HTTP/1.1\\r\\n\\r\\n")
s2, ok = tunnel("localhost", {web.port})
print(json.dumps({{"other": other.decode(), "ok": ok.decode()}}))
''', hosts=[f"localhost:{web.port}"])
    f = facts(r)
    assert f["other"].startswith("HTTP/1.1 403 ") and f"not port {web2.port}" in f["other"], f
    # `localhost` named explicitly is the one name that may reach loopback.
    assert f["ok"].startswith("HTTP/1.1 200 "), f
    assert r.report["egress"]["refused"] == 1


def test_name_resolving_to_loopback_is_refused(web):
    """An allowed name that resolves to loopback (DNS rebinding, /etc/hosts) is refused: only an
    allow_host naming the IP literal (or `localhost`) reaches it."""
    name = egresshost.name_resolving_to_loopback()
    sbx.need(name is not None, "no host name (besides localhost) resolves to loopback here", security=True)
    r = inside(f'''
print(json.dumps({{"r": body(raw(b"GET http://{name}:{web.port}/ HTTP/1.1\\r\\nHost: {name}:{web.port}\\r\\n\\r\\n")),
                   "c": tunnel("{name}", {web.port})[1].decode()}}))
''', hosts=[f"{name}:{web.port}"])
    f = facts(r)
    assert "a loopback address: refused" in f["r"], f
    assert f["c"].startswith("HTTP/1.1 403 "), f
    assert web.seen == []


@pytest.mark.parametrize("req,status,why", [
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nHost: 127.0.0.2:{p}\r\n\r\n", 400, "names another host"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nHost: 127.0.0.2\r\n\r\n", 400,
     "more than one Host"),
    ("GET http://127.0.0.1:{p}@127.0.0.2:{p}/ HTTP/1.1\r\n\r\n", 400, "user information"),
    ("GET / HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\n\r\n", 400, "not a proxy request"),
    ("GET https://127.0.0.1:{p}/ HTTP/1.1\r\n\r\n", 400, "CONNECT"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\nHost: 127.0.0.1:{p}\n\n", 400, "bare LF"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "folded"),
    # RFC 9112 section 5.1: whitespace before the colon is a 400; read as a header `Host `, the
    # request went out with the proxy's own Host line added after the client's.
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nHost : 127.0.0.2:{p}\r\n\r\n", 400, "header name"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nHost\t: 127.0.0.1:{p}\r\n\r\n", 400, "not a valid HTTP/1.x"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nhost : 127.0.0.2\r\n\r\n", 400,
     "header name"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\n Host: 127.0.0.2:{p}\r\n\r\n", 400, "folded"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nX: a\rHost: 127.0.0.2:{p}\r\n\r\n", 400, "bare CR"),
    ("CONNECT 127.0.0.1:{p} HTTP/1.1\r\nHost: 127.0.0.2:{p}\r\n\r\n", 400, "names another host"),
    ("GET http://127.0.0.1:{p}/ HTTP/1.1\r\nX: " + "a" * 17000 + "\r\n\r\n", 431, "over 16 KiB"),
])
def test_smuggling_and_malformed_heads_are_refused(web, req, status, why):
    r = inside(f'''
resp = raw({req.format(p=web.port).encode()!r})
print(json.dumps({{"status": status(resp), "body": body(resp)}}))
''', hosts=[f"127.0.0.1:{web.port}"])
    f = facts(r)
    assert f["status"] == status and why in f["body"], f
    assert web.seen == [], "a refused request reached the origin"


def test_slowloris_client_gets_408():
    r = inside('''
s = raw(b"GET http://127.0.0.1:1/ HTTP/1.1\\r\\n", read=False)
start = time.monotonic()
resp = b""
try:
    for i in range(30):
        s.sendall(b"X-Slow: 1\\r\\n")
        time.sleep(0.5)
except OSError:
    pass
s.settimeout(5)
try:
    while True:
        b = s.recv(4096)
        if not b: break
        resp += b
except OSError:
    pass
print(json.dumps({"status": status(resp), "after": time.monotonic() - start}))
''', hosts=["127.0.0.1:1"])
    f = facts(r)
    assert f["status"] == 408, f
    assert f["after"] < 12, f


def _policy(tag, key, value):
    return weak_policy(tag, "default.policy", rf"{key}\s+\S+", f"{key} {value}")


def test_connection_limit(tmp_path):
    hold = egresshost.HoldServer()
    try:
        r = inside(f'''
a = tunnel("127.0.0.1", {hold.port})
b = tunnel("127.0.0.1", {hold.port})
c = raw(b"CONNECT 127.0.0.1:{hold.port} HTTP/1.1\\r\\n\\r\\n")
print(json.dumps({{"a": a[1].decode(), "b": b[1].decode(), "c": c.decode()}}))
''', hosts=[f"127.0.0.1:{hold.port}"], policy=_policy("egress-conns", "egress_connections", 2))
        f = facts(r)
    finally:
        hold.close()
    assert f["a"].startswith("HTTP/1.1 200 ") and f["b"].startswith("HTTP/1.1 200 "), f
    assert f["c"].startswith("HTTP/1.1 503 ") and "egress_connections" in f["c"], f
    assert "egress_connections" in r.report["egress"]["limits_hit"], r.report


# src/egress/egress_proxy.h: the accept bucket of each sandbox's proxy.
ACCEPT_BURST, ACCEPT_RATE = 64, 20


def test_connect_flood_is_rate_limited():
    """Each connection costs the proxy a fork, in sandboxd's cgroup, not the sandbox's: a
    connect/close loop (the sandbox's CPU 0.05 s in 6 s, the proxy's 0.9 s before the bucket) is
    accepted at most ACCEPT_BURST at once, then ACCEPT_RATE a second; the rest wait in the backlog,
    so a request after the flood is still answered."""
    r = inside('''
start = time.monotonic()
n = 0
while time.monotonic() - start < 6:
    s = socket.socket()
    s.settimeout(0.5)
    try:
        s.connect(("127.0.0.1", 3128))
    except OSError:
        pass
    s.close()
    n += 1
after = raw(b"CONNECT 127.0.0.9:80 HTTP/1.1\\r\\n\\r\\n", timeout=30)
print(json.dumps({"tries": n, "after": status(after)}))
''', hosts=["127.0.0.1:1"])
    f = facts(r)
    eg = r.report["egress"]
    # Loose: the burst, the rate over the whole run (start and exit included), and a margin.
    bound = ACCEPT_BURST + ACCEPT_RATE * r.elapsed + 10
    assert eg["connections"] <= bound, (eg, f, r.elapsed)
    assert "egress_connection_rate" in eg["limits_hit"], eg
    assert f["after"] == 403, f


def test_bytes_down_limit(web):
    r = inside(f'''
import urllib.request
try:
    n = len(urllib.request.urlopen("http://127.0.0.1:{web.port}/big/1000000").read())
except Exception as e:
    n = repr(e)
print(json.dumps({{"n": n}}))
''', hosts=[f"127.0.0.1:{web.port}"], policy=_policy("egress-down", "egress_bytes_down", "64K"))
    f = facts(r)
    assert not isinstance(f["n"], int) or f["n"] < 1000000, f
    eg = r.report["egress"]
    assert eg["bytes_down"] == 65536 and "egress_bytes" in eg["limits_hit"], eg


def test_bytes_up_limit():
    hold = egresshost.HoldServer()
    try:
        r = inside(f'''
s, head = tunnel("127.0.0.1", {hold.port})
sent = 0
try:
    for i in range(64):
        s.sendall(b"y" * 4096); sent += 4096
    s.settimeout(5); s.recv(1)
except OSError:
    pass
print(json.dumps({{"sent": sent}}))
''', hosts=[f"127.0.0.1:{hold.port}"], policy=_policy("egress-up", "egress_bytes_up", "16K"))
        f = facts(r)
        deadline = time.monotonic() + 5
        while not hold.received and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        hold.close()
    assert hold.received and hold.received[0] <= 16384, (hold.received, f)
    eg = r.report["egress"]
    assert eg["bytes_up"] <= 16384 and "egress_bytes" in eg["limits_hit"], eg


def test_connection_time_limit():
    hold = egresshost.HoldServer()
    try:
        r = inside(f'''
s, head = tunnel("127.0.0.1", {hold.port})
start = time.monotonic()
s.settimeout(10)
try:
    got = s.recv(1)
except OSError:
    got = b"timeout"
print(json.dumps({{"head": head.decode(), "got": got.decode(), "after": time.monotonic() - start}}))
''', hosts=[f"127.0.0.1:{hold.port}"], policy=_policy("egress-time", "egress_connection_time", "1s"))
        f = facts(r)
    finally:
        hold.close()
    assert f["head"].startswith("HTTP/1.1 200 ") and f["got"] == "" and f["after"] < 5, f
    assert "egress_connection_time" in r.report["egress"]["limits_hit"], r.report


def test_every_connection_closes_when_the_sandbox_ends():
    """Open tunnels to a server that never closes; the code exits: the proxy closes the host side
    of each at once (it would otherwise wait for the server, up to egress_connection_time), and no
    process of the run is left."""
    hold = egresshost.HoldServer(hold=True)
    marker = f"egress-end-{os.getpid()}-{time.monotonic_ns()}"
    try:
        start = time.monotonic()
        r = inside(f'''
# {marker}
keep = [tunnel("127.0.0.1", {hold.port}) for i in range(3)]
print(json.dumps({{"heads": [k[1].decode()[:12] for k in keep]}}), flush=True)
os._exit(0)
''', hosts=[f"127.0.0.1:{hold.port}"], timeout=20)
        took = time.monotonic() - start
        f = facts(r)
        deadline = time.monotonic() + 3
        while len(hold.closed_at) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        gone = hold.peers_gone()
    finally:
        hold.close()
    assert f["heads"] == ["HTTP/1.1 200"] * 3, f
    assert gone, "a connection of the proxy outlived the sandbox"
    assert hold.accepted == 3 and len(hold.closed_at) == 3, (hold.accepted, hold.closed_at)
    assert took < 10, took
    assert sbx.wait_gone(marker, 2) == []


def _status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def _fds(pid):
    return sorted(os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))


def test_proxy_processes_hold_no_privilege_and_nothing_else():
    """The proxy and its connection processes: no capabilities, no_new_privs, their seccomp filter,
    as root the sandbox's own host id (not root), and no fd but /dev/null, sockets and the proxy's
    pidfd/signalfd."""
    import subprocess
    hold = egresshost.HoldServer()
    marker = f"egress-priv-{os.getpid()}-{time.monotonic_ns()}"
    cmd = sbx.exec_cmd(("-c", CLIENT + f'''
# {marker}
s, head = tunnel("127.0.0.1", {hold.port})
print(head.decode().split()[1], flush=True)
time.sleep(30)
'''), opts=["--allow-host", f"127.0.0.1:{hold.port}"])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout.readline().strip() == "200", p.stderr.read()
        procs = {pid: _status(pid) for pid, _ in sbx.processes_with(marker)}
        proxy = [pid for pid, st in procs.items() if st["PPid"] == [str(p.pid)] and len(st["NSpid"]) == 1]
        assert len(proxy) == 1, procs
        kids = [pid for pid, st in procs.items() if st["PPid"] == [str(proxy[0])]]
        assert len(kids) == 1, procs
        for pid in proxy + kids:
            st = procs[pid]
            assert int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0, st
            assert st["NoNewPrivs"] == ["1"], st
            # The host-side helpers' filter (seccomp.h): one, not the sandbox's.
            assert st["Seccomp"] == ["2"] and st["Seccomp_filters"] == ["1"], st
            uid, gid = int(st["Uid"][0]), int(st["Gid"][0])
            if sbx.IS_ROOT:
                assert uid != 0 and sbx.is_host_id(uid, gid), st
            else:
                assert uid == os.getuid(), st
            for f in _fds(pid):
                assert f == "/dev/null" or f.startswith("socket:") or f.startswith("anon_inode:"), (pid, _fds(pid))
    finally:
        p.kill()
        p.wait()
        hold.close()
    assert sbx.wait_gone(marker, 3) == []


def test_audit_keeps_64_records_and_counts_the_rest(audit_env):
    path, env = audit_env
    r = inside('''
for i in range(70):
    raw(b"CONNECT 127.0.0.9:%d HTTP/1.1\\r\\n\\r\\n" % (1000 + i))
print(json.dumps({"done": True}))
''', hosts=["127.0.0.1:1"], env=env)
    assert facts(r)["done"]
    eg = last_audit(path)["egress"]
    assert eg["connections"] == 70 and eg["refused"] == 70, {k: v for k, v in eg.items() if k != "records"}
    assert len(eg["records"]) == 64 and eg["records_dropped"] == 6, eg["records_dropped"]
    assert [x["port"] for x in eg["records"]] == list(range(1000, 1064))
