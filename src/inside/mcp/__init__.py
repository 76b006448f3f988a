# SPDX-License-Identifier: Apache-2.0
"""sandboxd's `mcp` package inside the sandbox: host MCP servers through sandboxd's bridge.

`from mcp import runtime` for the helpers (see mcp/runtime.py), `from mcp.servers.<alias> import
<tool>` for tools as coroutine functions. In run_python, mcp_<alias> and mcp_servers are defined
for the servers listed in `servers`; elsewhere (sandboxd exec --config) `from mcp import
mcp_<alias>` or `runtime.install(globals())` gives the same names.
"""


def __getattr__(name):
    # Only names of our own: `runtime` and `servers` are submodules, imported the usual way.
    if name == "mcp_servers" or name.startswith("mcp_"):
        import importlib

        runtime = importlib.import_module(__name__ + ".runtime")
        proxies = runtime.servers()
        if name == "mcp_servers":
            return proxies
        for n, a in runtime._aliases(list(proxies)).items():
            if "mcp_" + a == name:
                return proxies[n]
    raise AttributeError("module 'mcp' has no attribute %r" % name)
