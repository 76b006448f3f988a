"""Runs INSIDE the sandbox: exercises the standard library modules untrusted code relies on and
prints {"module": "ok" | "error text"}. The policy must leave all of these working."""
import json
import sys
import traceback

CHECKS = []


def check(name):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn
    return deco


@check("json")
def _():
    import json as j
    assert j.loads(j.dumps({"a": [1, 2.5, None, "é"]})) == {"a": [1, 2.5, None, "é"]}


@check("statistics")
def _():
    import statistics
    assert statistics.mean([1, 2, 3, 4]) == 2.5 and statistics.median([3, 1, 2]) == 2


@check("threading")
def _():
    import threading
    out = []
    lock = threading.Lock()

    def work(i):
        with lock:
            out.append(i * i)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(out) == [i * i for i in range(8)]


@check("asyncio")
def _():
    import asyncio

    async def handle(reader, writer):
        writer.write((await reader.readline()).upper())
        await writer.drain()
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"hello\n")
        await w.drain()
        line = await asyncio.wait_for(r.readline(), 5)
        w.close()
        server.close()
        await server.wait_closed()
        results_ = await asyncio.gather(asyncio.sleep(0.01, 1), asyncio.to_thread(lambda: 2))
        return line, results_
    line, res = asyncio.run(main())
    assert line == b"HELLO\n" and res == [1, 2], (line, res)


@check("subprocess")
def _():
    import subprocess
    p = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(6*7); sys.exit(5)"],
                       capture_output=True, text=True, timeout=30)
    assert p.stdout.strip() == "42" and p.returncode == 5, p


@check("multiprocessing")
def _():
    import multiprocessing
    with multiprocessing.Pool(2) as pool:
        assert pool.map(abs, [-1, -2, -3, 4]) == [1, 2, 3, 4]
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=q.put, args=("via-queue",))
    p.start()
    assert q.get(timeout=10) == "via-queue"
    p.join(10)
    assert p.exitcode == 0


@check("multiprocessing_spawn")
def _():
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(pow, (2, 10)) == 1024


@check("ctypes")
def _():
    import ctypes
    import os
    libc = ctypes.CDLL(None)
    assert libc.getpid() == os.getpid()
    assert ctypes.c_int(7).value == 7


@check("sqlite3")
def _():
    import sqlite3
    for target in (":memory:", "/tmp/t.db", "/workspace/t.db"):
        db = sqlite3.connect(target)
        db.execute("create table t(x)")
        db.executemany("insert into t values (?)", [(i,) for i in range(100)])
        assert db.execute("select sum(x) from t").fetchone()[0] == 4950
        db.close()


@check("ssl")
def _():
    import ssl
    ctx = ssl.create_default_context()
    assert ctx.cert_store_stats()["x509_ca"] > 0, ctx.cert_store_stats()
    assert ssl.OPENSSL_VERSION


@check("hashlib")
def _():
    import hashlib
    assert hashlib.sha256(b"abc").hexdigest().startswith("ba7816bf")


@check("tempfile")
def _():
    import tempfile
    with tempfile.NamedTemporaryFile() as f:
        f.write(b"x")
        assert f.name.startswith("/tmp/")
    with tempfile.TemporaryDirectory() as d:
        assert d.startswith("/tmp/")


@check("socket_loopback")
def _():
    import socket
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.bind((host, 0))
        srv.listen()
        c = socket.create_connection(srv.getsockname()[:2], timeout=5)
        conn, _ = srv.accept()
        c.sendall(b"ping")
        assert conn.recv(4) == b"ping"
        for s in (c, conn, srv):
            s.close()
    a, b = socket.socketpair()
    a.send(b"x")
    assert b.recv(1) == b"x"


@check("os_basics")
def _():
    import os
    import time
    assert os.getcwd() == "/workspace"
    os.makedirs("/workspace/a/b", exist_ok=True)
    os.rename("/workspace/a/b", "/workspace/a/c")
    os.symlink("/workspace/a/c", "/workspace/link")
    assert os.path.isdir("/workspace/link")
    assert time.time() > 1.6e9


@check("decimal_zlib_lzma")
def _():
    import decimal
    import lzma
    import zlib
    assert str(decimal.Decimal("0.1") + decimal.Decimal("0.2")) == "0.3"
    assert zlib.decompress(zlib.compress(b"x" * 1000)) == b"x" * 1000
    assert lzma.decompress(lzma.compress(b"y" * 1000)) == b"y" * 1000


def main():
    results = {}
    for name, fn in CHECKS:
        try:
            r = fn()
            results[name] = "ok" if r is None or r is True else f"unexpected: {r!r}"
        except BaseException:  # noqa: BLE001
            results[name] = traceback.format_exc(limit=3)[-800:]
    print(json.dumps(results, sort_keys=True))
    sys.exit(0)


# The guard matters: multiprocessing's spawn start method imports this file again in the child.
if __name__ == "__main__":
    main()
