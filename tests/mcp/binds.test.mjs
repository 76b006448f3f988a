// Host directories in `sandboxd mcp`: --bind/--bind-rw (the same rules as exec) and, with --roots,
// the client's roots read-only under /roots/<name>, driven through the official SDK client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connect, RawServer, SANDBOXD, SERVER_ARGS, sleep } from './helpers.mjs';
import { stdoutOf } from './output.mjs';

assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: run make`);

const run = (client, code) => client.callTool({ name: 'run_python', arguments: { code } });
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
const capabilities = async (client) =>
  JSON.parse((await client.readResource({ uri: 'sandboxd://capabilities' })).contents[0].text);

// Host directories the sandbox (uid 1000, or the caller's own uid unprivileged) can read and write.
const base = mkdtempSync(join(tmpdir(), 'sandboxd-binds-'));
chmodSync(base, 0o755);
after(() => rmSync(base, { recursive: true, force: true }));
function hostDir(name) {
  const d = join(base, name);
  mkdirSync(d, { recursive: true });
  chmodSync(d, 0o777);
  return d;
}

const data = hostDir('data');
writeFileSync(join(data, 'sales.csv'), 'region,amount\nnorth,10\nsouth,32\n');
const out = hostDir('out');

const READ_CSV = `import csv
with open('/data/sales.csv', newline='') as f:
    rows = list(csv.DictReader(f))
print(len(rows), sum(int(r['amount']) for r in rows))`;
const TRY_WRITE = (path) => `import errno
try:
    open(${JSON.stringify(path)}, 'w').write('x')
    print('wrote')
except OSError as e:
    print(errno.errorcode[e.errno])`;

// One line of stderr from `sandboxd exec` with the same options, for comparison.
function execError(args) {
  const r = spawnSync(SANDBOXD, ['exec', ...args, '-c', 'pass'], { encoding: 'utf8', env: process.env });
  return { status: r.status, line: r.stderr.trim() };
}
function mcpError(args) {
  const r = spawnSync(SANDBOXD, [...SERVER_ARGS, ...args], { encoding: 'utf8', input: '', env: process.env });
  return { status: r.status, line: r.stderr.trim() };
}

for (const warm of ['0', '1']) {
  describe(`--bind and --bind-rw (--warm ${warm})`, () => {
    let conn;
    before(async () => {
      conn = await connect(['--warm', warm, '--bind', `${data}:/data`, '--bind-rw', `${out}:/workspace/host-out`]);
    });
    after(async () => {
      await conn?.client.close();
      assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
    });

    test('a CSV in a bound directory is read with the csv module', async () => {
      for (let i = 0; i < 2; i++) { // the first sandbox and the next (warm, if the pool is on)
        const r = await run(conn.client, READ_CSV);
        assert.equal(r.isError, false, text(r));
        assert.equal(stdoutOf(r), '2 42\n');
      }
    });

    test('--bind is read-only: writing fails with EROFS', async () => {
      const r = await run(conn.client, TRY_WRITE('/data/new.txt'));
      assert.equal(stdoutOf(r), 'EROFS\n');
      assert.equal(existsSync(join(data, 'new.txt')), false);
    });

    test('--bind-rw writes reach the host', async () => {
      const name = `w${warm}.txt`;
      const r = await run(conn.client, `open('/workspace/host-out/${name}', 'w').write('hello ${warm}')`);
      assert.equal(r.isError, false, text(r));
      assert.equal(readFileSync(join(out, name), 'utf8'), `hello ${warm}`);
    });

    test('the tool description names each directory in a few words', async () => {
      const { tools } = await conn.client.listTools();
      assert.match(tools[0].description, /\/data: host directory, read-only; \/workspace\/host-out: host directory, writable\./);
      assert.doesNotMatch(tools[0].description, /No host files/);
      assert.doesNotMatch(tools[0].description, new RegExp(base)); // never the host path
    });

    test('the capabilities resource lists destinations, not host paths', async () => {
      const caps = await capabilities(conn.client);
      assert.deepEqual(caps.binds, [
        { destination: '/data', writable: false },
        { destination: '/workspace/host-out', writable: true },
      ]);
      assert.equal(caps.roots.enabled, false);
      assert.doesNotMatch(JSON.stringify(caps), new RegExp(base));
    });
  });
}

describe('--bind refusals are exec\'s', () => {
  const cases = [
    ['--bind', 'nocolon'],
    ['--bind-rw', `${data}:`],
    ['--bind', `${data}:relative`],
    ['--bind', `${data}:/`],
    ['--bind', `${data}:/workspace/../etc`],
    ['--bind', `${join(base, 'missing')}:/data`],
    Array.from({ length: 33 }, () => ['--bind', `${data}:/data`]).flat(),
  ];
  for (const args of cases) {
    test(`${args.slice(0, 2).join(' ')}${args.length > 2 ? ' (x33)' : ''}: exit 125, one line, as exec`, () => {
      const m = mcpError(args), e = execError(args);
      assert.equal(m.status, 125, m.line);
      assert.equal(e.status, 125, e.line);
      assert.equal(m.line.split('\n').length, 1, m.line);
      assert.equal(m.line, e.line);
    });
  }

  test('a destination the read-only rootfs lacks: the call fails with exec\'s message', async () => {
    const e = execError(['--bind', `${data}:/usr/nonexistent-dir`]);
    assert.equal(e.status, 125, e.line);
    const msg = e.line.replace(/^sandboxd: (error: )?/, '');
    if (SERVER_ARGS.includes('fork')) { // --warm-mode fork builds its template at start: it fails there
      const m = mcpError(['--bind', `${data}:/usr/nonexistent-dir`]);
      assert.equal(m.status, 125, m.line);
      assert.ok(m.line.includes(msg), `${m.line} lacks ${msg}`);
      return;
    }
    const conn = await connect(['--warm', '0', '--bind', `${data}:/usr/nonexistent-dir`]);
    try {
      const r = await run(conn.client, 'print(1)');
      assert.equal(r.isError, true);
      assert.ok(text(r).includes(msg), `${text(r)} lacks ${msg}`);
    } finally {
      await conn.client.close();
    }
  });

  test('with --roots, a bind at or under /roots is refused', () => {
    for (const dst of ['/roots', '/roots/x']) {
      const m = mcpError(['--roots', '--bind', `${data}:${dst}`]);
      assert.equal(m.status, 125, m.line);
      assert.match(m.line, /with --roots, DST must not be \/roots or below it/);
    }
  });
});

// A client that has roots (as Claude Code does): answers roots/list with roots(), counts the asks.
async function rootsClient(args, roots) {
  const transport = new StdioClientTransport({
    command: SANDBOXD, args: [...SERVER_ARGS, ...args], env: { ...process.env }, stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'roots-tests', version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
  const state = { asks: 0, roots, waiters: [] };
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    state.asks++;
    const answer = { roots: state.roots() };
    setTimeout(() => { for (const w of state.waiters.splice(0)) w(); }, 50); // after our answer is sent
    return answer;
  });
  state.asked = (n) => new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`roots/list asked ${state.asks} times, not ${n}`)), 10000);
    const check = () => (state.asks >= n ? (clearTimeout(t), setTimeout(res, 50)) : state.waiters.push(check));
    check();
  });
  await client.connect(transport);
  return { client, state, stderr: () => stderr };
}

const LIST_ROOTS = `import os
print(sorted(os.listdir('/roots')) if os.path.isdir('/roots') else None)`;

describe('--roots', () => {
  const proj = hostDir('a/proj');
  writeFileSync(join(proj, 'notes.txt'), 'from the client');
  const proj2 = hostDir('b/proj');
  const other = hostDir('other dir!');

  for (const warm of ['0', '2']) {
    test(`the client's roots are read-only at /roots/<name>, and follow list_changed (--warm ${warm})`,
      async () => {
        let roots = [{ uri: pathToFileURL(proj).href, name: 'p' }, { uri: pathToFileURL(proj2).href }];
        const c = await rootsClient(['--roots', '--warm', warm], () => roots);
        try {
          await c.state.asked(1);
          let r = await run(c.client, LIST_ROOTS);
          assert.equal(stdoutOf(r), "['proj', 'proj-2']\n", text(r));
          r = await run(c.client, `print(open('/roots/proj/notes.txt').read())`);
          assert.equal(stdoutOf(r), 'from the client\n');
          r = await run(c.client, TRY_WRITE('/roots/proj/x'));
          assert.equal(stdoutOf(r), 'EROFS\n');
          const caps = await capabilities(c.client);
          assert.equal(caps.roots.enabled, true);
          assert.equal(caps.roots.client_supports, true);
          assert.deepEqual(caps.roots.mounted.map((m) => m.destination),
            ['/roots/proj', '/roots/proj-2']);
          assert.doesNotMatch(JSON.stringify(caps), new RegExp(base));
          const { tools } = await c.client.listTools();
          assert.match(tools[0].description, /\/roots\/<name>: the client's roots, read-only/);

          roots = [{ uri: pathToFileURL(other).href }];
          await c.client.sendRootsListChanged();
          await c.state.asked(2);
          // Every later sandbox, warm ones included: each call takes a fresh one.
          for (let i = 0; i < 3; i++) {
            r = await run(c.client, LIST_ROOTS);
            assert.equal(stdoutOf(r), "['other_dir_']\n", text(r));
          }
        } finally {
          await c.client.close();
        }
        assert.doesNotMatch(c.stderr(), /Sanitizer|runtime error/);
      });
  }

  test('hostile roots are skipped with a log line, and at most 32 are bound', async () => {
    const file = join(base, 'plain-file');
    writeFileSync(file, 'x');
    const link = join(base, 'link-to-proj');
    rmSync(link, { force: true });
    symlinkSync(proj, link);
    const hostile = [
      'https://example.com/x', 'file:relative', 'file://otherhost/tmp', `file://${proj}/../proj`,
      `file://${proj}%00x`, `file://${base}%2Fa%2Fproj`, `file://${proj}?q`, 'file:///', 'file:///a%zz',
      pathToFileURL(link).href, pathToFileURL(file).href, pathToFileURL(join(base, 'missing')).href,
      `file://${proj}\nforged log line`,
      ...Array.from({ length: 10 }, (_, i) => pathToFileURL(join(base, `missing-${i}`)).href),
    ];
    const many = Array.from({ length: 1000 }, (_, i) => {
      if (i < 40) return { uri: pathToFileURL(hostDir(`many/r${i}`)).href };
      return { uri: pathToFileURL(proj).href }; // duplicates: skipped
    });
    const c = await rootsClient(['--roots', '--warm', '0'], () => [...hostile.map((uri) => ({ uri })), ...many]);
    try {
      await c.state.asked(1);
      const r = await run(c.client, LIST_ROOTS);
      const names = JSON.parse(stdoutOf(r).replace(/'/g, '"'));
      assert.equal(names.length, 32, stdoutOf(r));
      assert.ok(names.every((n) => /^r\d+$/.test(n)), stdoutOf(r));
      const err = c.stderr();
      for (const why of ['not a file:// URI', 'not a local file', '`.`, `..` or an empty component',
        'an escaped NUL or slash', 'a query or fragment', "the host's / is never bound", 'a bad percent-escape',
        'a symbolic link', 'not a directory', 'no such directory', 'only the first 32', 'more roots skipped'])
        assert.ok(err.includes(why), `stderr lacks "${why}":\n${err.slice(0, 3000)}`);
      assert.doesNotMatch(err, /\nforged log line/);
    } finally {
      await c.client.close();
    }
  });

  test('of a longer list only the first 256 entries are looked at', async () => {
    const ok = hostDir('examined/ok');
    const late = hostDir('examined/late');
    const list = Array.from({ length: 300 }, (_, i) => ({ uri: pathToFileURL(join(base, `absent-${i}`)).href }));
    list[10] = { uri: pathToFileURL(ok).href };
    list[299] = { uri: pathToFileURL(late).href };
    const c = await rootsClient(['--roots', '--warm', '0'], () => list);
    try {
      await c.state.asked(1);
      const r = await run(c.client, LIST_ROOTS);
      assert.equal(stdoutOf(r), "['ok']\n", text(r));
      assert.match(c.stderr(), /300 roots; only the first 32 usable ones \(of the first 256\) are bound/);
      assert.match(c.stderr(), /roots\/list: 239 more roots skipped/); // 255 of the 256 looked at, 16 logged
    } finally {
      await c.client.close();
    }
  });

  test('an unanswered roots/list is given up after 10 s; list_changed then asks again', { timeout: 30000 },
    async () => {
      const s = new RawServer(['--roots', '--warm', '0']);
      try {
        await s.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
          params: { protocolVersion: '2025-06-18', clientInfo: { name: 'raw', version: '1' },
            capabilities: { roots: {} } } });
        await s.reply('init');
        await s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        const first = await s.next((m) => m.method === 'roots/list');
        await sleep(5000);
        await s.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
        assert.ok(await s.alive('before'));
        assert.ok(!s.lines.some((l) => JSON.parse(l).method === 'roots/list'), 'asked again within 10 s');
        await sleep(5500);
        await s.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
        const again = await s.next((m) => m.method === 'roots/list', 5000);
        assert.notEqual(again.id, first.id);
        assert.match(s.stderr, /the client did not answer roots\/list within 10s/);
      } finally {
        await s.close();
      }
    });

  test('a client without the roots capability is never asked; nor is one without --roots', async () => {
    for (const args of [['--roots'], []]) {
      const s = new RawServer([...args, '--warm', '0']);
      try {
        await s.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
          params: { protocolVersion: '2025-06-18', clientInfo: { name: 'raw', version: '1' },
            capabilities: args.length ? {} : { roots: { listChanged: true } } } });
        await s.reply('init');
        await s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        await s.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
        assert.ok(await s.alive('roots'));
        await sleep(200);
        assert.ok(!s.lines.some((l) => JSON.parse(l).method === 'roots/list'), s.lines.join('\n'));
      } finally {
        await s.close();
      }
    }
  });

  test('a client that never answers roots/list does not stall calls; answers to no request are ignored',
    async () => {
      const s = new RawServer(['--roots', '--warm', '0']);
      try {
        await s.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
          params: { protocolVersion: '2025-06-18', clientInfo: { name: 'raw', version: '1' },
            capabilities: { roots: {} } } });
        await s.reply('init');
        await s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        const ask = await s.next((m) => m.method === 'roots/list');
        assert.ok(typeof ask.id === 'string' || typeof ask.id === 'number');
        // A second list_changed while the first is unanswered: no second request yet.
        await s.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
        await s.send({ jsonrpc: '2.0', id: 'nobody-asked', result: { roots: [{ uri: pathToFileURL(proj).href }] } });
        const t0 = Date.now();
        await s.send({ jsonrpc: '2.0', id: 'c1', method: 'tools/call',
          params: { name: 'run_python', arguments: { code: LIST_ROOTS } } });
        const r = await s.reply('c1');
        assert.ok(Date.now() - t0 < 5000);
        assert.equal(stdoutOf(r.result), 'None\n');
        assert.equal(s.lines.filter((l) => JSON.parse(l).method === 'roots/list').length, 0);
        // The answer, late: the asked-again request follows it, and its answer is what counts.
        await s.send({ jsonrpc: '2.0', id: ask.id, result: { roots: [{ uri: pathToFileURL(proj2).href }] } });
        const again = await s.next((m) => m.method === 'roots/list');
        assert.notEqual(again.id, ask.id);
        await s.send({ jsonrpc: '2.0', id: again.id, result: { roots: [{ uri: pathToFileURL(other).href }] } });
        await s.send({ jsonrpc: '2.0', id: 'c2', method: 'tools/call',
          params: { name: 'run_python', arguments: { code: LIST_ROOTS } } });
        assert.equal(stdoutOf((await s.reply('c2')).result), "['other_dir_']\n");
      } finally {
        await s.close();
      }
      assert.doesNotMatch(s.stderr, /Sanitizer|runtime error/);
    });
});
