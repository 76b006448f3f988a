// Files out (#14 item 3): what the code leaves in /workspace/out comes back as image, resource or
// resource_link blocks and structuredContent.files, within max_artifacts and artifact_limit; with
// --output-dir it is copied to DIR/<request_id>/. And the hostile cases: links to host files,
// FIFOs and sockets, 100,000 files, a sparse terabyte, a writer left running, bad names, an
// output dir that is a link or not writable. Each gives a bounded answer, never a host read.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import {
  chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync,
  statSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, RawServer, REPO, SANDBOXD, SERVER_ARGS, waitGone } from './helpers.mjs';

const run = (client, code, opts) => client.callTool({ name: 'run_python', arguments: { code } }, undefined, opts);
const texts = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');
const fileEntry = (r, path) => r.structuredContent.files.find((f) => f.path === path);

const work = mkdtempSync(join(tmpdir(), 'sandboxd-files-'));
after(() => rmSync(work, { recursive: true, force: true }));

// Every file under dir, as paths relative to it (links not followed).
function tree(dir, prefix = '') {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    out.push(rel);
    if (e.isDirectory()) out.push(...tree(join(dir, e.name), rel));
  }
  return out;
}

// A w x h RGB PNG, written by plain Python (zlib + struct, no matplotlib), under NAME in out.
const pngCode = (name, w, h) => `
import struct, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
raw = b"".join(b"\\0" + b"".join(bytes([x % 256, y % 256, 128]) for x in range(${w})) for y in range(${h}))
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", ${w}, ${h}, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open("/workspace/out/${name}", "wb").write(png)
print("wrote", len(png))
`;

function ihdr(buf) {
  assert.equal(buf.subarray(0, 8).toString('latin1'), '\x89PNG\r\n\x1a\n');
  assert.equal(buf.subarray(12, 16).toString('latin1'), 'IHDR');
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

// A policy like the default one with one line changed (for the limits the tests must reach).
function policyWith(name, replace) {
  let text = readFileSync(resolve(REPO, 'policy/default.policy'), 'utf8').replace(/^name default$/m, `name ${name}`);
  for (const [re, line] of replace) {
    assert.match(text, re);
    text = text.replace(re, line);
  }
  const path = join(work, `${name}.policy`);
  writeFileSync(path, text);
  // Its include resolves in its own directory.
  for (const inc of readdirSync(resolve(REPO, 'policy')).filter((f) => f.endsWith('.inc')))
    writeFileSync(join(work, inc), readFileSync(resolve(REPO, 'policy', inc)));
  return path;
}

describe('files out', () => {
  for (const warm of ['2', '0']) {
    test(`a PNG written by plain Python comes back as an image block (--warm ${warm})`, async () => {
      const { client } = await connect(['--warm', warm]);
      // No extension: the type is told by the content.
      const r = await run(client, pngCode('picture', 37, 21));
      assert.equal(r.isError, false, texts(r));
      const img = r.content.filter((c) => c.type === 'image');
      assert.equal(img.length, 1);
      assert.equal(img[0].mimeType, 'image/png');
      const png = Buffer.from(img[0].data, 'base64');
      assert.deepEqual(ihdr(png), { width: 37, height: 21 });
      const f = fileEntry(r, 'picture');
      assert.equal(f.size, png.length);
      assert.equal(f.mime_type, 'image/png');
      assert.equal(f.sha256, sha256(png));
      assert.equal(f.uri, undefined); // not saved: no --output-dir
      await client.close();
    });
  }

  test('without files: no extra blocks, files is empty, /workspace/out exists empty', async () => {
    const { client } = await connect();
    const r = await run(client, 'import os; print(sorted(os.listdir("/workspace")), os.listdir("/workspace/out"), os.stat("/workspace/out").st_uid == os.getuid())');
    assert.equal(r.content.length, 1);
    assert.match(r.content[0].text, /\['out'\] \[\] True/);
    assert.deepEqual(r.structuredContent.files, []);
    await client.close();
  });

  test('small text is embedded as a resource, larger text only listed', async () => {
    const { client } = await connect();
    const r = await run(client, `
import os
os.makedirs("/workspace/out/tables")
open("/workspace/out/tables/a.csv", "w").write("x,y\\n1,2\\n")
open("/workspace/out/big.txt", "w").write("z" * (65 * 1024))
open("/workspace/out/blob", "wb").write(bytes(range(256)))
`);
    const res = r.content.filter((c) => c.type === 'resource');
    assert.equal(res.length, 1, JSON.stringify(r.content));
    assert.equal(res[0].resource.text, 'x,y\n1,2\n');
    assert.equal(res[0].resource.mimeType, 'text/csv');
    assert.equal(fileEntry(r, 'big.txt').size, 65 * 1024);
    assert.equal(fileEntry(r, 'big.txt').sha256, sha256(Buffer.from('z'.repeat(65 * 1024))));
    assert.equal(fileEntry(r, 'blob').mime_type, 'application/octet-stream');
    assert.ok(r.structuredContent.files.every((f) => !f.omitted));
    await client.close();
  });

  test('--output-dir: each file is saved under DIR/<request_id>/ with the sha256 reported, and linked', async () => {
    const dir = join(work, 'saved');
    mkdirSync(dir);
    const { client } = await connect(['--output-dir', dir]);
    const r = await run(client, `
import os
os.makedirs("/workspace/out/sub dir")
open("/workspace/out/sub dir/r\u00e9sultat #1.csv", "w").write("a,b\\n" * 1000)
print("out-marker")
import sys; print("err-marker", file=sys.stderr)
${pngCode('plot.png', 5, 3)}`);
    assert.equal(r.isError, false, texts(r));
    const f = fileEntry(r, 'sub dir/r\u00e9sultat #1.csv');
    assert.ok(f.uri.startsWith('file:///'), f.uri);
    assert.ok(f.uri.includes('sub%20dir/r%C3%A9sultat%20%231.csv'), f.uri);
    const host = fileURLToPath(f.uri);
    assert.ok(host.startsWith(dir + '/'), host);
    const bytes = readFileSync(host);
    assert.equal(sha256(bytes), f.sha256);
    assert.equal(bytes.length, f.size);
    const links = r.content.filter((c) => c.type === 'resource_link');
    assert.deepEqual(links.map((l) => l.name).sort(), ['plot.png', 'sub dir/r\u00e9sultat #1.csv']);
    const link = links.find((l) => l.name === 'plot.png');
    assert.equal(link.mimeType, 'image/png');
    assert.deepEqual(ihdr(readFileSync(fileURLToPath(link.uri))), { width: 5, height: 3 });
    // The image comes back as an image too; the text is linked, not embedded.
    assert.equal(r.content.filter((c) => c.type === 'image').length, 1);
    assert.equal(r.content.filter((c) => c.type === 'resource').length, 0);
    // One fresh directory for the call, named like the audit record's request_id, holding the
    // files and the whole output.
    const [id] = readdirSync(dir);
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.deepEqual(tree(join(dir, id)).sort(),
      ['plot.png', 'stderr.txt', 'stdout.txt', 'sub dir', 'sub dir/r\u00e9sultat #1.csv']);
    assert.match(readFileSync(join(dir, id, 'stdout.txt'), 'utf8'), /out-marker/);
    assert.match(readFileSync(join(dir, id, 'stderr.txt'), 'utf8'), /err-marker/);
    // A second call: a second directory.
    await run(client, 'open("/workspace/out/x", "w").write("x")');
    assert.equal(readdirSync(dir).length, 2);
    // Output alone, short: nothing written on the host.
    await run(client, 'print("short")');
    assert.equal(readdirSync(dir).length, 2);
    // Output alone, longer than the text shows: saved whole, and the cut line says where.
    const big = await run(client, 'print("".join(f"{i:06d}\\n" for i in range(20000)))');
    const ids = readdirSync(dir).filter((d) => d !== id);
    assert.equal(ids.length, 2);
    const bigId = ids.find((d) => existsSync(join(dir, d, 'stdout.txt')));
    const saved = join(dir, bigId, 'stdout.txt');
    assert.equal(readFileSync(saved, 'utf8').split('\n').length, 20002);
    assert.ok(big.structuredContent.stdout.includes(`characters of stdout cut here (text limit 40000); the whole captured stdout is in ${saved} ---\n`),
      big.structuredContent.stdout.slice(0, 200));
    assert.deepEqual(big.structuredContent.files, []);
    await client.close();
  });

  test('a protocol older than 2025-06-18 gets no resource_link; the text says where the files are', async () => {
    const dir = join(work, 'old-protocol');
    mkdirSync(dir);
    const s = new RawServer(['--output-dir', dir]);
    await s.initialize('2025-03-26');
    await s.send({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'run_python', arguments: { code: 'open("/workspace/out/data.csv", "w").write("1,2\\n")' } } });
    const r = (await s.reply(1)).result;
    assert.equal(r.content.filter((c) => c.type === 'resource_link').length, 0);
    const [id] = readdirSync(dir);
    const note = r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    assert.ok(note.includes(`saved in ${dir}/${id}/: data.csv`), note);
    assert.equal(r.structuredContent.files[0].uri, `file://${dir}/${id}/data.csv`);
    await s.close();
  });

  test('max_artifacts: one file more than the limit is listed as omitted, not returned', async () => {
    const { client } = await connect();
    const r = await run(client, 'for i in range(17): open(f"/workspace/out/f{i:02}.txt", "w").write(str(i))');
    const files = r.structuredContent.files;
    assert.equal(files.length, 17);
    assert.equal(files.filter((f) => !f.omitted).length, 16);
    assert.deepEqual(files.filter((f) => f.omitted).map((f) => [f.path, f.omitted]), [['f16.txt', 'max_artifacts']]);
    assert.equal(r.content.filter((c) => c.type === 'resource').length, 16);
    assert.match(texts(r), /1 file in \/workspace\/out not returned/);
    await client.close();
  });

  test('artifact_limit: a file over what is left is omitted by its size, the others come back', async () => {
    const { client } = await connect();
    const r = await run(client, `
open("/workspace/out/small.txt", "w").write("ok")
with open("/workspace/out/large.bin", "wb") as f:
    f.write(b"\\1" * (16 * 1024 * 1024 + 1))
`);
    assert.deepEqual(fileEntry(r, 'large.bin'), { path: 'large.bin', size: 16 * 1024 * 1024 + 1, omitted: 'artifact_limit' });
    assert.equal(fileEntry(r, 'small.txt').omitted, undefined);
    await client.close();
  });
});

describe('files out: hostile code', () => {
  test('a symlink in out to a host file is never followed: its content never comes back', async () => {
    const secret = join(work, 'host-secret.txt');
    const marker = `host-secret-${randomUUID()}`;
    writeFileSync(secret, marker);
    chmodSync(work, 0o755);
    const dir = join(work, 'saved-links');
    mkdirSync(dir);
    // Embedded (no --output-dir) and saved (with it): neither may carry the host file.
    for (const args of [[], ['--output-dir', dir]]) {
      const { client } = await connect(args);
      const r = await run(client, `
import os
os.symlink(${JSON.stringify(secret)}, "/workspace/out/secret")
os.symlink("/", "/workspace/out/root")
os.symlink("/proc/1/root${secret}", "/workspace/out/magic")
`);
      assert.equal(r.isError, false, texts(r));
      assert.ok(!JSON.stringify(r).includes(marker));
      assert.ok(r.structuredContent.files.every((f) => f.sha256 !== sha256(Buffer.from(marker))));
      for (const p of ['secret', 'root', 'magic']) assert.equal(fileEntry(r, p).omitted, 'symlink, not followed');
      // Nothing saved: no directory at all (no output, no files).
      assert.deepEqual(readdirSync(dir), []);
      await client.close();
    }
  });

  test('out itself replaced by a symlink to / or by a file: nothing is collected, and the text says so', async () => {
    const { client } = await connect();
    for (const src of ['os.symlink("/", "/workspace/out")', 'open("/workspace/out", "w").write("x")']) {
      const r = await run(client, `import os\nos.rmdir("/workspace/out")\n${src}`);
      assert.equal(r.isError, false, texts(r));
      assert.deepEqual(r.structuredContent.files, []);
      assert.match(texts(r), /\/workspace\/out is not a directory \(the code replaced it\); nothing collected/);
    }
    await client.close();
  });

  test('FIFOs cannot be made, and a socket in out is listed, never opened; no hang', async () => {
    const { client } = await connect();
    const t0 = Date.now();
    const r = await run(client, `
import os, socket
try:
    os.mkfifo("/workspace/out/fifo")
    print("fifo made")
except OSError as e:
    print("mkfifo:", e.errno)
s = socket.socket(socket.AF_UNIX)
s.bind("/workspace/out/sock")
s.listen()
`);
    assert.ok(Date.now() - t0 < 10000);
    const fifo = fileEntry(r, 'fifo');
    if (texts(r).includes('fifo made')) assert.equal(fifo.omitted, 'FIFO, not read');
    else assert.equal(fifo, undefined);
    assert.equal(fileEntry(r, 'sock').omitted, 'socket, not read');
    await client.close();
  });

  test('100,000 files: the walk stops at its bound and says so, within the normal call time', async () => {
    const { client } = await connect();
    const t0 = Date.now();
    const r = await run(client, `
import os
os.chdir("/workspace/out")
for i in range(100000):
    os.close(os.open(f"{i:06}", os.O_CREAT | os.O_WRONLY))
print("made")
`, { timeout: 120000 });
    assert.match(texts(r), /made/);
    const files = r.structuredContent.files;
    // 16 returned, 64 omitted entries listed; the rest only counted.
    assert.equal(files.filter((f) => !f.omitted).length, 16);
    assert.equal(files.filter((f) => f.omitted === 'max_artifacts').length, 64);
    assert.match(texts(r), /stopped looking in \/workspace\/out after 10000 entries/);
    const ms = r.structuredContent.execution_time_ms;
    console.log(`100,000 files: call ${Date.now() - t0} ms, of it the code ${ms} ms`);
    assert.ok(Date.now() - t0 - ms < 5000, `collecting took ${Date.now() - t0 - ms} ms`);
    await client.close();
  });

  test('a sparse 1 TB file is omitted by its size, never read', async () => {
    // fsize must allow the terabyte; tmpfs stores none of it.
    const policy = policyWith('files-sparse', [[/^fsize .*$/m, 'fsize 2T'], [/^max_fsize .*$/m, 'max_fsize 2T']]);
    const { client } = await connect(['--policy', policy]);
    const t0 = Date.now();
    const r = await run(client, 'open("/workspace/out/sparse", "wb").truncate(1 << 40)');
    assert.equal(r.isError, false, texts(r));
    assert.deepEqual(fileEntry(r, 'sparse'), { path: 'sparse', size: 2 ** 40, omitted: 'artifact_limit' });
    assert.ok(Date.now() - t0 < 5000);
    await client.close();
  });

  test('a file still being written by a process the code left behind: bounded, no hang, the writer killed', async () => {
    const marker = `writer-${randomUUID()}`;
    const { client } = await connect(['--warm', '0']);
    const t0 = Date.now();
    const r = await run(client, `
import subprocess, time
subprocess.Popen(["/usr/bin/python3", "-c", """
import os
f = os.open("/workspace/out/log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
while True:
    os.write(f, b"x" * 4096)
""", "${marker}"], start_new_session=True)
time.sleep(0.3)
print("left it running")
`);
    assert.ok(Date.now() - t0 < 10000, `${Date.now() - t0} ms`);
    assert.match(texts(r), /left it running/);
    assert.equal(r.structuredContent.status, 'ok');
    const f = fileEntry(r, 'log');
    assert.ok(f, JSON.stringify(r.structuredContent.files));
    // Whatever it held when the writer was killed: returned whole, or omitted by its size.
    assert.ok(f.omitted === 'artifact_limit' || f.sha256 === sha256(Buffer.alloc(f.size, 'x')), JSON.stringify(f));
    assert.deepEqual(await waitGone(marker), []);
    await client.close();
  });

  test('names with a newline, `..`-like names and invalid UTF-8 are never used on the host', async () => {
    const dir = join(work, 'saved-names');
    mkdirSync(dir);
    const { client } = await connect(['--output-dir', dir]);
    const r = await run(client, `
import os
os.chdir("/workspace/out")
for name in [b"new\\nline", b"..\\n", b"...", b".. ", b"bad\\xff", b"tab\\there", b"esc\\x1b[31m"]:
    open(name, "w").write("x")
os.makedirs(b"dir\\xfe/inner")
open(b"dir\\xfe/inner/f", "w").write("y")
`);
    assert.equal(r.isError, false, texts(r));
    const byReason = {};
    for (const f of r.structuredContent.files) byReason[f.path] = f.omitted ?? 'returned';
    assert.deepEqual(byReason, {
      '...': 'returned',
      '.. ': 'returned',
      '..\n': 'name holds a control character',
      'bad\ufffd': 'name is not valid UTF-8',
      'dir\ufffd': 'name is not valid UTF-8',
      'esc\u001b[31m': 'name holds a control character',
      'new\nline': 'name holds a control character',
      'tab\there': 'name holds a control character',
    });
    // Only the plain names were written, and only inside DIR/<request_id>/.
    const [id] = readdirSync(dir);
    assert.deepEqual(readdirSync(dir), [id]);
    assert.deepEqual(tree(join(dir, id)).sort(), ['.. ', '...']);
    await client.close();
  });

  test('fds stay the same over calls with files (the workspace fd goes with its sandbox)', async () => {
    const { client, transport } = await connect(['--warm', '1']);
    const fds = () => readdirSync(`/proc/${transport.pid}/fd`).length;
    await run(client, 'open("/workspace/out/warmup", "w").write("1")');
    // Once the pool is topped up again (one warm sandbox, its fds).
    await new Promise((res) => setTimeout(res, 500));
    const before = fds();
    for (let i = 0; i < 5; i++) {
      const r = await run(client, `open("/workspace/out/f{i}", "w").write("x" * 1000000)`.replace('{i}', i));
      assert.equal(r.structuredContent.files.length, 1);
    }
    await run(client, 'print(1)');
    await new Promise((res) => setTimeout(res, 500));
    assert.equal(fds(), before);
    // No fd of the server is a tmpfs of a sandbox that has ended: each is closed with it.
    const links = readdirSync(`/proc/${transport.pid}/fd`).map((n) => {
      try { return readlinkSync(`/proc/${transport.pid}/fd/${n}`); } catch { return ''; }
    });
    assert.ok(links.filter((l) => l === '/').length <= 1, links.join(' '));
    await client.close();
  });
  test('the pinned workspace tmpfs is freed with its sandbox (Shmem does not grow by what the calls wrote)', async () => {
    const shmem = () => Number(/^Shmem:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;
    const { client } = await connect(['--warm', '0']);
    await run(client, 'print(1)');
    const before = shmem();
    // 3 x 100 MiB held after the code ended, until each call is answered.
    for (let i = 0; i < 3; i++) {
      const r = await run(client, 'open("/workspace/out/big", "wb").write(b"x" * (100 << 20))');
      assert.deepEqual(fileEntry(r, 'big'), { path: 'big', size: 100 << 20, omitted: 'artifact_limit' });
    }
    await new Promise((res) => setTimeout(res, 300));
    // Leaked, they would add 300 MiB; the margin is for what else runs on the host.
    const grown = shmem() - before;
    assert.ok(grown < 150 << 20, `Shmem grew by ${grown} bytes`);
    await client.close();
  });
});

describe('files out: --output-dir refused at start', () => {
  const start = (dir) => spawnSync(SANDBOXD, [...SERVER_ARGS, '--output-dir', dir], { input: '', encoding: 'utf8' });

  test('a symlink to a directory', () => {
    const real = join(work, 'real-out');
    mkdirSync(real);
    const link = join(work, 'link-out');
    symlinkSync(real, link);
    const p = start(link);
    assert.equal(p.status, 125);
    assert.match(p.stderr, /--output-dir `[^`]*link-out` is a symlink; give the directory itself/);
    assert.equal(p.stderr.trim().split('\n').length, 1, p.stderr);
    assert.deepEqual(readdirSync(real), []);
  });

  test('inside a --bind-rw tree, or reached through a link in one', () => {
    // A later sandbox could replace what an earlier call saved before the client reads it.
    const tree = join(work, 'rw-tree');
    mkdirSync(join(tree, 'deep', 'out'), { recursive: true });
    for (const d of [tree, join(tree, 'deep', 'out')]) {
      const p = spawnSync(SANDBOXD, [...SERVER_ARGS, '--bind-rw', `${tree}:/workspace/rw`, '--output-dir', d],
        { input: '', encoding: 'utf8' });
      assert.equal(p.status, 125, p.stderr);
      assert.match(p.stderr, /--output-dir `[^`]*` is inside a --bind-rw tree; the sandboxes could change saved files/);
      assert.equal(p.stderr.trim().split('\n').length, 1, p.stderr);
    }
    // A directory link the code could have planted in the tree is not followed to a safe place.
    const safe = join(work, 'safe-out');
    mkdirSync(safe);
    symlinkSync(work, join(tree, 'escape'));
    const p = spawnSync(SANDBOXD, [...SERVER_ARGS, '--bind-rw', `${tree}:/workspace/rw`, '--output-dir',
      join(tree, 'escape', 'safe-out')], { input: '', encoding: 'utf8' });
    assert.equal(p.status, 125, p.stderr);
    assert.equal(p.stderr.trim().split('\n').length, 1, p.stderr);
    // Beside the tree: fine.
    const ok = spawnSync(SANDBOXD, [...SERVER_ARGS, '--bind-rw', `${tree}:/workspace/rw`, '--output-dir', safe],
      { input: '', encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stderr);
  });

  test('not a directory, or missing', () => {
    const file = join(work, 'a-file');
    writeFileSync(file, '');
    for (const d of [file, join(work, 'missing')]) {
      const p = start(d);
      assert.equal(p.status, 125, p.stderr);
      assert.match(p.stderr, /--output-dir/);
      assert.equal(p.stderr.trim().split('\n').length, 1, p.stderr);
    }
  });

  test('not writable', (t) => {
    // As root permissions do not stop us: a read-only file system does. Unprivileged: mode 0555.
    const dir = join(work, 'ro-out');
    mkdirSync(dir);
    let mounted = false;
    if (process.getuid() === 0) {
      const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', dir]);
      if (m.status !== 0) {
        if (process.env.CI === 'true') assert.fail(`mount a read-only tmpfs: ${m.stderr}`);
        t.skip('cannot mount a read-only tmpfs here');
        return;
      }
      mounted = true;
    } else {
      chmodSync(dir, 0o555);
    }
    try {
      const p = start(dir);
      assert.equal(p.status, 125, p.stderr);
      assert.match(p.stderr, /--output-dir `[^`]*ro-out`: not writable/);
      assert.equal(p.stderr.trim().split('\n').length, 1, p.stderr);
    } finally {
      if (mounted) spawnSync('umount', [dir]);
    }
  });
});
