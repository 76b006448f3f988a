# SPDX-License-Identifier: Apache-2.0
"""Host MCP servers from inside a sandboxd sandbox (compatible with mcp-server-code-execution-mode).

    from mcp import runtime
    runtime.discovered_servers()                      # ('everything', 'memory'): every configured one
    await runtime.query_tool_docs("everything")        # what its tools take
    await runtime.search_tool_docs("add numbers")      # ranked across servers
    r = await mcp_everything.get_sum(a=1, b=2)         # the CallToolResult as a dict
    r = await runtime.call_tool("everything", "get-sum", {"a": 1, "b": 2})

Aliases: a server or tool name becomes a Python identifier by replacing every character other
than A-Z, a-z, 0-9 and _ with _, prefixing _ if it starts with a digit, and appending _ if it is a
keyword ("get-sum" -> get_sum, "my.server" -> mcp_my_server, "2fa" -> _2fa, "class" -> class_).
Two names with the same alias get _2, _3, ... in the order the server lists them. Lookups accept
the alias, the original name, and (if unambiguous) the alias in any letter case.

Discovery (discovered_servers, list_tools, query_tool_docs, search_tool_docs, describe_server)
covers every host server configured for sandboxd that the policy allows, whether or not the
run_python call lists it in `servers` (sandboxd may start a server to learn its tools); calling a
tool needs the server listed in `servers`, else MCPError. With no host server configured there is
no bridge: discovery finds nothing, and a call raises MCPError.

Results are never filtered: a tool returns its whole CallToolResult (content, structuredContent,
isError, _meta) as a dict; a tool's own failure is a result with isError true. Failures of the call
itself (server not allowed or unknown, timeout, host server crash, bad frames) raise MCPError.
"""
import keyword
import os
import re

from . import _bridge
from ._bridge import MCPError

__all__ = [
    "MCPError", "discovered_servers", "list_servers", "list_servers_sync", "list_tools", "list_tools_sync",
    "describe_server", "query_tool_docs", "query_tool_docs_sync", "search_tool_docs", "search_tool_docs_sync",
    "call_tool", "call_tool_sync", "capability_summary", "install",
]

_TIMEOUT = None  # sandboxd enforces the per-call timeout and answers with an error


def alias(name):
    """The Python identifier for a server or tool name (see the module docstring)."""
    a = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
    if a[0].isdigit():
        a = "_" + a
    if keyword.iskeyword(a):
        a += "_"
    return a


def _aliases(names):
    out, seen = {}, {}
    for n in names:
        a = alias(n)
        k = seen.get(a, 0) + 1
        seen[a] = k
        out[n] = a if k == 1 else "%s_%d" % (a, k)
    return out


# ------------------------------------------------------------------ servers

def _server_names():
    """The servers this run may call (run_python's `servers`)."""
    raw = os.environ.get("SANDBOXD_MCP_SERVERS", "")
    return tuple(n for n in raw.split(",") if n)


_info = None


def _server_info():
    """{name: {name, description, callable}} for every server there is to discover, in config
    order; {} without a bridge (no host server is configured)."""
    global _info
    if _info is None:
        info = {}
        if _bridge.present():
            res = _bridge.get().request("servers/list").result(_TIMEOUT)
            for srv in res.get("servers", []):
                if isinstance(srv, dict) and isinstance(srv.get("name"), str):
                    info[srv["name"]] = srv
        _info = info
    return _info


def _match(name, names):
    if name in names:
        return name
    amap = _aliases(names)
    for n, a in amap.items():
        if a == name or "mcp_" + a == name:
            return n
    folded = [n for n, a in amap.items() if a.lower() == str(name).lower()]
    return folded[0] if len(folded) == 1 else None


def _resolve_server(name):
    found = _match(name, _server_names())
    if found is None and _bridge.present():  # one this run may not call, for discovery
        found = _match(name, tuple(_server_info()))
    # Unknown here: let sandboxd answer, so the error is the same as for a raw call.
    return name if found is None else found


def discovered_servers(detailed=False):
    """Every host server there is to discover (configured and allowed by the policy, listed in
    `servers` or not): a tuple of names, or of {name, alias, description, callable}, where
    callable says whether this run may call its tools."""
    info = _server_info()
    names = tuple(info)
    if not detailed:
        return names
    amap = _aliases(names)
    return tuple({"name": n, "alias": amap[n], "description": info[n].get("description") or "",
                  "callable": bool(info[n].get("callable"))} for n in names)


def list_servers_sync():
    return list(_server_names())


async def list_servers():
    return list_servers_sync()


# ------------------------------------------------------------------ tools

_tools = {}


def list_tools_sync(server):
    """The server's tools as it lists them, each with an added "alias"."""
    server = _resolve_server(server)
    if server not in _tools:
        res = _bridge.get().request("tools/list", {"server": server}).result(_TIMEOUT)
        tools = [dict(t) for t in res.get("tools", []) if isinstance(t, dict) and isinstance(t.get("name"), str)]
        amap = _aliases([t["name"] for t in tools])
        for t in tools:
            t["alias"] = amap[t["name"]]
        _tools[server] = tools
    return [dict(t) for t in _tools[server]]


async def list_tools(server):
    return await _in_thread(list_tools_sync, server)


def _find_tool(server, tool):
    list_tools_sync(server)
    tools = _tools[_resolve_server(server)]
    for key in ("name", "alias"):
        for t in tools:
            if t[key] == tool:
                return t
    folded = [t for t in tools if t["alias"].lower() == alias(tool).lower()]
    if len(folded) == 1:
        return folded[0]
    return None


def _signature(t):
    schema = t.get("inputSchema") or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, p in props.items():
        typ = p.get("type", "any") if isinstance(p, dict) else "any"
        if isinstance(typ, list):
            typ = "|".join(map(str, typ))
        parts.append("%s: %s%s" % (name, typ, "" if name in required else " = ..."))
    return "%s(%s)" % (t["alias"], ", ".join(parts))


def _doc(server, t, detail):
    if detail == "full":
        d = dict(t)
        d["server"] = server
        d["signature"] = _signature(t)
        return d
    if detail != "summary":
        raise ValueError('detail must be "summary" or "full"')
    return {"server": server, "name": t["name"], "alias": t["alias"], "signature": _signature(t),
            "description": t.get("description") or t.get("title") or ""}


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Docs for one tool (a dict) or all of a server's tools (a list). detail: "summary" (name,
    alias, signature, description) or "full" (everything the server says, schemas included)."""
    server = _resolve_server(server)
    if tool is None:
        return [_doc(server, t, detail) for t in list_tools_sync(server)]
    t = _find_tool(server, tool)
    if t is None:
        raise MCPError("server `%s` has no tool `%s`" % (server, tool), server=server, tool=tool)
    return _doc(server, t, detail)


async def query_tool_docs(server, tool=None, detail="summary"):
    return await _in_thread(query_tool_docs_sync, server, tool, detail)


def _words(text):
    return [w for w in re.split(r"[^a-z0-9]+", str(text).lower()) if w]


def search_tool_docs_sync(query, limit=5, detail="summary"):
    """Tools of every server there is to discover (discovered_servers), ranked by how well they
    match query: the whole query as the tool's name (or alias) > inside its name > each word in
    its name > in its title or description > in its argument names; ties in config order. Each
    result has a "score"; tools that match nothing are left out."""
    scored = []
    for server in _server_info():
        for t in list_tools_sync(server):
            score = _score(str(query), t)
            if score > 0:
                scored.append((score, server, t))
    scored.sort(key=lambda x: -x[0])  # stable: ties stay in config order
    out = []
    for score, server, t in scored[: max(0, int(limit))]:
        d = _doc(server, t, detail)
        d["score"] = score
        out.append(d)
    return out


def _score(query, t):
    q = query.strip().lower()
    qa = alias(q).lower() if q else ""
    name, al = t["name"].lower(), t["alias"].lower()
    score = 0.0
    if q and (q == name or qa == al):
        score += 100
    elif q and (q in name or qa in al):
        score += 50
    name_words = set(_words(t["name"]))
    text_words = set(_words(t.get("title") or "")) | set(_words(t.get("description") or ""))
    args = set()
    props = (t.get("inputSchema") or {}).get("properties") or {}
    for p in props if isinstance(props, dict) else ():
        args |= set(_words(p))
    for w in _words(q):
        if w in name_words:
            score += 10
        elif any(x.startswith(w) for x in name_words):
            score += 5
        if w in text_words:
            score += 3
        elif any(x.startswith(w) for x in text_words):
            score += 1.5
        if w in args:
            score += 1
    return score


async def search_tool_docs(query, limit=5, detail="summary"):
    return await _in_thread(search_tool_docs_sync, query, limit, detail)


def describe_server(name):
    """{name, alias, description, tools: [{name, alias, signature, description}]}."""
    server = _resolve_server(name)
    info = _server_info()
    return {"name": server, "alias": _aliases(tuple(info)).get(server, alias(server)),
            "description": (info.get(server) or {}).get("description") or "",
            "tools": query_tool_docs_sync(server)}


# ------------------------------------------------------------------ calls

def _tool_name(server, tool):
    # An alias works too once the tool list is known; never fetched just for this.
    if server in _tools:
        t = _find_tool(server, tool)
        if t is not None:
            return t["name"]
    return tool


def _call_future(server, tool, args, on_progress):
    server = _resolve_server(server)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise TypeError("arguments must be a dict, not %s" % type(args).__name__)
    params = {"server": server, "name": _tool_name(server, tool), "arguments": args}
    cb = None
    if on_progress is not None:
        params["progress"] = True
        cb = lambda p: on_progress(p.get("progress"), p.get("total"), p.get("message"))  # noqa: E731
    return server, _bridge.get().request("tools/call", params, on_progress=cb)


def _tag(e, server, tool):
    if isinstance(e, MCPError):
        e.server = e.server or server
        e.tool = e.tool or tool
    return e


def call_tool_sync(server, tool, args=None, on_progress=None):
    """Call a tool by its real name; returns the CallToolResult dict. on_progress(progress, total,
    message) is called (from a helper thread) for the server's progress notifications."""
    server, fut = _call_future(server, tool, args, on_progress)
    try:
        return fut.result(_TIMEOUT)
    except MCPError as e:
        raise _tag(e, server, tool) from None


async def call_tool(server, tool, args=None, on_progress=None):
    import asyncio

    if on_progress is not None:
        loop = asyncio.get_running_loop()
        user_cb = on_progress
        on_progress = lambda *a: loop.call_soon_threadsafe(user_cb, *a)  # noqa: E731
    server, fut = _call_future(server, tool, args, on_progress)
    try:
        return await asyncio.wrap_future(fut)
    except MCPError as e:
        raise _tag(e, server, tool) from None


async def _in_thread(fn, *args):
    import asyncio

    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# ------------------------------------------------------------------ proxies

class MCPServerProxy:
    """mcp_<alias>: its attributes are the server's tools as coroutine functions taking keyword
    arguments (`await mcp_everything.echo(message="hi")`)."""

    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = self._name
        t = _find_tool(name, attr)
        if t is None:
            known = ", ".join(x["alias"] for x in list_tools_sync(name))
            raise AttributeError("server `%s` has no tool `%s` (tools: %s)" % (name, attr, known))
        return _tool_function(name, t)

    def __dir__(self):
        try:
            return sorted(t["alias"] for t in list_tools_sync(self._name)) + ["list_tools"]
        except MCPError:
            return ["list_tools"]

    async def list_tools(self):
        return await list_tools(self._name)

    def __repr__(self):
        return "<MCP server %r>" % self._name


def _tool_function(server, t):
    real = t["name"]

    async def tool(**arguments):
        return await call_tool(server, real, arguments)

    tool.__name__ = tool.__qualname__ = t["alias"]
    tool.__doc__ = "%s\n\n%s" % (_signature(t), t.get("description") or "")
    tool.sync = lambda **arguments: call_tool_sync(server, real, arguments)
    return tool


def servers():
    """{name: proxy} for the servers this run may call."""
    return {n: MCPServerProxy(n) for n in _server_names()}


def install(namespace):
    """Define mcp_<alias> for each server and mcp_servers in namespace (a globals() dict)."""
    proxies = servers()
    amap = _aliases(list(proxies))
    for n, p in proxies.items():
        namespace["mcp_" + amap[n]] = p
    namespace["mcp_servers"] = proxies
    return proxies


def capability_summary():
    """A short text on what this run can reach and how to call it."""
    names = _server_names()
    info = _server_info()
    others = [n for n in info if n not in names]
    more = ""
    if others:
        more = "\nOther host MCP servers (list them in run_python's `servers` to call them): %s." % ", ".join(others)
    if not names:
        if not info:
            return "No host MCP servers are configured for this sandbox."
        return "No host MCP servers are available to this run (pass `servers` to run_python)." + more
    amap = _aliases(names)
    lines = ["Host MCP servers available to this run:"]
    for n in names:
        d = (info.get(n) or {}).get("description") or ""
        lines.append("- %s (mcp_%s)%s" % (n, amap[n], ": " + d if d else ""))
    lines.append("Call tools with `await mcp_<alias>.<tool>(arg=...)` or `await runtime.call_tool(server, tool, "
                 "args)`; results are CallToolResult dicts. Discover tools with runtime.query_tool_docs(server) "
                 "and runtime.search_tool_docs(query). Failures raise runtime.MCPError.")
    return "\n".join(lines) + more
