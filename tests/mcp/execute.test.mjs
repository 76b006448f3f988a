// execute_code with the official TypeScript SDK client (issue #16 item 3): its schema (the SDK
// checks every structuredContent against the outputSchema it listed), bash run as `bash -c`,
// code larger than an argument, the isolation essentials probed in bash, a timeout,
// cancellation and progress, --tools and --warm-lang, and JavaScript when its rootfs is built.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect, processesWith, REPO, sleep, waitGone } from './helpers.mjs';

const exec = (client, args, opts) => client.callTool({ name: 'execute_code', arguments: args }, undefined, opts);
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

for (const mode of ['cold', 'warm']) {
  describe(`execute_code, ${mode}`, () => {
    let conn;
    before(async () => {
      conn = await connect(mode === 'warm' ? ['--warm', '1', '--warm-lang', 'python,bash'] : ['--warm', '0']);
      await conn.client.listTools(); // the SDK validates results against the schemas it lists
    });
    after(() => conn.client.close());

    test('the common result fields, for bash', async () => {
      const r = await exec(conn.client, { language: 'bash', code: 'echo out; echo err >&2; exit 5' });
      const sc = r.structuredContent;
      assert.equal(sc.stdout, 'out\n');
      assert.equal(sc.stderr, 'err\n');
      assert.equal(sc.exit_code, 5);
      assert.equal(sc.success, false);
      assert.equal(sc.status, 'error');
      assert.equal(r.isError, true);
      assert.ok(Number.isInteger(sc.execution_time_ms) && typeof sc.memory_used_mb === 'number');
      assert.equal(sc.truncated, false);
    });

    test('bash probes: identity, no capabilities, seccomp, loopback only, read-only root', async () => {
      const r = await exec(conn.client, {
        language: 'bash',
        code: 'id -u; grep -E "^(CapEff|CapBnd|Seccomp|NoNewPrivs):" /proc/self/status | tr -d "\\t"\n'
          + 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "; (exec 3<>/dev/tcp/192.0.2.1/80) 2>&1 | tail -1 | sed "s/.*: //"\n'
          + `[ -e ${REPO} ] && echo host-visible; (: > /usr/x) 2>&1 | sed "s/.*: //"`,
      });
      assert.equal(r.structuredContent.stdout,
        '1000\nCapEff:0000000000000000\nCapBnd:0000000000000000\nNoNewPrivs:1\nSeccomp:2\nlo\n'
        + 'Network is unreachable\nRead-only file system\n', text(r));
    });

    test('code of 1 MiB, more than one argument may hold, reaches bash whole', async () => {
      const code = `${': '.padEnd(1 << 20, 'x')}\necho "$((1 + 1)) $LINENO"`;
      const r = await exec(conn.client, { language: 'bash', code });
      assert.equal(r.structuredContent.stdout, '2 2\n', text(r).slice(-300));
    });

    test('a timeout kills the run at its deadline', async () => {
      const t0 = Date.now();
      const r = await exec(conn.client, { language: 'bash', code: 'echo a; sleep 60', timeout: 1 });
      assert.equal(r.structuredContent.status, 'timeout');
      assert.equal(r.structuredContent.exit_code, 124);
      assert.ok(Date.now() - t0 < 8000);
    });

    test('cancellation kills the sandbox and leaves no process behind', async () => {
      const marker = `xcancel_${randomUUID().replace(/-/g, '')}`;
      const ac = new AbortController();
      const p = exec(conn.client, { language: 'bash', code: `exec -a ${marker} sleep 60` }, { signal: ac.signal });
      const until = Date.now() + 5000;
      while (!processesWith(marker).length && Date.now() < until) await sleep(20);
      assert.ok(processesWith(marker).length > 0, 'the code never started');
      ac.abort('test');
      await assert.rejects(p);
      assert.deepEqual(await waitGone(marker), []);
    });

    test('progress while it runs', async () => {
      const seen = [];
      const r = await exec(conn.client, { language: 'bash', code: 'sleep 1.4; echo done' },
        { onprogress: (p) => seen.push(p), resetTimeoutOnProgress: true });
      assert.equal(r.structuredContent.stdout, 'done\n');
      assert.ok(seen.length >= 1, `${seen.length} notifications`);
    });

    test('python through execute_code, top-level await', async () => {
      const r = await exec(conn.client, { language: 'python', code: 'import asyncio\nawait asyncio.sleep(0)\nprint(7)' });
      assert.equal(r.structuredContent.stdout, '7\n');
      assert.equal(r.structuredContent.success, true);
    });

    // With rootfs/node-slim built (make rootfs-node); without it, javascript is not offered.
    test('javascript: an ES module with top-level await, or absent from the enum', async (t) => {
      const tools = (await conn.client.listTools()).tools;
      const lang = tools.find((x) => x.name === 'execute_code').inputSchema.properties.language.enum;
      if (!lang.includes('javascript')) {
        const r = await exec(conn.client, { language: 'javascript', code: '1' });
        assert.match(text(r), /javascript is not available here/);
        t.skip('no node-slim rootfs (make rootfs-node)');
        return;
      }
      const r = await exec(conn.client, {
        language: 'javascript',
        code: 'import { setTimeout as s } from "node:timers/promises";\nawait s(10);\nconsole.log(typeof require, 6 * 7);',
      });
      assert.equal(r.structuredContent.stdout, 'undefined 42\n', text(r));
    });
  });
}

test('--tools execute_code offers only it', async () => {
  const conn = await connect(['--tools', 'execute_code', '--warm', '0']);
  const { tools } = await conn.client.listTools();
  assert.deepEqual(tools.map((t) => t.name), ['execute_code']);
  // It says how bash and JavaScript run, in about 200 tokens at most (~4 characters a token).
  assert.match(tools[0].description, /`bash -c CODE`.*ES module.*top-level `await`/s);
  assert.ok(tools[0].description.length < 800, `description is ${tools[0].description.length} chars`);
  await assert.rejects(conn.client.callTool({ name: 'run_python', arguments: { code: 'print(1)' } }), /Unknown tool/);
  await conn.client.close();
});
