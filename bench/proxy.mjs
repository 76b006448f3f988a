// SPDX-License-Identifier: Apache-2.0
// The MCP proxy's cost, through the SDK client and `sandboxd mcp --config tests/proxy/servers.json`:
//   run_python print(1) without servers vs with servers (bridge + mcp package, no call),
//   one run_python making N proxied calls (sequential and gathered), measured inside and outside,
//   and the first call after start (host server spawn + handshake).
// Needs tests/proxy/node_modules (tests/proxy/run installs it). Usage: node bench/proxy.mjs [N]
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stdoutOf } from '../tests/mcp/output.mjs';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TESTS = join(REPO, 'tests/proxy');
const require = createRequire(join(TESTS, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const N = Number(process.argv[2] || 100);
const SANDBOXD = process.env.SANDBOXD || join(REPO, 'build/sandboxd');
const transport = new StdioClientTransport({
  command: SANDBOXD,
  args: ['mcp', '--config', join(TESTS, 'servers.json'), '--audit-log', 'off'],
  env: { ...process.env, PROXY_TESTS: TESTS, MEMORY_FILE_PATH: '/tmp/sandboxd-bench-memory.jsonl' },
  stderr: 'ignore',
});
const client = new Client({ name: 'sandboxd-proxy-bench', version: '1' });
await client.connect(transport);

const call = async (code, servers) => {
  const t0 = process.hrtime.bigint();
  const r = await client.callTool({ name: 'run_python', arguments: { code, servers } }, undefined, { timeout: 120000 });
  if (r.structuredContent?.status !== 'ok') throw new Error(JSON.stringify(r.content));
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, out: stdoutOf(r) };
};
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const first = await call('print((await mcp_everything.echo(message="x"))["content"][0]["text"])', ['everything']);
const results = { first_call_cold_ms: first.ms };
for (const [name, servers] of [['print1_no_servers_ms', []], ['print1_with_servers_ms', ['everything']]]) {
  const xs = [];
  for (let i = 0; i < 20; i++) xs.push((await call('print(1)', servers)).ms);
  results[name] = median(xs);
}
const code = `
import json, time, asyncio
t0 = time.perf_counter()
for i in range(${N}):
    await mcp_everything.get_sum(a=i, b=1)
seq = time.perf_counter() - t0
t0 = time.perf_counter()
await asyncio.gather(*(mcp_everything.echo(message=str(i)) for i in range(${N})))
par = time.perf_counter() - t0
print(json.dumps([seq, par]))`;
const runs = [];
for (let i = 0; i < 5; i++) {
  const r = await call(code, ['everything']);
  const [seq, par] = JSON.parse(r.out.trim());
  runs.push({ total: r.ms, seq: seq * 1000, par: par * 1000 });
}
results.calls = N;
results.run_python_total_ms = median(runs.map((r) => r.total));
results.sequential_calls_ms = median(runs.map((r) => r.seq));
results.gathered_calls_ms = median(runs.map((r) => r.par));
results.per_call_sequential_us = (results.sequential_calls_ms * 1000) / N;
console.log(JSON.stringify(results, null, 2));
await client.close();
