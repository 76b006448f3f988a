"""Sessions (issue #38; sandboxd-mcp(7), SESSIONS): session_start gives a handle, run_python and
execute_code with session_id run in that session's one sandbox, whose interpreter keeps its state;
a session ends at session_end, idle TTL, maximum life, its interpreter's death or the server's exit,
and every later call says why. Without session_id a call is a one-shot call, as ever."""
import json
import os
import re
import signal
import subprocess
import time
import uuid

import pytest

import sbx
from httpmcp import HttpMcp, token_file
from mcpsession import Mcp

HANDLE = re.compile(r"^sbx_[A-Za-z0-9_-]{43}$")
TOKEN_A = "a" * 20 + "-token-of-client-A"
TOKEN_B = "b" * 20 + "-token-of-client-B"


@pytest.fixture
def mcp():
    servers = []

    def start(*args, **kw):
        m = Mcp(*args, **kw)
        servers.append(m)
        return m

    yield start
    for m in servers:
        if m.p.poll() is None:
            m.p.kill()
            m.p.wait()


def start(m, **args):
    r = m.send("tools/call", {"name": "session_start", "arguments": args})
    assert not r.get("isError"), r
    return r


def call(m, code, sid=None, tool="run_python", **args):
    a = {"code": code, **args}
    if tool == "execute_code":
        a["language"] = "python"
    if sid:
        a["session_id"] = sid
    return m.send("tools/call", {"name": tool, "arguments": a})


def text(r):
    return r["content"][0]["text"]


def end(m, sid):
    return m.send("tools/call", {"name": "session_end", "arguments": {"session_id": sid}})


def test_tools_listed_with_schemas(mcp):
    m = mcp()
    tools = m.tools()
    assert list(tools)[-2:] == ["session_start", "session_end"]
    st = tools["session_start"]
    assert set(st["outputSchema"]["required"]) == {"session_id", "expires_at", "idle_ttl_s", "max_life_s"}
    assert "15 min" in st["description"] and "2 h" in st["description"]
    assert "restart" in st["description"]
    assert st["annotations"]["readOnlyHint"] is False and st["annotations"]["openWorldHint"] is False
    assert tools["session_end"]["annotations"]["destructiveHint"] is True
    for name in ("run_python", "execute_code"):
        prop = tools[name]["inputSchema"]["properties"]["session_id"]
        assert prop["pattern"] == "^sbx_[A-Za-z0-9_-]+$"
        assert "session_id" not in tools[name]["inputSchema"]["required"]


def test_capabilities_say_the_bounds(mcp):
    m = mcp("--max-sessions", "3", "--session-idle", "60")
    start(m)
    r = m.send("resources/read", {"uri": "sandboxd://capabilities"})
    caps = json.loads(r["contents"][0]["text"])
    assert caps["sessions"] == {"max_sessions": 3, "max_sessions_per_token": 4, "idle_ttl_s": 60,
                                "max_life_s": 7200, "live": 1}, caps["sessions"]
    assert "session" in caps["persistence"] and "session_id" in m.init["instructions"]


def test_state_kept_and_nothing_shared(mcp):
    m = mcp()
    r = start(m)
    sc = r["structuredContent"]
    sid = sc["session_id"]
    assert HANDLE.match(sid), sid
    assert sc["idle_ttl_s"] == 900 and sc["max_life_s"] == 7200
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", sc["expires_at"])
    assert sid in text(r)
    other = start(m)["structuredContent"]["session_id"]
    assert other != sid
    assert not call(m, "x = 41\nimport json\nopen('/tmp/f', 'w').write('t')", sid).get("isError")
    r = call(m, "import time\ntime.sleep(0.2)\nprint(x + 1, json.dumps(1), open('/tmp/f').read())", sid)
    assert text(r) == "42 1 t\n", r
    sc = r["structuredContent"]
    assert sc["status"] == "ok" and sc["exit_code"] == 0 and 200 <= sc["execution_time_ms"] < 2000, sc
    assert sc["limits"] == sbx.enforcement(), sc
    # execute_code reaches the same interpreter
    assert text(call(m, "print(x)", sid, tool="execute_code")) == "41\n"
    # a one-shot call beside it, and another session, see nothing of it
    probe = "import os\nprint(globals().get('x'), os.path.exists('/tmp/f'))"
    assert text(call(m, probe)) == "None False\n"
    assert text(call(m, probe, other)) == "None False\n"
    assert text(call(m, probe, sid)) == "41 True\n"


def test_workspace_out_per_call(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    r = call(m, "open('/workspace/out/a.txt', 'w').write('one')", sid)
    assert [f["path"] for f in r["structuredContent"]["files"]] == ["a.txt"], r
    r = call(m, "import os\nprint(os.listdir('/workspace/out'))\nopen('/workspace/out/b.txt', 'w').write('two')", sid)
    assert text(r).startswith("[]\n"), r
    assert [f["path"] for f in r["structuredContent"]["files"]] == ["b.txt"], r


def test_busy(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    slow = {"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": "import time\ntime.sleep(2)\nprint('slept')",
                                                           "session_id": sid}}}
    m.p.stdin.write(json.dumps(slow) + "\n")
    m.p.stdin.flush()
    time.sleep(0.3)
    r = call(m, "print(1)", sid)
    assert r["isError"] and "session busy" in text(r) and sid in text(r), r
    line = json.loads(m.p.stdout.readline())
    assert line["id"] == "slow" and text(line["result"]) == "slept\n", line
    assert text(call(m, "print(2)", sid)) == "2\n"


def test_unknown_and_malformed_handle(mcp):
    m = mcp()
    fake = "sbx_" + "A" * 43
    r = call(m, "print(1)", fake)
    assert r["isError"] and text(r).startswith(f"unknown session {fake}:"), r
    assert "session_start" in text(r)
    r = call(m, "print(1)", "not-a-handle")
    assert r["isError"] and "`session_id` must be" in text(r), r
    r = end(m, fake)
    assert r["isError"] and text(r).startswith(f"unknown session {fake}:"), r


def test_end_then_use(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    call(m, "x = 1", sid)
    r = end(m, sid)
    assert not r.get("isError") and "ended" in text(r), r
    want = f"session {sid} was ended by session_end; its variables and files are gone; call session_start"
    for r in (call(m, "print(x)", sid), end(m, sid)):
        assert r["isError"] and text(r) == want, r


def session_langs(m):
    return m.tools()["session_start"]["inputSchema"]["properties"]["language"]["enum"]


def test_language_not_supported(mcp):
    m = mcp()
    # javascript where execute_code offers it (its rootfs built: make rootfs-node)
    js = "javascript" in m.tools()["execute_code"]["inputSchema"]["properties"]["language"]["enum"]
    assert session_langs(m) == ["python", "bash"] + ["javascript"] * js
    r = m.send("tools/call", {"name": "session_start", "arguments": {"language": "ruby"}})
    assert r["isError"] and text(r) == "`language` ruby is not supported in a session: sessions run " + (
        "python, bash or javascript" if js else "python or bash"), r


def bash(m, code, sid, **args):
    return m.send("tools/call", {"name": "execute_code", "arguments": {"language": "bash", "code": code,
                                                                       "session_id": sid, **args}})


def test_bash_session(mcp):
    """One bash for the session: variables, functions and the working directory last; output and
    status as a one-shot call's; the time limit interrupts the foreground command and the shell
    lives on; `exit` ends the session, and says so."""
    m = mcp()
    r = start(m, language="bash")
    sid = r["structuredContent"]["session_id"]
    assert r["structuredContent"]["language"] == "bash"
    assert text(bash(m, "x=41; cd /tmp; f() { echo fn \"$1\"; }; echo set", sid)) == "set\n"
    r = bash(m, "echo $((x + 1)) $PWD; f 2; echo oops >&2; read y; echo read:$y", sid)
    assert r["structuredContent"]["stdout"] == "42 /tmp\nfn 2\nread:\n" and r["structuredContent"]["stderr"] == "oops\n", r
    r = bash(m, "false", sid)
    assert r["isError"] and r["structuredContent"]["exit_code"] == 1, r
    t0 = time.monotonic()
    r = bash(m, "while true; do sleep 0.05; done", sid, timeout=1)
    assert time.monotonic() - t0 < 3 and r["structuredContent"]["status"] == "timeout", r
    assert text(bash(m, "echo still $x", sid)) == "still 41\n"
    # A Python session is not a bash one, nor the reverse.
    r = call(m, "print(1)", sid, tool="execute_code")
    assert r["isError"] and text(r) == f"session {sid} runs bash, not python", r
    r = bash(m, "exit 3", sid)
    gone = (f"session {sid} is over: its interpreter exited (status 3); its variables and files are gone; call "
            "session_start")
    assert r["isError"] and gone in text(r), r
    r = bash(m, "echo $x", sid)
    assert r["isError"] and text(r) == gone, r


def test_bash_session_background_process_ends_with_it(mcp):
    marker = f"sbx-sess-{uuid.uuid4().hex}"
    try:
        m = mcp()
        sid = start(m, language="bash")["structuredContent"]["session_id"]
        r = bash(m, f"/usr/bin/python3 -c 'import time; time.sleep(120)' {marker} & echo started", sid)
        assert text(r) == "started\n", r
        time.sleep(0.3)
        assert sbx.processes_with(marker)
        assert text(bash(m, "echo next", sid)) == "next\n"
        # The shell's `exit` ends the session at once, though a process it started is still there.
        t0 = time.monotonic()
        r = bash(m, "exit 4", sid)
        assert time.monotonic() - t0 < 3 and "its interpreter exited (status 4)" in text(r), r
        assert not sbx.wait_gone(marker, timeout=5)
    finally:
        sbx.kill_marker(marker)


def test_idle_expiry_by_timer(mcp, tmp_path):
    """A session never used is reaped by its idle TTL, by the timer (the audit record is there
    before any later call), and a later call says why."""
    log = tmp_path / "audit.log"
    m = mcp("--session-idle", "1", audit=str(log))
    sid = start(m)["structuredContent"]["session_id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        recs = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
        ends = [r for r in recs if r.get("event") == "session_end"]
        if ends:
            break
        time.sleep(0.1)
    assert ends and ends[0]["reason"] == "idle", recs
    r = call(m, "print(1)", sid)
    assert r["isError"] and text(r) == (f"session {sid} expired after 1 s idle; its variables and files are "
                                        "gone; call session_start"), r


def test_idle_ttl_counts_from_the_last_call(mcp):
    m = mcp("--session-idle", "2")
    sid = start(m)["structuredContent"]["session_id"]
    for i in range(3):
        time.sleep(1.2)
        assert text(call(m, f"y = {i}\nprint(y)", sid)) == f"{i}\n"


def test_max_life(mcp):
    m = mcp("--session-max-life", "2")
    r = start(m)
    sid = r["structuredContent"]["session_id"]
    assert r["structuredContent"]["max_life_s"] == 2
    assert text(call(m, "x = 1\nprint(x)", sid)) == "1\n"
    time.sleep(2.5)
    r = call(m, "print(x)", sid)
    assert r["isError"] and text(r) == (f"session {sid} reached its maximum life of 2 s and was ended; its "
                                        "variables and files are gone; call session_start"), r


def test_start_arguments_within_bounds(mcp):
    m = mcp("--session-idle", "60")
    r = start(m, idle_timeout=5, max_life=30)
    assert r["structuredContent"]["idle_ttl_s"] == 5 and r["structuredContent"]["max_life_s"] == 30
    r = m.send("tools/call", {"name": "session_start", "arguments": {"idle_timeout": 61}})
    assert r["isError"] and "above this server's limit of 60 s" in text(r), r
    r = m.send("tools/call", {"name": "session_start", "arguments": {"memory_mb": 1 << 30}})
    assert r["isError"] and re.fullmatch(r"`memory_mb` \d+ is above the policy's maximum of \d+ MiB", text(r)), r


def test_caps_total_and_per_client(mcp):
    m = mcp("--max-sessions", "2")
    start(m)
    start(m)
    r = m.send("tools/call", {"name": "session_start", "arguments": {}})
    assert r["isError"] and "too many sessions" in text(r) and "max_sessions)" in text(r), r
    # The default policy: 4 per client (over stdio, the one client).
    m = mcp()
    sids = [start(m)["structuredContent"]["session_id"] for _ in range(4)]
    r = m.send("tools/call", {"name": "session_start", "arguments": {}})
    assert r["isError"] and "max_sessions_per_token" in text(r), r
    end(m, sids[0])
    start(m)


@pytest.mark.parametrize("opts", [("--max-sessions", "0"), ("--tools", "run_python,execute_code")])
def test_sessions_offered_or_not(mcp, opts):
    assert "session_start" in mcp("--tools", "run_python,sessions").tools()
    m = mcp(*opts)
    assert "session_start" not in m.tools()
    r = m.request("tools/call", {"name": "session_start", "arguments": {}})
    assert r["error"]["message"].startswith("Unknown tool"), r


@pytest.mark.parametrize("opt,value,key", [("--session-idle", "901", "session_idle"),
                                           ("--session-max-life", "7201", "session_max_life"),
                                           ("--max-sessions", "17", "max_sessions")])
def test_cli_may_only_tighten(opt, value, key):
    r = sbx.sandboxd("mcp", "--rootfs", sbx.ROOTFS, "--audit-log", "off", opt, value, input=b"")
    sbx.assert_usage_error(r, opt)
    assert key in r.stderr and "only a policy may raise" in r.stderr
    # --max-sessions once meant the HTTP transport's cap: a deployment still passing that is told.
    assert ("--max-http-sessions" in r.stderr) == (opt == "--max-sessions"), r.stderr


def test_timeout_interrupts_and_the_session_survives(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    call(m, "x = 5", sid)
    t0 = time.monotonic()
    r = call(m, "import time\nwhile True:\n    time.sleep(0.05)", sid, timeout=1)
    assert time.monotonic() - t0 < 3
    assert r["isError"] and r["structuredContent"]["status"] == "timeout", r
    assert "KeyboardInterrupt" in r["structuredContent"]["stderr"] and "interrupted (SIGINT)" in text(r), r
    assert text(call(m, "print(x)", sid)) == "5\n"


def test_timeout_not_interruptible_kills_the_session(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"
    t0 = time.monotonic()
    r = call(m, code, sid, timeout=1)
    assert time.monotonic() - t0 < 6
    assert r["isError"] and r["structuredContent"]["status"] == "timeout", r
    gone = (f"session {sid} is over: its interpreter did not stop within 2 s of the interrupt at a call's "
            "time limit and was killed; its variables and files are gone; call session_start")
    assert gone in text(r), r
    r = call(m, "print(1)", sid)
    assert r["isError"] and text(r) == gone, r


def test_memory_limit_kills_the_session(mcp):
    m = mcp()
    r = start(m, memory_mb=128)
    sid = r["structuredContent"]["session_id"]
    call(m, "x = 1", sid)
    if sbx.enforcement() == "degraded":
        # No cgroup: the limit is RLIMIT_AS, a MemoryError the code sees; the session lives on.
        r = call(m, "b = b'x' * (400 << 20)", sid)
        assert r["isError"] and "MemoryError" in r["structuredContent"]["stderr"], r
        assert text(call(m, "print(x)", sid)) == "1\n"
        return
    r = call(m, "b = b'x' * (400 << 20)\nprint(len(b))", sid)
    assert r["isError"] and r["structuredContent"]["status"] == "memory_limit", r
    gone = (f"session {sid} is over: its interpreter was killed at the memory limit (128 MiB for the "
            "session); its variables and files are gone; call session_start")
    assert gone in text(r), r
    r = call(m, "print(x)", sid)
    assert r["isError"] and text(r) == gone, r


def test_background_process_lives_with_the_session(mcp):
    marker = f"sbx-sess-{uuid.uuid4().hex}"
    try:
        m = mcp()
        sid = start(m)["structuredContent"]["session_id"]
        code = ("import subprocess\np = subprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(120)', "
                f"'{marker}'])\nprint('started')")
        assert text(call(m, code, sid)) == "started\n"
        time.sleep(0.3)
        assert sbx.processes_with(marker), "the background process ended with its call"
        assert text(call(m, "print(p.poll())", sid)) == "None\n"
        end(m, sid)
        assert not sbx.wait_gone(marker, timeout=5), "the background process outlived its session"
    finally:
        sbx.kill_marker(marker)


def _cgroups_of(pid):
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        for d in dirs:
            if d.startswith(f"sandboxd-{pid}-"):
                found.append(os.path.join(root, d))
        if root.count("/") > 9:
            dirs[:] = []
    return found


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_nothing_left_after_the_server_exits(mcp, tmp_path, how):
    marker = f"sbx-sess-{uuid.uuid4().hex}"
    mounts, tmp_before = sbx.host_mounts(), sbx.temp_dirs()
    log = tmp_path / "audit.log"
    try:
        m = mcp(audit=str(log))
        pid = m.p.pid
        for _ in range(2):
            sid = start(m)["structuredContent"]["session_id"]
            call(m, "import subprocess\nsubprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(120)', "
                    f"'{marker}'])", sid)
        time.sleep(0.3)
        assert len(sbx.processes_with(marker)) == 2
        assert _cgroups_of(pid) or sbx.enforcement() == "degraded"
        if how == "eof":
            m.close()
        else:
            m.p.send_signal(signal.SIGTERM)
            assert m.p.wait(timeout=30) == 0
        assert not sbx.wait_gone(marker, timeout=5), "a session's process outlived the server"
        assert not _cgroups_of(pid), "a session's cgroup outlived the server"
        assert sbx.host_mounts() == mounts
        new_tmp = {p for p in sbx.temp_dirs() - tmp_before
                   if "sandboxd" in os.path.basename(p) and not os.path.basename(p).startswith("sandboxd-tests")}
        assert not new_tmp, new_tmp
        ends = [json.loads(l) for l in log.read_text().splitlines() if '"session_end"' in l]
        assert [e["reason"] for e in ends] == ["server_exit"] * 2, ends
        # The calls' records name their sessions too.
        calls = [json.loads(l) for l in log.read_text().splitlines() if '"request_id"' in l]
        assert sorted(c["session"] for c in calls) == sorted(e["session"] for e in ends), calls
    finally:
        sbx.kill_marker(marker)


def test_nothing_survives_a_restart(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    m.close()
    m = mcp()
    r = call(m, "print(1)", sid)
    assert r["isError"] and text(r).startswith(f"unknown session {sid}:"), r


def test_audit_records(mcp, tmp_path):
    log = tmp_path / "audit.log"
    m = mcp(audit=str(log))
    sid = start(m, memory_mb=256)["structuredContent"]["session_id"]
    call(m, "print(1)", sid)
    end(m, sid)
    m.close()
    raw = log.read_text()
    assert sid not in raw and sid[4:] not in raw, "the handle itself is in the audit log"
    recs = [json.loads(l) for l in raw.splitlines()]
    s, c, e = recs
    assert s["event"] == "session_start" and re.fullmatch(r"[0-9a-f]{16}", s["session"]), s
    assert s["limits"]["memory_bytes"] == 256 << 20 and s["limits"]["idle_ttl_s"] == 900, s
    assert s["limits"]["max_life_s"] == 7200 and s["language"] == "python", s
    assert c["session"] == s["session"] and c["status"] == "ok", c
    assert e["event"] == "session_end" and e["session"] == s["session"] and e["reason"] == "ended", e
    assert e["message"] == "was ended by session_end", e
    assert e["calls"] == 1


def test_http_foreign_token_is_told_unknown(tmp_path):
    s = HttpMcp("--token-file", token_file(tmp_path, TOKEN_A, TOKEN_B))
    try:
        a = s.initialize(token=TOKEN_A)
        b = s.initialize(token=TOKEN_B)

        def tool(name, args, sess, token):
            st, _, body = s.request("tools/call", {"name": name, "arguments": args}, session=sess, token=token)
            assert st == 200, (st, body)
            return json.loads(body)["result"]

        sid = tool("session_start", {}, a, TOKEN_A)["structuredContent"]["session_id"]
        assert text(tool("run_python", {"code": "x = 7\nprint(x)", "session_id": sid}, a, TOKEN_A)) == "7\n"
        fake = "sbx_" + "B" * 43
        unknown = text(tool("run_python", {"code": "print(1)", "session_id": fake}, b, TOKEN_B))
        foreign = text(tool("run_python", {"code": "print(x)", "session_id": sid}, b, TOKEN_B))
        assert foreign == unknown.replace(fake, sid), (foreign, unknown)
        assert text(tool("session_end", {"session_id": sid}, b, TOKEN_B)) == foreign
        # Another transport session of the same token is the same owner: the handle is not tied
        # to the HTTP session.
        a2 = s.initialize(token=TOKEN_A)
        assert text(tool("run_python", {"code": "print(x)", "session_id": sid}, a2, TOKEN_A)) == "7\n"
        # An ended session is still "unknown" to the other token.
        tool("session_end", {"session_id": sid}, a, TOKEN_A)
        assert text(tool("run_python", {"code": "print(1)", "session_id": sid}, b, TOKEN_B)) == foreign
    finally:
        rc, err = s.stop()
        assert rc == 0, err


def test_host_servers_from_a_session(mcp, tmp_path):
    """The proxy on each call's own channel, as in a one-shot call: a session's calls reach host
    servers call after call, with a call without `servers` in between (with servers configured,
    it has a bridge too, for discovery)."""
    from test_mcp_approval import host_calls, host_config
    m = mcp("--config", str(host_config(tmp_path)))
    sid = start(m)["structuredContent"]["session_id"]
    code = "from mcp import runtime\nprint(runtime.call_tool_sync('host', 'look', {})['content'][0]['text'])"
    for i in range(3):
        r = call(m, code, sid, servers=["host"])
        assert not r.get("isError") and text(r) == "done\n", (i, r)
        r = call(m, "import os\nprint('SANDBOXD_MCP_SERVERS' in os.environ)", sid)
        assert text(r) == "True\n", (i, r)  # discovery: every call has a bridge here
    assert host_calls(tmp_path) == ["look"] * 3


def test_death_between_calls_is_seen_at_once(mcp, tmp_path):
    """An interpreter that dies while no call runs (here by its own hand, from a thread) ends the
    session at once (its pidfd is watched): recorded before any later call, which says why."""
    log = tmp_path / "audit.log"
    m = mcp(audit=str(log))
    sid = start(m)["structuredContent"]["session_id"]
    assert text(call(m, "import os, threading\nthreading.Timer(0.3, os._exit, (3,)).start()\nprint('ok')", sid)) == "ok\n"
    deadline = time.monotonic() + 10
    ends = []
    while not ends and time.monotonic() < deadline:
        time.sleep(0.1)
        ends = [json.loads(l) for l in log.read_text().splitlines() if '"session_end"' in l]
    assert ends and ends[0]["reason"] == "died" and ends[0]["message"] == "is over: its interpreter exited (status 3)", ends
    r = call(m, "print(1)", sid)
    assert r["isError"] and text(r) == (f"session {sid} is over: its interpreter exited (status 3); its variables "
                                        "and files are gone; call session_start"), r


def test_http_session_stays_with_its_token_when_the_file_is_reordered(tmp_path):
    """The owner is the token itself, not its place in --token-file: after the file is rewritten
    in another order and reread (SIGHUP), the other token is still told "unknown"."""
    path = token_file(tmp_path, TOKEN_A, TOKEN_B)
    s = HttpMcp("--token-file", path)
    try:
        def tool(name, args, token):
            sess = s.initialize(token=token)
            st, _, body = s.request("tools/call", {"name": name, "arguments": args}, session=sess, token=token)
            assert st == 200, (st, body)
            return json.loads(body)["result"]

        sid = tool("session_start", {}, TOKEN_A)["structuredContent"]["session_id"]
        assert text(tool("run_python", {"code": "x = 3", "session_id": sid}, TOKEN_A)) == "(no output)"
        token_file(tmp_path, TOKEN_B, TOKEN_A)
        s.p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        r = tool("run_python", {"code": "print(x)", "session_id": sid}, TOKEN_B)
        assert r["isError"] and text(r).startswith(f"unknown session {sid}:"), r
        assert text(tool("run_python", {"code": "print(x)", "session_id": sid}, TOKEN_A)) == "3\n"
    finally:
        rc, err = s.stop()
        assert rc == 0, err


def send_raw(m, rid, code, sid):
    m.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "run_python", "arguments": {"code": code, "session_id": sid}}}) + "\n")
    m.p.stdin.flush()


def read_id(m, rid):
    while True:
        line = json.loads(m.p.stdout.readline())
        if line.get("id") == rid:
            return line


def test_end_kills_a_running_call(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    send_raw(m, "slow", "import time\nprint('before', flush=True)\ntime.sleep(30)", sid)
    time.sleep(0.5)
    t0 = time.monotonic()
    r = end(m, sid)
    assert not r.get("isError") and "its running call was killed" in text(r), r
    slow = read_id(m, "slow")["result"]
    assert time.monotonic() - t0 < 5
    assert slow["isError"] and slow["structuredContent"]["status"] == "killed", slow
    assert text(slow).startswith("before\n") and text(slow).endswith(
        f"--- session {sid} was ended by session_end; its variables and files are gone; call session_start ---"), slow


def test_max_life_kills_a_running_call(mcp):
    m = mcp("--session-max-life", "2")
    sid = start(m)["structuredContent"]["session_id"]
    t0 = time.monotonic()
    r = call(m, "import time\ntime.sleep(30)", sid)
    assert 1.5 < time.monotonic() - t0 < 6
    assert r["isError"] and f"session {sid} reached its maximum life of 2 s and was ended" in text(r), r


def test_cancel_interrupts_and_the_session_survives(mcp):
    m = mcp()
    sid = start(m)["structuredContent"]["session_id"]
    call(m, "x = 9", sid)
    send_raw(m, "c1", "import time\nwhile True:\n    time.sleep(0.05)", sid)
    time.sleep(0.5)
    m.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": "c1"}}) + "\n")
    m.p.stdin.flush()
    time.sleep(0.3)
    # No answer to the cancelled call; the next one finds the session as it was.
    r = call(m, "print(x)", sid)
    assert text(r) == "9\n", r


CONFINEMENT = r"""
import json, os
facts = {}
with open("/proc/self/status") as f:
    for line in f:
        k, _, v = line.partition(":")
        if k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters"):
            facts[k] = v.strip()
facts["ids"] = [os.getuid(), os.getgid(), os.getgroups()]
facts["hostname"] = os.uname().nodename
facts["net"] = sorted(l.split(":")[0].strip() for l in list(open("/proc/net/dev"))[2:])
try:
    open("/usr/x", "w")
    facts["root"] = "writable"
except OSError as e:
    facts["root"] = e.errno
for name in ("memory.max", "pids.max"):
    try:
        facts[name] = open("/sys/fs/cgroup/" + name).read().strip()
    except OSError as e:
        facts[name] = e.errno
facts["mounts"] = sorted(l.split()[4] + " " + l.split()[-3] for l in open("/proc/self/mountinfo"))
print(json.dumps(facts))
"""


def test_confined_like_a_one_shot_call(mcp):
    """What the code sees of its confinement (capabilities, no_new_privs, the seccomp filters, ids,
    network, the read-only root, the cgroup's limits, the mounts) is a one-shot call's: a cold
    one's, as a session's sandbox is spawned as a cold call's (base_spec, the one setup sequence).
    (A forked call's has the template's layer under it: a filter and mounts more.)"""
    m = mcp("--warm-mode", "prestart")
    sid = start(m)["structuredContent"]["session_id"]
    one = json.loads(text(call(m, CONFINEMENT)))
    ses = json.loads(text(call(m, CONFINEMENT, sid)))
    assert ses == one
    assert one["NoNewPrivs"] == "1" and one["Seccomp"] == "2" and one["CapEff"] == "0000000000000000", one


def test_no_fd_or_process_left_per_session(mcp):
    """Sessions started, used and ended (or expired, or killed) one after another leave the server
    with the fds it had, and no child."""
    m = mcp("--session-idle", "1", "--warm-mode", "prestart")  # (fork mode keeps a template: a child)
    pid = m.p.pid

    def fds():
        return len(os.listdir(f"/proc/{pid}/fd"))

    def children():
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()

    sid = start(m)["structuredContent"]["session_id"]
    call(m, "print(1)", sid)
    end(m, sid)
    before = fds()
    for i in range(12):
        sid = start(m)["structuredContent"]["session_id"]
        call(m, "open('/workspace/out/f.txt', 'w').write('x')\nprint(1)", sid)
        if i % 3 == 0:
            end(m, sid)
        elif i % 3 == 1:
            call(m, "import os\nos._exit(1)", sid)
        else:
            time.sleep(1.5)  # expires
    time.sleep(0.5)
    assert fds() == before, os.listdir(f"/proc/{pid}/fd")
    assert children() == [], children()


def test_a_killed_server_takes_its_sessions_processes(mcp):
    """Even SIGKILL of the server (no cleanup runs) ends its sessions' processes: each sandbox's
    pid 1 dies with the server, as a one-shot call's does."""
    marker = f"sbx-sess-{uuid.uuid4().hex}"
    try:
        m = mcp()
        sid = start(m)["structuredContent"]["session_id"]
        call(m, "import subprocess\nsubprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(120)', "
                f"'{marker}'])", sid)
        time.sleep(0.3)
        assert sbx.processes_with(marker)
        m.p.send_signal(signal.SIGKILL)
        m.p.wait()
        assert not sbx.wait_gone(marker, timeout=5), "a session's process outlived the killed server"
    finally:
        sbx.kill_marker(marker)


# ---------------------------------------------------------------- javascript sessions

def js_session(m, **args):
    """A javascript session's handle; skipped where the server offers no javascript. Without a
    cgroup the memory limit is an address-space rlimit and V8 reserves ~1.3 GiB of it at start
    (sandboxd.policy(5), Node.js): the session asks for 2 GiB there, as test_node.py's runs do."""
    if "javascript" not in m.tools()["execute_code"]["inputSchema"]["properties"]["language"]["enum"]:
        pytest.skip("no node-slim rootfs (make rootfs-node): no javascript here")
    if sbx.enforcement() == "degraded":
        args.setdefault("memory_mb", 2048)
    r = start(m, language="javascript", **args)
    assert r["structuredContent"]["language"] == "javascript", r
    return r["structuredContent"]["session_id"]


def js(m, code, sid=None, **args):
    a = {"language": "javascript", "code": code, **args}
    if sid:
        a["session_id"] = sid
    return m.send("tools/call", {"name": "execute_code", "arguments": a})


def out(r):
    return r["structuredContent"]["stdout"]


def test_js_session_keeps_state_and_awaits(mcp):
    m = mcp()
    sid = js_session(m)
    r = js(m, "let x = 41; globalThis.g = 'g'; function f() { return 'f' }", sid)
    assert not r.get("isError") and out(r) == "", r
    r = js(m, "console.log(x + 1, g, f()); console.error('to stderr')", sid)
    assert (out(r), r["structuredContent"]["stderr"]) == ("42 g f\n", "to stderr\n"), r
    # top-level await, and what it declared stays too
    r = js(m, "const v = await new Promise((res) => setTimeout(() => res(7), 50)); console.log(v)", sid)
    assert out(r) == "7\n", r
    r = js(m, "const { join } = await import('node:path'); console.log(v + x, join('a', 'b'))", sid)
    assert out(r) == "48 a/b\n", r
    # process.exitCode is the call's status, as a one-shot node's exit status; the next call's is its own
    r = js(m, "process.exitCode = 3", sid)
    assert r["isError"] and r["structuredContent"]["exit_code"] == 3, r
    assert not js(m, "1", sid).get("isError")
    # static import is a module's: the error says what to use
    r = js(m, "import fs from 'node:fs'", sid)
    assert r["isError"] and "await import(" in r["structuredContent"]["stderr"], r
    # a fresh session sees nothing of it; nor does a one-shot call (node's rlimits need a cgroup here)
    probe = "console.log(typeof x, typeof globalThis.g, typeof f)"
    assert out(js(m, probe, js_session(m))) == "undefined undefined undefined\n"
    if sbx.enforcement() != "degraded":
        assert out(js(m, probe)) == "undefined undefined undefined\n"
    assert out(js(m, probe, sid)) == "number string function\n"


def test_js_session_is_not_python_nor_the_reverse(mcp):
    m = mcp()
    sid = js_session(m)
    r = call(m, "print(1)", sid)
    assert r["isError"] and text(r) == f"session {sid} runs javascript, not python", r
    r = call(m, "print(1)", sid, tool="execute_code")
    assert r["isError"] and text(r) == f"session {sid} runs javascript, not python", r
    py = start(m)["structuredContent"]["session_id"]
    r = js(m, "console.log(1)", py)
    assert r["isError"] and text(r) == f"session {py} runs python, not javascript", r
    assert out(js(m, "console.log(1)", sid)) == "1\n"


def test_js_session_uncaught_errors(mcp):
    """An uncaught error is the call's status 1 with its stack on stderr, as in a one-shot node
    (thrown, rejected, or from a callback while the call awaits); the session lives on."""
    m = mcp()
    sid = js_session(m)
    js(m, "let kept = 'kept'", sid)
    for code in ("function boom() { throw new TypeError('boom') }\nboom()",
                 "await Promise.reject(new TypeError('boom'))",
                 "Promise.reject(new TypeError('boom')); 1",
                 "setTimeout(() => { throw new TypeError('boom') }, 5); await new Promise((r) => setTimeout(r, 500))"):
        r = js(m, code, sid)
        sc = r["structuredContent"]
        assert r["isError"] and sc["status"] == "error" and sc["exit_code"] == 1, (code, r)
        assert sc["stderr"].startswith("TypeError: boom\n    at "), (code, sc["stderr"])
        assert "node:repl" not in sc["stderr"] and "[eval]" not in sc["stderr"], sc["stderr"]
        assert out(js(m, "console.log(kept)", sid)) == "kept\n"


def test_js_session_timeout_interrupts_and_the_session_survives(mcp):
    m = mcp()
    sid = js_session(m)
    js(m, "let x = 5", sid)
    for code in ("while (true) {}", "await new Promise(() => {})"):
        t0 = time.monotonic()
        r = js(m, code, sid, timeout=1)
        assert time.monotonic() - t0 < 3, code
        assert r["isError"] and r["structuredContent"]["status"] == "timeout", r
        assert "interrupted (SIGINT)" in text(r) and "the session lives on" in text(r), r
        assert out(js(m, "console.log(x)", sid)) == "5\n"


def test_js_session_not_interruptible_is_killed(mcp):
    """A busy loop after an await runs outside the REPL's SIGINT watchdog: killed at the grace,
    and with it the session."""
    m = mcp()
    sid = js_session(m)
    t0 = time.monotonic()
    r = js(m, "await null; while (true) {}", sid, timeout=1)
    assert time.monotonic() - t0 < 6 and r["structuredContent"]["status"] == "timeout", r
    gone = (f"session {sid} is over: its interpreter did not stop within 2 s of the interrupt at a call's "
            "time limit and was killed; its variables and files are gone; call session_start")
    assert gone in text(r), r
    r = js(m, "1", sid)
    assert r["isError"] and text(r) == gone, r


def test_js_session_workspace_out_per_call(mcp):
    m = mcp()
    sid = js_session(m)
    r = js(m, "require('node:fs').writeFileSync('/workspace/out/a.txt', 'one')", sid)
    assert [f["path"] for f in r["structuredContent"]["files"]] == ["a.txt"], r
    r = js(m, "const fs = require('node:fs'); console.log(JSON.stringify(fs.readdirSync('/workspace/out')));"
              "fs.writeFileSync('/workspace/out/b.txt', 'two')", sid)
    assert out(r) == "[]\n" and [f["path"] for f in r["structuredContent"]["files"]] == ["b.txt"], r


def test_js_session_background_output(mcp):
    """What a session's background work writes between calls is dropped (as a Python session's goes
    to /dev/null): its timers' console output inside node, a child process's in the pipes by
    sandboxd before the next call. Neither wedges the session; what a timer writes while a call runs
    is that call's."""
    m = mcp()
    sid = js_session(m)
    r = js(m, "globalThis.t = setInterval(() => console.log('x'), 1); console.log('started')", sid)
    assert out(r).startswith("started\n") and set(out(r).split()) <= {"started", "x"}, r
    time.sleep(0.3)
    assert out(js(m, "clearInterval(t); console.log('done')", sid)) == "done\n"
    # 1 MiB a millisecond, far more than the pipe holds
    js(m, "const big = 'y'.repeat(1 << 20); globalThis.t = setInterval(() => process.stdout.write(big), 1)", sid)
    time.sleep(0.3)
    assert out(js(m, "clearInterval(t); console.log('done')", sid)) == "done\n"
    r = js(m, "require('node:child_process').spawn(process.execPath, ['-e', "
              "'setTimeout(() => process.stdout.write(\"c\".repeat(30000)), 100)'], "
              "{ stdio: ['ignore', 'inherit', 'inherit'] }); console.log('spawned')", sid)
    assert out(r) == "spawned\n", r
    time.sleep(1)
    assert out(js(m, "console.log('clean')", sid)) == "clean\n"
    # and the call's own output is all there before its status, though node queued most of it
    r = js(m, "process.stdout.write('z'.repeat(16 << 20)); console.log('end')", sid)
    sc = r["structuredContent"]
    assert sc["stdout"].endswith("zzzend\n") and sc["cut_characters"] > 0, sc


def test_js_session_end_and_nothing_left(mcp, tmp_path):
    marker = f"sbx-sess-{uuid.uuid4().hex}"
    log = tmp_path / "audit.log"
    try:
        m = mcp(audit=str(log))
        pid = m.p.pid
        sids = [js_session(m) for _ in range(2)]
        for sid in sids:
            r = js(m, "globalThis.keep = require('node:child_process').spawn('/usr/bin/node', "
                      f"['-e', 'setTimeout(() => {{}}, 120000)', '{marker}']); console.log('started')", sid)
            assert out(r) == "started\n", r
        time.sleep(0.3)
        assert len(sbx.processes_with(marker)) == 2
        r = end(m, sids[1])
        assert not r.get("isError") and "ended" in text(r), r
        r = js(m, "1", sids[1])
        assert r["isError"] and "was ended by session_end" in text(r), r
        deadline = time.monotonic() + 5
        while len(sbx.processes_with(marker)) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sbx.processes_with(marker)) == 1, "session_end left its session's process"
        m.close()  # the server's exit ends sids[0]
        assert not sbx.wait_gone(marker, timeout=5), "a session's process outlived the server"
        assert not _cgroups_of(pid), "a session's cgroup outlived the server"
        ends = [json.loads(l) for l in log.read_text().splitlines() if '"session_end"' in l]
        assert sorted(e["reason"] for e in ends) == ["ended", "server_exit"], ends
        assert {e["language"] for e in ends} == {"javascript"}, ends
    finally:
        sbx.kill_marker(marker)


# The same facts from Node (for a module and a script alike: no import statement).
JS_CONFINEMENT = r"""
const fs = process.getBuiltinModule('node:fs'), os = process.getBuiltinModule('node:os');
const facts = {};
for (const l of fs.readFileSync('/proc/self/status', 'utf8').split('\n')) {
  const [k, v] = l.split(':');
  if (['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp', 'Seccomp_filters'].includes(k))
    facts[k] = v.trim();
}
facts.ids = [process.getuid(), process.getgid(), process.getgroups()];
facts.hostname = os.hostname();
facts.net = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).filter(Boolean)
  .map((l) => l.split(':')[0].trim()).sort();
try { fs.writeFileSync('/usr/x', ''); facts.root = 'writable'; } catch (e) { facts.root = e.code; }
for (const name of ['memory.max', 'pids.max']) {
  try { facts[name] = fs.readFileSync('/sys/fs/cgroup/' + name, 'utf8').trim(); } catch (e) { facts[name] = e.code; }
}
facts.mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean)
  .map((l) => { const f = l.split(' '); return f[4] + ' ' + f[f.length - 3]; }).sort();
console.log(JSON.stringify(facts));
"""


def test_js_session_confined_like_a_one_shot_call(mcp):
    """A javascript session's node sees the confinement a one-shot javascript call's sees: the same
    rootfs, policy, seccomp filters, cgroup limits and mounts (base_spec for javascript)."""
    m = mcp()
    sid = js_session(m)
    if sbx.enforcement() == "degraded":
        pytest.skip("no cgroup: a one-shot node needs --memory 2G on rlimits, and the server's policy gives 512M")
    one = json.loads(out(js(m, JS_CONFINEMENT)))
    ses = json.loads(out(js(m, JS_CONFINEMENT, sid)))
    assert ses == one
    assert one["NoNewPrivs"] == "1" and one["Seccomp"] == "2" and one["CapEff"] == "0000000000000000", one
    assert any(mnt.startswith("/ ") for mnt in one["mounts"]), one
