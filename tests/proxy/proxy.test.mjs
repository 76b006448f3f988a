// The MCP proxy: code inside run_python calls real host MCP servers through sandboxd's bridge.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  auditRecords, CONFIG, connect, ENV, execSandboxd, HERE, lastJson, processesWith, run, SANDBOXD, SCRATCH, sleep, stdoutOf,
  text,
} from './helpers.mjs';

assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: run make`);

describe('proxy through sandboxd mcp', () => {
  let conn;
  before(async () => { conn = await connect(); });
  after(async () => {
    await conn?.client.close();
    assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
  });

  test('tools/list and the capabilities resource name the configured servers', async () => {
    const { tools } = await conn.client.listTools();
    assert.match(tools[0].description, /Servers: everything, memory\./);
    assert.ok(tools[0].description.length < 900);
    const { contents } = await conn.client.readResource({ uri: 'sandboxd://capabilities' });
    const caps = JSON.parse(contents[0].text);
    assert.deepEqual(caps.servers.map((s) => s.name), ['everything', 'memory']);
    assert.match(caps.servers[1].description, /knowledge graph/);
  });

  test('echo, get-sum and get-structured-content', async () => {
    const r = await run(conn.client, `
import json
a = await mcp_everything.echo(message="héllo")
b = await runtime.call_tool("everything", "get-sum", {"a": 2, "b": 40}) if False else await mcp_everything.get_sum(a=2, b=40)
c = await mcp_everything.get_structured_content(location="Chicago")
print(json.dumps([a, b, c]))`);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const [a, b, c] = lastJson(r);
    assert.deepEqual(a, { content: [{ type: 'text', text: 'Echo: héllo' }] });
    assert.match(b.content[0].text, /42/);
    assert.equal(typeof c.structuredContent.temperature, 'number');
    assert.ok(c.structuredContent.conditions);
  });

  test('trigger-long-running-operation: progress reaches the code and the MCP client', async () => {
    // Every progress notification as it arrives on the wire. The SDK's onprogress misses one that
    // arrives in the same read as the response: it runs notification handlers a microtask later,
    // after the response has removed the call's progress handler (a busy machine shows it).
    const seen = [];
    const onmessage = conn.transport.onmessage;
    conn.transport.onmessage = (m, extra) => {
      if (m.method === 'notifications/progress') seen.push(m.params);
      return onmessage(m, extra);
    };
    const r = await run(conn.client, `
import json
from mcp import runtime
steps = []
res = await runtime.call_tool("everything", "trigger-long-running-operation", {"duration": 1, "steps": 4},
                              on_progress=lambda p, t, m: steps.append([p, t]))
print(json.dumps({"steps": steps, "res": res}))`, ['everything'], {
      onprogress: () => {},
      resetTimeoutOnProgress: true,
    }).finally(() => { conn.transport.onmessage = onmessage; });
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const { steps, res } = lastJson(r);
    assert.deepEqual(steps, [[1, 4], [2, 4], [3, 4], [4, 4]]);
    assert.match(res.content[0].text, /completed/);
    assert.ok(seen.some((p) => /everything\.trigger-long-running-operation: 4\/4/.test(p.message ?? '')),
      JSON.stringify(seen));
  });

  test('server-memory keeps its state on the host across fresh sandboxes', async () => {
    const name = `entity-${Date.now()}`;
    const r1 = await run(conn.client, `
await mcp_memory.create_entities(entities=[{"name": "${name}", "entityType": "test", "observations": ["made in sandbox 1"]}])
import os; open("/tmp/left-behind", "w").write("x")
print("created")`, ['memory']);
    assert.equal(r1.structuredContent.status, 'ok', text(r1));
    const r2 = await run(conn.client, `
import json, os
g = await mcp_memory.read_graph()
print(os.path.exists("/tmp/left-behind"))
print(json.dumps(g))`, ['memory']);
    assert.equal(r2.structuredContent.status, 'ok', text(r2));
    assert.match(stdoutOf(r2), /^False\n/); // the sandbox itself is fresh
    const g = lastJson(r2);
    assert.match(JSON.stringify(g.structuredContent ?? g.content), new RegExp(name));
    assert.match(readFileSync(ENV.MEMORY_FILE_PATH, 'utf8'), new RegExp(name));
  });

  test('a server not listed in `servers` raises a catchable MCPError', async () => {
    const r = await run(conn.client, `
from mcp import runtime
try:
    await runtime.call_tool("memory", "read_graph", {})
except runtime.MCPError as e:
    print("caught:", e.code, e.server, e)
print("unlisted proxy exists:", "mcp_memory" in globals())`, ['everything']);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    assert.match(stdoutOf(r), /caught: -32602 memory server `memory` is not available to this run/);
    assert.match(stdoutOf(r), /unlisted proxy exists: False/);
    const bad = await run(conn.client, 'print(1)', ['nope']);
    assert.equal(bad.isError, true);
    assert.match(text(bad), /unknown server `nope`: configured servers: everything, memory/);
  });

  test('a 1.5 MB tool result arrives intact, built from three requests of 500 KB', async () => {
    const tag = `big-${Date.now()}`;
    const r = await run(conn.client, `
import json
from mcp import runtime
obs = ["".join(chr(0x41 + (i * 7 + k) % 26) for i in range(100_000)) for k in range(15)]
for k in range(3):
    await mcp_memory.create_entities(entities=[{"name": f"${tag}-{k}", "entityType": "blob",
                                                "observations": obs[5 * k:5 * k + 5]}])
g = await mcp_memory.read_graph()
raw = g["content"][0]["text"]
graph = g.get("structuredContent") or json.loads(raw)
mine = {e["name"]: e["observations"] for e in graph["entities"] if e["name"].startswith("${tag}")}
print(json.dumps({"big": len(raw) > 1_500_000, "ok": [mine.get(f"${tag}-{k}") for k in range(3)] == [obs[5 * k:5 * k + 5] for k in range(3)]}))`,
    ['everything', 'memory']);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const o = lastJson(r);
    assert.equal(o.big, true);
    assert.equal(o.ok, true);
  });

  // A tool argument of ordinary size (a CSV handed to a write tool): up to the policy's
  // proxy_request_limit, 16 MiB in the default policy; above it the package refuses at once.
  // The TypeScript SDK's stdio transport reads at most 10 MiB a message (server-everything exits
  // past that), so the 10 MB argument is mostly ASCII: 1.3% more as JSON.
  test('a 1.5 MB and a 10 MB argument are echoed intact; 17 MiB is refused', async () => {
    const r = await run(conn.client, `
import json, time
from mcp import runtime
unit = "".join(chr(c) for c in range(32, 127)) + 'é"\\\\ü\\n\\t€\\u2028𝄞😀' + "a" * 890
out = []
for n in (1_500_000, 10_000_000):
    s = (unit * (n // len(unit) + 1))[:n]
    t0 = time.monotonic()
    back = (await mcp_everything.echo(message=s))["content"][0]["text"]
    out.append([n, back == "Echo: " + s, len(back), round((time.monotonic() - t0) * 1000)])
try:
    await mcp_everything.echo(message="x" * (17 << 20))
    out.append(None)
except runtime.MCPError as e:
    out.append([e.code, str(e)])
print(json.dumps(out))`, ['everything']);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const [small, big, refused] = lastJson(r);
    console.log(`echo of 1.5 MB: ${small[3]} ms; of 10 MB: ${big[3]} ms`);
    assert.deepEqual(small.slice(0, 3), [1500000, true, 1500006]);
    assert.deepEqual(big.slice(0, 3), [10000000, true, 10000006]);
    assert.equal(refused[0], -32002);
    assert.match(refused[1], /above the bridge's limit of 16777216 bytes/);
  });

  test('a host server killed mid-call: the caller gets an error, the next call works', async () => {
    const call = run(conn.client, `
import json
from mcp import runtime
out = {}
try:
    await mcp_everything.trigger_long_running_operation(duration=5, steps=5)
    out["first"] = "finished?"
except runtime.MCPError as e:
    out["first"] = str(e)
out["second"] = (await mcp_everything.echo(message="again"))["content"][0]["text"]
print(json.dumps(out))`, ['everything']);
    let pids = [];
    for (let i = 0; i < 50 && !pids.length; i++) {
      await sleep(100);
      pids = processesWith('server-everything/dist/index.js');
    }
    assert.ok(pids.length, 'the everything server is running');
    await sleep(500);
    for (const pid of pids) {
      try { process.kill(pid, 'SIGKILL'); } catch (e) { if (e.code !== 'ESRCH') throw e; } // gone already
    }
    const r = await call;
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const out = lastJson(r);
    assert.match(out.first, /host MCP server `everything` (was killed by signal 9|closed its stdout)/);
    assert.equal(out.second, 'Echo: again');
  });

  test('malformed frames over the raw fd 3 fail themselves only', async () => {
    const r = await run(conn.client, `
import json, socket, struct
s = socket.socket(fileno=3)
def send(b): s.sendall(struct.pack(">I", len(b)) + b)
def recv():
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(s.recv(n, socket.MSG_WAITALL))
answers = []
send(b"not json"); answers.append(recv())
send(b"[1,2,3]"); answers.append(recv())
send(b'{"id": 7}'); answers.append(recv())
send(b'{"id": 8, "method": "tools/call", "params": {"server": 5}}'); answers.append(recv())
send(b'{"id": 9, "method": "no/such"}'); answers.append(recv())
send(b"\\xff\\xfe{"); answers.append(recv())
s.sendall(struct.pack(">I", 17 << 20) + bytes(17 << 20)); answers.append(recv())
req = b'{"id":10,"method":"servers/list","params":{}}'
whole = struct.pack(">I", len(req)) + req
s.sendall(whole[:2]); s.sendall(whole[2:9]); s.sendall(whole[9:])  # a frame split across writes
answers.append(recv())
send(json.dumps({"id": 11, "method": "tools/call", "params": {"server": "everything", "name": "echo", "arguments": {"message": "still here"}}}).encode())
answers.append(recv())
print(json.dumps(answers))`, ['everything']);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const a = lastJson(r);
    assert.equal(a.length, 9);
    for (const e of a.slice(0, 7)) assert.ok(e.error && typeof e.error.message === 'string', JSON.stringify(e));
    assert.equal(a[0].error.code, -32700);
    assert.equal(a[2].id, 7);
    assert.equal(a[3].id, 8);
    assert.equal(a[4].error.code, -32601);
    assert.match(a[6].error.message, /above the bridge's limit/);
    assert.equal(a[7].id, 10);
    // Discovery lists every configured server; only the run's own are callable.
    assert.deepEqual(a[7].result.servers.map((s) => [s.name, s.callable]), [['everything', true], ['memory', false]]);
    assert.equal(a[8].result.content[0].text, 'Echo: still here');
    assert.ok(await conn.client.ping());
    const again = await run(conn.client, 'print((await mcp_everything.echo(message="ok"))["content"][0]["text"])', ['everything']);
    assert.equal(stdoutOf(again), 'Echo: ok\n');
  });

  test('100 proxied calls in one run_python', async () => {
    const r = await run(conn.client, `
import json, time
await mcp_everything.echo(message="warm")
t0 = time.perf_counter()
for i in range(100):
    res = await mcp_everything.get_sum(a=i, b=1)
    assert str(i + 1) in res["content"][0]["text"], res
seq = time.perf_counter() - t0
import asyncio
t0 = time.perf_counter()
rs = await asyncio.gather(*(mcp_everything.echo(message=str(i)) for i in range(100)))
assert [x["content"][0]["text"] for x in rs] == ["Echo: %d" % i for i in range(100)]
par = time.perf_counter() - t0
print(json.dumps({"sequential_s": seq, "gather_s": par}))`, ['everything']);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const t = lastJson(r);
    console.log(`100 sequential proxied calls: ${(t.sequential_s * 1000).toFixed(0)} ms; 100 gathered: ${(t.gather_s * 1000).toFixed(0)} ms`);
    assert.ok(t.sequential_s < 3, `took ${t.sequential_s} s`);
  });

  test('every runtime helper works', async () => {
    const r = await run(conn.client, `
import json
from mcp import runtime
from mcp.servers.everything import get_sum
import mcp.servers.memory as mem
out = {}
out["discovered"] = runtime.discovered_servers()
out["detailed"] = runtime.discovered_servers(detailed=True)
out["list_servers"] = await runtime.list_servers()
out["list_servers_sync"] = runtime.list_servers_sync()
out["tools"] = sorted(t["name"] for t in await runtime.list_tools("everything"))
out["tools_sync"] = sorted(t["alias"] for t in runtime.list_tools_sync("everything"))
out["describe"] = runtime.describe_server("memory")
out["doc_summary"] = await runtime.query_tool_docs("everything", "get-sum")
out["doc_full"] = await runtime.query_tool_docs("everything", "get_sum", detail="full")
out["doc_all"] = len(await runtime.query_tool_docs("memory"))
out["search"] = [(x["server"], x["name"]) for x in await runtime.search_tool_docs("sum of two numbers", limit=3)]
out["search_memory"] = [x["name"] for x in runtime.search_tool_docs_sync("create entities", limit=2)]
out["summary"] = runtime.capability_summary()
out["from_import"] = (await get_sum(a=1, b=1))["content"][0]["text"]
out["module_attr"] = (await mem.read_graph())["content"][0]["type"]
out["mcp_servers"] = sorted(mcp_servers)
out["alias"] = [runtime.alias(n) for n in ["get-sum", "my.server", "2fa", "class", "ok_name"]]
try:
    mcp_everything.no_such_tool
except AttributeError as e:
    out["missing"] = str(e)
out["dir"] = "get_sum" in dir(mcp_everything)
out["sync"] = mcp_everything.echo.sync(message="s")["content"][0]["text"]
out["proxy_list"] = len(await mcp_everything.list_tools()) > 5
print(json.dumps(out))`);
    assert.equal(r.structuredContent.status, 'ok', text(r));
    const o = lastJson(r);
    assert.deepEqual(o.discovered, ['everything', 'memory']);
    assert.equal(o.detailed[1].alias, 'memory');
    assert.match(o.detailed[0].description, /reference test server/);
    assert.deepEqual(o.list_servers, ['everything', 'memory']);
    assert.deepEqual(o.list_servers_sync, ['everything', 'memory']);
    assert.ok(o.tools.includes('get-sum') && o.tools.includes('echo'));
    assert.ok(o.tools_sync.includes('get_sum') && o.tools_sync.includes('trigger_long_running_operation'));
    assert.equal(o.describe.name, 'memory');
    assert.ok(o.describe.tools.some((t) => t.name === 'create_entities'));
    assert.equal(o.doc_summary.alias, 'get_sum');
    assert.match(o.doc_summary.signature, /^get_sum\(a: number, b: number\)$/);
    assert.ok(o.doc_full.inputSchema.properties.a);
    assert.ok(o.doc_all >= 5);
    assert.deepEqual(o.search[0], ['everything', 'get-sum']);
    assert.equal(o.search_memory[0], 'create_entities');
    assert.match(o.summary, /mcp_everything/);
    assert.match(o.from_import, /2/);
    assert.equal(o.module_attr, 'text');
    assert.deepEqual(o.mcp_servers, ['everything', 'memory']);
    assert.deepEqual(o.alias, ['get_sum', 'my_server', '_2fa', 'class_', 'ok_name']);
    assert.match(o.missing, /has no tool `no_such_tool`/);
    assert.equal(o.dir, true);
    assert.equal(o.sync, 'Echo: s');
    assert.equal(o.proxy_list, true);
  });

  test('without servers: no mcp globals, and a bridge for discovery only', async () => {
    const r = await run(conn.client, 'import os\nprint("mcp_everything" in globals(), repr(os.environ.get("SANDBOXD_MCP_SERVERS")))', []);
    assert.equal(stdoutOf(r), "False ''\n");
  });

  test('the audit record lists every proxied call', async () => {
    await run(conn.client, `
from mcp import runtime
await mcp_everything.echo(message="audited")
try:
    await runtime.call_tool("memory", "read_graph", {})
except runtime.MCPError:
    pass`, ['everything']);
    // The record is written just after the answer (answers are not delayed by logging).
    // This run's record: two calls, echo then read_graph (another run's may be two echoes).
    const match = () => auditRecords().filter((r) => r.mode === 'mcp' && Array.isArray(r.calls) && r.calls.length === 2 &&
      r.calls[0].tool === 'echo' && r.calls[1].tool === 'read_graph');
    let recs = match();
    for (let i = 0; i < 100 && recs.length === 0; i++) {
      await sleep(50);
      recs = match();
    }
    assert.ok(recs.length >= 1, JSON.stringify(auditRecords().slice(-2)));
    const calls = recs[recs.length - 1].calls;
    assert.deepEqual(calls.map((c) => [c.server, c.tool, c.outcome]), [['everything', 'echo', 'ok'], ['memory', 'read_graph', 'denied']]);
    assert.equal(typeof calls[0].duration_ms, 'number');
  });
});

describe('sandboxd exec --config', () => {
  test('a script reaches host tools', async () => {
    const r = await execSandboxd(['--config', CONFIG, '--audit-log', join(SCRATCH, 'audit.log'), '-c', `
import asyncio
from mcp import runtime, mcp_everything
print(runtime.call_tool_sync("everything", "echo", {"message": "from exec"})["content"][0]["text"])
print(asyncio.run(mcp_everything.get_sum(a=20, b=22))["content"][0]["text"])`]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Echo: from exec\n.*42/);
  });

  test('config errors are one line naming file and entry; HTTP and self entries are skipped', async () => {
    const bad = join(SCRATCH, 'bad.json');
    writeFileSync(bad, JSON.stringify({ mcpServers: { broken: { args: ['x'] } } }));
    let r = await execSandboxd(['--config', bad, '-c', 'pass']);
    assert.equal(r.code, 125);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`${bad}: server \`broken\`: \`command\` must be a non-empty string`));

    writeFileSync(bad, JSON.stringify({ mcpServers: { v: { command: '${SANDBOXD_TEST_UNSET_VAR}' } } }));
    r = await execSandboxd(['--config', bad, '-c', 'pass']);
    assert.equal(r.code, 125);
    assert.match(r.stderr, /server `v`: command: variable `SANDBOXD_TEST_UNSET_VAR` is not set/);

    const mixed = join(SCRATCH, 'mixed.json');
    writeFileSync(mixed, JSON.stringify({ mcpServers: {
      web: { type: 'http', url: 'https://example.com/mcp' },
      me: { command: SANDBOXD, args: ['mcp'] },
      echo: { command: 'node', args: ['${PROXY_TESTS}/node_modules/@modelcontextprotocol/server-everything/dist/index.js'],
        env: { GREETING: '${SANDBOXD_TEST_UNSET_VAR:-hi}' } },
    } }));
    r = await execSandboxd(['--config', mixed, '-c',
      'from mcp import runtime\nprint(runtime.discovered_servers())\nr = runtime.call_tool_sync("echo", "get-env", {})\nprint("GREETING" in r["content"][0]["text"], "hi" in r["content"][0]["text"])']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /server `web`: skipped: only stdio servers are supported/);
    assert.match(r.stderr, /server `me`: skipped: it would start sandboxd's own MCP server/);
    assert.match(r.stdout, /^\('echo',\)\nTrue True\n/);
  });

  test('--import-claude reads ~/.claude.json and the approved servers of ./.mcp.json', async () => {
    const home = join(SCRATCH, 'home');
    const proj = join(SCRATCH, 'proj');
    for (const d of [home, proj]) (await import('node:fs')).mkdirSync(d, { recursive: true });
    const server = { command: 'node', args: [join(HERE, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')] };
    // The project's server runs only because the user approved it (Claude Code's enabledMcpjsonServers).
    const key = (await import('node:fs')).realpathSync(proj);
    writeFileSync(join(home, '.claude.json'), JSON.stringify({
      numStartups: 3, mcpServers: { user_everything: server }, projects: { [key]: { enabledMcpjsonServers: ['project-everything'] } },
    }));
    writeFileSync(join(proj, '.mcp.json'), JSON.stringify({ mcpServers: { 'project-everything': server } }));
    const r = await new Promise((res) => {
      const p = (require_spawn())(SANDBOXD, ['exec', '--import-claude', '-c', `
from mcp import runtime
print(runtime.discovered_servers())
print((await_sync := runtime.call_tool_sync("project-everything", "echo", {"message": "p"}))["content"][0]["text"])`],
      { cwd: proj, env: { ...ENV, HOME: home, XDG_CONFIG_HOME: join(home, '.config') }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d) => { stdout += d; });
      p.stderr.on('data', (d) => { stderr += d; });
      p.on('exit', (code) => res({ code, stdout, stderr }));
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\('project-everything', 'user_everything'\)\nEcho: p\n/);
  });
});

// The most servers a config may have (64), each with the longest name (64 characters), all listed in
// one call: SANDBOXD_MCP_SERVERS is about 4.2 KiB, and was once built in a fixed 4096-byte buffer.
describe('the largest server list', () => {
  const names = Array.from({ length: 64 }, (_, i) => `s${String(i).padStart(2, '0')}`.padEnd(64, 'x'));
  const many = join(SCRATCH, 'many.json');
  // Never started: nothing calls them.
  before(() => writeFileSync(many, JSON.stringify({ mcpServers: Object.fromEntries(names.map((n) => [n, { command: 'true' }])) })));
  const code = 'import os\nprint(os.environ["SANDBOXD_MCP_SERVERS"] == ",".join(sorted(runtime.discovered_servers())), len(runtime.discovered_servers()))';

  test('sandboxd mcp runs code that lists all 64', async () => {
    const transport = new StdioClientTransport({ command: SANDBOXD, args: ['mcp', '--config', many], env: ENV, stderr: 'pipe' });
    let stderr = '';
    transport.stderr?.on('data', (d) => { stderr += d; });
    const client = new Client({ name: 'sandboxd-proxy-tests', version: '1.0.0' });
    await client.connect(transport);
    try {
      const r = await run(client, `from mcp import runtime\n${code}`, names);
      assert.equal(r.structuredContent?.status, 'ok', `${text(r)}\n${stderr}`);
      assert.equal(stdoutOf(r), 'True 64\n');
      // The same server again, in a second call: the server is still there.
      const again = await run(client, 'print(1)', [names[0], names[0]]);
      assert.equal(stdoutOf(again), '1\n', stderr);
    } finally {
      await client.close();
    }
    assert.doesNotMatch(stderr, /overflow|Sanitizer|runtime error/);
  });

  test('sandboxd exec --config runs with all 64', async () => {
    const r = await execSandboxd(['--config', many, '-c', `from mcp import runtime\n${code}`]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'True 64\n');
  });
});

import { spawn } from 'node:child_process';
function require_spawn() { return spawn; }
