// What the scale tests share (replicas.test.mjs, sessions.test.mjs): a temporary directory with a
// token file, processes killed and the directory removed at the end, free ports, and nginx run
// unprivileged from a config in that directory (every path in it), writing nothing outside it.
import { after } from "node:test";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SANDBOXD = process.env.SANDBOXD || join(repo, "build", "sandboxd");
export const NGINX = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((p) => existsSync(p));

export const exited = (p) => p.exitCode !== null || p.signalCode !== null;
export function waitExit(p, ms) {
  return exited(p) ? Promise.resolve() : new Promise((res) => {
    const t = setTimeout(() => { p.kill("SIGKILL"); }, ms);
    p.once("exit", () => { clearTimeout(t); res(); });
  });
}

// The test's directory (prefix names it), its bearer token and token file, and the processes to
// stop at the end (push each one started).
export function workspace(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const procs = [];
  const token = prefix + Math.random().toString(36).slice(2);
  const tokens = join(dir, "tokens");
  writeFileSync(tokens, `${token}\n`, { mode: 0o600 });
  after(async () => {
    for (const p of procs) if (!exited(p)) p.kill("SIGTERM");
    await Promise.all(procs.map((p) => waitExit(p, 5000)));
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, procs, token, tokens };
}

export function freePort() {
  return new Promise((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => res(port)); });
  });
}

// nginx's own settings for a config in dir: its pid, logs and temporary files there.
export function nginxHead(dir) {
  const t = (n) => join(dir, n);
  return `worker_processes 1;
daemon off;
pid ${t("nginx.pid")};
error_log ${t("error.log")} warn;
events { worker_connections 512; }`;
}
export function nginxTemps(dir) {
  const t = (n) => join(dir, n);
  return `access_log ${t("access.log")};
  client_body_temp_path ${t("body")};
  proxy_temp_path ${t("proxy")};
  fastcgi_temp_path ${t("fastcgi")};
  uwsgi_temp_path ${t("uwsgi")};
  scgi_temp_path ${t("scgi")};`;
}

// nginx with conf(port) in ws.dir, checked with -t first; resolves once it answers.
export async function startNginx(ws, conf) {
  const port = await freePort();
  const path = join(ws.dir, "nginx.conf");
  writeFileSync(path, conf(port));
  // -p: the prefix (every relative path); -e: the error log before the config is read.
  execFileSync(NGINX, ["-t", "-q", "-p", ws.dir, "-e", join(ws.dir, "error.log"), "-c", path], { stdio: "pipe" });
  const p = spawn(NGINX, ["-p", ws.dir, "-e", join(ws.dir, "error.log"), "-c", path], { stdio: "ignore" });
  ws.procs.push(p);
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/mcp`, { method: "GET" });
      await r.arrayBuffer();
      return { p, url: new URL(`http://127.0.0.1:${port}/mcp`) };
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`nginx did not answer: ${readFileSync(join(ws.dir, "error.log"), "utf8")}`);
}
