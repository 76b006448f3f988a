"""The bridge's budget (src/hostmcp/proxy.h): what the code at fd 3 can make `sandboxd mcp` hold and parse,
and the size of a run_python reply. The code owns its end of the bridge and may send anything;
sandboxd must stay small, keep answering, and tell the code (MCPError) what it refused."""
import json
import os
import subprocess
import threading
import time

import pytest

import sbx

HOSTMCP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostmcp.py")
TOO_LARGE = -32002
MiB = 1 << 20


def _is_asan(path):
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


ASAN = _is_asan(sbx.SANDBOXD)


class Server:
    """`sandboxd mcp` with one host server, `host` (hostmcp.py), spoken to over its stdio."""

    def __init__(self, tmp_path, audit="off"):
        sbx.require_sandboxd()
        cfg = tmp_path / "servers.json"
        cfg.write_text(json.dumps({"mcpServers": {"host": {"command": "/usr/bin/python3", "args": [HOSTMCP]}}}))
        self.p = subprocess.Popen([sbx.SANDBOXD, "mcp", "--rootfs", sbx.ROOTFS, "--warm", "0", "--config", str(cfg),
                                   "--audit-log", str(audit)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.cond = threading.Condition()
        self.answers = {}  # id -> (arrival time, line length, message)
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self.p.stderr.read, daemon=True).start()
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test_bridge", "version": "1"}})

    def _read(self):
        for line in self.p.stdout:
            msg = json.loads(line)
            with self.cond:
                if "id" in msg:
                    self.answers[msg["id"]] = (time.monotonic(), len(line), msg)
                    self.cond.notify_all()

    def send(self, method, params=None):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        return self.next_id

    def wait(self, rid, timeout=120):
        with self.cond:
            assert self.cond.wait_for(lambda: rid in self.answers, timeout), f"no answer to {rid}"
            return self.answers.pop(rid)

    def request(self, method, params=None, timeout=120):
        return self.wait(self.send(method, params), timeout)[2]

    def run_sized(self, code, servers=("host",)):
        """run_python: the reply's size in bytes and its result."""
        args = {"code": code}
        if servers:
            args["servers"] = list(servers)
        _, size, msg = self.wait(self.send("tools/call", {"name": "run_python", "arguments": args}))
        return size, msg["result"]

    def run(self, code, servers=("host",)):
        return self.run_sized(code, servers)[1]

    def status(self):
        """sandboxd's memory (bytes) and CPU time (seconds: spent outside the sandbox's cgroup)."""
        with open(f"/proc/{self.p.pid}/status") as f:
            st = {k: int(v.split()[0]) * 1024 for k, v in (l.split(":", 1) for l in f) if k in ("VmRSS", "VmHWM", "RssAnon")}
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        st["cpu"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return st

    def settled(self, before, bound):
        """Status once anonymous memory is back within bound of before: a run answered at its done
        byte is reaped (and its memory freed) just after the answer. Gives up after 5 s."""
        deadline = time.monotonic() + 5
        while True:
            st = self.status()
            if st["RssAnon"] - before["RssAnon"] < bound or time.monotonic() > deadline:
                return st
            time.sleep(0.05)

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path, audit=tmp_path / "audit.log")
    yield s
    s.close()
    assert s.p.returncode == 0


def text(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


def last_json(result):
    assert result["structuredContent"]["status"] == "ok", text(result)
    return json.loads(text(result).strip().splitlines()[-1])


# Code that writes raw frames on fd 3, as hostile code would (the `mcp` package checks its own).
RAW = """
import os, socket, struct
raw = socket.socket(fileno=os.dup(3))
def frame(b):
    raw.sendall(struct.pack(">I", len(b)) + b)
def zeros(n):  # a valid JSON document of n bytes: [0,0,...,0]
    return b"[" + b"0," * ((n - 3) // 2) + b"0" * (1 + (n - 3) % 2) + b"]"
"""

# An MCPError's code and message from a call, as JSON.
CATCH = """
import json
from mcp import runtime
from mcp._bridge import MCPError
def attempt(*a):
    try:
        runtime.call_tool_sync(*a)
        return None
    except MCPError as e:
        return [e.code, e.message]
"""


def test_oversize_request_is_refused_unread_with_mcperror(server):
    """A request above the policy's proxy_request_limit (16 MiB in the default policy) is refused
    before anything is allocated for it, and the code still gets an MCPError for its id (read from
    the frame's first bytes). The package refuses it itself, before sending, with the same limit."""
    res = server.run(CATCH + """
import mcp._bridge as b
mine = attempt("host", "echo", {"s": "x" * (17 << 20)})
b.MAX_FRAME = 1 << 30   # past the package's own check: what sandboxd does is under test
print(json.dumps([attempt("host", "echo", {"s": "x" * (17 << 20)}), attempt("host", "echo", {"s": "ok"}), mine]))""")
    big, small, mine = last_json(res)
    assert big and big[0] == TOO_LARGE and "above the bridge's limit of 16777216 bytes" in big[1], big
    assert small is None  # the stream stayed in sync
    assert mine and mine[0] == TOO_LARGE and "above the bridge's limit of 16777216 bytes" in mine[1], mine


# Every kind of character a payload holds: printable ASCII, quotes and backslashes, newlines and
# tabs, a control character, 2-, 3- and 4-byte UTF-8, U+2028 (a line break to JavaScript, not to
# JSON). As JSON it is about 1.1 times as long.
PAYLOAD = r"""
import hashlib
def payload(n):
    unit = "".join(chr(c) for c in range(32, 127)) + 'é"\\ü\n\t\x01€\u2028𝄞😀'
    return (unit * (n // len(unit) + 1))[:n]
"""


@pytest.mark.parametrize("size", [1_500_000, 10_000_000], ids=["1.5MB", "10MB"])
def test_large_arguments_arrive_intact(server, size):
    """A tool argument of 1.5 MB or 10 MB (a CSV handed to a host server's write tool) goes
    through and comes back unchanged; sandboxd holds about twice a request while it forwards it
    (and a few times the answer), and nothing of either once the run is over."""
    server.run("print(1)")
    before = server.status()
    res = server.run(PAYLOAD + CATCH + f"""
s = payload({size})
try:
    r = runtime.call_tool_sync("host", "mirror", {{"s": s}})
    back = r["content"][0]["text"]
    print(json.dumps([len(s), len(back), back == s, hashlib.sha256(back.encode()).hexdigest()[:16]]))
except MCPError as e:
    print(json.dumps([e.code, e.message]))""")
    sent, got, same, _ = last_json(res)
    assert sent == size and got == size and same, last_json(res)
    st = server.settled(before, 2 * MiB)
    # The request's JSON is about 1.2 times the string (escapes, UTF-8), its answer's too; sandboxd
    # holds two copies of either at once. ASan's quarantine keeps what is freed: no figure there.
    assert ASAN or st["VmHWM"] - before["VmHWM"] < 3 * size + 8 * MiB, (before, st)
    assert ASAN or st["RssAnon"] - before["RssAnon"] < 2 * MiB, (before, st)


def test_a_frame_sent_a_byte_at_a_time_is_read_once(server):
    """A frame's first bytes are checked as they arrive, but in pieces of at least 16 KiB: a long
    string sent a byte at a time costs sandboxd a read per byte (the syscalls), not a check of
    all of it again at every byte (yajl reads a split token again from its start)."""
    server.run("print(1)")
    before = server.status()
    res = server.run(RAW + CATCH + """
body = b'{"id":1,"method":"tools/call","params":{"server":"host","name":"echo","arguments":{"s":"' + b"x" * 300000
raw.sendall(struct.pack(">I", len(body) + 4))
for i in range(len(body)):
    raw.send(body[i:i + 1])
raw.sendall(b'"}}}')
n = struct.unpack(">I", raw.recv(4, socket.MSG_WAITALL))[0]
print(json.dumps(json.loads(raw.recv(n, socket.MSG_WAITALL))))""")
    after = server.status()
    answer = last_json(res)
    assert answer["id"] == 1 and answer["result"]["content"][0]["text"] == str(300000 + 9), answer  # len(json.dumps(args)), the tool says
    assert after["cpu"] - before["cpu"] < 10, (before, after)


def test_arguments_behind_an_escaped_key_go_on_too(server):
    """The arguments go on as the code wrote them, found in the frame; where a key before them is
    written with escapes (the tree decodes it, the search does not), they are written again from
    the whole frame, and arrive all the same."""
    res = server.run(RAW + r"""
import json
def ask(req):
    frame(req)
    n = struct.unpack(">I", raw.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(raw.recv(n, socket.MSG_WAITALL))
s = rb'x\u00e9\"\\ \n' * 3
keys = (rb'"server":"host",', rb'"serv\u0065r":"host",', rb' "server" :  "host" , ')
got = [ask(b'{"id":%d,"method":"tools/call","params":{%s"name":"mirror","arguments":{"s":"%s"}}}' % (i, k, s))
       for i, k in enumerate(keys)]
print(json.dumps([g.get("result", g) for g in got]))""")
    want = {"content": [{"type": "text", "text": "x\u00e9\"\\ \n" * 3}]}
    assert last_json(res) == [want] * 3, text(res)


def test_a_large_request_goes_alone(server):
    """Above the in-flight budget (4 MiB together), a request goes when it is the only one
    waiting for a host server; beside it, another is refused at once (wait for answers)."""
    res = server.run(CATCH + """
from mcp import _bridge
big = _bridge.get().request("tools/call", {"server": "host", "name": "hold",
                                           "arguments": {"seconds": 2, "pad": "x" * (6 << 20)}})
beside = attempt("host", "hold", {"seconds": 0, "pad": "x" * 1000})
big.result(60)
print(json.dumps([beside, attempt("host", "hold", {"seconds": 0, "pad": "x" * (6 << 20)})]))""")
    beside, after = last_json(res)
    assert beside and beside[0] == TOO_LARGE and "in flight" in beside[1], beside
    assert after is None


def test_value_budget_is_mcperror(server):
    """More JSON values than PROXY_MAX_VALUES in one request: the parse stops there."""
    res = server.run(CATCH + """
print(json.dumps([attempt("host", "echo", {"v": [0] * 20000}), attempt("host", "echo", {"v": [0] * 1000})]))""")
    many, few = last_json(res)
    assert many and many[0] == TOO_LARGE and "more than 16384 JSON values" in many[1], many
    assert few is None


def test_inflight_budget_is_mcperror(server):
    """Calls waiting for a host server hold at most PROXY_MAX_INFLIGHT_BYTES (4 MiB) of requests;
    one more is refused at once, and a call fits again once answers have come; nothing of them is
    kept after the run."""
    server.run("print(1)")
    before = server.status()
    res = server.run(CATCH + """
import concurrent.futures as cf
from mcp import _bridge
arg = {"seconds": 2, "pad": "x" * 900000}
futs = [_bridge.get().request("tools/call", {"server": "host", "name": "hold", "arguments": arg}) for _ in range(8)]
out = []
for f in futs:
    try:
        f.result(60)
        out.append(None)
    except MCPError as e:
        out.append([e.code, e.message])
print(json.dumps([out, attempt("host", "hold", arg)]))""")
    out, after = last_json(res)
    refused = [o for o in out if o]
    assert 0 < len(refused) < 8 and len(out) - len(refused) == 4, out
    assert all(o[0] == TOO_LARGE and "in flight" in o[1] for o in refused), refused
    assert after is None
    st = server.settled(before, 2 * MiB)
    assert ASAN or st["RssAnon"] - before["RssAnon"] < 2 * MiB, (before, st)


def test_names_are_bounded_and_checked_before_the_record(server, tmp_path):
    """A denied call with a huge server name, and a huge tool name: MCPError, and the audit record
    keeps at most PROXY_RECORD_NAME bytes of each."""
    res = server.run(CATCH + """
print(json.dumps([attempt("s" * 900000, "t"), attempt("host", "t" * 900000), attempt("host", "echo", {})]))""")
    denied, long_tool, ok = last_json(res)
    assert denied and denied[0] == -32602 and "is not available to this run" in denied[1], denied
    assert long_tool and long_tool[0] == TOO_LARGE and "longer than 128 bytes" in long_tool[1], long_tool
    assert ok is None
    log = tmp_path / "audit.log"
    deadline = time.monotonic() + 10
    while not (log.exists() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    line = log.read_text().splitlines()[-1]
    assert len(line) < 4096, len(line)
    calls = json.loads(line)["calls"]
    assert [c["outcome"] for c in calls] == ["denied", "error", "ok"], calls
    assert calls[0]["server"] == "s" * 125 + "..." and calls[1]["tool"] == "t" * 125 + "...", calls


def test_rss_is_bounded_during_and_after_a_flood(server):
    """Frames of `[0,0,...]` (the worst case for a tree parser) and oversize ones: sandboxd's peak
    RSS grows little, and once the run is over its RSS is back within a few MiB."""
    server.run("print(1)")
    before = server.status()
    res = server.run(RAW + """
for n in (8 << 20, 8 << 20, (1 << 20) - 16, (1 << 20) - 16, (1 << 20) - 16):
    frame(zeros(n))
print("sent")""")
    assert res["structuredContent"]["status"] == "ok", text(res)
    after = server.settled(before, 8 * MiB)
    assert after["VmHWM"] - before["VmHWM"] < 48 * MiB, (before, after)
    # ASan's allocator keeps freed memory in quarantine and ignores malloc_trim: only the peak
    # means something for that build (tests/suites.sh runs this suite under it too).
    if not ASAN:
        assert after["RssAnon"] - before["RssAnon"] < 8 * MiB, (before, after)


def test_ping_answers_within_100ms_while_a_sandbox_floods(server):
    """While the code floods the bridge with large frames, `ping` is still answered quickly."""
    server.run("print(1)")
    call = server.send("tools/call", {"name": "run_python", "arguments": {"servers": ["host"], "code": RAW + """
import time
big, mid = zeros((16 << 20) - 16), zeros((1 << 20) - 16)
end = time.monotonic() + 3
try:  # until the run's budget (PROXY_MAX_RUN_BYTES) is spent, or 3 s
    while time.monotonic() < end:
        frame(big)
        frame(mid)
except BrokenPipeError:
    pass
print("flooded")"""}})
    worst, pings = 0.0, 0
    while True:
        with server.cond:
            if call in server.answers:
                break
        t0 = time.monotonic()
        arrived, _, _ = server.wait(server.send("ping"), timeout=30)
        worst = max(worst, arrived - t0)
        pings += 1
        time.sleep(0.02)
    _, _, msg = server.wait(call)
    assert worst < 0.1, f"a ping waited {worst * 1000:.0f} ms"
    assert text(msg["result"]).startswith("flooded"), text(msg["result"])
    assert pings >= 5, pings


def test_run_byte_budget_stops_reading_and_bounds_cpu(server):
    """Past PROXY_MAX_RUN_BYTES (256 MiB) sent in one run, sandboxd reads no more of it: a flood
    costs sandboxd little CPU, the code's next call fails with MCPError saying why, and answers
    still arrive."""
    server.run("print(1)")
    before = server.status()
    res = server.run(RAW + CATCH + """
import time
runtime.list_servers_sync()   # the package's reader runs during the flood and sees why it ends
big = zeros((16 << 20) - 16)
sent, end = 0, time.monotonic() + 20
try:
    while sent < (1 << 30) and time.monotonic() < end:
        frame(big)
        sent += len(big) + 4
except BrokenPipeError:
    pass
time.sleep(0.3)
print(json.dumps([sent, attempt("host", "echo", {})]))""")
    after = server.status()
    sent, refused = last_json(res)
    assert refused and refused[0] == TOO_LARGE and "256 MiB over the bridge in this run, the limit; the bridge is closed" in refused[1], refused
    assert sent <= 300 * MiB, sent
    assert after["cpu"] - before["cpu"] < 0.5, (before, after)


@pytest.mark.parametrize("payload, bound", [
    ("b'\\x01' * (1 << 20)", 4096),             # a run of control bytes: one U+FFFD
    # The worst cases, every other byte replaced and JSON's own 2-byte escapes: cut to 40,000
    # characters (--text-limit), shown twice (text block and structuredContent), at most 3 bytes
    # for a character and 2 for an escape.
    ("b'a\\x01' * (1 << 19)", 256 * 1024),
    ("b'\\\\' * (1 << 20)", 256 * 1024),
])
def test_reply_is_bounded_by_the_text_limit(tmp_path, payload, bound):
    """1 MiB of output makes a reply of a few hundred KiB at most: it is cut to --text-limit
    characters (head and tail), and control bytes do not become 6-byte \\u00XX escapes."""
    s = Server(tmp_path)
    try:
        s.run("print(1)", servers=None)
        before = s.status()
        size, res = s.run_sized(f"import sys; sys.stdout.buffer.write({payload})", servers=None)
        after = s.settled(before, MiB)
    finally:
        s.close()
    assert size <= bound, size
    # Nothing of the output or the reply is kept once it is written (ASan: see above).
    assert ASAN or after["RssAnon"] - before["RssAnon"] < MiB, (before, after)
    sc = res["structuredContent"]
    # Shown once in the text block and once in structuredContent, each cut to --text-limit.
    assert sc["stdout_bytes"] == 1 << 20 and len(sc["stdout"]) <= 40000 and len(text(res)) <= 40000
    t = text(res)
    if sc["replaced_bytes"]:
        assert f"--- {sc['replaced_bytes']} bytes of control characters or invalid UTF-8 shown as U+FFFD ---" in t
        assert "\x01" not in t


def test_reply_keeps_tabs_and_newlines_and_counts_replacements(tmp_path):
    s = Server(tmp_path)
    try:
        _, res = s.run_sized("import sys; sys.stdout.buffer.write(b'a\\tb\\r\\n\\x1b[31mred\\xff\\xfe\\x7f!\\n'); "
                       "sys.stderr.write('err\\x00\\n')", servers=None)
    finally:
        s.close()
    sc = res["structuredContent"]
    assert sc["replaced_bytes"] == 5 and sc["stdout_bytes"] == 18 and sc["stderr_bytes"] == 5, sc
    assert text(res) == ("a\tb\r\n\ufffd[31mred\ufffd!\n--- stderr ---\nerr\ufffd\n"
                         "--- 5 bytes of control characters or invalid UTF-8 shown as U+FFFD ---\n")
