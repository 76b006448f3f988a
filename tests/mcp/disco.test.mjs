// Code of any size (up to --max-message-size, on the cold and the warm path alike: the code comes
// on fd 3, never in argv) and discovery of host MCP servers in every run (from mcp import runtime
// with or without `servers`; calls still need the server listed). Host servers: fixtures/toolserver.py.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, REPO, SANDBOXD, waitGone } from './helpers.mjs';
import { stdoutOf } from './output.mjs';

assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: run make`);

// Close a server and check it reported no sanitizer error (ASan runs of the suite) on the way.
async function close(conn) {
  await conn?.client.close();
  assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
}
const run = (client, args, opts) => client.callTool({ name: 'run_python', arguments: args }, undefined, opts);
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
const lastJson = (r) => {
  assert.equal(r.structuredContent?.status, 'ok', text(r));
  return JSON.parse(stdoutOf(r).trim().split('\n').pop());
};

// Python source of about `bytes` bytes (a string literal), that prints its length and sha256: the
// runner got every byte.
function bigCode(bytes) {
  const filler = 'abcdefghij'.repeat(Math.ceil(bytes / 10)).slice(0, bytes - 120);
  const code = `s = "${filler}"\nimport hashlib\nprint(len(s), hashlib.sha256(s.encode()).hexdigest())\n`;
  return { code, expect: `${filler.length} ${createHash('sha256').update(filler).digest('hex')}\n` };
}

// Two host servers, in this config order: alpha, whose `convert` only has an argument named
// `weather`, then beta, whose tool is named `weather`.
const dir = mkdtempSync(join(tmpdir(), 'sbx-disco-'));
chmodSync(dir, 0o755);
const started = join(dir, 'started');
const tools = {
  alpha: [
    { name: 'convert', description: 'Convert between units', inputSchema: { type: 'object', properties: { weather: { type: 'string' } } } },
    { name: 'forecast', title: 'Weather forecast', description: 'Days ahead for a city', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } },
  ],
  beta: [
    { name: 'weather', description: 'Current conditions', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } },
    { name: 'get_weather_now', description: 'Now', inputSchema: { type: 'object' } },
  ],
};
const config = join(dir, 'servers.json');
const servers = {};
for (const [name, list] of Object.entries(tools)) {
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(list));
  servers[name] = {
    command: 'python3',
    args: [join(REPO, 'tests/mcp/fixtures/toolserver.py'), join(dir, `${name}.json`), started],
    description: name === 'alpha' ? 'Alpha: unit conversions' : 'Beta: the weather',
  };
}
writeFileSync(config, JSON.stringify({ mcpServers: servers }));
const empty = join(dir, 'none.json');
writeFileSync(empty, JSON.stringify({ mcpServers: {} }));
after(() => rmSync(dir, { recursive: true, force: true }));

for (const warm of [0, 2]) {
  describe(`code of any size, --warm ${warm}`, () => {
    let conn;
    before(async () => { conn = await connect(['--warm', String(warm), '--config', empty]); });
    after(() => close(conn));

    test('1 MiB of code runs whole (argv took at most 128 KiB)', async () => {
      const { code, expect } = bigCode(1 << 20);
      const r = await run(conn.client, { code });
      assert.equal(r.structuredContent?.status, 'ok', text(r).slice(0, 500));
      assert.equal(stdoutOf(r), expect);
    });

    test('code up to the message limit runs; just over it is refused clearly, and the server goes on', async () => {
      const { code, expect } = bigCode((4 << 20) - 1024);
      const r = await run(conn.client, { code });
      assert.equal(stdoutOf(r), expect, text(r).slice(0, 500));
      const over = bigCode(4 << 20);
      await assert.rejects(run(conn.client, { code: over.code }, { timeout: 15000 }),
        (e) => e instanceof McpError && e.code === -32600 && /message larger than the limit of 4194304 bytes/.test(e.message));
      assert.equal(stdoutOf(await run(conn.client, { code: 'print(1)' })), '1\n');
    });
  });
}

test('--max-message-size bounds the code: a call just over it is refused, one under it runs', async () => {
  const conn = await connect(['--warm', '0', '--max-message-size', '64K', '--config', empty]);
  try {
    const { code, expect } = bigCode(60 * 1024);
    assert.equal(stdoutOf(await run(conn.client, { code })), expect);
    await assert.rejects(run(conn.client, { code: bigCode(64 * 1024).code }, { timeout: 15000 }),
      (e) => e instanceof McpError && /larger than the limit of 65536 bytes/.test(e.message));
    const { contents } = await conn.client.readResource({ uri: 'sandboxd://capabilities' });
    assert.equal(JSON.parse(contents[0].text).concurrency.max_code_bytes, 65536);
  } finally {
    await close(conn);
  }
});

test('the code of the calls held at once is bounded: 16 times --max-message-size', async () => {
  // 64K messages: at most 1 MiB of code running and queued. One call runs (it sleeps), 16 of 62 KiB
  // wait behind it; the 17th would pass the bound and is refused, not queued.
  const conn = await connect(['--warm', '0', '--max-concurrent', '1', '--max-message-size', '64K', '--config', empty]);
  try {
    const nap = 'import time; time.sleep(2); print("slept")';
    const sleeper = run(conn.client, { code: nap });
    const { code, expect } = bigCode(62 * 1024);
    const queued = Array.from({ length: 16 }, () => run(conn.client, { code }));
    const refused = await run(conn.client, { code });
    assert.equal(refused.isError, true);
    assert.equal(text(refused), `sandboxd is busy: the calls running and queued hold ${code.length * 16 + nap.length} bytes of code, ` +
      `and this one (${code.length} bytes) would pass the limit of 1048576; try again later`);
    assert.equal(stdoutOf(await sleeper), 'slept\n');
    for (const r of await Promise.all(queued)) assert.equal(stdoutOf(r), expect);
    // Given back as the calls end: the same call is taken now.
    assert.equal(stdoutOf(await run(conn.client, { code })), expect);
  } finally {
    await close(conn);
  }
});

const DISCOVER = `
import json
from mcp import runtime
out = {"servers_env": __import__("os").environ.get("SANDBOXD_MCP_SERVERS")}
out["names"] = runtime.discovered_servers()
out["detailed"] = runtime.discovered_servers(detailed=True)
out["search"] = [[x["server"], x["name"]] for x in await runtime.search_tool_docs("weather", limit=10)]
out["query"] = [x["name"] for x in await runtime.query_tool_docs("beta")]
out["query_one"] = runtime.query_tool_docs_sync("alpha", "convert")["signature"]
out["summary"] = runtime.capability_summary()
try:
    out["call"] = runtime.call_tool_sync("beta", "weather", {"city": "Oslo"})["content"][0]["text"]
except runtime.MCPError as e:
    out["call_error"] = str(e)
print(json.dumps(out))`;

for (const warm of [0, 2]) {
  describe(`discovery in every run, --warm ${warm}`, () => {
    let conn;
    before(async () => { conn = await connect(['--warm', String(warm), '--config', config]); });
    after(() => close(conn));

    test('without `servers`: every configured server, its tools, ranked search; calls refused', async () => {
      const o = lastJson(await run(conn.client, { code: DISCOVER }));
      assert.equal(o.servers_env, '');
      assert.deepEqual(o.names, ['alpha', 'beta']);
      assert.deepEqual(o.detailed, [
        { name: 'alpha', alias: 'alpha', description: 'Alpha: unit conversions', callable: false },
        { name: 'beta', alias: 'beta', description: 'Beta: the weather', callable: false },
      ]);
      // The name match first, though alpha comes first in the config; then a name that contains
      // the word, then a title word, and the argument-only match last.
      assert.deepEqual(o.search, [['beta', 'weather'], ['beta', 'get_weather_now'], ['alpha', 'forecast'], ['alpha', 'convert']]);
      assert.deepEqual(o.query, ['weather', 'get_weather_now']);
      assert.equal(o.query_one, 'convert(weather: string = ...)');
      assert.match(o.summary, /list them in run_python's `servers` to call them\): alpha, beta/);
      assert.equal(o.call, undefined);
      assert.equal(o.call_error, 'server `beta` is not available to this run (list it in `servers`)');
    });

    test('with `servers`: the listed one is callable, the other still discoverable only', async () => {
      const o = lastJson(await run(conn.client, { code: DISCOVER, servers: ['beta'] }));
      assert.equal(o.servers_env, 'beta');
      assert.deepEqual(o.detailed.map((s) => [s.name, s.callable]), [['alpha', false], ['beta', true]]);
      assert.equal(o.search[0].join('.'), 'beta.weather');
      assert.equal(o.call, '["weather", {"city": "Oslo"}]');
      const a = lastJson(await run(conn.client, { code: `
import json
from mcp import runtime
try:
    runtime.call_tool_sync("alpha", "convert", {})
except runtime.MCPError as e:
    print(json.dumps(str(e)))`, servers: ['beta'] }));
      assert.equal(a, 'server `alpha` is not available to this run (list it in `servers`)');
    });

    test('an unconfigured server is unknown to discovery too', async () => {
      const o = lastJson(await run(conn.client, { code: `
import json
from mcp import runtime
try:
    runtime.query_tool_docs_sync("gamma")
except runtime.MCPError as e:
    print(json.dumps(str(e)))` }));
      assert.equal(o, 'server `gamma` is not configured, or the policy does not allow it');
    });

    test('the run still ends at its done frame on the bridge: code that sends one is cut short', async () => {
      const marker = `sbx-disco-done-${randomUUID()}`;
      const t0 = Date.now();
      const r = await run(conn.client, { code: [
        'import os, subprocess, time',
        `subprocess.Popen(["python3", "-c", "import time; time.sleep(60)", "${marker}"], start_new_session=True)`,
        'print("before", flush=True)',
        'body = b\'{"jsonrpc":"2.0","method":"sandboxd/done","params":{"status":7}}\'',
        'os.write(3, len(body).to_bytes(4, "big") + body)  # what the runner sends when the run is over',
        'time.sleep(30)',
        'print("after")',
      ].join('\n') });
      assert.ok(Date.now() - t0 < 15000, `answered after ${Date.now() - t0} ms, not at the done frame`);
      assert.equal(r.structuredContent.status, 'error');
      assert.equal(r.structuredContent.exit_code, 7, text(r));
      assert.equal(stdoutOf(r), 'before\n');
      assert.deepEqual(await waitGone(marker), [], 'a process outlived the answered run');
    });
  });
}

test('the policy bounds discovery: proxy_servers none leaves nothing to discover and no bridge', async () => {
  const conn = await connect(['--warm', '0', '--config', config, '--policy', 'strict']);
  try {
    const o = lastJson(await run(conn.client, { code: `
import json, os
from mcp import runtime
print(json.dumps([runtime.discovered_servers(), runtime.search_tool_docs_sync("weather"), "SANDBOXD_MCP_SERVERS" in os.environ]))` }));
    assert.deepEqual(o, [[], [], false]);
  } finally {
    await close(conn);
  }
});

test('the policy bounds discovery: a server proxy_servers leaves out is neither discovered nor started', async () => {
  // The default policy, allowing beta only.
  const pdir = join(dir, 'policy');
  mkdirSync(pdir);
  const policies = process.env.SANDBOXD_POLICY_DIR || join(REPO, 'policy');
  for (const f of ['default.policy', 'syscalls.inc']) {
    let t = readFileSync(join(policies, f), 'utf8');
    if (f === 'default.policy') t = t.replace(/^proxy_servers \*$/m, 'proxy_servers beta');
    writeFileSync(join(pdir, f), t);
  }
  rmSync(started, { force: true });
  const conn = await connect(['--warm', '0', '--config', config, '--policy', join(pdir, 'default.policy')]);
  try {
    const o = lastJson(await run(conn.client, { code: `
import json
from mcp import runtime
out = [runtime.discovered_servers(), [x["server"] for x in runtime.search_tool_docs_sync("weather", limit=10)]]
try:
    runtime.query_tool_docs_sync("alpha")
except runtime.MCPError as e:
    out.append(str(e))
print(json.dumps(out))` }));
    assert.deepEqual(o, [['beta'], ['beta', 'beta'], 'server `alpha` is not configured, or the policy does not allow it']);
    assert.deepEqual(readFileSync(started, 'utf8').trim().split('\n'), [join(dir, 'beta.json')]);
  } finally {
    await close(conn);
  }
});

for (const warm of [0, 2]) {
  test(`no host servers configured, --warm ${warm}: the package imports, discovery is empty, no bridge`, async () => {
    const conn = await connect(['--warm', String(warm), '--config', empty]);
    try {
      const o = lastJson(await run(conn.client, { code: `
import json, os
from mcp import runtime
out = [runtime.discovered_servers(), runtime.discovered_servers(detailed=True), runtime.search_tool_docs_sync("weather"),
       runtime.capability_summary(), "SANDBOXD_MCP_SERVERS" in os.environ, os.get_inheritable(3), os.environ.get("PYTHONPATH")]
for f in (lambda: runtime.query_tool_docs_sync("beta"), lambda: runtime.call_tool_sync("beta", "weather", {})):
    try:
        f()
    except runtime.MCPError as e:
        out.append(str(e))
print(json.dumps(out))` }));
      assert.deepEqual(o, [[], [], [], 'No host MCP servers are configured for this sandbox.', false, false, '/run/sandboxd/python',
        'no host MCP servers are configured for this sandbox (see sandboxd-mcp(7))',
        'no host MCP servers are configured for this sandbox (see sandboxd-mcp(7))']);
    } finally {
      await close(conn);
    }
  });
}
