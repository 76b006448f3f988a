// Runs INSIDE the sandbox, under node: what ordinary Node programs do, one check each, printed as
// one JSON object {name: "ok" | "ERROR: ..."}. The allowlist was checked against it under strace
// (sandboxd.policy(5), THE SHIPPED ALLOWLIST, Node.js); tests/integration/test_node.py runs it
// under the shipped policies. Self-contained: the sandbox sees only this code. Writes only /tmp.
"use strict";
const assert = require("node:assert");
const cp = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const http = require("node:http");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const zlib = require("node:zlib");
const { Worker } = require("node:worker_threads");

const facts = {};
async function check(name, fn) {
  try {
    const v = await fn();
    facts[name] = v === undefined ? "ok" : v;
  } catch (e) {
    facts[name] = `ERROR: ${e && e.code ? e.code + " " : ""}${e && e.message ? e.message : e}`;
  }
}

// (module (memory (export "m") 1) (func (export "add") (param i32 i32) (result i32)
//   local.get 0 local.get 1 i32.add))
const WASM = Buffer.from(
  "0061736d0100000001070160027f7f017f03020100050301000107" +
  "0b02016d0200036164640000" + "0a09010700200020016a0b", "hex");

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wl-"));

  await check("fs_sync", () => {
    const f = path.join(dir, "a.txt");
    fs.writeFileSync(f, "hello");
    fs.appendFileSync(f, " world");
    assert.strictEqual(fs.readFileSync(f, "utf8"), "hello world");
    fs.copyFileSync(f, f + ".copy");
    fs.renameSync(f + ".copy", f + ".moved");
    fs.symlinkSync(f, f + ".link");
    assert.strictEqual(fs.realpathSync(f + ".link"), f);
    fs.chmodSync(f, 0o600);
    fs.utimesSync(f, 1, 2);
    assert.strictEqual(fs.statSync(f).mtimeMs, 2000);
    fs.truncateSync(f, 5);
    fs.mkdirSync(path.join(dir, "d/e"), { recursive: true });
    assert.deepStrictEqual(fs.readdirSync(dir).sort(), ["a.txt", "a.txt.link", "a.txt.moved", "d"]);
    fs.statfsSync(dir);
    fs.rmSync(path.join(dir, "d"), { recursive: true });
  });
  await check("fs_async", async () => {
    const f = path.join(dir, "b.bin");
    const data = crypto.randomBytes(1 << 20);
    await fs.promises.writeFile(f, data);
    const h = await fs.promises.open(f, "r");
    const { bytesRead } = await h.read(Buffer.alloc(10), 0, 10, 100);
    await h.close();
    assert.strictEqual(bytesRead, 10);
    await fs.promises.cp(f, f + ".cp");
    await new Promise((ok, ko) =>
      fs.createReadStream(f).pipe(zlib.createGzip()).pipe(fs.createWriteStream(f + ".gz"))
        .on("finish", ok).on("error", ko));
    assert.ok(zlib.gunzipSync(fs.readFileSync(f + ".gz")).equals(data));
  });
  await check("fs_watch", () => new Promise((ok, ko) => {
    const w = fs.watch(dir, () => { w.close(); ok(); });
    w.on("error", ko);
    setTimeout(() => fs.writeFileSync(path.join(dir, "watched"), "x"), 20);
  }));
  await check("child_process", async () => {
    assert.strictEqual(cp.execSync("echo $((6 * 7))").toString(), "42\n");
    const r = cp.spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid > 1))"]);
    assert.strictEqual(r.stdout.toString(), "true");
    await new Promise((ok, ko) => {
      const child = path.join(dir, "child.js");
      fs.writeFileSync(child, "process.on('message', (m) => process.send(m * 2));");
      const c = cp.fork(child); // an IPC channel: a socketpair
      c.on("message", (m) => { assert.strictEqual(m, 42); c.kill(); ok(); });
      c.on("error", ko);
      c.send(21);
    });
  });
  await check("worker_threads", () => new Promise((ok, ko) => {
    const sab = new SharedArrayBuffer(4);
    const w = new Worker(`const { workerData, parentPort } = require("node:worker_threads");
      const a = new Int32Array(workerData); Atomics.store(a, 0, 7); Atomics.notify(a, 0);
      parentPort.postMessage(require("node:crypto").createHash("md5").update("x").digest("hex"));`,
    { eval: true, workerData: sab });
    w.on("message", (m) => {
      assert.strictEqual(Atomics.load(new Int32Array(sab), 0), 7);
      assert.strictEqual(m, "9dd4e461268c8034f5c8564e155c67a6");
      w.terminate().then(() => ok());
    });
    w.on("error", ko);
  }));
  await check("http_loopback", () => new Promise((ok, ko) => {
    const srv = http.createServer((req, res) => res.end("pong " + req.url));
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      // By name: dns.lookup("localhost") through getaddrinfo (/etc/hosts).
      http.get(`http://localhost:${port}/x`, (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => { srv.close(); body === "pong /x" ? ok() : ko(new Error(body)); });
      }).on("error", ko);
    });
  }));
  await check("tcp_ipv6_loopback", () => new Promise((ok, ko) => {
    const srv = net.createServer((s) => s.end("v6"));
    srv.on("error", ko);
    srv.listen(0, "::1", () => {
      const c = net.connect(srv.address().port, "::1");
      c.on("data", (d) => { srv.close(); d.toString() === "v6" ? ok() : ko(new Error(String(d))); });
      c.on("error", ko);
    });
  }));
  await check("crypto", async () => {
    assert.strictEqual(crypto.createHash("sha256").update("abc").digest("hex").slice(0, 8), "ba7816bf");
    const key = crypto.randomBytes(32), iv = crypto.randomBytes(12);
    const c = crypto.createCipheriv("aes-256-gcm", key, iv);
    const ct = Buffer.concat([c.update("secret"), c.final()]);
    const d = crypto.createDecipheriv("aes-256-gcm", key, iv).setAuthTag(c.getAuthTag());
    assert.strictEqual(Buffer.concat([d.update(ct), d.final()]).toString(), "secret");
    const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519");
    assert.ok(crypto.verify(null, Buffer.from("m"), publicKey, crypto.sign(null, Buffer.from("m"), privateKey)));
    await new Promise((ok, ko) => crypto.pbkdf2("pw", "salt", 1000, 32, "sha256", (e) => (e ? ko(e) : ok())));
    await crypto.subtle.digest("SHA-256", Buffer.from("x"));
    assert.strictEqual(crypto.randomUUID().length, 36);
  });
  await check("webassembly", async () => {
    const { instance } = await WebAssembly.instantiate(WASM);
    assert.strictEqual(instance.exports.add(40, 2), 42);
    instance.exports.m.grow(16);
    new Uint8Array(instance.exports.m.buffer).fill(1);
    const big = new WebAssembly.Memory({ initial: 256, maximum: 65536 }); // 16 MiB, may grow to 4 GiB
    big.grow(256);
  });
  await check("timers_and_os", async () => {
    await new Promise((ok) => setTimeout(ok, 5));
    assert.ok(os.cpus().length >= 1 && os.totalmem() > 0 && os.uptime() >= 0);
    assert.strictEqual(os.userInfo().username, "sandbox");
    assert.strictEqual(os.hostname(), "sandbox");
    process.hrtime.bigint();
    assert.ok(performance.now() > 0);
  });
  fs.rmSync(dir, { recursive: true });
  console.log(JSON.stringify(facts));
}

main();
