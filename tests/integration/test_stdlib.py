"""The policy leaves the standard library working: tests/probes/stdlib.py exercises asyncio,
threading, subprocess, multiprocessing (fork and spawn), ctypes, sqlite3, ssl, json, statistics,
loopback sockets and more, and reports per module."""
import pytest

import sbx
from sbx import probe

MODULES = ["json", "statistics", "threading", "asyncio", "subprocess", "multiprocessing",
           "multiprocessing_spawn", "ctypes", "sqlite3", "ssl", "hashlib", "tempfile", "socket_loopback",
           "os_basics", "decimal_zlib_lzma"]


@pytest.fixture(scope="module")
def results():
    sbx.require_sandboxd()
    return probe("stdlib", timeout=120)


@pytest.mark.parametrize("module", MODULES)
def test_stdlib_works(results, module):
    assert results.get(module) == "ok", f"{module}:\n{results.get(module)}"


def test_python_version_is_314():
    d = probe("facts")
    assert d["python"]["version"][:2] == [3, 14], d["python"]
