"""Revision 2026-07-28 beside 2025-11-25 (mcp_modern.c): per-request _meta instead of initialize,
server/discover, the HTTP headers that mirror the body, the fields every result carries, the
per-request log level, resource-not-found as -32602; over stdio and Streamable HTTP, and every
older revision unchanged on the same server."""
import base64
import json
import subprocess

import pytest

import sbx
from httpmcp import ACCEPT, HttpMcp

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
VERSIONS = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


class Stdio:
    """`sandboxd mcp` over pipes, with no initialize unless a test sends one."""

    def __init__(self, *args):
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", "0", "--audit-log", "off",
                                   *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.n = 0
        self.seen = []

    def request(self, method, params=None):
        """(the response, the notifications sent before it)."""
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        notes = []
        while True:
            line = self.p.stdout.readline()
            assert line, self.p.stderr.read()
            m = json.loads(line)
            if m.get("id") == self.n:
                return m, notes
            notes.append(m)

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(timeout=30) == 0
        return self.p.stderr.read()


@pytest.fixture
def stdio():
    s = Stdio()
    yield s
    s.close()


@pytest.fixture
def http():
    servers = []

    def start(*args):
        s = HttpMcp(*args)
        servers.append(s)
        return s
    yield start
    for s in servers:
        rc, err = s.stop()
        assert "Sanitizer" not in err and "runtime error" not in err, err


def meta(**extra):
    return dict(META, **extra)


def modern_post(s, method, params, headers=None, drop=(), rid=7):
    """A 2026-07-28 POST with the headers a conforming client sends (minus those in drop)."""
    h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        h["Mcp-Name"] = params["name"]
    if method == "resources/read":
        h["Mcp-Name"] = params["uri"]
    for k in drop:
        h.pop(k, None)
    h.update(headers or {})
    st, hdrs, body = s.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, headers=h)
    return st, hdrs, body


def body_json(body):
    """The JSON-RPC message of a plain or SSE answer (the last, for a stream)."""
    text = body.decode()
    if text.startswith("{"):
        return json.loads(text)
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")][-1]


def check_result(r, ttl):
    """Every 2026-07-28 result: resultType and the server's identity; a cacheable one its hints."""
    assert r["resultType"] == "complete", r
    info = r["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert info["name"] == "sandboxd" and info["version"], r
    if ttl:
        assert isinstance(r["ttlMs"], int) and r["ttlMs"] >= 0 and r["cacheScope"] in ("public", "private"), r
    else:
        assert "ttlMs" not in r and "cacheScope" not in r, r


# ------------------------------------------------------------------ stdio


def test_stdio_discover_before_any_initialize(stdio):
    """A dual-era client's probe (transports/stdio, "Backward Compatibility"): server/discover first."""
    m, _ = stdio.request("server/discover", {"_meta": META})
    r = m["result"]
    assert r["supportedVersions"] == VERSIONS, r
    assert set(r["capabilities"]) >= {"tools", "resources"}, r
    assert "listChanged" not in r["capabilities"]["tools"] and "subscribe" not in r["capabilities"]["resources"]
    assert "sandbox" in r["instructions"]
    check_result(r, ttl=True)
    # Then a modern call, with no initialize at all: code runs, the result says its type.
    m, _ = stdio.request("tools/call", {"name": "run_python", "arguments": {"code": "print(6*7)"}, "_meta": META})
    r = m["result"]
    assert not r["isError"] and r["structuredContent"]["stdout"] == "42\n", r
    check_result(r, ttl=False)
    m, _ = stdio.request("tools/list", {"_meta": META})
    check_result(m["result"], ttl=True)
    assert [t["name"] for t in m["result"]["tools"]] == ["run_python", "execute_code", "session_start", "session_end"]


def test_stdio_meta_required_and_version_checked(stdio):
    for params, why in (({}, "_meta"), ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, "protocolVersion"),
                        ({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}, "clientCapabilities")):
        m, _ = stdio.request("server/discover", params)
        assert m["error"]["code"] == -32602 and why in m["error"]["message"], m
        assert m["id"] == stdio.n
    m, _ = stdio.request("tools/list", {"_meta": meta(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})})
    assert m["error"]["code"] == -32022, m
    assert m["error"]["data"] == {"supported": VERSIONS, "requested": "2099-01-01"}, m
    # clientInfo is a SHOULD: a request without it is served.
    bare = {k: v for k, v in META.items() if "clientInfo" not in k}
    m, _ = stdio.request("server/discover", {"_meta": bare})
    assert "result" in m, m


def test_stdio_removed_methods_and_legacy_beside(stdio):
    """initialize, ping and logging/setLevel are not 2026-07-28's; the same server still speaks
    2025-11-25 to a client that initializes, with no trace of the modern fields."""
    for method in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "prompts/list"):
        m, _ = stdio.request(method, {"_meta": META})
        assert m["error"]["code"] == -32601, (method, m)
    m, _ = stdio.request("initialize", {"protocolVersion": MODERN, "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}})
    # An initialize is legacy by nature: asked for 2026-07-28, it answers with the newest legacy.
    assert m["result"]["protocolVersion"] == "2025-11-25", m
    m, _ = stdio.request("ping", {})
    assert m["result"] == {}, m
    m, _ = stdio.request("tools/list", {})
    assert "resultType" not in m["result"] and "_meta" not in m["result"] and "ttlMs" not in m["result"], m
    m, _ = stdio.request("resources/read", {"uri": "sandboxd://nothing"})
    assert m["error"]["code"] == -32002, m
    # ...while a modern request on the same pipe is served as 2026-07-28.
    m, _ = stdio.request("resources/read", {"uri": "sandboxd://nothing", "_meta": META})
    assert m["error"]["code"] == -32602 and m["error"]["data"] == {"uri": "sandboxd://nothing"}, m
    m, _ = stdio.request("resources/read", {"uri": "sandboxd://capabilities", "_meta": META})
    check_result(m["result"], ttl=True)
    assert m["result"]["ttlMs"] == 0  # its counts change as calls run


def test_stdio_log_level_per_request():
    """server/utilities/logging: no notifications/message for a request without logLevel; with
    it, the request's own level (a legacy setLevel does not leak into modern requests)."""
    s = Stdio()
    try:
        s.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "1"}})
        s.request("logging/setLevel", {"level": "debug"})
        call = {"name": "run_python", "arguments": {"code": "print(1)"}}
        _, notes = s.request("tools/call", dict(call, _meta=META))
        assert [n for n in notes if n.get("method") == "notifications/message"] == [], notes
        _, notes = s.request("tools/call", dict(call, _meta=meta(**{"io.modelcontextprotocol/logLevel": "debug"})))
        logs = [n["params"] for n in notes if n.get("method") == "notifications/message"]
        assert any(m["level"] == "debug" and "sandbox" in m["data"] for m in logs), notes
        _, notes = s.request("tools/call", dict(call, _meta=meta(**{"io.modelcontextprotocol/logLevel": "error"})))
        assert [n for n in notes if n.get("method") == "notifications/message"] == [], notes
        # The legacy client's own level is untouched by the modern requests.
        _, notes = s.request("tools/call", call)
        assert any(n.get("method") == "notifications/message" for n in notes), notes
    finally:
        s.close()


# ------------------------------------------------------------------ HTTP


@pytest.mark.parametrize("stateless", [False, True])
def test_http_modern_without_sessions(http, stateless):
    """No initialize and no Mcp-Session-Id, also on a server with sessions; one sent is ignored."""
    s = http(*(["--stateless"] if stateless else []))
    st, h, body = modern_post(s, "server/discover", {"_meta": META})
    assert st == 200 and "mcp-session-id" not in h, (st, body)
    check_result(json.loads(body)["result"], ttl=True)
    st, h, body = modern_post(s, "tools/call", {"name": "run_python", "arguments": {"code": "print(2+3)"},
                                                "_meta": META}, headers={"Mcp-Session-Id": "no-such-session"})
    assert st == 200 and "mcp-session-id" not in h, (st, body)
    r = body_json(body)["result"]
    assert r["structuredContent"]["stdout"] == "5\n"
    check_result(r, ttl=False)
    # The legacy client beside it, on the same server, as before.
    sid = s.initialize()
    assert (sid is None) == stateless
    assert s.alive() if stateless else True


def test_http_status_of_modern_errors(http):
    s = http()
    st, _, body = modern_post(s, "server/discover", {})
    assert st == 400 and json.loads(body)["error"]["code"] == -32602 and json.loads(body)["id"] == 7, body
    st, _, body = modern_post(s, "ping", {"_meta": META}, rid="p")
    assert st == 404 and json.loads(body)["error"]["code"] == -32601 and json.loads(body)["id"] == "p", body
    st, _, body = modern_post(s, "no/such", {"_meta": META})
    assert st == 404 and json.loads(body)["error"]["code"] == -32601, body
    bad = meta(**{"io.modelcontextprotocol/protocolVersion": "v9"})
    st, _, body = modern_post(s, "server/discover", {"_meta": bad}, headers={"MCP-Protocol-Version": "v9"})
    e = json.loads(body)["error"]
    assert st == 400 and e["code"] == -32022 and e["data"] == {"supported": VERSIONS, "requested": "v9"}, body
    # Neither GET streams nor DELETE exist under 2026-07-28.
    for method in ("GET", "DELETE"):
        st, h, _ = s.raw(method, headers={"MCP-Protocol-Version": MODERN, "Accept": ACCEPT})
        assert st == 405 and h.get("allow") == "POST", (method, st)


def test_http_header_mismatch(http):
    """transports/streamable-http, "Server Validation": every mirrored header checked, -32020."""
    s = http()
    call = {"name": "run_python", "arguments": {"code": "print(1)"}, "_meta": META}
    cases = [
        ({"MCP-Protocol-Version": "2025-11-25"}, (), "MCP-Protocol-Version"),  # header and body differ
        ({}, ("MCP-Protocol-Version",), "MCP-Protocol-Version"),  # missing
        ({}, ("Mcp-Method",), "Mcp-Method"),
        ({"Mcp-Method": "tools/list"}, (), "Mcp-Method"),
        ({}, ("Mcp-Name",), "Mcp-Name"),
        ({"Mcp-Name": "execute_code"}, (), "Mcp-Name"),
        ({"Mcp-Name": "=?base64?" + base64.b64encode(b"execute_code").decode() + "?="}, (), "Mcp-Name"),
        ({"Mcp-Name": "=?base64?!!!?="}, (), "Mcp-Name"),
    ]
    for headers, drop, named in cases:
        st, _, body = modern_post(s, "tools/call", call, headers=headers, drop=drop)
        err = json.loads(body)["error"]
        assert st == 400 and err["code"] == -32020 and named in err["message"], (headers, drop, body)
        assert json.loads(body)["id"] == 7
    # The Base64 sentinel decoded, and whitespace around a plain value, are the same name.
    for name in ("=?base64?" + base64.b64encode(b"run_python").decode() + "?=", "  run_python "):
        st, _, body = modern_post(s, "tools/call", call, headers={"Mcp-Name": name})
        assert st == 200 and body_json(body)["result"]["structuredContent"]["stdout"] == "1\n", (name, body)
    # resources/read names its uri.
    read = {"uri": "sandboxd://capabilities", "_meta": META}
    st, _, body = modern_post(s, "resources/read", read, headers={"Mcp-Name": "sandboxd://other"})
    assert st == 400 and json.loads(body)["error"]["code"] == -32020, body
    st, _, body = modern_post(s, "resources/read", read)
    assert st == 200 and json.loads(body)["result"]["contents"][0]["uri"] == "sandboxd://capabilities"


def test_http_log_level_per_request(http):
    """The debug note of a modern call comes on its own stream only when that request asks."""
    s = http()
    call = {"name": "run_python", "arguments": {"code": "print(1)"}, "_meta": dict(META, progressToken="t")}
    st, _, body = modern_post(s, "tools/call", call)
    notes = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: ")]
    assert st == 200 and not [n for n in notes if n.get("method") == "notifications/message"], body
    call["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
    st, _, body = modern_post(s, "tools/call", call)
    notes = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: ")]
    assert any(n.get("method") == "notifications/message" and n["params"]["level"] == "debug" for n in notes), body


def test_http_session_id_is_mirrored_and_checked(http):
    """session_id is marked x-mcp-header (Session): a 2026-07-28 call carrying it must say it in
    Mcp-Param-Session, exactly (the Base64 sentinel decoded, padded); a header for a session_id
    the body lacks is refused too, so a load balancer never routes on a value the server ignores."""
    s = http()
    st, _, body = modern_post(s, "tools/list", {"_meta": META})
    tools = {t["name"]: t for t in json.loads(body)["result"]["tools"]}
    for name in ("run_python", "execute_code", "session_end"):
        assert tools[name]["inputSchema"]["properties"]["session_id"]["x-mcp-header"] == "Session", name
    st, _, body = modern_post(s, "tools/call", {"name": "session_start", "arguments": {}, "_meta": META})
    sid = json.loads(body)["result"]["structuredContent"]["session_id"]
    call = {"name": "run_python", "arguments": {"code": "x = 41", "session_id": sid}, "_meta": META}
    b64 = base64.b64encode(sid.encode()).decode()
    for value in (None, sid[:-1] + ("B" if sid.endswith("A") else "A"), "=?base64?" + b64.rstrip("=") + "?=" if b64.endswith("=") else "=?base64?!?="):
        headers = {} if value is None else {"Mcp-Param-Session": value}
        st, _, body = modern_post(s, "tools/call", call, headers=headers)
        assert st == 400 and json.loads(body)["error"]["code"] == -32020, (value, body)
    for value in (sid, "=?base64?" + b64 + "?="):
        st, _, body = modern_post(s, "tools/call", call, headers={"Mcp-Param-Session": value})
        assert st == 200 and not body_json(body)["result"]["isError"], (value, body)
    call["arguments"] = {"code": "print(x + 1)", "session_id": sid}
    st, _, body = modern_post(s, "tools/call", call, headers={"Mcp-Param-Session": sid})
    assert body_json(body)["result"]["structuredContent"]["stdout"] == "42\n", body
    # A header with no session_id in the body.
    one_shot = {"name": "run_python", "arguments": {"code": "print(1)"}, "_meta": META}
    st, _, body = modern_post(s, "tools/call", one_shot, headers={"Mcp-Param-Session": sid})
    assert st == 400 and json.loads(body)["error"]["code"] == -32020, body
