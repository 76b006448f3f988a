// Sessions behind nginx (issue #38 item 5; sandboxd-mcp(7), DEPLOYMENT): three stateful replicas
// (`--ring-file`, `--ring-name`) behind one nginx upstream with `hash $sandboxd_key consistent`,
// where the key is the Mcp-Param-Session header (2026-07-28: a session_id argument mirrored into
// it) or else Mcp-Session-Id (2025-11-25). A request with neither (session_start, initialize)
// goes round robin, and the replica that takes it mints a handle (or a session id) that nginx's
// ring sends back to it. Checked: every call of every session lands on its replica (the state
// is there, and each session's audit records are in one replica's log), sessions spread over
// the replicas, and a replica killed with SIGKILL ends only its own sessions, each call on one
// with a clear error, while the others' state is intact. Needs nginx (scripts/install-deps).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SANDBOXD, NGINX, waitExit, workspace, freePort, nginxHead, nginxTemps, startNginx as nginxStart } from "./lib.mjs";

const REPLICAS = 3, SESSIONS = 9, LEGACY = 3;
const MODERN = "2026-07-28";
const META = { "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {} };
const ws = workspace("sandboxd-sessions-");
const { dir, procs, tokens } = ws;
const TOKEN = ws.token;

function startReplica(i, port, ring) {
  const audit = join(dir, `replica${i}.audit.log`);
  const p = spawn(SANDBOXD, ["mcp", "--http", `127.0.0.1:${port}`, "--audit-log", audit, "--token-file", tokens,
    "--ring-file", ring, "--ring-name", `127.0.0.1:${port}`, "--warm", "0"], { stdio: ["ignore", "ignore", "pipe"] });
  procs.push(p);
  let err = "";
  return new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`replica ${i} printed no address: ${err}`)), 15000);
    p.stderr.on("data", (d) => {
      err += d;
      if (err.includes("listening on http://")) { clearTimeout(t); res({ p, port, audit }); }
    });
    p.once("exit", (c, s) => rej(new Error(`replica ${i} exited (${c ?? s}): ${err}`)));
  });
}

// The upstream as sandboxd-mcp(7) documents it for sessions (DEPLOYMENT).
function nginxConf(port, replicas) {
  return `${nginxHead(dir)}
http {
  ${nginxTemps(dir)}
  map $http_mcp_param_session $sandboxd_key {
    ""      $http_mcp_session_id;
    default $http_mcp_param_session;
  }
  upstream sandboxd {
    hash $sandboxd_key consistent;
${replicas.map((r) => `    server 127.0.0.1:${r.port} max_fails=0;`).join("\n")}
  }
  server {
    listen 127.0.0.1:${port};
    location /mcp {
      proxy_pass http://sandboxd;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
      proxy_next_upstream error timeout;
      proxy_next_upstream_tries 3;
    }
  }
}
`;
}

async function startNginx(replicas) {
  return String((await nginxStart(ws, (port) => nginxConf(port, replicas))).url);
}

let url, nextId = 1;
// One POST: a 2026-07-28 request with the headers it mirrors (Mcp-Param-Session from session_id),
// or with legacy set, a 2025-11-25 one in that Mcp-Session-Id. The parsed answer and the response.
async function post(method, params, legacy) {
  const headers = { Accept: "application/json, text/event-stream", "Content-Type": "application/json",
    Authorization: `Bearer ${TOKEN}` };
  if (legacy) {
    headers["MCP-Protocol-Version"] = "2025-11-25";
    if (legacy.sid) headers["Mcp-Session-Id"] = legacy.sid;
  } else {
    params = { ...params, _meta: META };
    Object.assign(headers, { "MCP-Protocol-Version": MODERN, "Mcp-Method": method });
    if (method === "tools/call") headers["Mcp-Name"] = params.name;
    const sid = params.arguments?.session_id;
    if (sid) headers["Mcp-Param-Session"] = sid;
  }
  const r = await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }) });
  const text = await r.text();
  const msg = text.startsWith("{") ? JSON.parse(text)
    : text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6))).at(-1);
  return { msg, res: r };
}
const tool = (name, args, legacy) => post("tools/call", { name, arguments: args }, legacy);
const text = (m) => m.result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
const hash = (sid) => createHash("sha256").update(sid).digest("hex").slice(0, 16);
const sessionsIn = (r) => new Set(readFileSync(r.audit, "utf8").split("\n").filter(Boolean)
  .map((l) => JSON.parse(l).session).filter(Boolean));

test("sessions behind nginx: each session's calls on its replica; a killed replica ends only its own",
  { skip: !NGINX && "no nginx (scripts/install-deps installs it)", timeout: 120000 }, async () => {
    const ports = [];
    while (ports.length < REPLICAS) { const p = await freePort(); if (!ports.includes(p)) ports.push(p); }
    const ring = join(dir, "ring");
    writeFileSync(ring, ports.map((p) => `127.0.0.1:${p}\n`).join(""));
    const replicas = await Promise.all(ports.map((p, i) => startReplica(i, p, ring)));
    url = await startNginx(replicas);

    // 2026-07-28: session_start goes round robin; the handle routes back to its maker.
    const sessions = [];
    for (let i = 0; i < SESSIONS; i++) {
      const { msg } = await tool("session_start", {});
      assert.equal(msg.result.isError, false, JSON.stringify(msg));
      sessions.push(msg.result.structuredContent.session_id);
    }
    for (const [i, sid] of sessions.entries()) {
      const { msg } = await tool("run_python", { code: `x = ${i}`, session_id: sid });
      assert.equal(msg.result.isError, false, text(msg));
    }
    for (let round = 0; round < 3; round++)
      for (const [i, sid] of sessions.entries()) {
        const { msg } = await tool("run_python", { code: "x += 100; print(x)", session_id: sid });
        assert.equal(text(msg).trim().split("\n")[0], String(i + 100 * (round + 1)), text(msg));
      }

    // 2025-11-25: the transport session's id routes back to the replica that made it, and so does
    // every session made in it.
    const legacy = [];
    for (let i = 0; i < LEGACY; i++) {
      const init = { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } };
      const { res } = await post("initialize", init, {});
      const sid = res.headers.get("mcp-session-id");
      assert.ok(sid, "no Mcp-Session-Id");
      const l = { sid };
      const { msg } = await tool("session_start", {}, l);
      l.session = msg.result.structuredContent.session_id;
      await tool("run_python", { code: `y = ${i}`, session_id: l.session }, l);
      legacy.push(l);
    }
    for (const [i, l] of legacy.entries()) {
      const { msg, res } = await tool("run_python", { code: "print(y)", session_id: l.session }, l);
      assert.equal(res.status, 200);
      assert.equal(text(msg).trim(), String(i), text(msg));
    }

    // Each session's audit records are in one replica's log, and the sessions are spread out.
    const owners = replicas.map(sessionsIn);
    const all = [...sessions, ...legacy.map((l) => l.session)];
    for (const sid of all)
      assert.equal(owners.filter((o) => o.has(hash(sid))).length, 1, `session ${sid} in more than one log`);
    assert.ok(owners.filter((o) => o.size > 0).length >= 2, "every session on one replica");

    // Kill one replica: its sessions end with a clear error, the others' keep their state.
    const victim = replicas.findIndex((r, i) => owners[i].size > 0);
    replicas[victim].p.kill("SIGKILL");
    await waitExit(replicas[victim].p, 5000);
    let lost = 0;
    for (const [i, sid] of sessions.entries()) {
      const { msg } = await tool("run_python", { code: "print(x)", session_id: sid });
      if (owners[victim].has(hash(sid))) {
        lost++;
        assert.equal(msg.result.isError, true);
        assert.match(text(msg), /unknown session sbx_.*survives a restart.*session_start/s);
      } else {
        assert.equal(text(msg).trim(), String(i + 300), text(msg));
      }
    }
    assert.ok(lost > 0 && lost < SESSIONS, `lost ${lost} of ${SESSIONS}`);
  });
