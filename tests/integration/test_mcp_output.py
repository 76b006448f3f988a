"""What a run_python result keeps of long output (issue #36 item 1): each stream is captured as a
head and a tail within the policy's output_limit (1 MiB by default, for both streams together), so
the model sees the beginning, the end of stdout and a whole traceback however much was printed; the
counts stay exact and the line that says what was cut stands where it was cut."""
import re

import pytest

import sbx
from mcpsession import Mcp

LIMIT = 1 << 20  # the shipped policy's output_limit
TEXT_LIMIT = 40000  # --text-limit's default

# The one line that stands where a stream was cut: characters left out for the text limit,
# bytes the capture dropped (output_limit), or both.
CUT = re.compile(r"\n--- (?:(\d+) characters)?(?: and )?(?:(\d+) bytes)? of (stdout|stderr) cut here "
                 r"\(([^)]*)\)(?:; [^\n]*)? ---\n")


@pytest.fixture(scope="module")
def mcp():
    sbx.require_sandboxd()
    m = Mcp()
    yield m
    m.close()


def run(m, src):
    r = m.send("tools/call", {"name": "run_python", "arguments": {"code": src}})
    return r, r["content"][0]["text"], r["structuredContent"]


def split(shown, stream):
    """A shaped stream's head, its cut line's counts (characters, bytes) and its tail."""
    found = list(CUT.finditer("\n" + shown))
    assert len(found) == 1, shown[:300]
    m = found[0]
    assert m.group(3) == stream
    head, tail = ("\n" + shown)[1:m.start() + 1], ("\n" + shown)[m.end():]
    return head, int(m.group(1) or 0), int(m.group(2) or 0), m.group(4), tail


def lines(fmt, n):
    return "".join(fmt.format(i) for i in range(n))


def test_traceback_after_2mb_of_output(mcp):
    """2.1 MB then an exception: the traceback whole, in the text and in structuredContent.stderr,
    and stdout's head and last lines with one line between them saying how much went, and why."""
    r, text, sc = run(mcp, 'for i in range(50000):\n    print(f"line {i:05d} " + "x" * 30)\n'
                           'raise ValueError("the end of the run")')
    out = lines("line {:05d} " + "x" * 30 + "\n", 50000)
    assert sc["status"] == "error" and sc["exit_code"] == 1
    assert sc["stdout_bytes"] == len(out) == 2100000 and sc["truncated"] is True
    # The traceback, every byte of it.
    err = sc["stderr"]
    assert err.startswith("Traceback (most recent call last):\n") and err.endswith("ValueError: the end of the run\n"), err
    assert len(err.encode()) == sc["stderr_bytes"]
    assert "--- stderr ---\n" + err in text
    # stdout: the head, the cut line, the tail ending with the last line printed.
    head, chars, dropped, why, tail = split(sc["stdout"], "stdout")
    assert why == "text limit 40000, output_limit 1 MiB"
    assert head.startswith("line 00000 ") and out.startswith(head)
    assert tail.endswith("line 49999 " + "x" * 30 + "\n") and out.endswith(tail)
    # Exact: what is shown, cut for the text and dropped at capture is all of it; the capture
    # kept output_limit bytes in all, stdout what stderr left.
    assert len(head) + chars + dropped + len(tail) == sc["stdout_bytes"]
    assert chars == sc["cut_characters"]
    assert dropped == sc["stdout_bytes"] - (LIMIT - sc["stderr_bytes"])
    assert len(text) <= TEXT_LIMIT and text.startswith(sc["stdout"])
    assert text.endswith("--- status: error, exit code 1 ---")


def test_marker_on_the_last_line_of_5mb(mcp):
    """5 MiB of stdout whose last line (no newline after it) is a marker: the marker is in the text."""
    r, text, sc = run(mcp, 'import sys\nprint("FIRST")\n'
                           'for i in range(5 * 1024):\n    sys.stdout.write(f"{i:07d} " + "y" * 1015 + "\\n")\n'
                           'sys.stdout.write("LAST-LINE-MARKER 5f3a")')
    assert sc["status"] == "ok" and sc["truncated"] is True and sc["stderr_bytes"] == 0
    assert sc["stdout_bytes"] == 6 + 5 * 1024 * 1024 + len("LAST-LINE-MARKER 5f3a")
    assert text.startswith("FIRST\n0000000 y") and text.endswith("\nLAST-LINE-MARKER 5f3a"), text[-200:]
    head, chars, dropped, _, tail = split(sc["stdout"], "stdout")
    assert tail.startswith("00") and tail.endswith("y\nLAST-LINE-MARKER 5f3a")  # whole lines
    assert len(head) + chars + dropped + len(tail) == sc["stdout_bytes"]
    assert dropped == sc["stdout_bytes"] - LIMIT
    assert TEXT_LIMIT - 2000 < len(text) <= TEXT_LIMIT


def test_interleaved_streams_each_keep_their_head_and_end(mcp):
    """stdout and stderr written in turns, 2 MiB each: each keeps its first and last lines, and half
    of the limit (neither pushes the other out); every count adds up."""
    r, text, sc = run(mcp, 'import sys\nfor i in range(32768):\n'
                           '    sys.stdout.write(f"out {i:05d} " + "o" * 53 + "\\n"); sys.stdout.flush()\n'
                           '    sys.stderr.write(f"err {i:05d} " + "e" * 53 + "\\n"); sys.stderr.flush()\n')
    kept = 0
    for stream, name in (("stdout", "out"), ("stderr", "err")):
        whole = lines(name + " {:05d} " + name[0] * 53 + "\n", 32768)
        assert sc[stream + "_bytes"] == len(whole) == 2 << 20
        head, chars, dropped, _, tail = split(sc[stream], stream)
        assert head.startswith(f"{name} 00000 ") and whole.startswith(head)
        assert tail.endswith(f"{name} 32767 " + name[0] * 53 + "\n") and whole.endswith(tail)
        assert len(head) + chars + dropped + len(tail) == len(whole)
        assert len(whole) - dropped >= LIMIT // 2, (stream, dropped)
        kept += len(whole) - dropped
    assert kept == LIMIT and sc["truncated"] is True
    assert text.startswith(sc["stdout"]) and "\n--- stderr ---\n" + sc["stderr"] in text
    assert len(text) <= TEXT_LIMIT


@pytest.mark.parametrize("flood", ["os.urandom(1 << 20)", "'é'.encode() * (1 << 19)"])
def test_a_flood_keeps_its_end(mcp, flood):
    """8 MiB of random bytes (or of two-byte characters, cut anywhere) then a last line: bounded,
    valid text with the last line in it, and no half character shown as U+FFFD."""
    r, text, sc = run(mcp, f'import os, sys\nchunk = {flood}\nfor _ in range(8):\n'
                           '    sys.stdout.buffer.write(chunk)\nsys.stdout.buffer.write(b"\\nFLOOD-END\\n")\n'
                           'print("on stderr", file=sys.stderr)')
    assert sc["stdout_bytes"] == 8 * (1 << 20) + len("\nFLOOD-END\n") and sc["stderr_bytes"] == 10
    assert sc["truncated"] is True and sc["stderr"] == "on stderr\n"
    assert sc["stdout"].endswith("\nFLOOD-END\n"), sc["stdout"][-100:]
    head, chars, dropped, _, tail = split(sc["stdout"], "stdout")
    # Up to 3 bytes more: a character whose first bytes were dropped is not shown in part.
    expected = sc["stdout_bytes"] - (LIMIT - sc["stderr_bytes"])
    assert expected <= dropped <= expected + 3, (dropped, expected)
    assert len(text) <= TEXT_LIMIT and len(text.encode()) <= 3 * TEXT_LIMIT
    if "é" in flood:
        assert sc["replaced_bytes"] == 0 and "\ufffd" not in text
        head = head.rstrip("\n")  # the cut line starts on a line of its own
        assert set(head) == {"é"} and tail.endswith("é\nFLOOD-END\n") and set(tail[:-11]) == {"é"}
        assert len(head.encode()) + 2 * chars + dropped + len(tail.encode()) == sc["stdout_bytes"]
    else:
        assert sc["replaced_bytes"] > 0 and not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", text)


def test_saved_output_marks_the_cut(tmp_path):
    """With --output-dir, stdout.txt is what was captured, its head and its tail with the same
    line between them, and the text's cut line says where it is."""
    sbx.require_sandboxd()
    m = Mcp("--output-dir", str(tmp_path))
    try:
        r, text, sc = run(m, 'for i in range(50000):\n    print(f"line {i:05d} " + "x" * 30)\n')
    finally:
        m.close()
    [call] = list(tmp_path.iterdir())
    saved = (call / "stdout.txt").read_text()
    out = lines("line {:05d} " + "x" * 30 + "\n", 50000)
    head, chars, dropped, why, tail = split(saved, "stdout")
    assert chars == 0 and why == "output_limit 1 MiB" and dropped == len(out) - LIMIT
    assert out.startswith(head) and out.endswith(tail) and len(head) + len(tail) == LIMIT
    _, _, dropped2, _, _ = split(sc["stdout"], "stdout")
    assert dropped2 == dropped
    assert f"; the captured head and tail of stdout are in {call}/stdout.txt ---\n" in text


def test_execute_code_bash_keeps_its_last_error(mcp):
    """execute_code shares the capture: 3 MB from a shell loop, then a command that fails."""
    r = mcp.send("tools/call", {"name": "execute_code", "arguments": {
        "language": "bash", "code": 'head -c 3000000 /dev/zero | tr "\\0" "z"; echo; echo LAST-OUT; ls /nope-36'}})
    sc, text = r["structuredContent"], r["content"][0]["text"]
    assert sc["stdout_bytes"] == 3000000 + 1 + len("LAST-OUT\n") and sc["truncated"] is True
    assert sc["stdout"].endswith("\nLAST-OUT\n") and "/nope-36" in sc["stderr"] and sc["exit_code"] == 2
    assert "--- stderr ---\n" + sc["stderr"] in text
