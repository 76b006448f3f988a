// Claude Code's CLI registers `sandboxd mcp` in a throwaway HOME and reports it Connected.
// The CLI is installed once into tests/.work/claude-code (CLAUDE_CODE_TEST=0 skips this test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, SANDBOXD, startHttp } from './helpers.mjs';

const VERSION = '2.1.197';
const DIR = join(REPO, 'tests/.work/claude-code');
const CLAUDE = join(DIR, 'node_modules/.bin/claude');

function install() {
  if (existsSync(CLAUDE)) return null;
  mkdirSync(DIR, { recursive: true });
  try {
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--prefix', DIR,
      `@anthropic-ai/claude-code@${VERSION}`], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 300000 });
  } catch (e) {
    return `cannot install @anthropic-ai/claude-code@${VERSION}: ${e.stderr || e.message}`;
  }
  return existsSync(CLAUDE) ? null : 'the claude binary is missing after npm install';
}

const skip = process.env.CLAUDE_CODE_TEST === '0' ? 'CLAUDE_CODE_TEST=0' : false;

test('claude mcp add + claude mcp list shows sandboxd Connected', { skip, timeout: 400000 }, (t) => {
  const why = install();
  if (why) {
    t.skip(why);
    return;
  }
  const home = mkdtempSync(join(tmpdir(), 'sandboxd-claude-'));
  try {
    const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), DISABLE_AUTOUPDATER: '1' };
    const opts = { cwd: home, env, encoding: 'utf8', timeout: 90000 };
    // With the options that shape what the server offers (host directories, the client's roots).
    execFileSync(CLAUDE, ['mcp', 'add', 'sandboxd', '--', SANDBOXD, 'mcp', '--bind', `${home}:/data`, '--roots'],
      opts);
    const out = execFileSync(CLAUDE, ['mcp', 'list'], opts);
    assert.match(out, /sandboxd: .*sandboxd mcp --bind \S+:\/data --roots - ✔ Connected/, out);
    // With --output-dir (files out, #14) too.
    mkdirSync(join(home, 'out'));
    execFileSync(CLAUDE, ['mcp', 'add', 'sandboxd-files', '--', SANDBOXD, 'mcp', '--output-dir', join(home, 'out')], opts);
    const files = execFileSync(CLAUDE, ['mcp', 'list'], opts);
    assert.match(files, /sandboxd-files: .*--output-dir .* - ✔ Connected/, files);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

// Over Streamable HTTP with a bearer token (sandboxd-mcp(7) CLIENTS: claude mcp add --transport http ... --header).
test('claude mcp add --transport http with a token shows Connected; without it, not', { skip, timeout: 400000 }, async (t) => {
  const why = install();
  if (why) {
    t.skip(why);
    return;
  }
  const home = mkdtempSync(join(tmpdir(), 'sandboxd-claude-http-'));
  const token = `claude-test-${process.pid}-${Date.now()}-token`;
  writeFileSync(join(home, 'tokens'), `${token}\n`);
  chmodSync(join(home, 'tokens'), 0o600);
  const server = await startHttp(['--token-file', join(home, 'tokens'), '--warm', '0']);
  try {
    const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), DISABLE_AUTOUPDATER: '1' };
    const opts = { cwd: home, env, encoding: 'utf8', timeout: 90000 };
    const claude = (...args) => promisify(execFile)(CLAUDE, args, opts).then((r) => r.stdout);
    await claude('mcp', 'add', '--transport', 'http', 'sandboxd-http', server.url, '--header',
      `Authorization: Bearer ${token}`);
    await claude('mcp', 'add', '--transport', 'http', 'sandboxd-notoken', server.url);
    const out = await claude('mcp', 'list');
    assert.match(out, new RegExp(`sandboxd-http: ${server.url.replace(/[.]/g, '\\.')} \\(HTTP\\) - ✔ Connected`), out);
    assert.doesNotMatch(out, /sandboxd-notoken: .*✔ Connected/, out);
  } finally {
    await server.stop();
    rmSync(home, { recursive: true, force: true });
  }
});
