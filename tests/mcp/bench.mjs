// Client-observed latency of run_python print(1) through the SDK client: p50/p95/p99 with one call
// in flight, and calls per second with 1 and 4 in flight. Usage: node bench.mjs [N]
import { connect } from './helpers.mjs';

const N = Number(process.argv[2] || 100);
const { client } = await connect();
const call = async () => {
  const t0 = process.hrtime.bigint();
  const r = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)' } });
  if (r.structuredContent?.stdout !== '1\n') throw new Error(JSON.stringify(r));
  return Number(process.hrtime.bigint() - t0) / 1e6;
};
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

for (let i = 0; i < 5; i++) await call(); // warm up page cache and the seccomp filter cache
const lat = [];
let t0 = Date.now();
for (let i = 0; i < N; i++) lat.push(await call());
const serialRate = (N * 1000) / (Date.now() - t0);
lat.sort((a, b) => a - b);

t0 = Date.now();
let next = 0;
await Promise.all([0, 1, 2, 3].map(async () => { while (next++ < N) await call(); }));
const parallelRate = (N * 1000) / (Date.now() - t0);

console.log(`run_python print(1), ${N} calls: p50 ${pct(lat, 50).toFixed(1)} ms, p95 ${pct(lat, 95).toFixed(1)} ms, ` +
  `p99 ${pct(lat, 99).toFixed(1)} ms; ${serialRate.toFixed(1)} calls/s with 1 in flight, ` +
  `${parallelRate.toFixed(1)} calls/s with 4 in flight`);
await client.close();
