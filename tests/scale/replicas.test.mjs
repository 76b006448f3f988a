// Three `sandboxd mcp --http 127.0.0.1:0 --stateless` behind nginx (a round-robin upstream, run
// unprivileged from a config in a temporary directory, writing nothing outside it), then 300
// run_python calls, 8 in flight, through nginx with the official SDK's Streamable HTTP client:
// every result right, every replica served calls (counted from each one's audit log), and a
// replica killed mid-run (SIGKILL) costs only the calls it held: those fail cleanly (HTTP 502
// from nginx) and the client's retry lands on another, its sandboxes die with it and its cgroups
// are swept; calls nginx sends to the dead replica afterwards go to
// the next one (proxy_next_upstream error; max_fails=0 here, so nginx never sets the dead replica
// aside and every later call assigned to it relies on that). Each replica needs a bearer token
// (nginx passes Authorization through). About 5 s here. Needs nginx (scripts/install-deps).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, readdirSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SANDBOXD, NGINX, exited, waitExit, workspace, nginxHead, nginxTemps, startNginx as nginxStart } from "./lib.mjs";

const CALLS = 300, IN_FLIGHT = 8, REPLICAS = 3, KILL_AFTER = 100;
const ws = workspace("sandboxd-replicas-");
const { dir, procs, tokens } = ws;
const TOKEN = ws.token;

// A replica: its own audit log; its URL from the line it prints on stderr.
function startReplica(i) {
  const audit = join(dir, `replica${i}.audit.log`);
  const p = spawn(SANDBOXD, ["mcp", "--http", "127.0.0.1:0", "--stateless", "--audit-log", audit,
    "--token-file", tokens, "--warm", "1", "--max-concurrent", "4"], { stdio: ["ignore", "ignore", "pipe"] });
  procs.push(p);
  let err = "";
  return new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`replica ${i} printed no address: ${err}`)), 15000);
    p.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/);
      if (m) { clearTimeout(t); res({ p, port: Number(m[1]), audit }); }
    });
    p.once("exit", (c, s) => rej(new Error(`replica ${i} exited (${c ?? s}): ${err}`)));
  });
}

// The upstream as sandboxd-mcp(7) documents it (DEPLOYMENT).
function nginxConf(port, replicas) {
  return `${nginxHead(dir)}
http {
  ${nginxTemps(dir)}
  upstream sandboxd {
${replicas.map((r) => `    server 127.0.0.1:${r.port} max_fails=0;`).join("\n")}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    location /mcp {
      proxy_pass http://sandboxd;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_read_timeout 300s;
      proxy_next_upstream error timeout;
      proxy_next_upstream_tries 3;
    }
  }
}
`;
}

const startNginx = (replicas) => nginxStart(ws, (port) => nginxConf(port, replicas));

// Every process below pid (each task's children file).
function descendants(pid) {
  const out = [];
  let tasks = [];
  try { tasks = readdirSync(`/proc/${pid}/task`); } catch { return out; }
  for (const t of tasks) {
    let kids = "";
    try { kids = readFileSync(`/proc/${pid}/task/${t}/children`, "utf8"); } catch { continue; }
    for (const k of kids.split(" ").filter(Boolean).map(Number)) out.push(k, ...descendants(k));
  }
  return out;
}

// The cgroup directories sandboxd made for pid's sandboxes (sandboxd-PID-N), v1 or v2.
function cgroupsOf(pid, dir = "/sys/fs/cgroup", depth = 0, out = []) {
  let ents = [];
  try { ents = readdirSync(dir, { withFileTypes: true }); } catch { return out; }
  for (const e of ents) {
    if (!e.isDirectory()) continue;
    if (e.name.startsWith(`sandboxd-${pid}-`)) out.push(join(dir, e.name));
    else if (depth < 6) cgroupsOf(pid, join(dir, e.name), depth + 1, out);
  }
  return out;
}

const records = (r) => (existsSync(r.audit) ? readFileSync(r.audit, "utf8").split("\n").filter(Boolean).length : 0);

test("300 calls through nginx to 3 stateless replicas, one killed mid-run", { skip: !NGINX && "no nginx (scripts/install-deps installs it)", timeout: 90000 }, async () => {
  mkdirSync(dir, { recursive: true });
  const replicas = await Promise.all(Array.from({ length: REPLICAS }, (_, i) => startReplica(i)));
  const nginx = await startNginx(replicas);

  // One SDK client per worker: stateless, so nothing ties a client to a replica.
  const clients = await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    const c = new Client({ name: "replicas-test", version: "1" });
    await c.connect(new StreamableHTTPClientTransport(nginx.url,
      { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
    return c;
  }));

  const victim = replicas[1];
  let victimKids = [];
  let next = 0, done = 0, killedAt = -1, killedInFlight = -1, inFlight = 0, killed = false;
  // SIGKILL is not death: until the victim has exited it can still take a connection, and a call
  // sent in that window may fail as one it held does (CI: the first call sent after the kill).
  let dead = false, sentWhileDying = 0;
  const failures = []; // first attempts that failed: [call, message]
  const results = new Array(CALLS);

  async function call(c, i) {
    // A short sleep so each replica holds calls when one is killed.
    const code = `import time\ntime.sleep(0.05)\nprint(${i} * 7)`;
    const sentAfterDeath = dead;
    if (killed && !dead) sentWhileDying++;
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await c.callTool({ name: "run_python", arguments: { code } });
        return r;
      } catch (e) {
        failures.push([i, attempt, String(e.message), sentAfterDeath]);
        if (attempt >= 2) throw e;
      }
    }
  }
  await Promise.all(clients.map(async (c) => {
    while (next < CALLS) {
      const i = next++;
      inFlight++;
      results[i] = await call(c, i);
      inFlight--;
      if (++done === KILL_AFTER) {
        killedAt = done;
        killedInFlight = inFlight;
        victimKids = descendants(victim.p.pid);
        killed = true;
        victim.p.once("exit", () => { dead = true; });
        victim.p.kill("SIGKILL");
      }
    }
  }));
  await Promise.all(clients.map((c) => c.close()));

  for (let i = 0; i < CALLS; i++) {
    const r = results[i];
    assert.equal(r.isError, false, `call ${i}: ${JSON.stringify(r)}`);
    assert.equal(r.structuredContent.stdout, `${i * 7}\n`, `call ${i}`);
  }
  assert.equal(killedAt, KILL_AFTER);
  // Only what the victim held (or took while dying) failed, each once, with nginx's clean 502;
  // the retry succeeded.
  const held = killedInFlight + sentWhileDying;
  assert.ok(failures.length <= held + 1, `${failures.length} failures, ${killedInFlight} in flight, ` +
    `${sentWhileDying} sent while the victim died: ${JSON.stringify(failures)}`);
  for (const [i, attempt, msg, sentAfterDeath] of failures) {
    assert.equal(sentAfterDeath, false, `call ${i}, sent after the victim exited, failed: ${msg}`);
    assert.equal(attempt, 0, `call ${i} failed twice: ${msg}`);
    assert.match(msg, /502|Bad Gateway/, `call ${i}`);
  }
  // Every replica served calls; the survivors all of the rest.
  const served = replicas.map(records);
  for (let i = 0; i < REPLICAS; i++) assert.ok(served[i] > 0, `replica ${i} served no call: ${served}`);
  // Give or take the calls the victim held: one answered just before the kill may miss its
  // record, one whose record was written but not its answer is counted twice (it was retried).
  const total = served.reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(total - CALLS) <= held, `audit records ${served}, ${held} held by the victim`);
  const log = readFileSync(join(dir, "error.log"), "utf8");
  console.log(`served ${served.join("/")}, victim held ${failures.length} of ${killedInFlight} in flight at the kill ` +
    `(+${sentWhileDying} sent while it died), ` +
    `left ${cgroupsOf(victim.p.pid).length} cgroup directories`);
  if (failures.length) assert.match(log, /upstream prematurely closed|Connection reset|connect\(\) failed/);

  nginx.p.kill("SIGQUIT");
  await waitExit(nginx.p, 5000);
  for (const r of replicas) if (!exited(r.p)) r.p.kill("SIGTERM");
  await Promise.all(replicas.map((r) => waitExit(r.p, 10000)));
  // Nothing left: every process this test started has exited, and so has every sandbox the
  // killed replica was running (their PR_SET_PDEATHSIG).
  for (const p of procs) assert.ok(exited(p), `pid ${p.pid} still running`);
  assert.ok(victimKids.length > 0, "the victim had sandboxes (its warm one at least)");
  for (let t = 0; t < 50 && victimKids.some((pid) => existsSync(`/proc/${pid}`)); t++)
    await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(victimKids.filter((pid) => existsSync(`/proc/${pid}`)), [], "the victim's sandboxes outlived it");
  // Its cgroups (where it had them: its warm and running sandboxes' ones) go at the next sandboxd's first
  // sandbox (the stale sweep): one exec, then none left.
  const left = cgroupsOf(victim.p.pid);
  const first = JSON.parse(readFileSync(victim.audit, "utf8").split("\n")[0]);
  if (String(first.enforcement).startsWith("cgroup")) assert.ok(left.length > 0, "the victim left no cgroup to sweep");
  spawnSync(SANDBOXD, ["exec", "--audit-log", "off", "-c", "pass"], { stdio: "ignore" });
  assert.deepEqual(cgroupsOf(victim.p.pid), [], "the victim's cgroups were not swept");
});
