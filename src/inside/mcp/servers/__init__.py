# SPDX-License-Identifier: Apache-2.0
"""`from mcp.servers.<alias> import <tool>`: one module per server this run may call, whose
attributes are its tools as coroutine functions (aliases as in mcp.runtime)."""
import importlib.abc
import importlib.machinery
import sys
import types

from .. import runtime


class _ServerModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(runtime.MCPServerProxy(self.__mcp_server__), attr)

    def __dir__(self):
        return runtime.MCPServerProxy(self.__mcp_server__).__dir__()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        prefix = __name__ + "."
        if not fullname.startswith(prefix) or "." in fullname[len(prefix):]:
            return None
        want = fullname[len(prefix):]
        names = runtime._server_names()
        amap = runtime._aliases(names)
        for n in names:
            if want in (n, amap[n]):
                spec = importlib.machinery.ModuleSpec(fullname, self)
                spec._mcp_server = n
                return spec
        return None

    def create_module(self, spec):
        m = _ServerModule(spec.name)
        m.__mcp_server__ = spec._mcp_server
        return m

    def exec_module(self, module):
        pass


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())


def __getattr__(name):
    names = runtime._server_names()
    amap = runtime._aliases(names)
    for n in names:
        if name in (n, amap[n]):
            import importlib
            return importlib.import_module(__name__ + "." + amap[n])
    raise AttributeError("no server %r is available to this run (servers: %s)" % (name, ", ".join(names)))
