// Tool calls as tasks (MCP 2025-11-25 utilities/tasks; sandboxd-mcp(7), TASKS), driven through the
// official TypeScript SDK's experimental task client: its schemas check our CreateTaskResult,
// tasks/get, tasks/result, tasks/list and tasks/cancel answers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { CallToolResultSchema, CreateTaskResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { connect, processesWith, SANDBOXD, sleep, sleeperCode, waitGone } from './helpers.mjs';

assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: run make`);

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

describe('tasks through the sdk', () => {
  let conn;
  before(async () => { conn = await connect(); });
  after(async () => {
    await conn?.client.close();
    assert.doesNotMatch(conn?.stderr() ?? '', /Sanitizer|runtime error/);
  });

  test('capability, taskSupport, and a call streamed as a task', async () => {
    const caps = conn.client.getServerCapabilities();
    assert.deepEqual(caps.tasks?.requests?.tools?.call, {});
    const { tools } = await conn.client.listTools(); // the SDK learns which tools are tasks
    const code = tools.filter((t) => t.name === 'run_python' || t.name === 'execute_code');
    assert.equal(code.length, 2);
    assert.ok(code.every((t) => t.execution?.taskSupport === 'optional'));
    // session_start and session_end are quick: not tasks (no execution.taskSupport: forbidden).
    assert.ok(tools.filter((t) => t.name.startsWith('session_')).every((t) => !t.execution));
    const seen = [];
    let result;
    const stream = conn.client.experimental.tasks.callToolStream(
      { name: 'run_python', arguments: { code: 'import time; time.sleep(0.5); print(6 * 7)' } }, undefined,
      { task: { ttl: 60000 } });
    for await (const m of stream) {
      seen.push(m.type);
      if (m.type === 'result') result = m.result;
      if (m.type === 'error') throw m.error;
    }
    assert.equal(seen[0], 'taskCreated');
    assert.equal(seen.at(-1), 'result');
    assert.equal(text(result), '42\n');
    assert.equal(result.structuredContent.status, 'ok');
  });

  test('getTask, getTaskResult, listTasks, cancelTask', async () => {
    const tasks = conn.client.experimental.tasks;
    const marker = `sbx-sdk-task-${process.pid}`;
    const created = await conn.client.request(
      { method: 'tools/call', params: { name: 'run_python', arguments: { code: sleeperCode(marker) }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    assert.equal((await tasks.getTask(id)).status, 'working');
    // tasks/list is declared where the caller is known: not to a stateless request without a token.
    if (conn.client.getServerCapabilities().tasks.list) {
      const listed = await tasks.listTasks();
      assert.ok(listed.tasks.some((t) => t.taskId === id));
    }
    for (let i = 0; i < 100 && processesWith(marker).length === 0; i++) await sleep(50);
    assert.ok(processesWith(marker).length > 0);
    const cancelled = await tasks.cancelTask(id);
    assert.equal(cancelled.status, 'cancelled');
    assert.deepEqual(await waitGone(marker, 5000), []);
    await assert.rejects(tasks.cancelTask(id), (e) => e instanceof McpError && e.code === -32602);
    await assert.rejects(tasks.getTask('0'.repeat(32)), (e) => e instanceof McpError && e.code === -32602);
    const quick = await conn.client.request(
      { method: 'tools/call', params: { name: 'run_python', arguments: { code: 'print("later")' }, task: {} } },
      CreateTaskResultSchema);
    const r = await tasks.getTaskResult(quick.task.taskId, CallToolResultSchema); // waits until it has ended
    assert.equal(text(r), 'later\n');
    assert.equal(r._meta['io.modelcontextprotocol/related-task'].taskId, quick.task.taskId);
  });
});
