"""The tools' hints and icons (issue #37 item 4): readOnlyHint is true only when a call cannot
change anything outside its sandbox in the server's configuration (no --bind-rw, no --output-dir,
no egress, no host MCP servers), so that a client's plan mode and parallel calls treat the tools
as what they are; destructiveHint and openWorldHint follow; icons for the server and each tool
under 2025-11-25."""
import json

import pytest

import sbx
from mcpsession import Mcp


CODE_TOOLS = {"run_python", "execute_code"}
SESSION_TOOLS = {"session_start", "session_end"}


def hints(*args, version="2025-11-25"):
    """initialize's result, the code tools' annotations, and every tool."""
    sbx.require_sandboxd()
    m = Mcp(*args, version=version)
    try:
        tools = m.tools()
        return m.init, {name: t.get("annotations", {}) for name, t in tools.items() if name in CODE_TOOLS}, tools
    finally:
        m.close()


def test_a_plain_server_is_read_only_and_has_icons():
    init, ann, tools = hints()
    assert set(tools) == CODE_TOOLS | SESSION_TOOLS, tools
    # A session's tools make or end a sandbox's state and reach nothing else (sandboxd-mcp(7),
    # SESSIONS): never read-only, never an open world; ending loses the state.
    for name in SESSION_TOOLS:
        a = tools[name]["annotations"]
        assert a["readOnlyHint"] is False and a["openWorldHint"] is False, a
        assert a["destructiveHint"] is (name == "session_end"), a
    for a in ann.values():
        assert a["readOnlyHint"] is True and a["destructiveHint"] is False and a["openWorldHint"] is False, a
    for icons in [init["serverInfo"].get("icons")] + [t.get("icons") for t in tools.values()]:
        assert [i["mimeType"] for i in icons] == ["image/png", "image/svg+xml"], icons
        assert icons[0]["src"].startswith("data:image/png;base64,iVBORw0KGgo") and icons[0]["sizes"] == ["32x32"]


@pytest.mark.parametrize("opt", ["bind-rw", "output-dir", "allow-host"])
def test_what_reaches_the_host_is_not_read_only(opt, tmp_path):
    args = {"bind-rw": ["--bind-rw", f"{tmp_path}:/data"], "output-dir": ["--output-dir", str(tmp_path)],
            "allow-host": ["--policy", "ci", "--allow-host", "example.com"]}[opt]
    if opt == "allow-host" and "example.com" in " ".join(sbx.EGRESS_OPTS):
        pytest.skip("the suite's own egress option")
    _, ann, _ = hints(*args)
    for a in ann.values():
        assert a["readOnlyHint"] is False, (opt, a)
        assert a["destructiveHint"] is (opt != "output-dir"), (opt, a)  # --output-dir only adds files
        assert a["openWorldHint"] is (opt == "allow-host"), (opt, a)


def test_host_servers_make_it_an_open_world(tmp_path):
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps({"mcpServers": {"echo": {"command": "/bin/true"}}}))
    _, ann, _ = hints("--config", str(cfg))
    a = ann["run_python"]
    assert a["readOnlyHint"] is False and a["destructiveHint"] is True and a["openWorldHint"] is True, a


def test_no_icons_before_2025_11_25():
    init, _, tools = hints(version="2025-06-18")
    assert "icons" not in init["serverInfo"] and not any("icons" in t for t in tools.values())
