"""Tool calls as tasks (issue #37 item 2; sandboxd-mcp(7), TASKS; MCP 2025-11-25
basic/utilities/tasks): a client that negotiated 2025-11-25 may send a run_python or execute_code
call with `task`; it is answered at once with a task, the call runs as any other, and its result
is fetched later (tasks/get, tasks/result, tasks/list). tasks/cancel kills the sandbox, a task is
gone when its ttl ends (the loop's timer, not the next request), a client holds at most the
policy's max_tasks, another client (HTTP session or token) cannot see them, a client that did not
negotiate tasks gets its call run as ever, and nothing runs on after the server exits."""
import json
import os
import select
import socket
import subprocess
import threading
import time

import pytest

import sbx
from httpmcp import HttpMcp, sleeper, token_file
from test_mcp_approval import host_calls, host_config

RELATED = "io.modelcontextprotocol/related-task"
TOO_MANY = -32000


class Stdio:
    """`sandboxd mcp` over pipes: answers by id, the server's notifications and requests kept."""

    def __init__(self, *args, version="2025-11-25", caps=None, audit="off"):
        sbx.require_sandboxd()
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", "0", "--audit-log", audit,
                                   *sbx.EGRESS_OPTS, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.answers, self.notes, self.asks = {}, [], []
        self.cond = threading.Condition()
        self.wlock = threading.Lock()
        self.eof = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self.p.stderr.read, daemon=True).start()
        self.n = 0
        self.init = self.send("initialize", {"protocolVersion": version, "capabilities": caps or {},
                                             "clientInfo": {"name": "t", "version": "1"}})
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, msg):
        with self.wlock:
            self.p.stdin.write(json.dumps(msg) + "\n")
            self.p.stdin.flush()

    def _read(self):
        for line in self.p.stdout:
            m = json.loads(line)
            with self.cond:
                if "method" in m and "id" in m:
                    self.asks.append(m)
                elif "method" in m:
                    self.notes.append(m)
                else:
                    self.answers[m["id"]] = m
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def start(self, method, params):
        """Send a request; its id (wait with answer())."""
        self.n += 1
        self.write({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        return self.n

    def answer(self, rid, timeout=60):
        with self.cond:
            self.cond.wait_for(lambda: rid in self.answers or self.eof, timeout)
            assert rid in self.answers, f"no answer to request {rid}"
            return self.answers.pop(rid)

    def request(self, method, params, timeout=60):
        return self.answer(self.start(method, params), timeout)

    def send(self, method, params):
        m = self.request(method, params)
        assert "result" in m, m
        return m["result"]

    def wait_for(self, pred, timeout=30):
        with self.cond:
            return self.cond.wait_for(lambda: pred() or self.eof, timeout) and pred()

    def close(self):
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        assert rc == 0


@pytest.fixture
def stdio():
    clients = []

    def start(*args, **kw):
        c = Stdio(*args, **kw)
        clients.append(c)
        return c
    yield start
    for c in clients:
        c.close()


def task_call(code, ttl=None, tool="run_python"):
    args = {"code": code} if tool == "run_python" else {"language": "python", "code": code}
    task = {} if ttl is None else {"ttl": ttl}
    return {"name": tool, "arguments": args, "task": task}


def text_of(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


def poll(get, tid, until, timeout=60):
    """tasks/get until its status is in until; that task."""
    deadline = time.monotonic() + timeout
    while True:
        t = get("tasks/get", {"taskId": tid})
        if t["status"] in until or time.monotonic() > deadline:
            return t
        time.sleep(0.1)


def max_tasks_policy(n):
    return sbx.weak_policy(f"max-tasks-{n}", "default.policy", r"max_tasks\s+\d+", f"max_tasks {n}")


def test_create_poll_result(stdio):
    c = stdio()
    assert c.init["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in c.send("tools/list", {})["tools"]}
    assert tools["run_python"]["execution"] == {"taskSupport": "optional"}
    assert tools["execute_code"]["execution"] == {"taskSupport": "optional"}
    start = time.monotonic()
    created = c.send("tools/call", task_call("import time; time.sleep(1.5); print('done', 6 * 7)", ttl=60000))
    assert time.monotonic() - start < 1.4, "the task must be answered before its call ends"
    task = created["task"]
    tid = task["taskId"]
    assert task["status"] == "working" and task["ttl"] == 60000 and task["pollInterval"] > 0, task
    assert len(tid) == 32 and task["createdAt"].endswith("Z") and "content" not in created, created
    t = c.send("tasks/get", {"taskId": tid})
    assert t["taskId"] == tid and t["status"] == "working", t
    assert [x["taskId"] for x in c.send("tasks/list", {})["tasks"]] == [tid]
    t = poll(c.send, tid, ("completed", "failed"))
    assert t["status"] == "completed" and t["lastUpdatedAt"] >= t["createdAt"], t
    r = c.send("tasks/result", {"taskId": tid})
    assert text_of(r) == "done 42\n" and r["isError"] is False and r["structuredContent"]["status"] == "ok", r
    assert r["_meta"] == {RELATED: {"taskId": tid}}, r
    # The status notification is optional; over stdio sandboxd sends it, without the related-task meta.
    assert c.wait_for(lambda: any(n["method"] == "notifications/tasks/status" and n["params"]["status"] == "completed"
                                  for n in c.notes))
    assert all(RELATED not in n["params"].get("_meta", {}) for n in c.notes)
    # The result stays until its ttl ends: fetched again, the same.
    assert text_of(c.send("tasks/result", {"taskId": tid})) == "done 42\n"


def test_result_blocks_until_the_task_ends_and_execute_code(stdio):
    c = stdio()
    tid = c.send("tools/call", task_call("import time; time.sleep(1); print('late')", tool="execute_code"))["task"]["taskId"]
    start = time.monotonic()
    r = c.send("tasks/result", {"taskId": tid})
    assert time.monotonic() - start > 0.5 and text_of(r) == "late\n", r
    assert c.send("tasks/get", {"taskId": tid})["status"] == "completed"


def test_a_failed_call_is_a_failed_task(stdio):
    c = stdio()
    tid = c.send("tools/call", task_call("raise SystemExit(3)"))["task"]["taskId"]
    r = c.send("tasks/result", {"taskId": tid})
    assert r["isError"] is True and r["structuredContent"]["exit_code"] == 3, r
    t = c.send("tasks/get", {"taskId": tid})
    assert t["status"] == "failed" and t["statusMessage"], t
    # Bad arguments with a task: a task that has failed with the tool error, not a bare result.
    created = c.send("tools/call", {"name": "run_python", "arguments": {"code": 5}, "task": {}})
    r = c.send("tasks/result", {"taskId": created["task"]["taskId"]})
    assert r["isError"] is True and "code" in text_of(r), r


def test_cancel_kills_the_sandbox(stdio):
    c = stdio()
    marker = "sbx-task-cancel-%d" % os.getpid()
    tid = c.send("tools/call", task_call(sleeper(marker)))["task"]["taskId"]
    assert _wait_present(marker)
    waiting = c.start("tasks/result", {"taskId": tid})
    t = c.send("tasks/cancel", {"taskId": tid})
    assert t["taskId"] == tid and t["status"] == "cancelled", t
    assert sbx.wait_gone(marker, 5) == []
    # The tasks/result that waited is answered: a cancelled call has no result.
    m = c.answer(waiting)
    assert "error" in m and "cancelled" in m["error"]["message"], m
    assert c.send("tasks/get", {"taskId": tid})["status"] == "cancelled"
    m = c.request("tasks/cancel", {"taskId": tid})
    assert m["error"]["code"] == -32602 and "terminal status 'cancelled'" in m["error"]["message"], m
    # notifications/cancelled with the tools/call's id does nothing to a task (its request is over).
    tid2 = c.send("tools/call", task_call("import time; time.sleep(1); print('kept')"))["task"]["taskId"]
    c.write({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": c.n}})
    assert text_of(c.send("tasks/result", {"taskId": tid2})) == "kept\n"


def test_a_queued_task_is_cancelled_before_it_runs(stdio):
    c = stdio("--max-concurrent", "1")
    marker = "sbx-task-queued-%d" % os.getpid()
    first = c.send("tools/call", task_call(sleeper(marker)))["task"]["taskId"]
    assert _wait_present(marker)
    second = c.send("tools/call", task_call("print('never')"))["task"]["taskId"]
    assert c.send("tasks/cancel", {"taskId": second})["status"] == "cancelled"
    assert c.send("tasks/cancel", {"taskId": first})["status"] == "cancelled"
    assert sbx.wait_gone(marker, 5) == []
    assert c.send("tasks/get", {"taskId": second})["status"] == "cancelled"


def test_waiting_results_are_bounded(stdio):
    c = stdio()
    marker = "sbx-task-waiters-%d" % os.getpid()
    tid = c.send("tools/call", task_call(sleeper(marker)))["task"]["taskId"]
    waiting = [c.start("tasks/result", {"taskId": tid}) for _ in range(4)]
    m = c.request("tasks/result", {"taskId": tid})
    assert m["error"]["code"] == TOO_MANY and "tasks/result" in m["error"]["message"], m
    # One given up (notifications/cancelled) makes room.
    c.write({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": waiting.pop()}})
    waiting.append(c.start("tasks/result", {"taskId": tid}))
    c.send("tasks/cancel", {"taskId": tid})
    answers = [c.answer(w)["error"] for w in waiting]
    assert all("cancelled" in e["message"] for e in answers), answers
    assert sbx.wait_gone(marker, 5) == []


def test_unknown_ids_and_bad_params(stdio):
    c = stdio()
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        m = c.request(method, {"taskId": "0" * 32})
        assert m["error"]["code"] == -32602 and m["error"]["message"] == "Failed to retrieve task: Task not found", m
        assert c.request(method, {})["error"]["code"] == -32602
    assert c.request("tasks/list", {"cursor": "nonsense"})["error"]["code"] == -32602
    m = c.request("tools/call", {"name": "run_python", "arguments": {"code": "1"}, "task": {"ttl": "soon"}})
    assert m["error"]["code"] == -32602, m


def test_expiry_is_reaped_by_the_timer(stdio, tmp_path):
    """A task whose ttl ends is gone with nothing asking: a running one's sandbox is killed then
    (its audit record is written), and no request finds it after."""
    audit = tmp_path / "audit.log"
    c = stdio(audit=str(audit))
    marker = "sbx-task-ttl-%d" % os.getpid()
    short = c.send("tools/call", task_call(sleeper(marker), ttl=1000))["task"]
    assert short["ttl"] == 1000
    quick = c.send("tools/call", task_call("print(1)", ttl=1500))["task"]["taskId"]
    assert _wait_present(marker)
    # No request from here until the sandbox is gone: only the loop's timer can have done it.
    assert sbx.wait_gone(marker, 10) == [], "the expired task's sandbox still runs"
    deadline = time.monotonic() + 10
    while not (audit.exists() and len(audit.read_text().splitlines()) >= 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    # Both calls ended and were recorded, each naming its task; the expired one was killed.
    assert sorted(r["task"] for r in records) == sorted([short["taskId"], quick]), records
    assert [r["status"] for r in records if r["task"] == short["taskId"]] == ["killed"], records
    time.sleep(0.7)
    assert c.send("tasks/list", {})["tasks"] == []
    for tid in (short["taskId"], quick):
        m = c.request("tasks/get", {"taskId": tid})
        assert m["error"]["code"] == -32602, m
    # A ttl above the server's most is capped; under its least, raised.
    big = c.send("tools/call", task_call("1", ttl=10 ** 9))["task"]
    tiny = c.send("tools/call", task_call("1", ttl=0))["task"]
    assert big["ttl"] == 3600000 and tiny["ttl"] == 1000, (big, tiny)


def test_the_bound(stdio):
    c = stdio("--policy", max_tasks_policy(2))
    caps = json.loads(c.send("resources/read", {"uri": "sandboxd://capabilities"})["contents"][0]["text"])
    assert caps["concurrency"]["max_tasks"] == 2 and caps["concurrency"]["task_ttl_max_ms"] == 3600000, caps
    marker = "sbx-task-bound-%d" % os.getpid()
    a = c.send("tools/call", task_call(sleeper(marker)))["task"]["taskId"]
    b = c.send("tools/call", task_call("print(2)", ttl=1000))["task"]["taskId"]
    m = c.request("tools/call", task_call("print(3)"))
    assert m["error"]["code"] == TOO_MANY and "max_tasks" in m["error"]["message"], m
    # A call without a task is not a task: it runs.
    assert c.send("tools/call", {"name": "run_python", "arguments": {"code": "print(4)"}})["isError"] is False
    # A cancelled task is kept (until its ttl): still counted.
    c.send("tasks/cancel", {"taskId": a})
    assert sbx.wait_gone(marker, 5) == []
    assert c.request("tools/call", task_call("print(5)"))["error"]["code"] == TOO_MANY
    # Once b's ttl has ended there is room again.
    time.sleep(1.3)
    assert c.request("tasks/get", {"taskId": b})["error"]["code"] == -32602
    d = c.send("tools/call", task_call("print(6)"))["task"]["taskId"]
    assert text_of(c.send("tasks/result", {"taskId": d})) == "6\n"


def test_list_pages(stdio):
    c = stdio()
    ids = [c.send("tools/call", task_call("print(%d)" % i))["task"]["taskId"] for i in range(11)]
    first = c.send("tasks/list", {})
    assert len(first["tasks"]) == 8 and first["nextCursor"], first
    rest = c.send("tasks/list", {"cursor": first["nextCursor"]})
    assert "nextCursor" not in rest
    assert [t["taskId"] for t in first["tasks"] + rest["tasks"]] == ids


def test_a_client_that_did_not_negotiate_is_unchanged(stdio):
    c = stdio(version="2025-06-18")
    assert "tasks" not in c.init["capabilities"]
    assert all("execution" not in t for t in c.send("tools/list", {})["tools"])
    rid = c.start("tools/call", dict(task_call("print('plain')"), _meta={"progressToken": "p"}))
    r = c.answer(rid)["result"]
    assert text_of(r) == "plain\n" and "task" not in r, r  # `task` ignored: the call's own result
    m = c.request("tasks/get", {"taskId": "0" * 32})
    assert m["error"]["code"] == -32601, m
    # Progress keepalives and cancellation as ever.
    marker = "sbx-task-plain-%d" % os.getpid()
    rid = c.start("tools/call", {"name": "run_python", "arguments": {"code": sleeper(marker)},
                                 "_meta": {"progressToken": "k"}})
    assert _wait_present(marker)
    assert c.wait_for(lambda: any(n["method"] == "notifications/progress" and n["params"]["progressToken"] == "k"
                                  for n in c.notes), 5)
    c.write({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    assert sbx.wait_gone(marker, 5) == []


def test_exit_leaves_nothing_running():
    marker = "sbx-task-exit-%d" % os.getpid()
    c = Stdio()
    c.send("tools/call", task_call(sleeper(marker)))
    assert _wait_present(marker)
    c.close()  # stdin closed: sandboxd exits 0
    assert sbx.wait_gone(marker, 5) == []


def test_input_required_while_the_user_is_asked(tmp_path):
    """A task's call whose host tool call waits for the user's approval: the task says
    input_required, and the elicitation carries the related-task meta."""
    c = Stdio("--config", str(host_config(tmp_path)), "--approve", "all", caps={"elicitation": {}})
    try:
        code = ("from mcp import runtime\nruntime.call_tool_sync('host', 'write', {})\nprint('wrote')\n")
        tid = c.send("tools/call", {"name": "run_python", "arguments": {"code": code, "servers": ["host"]},
                                    "task": {}})["task"]["taskId"]
        assert c.wait_for(lambda: c.asks, 60)
        [ask] = c.asks
        assert ask["method"] == "elicitation/create" and ask["params"]["_meta"] == {RELATED: {"taskId": tid}}, ask
        t = c.send("tasks/get", {"taskId": tid})
        assert t["status"] == "input_required" and t["statusMessage"], t
        c.write({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}})
        r = c.send("tasks/result", {"taskId": tid})
        assert text_of(r) == "wrote\n", r
        assert host_calls(tmp_path) == ["write"]
    finally:
        c.close()


def test_a_sessions_call_as_a_task(stdio):
    """A call in a session (issue #38) may be a task; session_start and session_end never are."""
    c = stdio()
    m = c.request("tools/call", {"name": "session_start", "arguments": {}, "task": {}})
    assert m["error"]["code"] == -32601, m
    r = c.send("tools/call", {"name": "session_start", "arguments": {}})
    sid = r["structuredContent"]["session_id"]
    tid = c.send("tools/call", {"name": "run_python", "arguments": {"code": "x = 6 * 7", "session_id": sid},
                                "task": {}})["task"]["taskId"]
    assert c.send("tasks/result", {"taskId": tid})["isError"] is False
    tid = c.send("tools/call", {"name": "run_python", "arguments": {"code": "print(x)", "session_id": sid},
                                "task": {}})["task"]["taskId"]
    assert text_of(c.send("tasks/result", {"taskId": tid})) == "42\n"
    c.send("tools/call", {"name": "session_end", "arguments": {"session_id": sid}})


# ------------------------------------------------------------------ over HTTP

V = {"MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def http():
    servers = []

    def start(*args, **kw):
        s = HttpMcp(*args, **kw)
        servers.append(s)
        return s
    yield start
    for s in servers:
        rc, err = s.stop()
        assert "Sanitizer" not in err and "runtime error" not in err, err


def http_send(s, method, params, **kw):
    st, _, body = s.request(method, params, headers=V, **kw)
    assert st == 200, (st, body)
    return json.loads(body)


def test_http_a_session_cannot_see_anothers_task(http):
    s = http()
    a, b = s.initialize(), s.initialize()
    marker = "sbx-task-http-%d" % os.getpid()
    tid = http_send(s, "tools/call", task_call(sleeper(marker)), session=a)["result"]["task"]["taskId"]
    assert _wait_present(marker)
    assert http_send(s, "tasks/get", {"taskId": tid}, session=a)["result"]["status"] == "working"
    unknown = http_send(s, "tasks/get", {"taskId": "f" * 32}, session=b)["error"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        e = http_send(s, method, {"taskId": tid}, session=b)["error"]
        assert e == unknown, (method, e)  # the same as an id never made: no oracle
    assert http_send(s, "tasks/list", {}, session=b)["result"]["tasks"] == []
    assert processes_alive(marker)
    assert http_send(s, "tasks/cancel", {"taskId": tid}, session=a)["result"]["status"] == "cancelled"
    assert sbx.wait_gone(marker, 5) == []


def test_http_status_notifications_on_the_sessions_get_stream(http):
    s = http()
    sid = s.initialize()
    sock = socket.create_connection((s.host, s.port), timeout=30)
    sock.sendall(("GET /mcp HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n"
                  % sid).encode())
    other = s.initialize()  # another session's task says nothing on this stream
    http_send(s, "tools/call", task_call("print(0)"), session=other)
    tid = http_send(s, "tools/call", task_call("print(1)"), session=sid)["result"]["task"]["taskId"]
    buf, events = b"", []
    deadline = time.monotonic() + 20  # keepalive comments come every 25 s: a deadline of its own
    while not any(e["params"]["status"] == "completed" for e in events):
        left = deadline - time.monotonic()
        assert left > 0, "no completed status on the GET stream: %r" % buf
        if select.select([sock], [], [], left)[0]:
            chunk = sock.recv(65536)
            assert chunk, "the GET stream ended"
            buf += chunk
            events = [json.loads(line[6:]) for line in buf.decode().split("\n") if line.startswith("data: ")]
    assert b" 200 " in buf.split(b"\r\n", 1)[0], buf
    assert all(e["method"] == "notifications/tasks/status" and e["params"]["taskId"] == tid for e in events), events
    sock.close()


def test_http_task_outlives_its_request_and_the_session_end_kills_it(http):
    s = http()
    sid = s.initialize()
    tid = http_send(s, "tools/call", task_call("import time; time.sleep(1); print('http')"),
                    session=sid)["result"]["task"]["taskId"]
    r = http_send(s, "tasks/result", {"taskId": tid}, session=sid)["result"]
    assert text_of(r) == "http\n" and r["_meta"] == {RELATED: {"taskId": tid}}, r
    marker = "sbx-task-http-del-%d" % os.getpid()
    http_send(s, "tools/call", task_call(sleeper(marker)), session=sid)
    assert _wait_present(marker)
    assert s.raw("DELETE", headers={"Mcp-Session-Id": sid})[0] == 200
    assert sbx.wait_gone(marker, 5) == []


def test_http_stateless_tasks_belong_to_the_token(http, tmp_path):
    s = http("--stateless", "--token-file", token_file(tmp_path, "a" * 20, "b" * 20))
    tid = http_send(s, "tools/call", task_call("print('mine')"), token="a" * 20)["result"]["task"]["taskId"]
    r = http_send(s, "tasks/result", {"taskId": tid}, token="a" * 20)["result"]
    assert text_of(r) == "mine\n", r
    assert http_send(s, "tasks/get", {"taskId": tid}, token="b" * 20)["error"]["code"] == -32602
    assert http_send(s, "tasks/list", {}, token="b" * 20)["result"]["tasks"] == []
    assert [t["taskId"] for t in http_send(s, "tasks/list", {}, token="a" * 20)["result"]["tasks"]] == [tid]


def test_http_exit_leaves_nothing_running(http):
    s = http()
    sid = s.initialize()
    marker = "sbx-task-http-exit-%d" % os.getpid()
    http_send(s, "tools/call", task_call(sleeper(marker)), session=sid)
    assert _wait_present(marker)
    rc, err = s.stop()
    assert rc == 0, err
    assert sbx.wait_gone(marker, 5) == []


def processes_alive(marker):
    return bool(sbx.processes_with(marker))


def _wait_present(marker, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sbx.processes_with(marker):
            return True
        time.sleep(0.05)
    return False


# ------------------------------------------------------------------ 2026-07-28: the extension

MODERN = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"


def modern(params, ext=True):
    caps = {"extensions": {EXT: {}}} if ext else {}
    return dict(params, _meta={"io.modelcontextprotocol/protocolVersion": MODERN,
                               "io.modelcontextprotocol/clientCapabilities": caps})


def ext_poll(get, tid, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        t = get("tasks/get", modern({"taskId": tid}))
        if t["status"] != "working" or time.monotonic() > deadline:
            return t
        time.sleep(0.1)


def test_ext_create_poll_inline_result(stdio):
    c = stdio()
    caps = c.send("server/discover", modern({}))["capabilities"]
    assert caps["extensions"] == {EXT: {}} and "tasks" not in caps, caps
    created = c.send("tools/call", modern({"name": "run_python",
                                           "arguments": {"code": "import time; time.sleep(1); print('ext')"}}))
    assert created["resultType"] == "task" and "task" not in created, created  # flat: Result & Task
    assert created["status"] == "working" and created["ttlMs"] == 3600000 and created["pollIntervalMs"] > 0
    assert "ttl" not in created and "content" not in created
    tid = created["taskId"]
    t = c.send("tasks/get", modern({"taskId": tid}))
    assert t["status"] == "working" and t["resultType"] == "complete" and "result" not in t, t
    t = ext_poll(c.send, tid)
    assert t["status"] == "completed" and text_of(t["result"]) == "ext\n", t
    assert RELATED not in t["result"].get("_meta", {}), t  # the taskId is beside it
    # A tool result with isError is completed, not failed (SEP-2663: failed is a JSON-RPC error).
    tid = c.send("tools/call", modern({"name": "execute_code",
                                       "arguments": {"language": "python", "code": "raise SystemExit(4)"}}))["taskId"]
    t = ext_poll(c.send, tid)
    assert t["status"] == "completed" and t["result"]["isError"] is True, t
    # No tasks/result, no tasks/list there.
    for method in ("tasks/result", "tasks/list"):
        assert c.request(method, modern({"taskId": tid}))["error"]["code"] == -32601
    # tasks/update: acknowledged, a key nothing asked for ignored.
    assert c.send("tasks/update", modern({"taskId": tid, "inputResponses": {"x": {}}}))["resultType"] == "complete"
    m = c.request("tasks/get", modern({"taskId": "0" * 32}))
    assert m["error"]["code"] == -32602, m


def test_ext_needs_the_declaration(stdio):
    c = stdio()
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        e = c.request(method, modern({"taskId": "x", "inputResponses": {}}, ext=False))["error"]
        assert e["code"] == -32021 and e["data"]["requiredCapabilities"] == {"extensions": {EXT: {}}}, e
    # A request without the extension gets its call run as ever; `task` is no opt-in under 2026-07-28.
    r = c.send("tools/call", modern({"name": "run_python", "arguments": {"code": "print(1)"}, "task": {}}, ext=False))
    assert text_of(r) == "1\n" and "taskId" not in r and r["resultType"] == "complete", r


def test_ext_cancel_kills_and_acks(stdio):
    c = stdio()
    marker = "sbx-ext-cancel-%d" % os.getpid()
    tid = c.send("tools/call", modern({"name": "run_python", "arguments": {"code": sleeper(marker)}}))["taskId"]
    assert _wait_present(marker)
    ack = c.send("tasks/cancel", modern({"taskId": tid}))
    assert ack["resultType"] == "complete" and "status" not in ack, ack
    assert sbx.wait_gone(marker, 5) == []
    assert c.send("tasks/get", modern({"taskId": tid}))["status"] == "cancelled"
    # An ended task: the same ack, and it stays as it ended.
    done = c.send("tools/call", modern({"name": "run_python", "arguments": {"code": "print(2)"}}))["taskId"]
    assert ext_poll(c.send, done)["status"] == "completed"
    assert c.send("tasks/cancel", modern({"taskId": done}))["resultType"] == "complete"
    assert c.send("tasks/get", modern({"taskId": done}))["status"] == "completed"


def test_ext_over_the_bound_answers_without_a_task(stdio):
    c = stdio("--policy", max_tasks_policy(1))
    first = c.send("tools/call", modern({"name": "run_python", "arguments": {"code": "print(1)"}}))
    assert first["resultType"] == "task"
    second = c.send("tools/call", modern({"name": "run_python", "arguments": {"code": "print(2)"}}))
    assert second["resultType"] == "complete" and text_of(second) == "2\n", second


def ext_post(s, method, params, token=None, name=None):
    h = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        h["Mcp-Name"] = params["name"]
    elif method.startswith("tasks/"):
        h["Mcp-Name"] = params["taskId"] if name is None else name
    st, _, body = s.post({"jsonrpc": "2.0", "id": 1, "method": method, "params": modern(params)}, headers=h,
                         token=token)
    return st, json.loads(body)


def test_ext_http_tasks_belong_to_the_token(http, tmp_path):
    s = http("--token-file", token_file(tmp_path, "a" * 20, "b" * 20))
    st, m = ext_post(s, "tools/call", {"name": "run_python", "arguments": {"code": "print('a')"}}, token="a" * 20)
    assert st == 200 and m["result"]["resultType"] == "task", m
    tid = m["result"]["taskId"]
    deadline = time.monotonic() + 30
    while True:
        st, m = ext_post(s, "tasks/get", {"taskId": tid}, token="a" * 20)
        if m["result"]["status"] != "working" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert st == 200 and text_of(m["result"]["result"]) == "a\n", m
    st, m = ext_post(s, "tasks/get", {"taskId": tid}, token="b" * 20)
    assert m["error"]["code"] == -32602, m  # as for an id never made
    st, m = ext_post(s, "tasks/cancel", {"taskId": tid}, token="b" * 20)
    assert m["error"]["code"] == -32602, m
    # Mcp-Name carries the task's id (SEP-2663, "Routing Headers"): another is a mismatch.
    st, m = ext_post(s, "tasks/get", {"taskId": tid}, token="a" * 20, name="f" * 32)
    assert st == 400 and m["error"]["code"] == -32020, (st, m)


@pytest.mark.parametrize("action, seen", [("accept", "wrote\n"), ("decline", "refused\n")])
def test_ext_approval_is_the_tasks_input(tmp_path, action, seen):
    """SEP-2663, "Mid-flight input": a task's call whose host tool call waits for approval makes
    the task input_required, its tasks/get carries the form elicitation in inputRequests, and
    tasks/update's inputResponses decide; nothing is asked as a request of the server's."""
    c = Stdio("--config", str(host_config(tmp_path)), "--approve", "all")
    try:
        code = ("from mcp import runtime\ntry:\n    runtime.call_tool_sync('host', 'write', {})\n"
                "    print('wrote')\nexcept runtime.MCPError:\n    print('refused')\n")
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}, "elicitation": {"form": {}}}}
        tid = c.send("tools/call", {"name": "run_python", "arguments": {"code": code, "servers": ["host"]},
                                    "_meta": meta})["taskId"]
        deadline = time.monotonic() + 60
        while True:
            t = c.send("tasks/get", {"taskId": tid, "_meta": meta})
            if t["status"] != "working" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert t["status"] == "input_required", t
        [(key, ask)] = t["inputRequests"].items()
        assert ask["method"] == "elicitation/create" and ask["params"]["mode"] == "form", ask
        assert "`write`" in ask["params"]["message"] and c.asks == [] and host_calls(tmp_path) == []
        answer = {"action": action, "content": {}} if action == "accept" else {"action": action}
        assert c.send("tasks/update", {"taskId": tid, "inputResponses": {key: answer}, "_meta": meta}) is not None
        while True:
            t = c.send("tasks/get", {"taskId": tid, "_meta": meta})
            if t["status"] in ("completed", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert t["status"] == "completed" and text_of(t["result"]) == seen, t
        assert host_calls(tmp_path) == (["write"] if action == "accept" else [])
    finally:
        c.close()

