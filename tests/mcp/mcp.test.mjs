// sandboxd mcp, driven through the official MCP TypeScript SDK client (and raw bytes where the
// SDK would refuse to send something).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, processesWith, RawServer, SANDBOXD, sleep, sleeperCode, waitGone } from './helpers.mjs';
import { stderrOf, stdoutOf } from './output.mjs';

assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: run make`);

const run = (client, args, opts) => client.callTool({ name: 'run_python', arguments: args }, undefined, opts);
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

describe('sdk client', () => {
  let conn;
  before(async () => { conn = await connect(); });
  after(async () => {
    await conn?.client.close();
    assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
  });

  test('initialize: server info, capabilities, latest version', () => {
    const info = conn.client.getServerVersion();
    assert.equal(info.name, 'sandboxd');
    assert.match(info.version, /^\d+\.\d+/);
    const caps = conn.client.getServerCapabilities();
    assert.ok(caps.tools);
    assert.ok(caps.resources);
    assert.ok(caps.logging);
  });

  test('tools/list: run_python with schemas, title, annotations', async () => {
    const { tools } = await conn.client.listTools();
    // execute.test.mjs: the second; test_mcp_sessions.py: the session tools
    assert.deepEqual(tools.map((x) => x.name), ['run_python', 'execute_code', 'session_start', 'session_end']);
    const t = tools[0];
    assert.ok(t.title);
    assert.deepEqual(t.inputSchema.required, ['code']);
    assert.equal(t.inputSchema.properties.code.type, 'string');
    assert.equal(t.inputSchema.properties.servers.type, 'array');
    assert.equal(t.inputSchema.properties.timeout.type, 'integer');
    assert.equal(t.outputSchema.type, 'object');
    assert.ok(t.annotations);
    assert.match(t.description, /await mcp_<server>\.<tool>/);
    assert.match(t.description, /from mcp import runtime/);
    // about 200 tokens at most: ~4 characters a token
    assert.ok(t.description.length < 800, `description is ${t.description.length} chars`);
  });

  test('run_python print(1)', async () => {
    const r = await run(conn.client, { code: 'print(1)' });
    assert.equal(r.isError, false);
    assert.equal(text(r), '1\n');
    const s = r.structuredContent;
    assert.equal(s.status, 'ok');
    assert.equal(s.exit_code, 0);
    assert.equal(s.stdout_bytes, 2);
    assert.equal(s.stderr_bytes, 0);
    assert.equal(s.replaced_bytes, 0);
    assert.equal(s.stdout, '1\n'); // the same shaped text as the text block
    assert.equal(s.stderr, '');
    assert.equal(s.cut_characters, 0);
    assert.equal(s.truncated, false);
    assert.equal(typeof s.execution_time_ms, 'number');
    assert.equal(typeof s.memory_peak_bytes, 'number');
    assert.ok(['cgroup2', 'cgroup1', 'degraded'].includes(s.limits), `limits: ${s.limits}`);
  });

  test('state isolation: files, globals and processes do not carry over', async () => {
    const first = await run(conn.client, { code: [
      'import subprocess, os',
      'open("/workspace/leak.txt", "w").write("x")',
      'open("/tmp/leak.txt", "w").write("x")',
      'import builtins; builtins.LEAK = 1',
      'LEAK2 = 2',
      'subprocess.Popen(["sleep", "30"], start_new_session=True)',
      'print("planted")',
    ].join('\n') });
    assert.equal(stdoutOf(first), 'planted\n', text(first));
    const second = await run(conn.client, { code: [
      'import os, builtins',
      'print(os.path.exists("/workspace/leak.txt"), os.path.exists("/tmp/leak.txt"),',
      '      hasattr(builtins, "LEAK"), "LEAK2" in globals())',
      'print(sorted(p for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/comm").read().strip() == "sleep"))',
    ].join('\n') });
    assert.equal(stdoutOf(second), 'False False False False\n[]\n', text(second));
  });

  test('an exception: isError, status error, traceback on stderr', async () => {
    const r = await run(conn.client, { code: 'def f():\n    raise ValueError("boom")\nf()' });
    assert.equal(r.isError, true);
    const s = r.structuredContent;
    assert.equal(s.status, 'error');
    assert.equal(s.exit_code, 1);
    assert.match(stderrOf(r), /Traceback/);
    assert.match(stderrOf(r), /File "<run_python>", line 2, in f/);
    assert.match(stderrOf(r), /ValueError: boom/);
    assert.doesNotMatch(stderrOf(r), /_sandboxd_run|asyncio/);
    assert.match(text(r), /--- stderr ---\n/);
    assert.match(text(r), /status: error, exit code 1/);
  });

  test('sys.exit(3) is an error with exit code 3', async () => {
    const r = await run(conn.client, { code: 'import sys; print("bye"); sys.exit(3)' });
    assert.equal(r.structuredContent.status, 'error');
    assert.equal(r.structuredContent.exit_code, 3);
    assert.equal(stdoutOf(r), 'bye\n');
  });

  test('the run ends at the runner\'s done byte on fd 3; code that writes it itself is cut short', async () => {
    const marker = `sbx-done-${randomUUID()}`;
    const t0 = Date.now();
    const r = await run(conn.client, { code: [
      'import os, subprocess, time',
      `subprocess.Popen(["python3", "-c", "import time; time.sleep(60)", "${marker}"], start_new_session=True)`,
      'print("before", flush=True)',
      'os.write(3, bytes([7]))  # what the runner writes when the run is over: exit status 7',
      'time.sleep(30)',
      'print("after")',
    ].join('\n') });
    assert.ok(Date.now() - t0 < 15000, `answered after ${Date.now() - t0} ms, not at the done byte`);
    assert.equal(r.structuredContent.exit_code, 7, text(r));
    assert.equal(r.structuredContent.status, 'error');
    assert.equal(stdoutOf(r), 'before\n');
    // The sandbox is killed at the done byte: nothing the code started outlives the answer.
    assert.deepEqual(await waitGone(marker), [], 'a process outlived the answered run');
  });

  test('code that closes fd 3 ends normally, when it exits', async () => {
    const r = await run(conn.client, { code: 'import os, sys\nos.close(3)\nprint("closed")\nsys.exit(4)' });
    assert.equal(stdoutOf(r), 'closed\n', text(r));
    assert.equal(r.structuredContent.exit_code, 4);
  });

  test('output written by atexit handlers and threads before the end is all there', async () => {
    const r = await run(conn.client, { code: [
      'import atexit, sys, threading, time',
      'atexit.register(lambda: print("atexit", "y" * 100000))',
      'def late(): time.sleep(0.2); print("thread done", file=sys.stderr)',
      'threading.Thread(target=late).start()',
      'print("main")',
    ].join('\n') });
    // More than a pipe holds; all of it counted, its head and tail shown (--text-limit).
    assert.equal(r.structuredContent.stdout_bytes, 'main\natexit '.length + 100000 + 1, text(r).slice(0, 300));
    assert.equal(r.structuredContent.truncated, false);
    assert.ok(stdoutOf(r).startsWith('main\natexit yyy') && stdoutOf(r).endsWith('yyy\n'));
    assert.equal(stderrOf(r), 'thread done\n');
    assert.equal(r.structuredContent.status, 'ok');
  });

  test('top-level await', async () => {
    const r = await run(conn.client, { code: 'import asyncio\nawait asyncio.sleep(0.01)\nprint(await asyncio.gather(asyncio.sleep(0, 1), asyncio.sleep(0, 2)))' });
    assert.equal(stdoutOf(r), '[1, 2]\n', text(r));
  });

  test('bad arguments are isError results, not protocol errors', async () => {
    for (const args of [{}, { code: '' }, { code: '   \n' }, { code: 5 }, { code: ['print(1)'] },
      { code: 'print(1)', timeout: 'x' }, { code: 'print(1)', timeout: 0 }, { code: 'print(1)', timeout: 1.5 },
      { code: 'print(1)', servers: 'x' }, { code: 'print(1)', servers: [1] }]) {
      const r = await run(conn.client, args);
      assert.equal(r.isError, true, JSON.stringify(args));
      assert.ok(text(r).length > 0);
      assert.equal(r.structuredContent, undefined);
    }
  });

  test('unknown tool is -32602', async () => {
    await assert.rejects(conn.client.callTool({ name: 'nope', arguments: {} }),
      (e) => e instanceof McpError && e.code === -32602);
  });

  test('timeout: killed at the (clamped) limit, status timeout', async () => {
    const t0 = Date.now();
    const r = await run(conn.client, { code: 'import time\nprint("start")\ntime.sleep(60)', timeout: 1 });
    const took = Date.now() - t0;
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.status, 'timeout');
    assert.equal(r.structuredContent.exit_code, 124);
    assert.equal(stdoutOf(r), 'start\n'); // printed before the kill
    assert.ok(took >= 900 && took < 5000, `took ${took} ms`);
    assert.match(text(r), /timeout/);
  });

  test('timeout above the policy maximum is clamped, not refused', async () => {
    const r = await run(conn.client, { code: 'print(2)', timeout: 10 ** 9 });
    assert.equal(stdoutOf(r), '2\n', text(r));
  });

  test('cancellation kills the sandbox and leaves no process behind', async () => {
    const marker = `cancel_${randomUUID().replace(/-/g, '')}`;
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

  test('progress notifications about once a second', async () => {
    const seen = [];
    const r = await run(conn.client, { code: 'import time; time.sleep(2.6); print("done")' }, {
      onprogress: (p) => seen.push(p),
      resetTimeoutOnProgress: true,
    });
    assert.equal(stdoutOf(r), 'done\n');
    assert.ok(seen.length >= 2 && seen.length <= 4, `${seen.length} notifications`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
  });

  test('four concurrent calls run in parallel', async () => {
    const t0 = Date.now();
    const rs = await Promise.all([0, 1, 2, 3].map((i) =>
      run(conn.client, { code: `import time; time.sleep(1.5); print(${i})` })));
    const took = Date.now() - t0;
    rs.forEach((r, i) => assert.equal(stdoutOf(r), `${i}\n`));
    assert.ok(took < 1500 * 2, `took ${took} ms: not concurrent`);
  });

  test('more calls than --max-concurrent queue and all finish', async () => {
    const rs = await Promise.all([...Array(7).keys()].map((i) =>
      run(conn.client, { code: `print(${i} * 2)` })));
    rs.forEach((r, i) => assert.equal(stdoutOf(r), `${i * 2}\n`));
  });

  test('ping is answered promptly during a long call', async () => {
    const long = run(conn.client, { code: 'import time; time.sleep(2); print("ok")' });
    await sleep(300);
    const t0 = Date.now();
    await conn.client.ping();
    assert.ok(Date.now() - t0 < 300, `ping took ${Date.now() - t0} ms`);
    assert.equal(stdoutOf(await long), 'ok\n');
  });

  test('output: 30 KB line intact, invalid UTF-8 replaced, cap at 1 MiB', async () => {
    const line = await run(conn.client, { code: 'print("x" * 30000)' });
    assert.equal(stdoutOf(line), 'x'.repeat(30000) + '\n');
    assert.equal(text(line), 'x'.repeat(30000) + '\n');
    assert.equal(line.structuredContent.truncated, false);
    assert.equal(line.structuredContent.cut_characters, 0);
    const bad = await run(conn.client, { code: 'import sys; sys.stdout.buffer.write(b"a\\xff\\xfeb\\xc3\\n")' });
    assert.equal(stdoutOf(bad), 'a\ufffdb\ufffd\n');
    assert.equal(bad.structuredContent.replaced_bytes, 3);
    const big = await run(conn.client, { code: 'import sys\nfor i in range(300): sys.stdout.write("é" * 4000 + "\\n")\nprint("tail", file=sys.stderr)' });
    const s = big.structuredContent;
    assert.equal(s.truncated, true);
    assert.equal(s.status, 'ok');
    assert.equal(s.stdout_bytes, 300 * 8001, 'the whole output, not what was captured');
    assert.equal(s.stderr_bytes, 5);
    assert.equal(s.stderr, 'tail\n');
    assert.equal(s.replaced_bytes, 0, 'cut in the middle of a character');
    assert.ok(!text(big).includes('\ufffd'), 'cut in the middle of a character');
    // Where the capture dropped bytes (output_limit, both streams together), with how many.
    const dropped = 300 * 8001 - (1024 * 1024 - 5);
    assert.match(text(big), new RegExp(`\\n--- \\d+ characters and (${dropped}|${dropped + 1}) bytes of stdout cut here \\(text limit 40000, output_limit 1 MiB\\); write large results to files in /workspace/out ---\\n`));
  });

  test('output shaped for the model: 5 MiB becomes head, one line, tail within 40,000 characters', async () => {
    // Each stream keeps its head and its tail (output_limit, 1 MiB, for both together; a
    // stream that stays small leaves the rest to the other), whatever the order they arrive in.
    const code = 'import sys\nprint("E" * 100000, file=sys.stderr)\n' +
      'print("FIRST")\n' +
      'for i in range(5 * 1024):\n    sys.stdout.write(f"{i:07d} " + "y" * 1015 + "\\n")\nprint("LAST")';
    const r = await run(conn.client, { code });
    const s = r.structuredContent;
    const t = text(r);
    assert.ok([...t].length <= 40000, `text is ${[...t].length} characters`);
    assert.ok(t.startsWith('FIRST\n'));
    // stdout's head, the line where it was cut (for the text, and at capture), its real end; then
    // the head and tail of stderr.
    const dropped = 6 + 5 * 1024 * 1024 + 5 - (1024 * 1024 - 100001);
    assert.match(s.stdout, new RegExp(`^FIRST\\n[\\s\\S]*\\n--- \\d+ characters and ${dropped} bytes of stdout cut here \\(text limit 40000, output_limit 1 MiB\\); write large results to files in /workspace/out ---\\n[\\s\\S]*y\\nLAST\\n$`));
    assert.match(s.stderr, /^E+\n--- \d+ characters of stderr cut here[^\n]*---\nE+\n$/);
    assert.equal(s.stdout_bytes, 6 + 5 * 1024 * 1024 + 5);
    assert.equal(s.stderr_bytes, 100001);
    assert.equal(s.truncated, true);
    assert.ok(s.cut_characters > 1000000 - 40000, `${s.cut_characters}`);
    // The text block is the same shaped streams, not another copy of the output.
    assert.ok(t.startsWith(s.stdout) && t.includes('--- stderr ---\n' + s.stderr));
    const shown = [...s.stdout].length + [...s.stderr].length;
    assert.ok(shown <= 40000 && shown > 38000, `${shown}`);
  });

  test('--text-limit: a smaller budget, and a bad value refused', async () => {
    const small = await connect(['--text-limit', '2000', '--warm', '0']);
    try {
      const r = await run(small.client, { code: 'print("z" * 10000)' });
      const t = text(r);
      assert.ok([...t].length <= 2000, `${[...t].length}`);
      assert.match(t, /--- \d+ characters of stdout cut here \(text limit 2000\)/);
      assert.equal(r.structuredContent.truncated, false, 'cut for the model, not at the output limit');
    } finally {
      await small.client.close();
    }
    for (const bad of ['999', '10000001', 'x']) {
      const p = spawnSync(SANDBOXD, ['mcp', '--text-limit', bad], { input: '', encoding: 'utf8' });
      assert.equal(p.status, 125);
      assert.match(p.stderr, /--text-limit `[^`]*`: expected a whole number from 1000 to 10000000/);
      assert.equal(p.stderr.trim().split('\n').length, 1);
    }
  });

  test('capabilities resource', async () => {
    const { resources } = await conn.client.listResources();
    assert.ok(resources.some((r) => r.uri === 'sandboxd://capabilities'));
    const { contents } = await conn.client.readResource({ uri: 'sandboxd://capabilities' });
    const caps = JSON.parse(contents[0].text);
    assert.equal(caps.policy.name, 'default');
    assert.equal(caps.limits.output_bytes, 1 << 20);
    assert.ok(caps.max_limits.timeout_ms >= caps.limits.timeout_ms);
    assert.equal(caps.concurrency.max_concurrent, 4);
    await assert.rejects(conn.client.readResource({ uri: 'sandboxd://nope' }),
      (e) => e instanceof McpError && e.code === -32002);
  });

  test('logging/setLevel', async () => {
    await conn.client.setLoggingLevel('info');
  });
});

describe('raw protocol', () => {
  let srv;
  before(async () => { srv = new RawServer(); });
  after(async () => {
    assert.equal((await srv?.close())?.code, 0);
    assert.doesNotMatch(srv?.stderr ?? '', /Sanitizer|runtime error/);
  });

  test('version negotiation', async () => {
    for (const [asked, got] of [['2025-11-25', '2025-11-25'], ['2025-06-18', '2025-06-18'],
      ['2025-03-26', '2025-03-26'], ['2024-11-05', '2024-11-05'], ['2024-10-07', '2025-11-25'],
      ['1999-01-01', '2025-11-25']]) {
      const r = await srv.initialize(asked);
      assert.equal(r.result.protocolVersion, got, asked);
      assert.equal(r.result.serverInfo.name, 'sandboxd');
    }
  });

  test('server/discover (2026-07-28) needs its _meta; unknown methods: -32601', async () => {
    await srv.send({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: {} });
    assert.equal((await srv.reply(1)).error.code, -32602);
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    await srv.send({ jsonrpc: '2.0', id: 3, method: 'server/discover', params: { _meta: meta } });
    assert.ok((await srv.reply(3)).result.supportedVersions.includes('2025-11-25'));
    await srv.send({ jsonrpc: '2.0', id: 2, method: 'prompts/list' });
    assert.equal((await srv.reply(2)).error.code, -32601);
    // An unknown notification is not answered.
    await srv.send({ jsonrpc: '2.0', method: 'notifications/whatever' });
    assert.ok(await srv.alive('notif'));
    assert.equal(srv.lines.length, 0);
  });

  test('every id form is echoed exactly', async () => {
    const ids = [0, -1, 1, 2 ** 53 - 1, '', '0', 'abc', 'é ☃ 𝄞', 'a"b\\c\n', ' 1'];
    for (const id of ids) {
      await srv.send({ jsonrpc: '2.0', id, method: 'ping' });
      const r = await srv.reply(id);
      assert.deepEqual(r, { jsonrpc: '2.0', id, result: {} });
    }
    // Numbers as written by other JSON encoders.
    await srv.write('{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"}\n');
    const big = await srv.next((m) => m.id !== undefined && typeof m.id === 'number' && m.id > 1e20);
    assert.deepEqual(big.result, {});
  });

  test('garbage, truncated JSON, wrong types: errors, and the server keeps serving', async () => {
    const cases = [
      ['garbage', -32700], ['{"jsonrpc":"2.0","id":1,"method":"pi', -32700], ['{', -32700], ['}', -32700],
      ['\x00\x01\x02', -32700], ['\xff\xfe\xfd', -32700], ['[]', -32600], ['[1,2]', -32600],
      ['{"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1}', -32700], ['"str"', -32600], ['42', -32600],
      ['null', -32600], ['{}', -32600], ['{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600],
      ['{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600],
      ['{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600],
      ['{"jsonrpc":"1.0","id":7,"method":"ping"}', -32600, 7],
      ['{"id":8,"method":"ping"}', -32600, 8],
      ['{"jsonrpc":"2.0","id":9,"method":5}', -32600, 9],
      ['{"jsonrpc":"2.0","id":10,"method":"ping","params":3}', -32600, 10],
      ['{"jsonrpc":"2.0","id":11,"method":"tools/call","params":[1]}', -32602, 11],
      ['{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":5}}', -32602, 12],
      ['{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{}}', -32602, 13],
      ['{"jsonrpc":"2.0","id":14,"method":"resources/read","params":{"uri":5}}', -32602, 14],
      ['{"jsonrpc":"2.0","id":15,"method":"logging/setLevel","params":{"level":"loud"}}', -32602, 15],
      ['[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]', -32700],
      ['[' .repeat(100000), -32700],
      ['{"jsonrpc":"2.0","id":16,"method":"ping","extra":"\\ud800"}', null, 16],
    ];
    for (const [input, code, id = null] of cases) {
      await srv.write(Buffer.concat([Buffer.from(input, 'latin1'), Buffer.from('\n')]));
      const r = await srv.next(() => true, 5000);
      if (code === null) {
        assert.deepEqual(r.result, {}, input);
      } else {
        assert.equal(r.error?.code, code, `${input.slice(0, 60)} -> ${JSON.stringify(r)}`);
        assert.equal(r.id, id, input.slice(0, 60));
      }
      assert.ok(await srv.alive(input.slice(0, 10)), input.slice(0, 60));
    }
  });

  test('tools/call with wrong argument types: isError results', async () => {
    for (const [i, args] of [[{ code: 1 }], [{ code: null }], ['a string'], [[1]], [null]].entries()) {
      await srv.send({ jsonrpc: '2.0', id: `w${i}`, method: 'tools/call', params: { name: 'run_python', arguments: args[0] } });
      const r = await srv.reply(`w${i}`);
      assert.equal(r.result?.isError, true, JSON.stringify(r));
    }
    await srv.write('{"jsonrpc":"2.0","id":"nul","method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)\\u0000"}}}\n');
    assert.equal((await srv.reply('nul')).result.isError, true);
  });

  test('blank lines, CRLF, several messages in one write, one message split across writes', async () => {
    await srv.write('\n\r\n   \n{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n{"jsonrpc":"2.0","id":"two","method":"ping"}\n');
    // A ping's answer is an empty result: an error reply with the same id is a failure.
    assert.deepEqual((await srv.reply('crlf')).result, {});
    assert.deepEqual((await srv.reply('two')).result, {});
    const msg = '{"jsonrpc":"2.0","id":"split","method":"ping"}\n';
    for (const ch of msg) { await srv.write(ch); }
    assert.deepEqual((await srv.reply('split')).result, {});
  });

  test('huge lines: an error (with the id when it comes first), never a crash', async () => {
    const pad = 'x'.repeat(5 * 1024 * 1024);
    await srv.write(`{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"run_python","arguments":{"code":"#${pad}"}}}\n`);
    const r = await srv.reply('huge', 20000);
    assert.equal(r.error.code, -32600);
    assert.ok(await srv.alive('huge'));
    await srv.write(`{"pad":"${pad}","jsonrpc":"2.0","id":"late","method":"ping"}\n`);
    const r2 = await srv.next(() => true, 20000);
    assert.equal(r2.error.code, -32600);
    assert.equal(r2.id, null);
    assert.ok(await srv.alive('late'));
    // Just under the default 4 MiB limit is accepted.
    const ok = 'y'.repeat(4 * 1024 * 1024 - 200);
    await srv.write(`{"jsonrpc":"2.0","id":"big-ok","method":"ping","params":{"_meta":{"pad":"${ok}"}}}\n`);
    assert.deepEqual((await srv.reply('big-ok', 20000)).result, {});
  });

  test('responses from the client are ignored', async () => {
    await srv.send({ jsonrpc: '2.0', id: 99, result: {} });
    await srv.send({ jsonrpc: '2.0', id: 98, error: { code: 1, message: 'x' } });
    assert.ok(await srv.alive('responses'));
    assert.equal(srv.lines.length, 0);
  });

  test('cancelled calls get no response', async () => {
    const marker = `rawcancel_${randomUUID().replace(/-/g, '')}`;
    await srv.send({ jsonrpc: '2.0', id: 'c1', method: 'tools/call',
      params: { name: 'run_python', arguments: { code: sleeperCode(marker) } } });
    const until = Date.now() + 5000;
    while (!processesWith(marker).length && Date.now() < until) await sleep(20);
    await srv.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'c1', reason: 'test' } });
    assert.deepEqual(await waitGone(marker), []);
    // unknown ids are ignored
    await srv.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'never' } });
    await sleep(300);
    assert.ok(await srv.alive('cancel'));
    assert.ok(!srv.lines.some((l) => JSON.parse(l).id === 'c1'), 'a cancelled call was answered');
  });

  test('a duplicate in-flight id is refused', async () => {
    const call = { jsonrpc: '2.0', id: 'dup', method: 'tools/call',
      params: { name: 'run_python', arguments: { code: 'import time; time.sleep(1); print(1)' } } };
    await srv.send(call);
    await srv.send(call);
    const first = await srv.reply('dup');
    assert.equal(first.error.code, -32600);
    const second = await srv.reply('dup');
    assert.equal(stdoutOf(second.result), '1\n');
  });
});

describe('queue', () => {
  test('with --max-concurrent 1 calls queue; a queued call can be cancelled', async () => {
    const srv = new RawServer(['--max-concurrent', '1']);
    await srv.initialize();
    const call = (id, code, meta) => srv.send({ jsonrpc: '2.0', id, method: 'tools/call',
      params: { name: 'run_python', arguments: { code }, ...(meta ? { _meta: meta } : {}) } });
    const t0 = Date.now();
    await call('q1', 'import time; time.sleep(1.2); print("q1")');
    await call('q2', 'print("q2")', { progressToken: 'tok-q2' });
    await call('q3', 'print("q3")');
    await srv.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'q2' } });
    assert.equal(stdoutOf((await srv.reply('q1')).result), 'q1\n');
    assert.equal(stdoutOf((await srv.reply('q3')).result), 'q3\n');
    assert.ok(Date.now() - t0 >= 1200);
    await sleep(200);
    assert.ok(!srv.lines.some((l) => JSON.parse(l).id === 'q2'), 'a cancelled call was answered');
    assert.equal((await srv.close()).code, 0);
  });

  test('progress is sent while queued too', async () => {
    const srv = new RawServer(['--max-concurrent', '1']);
    await srv.initialize();
    await srv.send({ jsonrpc: '2.0', id: 'a', method: 'tools/call',
      params: { name: 'run_python', arguments: { code: 'import time; time.sleep(1.5)' } } });
    await srv.send({ jsonrpc: '2.0', id: 'b', method: 'tools/call',
      params: { name: 'run_python', arguments: { code: 'print(1)' }, _meta: { progressToken: 7 } } });
    const p = await srv.next((m) => m.method === 'notifications/progress', 3000);
    assert.equal(p.params.progressToken, 7);
    assert.match(p.params.message, /queued/);
    // Both calls ran: an error result (a sandbox that failed to start) is no answer to wait for.
    assert.equal((await srv.reply('a', 5000)).result?.structuredContent?.status, 'ok');
    const b = await srv.reply('b', 5000);
    assert.equal(stdoutOf(b.result), '1\n', JSON.stringify(b));
    await srv.close();
  });
});

describe('shutdown', () => {
  test('EOF on stdin kills running sandboxes and exits 0', async () => {
    const marker = `eof_${randomUUID().replace(/-/g, '')}`;
    const srv = new RawServer();
    await srv.initialize();
    await srv.send({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'run_python', arguments: { code: sleeperCode(marker) } } });
    const until = Date.now() + 5000;
    while (!processesWith(marker).length && Date.now() < until) await sleep(20);
    assert.ok(processesWith(marker).length > 0);
    const t0 = Date.now();
    const { code } = await srv.close();
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 < 3000);
    assert.deepEqual(await waitGone(marker, 1000), []);
  });

  test('SIGTERM kills running sandboxes and exits 0', async () => {
    const marker = `term_${randomUUID().replace(/-/g, '')}`;
    const srv = new RawServer();
    await srv.initialize();
    await srv.send({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'run_python', arguments: { code: sleeperCode(marker) } } });
    const until = Date.now() + 5000;
    while (!processesWith(marker).length && Date.now() < until) await sleep(20);
    assert.ok(processesWith(marker).length > 0, 'the code never started');
    srv.proc.kill('SIGTERM');
    const { code } = await srv.exit;
    assert.equal(code, 0);
    assert.deepEqual(await waitGone(marker, 1000), []);
  });

  test('requests answered before EOF are flushed', async () => {
    const srv = new RawServer();
    await srv.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0","id":2,"method":"tools/list"}');
    const { code } = await srv.close();
    assert.equal(code, 0);
    assert.equal(srv.lines.length, 2);
    assert.equal(JSON.parse(srv.lines[1]).result.tools[0].name, 'run_python');
  });

  test('bad options: exit 125 and a message on stderr', async () => {
    const srv = new RawServer(['--max-concurrent', '0']);
    const { code } = await srv.exit;
    assert.equal(code, 125);
    assert.match(srv.stderr, /--max-concurrent/);
  });
});
