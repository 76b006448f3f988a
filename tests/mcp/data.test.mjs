// run_python on the data rootfs (make rootfs-data): matplotlib figures shown with plt.show() and
// figures left open when the code ends are saved to /workspace/out (src/inside/sandboxd/plots.py
// and the runner's end-of-run hook), and nothing changes where matplotlib is absent.
// Skipped without the data rootfs, except with CI=true (make check builds it).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, REPO } from './helpers.mjs';
import { stderrOf, stdoutOf } from './output.mjs';

const SLIM = process.env.SANDBOXD_ROOTFS || resolve(REPO, 'rootfs/python-3.14-slim');
const DATA = process.env.SANDBOXD_DATA_ROOTFS || join(dirname(SLIM), 'python-3.14-data');
const CI = ['1', 'true', 'yes'].includes((process.env.CI || '').toLowerCase());
const haveData = existsSync(join(DATA, 'usr/bin/python3'));
if (!haveData && CI) assert.fail(`CI=true and the data rootfs ${DATA} is missing (make rootfs-data)`);
const skip = haveData ? false : `no data rootfs at ${DATA} (make rootfs-data)`;

const run = (client, args) => client.callTool({ name: 'run_python', arguments: args });

// The helpers (and so the backend) are in every run; these calls also list a configured server
// (never started: the code calls none), as code that composes tools and plots would. The last
// test of the first group runs without servers and without a config.
let cfgDir;
const SERVERS = { servers: ['none'] };
function config() {
  cfgDir = mkdtempSync(join(tmpdir(), 'sandboxd-data-'));
  const file = join(cfgDir, 'servers.json');
  writeFileSync(file, JSON.stringify({ mcpServers: { none: { command: '/bin/false', description: 'never started' } } }));
  return file;
}

// Printed by an atexit handler, which runs after the runner's end-of-run hook: what is in
// /workspace/out then, each file's size, PNG magic and IHDR width and height.
const REPORT = `
import atexit, json, os, struct
def _report():
    out = {}
    d = "/workspace/out"
    for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        b = open(os.path.join(d, n), "rb").read(24)
        out[n] = [os.path.getsize(os.path.join(d, n)), b[:8].hex(), *struct.unpack(">II", b[16:24])]
    print("FILES " + json.dumps(out))
atexit.register(_report)
`;
const filesOf = (r) => JSON.parse(stdoutOf(r).split('\n').find((l) => l.startsWith('FILES ')).slice(6));
const PNG = '89504e470d0a1a0a';

const PLOTS = `${REPORT}
import matplotlib.pyplot as plt
print("backend", plt.get_backend())
plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2, 3], [1, 4, 9])
plt.show()                       # figure-1.png, closed
plt.figure(figsize=(2, 1), dpi=100); plt.bar([1, 2], [3, 4])
print("open", plt.get_fignums())  # (number 1 again) left open: figure-2.png at the end
`;

describe('data rootfs: plots', { skip }, () => {
  let conn;
  before(async () => { conn = await connect(['--rootfs', DATA, '--config', config()]); });
  after(async () => {
    await conn?.client.close();
    if (cfgDir) rmSync(cfgDir, { recursive: true, force: true });
    assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
  });

  test('plt.show() saves the figure; one left open is saved when the code ends', async () => {
    const r = await run(conn.client, { code: PLOTS, ...SERVERS });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    assert.match(stdoutOf(r), /^backend module:\/\/sandboxd\.plots\nopen \[1\]\n/);
    // no font scan, no cache-directory warning: the list built into the image is used
    assert.equal(stderrOf(r), '');
    const files = filesOf(r);
    assert.deepEqual(Object.keys(files), ['figure-1.png', 'figure-2.png']);
    assert.deepEqual(files['figure-1.png'].slice(1), [PNG, 400, 300]);
    assert.deepEqual(files['figure-2.png'].slice(1), [PNG, 200, 100]);
    assert.ok(files['figure-1.png'][0] > 1000, JSON.stringify(files));
  });

  test('a figure the code saved itself is not saved again at the end; one never saved is', async () => {
    const code = `${REPORT}\nimport matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2), dpi=100); plt.plot([1, 2])\n` +
      'plt.savefig("/workspace/out/mine.png")\nplt.figure(figsize=(2, 2), dpi=100); plt.plot([3])';
    const r = await run(conn.client, { code });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    const files = filesOf(r);
    assert.deepEqual(Object.keys(files), ['figure-1.png', 'mine.png']);
    assert.deepEqual(files['mine.png'].slice(1), [PNG, 300, 200]);
    assert.deepEqual(files['figure-1.png'].slice(1), [PNG, 200, 200]);
  });

  test('a backend the code picks is kept; nothing saved then', async () => {
    const code = `${REPORT}\nimport matplotlib\nmatplotlib.use("agg")\nimport matplotlib.pyplot as plt\nplt.plot([1]); plt.show()\nprint("backend", plt.get_backend())`;
    const r = await run(conn.client, { code, ...SERVERS });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    assert.match(stdoutOf(r), /^backend agg\n/);
    assert.deepEqual(filesOf(r), {});
  });

  test('an error in the code: open figures are still saved, the status is the error', async () => {
    const code = `${REPORT}\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\nraise ValueError("after plotting")`;
    const r = await run(conn.client, { code, ...SERVERS });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.exit_code, 1);
    assert.match(stderrOf(r), /ValueError: after plotting/);
    assert.deepEqual(Object.keys(filesOf(r)), ['figure-1.png']);
  });

  test('/workspace/out not a directory: show() raises, a figure left open is one line', async () => {
    const code = [
      'import os, shutil',
      'shutil.rmtree("/workspace/out", ignore_errors=True)',
      'open("/workspace/out", "w").write("not a directory")',
      'import matplotlib.pyplot as plt',
      'plt.plot([1])',
      'try:',
      '    plt.show()',
      'except OSError as e:',
      '    print("show:", type(e).__name__)',
      'plt.plot([2])',
      'print("open", plt.get_fignums())',
    ].join('\n');
    const r = await run(conn.client, { code, ...SERVERS });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    assert.equal(r.structuredContent.exit_code, 0);
    assert.equal(stdoutOf(r), 'show: FileExistsError\nopen [1]\n');
    assert.equal(stderrOf(r), 'sandboxd: figure 1 not saved: FileExistsError: [Errno 17] File exists: \'/workspace/out\'\n');
  });

  test('files out: the figures come back as image blocks and in structuredContent.files', async () => {
    const r = await run(conn.client, { code: PLOTS, ...SERVERS });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    const images = r.content.filter((c) => c.type === 'image');
    assert.equal(images.length, 2, JSON.stringify(r.content.map((c) => c.type)));
    const dims = images.map((c) => {
      assert.equal(c.mimeType, 'image/png');
      const b = Buffer.from(c.data, 'base64');
      assert.equal(b.subarray(0, 8).toString('hex'), PNG);
      return [b.readUInt32BE(16), b.readUInt32BE(20)];
    });
    assert.deepEqual(dims.sort(), [[200, 100], [400, 300]]);
    const files = r.structuredContent.files;
    assert.deepEqual(files.map((f) => f.path).sort(), ['figure-1.png', 'figure-2.png']);
    for (const f of files) {
      assert.equal(f.mime_type, 'image/png');
      assert.match(f.sha256, /^[0-9a-f]{64}$/);
      assert.ok(f.size > 0 && !f.omitted, JSON.stringify(f));
    }
  });

  test('without servers (and without a config): the helpers are there, plots work', async () => {
    const bare = await connect(['--rootfs', DATA]);
    try {
      const probe = await run(bare.client, { code: 'import sys; print("/run/sandboxd/python" in sys.path)' });
      assert.equal(stdoutOf(probe), 'True\n');
      const p = await run(bare.client, { code: PLOTS });
      assert.equal(p.isError, false, JSON.stringify(p.content));
      assert.deepEqual(Object.keys(filesOf(p)), ['figure-1.png', 'figure-2.png']);
    } finally {
      await bare.client.close();
    }
    const r = await run(conn.client, { code: PLOTS });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    assert.deepEqual(Object.keys(filesOf(r)), ['figure-1.png', 'figure-2.png']);
  });
});

describe('slim rootfs: no matplotlib, no effect', () => {
  let conn;
  before(async () => { conn = await connect(['--rootfs', SLIM, '--config', config()]); });
  after(async () => {
    await conn?.client.close();
    if (cfgDir) rmSync(cfgDir, { recursive: true, force: true });
  });

  test('the backend is named but nothing imports matplotlib or writes /workspace/out', async () => {
    const code = `${REPORT}\nimport os, sys\nprint(os.environ.get("MPLBACKEND"), "matplotlib" in sys.modules)`;
    const r = await run(conn.client, { code, ...SERVERS });
    assert.equal(r.isError, false, JSON.stringify(r.content));
    assert.match(stdoutOf(r), /^module:\/\/sandboxd\.plots False\n/);
    assert.equal(stderrOf(r), '');
    assert.deepEqual(filesOf(r), {});
  });
});

// The README's worked example, as Claude Code meets it: a CSV in a host directory bound at /data,
// read with pandas, charted with matplotlib; the chart comes back as an image block (decoded
// here), and with --output-dir both files are saved on the host with the sha256 reported.
describe('data rootfs: a chart of a CSV from a bound directory (README)', { skip }, () => {
  let conn, dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandboxd-readme-'));
    mkdirSync(join(dir, 'data'));
    mkdirSync(join(dir, 'reports'));
    const rows = ['month,region,revenue'];
    for (const [m, n, s] of [['2026-01', 120, 95], ['2026-02', 135, 101], ['2026-03', 150, 99]])
      rows.push(`${m},north,${n}`, `${m},south,${s}`);
    writeFileSync(join(dir, 'data', 'sales.csv'), rows.join('\n') + '\n');
    conn = await connect(['--rootfs', DATA, '--bind', `${join(dir, 'data')}:/data`,
      '--output-dir', join(dir, 'reports')]);
  });
  after(async () => {
    await conn?.client.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
  });

  test('pandas reads it, the chart is an image block, both files saved with their sha256', async () => {
    const { tools } = await conn.client.listTools();
    assert.match(tools.find((t) => t.name === 'run_python').description, /\/data: host directory, read-only/);
    const code = [
      'import pandas as pd',
      'import matplotlib.pyplot as plt',
      'df = pd.read_csv("/data/sales.csv")',
      'pivot = df.pivot(index="month", columns="region", values="revenue")',
      'print(pivot.to_string())',
      'pivot.plot(marker="o", title="Revenue by region", figsize=(6, 4))',
      'plt.savefig("/workspace/out/revenue.png", dpi=80)',
      'pivot.to_csv("/workspace/out/pivot.csv")',
    ].join('\n');
    const r = await run(conn.client, { code });
    assert.equal(r.isError, false, JSON.stringify(r.content).slice(0, 500));
    assert.match(stdoutOf(r), /2026-02\s+135\s+101/);
    const [img] = r.content.filter((c) => c.type === 'image');
    assert.equal(img.mimeType, 'image/png');
    const png = Buffer.from(img.data, 'base64');
    assert.equal(png.subarray(0, 8).toString('hex'), PNG);
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [480, 320]);
    const files = Object.fromEntries(r.structuredContent.files.map((f) => [f.path, f]));
    assert.deepEqual(Object.keys(files).sort(), ['pivot.csv', 'revenue.png']);
    for (const f of Object.values(files)) {
      const host = fileURLToPath(f.uri);
      assert.ok(host.startsWith(join(dir, 'reports') + '/'), host);
      const bytes = readFileSync(host);
      assert.equal(bytes.length, f.size);
      assert.equal(createHash('sha256').update(bytes).digest('hex'), f.sha256);
    }
    assert.equal(readFileSync(fileURLToPath(files['pivot.csv'].uri), 'utf8'),
      'month,north,south\n2026-01,120,95\n2026-02,135,101\n2026-03,150,99\n');
    assert.ok(png.equals(readFileSync(fileURLToPath(files['revenue.png'].uri))));
    const links = r.content.filter((c) => c.type === 'resource_link').map((l) => l.name).sort();
    assert.deepEqual(links, ['pivot.csv', 'revenue.png']);
    // The bound directory is read-only.
    const w = await run(conn.client, { code: 'open("/data/x", "w")' });
    assert.match(stderrOf(w), /OSError: \[Errno 30\] Read-only file system/);
  });
});
