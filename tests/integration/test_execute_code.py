"""execute_code (issue #16 item 3): the tool's schema and languages, --tools and --warm-lang, code
larger than an argument may be, bash's `-c` semantics, the common result fields, and the audit
record's language. The isolation probes in bash are tests/security/test_bash_probes.py."""
import json

import pytest

import sbx
from mcpsession import Mcp

_langs = []


def languages():
    """execute_code's languages as this server finds them (javascript once rootfs/node-slim is
    built: `make rootfs-node`)."""
    if not _langs:
        sbx.require_sandboxd()
        m = Mcp()
        _langs.extend(m.tools()["execute_code"]["inputSchema"]["properties"]["language"]["enum"])
        m.close()
    return _langs


def need_node():
    if "javascript" not in languages():
        pytest.skip("no node-slim rootfs (make rootfs-node): execute_code offers no javascript")


@pytest.fixture
def mcp():
    sbx.require_sandboxd()
    m = Mcp()
    yield m
    m.close()


def test_both_tools_by_default_with_the_common_schema(mcp):
    tools = mcp.tools()
    assert set(tools) == {"run_python", "execute_code", "session_start", "session_end"}
    t = tools["execute_code"]
    props = t["inputSchema"]["properties"]
    assert set(props) == {"language", "code", "timeout", "session_id"}
    assert t["inputSchema"]["required"] == ["language", "code"]
    assert props["language"]["enum"] in (["python", "bash"], ["python", "bash", "javascript"])
    out = t["outputSchema"]
    for f in ("success", "stdout", "stderr", "exit_code", "execution_time_ms", "memory_used_mb", "status",
              "truncated", "files"):
        assert f in out["properties"] and (f == "files" or f in out["required"]), f
    assert "bash -c CODE" in t["description"] and "ES module" in t["description"]
    caps = json.loads(mcp.send("resources/read", {"uri": "sandboxd://capabilities"})["contents"][0]["text"])
    assert set(caps["languages"]) == set(props["language"]["enum"])
    assert caps["languages"]["bash"]["program"] == "/usr/bin/bash"


# Text past --text-limit in both streams, characters that are two UTF-16 units each, and more
# files than a call returns (a note block of its own): the longest text a result can hold.
LONGEST = r"""
import os, sys
for i in range(40):
    open(f"/workspace/out/f{i:02}.txt", "w").write("x")
print("\U0001F600" * 300000)
print("\U0001F600" * 300000, file=sys.stderr)
"""


@pytest.mark.parametrize("limit", [None, 1000, 200000], ids=["default", "1000", "200000"])
def test_tools_say_how_long_a_result_is_for_claude_code(limit):
    """Both tools carry _meta["anthropic/maxResultSizeChars"] (issue #36 item 5): the most
    characters the text blocks of a result hold together, as Claude Code counts them (UTF-16
    units), from --text-limit: a result sandboxd shaped is then shown inline, never written to a
    file. The longest result's text is within it."""
    sbx.require_sandboxd()
    m = Mcp(*(["--text-limit", str(limit)] if limit else []))
    try:
        tools = m.tools()
        r = m.send("tools/call", {"name": "run_python", "arguments": {"code": LONGEST}})
    finally:
        m.close()
    most = 2 * (limit or 40000) + 1024
    # (session_start and session_end answer a line or two: no _meta.)
    assert {n: t.get("_meta", {}).get("anthropic/maxResultSizeChars") for n, t in tools.items()
            if not n.startswith("session_")} == {"run_python": most, "execute_code": most}, tools
    texts = [c["text"] for c in r["content"] if c["type"] == "text"]
    assert len(texts) == 2 and "not returned" in texts[1], texts[1:]
    units = sum(len(t.encode("utf-16-le")) // 2 for t in texts)
    # Two units a character but for the ASCII of the line that says where stdout was cut (about
    # 240 characters, within the text limit): the longest result comes within that of the bound.
    assert 2 * (limit or 40000) - 300 < units <= most, (units, most)


@pytest.mark.parametrize("only", ["run_python", "execute_code"])
def test_tools_chooses_what_is_offered_and_callable(only):
    sbx.require_sandboxd()
    m = Mcp("--tools", only)
    assert set(m.tools()) == {only}
    other = "execute_code" if only == "run_python" else "run_python"
    r = m.request("tools/call", {"name": other, "arguments": {"language": "python", "code": "print(1)"}})
    assert r["error"]["code"] == -32602 and "Unknown tool" in r["error"]["message"]
    m.close()


@pytest.mark.parametrize("args", [["--tools", "run_python,bash"], ["--tools", ""], ["--warm-lang", "ruby"],
                                  ["--warm-lang", "python,"]])
def test_bad_tools_and_warm_lang_are_usage_errors(args):
    sbx.require_sandboxd()
    sbx.assert_usage_error(sbx.sandboxd("mcp", "--rootfs", sbx.ROOTFS, *args))


def test_warm_lang_of_an_absent_rootfs_is_a_usage_error():
    if "javascript" in languages():
        pytest.skip("the node-slim rootfs is built: javascript is present")
    r = sbx.sandboxd("mcp", "--rootfs", sbx.ROOTFS, "--warm-lang", "python,javascript")
    sbx.assert_usage_error(r, "--warm-lang javascript")
    assert "--warm-lang javascript" in r.stderr and "make rootfs-node" in r.stderr


def test_bad_arguments_are_results_the_model_reads(mcp):
    for args, want in [({"code": "echo"}, "missing `language`"),
                       ({"language": "ruby", "code": "1"}, "unknown `language` `ruby`"),
                       ({"language": "bash"}, "missing `code`: pass the bash source"),
                       ({"language": "bash", "code": "echo", "servers": ["x"]}, None)]:
        r = mcp.send("tools/call", {"name": "execute_code", "arguments": args})
        if want:
            assert r["isError"] and want in r["content"][0]["text"], r
        else:  # no `servers` in execute_code's schema: an extra key is ignored, as JSON Schema allows
            assert r["structuredContent"]["success"], r
    if "javascript" not in languages():
        r = mcp.send("tools/call", {"name": "execute_code", "arguments": {"language": "javascript", "code": "1"}})
        assert r["isError"] and "javascript is not available here" in r["content"][0]["text"]


def test_bash_runs_as_bash_dash_c(mcp):
    r, _ = mcp.execute("bash", 'echo "$0 $#"; read x; echo "stdin:$?"; f() { return 7; }; f; echo "f:$?"\n'
                               'trap "echo trapped" EXIT; echo line $LINENO; exit 3')
    sc = r["structuredContent"]
    assert sc["stdout"] == "/usr/bin/bash 0\nstdin:1\nf:7\nline 2\ntrapped\n", sc
    assert (sc["status"], sc["exit_code"], sc["success"]) == ("error", 3, False)
    r, _ = mcp.execute("bash", "echo before\nif")
    sc = r["structuredContent"]
    assert sc["stdout"] == "before\n" and "syntax error" in sc["stderr"] and sc["exit_code"] == 2, sc


def test_python_through_execute_code_is_run_python(mcp):
    r, _ = mcp.execute("python", "import asyncio\nawait asyncio.sleep(0)\nprint(6 * 7)")
    sc = r["structuredContent"]
    assert sc["stdout"] == "42\n" and sc["success"] and sc["memory_used_mb"] > 0
    assert sc["memory_used_mb"] == pytest.approx(sc["memory_peak_bytes"] / 2**20)


@pytest.mark.parametrize("warm", ["0", "1"])
def test_bash_code_larger_than_an_argument(warm):
    """The kernel refuses one argument over 128 KiB (MAX_ARG_STRLEN): the code goes on stdin."""
    sbx.require_sandboxd()
    m = Mcp("--warm-lang", "bash", warm=warm)
    lines = [f": {i:07d} " + "x" * 100 for i in range(20000)]  # 2.2 MiB
    r, _ = m.execute("bash", "\n".join(lines) + "\necho done $LINENO")
    assert r["structuredContent"]["stdout"] == "done 20001\n", r["content"][0]["text"][-500:]
    m.close()


def test_files_out_and_the_audit_record(tmp_path):
    sbx.require_sandboxd()
    log = tmp_path / "audit.log"
    m = Mcp(audit=str(log))
    r, _ = m.execute("bash", "echo hi > /workspace/out/hi.txt; echo done")
    assert r["structuredContent"]["stdout"] == "done\n"
    assert [f["path"] for f in r["structuredContent"]["files"]] == ["hi.txt"]
    m.execute("python", "print(1)")
    m.close()
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["mode"], x.get("language")) for x in recs] == [("mcp", "bash"), ("mcp", None)]


@pytest.mark.parametrize("warm", ["0", "1"])
def test_javascript_runs_as_an_es_module_from_stdin(warm):
    need_node()
    if sbx.enforcement() == "degraded":
        # A known limit, documented in sandboxd.policy(5) (Node.js): on rlimits the memory limit is
        # address space, and V8 reserves ~1.3 GiB of it at start; the root run has a cgroup.
        pytest.skip("no cgroup: node needs --memory 2G on rlimits, and the server's policy gives 512M")
    m = Mcp("--warm-lang", "javascript", warm=warm)
    big = "const s = `" + "x" * (1 << 20) + "`;\n"  # 1 MiB: more than one argument may hold
    r, _ = m.execute("javascript", big + "import { setTimeout as wait } from 'node:timers/promises';\n"
                     "await wait(5);\nconsole.log(s.length, typeof require, import.meta.url.startsWith('file:'));\n"
                     "console.error('to stderr'); process.exitCode = 3;")
    sc = r["structuredContent"]
    assert (sc["stdout"], sc["stderr"], sc["exit_code"], sc["success"]) == (
        f"{1 << 20} undefined true\n", "to stderr\n", 3, False), r["content"][0]["text"][-500:]
    m.close()
