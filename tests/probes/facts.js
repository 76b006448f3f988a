// Runs INSIDE the sandbox, under node: prints one JSON object of isolation facts for the tests to
// judge (tests/integration/test_node.py), the JavaScript counterpart of facts.py. Every fact is
// gathered on its own; one that cannot be read is {"error": ...}, so one surprise does not hide the
// others. Usage: node facts.js [HOST_PATH...]: paths that exist on the host (the test's own files),
// reported as seen from inside.
"use strict";
const fs = require("node:fs");
const net = require("node:net");
const dgram = require("node:dgram");
const os = require("node:os");

const facts = {};
async function fact(name, fn) {
  try {
    facts[name] = await fn();
  } catch (e) {
    facts[name] = { error: `${e.code || e.name}: ${e.message}` };
  }
}
const code = (e) => e.code || e.name;

function status() {
  const out = {};
  for (const line of fs.readFileSync("/proc/self/status", "utf8").split("\n")) {
    const [k, v] = line.split(":\t");
    if (/^Cap|^(NoNewPrivs|Seccomp|Seccomp_filters|Uid|Gid)$/.test(k)) out[k] = v.trim();
  }
  return out;
}

function tryOpenWrite(p, flags) {
  try {
    fs.closeSync(fs.openSync(p, flags, 0o600));
    if (flags.includes("x")) fs.unlinkSync(p);
    return "yes";
  } catch (e) {
    return code(e);
  }
}

function connect(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 2000 });
    s.on("connect", () => { s.destroy(); resolve("connected"); });
    s.on("timeout", () => { s.destroy(); resolve("timeout"); });
    s.on("error", (e) => resolve(code(e)));
  });
}

function udpSend(host, port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket("udp4");
    s.on("error", (e) => { s.close(); resolve(code(e)); });
    s.send("x", port, host, (e) => { s.close(); resolve(e ? code(e) : "sent"); });
  });
}

async function main() {
  await fact("ids", () => ({
    uid: process.getuid(), euid: process.geteuid(), gid: process.getgid(), egid: process.getegid(),
    groups: process.getgroups(), user: os.userInfo().username,
  }));
  for (const m of ["uid_map", "gid_map"])
    await fact(m, () => fs.readFileSync(`/proc/self/${m}`, "utf8").trim().split("\n").map((l) => l.trim().split(/\s+/)));
  await fact("status", status);
  await fact("hostname", () => os.hostname());
  await fact("interfaces", () =>
    fs.readFileSync("/proc/net/dev", "utf8").split("\n").slice(2).filter((l) => l.includes(":"))
      .map((l) => l.split(":")[0].trim()));
  await fact("outside_network", async () => ({
    tcp4: await connect("10.255.255.1", 80),
    tcp4_public: await connect("1.1.1.1", 443),
    udp4: await udpSend("1.1.1.1", 53),
  }));
  await fact("loopback", () => new Promise((resolve) => {
    const srv = net.createServer((s) => s.end("hi"));
    srv.listen(0, "127.0.0.1", () => {
      const c = net.connect(srv.address().port, "127.0.0.1");
      c.on("data", (d) => { srv.close(); resolve(String(d)); });
      c.on("error", (e) => { srv.close(); resolve(code(e)); });
    });
  }));
  await fact("host_paths", () => {
    const out = {};
    // As a file or as `node -e CODE ARG...` (there the arguments start at argv[1]).
    for (const p of process.argv.slice(require.main === module ? 2 : 1)) {
      try {
        fs.statSync(p);
        out[p] = "exists";
      } catch (e) {
        out[p] = code(e);
      }
    }
    return out;
  });
  await fact("processes", () => fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n)).map(Number));
  await fact("writable", () => {
    const out = {};
    for (const d of ["/", "/usr", "/usr/bin", "/etc", "/bin", "/lib", "/var", "/root", "/home", "/opt",
                     "/tmp", "/workspace", "/dev/shm"])
      out[d] = tryOpenWrite(`${d === "/" ? "" : d}/.sbx-probe-${process.pid}`, "wx");
    for (const f of ["/etc/passwd", "/usr/bin/node", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger"])
      out[f] = tryOpenWrite(f, "r+");
    return out;
  });
  // Every mount point and its per-mount options (ro, nosuid, nodev...).
  await fact("mounts", () => Object.fromEntries(
    fs.readFileSync("/proc/self/mountinfo", "utf8").trim().split("\n").map((l) => l.split(" "))
      .map((f) => [f[4], f[5].split(",")])));
  await fact("env", () => ({ ...process.env }));
  await fact("node", () => ({ version: process.versions.node, execPath: process.execPath, argv: process.argv }));
  console.log(JSON.stringify(facts));
}

main();
