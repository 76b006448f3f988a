// Soak (a bench mode, not part of make check): N run_python calls through the SDK client, a mix
// of ok, failing, timing-out and cancelled ones and calls on live sessions (made and ended
// throughout), 4 in flight. sandboxd's fd count, RSS, cgroup
// count and the host's mount count are sampled before, during (every 500 calls) and after, and
// must stay flat; the trend is printed (RSS and fds per sample, latency of the ok calls by
// decile of the run: p50/p95, which must not climb either, judged by eye: no timing assertion).
// Usage: node soak.mjs [N=10000]   (from tests/mcp; `make soak` runs it; SANDBOXD_MCP_ARGS adds
// server options, e.g. --warm-mode fork). Exit 1 if anything grew.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { connect, sleep } from './helpers.mjs';

const N = Number(process.argv[2] || 10000);
const IN_FLIGHT = 4;

function sample(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
  const fds = readdirSync(`/proc/${pid}/fd`).length;
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').length;
  let cgroups = 0;
  for (const dir of ['/sys/fs/cgroup/pids', '/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
    if (!existsSync(dir)) continue;
    try { cgroups += readdirSync(dir).filter((d) => d.startsWith(`sandboxd-${pid}-`)).length; } catch {}
  }
  return { rss_kib: rss, fds, mounts, cgroups };
}

// 'session': a call on the worker's own live session (session_start), which counts its calls in a
// variable; each worker ends its session and starts a new one every SESSION_CHURN of its session
// calls, so sessions are made and ended throughout the run (SOAK_SESSIONS=0: none).
const SESSIONS = process.env.SOAK_SESSIONS !== '0';
const SESSION_CHURN = 25;
const kinds = ['ok', 'ok', 'ok', 'ok', 'ok', SESSIONS ? 'session' : 'ok', 'error', 'error', 'timeout', 'cancel'];
const code = {
  ok: 'print(sum(range(1000)))',
  error: 'raise ValueError("soak")',
  timeout: 'import time\nwhile True: time.sleep(0.1)',
  cancel: 'import time; time.sleep(30)',
};

const { client, transport } = await connect(['--warm', '2', '--max-concurrent', String(IN_FLIGHT)]);
const pid = transport.pid;
for (let i = 0; i < 10; i++) await client.callTool({ name: 'run_python', arguments: { code: 'pass' } });
await sleep(500);
const before = sample(pid);
const samples = [before];
const counts = { ok: 0, error: 0, timeout: 0, cancel: 0, session: 0, sessions_started: 0, unexpected: 0 };
let next = 0;
const okLatency = []; // [call index, ms]
const t0 = Date.now();

async function sessionStart() {
  const r = await client.callTool({ name: 'session_start', arguments: {} });
  if (r.isError) throw new Error(`session_start: ${JSON.stringify(r.content)}`);
  counts.sessions_started++;
  return { id: r.structuredContent.session_id, calls: 0 };
}

async function sessionCall(w) {
  if (w.session && w.session.calls === SESSION_CHURN) {
    await client.callTool({ name: 'session_end', arguments: { session_id: w.session.id } });
    w.session = null;
  }
  if (!w.session) w.session = await sessionStart();
  const r = await client.callTool({ name: 'run_python', arguments: {
    session_id: w.session.id, code: 'n = globals().get("n", 0) + 1\nprint(n)' } });
  w.session.calls++;
  if (r.structuredContent?.status === 'ok' && r.structuredContent.stdout === `${w.session.calls}\n`) counts.session++;
  else counts.unexpected++;
}

async function worker() {
  const w = { session: null };
  while (next < N) {
    const i = next++;
    const kind = kinds[i % kinds.length];
    if (kind === 'session') {
      try { await sessionCall(w); } catch { counts.unexpected++; }
      if (i % 500 === 0) samples.push(sample(pid));
      continue;
    }
    const args = { code: code[kind] };
    if (kind === 'timeout') args.timeout = 1;
    try {
      if (kind === 'cancel') {
        const ac = new AbortController();
        setTimeout(() => ac.abort(), 200);
        await client.callTool({ name: 'run_python', arguments: args }, undefined, { signal: ac.signal })
          .then(() => counts.unexpected++, () => counts.cancel++);
        continue;
      }
      const t0 = process.hrtime.bigint();
      const r = await client.callTool({ name: 'run_python', arguments: args });
      if (kind === 'ok') okLatency.push([i, Number(process.hrtime.bigint() - t0) / 1e6]);
      const st = r.structuredContent?.status;
      if ((kind === 'ok' && st === 'ok') || (kind === 'error' && st === 'error') || (kind === 'timeout' && st === 'timeout'))
        counts[kind]++;
      else
        counts.unexpected++;
    } catch {
      counts.unexpected++;
    }
    if (i % 500 === 0) samples.push(sample(pid));
  }
  if (w.session) await client.callTool({ name: 'session_end', arguments: { session_id: w.session.id } });
}
await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
await sleep(2000); // let cancelled sandboxes be reaped and the pool settle
const after = sample(pid);
samples.push(after);
const secs = (Date.now() - t0) / 1000;
await client.close();

console.log(`soak: ${N} calls in ${secs.toFixed(1)} s (${(N / secs).toFixed(1)} calls/s):`, counts);
console.log('before', before, 'after', after);
// fds, cgroups and mounts: the end against the most of the first quarter of the run, not against
// the one sample before it. In fork mode (SANDBOXD_MCP_ARGS="--warm-mode fork") a template's
// successor is started ahead of its last calls (+1 cgroup, +5 fds while both live), so a single
// sample depends on where in a template's 32 calls it falls; a leak grows past every early one.
const early = samples.slice(0, Math.max(2, Math.ceil(samples.length / 4)));
const grew = [];
for (const k of ['fds', 'cgroups', 'mounts']) {
  const most = Math.max(...early.map((s) => s[k]));
  if (after[k] > most) grew.push(`${k} ${before[k]} -> ${after[k]} (at most ${most} in the first quarter)`);
}
// RSS: allow allocator noise, not growth with the number of calls.
if (after.rss_kib > before.rss_kib + 2048) grew.push(`rss ${before.rss_kib} -> ${after.rss_kib} KiB`);
if (counts.unexpected) grew.push(`${counts.unexpected} unexpected results`);
const maxRss = Math.max(...samples.map((s) => s.rss_kib));
console.log(`max RSS ${maxRss} KiB over ${samples.length} samples`);
console.log(`trend, RSS KiB per sample: ${samples.map((s) => s.rss_kib).join(' ')}`);
console.log(`trend, fds per sample: ${samples.map((s) => s.fds).join(' ')}`);
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const deciles = [];
for (let d = 0; d < 10; d++) {
  const xs = okLatency.filter(([i]) => Math.floor((i * 10) / N) === d).map(([, ms]) => ms).sort((a, b) => a - b);
  deciles.push(xs.length ? `${pct(xs, 50).toFixed(1)}/${pct(xs, 95).toFixed(1)}` : '-');
}
console.log(`trend, ok-call latency p50/p95 ms by decile of the run: ${deciles.join(' ')}`);
if (grew.length) {
  console.log('soak: FAILED:', grew.join('; '));
  process.exit(1);
}
console.log('soak: flat (fds, cgroups, mounts, RSS)');
