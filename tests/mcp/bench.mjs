// run_python print(1) through the official SDK client, side by side in one run: `sandboxd mcp`
// with each --warm in BENCH_WARM (default "0 2 4"), with --warm-mode fork, and the reference stub, bench/bwrap-stub.py (one
// bubblewrap sandbox per call; BENCH_STUB=0 leaves it out), and calls on live sessions of the fork-mode
// server (BENCH_SESSION=0 leaves that out). For each server, after 10 warm-up calls:
//   paced:        PACED calls (default 50), PAUSE ms apart (default 50): p50/p95/p99;
//   back to back: N calls, one in flight: p50/p95/p99, calls/s;
//   4, 16 in flight: N calls each: p50/p95/p99 of each call, calls/s;
//   CPU per call over all those calls (>= 1,000 with N >= 317): from the cgroup counter, and
//   from the whole machine less this client as a cross-check for any user (cgMeter, machine
//   below); page faults per call likewise. The table's first line says who the servers ran as (root or unprivileged).
// Usage: node bench.mjs [N=350]   (SANDBOXD_MCP_ARGS adds server options; BENCH_OUT=DIR also
// writes DIR/mcp.json and DIR/mcp.md; BENCH_BASELINE=PATH adds the fork row of another binary).
// bench/mcp runs it; `make bench` runs bench/mcp.
// BENCH_TRANSPORT=http or http-stateless: the sandboxd rows over Streamable HTTP (`--http
// 127.0.0.1:0`, SDK's StreamableHTTPClientTransport) instead of stdio; the stub speaks stdio
// only and is left out (compare with a stdio run of the same N).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { hostname, cpus, release, userInfo } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { stdoutOf } from './output.mjs';

// Not helpers.mjs: it registers node:test hooks, which would print a TAP report.
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SANDBOXD = process.env.SANDBOXD || resolve(REPO, 'build/sandboxd');
const SERVER_ARGS = ['mcp', ...(process.env.SANDBOXD_MCP_ARGS || '').split(' ').filter(Boolean)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const TRANSPORT = process.env.BENCH_TRANSPORT || 'stdio';

const N = Number(process.argv[2] || 350);
const SESSIONS = 4;
const PACED = Number(process.env.PACED ?? 50);
const PAUSE = Number(process.env.PAUSE || 50);
const ROOTFS = process.env.SANDBOXD_ROOTFS || resolve(REPO, 'rootfs/python-3.14-slim');
const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: pct(s, 50), p95: pct(s, 95), p99: pct(s, 99), n: s.length };
};

// The cgroup each server runs in, fresh, so that its counters cover the server, every process it
// starts and the kernel work done in their context. sandboxd makes each sandbox's cgroup below
// its own (in every v1 hierarchy, cpuacct and memory included; on v2 below its cgroup), so they
// nest in this one and are counted, removed ones too: cpuacct.usage, cpu.stat usage_usec and
// memory.stat's (total_)pgfault are hierarchical and keep what children used. The stub's bwrap
// processes stay in it. Needs root; null otherwise. Not counted: kernel threads working on their
// behalf later (e.g. the network namespace's teardown in a kworker).
function cgMeter(name) {
  if (process.geteuid() !== 0) return null;
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const v1 = {};
  for (const l of mounts) {
    const [pre, post] = l.split(' - ');
    if (!post) continue;
    const [fstype, , opts] = post.split(' ');
    for (const c of ['cpuacct', 'memory'])
      if (fstype === 'cgroup' && opts.split(',').includes(c) && !v1[c]) v1[c] = pre.split(' ')[4];
  }
  let dirs, cpu, faults, kind;
  if (v1.cpuacct) {
    dirs = [`${v1.cpuacct}/${name}`];
    cpu = () => Number(readFileSync(`${dirs[0]}/cpuacct.usage`, 'utf8')) / 1e6;
    kind = `v1 cpuacct (${v1.cpuacct})`;
    if (v1.memory && v1.memory !== v1.cpuacct) {
      const mem = `${v1.memory}/${name}`;
      dirs.push(mem);
      faults = () => Number(/^total_pgfault (\d+)$/m.exec(readFileSync(`${mem}/memory.stat`, 'utf8'))[1]);
    }
  } else if (existsSync('/sys/fs/cgroup/cgroup.controllers')) {
    dirs = [`/sys/fs/cgroup/${name}`];
    cpu = () => Number(/usage_usec (\d+)/.exec(readFileSync(`${dirs[0]}/cpu.stat`, 'utf8'))[1]) / 1e3;
    faults = () => Number(/^pgfault (\d+)$/m.exec(readFileSync(`${dirs[0]}/memory.stat`, 'utf8'))[1]);
    kind = 'v2 cpu.stat';
  } else {
    return null;
  }
  for (const d of dirs) mkdirSync(d);
  const read = () => ({ cpu: cpu(), faults: faults ? faults() : undefined });
  return { dirs, read, kind, procs: dirs.map((d) => `${d}/cgroup.procs`) };
}

// The cross-check, for any user: the whole machine's CPU time (/proc/stat: all but idle and
// iowait) and page faults (/proc/vmstat pgfault), less this client's own (process.resourceUsage):
// what the server, everything it starts and the kernel's threads did, plus whatever else ran
// (run it on an idle machine). Not a walk of the server's processes: a sandbox's processes that
// its pid 1 takes with it when it exits are reaped by no ancestor, and their time and faults
// reach no one's rusage (fork mode's calls end that way: the tree's sum was a fifth of the
// cgroup's).
function machine() {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1).map(Number);
  const busy = cpu.reduce((a, b) => a + b, 0) - cpu[3] - cpu[4]; // idle, iowait
  const faults = Number(/^pgfault (\d+)$/m.exec(readFileSync('/proc/vmstat', 'utf8'))[1]);
  const own = process.resourceUsage();
  return { cpu: (busy * 1000) / TICK - (own.userCPUTime + own.systemCPUTime) / 1000, faults: faults - own.minorPageFault };
}

async function start(server, cg) {
  // The server runs below a subreaper, which joins the server's cgroup before it starts it.
  const command = resolve(REPO, 'bench/subreaper.py');
  const args = [...(cg ? cg.procs.flatMap((p) => ['--cgroup', p]) : []), '--', server.command, ...server.args];
  const client = new Client({ name: 'sandboxd-bench', version: '1.0.0' });
  if (!server.http) {
    const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
    await client.connect(transport);
    return { client, transport, pid: transport.pid };
  }
  // Over HTTP: the URL from the line `sandboxd mcp --http` prints on stderr.
  const proc = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise((res, rej) => {
    let err = '';
    proc.stderr.on('data', (d) => {
      err += d;
      const m = /sandboxd: listening on (http:\/\/\S+)\n/.exec(err);
      if (m) res(m[1]);
    });
    proc.on('exit', (code) => rej(new Error(`sandboxd mcp --http exited ${code}: ${err}`)));
  });
  proc.stderr.resume();
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const close = transport.close.bind(transport);
  const exited = new Promise((r) => proc.once('exit', r));
  transport.close = async () => { await close(); proc.kill('SIGTERM'); await exited; };
  return { client, transport, pid: proc.pid };
}

async function inFlight(call, k, n) {
  const lat = [];
  let next = 0;
  const t0 = Date.now();
  await Promise.all(Array.from({ length: k }, async (_, w) => { while (next++ < n) lat.push(await call(w)); }));
  return { ...stats(lat), rate: (n * 1000) / (Date.now() - t0) };
}

async function bench(server, idx) {
  const cg = cgMeter(`bench-mcp-${process.pid}-${idx}`);
  const { client, transport, pid } = await start(server, cg);
  // A session row: calls on live sessions (session_start), worker w on session w; as many
  // sessions as a client may hold (the policy's max_sessions_per_token, 4 by default).
  const sessions = [];
  for (let i = 0; server.session && i < SESSIONS; i++) {
    const r = await client.callTool({ name: 'session_start', arguments: {} });
    if (r.isError) throw new Error(`session_start: ${JSON.stringify(r)}`);
    sessions.push(r.structuredContent.session_id);
  }
  const call = async (w = 0) => {
    const t0 = process.hrtime.bigint();
    const args = { code: 'print(1)', ...(server.session ? { session_id: sessions[w] } : {}) };
    const r = await client.callTool({ name: 'run_python', arguments: args });
    if (stdoutOf(r) !== '1\n') throw new Error(`${server.label}: ${JSON.stringify(r)}`);
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  const res = { label: server.label, command: [server.command, ...server.args].join(' ') };
  try {
    for (let i = 0; i < 10; i++) await call(); // page cache, the seccomp filter cache, the pool
    await sleep(500);
    const cg0 = cg?.read(), m0 = machine();
    const paced = [];
    for (let i = 0; i < PACED; i++) {
      await sleep(PAUSE);
      paced.push(await call());
    }
    res.paced = { ...stats(paced), pause_ms: PAUSE };
    await sleep(500);
    res.serial = await inFlight(call, 1, N);
    await sleep(500);
    res.inflight4 = await inFlight(call, 4, N);
    await sleep(500);
    // A session runs one call at a time and a client holds SESSIONS: no 16 in flight.
    res.inflight16 = server.session ? null : await inFlight(call, 16, N);
    await sleep(1000); // the pool refilled, the last sandboxes reaped
    const calls = PACED + (server.session ? 2 : 3) * N;
    res.calls = calls;
    if (cg) {
      const cg1 = cg.read();
      res.cpu_ms_per_call = (cg1.cpu - cg0.cpu) / calls;
      if (cg1.faults !== undefined) res.faults_per_call = (cg1.faults - cg0.faults) / calls;
      res.cpu_meter = cg.kind;
    }
    const m1 = machine();
    res.cpu_ms_per_call_machine = (m1.cpu - m0.cpu) / calls;
    res.faults_per_call_machine = (m1.faults - m0.faults) / calls;
  } finally {
    await client.close(); // closes the transport: over HTTP, that also stops the server
    for (const dir of cg ? cg.dirs : []) {
      for (let i = 0; i < 50; i++) {
        try { rmdirSync(dir); break; } catch { await sleep(100); }
      }
      if (existsSync(dir)) console.error(`bench: ${dir} not empty after the server exited (a leak?)`);
    }
  }
  return res;
}

const ms = (x) => (x === undefined ? '–' : x.toFixed(1));
function table(rows) {
  const head = ['server', 'p50 paced', 'p50 back to back', 'p95', 'p99', 'p50 4 in flight', 'p95', 'p99',
    'p50 16 in flight', 'p95', 'p99', 'calls/s 4 in flight', 'calls/s 16', 'CPU ms/call (cgroup)', 'CPU ms/call (machine)', 'page faults/call (cgroup)', 'page faults/call (machine)'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) {
    lines.push(`| ${[r.label, ms(r.paced.p50), ms(r.serial.p50), ms(r.serial.p95), ms(r.serial.p99),
      ms(r.inflight4.p50), ms(r.inflight4.p95), ms(r.inflight4.p99),
      ms(r.inflight16?.p50), ms(r.inflight16?.p95), ms(r.inflight16?.p99),
      r.inflight4.rate.toFixed(0), r.inflight16 ? r.inflight16.rate.toFixed(0) : '–',
      r.cpu_ms_per_call === undefined ? '– (not root)' : r.cpu_ms_per_call.toFixed(2),
      r.cpu_ms_per_call_machine.toFixed(2), r.faults_per_call === undefined ? '–' : r.faults_per_call.toFixed(0),
      r.faults_per_call_machine.toFixed(0)].join(' | ')} |`);
  }
  return lines.join('\n');
}

const HTTP_ARGS = { stdio: [], http: ['--http', '127.0.0.1:0'], 'http-stateless': ['--http', '127.0.0.1:0', '--stateless'] }[TRANSPORT];
if (!HTTP_ARGS) throw new Error(`BENCH_TRANSPORT=${TRANSPORT}: stdio, http or http-stateless`);
const servers = (process.env.BENCH_WARM ?? '0 2 4').split(' ').filter(Boolean).map((w) => ({
  // --warm-mode prestart said: auto, the default, forks.
  label: `sandboxd mcp --warm ${w} --warm-mode prestart${TRANSPORT === 'stdio' ? '' : ` (${TRANSPORT})`}`,
  command: SANDBOXD, args: [...SERVER_ARGS, ...HTTP_ARGS, '--warm', w, '--warm-mode', 'prestart'],
  http: TRANSPORT !== 'stdio',
}));
// --warm-mode fork: each call forked from a template that has started Python (BENCH_FORK=0: not).
if (process.env.BENCH_FORK !== '0')
  servers.push({ label: `sandboxd mcp --warm-mode fork${TRANSPORT === 'stdio' ? '' : ` (${TRANSPORT})`}`,
    command: SANDBOXD, args: [...SERVER_ARGS, ...HTTP_ARGS, '--warm-mode', 'fork'], http: TRANSPORT !== 'stdio' });
// Calls on live sessions (session_start, then session_id), on the fork-mode server (BENCH_SESSION=0:
// not): the session row. Its setup (the session's sandbox) is outside the timings.
if (process.env.BENCH_SESSION !== '0')
  servers.push({ label: `sandboxd mcp --warm-mode fork: calls on a live session${TRANSPORT === 'stdio' ? '' : ` (${TRANSPORT})`}`,
    command: SANDBOXD, args: [...SERVER_ARGS, ...HTTP_ARGS, '--warm-mode', 'fork'], http: TRANSPORT !== 'stdio',
    session: true });
// BENCH_BASELINE=PATH: the fork row again with another sandboxd binary (say, a build of the commit
// before a change), for a before/after side by side in one run.
if (process.env.BENCH_BASELINE && process.env.BENCH_FORK !== '0')
  servers.push({ label: `baseline ${process.env.BENCH_BASELINE_LABEL || 'build'}: --warm-mode fork`,
    command: process.env.BENCH_BASELINE, args: [...SERVER_ARGS, ...HTTP_ARGS, '--rootfs', ROOTFS, '--warm-mode', 'fork'],
    http: TRANSPORT !== 'stdio' });
const hasBwrap = (() => { try { execFileSync('sh', ['-c', 'command -v bwrap'], { stdio: 'ignore' }); return true; } catch { return false; } })();
if (TRANSPORT !== 'stdio')
  console.error(`bench: over ${TRANSPORT}; the stub speaks stdio only and is left out`);
else if (process.env.BENCH_STUB !== '0' && !hasBwrap)
  console.error('bench: no bwrap (scripts/install-deps installs bubblewrap): the stub row is left out');
else if (process.env.BENCH_STUB !== '0')
  servers.push({ label: 'stub: one bwrap per call', command: 'python3',
    args: [resolve(REPO, 'bench/bwrap-stub.py'), '--rootfs', ROOTFS] });

const rows = [];
for (const [i, s] of servers.entries()) {
  rows.push(await bench(s, i));
  console.error(`bench: ${s.label} done`);
}
// Who the servers ran as: as root sandboxd maps each sandbox to a host id of its own and makes
// cgroups; unprivileged it is the user's (sandboxd-mcp(7)), and the cgroup meter is off.
const AS = process.geteuid() === 0 ? 'root' : `${userInfo().username} (uid ${process.geteuid()}, unprivileged)`;
const results = { date: new Date().toISOString().slice(0, 19), host: hostname(), kernel: release(), transport: TRANSPORT, user: AS,
  cpus: cpus().length, n: N, paced: PACED, pause_ms: PAUSE, code: 'print(1)', servers: rows };
const md = `run_python print(1) as ${AS}, client-side latency in ms (${N} calls per phase, ${PACED} paced ` +
  `${PAUSE} ms apart); CPU and page faults per call over ${rows[0]?.calls} calls per server\n\n${table(rows)}\n`;
console.log(md);
if (process.env.BENCH_OUT) {
  mkdirSync(process.env.BENCH_OUT, { recursive: true });
  const base = TRANSPORT === 'stdio' ? 'mcp' : `mcp-${TRANSPORT}`;
  writeFileSync(`${process.env.BENCH_OUT}/${base}.json`, JSON.stringify(results, null, 1) + '\n');
  writeFileSync(`${process.env.BENCH_OUT}/${base}.md`, md);
  console.log(`saved ${process.env.BENCH_OUT}/${base}.json and ${base}.md`);
}
