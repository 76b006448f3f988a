// The warm pool (`sandboxd mcp --warm N`): a warm sandbox looks exactly like a cold one from
// inside, serves one call only, starts the call's clock at delivery, can be cancelled, and
// nothing of the pool outlives the server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { connect, processesWith, RawServer, SERVER_ARGS, sleep, sleeperCode, waitGone } from './helpers.mjs';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { stdoutOf } from './output.mjs';

const run = (client, args, opts) => client.callTool({ name: 'run_python', arguments: args }, undefined, opts);
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

// Descendants of pid (sandboxd's sandboxes and their processes), with their command lines.
function descendants(pid) {
  const children = new Map();
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(p));
    } catch { /* gone */ }
  }
  const out = [];
  const walk = (q) => { for (const c of children.get(q) || []) { out.push(c); walk(c); } };
  walk(pid);
  return out.map((p) => {
    try { return { pid: p, cmd: readFileSync(`/proc/${p}/cmdline`, 'latin1').split('\0').filter(Boolean) }; }
    catch { return { pid: p, cmd: [] }; }
  });
}
// Runners: python3 -c RUNNER (no code argument, cold or warm): idle warm ones while no call runs.
const idleWarm = (pid) => descendants(pid).filter((d) => d.cmd.length === 3 && d.cmd[2].includes('_sandboxd_run'));
async function waitPool(pid, n, ms = 10000) {
  // n for 100 ms in a row: a runner that served a call keeps its argv (the job came over a socket)
  // until its sandbox is gone, so a single look can count one that is being killed.
  const until = Date.now() + ms;
  let count = -1, stable = 0;
  while (Date.now() < until && stable < 5) {
    count = idleWarm(pid).length;
    stable = count === n ? stable + 1 : 0;
    if (stable < 5) await sleep(20);
  }
  assert.equal(count, n, 'the warm pool did not fill');
  await sleep(300); // let the runners finish starting (not needed for correctness)
}

// Facts about the sandbox as the code sees them, normalised where two sandboxes always differ
// (mount ids, anonymous device numbers, pipe inodes, the pid namespace).
const PROBE = String.raw`
import sys
# Before the probe's own imports: what the runner loaded before the code (each module costs CPU on
# every call, cold or warm, as long as each call has its own interpreter).
modules = sorted(sys.modules)
import json, os, re, resource, socket
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    if k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters"):
        st[k] = v.split()
mounts = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    sep = f.index("-")
    # tmpfs options name the host uid/gid, which as root is each sandbox's own (host_id_range).
    mounts.append([f[3], f[4], f[5]] + [re.sub(r"\b(uid|gid)=\d+", r"\1=HOST", x) for x in f[sep + 1:]])
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        t = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        continue
    fds[fd] = (t.split(":")[0] if t.startswith(("pipe:", "socket:")) else t, os.get_inheritable(int(fd)))
cmdline = open("/proc/self/cmdline").read().split("\0")
print(json.dumps({
    "uid": [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()],
    "status": st, "mounts": mounts, "fds": fds, "env": dict(os.environ), "hostname": socket.gethostname(),
    "cwd": os.getcwd(), "argv": sys.argv, "path": sys.path, "flags": str(sys.flags), "umask": os.umask(0o22),
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_") and n != "RLIMIT_CPU"},
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "loopback": open("/proc/net/dev").read().count(":"),
    "main": sorted(k for k in globals() if not k.startswith("__") and k != "modules"),
    "modules": modules,
    "_args": len(cmdline) - 1,
}, sort_keys=True))
`;

async function probe(warm) {
  const srv = await connect(['--warm', String(warm), ...PRESTART]);
  try {
    if (warm) await waitPool(srv.transport.pid, warm);
    const r = await run(srv.client, { code: PROBE });
    assert.equal(r.structuredContent.status, 'ok', text(r));
    return JSON.parse(stdoutOf(r));
  } finally {
    await srv.client.close();
  }
}

// The prestart pool, asked for (auto, the default, forks); with --warm-mode fork
// (SANDBOXD_MCP_ARGS) there is none for Python: a forked call's own tests are
// tests/integration/test_mcp_fork.py.
const FORK = SERVER_ARGS.includes('fork');
const PRESTART = FORK ? [] : ['--warm-mode', 'prestart'];
describe('warm pool', { skip: FORK && 'no prestart pool with --warm-mode fork' }, () => {
  test('a warm sandbox is indistinguishable from a cold one from inside', async () => {
    const cold = await probe(0);
    const warm = await probe(2);
    // Not even in how it got its code: neither runner's argv holds it (python3 -c RUNNER).
    assert.equal(cold._args, 3);
    assert.equal(warm._args, 3);
    assert.deepEqual(warm, cold);
    assert.equal(cold.status.NoNewPrivs[0], '1');
    assert.equal(cold.status.Seccomp[0], '2');
    // Stdio, and the runner's done channel (fd 3), which programs the code runs do not inherit.
    assert.deepEqual(Object.keys(cold.fds), ['0', '1', '2', '3']);
    assert.deepEqual(cold.fds['3'], ['socket', false]);
  });

  describe('with --warm 2', () => {
    let conn;
    before(async () => { conn = await connect(['--warm', '2', ...PRESTART]); });
    after(async () => { await conn?.client.close(); });

    test('the capabilities resource gives the pool size', async () => {
      const r = await conn.client.readResource({ uri: 'sandboxd://capabilities' });
      assert.equal(JSON.parse(r.contents[0].text).concurrency.warm_pool, 2);
    });

    test('each call gets its own sandbox: files, globals, processes, namespaces', async () => {
      const seen = new Set();
      for (let i = 0; i < 4; i++) {
        await waitPool(conn.transport.pid, 2);
        const r = await run(conn.client, { code: [
          'import os, subprocess, builtins',
          'print(os.path.exists("/workspace/leak"), os.path.exists("/tmp/leak"), hasattr(builtins, "LEAK"),',
          '      "LEAK2" in globals(), sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))',
          'print(os.stat("/proc/self/ns/pid").st_ino, os.stat("/proc/self/ns/net").st_ino)',
          'open("/workspace/leak", "w").write("x"); open("/tmp/leak", "w").write("x")',
          'builtins.LEAK = 1; LEAK2 = 2',
          'subprocess.Popen(["sleep", "30"], start_new_session=True)',
        ].join('\n') });
        const [first, ns] = stdoutOf(r).split('\n');
        // No file, global or process of an earlier call: a fresh sandbox every time. (Namespace
        // inode numbers are no proof either way: the kernel reuses them once a namespace is freed.)
        assert.equal(first, 'False False False False [1, 2]', text(r));
        assert.ok(ns.split(' ').length === 2, text(r));
        seen.add(ns);
      }
    });

    test('the timeout counts from delivery, not from the warm spawn', async () => {
      await waitPool(conn.transport.pid, 2);
      await sleep(3000); // the warm sandboxes sit idle
      const ok = await run(conn.client, { code: 'import time; time.sleep(1); print("done")', timeout: 2 });
      assert.equal(ok.structuredContent.status, 'ok', text(ok));
      assert.ok(ok.structuredContent.execution_time_ms < 2000, `execution_time_ms ${ok.structuredContent.execution_time_ms}`);
      const slow = await run(conn.client, { code: 'import time; time.sleep(2); print("late")', timeout: 1 });
      assert.equal(slow.structuredContent.status, 'timeout', text(slow));
      assert.equal(stdoutOf(slow), '');
      const ms = slow.structuredContent.execution_time_ms;
      assert.ok(ms >= 900 && ms < 1900, `execution_time_ms ${ms}`);
    });

    test('a call running in a warm sandbox can be cancelled', async () => {
      await waitPool(conn.transport.pid, 2);
      const marker = `warmcancel_${randomUUID().replace(/-/g, '')}`;
      const ac = new AbortController();
      const p = run(conn.client, { code: sleeperCode(marker) }, { signal: ac.signal });
      const until = Date.now() + 5000;
      while (!processesWith(marker).length && Date.now() < until) await sleep(20);
      assert.ok(processesWith(marker).length > 0, 'the code never started');
      ac.abort('test');
      await assert.rejects(p);
      assert.deepEqual(await waitGone(marker), []);
      assert.equal(stdoutOf(await run(conn.client, { code: 'print(3)' })), '3\n');
    });

    test('calls beyond the pool (a burst) start cold and all succeed', async () => {
      const rs = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => run(conn.client, { code: `print(${i})` })));
      rs.forEach((r, i) => assert.equal(stdoutOf(r), `${i}\n`, text(r)));
    });
  });

  test('back-to-back calls wait for the warm sandbox being built instead of starting cold ones', async () => {
    // --warm 1: every call after the first arrives while its replacement is still being built.
    // From inside the two are the same; sandboxd's debug log says which served each call.
    const srv = await connect(['--warm', '1', ...PRESTART]);
    try {
      const kinds = [];
      srv.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
        const m = /its code went to a (\w+) sandbox/.exec(n.params.data);
        if (m) kinds.push(m[1]);
      });
      await srv.client.setLoggingLevel('debug');
      await waitPool(srv.transport.pid, 1);
      for (let i = 0; i < 8; i++) {
        const r = await run(srv.client, { code: 'print(1)' });
        assert.equal(r.structuredContent.status, 'ok', text(r));
      }
      assert.deepEqual(kinds, Array(8).fill('warm'), `sandboxes: ${kinds}`);
    } finally {
      await srv.client.close();
    }
  });

  for (const how of ['EOF', 'SIGTERM']) {
    test(`${how} kills and reaps idle warm sandboxes and running ones`, async () => {
      const srv = new RawServer(['--warm', '2', ...PRESTART]);
      await srv.initialize();
      await waitPool(srv.proc.pid, 2);
      const marker = `warmstop_${randomUUID().replace(/-/g, '')}`;
      await srv.send({ jsonrpc: '2.0', id: 1, method: 'tools/call',
        params: { name: 'run_python', arguments: { code: sleeperCode(marker) } } });
      const until = Date.now() + 5000;
      while (!processesWith(marker).length && Date.now() < until) await sleep(20);
      assert.ok(processesWith(marker).length > 0);
      const before = descendants(srv.proc.pid);
      assert.ok(before.length >= 3, JSON.stringify(before));
      if (how === 'EOF') srv.proc.stdin.end();
      else srv.proc.kill('SIGTERM');
      const { code } = await srv.exit;
      assert.equal(code, 0);
      assert.deepEqual(await waitGone(marker, 1000), []);
      const left = before.filter((d) => { try { readFileSync(`/proc/${d.pid}/stat`); return true; } catch { return false; } });
      assert.deepEqual(left, []);
    });
  }
});
