// Shared helpers for the proxy tests: sandboxd mcp with tests/proxy/servers.json, through the SDK.
import { after } from 'node:test';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { stdoutOf } from '../mcp/output.mjs';

export { stdoutOf };

export const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(HERE, '../..');
export const SANDBOXD = process.env.SANDBOXD || resolve(REPO, 'build/sandboxd');
export const CONFIG = join(HERE, 'servers.json');

// A scratch directory per test process: the memory server's file, the audit log.
export const SCRATCH = mkdtempSync(join(tmpdir(), 'sandboxd-proxy-'));
process.on('exit', () => rmSync(SCRATCH, { recursive: true, force: true }));
export const ENV = {
  ...process.env,
  PROXY_TESTS: HERE,
  MEMORY_FILE_PATH: join(SCRATCH, 'memory.jsonl'),
};

// Clients still connected when a file's tests end (a test failed before closing one): close them,
// else node waits on the server child for ever.
const clients = new Set();
after(() => Promise.all([...clients].map((c) => c.close().catch(() => {}))));

export async function connect(extraArgs = []) {
  const transport = new StdioClientTransport({
    command: SANDBOXD,
    args: ['mcp', '--config', CONFIG, '--audit-log', join(SCRATCH, 'audit.log'), ...extraArgs],
    env: ENV,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'sandboxd-proxy-tests', version: '1.0.0' });
  await client.connect(transport);
  clients.add(client);
  return { client, transport, stderr: () => stderr };
}

export const run = (client, code, servers = ['everything', 'memory'], opts = {}) =>
  client.callTool({ name: 'run_python', arguments: { code, servers } }, undefined, { timeout: 120000, ...opts });

export const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

// The last line of stdout, parsed as JSON (the code prints json.dumps(...) last).
export function lastJson(r) {
  const out = stdoutOf(r);
  const lines = out.trim().split('\n');
  try {
    return JSON.parse(lines[lines.length - 1]);
  } catch {
    throw new Error(`no JSON at the end of stdout; got:\n${text(r)}`);
  }
}

export function auditRecords() {
  try {
    return readFileSync(join(SCRATCH, 'audit.log'), 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

// Pids of live processes whose command line contains marker.
export function processesWith(marker) {
  const found = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    let cmd;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
    } catch {
      continue;
    }
    if (cmd.includes(marker)) found.push(Number(pid));
  }
  return found;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// sandboxd exec, collecting its output.
export function execSandboxd(args, env = ENV) {
  return new Promise((res) => {
    const p = spawn(SANDBOXD, ['exec', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('exit', (code) => res({ code, stdout, stderr }));
  });
}
