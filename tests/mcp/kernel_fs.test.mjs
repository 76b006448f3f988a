// Roots and --bind sources on kernel pseudo-filesystems (issue 34, item 6): a client's root
// `file:///proc` was bound at /roots/proc and the code read the host's process table. Such a root
// is skipped with a log line; such a --bind is exec's one-line refusal (exit 125). The file-system
// cases (statfs magic, a proc mounted elsewhere) are in tests/security/test_bind_kernel_fs.py.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { SANDBOXD, SERVER_ARGS, sleep } from './helpers.mjs';
import { stdoutOf } from './output.mjs';

assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: run make`);

const base = mkdtempSync(join(tmpdir(), 'sandboxd-kernelfs-'));
chmodSync(base, 0o755);
after(() => rmSync(base, { recursive: true, force: true }));

function oneLine(args) {
  const r = spawnSync(SANDBOXD, args, { encoding: 'utf8', input: '', env: process.env });
  return { status: r.status, line: r.stderr.trim() };
}

describe('--bind on the host\'s kernel directories', () => {
  for (const src of ['/proc', '/proc/1', '/sys/kernel', '/dev/shm']) {
    test(`--bind ${src}: exit 125, one line, as exec`, () => {
      const m = oneLine([...SERVER_ARGS, '--bind', `${src}:/data`]);
      const e = oneLine(['exec', '--bind', `${src}:/data`, '-c', 'pass']);
      assert.equal(m.status, 125, m.line);
      assert.equal(m.line.split('\n').length, 1, m.line);
      assert.equal(m.line, e.line);
      assert.match(m.line, /is never bound/);
    });
  }
});

describe('--roots', () => {
  test('roots on /proc, /sys and /dev are skipped with a log line; the others are bound', async () => {
    const proj = join(base, 'proj');
    mkdirSync(proj, { mode: 0o755 });
    symlinkSync('/proc', join(base, 'via-link'));
    const uris = ['file:///proc', 'file:///proc/1', 'file:///sys/kernel', 'file:///dev/shm', 'file:///dev',
      `${pathToFileURL(join(base, 'via-link')).href}/1`];
    const transport = new StdioClientTransport({
      command: SANDBOXD, args: [...SERVER_ARGS, '--roots', '--warm', '0'], env: { ...process.env }, stderr: 'pipe',
    });
    let stderr = '';
    transport.stderr?.on('data', (d) => { stderr += d; });
    const client = new Client({ name: 'kernel-fs-tests', version: '1.0.0' }, { capabilities: { roots: {} } });
    let asked = false;
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked = true;
      return { roots: [...uris.map((uri) => ({ uri })), { uri: pathToFileURL(proj).href }] };
    });
    await client.connect(transport);
    try {
      // The last skip logged: the answer was read (the first call could otherwise beat it).
      for (let i = 0; i < 100 && !(asked && stderr.includes(`${uris[5]}\` skipped`)); i++) await sleep(100);
      assert.ok(asked, 'the client was never asked for its roots');
      const r = await client.callTool({ name: 'run_python', arguments: {
        code: 'import os\nprint(sorted(os.listdir("/roots")))' } });
      assert.equal(stdoutOf(r), "['proj']\n", JSON.stringify(r));
      for (const [uri, why] of [['file:///proc', '/proc'], ['file:///proc/1', '/proc'],
        ['file:///sys/kernel', '/sys'], ['file:///dev/shm', '/dev'], ['file:///dev', '/dev'],
        [uris[5], '/proc']])
        assert.ok(stderr.includes(`root \`${uri}\` skipped: the host's ${why} is never bound`),
          `stderr lacks the skip of ${uri}:\n${stderr.slice(0, 3000)}`);
    } finally {
      await client.close();
    }
  });
});
