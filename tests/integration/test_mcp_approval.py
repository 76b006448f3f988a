"""Approval of host tool calls (issue #37 item 3; sandboxd-mcp(7), THE PROXY, "Approval"): with
approve_host_calls (the policy) or --approve, a call the code makes to a host MCP server's tool waits
for the user, asked by `sandboxd mcp` of its client with a form elicitation. Only an accepted call
reaches the host server; a decline, a cancel, no answer in time, or a client that cannot be asked is
an MCPError for the code, and the audit record says which."""
import json
import subprocess
import threading
import time

import pytest

import sbx
from httpmcp import HttpMcp

NOT_APPROVED = -32003

# A host server whose tools log their calls: `look` says it is read-only, `write` says nothing.
HOST = r"""
import json, sys
log = sys.argv[1]
TOOLS = [{"name": "look", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
         {"name": "write", "inputSchema": {"type": "object"}}]
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    rid, method = m.get("id"), m.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": m["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "h", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        with open(log, "a") as f:
            f.write(m["params"]["name"] + "\n")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "done"}]}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
"""

# Code that calls each tool named and prints what came of each: ["ok"] or ["error", code, message].
CODE = """
import json, sys
from mcp import runtime
out = []
for tool in %r:
    try:
        runtime.call_tool_sync("host", tool, {"path": "/etc/x", "data": "y" * 400})
        out.append(["ok"])
    except runtime.MCPError as e:
        out.append(["error", e.code, str(e)])
print(json.dumps(out))
"""


def host_config(tmp_path):
    (tmp_path / "host.py").write_text(HOST)
    cfg = tmp_path / "servers.json"
    cfg.write_text(json.dumps({"mcpServers": {"host": {"command": "/usr/bin/python3",
                                                        "args": [str(tmp_path / "host.py"), str(tmp_path / "calls.log")]}}}))
    return cfg


def host_calls(tmp_path):
    log = tmp_path / "calls.log"
    return log.read_text().split() if log.exists() else []


def audit_calls(tmp_path):
    log = tmp_path / "audit.log"
    deadline = time.monotonic() + 10
    while not (log.exists() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return json.loads(log.read_text().splitlines()[-1])["calls"]


class Client:
    """`sandboxd mcp` over stdio with the host server, as a client that (with elicit) declares
    elicitation and answers each elicitation/create with answer: "accept", "decline", "cancel",
    "error", or None (never)."""

    def __init__(self, tmp_path, *args, answer="accept", elicit=True, version="2025-11-25"):
        sbx.require_sandboxd()
        self.answer = answer
        self.asked = []  # the elicitation/create params
        self.cancelled = []  # notifications/cancelled params from the server
        self.answers = {}
        self.cond = threading.Condition()
        self.wlock = threading.Lock()
        self.eof = False
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", "0", "--config",
                                   str(host_config(tmp_path)), "--audit-log", str(tmp_path / "audit.log"),
                                   *sbx.EGRESS_OPTS, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self.p.stderr.read, daemon=True).start()
        self.n = 0
        caps = {"elicitation": {}} if elicit else {}
        self.request("initialize", {"protocolVersion": version, "capabilities": caps,
                                    "clientInfo": {"name": "t", "version": "1"}})
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, msg):
        with self.wlock:  # the reader thread answers while the test writes
            self.p.stdin.write(json.dumps(msg) + "\n")
            self.p.stdin.flush()

    def _read(self):
        for line in self.p.stdout:
            m = json.loads(line)
            if m.get("method") == "elicitation/create":
                self.asked.append(m["params"])
                if self.answer == "error":
                    self.write({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32600, "message": "no"}})
                elif self.answer:
                    result = {"action": self.answer}
                    if self.answer == "accept":
                        result["content"] = {}
                    self.write({"jsonrpc": "2.0", "id": m["id"], "result": result})
            elif m.get("method") == "notifications/cancelled":
                self.cancelled.append(m["params"])
            elif "id" in m and "method" not in m:
                with self.cond:
                    self.answers[m["id"]] = m
                    self.cond.notify_all()
            elif "id" in m:  # roots/list and the like
                self.write({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}})
        with self.cond:  # sandboxd is gone: nothing more will come
            self.eof = True
            self.cond.notify_all()

    def request(self, method, params, timeout=120):
        self.n += 1
        rid = self.n
        self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self.cond:
            self.cond.wait_for(lambda: rid in self.answers or self.eof, timeout)
            assert rid in self.answers, f"no answer to {method}"
            return self.answers.pop(rid)

    def run(self, *tools):
        """What the code saw of each call of tools."""
        r = self.request("tools/call", {"name": "run_python",
                                        "arguments": {"code": CODE % (list(tools),), "servers": ["host"]}})["result"]
        text = "".join(c["text"] for c in r["content"] if c["type"] == "text")
        assert r["structuredContent"]["status"] == "ok", text
        return json.loads(text.strip().splitlines()[-1])

    def close(self):
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        assert rc == 0


@pytest.fixture
def client(tmp_path, request):
    c = Client(tmp_path, *request.param.get("args", ("--approve", "all")), answer=request.param.get("answer", "accept"),
               elicit=request.param.get("elicit", True), version=request.param.get("version", "2025-11-25"))
    yield c
    c.close()


@pytest.mark.parametrize("client", [{"answer": "accept"}], indirect=True)
def test_an_accepted_call_goes_through_and_the_user_saw_what(client, tmp_path):
    assert client.run("write") == [["ok"]]
    assert host_calls(tmp_path) == ["write"]
    [asked] = client.asked
    assert asked["mode"] == "form" and asked["requestedSchema"] == {"type": "object", "properties": {}}, asked
    msg = asked["message"]
    assert "`write`" in msg and "`host`" in msg and '"path":"/etc/x"' in msg and msg.count("y") < 350, msg
    assert "y..." in msg, msg  # the arguments, cut
    assert [(c["tool"], c["outcome"], c["approval"]) for c in audit_calls(tmp_path)] == [("write", "ok", "approved")]


@pytest.mark.parametrize("client, verdict, message", [
    ({"answer": "decline"}, "denied", "denied by the user"),
    ({"answer": "error"}, "denied", "denied by the user"),
    ({"answer": "cancel"}, "cancelled", "cancelled by the user"),
], indirect=["client"])
def test_no_is_an_mcperror_and_the_host_tool_is_not_called(client, verdict, message, tmp_path):
    [[kind, code, text]] = client.run("write")
    assert kind == "error" and code == NOT_APPROVED and message in text and "`write`" in text, text
    assert host_calls(tmp_path) == []
    assert [(c["outcome"], c["approval"]) for c in audit_calls(tmp_path)] == [("denied", verdict)]


@pytest.mark.parametrize("client", [{"answer": None, "args": ("--approve", "all", "--approve-timeout", "2")}],
                         indirect=True)
def test_no_answer_times_out(client, tmp_path):
    start = time.monotonic()
    [[kind, code, text]] = client.run("write")
    assert kind == "error" and code == NOT_APPROVED and "approval timed out after 2 s" in text, text
    assert 1.5 < time.monotonic() - start < 20
    assert host_calls(tmp_path) == []
    assert [c["approval"] for c in audit_calls(tmp_path)] == ["timeout"]
    # The client was told to drop its request (its dialog closes).
    deadline = time.monotonic() + 5
    while not client.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.cancelled and client.cancelled[0]["reason"] == "timed out", client.cancelled


@pytest.mark.parametrize("client", [{"answer": None}], indirect=True)
def test_a_call_cancelled_while_it_waits_forgets_its_request(client, tmp_path):
    """The client cancels the run_python call while its host call waits for the user: sandboxd
    tells the client to drop its elicitation; an acceptance that comes after is ignored (no host
    call, no crash), and the server goes on serving."""
    client.n += 1
    rid = client.n
    client.write({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                  "params": {"name": "run_python", "arguments": {"code": CODE % (["write"],), "servers": ["host"]}}})
    deadline = time.monotonic() + 60
    while not client.asked and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.asked, "never asked"
    client.write({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    while not client.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.cancelled and client.cancelled[0]["reason"] == "the call has ended", client.cancelled
    # The request it cancelled, answered late: ignored.
    client.write({"jsonrpc": "2.0", "id": client.cancelled[0]["requestId"],
                  "result": {"action": "accept", "content": {}}})
    assert client.request("ping", {}, timeout=30)["result"] == {}
    time.sleep(0.5)
    assert host_calls(tmp_path) == [] and rid not in client.answers


@pytest.mark.parametrize("client", [{"elicit": False}, {"version": "2025-03-26"}], indirect=True)
def test_a_client_without_elicitation_cannot_approve(client, tmp_path):
    [[kind, code, text]] = client.run("write")
    assert kind == "error" and code == NOT_APPROVED, text
    assert "approval not possible: the client has no elicitation" in text, text
    assert client.asked == [] and host_calls(tmp_path) == []
    assert [c["approval"] for c in audit_calls(tmp_path)] == ["unavailable"]


@pytest.mark.parametrize("client", [{"args": ("--approve", "writes"), "answer": "decline"}], indirect=True)
def test_writes_asks_only_for_tools_not_marked_read_only(client, tmp_path):
    out = client.run("look", "write")
    assert out[0] == ["ok"] and out[1][0] == "error" and "denied by the user" in out[1][2], out
    assert host_calls(tmp_path) == ["look"]
    assert len(client.asked) == 1 and "`write`" in client.asked[0]["message"], client.asked
    assert [(c["tool"], c.get("approval")) for c in audit_calls(tmp_path)] == [("look", None), ("write", "denied")]


@pytest.mark.parametrize("client", [{"args": (), "answer": "decline"}, {"args": ("--approve", "none")}],
                         indirect=True)
def test_none_asks_nothing(client, tmp_path):
    assert client.run("look", "write") == [["ok"], ["ok"]]
    assert client.asked == [] and host_calls(tmp_path) == ["look", "write"]
    assert all("approval" not in c for c in audit_calls(tmp_path))


@pytest.mark.parametrize("client", [{"answer": "accept", "version": "2025-06-18"}], indirect=True)
def test_before_2025_11_25_the_request_has_no_mode(client, tmp_path):
    assert client.run("write") == [["ok"]]
    assert "mode" not in client.asked[0], client.asked


def test_the_policy_asks_and_approve_cannot_lower_it(tmp_path):
    policy = sbx.weak_policy("approve-writes", "default.policy", r"approve_host_calls\s+none",
                             "approve_host_calls writes")
    c = Client(tmp_path, "--policy", policy, answer="decline")
    try:
        out = c.run("look", "write")
        assert out[0] == ["ok"] and "denied by the user" in out[1][2], out
    finally:
        c.close()
    p = subprocess.run([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--policy", policy, "--approve", "none",
                        "--audit-log", "off"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode == 125, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--approve none" in lines[0] and "approve_host_calls writes" in lines[0], p.stderr


def test_policy_show_prints_the_level():
    sbx.require_sandboxd()
    out = subprocess.run([sbx.SANDBOXD, "policy", "show", "default"], capture_output=True, text=True, check=True).stdout
    assert "\napprove_host_calls none\n" in out, out


# ---------------------------------------------------------------- over Streamable HTTP

def http_session(s):
    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "t", "version": "1"}}
    st, h, body = s.request("initialize", init)
    assert st == 200, body
    sid = h["mcp-session-id"]
    s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid,
           headers={"MCP-Protocol-Version": "2025-11-25"})
    return sid


def http_server(tmp_path):
    sbx.require_sandboxd()
    s = HttpMcp("--config", str(host_config(tmp_path)), "--approve", "all", audit=str(tmp_path / "audit.log"))
    return s, http_session(s)


def call_params(progress):
    p = {"name": "run_python", "arguments": {"code": CODE % (["write"],), "servers": ["host"]}}
    if progress:
        p["_meta"] = {"progressToken": "p1"}
    return p


@pytest.mark.parametrize("intruder", [False, True])
def test_http_asks_on_the_calls_sse_stream(tmp_path, intruder):
    """The request goes on the call's SSE stream, and the answer is a POST in the same session.
    intruder: another session answers `accept` first; it is ignored, and the caller's decline holds."""
    s, sid = http_server(tmp_path)
    try:
        other = http_session(s) if intruder else None
        hdrs = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        c = s.conn(timeout=60)
        c.request("POST", "/mcp", body=json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                                   "params": call_params(True)}).encode(), headers=hdrs)
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
        result, asked = None, []
        while result is None:
            line = r.readline()
            assert line, "the stream ended without the call's answer"
            if not line.startswith(b"data: "):
                continue
            m = json.loads(line[6:])
            if m.get("method") == "elicitation/create":
                asked.append(m)
                v = "2025-11-25"
                if other:
                    st, _, _ = s.post({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": {}}},
                                      session=other, headers={"MCP-Protocol-Version": v})
                    assert st == 202
                answer = {"action": "decline"} if intruder else {"action": "accept", "content": {}}
                st, _, body = s.post({"jsonrpc": "2.0", "id": m["id"], "result": answer}, session=sid,
                                     headers={"MCP-Protocol-Version": v})
                assert st == 202, (st, body)
            elif m.get("id") == 7:
                result = m["result"]
        c.close()
        assert len(asked) == 1 and asked[0]["params"]["mode"] == "form", asked
        text = "".join(b["text"] for b in result["content"] if b["type"] == "text")
        out = json.loads(text.strip().splitlines()[-1])
        if intruder:
            assert out[0][0] == "error" and "denied by the user" in out[0][2], out
            assert host_calls(tmp_path) == []
        else:
            assert out == [["ok"]], text
            assert host_calls(tmp_path) == ["write"]
    finally:
        s.stop()


def test_http_without_a_stream_cannot_ask(tmp_path):
    s, sid = http_server(tmp_path)
    try:
        st, _, body = s.request("tools/call", call_params(False), session=sid,
                                headers={"MCP-Protocol-Version": "2025-11-25"})
        assert st == 200, body
        text = "".join(b["text"] for b in json.loads(body)["result"]["content"] if b["type"] == "text")
        [[kind, code, msg]] = json.loads(text.strip().splitlines()[-1])
        assert code == NOT_APPROVED and "approval not possible" in msg and "not an SSE stream" in msg, msg
        assert host_calls(tmp_path) == []
        assert [c["approval"] for c in audit_calls(tmp_path)] == ["unavailable"]
    finally:
        s.stop()


# ------------------------------------------------------------------ 2026-07-28: InputRequiredResult

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


def modern_call(client, tools, meta=MODERN_META, **extra):
    params = {"name": "run_python", "arguments": {"code": CODE % (list(tools),), "servers": ["host"]},
              "_meta": meta, **extra}
    return client.request("tools/call", params), params


def code_saw(r):
    text = "".join(c["text"] for c in r["result"]["content"] if c["type"] == "text")
    return json.loads(text.strip().splitlines()[-1])


@pytest.mark.parametrize("client", [{"answer": None}], indirect=True)
@pytest.mark.parametrize("action, seen, verdict", [("accept", ["ok"], "approved"), ("decline", None, "denied"),
                                                   ("cancel", None, "cancelled")])
def test_modern_asks_in_the_answer_and_the_retry_decides(client, tmp_path, action, seen, verdict):
    """basic/patterns/mrtr: no elicitation/create request of the server's; the tools/call is
    answered with an InputRequiredResult, and its retry (a new id, inputResponses, requestState)
    decides and gets the call's result."""
    r, params = modern_call(client, ["write"])
    res = r["result"]
    assert res["resultType"] == "input_required" and client.asked == [], r
    [(key, ask)] = res["inputRequests"].items()
    assert ask["method"] == "elicitation/create" and ask["params"]["mode"] == "form", ask
    assert "`write`" in ask["params"]["message"] and len(res["requestState"]) >= 43, res
    assert host_calls(tmp_path) == []  # held while nobody answered
    content = {"content": {}} if action == "accept" else {}
    r = client.request("tools/call", dict(params, requestState=res["requestState"],
                                          inputResponses={key: {"action": action, **content}}))
    assert r["result"]["resultType"] == "complete", r
    [out] = code_saw(r)
    if seen:
        assert out == seen and host_calls(tmp_path) == ["write"]
    else:
        assert out[0] == "error" and out[1] == NOT_APPROVED and host_calls(tmp_path) == [], out
    assert [c["approval"] for c in audit_calls(tmp_path)] == [verdict]


@pytest.mark.parametrize("client", [{"answer": None}], indirect=True)
def test_modern_retry_without_an_answer_is_asked_again_and_bad_state_is_refused(client, tmp_path):
    r, params = modern_call(client, ["write"])
    state = r["result"]["requestState"]
    # Tampered, or sent with other code: refused, and the call still waits for its own retry.
    for bad in (dict(params, requestState=state[:-2] + "xx"),
                dict(params, requestState=state, arguments=dict(params["arguments"], code="print(1)"))):
        e = client.request("tools/call", dict(bad, inputResponses={"sandboxd_approval": {"action": "accept"}}))
        assert e["error"]["code"] == -32602 and "requestState" in e["error"]["message"], e
    assert host_calls(tmp_path) == []
    r = client.request("tools/call", dict(params, requestState=state))  # no inputResponses: asked again
    assert r["result"]["resultType"] == "input_required" and r["result"]["requestState"] == state, r
    r = client.request("tools/call", dict(params, requestState=state,
                                          inputResponses={"sandboxd_approval": {"action": "accept", "content": {}}}))
    assert code_saw(r) == [["ok"]] and host_calls(tmp_path) == ["write"]
    # Used up: the call has ended, its state names nothing.
    e = client.request("tools/call", dict(params, requestState=state))
    assert e["error"]["code"] == -32602, e


@pytest.mark.parametrize("client", [{"answer": None}], indirect=True)
def test_modern_without_elicitation_cannot_approve(client, tmp_path):
    meta = dict(MODERN_META, **{"io.modelcontextprotocol/clientCapabilities": {}})
    r, _ = modern_call(client, ["write"], meta=meta)
    [[kind, code, text]] = code_saw(r)
    assert kind == "error" and code == NOT_APPROVED and "no elicitation" in text, text
    assert host_calls(tmp_path) == [] and [c["approval"] for c in audit_calls(tmp_path)] == ["unavailable"]


@pytest.mark.parametrize("client", [{"answer": None, "args": ("--approve", "all", "--approve-timeout", "2")}],
                         indirect=True)
def test_modern_no_retry_times_out_and_the_state_is_gone(client, tmp_path):
    r, params = modern_call(client, ["write"])
    state = r["result"]["requestState"]
    deadline = time.monotonic() + 20  # the approval times out, the code goes on, the call ends unanswered
    while not (tmp_path / "audit.log").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(c["outcome"], c["approval"]) for c in audit_calls(tmp_path)] == [("denied", "timeout")]
    e = client.request("tools/call", dict(params, requestState=state,
                                          inputResponses={"sandboxd_approval": {"action": "accept"}}))
    assert e["error"]["code"] == -32602 and host_calls(tmp_path) == [], e


def test_modern_over_http_the_retry_is_the_same_tokens(tmp_path):
    """Over HTTP (no session): the InputRequiredResult ends the first POST without ending the run;
    a retry with another bearer token names nothing, the owner's retry gets the result."""
    from httpmcp import token_file
    sbx.require_sandboxd()
    tokens = token_file(tmp_path, "a" * 32, "b" * 32)
    s = HttpMcp("--config", str(host_config(tmp_path)), "--approve", "all", "--token-file", tokens,
                audit=str(tmp_path / "audit.log"))
    try:
        params = {"name": "run_python", "arguments": {"code": CODE % (["write"],), "servers": ["host"]},
                  "_meta": MODERN_META}

        def post(rid, p, token):
            hdrs = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "run_python"}
            st, _, body = s.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": p}, token=token,
                                 headers=hdrs)
            return st, json.loads(body)
        st, r = post(1, params, "a" * 32)
        assert st == 200 and r["result"]["resultType"] == "input_required", r
        retry = dict(params, requestState=r["result"]["requestState"],
                     inputResponses={"sandboxd_approval": {"action": "accept", "content": {}}})
        st, e = post(2, retry, "b" * 32)
        assert e["error"]["code"] == -32602 and host_calls(tmp_path) == [], e
        st, r = post(3, retry, "a" * 32)
        assert st == 200 and code_saw(r) == [["ok"]] and host_calls(tmp_path) == ["write"], r
    finally:
        s.stop()
