// Client-observed latency of run_python print(1) through the SDK client, with --warm 0 and --warm 2
// (or the values in BENCH_WARM, e.g. BENCH_WARM="0 2 4"):
//   paced:  one call at a time with a pause between calls (PAUSE ms, default 100; a model thinks
//           between calls), so the warm pool is refilled: p50/p95/p99;
//   serial: back to back, one in flight: p50/p95/p99 and calls/s (the pool refills only when the
//           loop is idle, so this is mostly the sustained, cold-spawn-bound rate);
//   K in flight (BENCH_INFLIGHT, default "4"; e.g. "1 4 16"): p50/p95/p99 and calls/s.
// Usage: node bench.mjs [N]   (SANDBOXD_MCP_ARGS adds server options; SANDBOXD_MCP_TRANSPORT=http
// or http-stateless measures over Streamable HTTP, helpers.mjs)
import { connect, sleep, TRANSPORT } from './helpers.mjs';
import { stdoutOf } from './output.mjs';

const N = Number(process.argv[2] || 100);
const PAUSE = Number(process.env.PAUSE || 100);
const INFLIGHT = (process.env.BENCH_INFLIGHT || '4').split(' ').filter(Boolean).map(Number);
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const fmt = (xs) => `p50 ${pct(xs, 50).toFixed(1)} ms, p95 ${pct(xs, 95).toFixed(1)} ms, p99 ${pct(xs, 99).toFixed(1)} ms`;

async function bench(warm) {
  const { client } = await connect(['--warm', String(warm)]);
  const call = async () => {
    const t0 = process.hrtime.bigint();
    const r = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)' } });
    if (stdoutOf(r) !== '1\n') throw new Error(JSON.stringify(r));
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };
  for (let i = 0; i < 5; i++) await call(); // warm up page cache and the seccomp filter cache
  await sleep(500);

  const paced = [];
  for (let i = 0; i < N; i++) {
    await sleep(PAUSE);
    paced.push(await call());
  }
  paced.sort((a, b) => a - b);

  await sleep(500);
  const serial = [];
  let t0 = Date.now();
  for (let i = 0; i < N; i++) serial.push(await call());
  const serialRate = (N * 1000) / (Date.now() - t0);
  serial.sort((a, b) => a - b);

  const parallel = [];
  for (const k of INFLIGHT) {
    await sleep(500);
    t0 = Date.now();
    let next = 0;
    const lat = [];
    await Promise.all([...Array(k).keys()].map(async () => { while (next++ < N) lat.push(await call()); }));
    lat.sort((a, b) => a - b);
    parallel.push(`  ${k} in flight: ${fmt(lat)}; ${((N * 1000) / (Date.now() - t0)).toFixed(1)} calls/s`);
  }

  console.log(`--warm ${warm}: run_python print(1), ${N} calls each, over ${TRANSPORT}:\n` +
    `  paced (${PAUSE} ms apart): ${fmt(paced)}\n` +
    `  serial: ${fmt(serial)}; ${serialRate.toFixed(1)} calls/s with 1 in flight\n` +
    parallel.join('\n'));
  await client.close();
}

for (const w of (process.env.BENCH_WARM || '0 2').split(' ').filter(Boolean)) await bench(Number(w));
