// Shared helpers for the sandboxd MCP tests: where the binary is, an SDK client, a raw line client.
import { after } from 'node:test';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
// SANDBOXD overrides the binary under test.
export const SANDBOXD = process.env.SANDBOXD || resolve(REPO, 'build/sandboxd');
export const SERVER_ARGS = ['mcp', ...(process.env.SANDBOXD_MCP_ARGS || '').split(' ').filter(Boolean)];

// Clients still connected when a file's tests end (a test failed before closing one): close them,
// else node waits on the server child for ever.
const clients = new Set();
after(() => Promise.all([...clients].map((c) => c.close().catch(() => {}))));

// SANDBOXD_MCP_TRANSPORT: how connect() reaches the server: stdio (default), http (Streamable
// HTTP with sessions) or http-stateless (--stateless); the same tests either way.
export const TRANSPORT = process.env.SANDBOXD_MCP_TRANSPORT || 'stdio';

// `sandboxd mcp --http 127.0.0.1:0 ARGS`: its URL from the line it prints on stderr.
export async function startHttp(args = []) {
  const proc = spawn(SANDBOXD, [...SERVER_ARGS, '--http', '127.0.0.1:0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  live.add(proc);
  const exit = new Promise((res) => proc.on('exit', (code, signal) => { live.delete(proc); res({ code, signal }); }));
  let stderr = '';
  const url = await new Promise((res, rej) => {
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = /sandboxd: listening on (http:\/\/\S+)\n/.exec(stderr);
      if (m) res(m[1]);
    });
    exit.then(({ code }) => rej(new Error(`sandboxd mcp --http exited ${code}: ${stderr}`)));
  });
  return { proc, url, exit, stderr: () => stderr, stop: async () => { proc.kill('SIGTERM'); return exit; } };
}

export async function connect(extraArgs = []) {
  if (TRANSPORT !== 'stdio') {
    const server = await startHttp([...(TRANSPORT === 'http-stateless' ? ['--stateless'] : []), ...extraArgs]);
    const transport = new StreamableHTTPClientTransport(new URL(server.url));
    const client = new Client({ name: 'sandboxd-tests', version: '1.0.0' });
    await client.connect(transport);
    const close = client.close.bind(client);
    client.close = async () => {
      // Sessions end with DELETE, as a well-behaved client does; then the server goes.
      if (transport.sessionId) await transport.terminateSession().catch(() => {});
      await close();
      await server.stop();
    };
    clients.add(client);
    return { client, transport, server, stderr: server.stderr };
  }
  const transport = new StdioClientTransport({
    command: SANDBOXD,
    args: [...SERVER_ARGS, ...extraArgs],
    env: { ...process.env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'sandboxd-tests', version: '1.0.0' });
  await client.connect(transport);
  clients.add(client);
  return { client, transport, stderr: () => stderr };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Pids of live processes whose command line contains marker (excluding this test process).
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

export async function waitGone(marker, ms = 3000) {
  const until = Date.now() + ms;
  for (;;) {
    const left = processesWith(marker);
    if (!left.length || Date.now() > until) return left;
    await sleep(50);
  }
}

// The server driven with raw bytes: write anything, read replies one JSON line at a time.
// Servers still running when a file's tests end: a test that failed before closing its server
// would otherwise keep node waiting on the child for ever (the suite hangs, CI times out).
const live = new Set();
after(() => { for (const p of live) p.kill('SIGKILL'); });

export class RawServer {
  constructor(args = []) {
    this.proc = spawn(SANDBOXD, [...SERVER_ARGS, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    live.add(this.proc);
    this.proc.on('exit', () => live.delete(this.proc));
    this.lines = [];
    this.waiters = [];
    this.stderr = '';
    this.exit = new Promise((res) => this.proc.on('exit', (code, signal) => res({ code, signal })));
    let buf = '';
    this.proc.stdout.setEncoding('utf8');
    this.proc.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        this.lines.push(line);
        this.wake();
      }
    });
    this.proc.stderr.on('data', (d) => { this.stderr += d; });
    this.proc.stdin.on('error', () => {});
  }
  wake() {
    for (const w of this.waiters.splice(0)) w();
  }
  write(data) {
    return new Promise((res) => this.proc.stdin.write(data, res));
  }
  send(obj) {
    return this.write(JSON.stringify(obj) + '\n');
  }
  // The next message matching pred (parsed JSON), waiting up to ms.
  async next(pred = () => true, ms = 10000) {
    const until = Date.now() + ms;
    for (;;) {
      const i = this.lines.findIndex((l) => pred(JSON.parse(l)));
      if (i >= 0) return JSON.parse(this.lines.splice(i, 1)[0]);
      const left = until - Date.now();
      if (left <= 0) throw new Error(`no matching message within ${ms} ms; have: ${this.lines.join('\n')}`);
      await new Promise((res) => {
        const t = setTimeout(res, left);
        this.waiters.push(() => { clearTimeout(t); res(); });
      });
    }
  }
  reply(id, ms) {
    return this.next((m) => m.id === id && !('method' in m), ms);
  }
  async initialize(version = '2025-06-18') {
    await this.send({ jsonrpc: '2.0', id: 'init', method: 'initialize',
      params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    const r = await this.reply('init');
    await this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }
  // The server still serves: a ping comes back.
  async alive(tag) {
    const id = `alive-${tag}-${Math.random()}`;
    await this.send({ jsonrpc: '2.0', id, method: 'ping' });
    const r = await this.reply(id, 5000);
    return r.result && Object.keys(r.result).length === 0;
  }
  async close() {
    this.proc.stdin.end();
    return this.exit;
  }
}

// Code that sleeps for a minute in a process whose command line carries marker (for
// processesWith): the code itself is in no command line (it comes over fd 3, cold or warm).
export const sleeperCode = (marker) =>
  `import os\nos.execv("/usr/bin/python3", ["python3", "-c", "import time; time.sleep(60)", "${marker}"])`;
