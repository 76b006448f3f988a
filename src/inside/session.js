// SPDX-License-Identifier: Apache-2.0
// A javascript session's interpreter (`sandboxd mcp`, session_start; src/mcp/mcp_sessions.c):
// sandboxd runs `node -e` on this file (embedded by src/mcp/mcp_runner.c), in the javascript
// rootfs, with the session's own stdout and stderr pipes at 1 and 2 and its control socket at 3.
//
// Node cannot take fds over SCM_RIGHTS, so a call does not bring its own pipes as a Python
// session's does. Between calls this process drops what the code writes to process.stdout and
// process.stderr; per call, sandboxd drops what else is waiting in the session's pipes (a child
// process's output since the last call), then writes the job frame on fd 3 (4-byte big-endian length,
// "done\n", the code). This loop empties /workspace/out, runs the code, and answers the status
// byte on fd 3 once all the call wrote is in the pipes (flushed); sandboxd then takes what is in
// them as the call's output. EOF on fd 3 ends the session.
//
// The code runs through Node's own REPL evaluator (useGlobal), as the `node` REPL runs a line:
// top-level declarations (let, const, class, function) stay for the next call, and top-level
// `await` works. Unlike a one-shot call (an ES module) static `import` is refused (`await
// import()` works), and `require` is there. An uncaught error prints its stack to stderr and
// gives status 1; the process lives on. At a call's time limit sandboxd sends SIGINT: synchronous
// code is interrupted (breakEvalOnSigint), a pending `await` is abandoned; code that does not come
// back (a busy loop after an await) is killed with the session.
'use strict';
(() => {
  const fs = require('node:fs');
  const net = require('node:net');
  const path = require('node:path');
  const repl = require('node:repl');
  const util = require('node:util');
  const { Readable, Writable } = require('node:stream');

  const OUT_DIR = '/workspace/out';
  let call = null; // the running call: {done}

  // The frames of this loop and of the REPL under the code's: not the code's.
  const plumbing = /^\s+at .*(node:vm:|node:repl:|node:domain:|node:internal\/vm|\[eval\])/;

  function printError(e) {
    let text;
    try {
      if (e instanceof Error && typeof e.stack === 'string') {
        const lines = e.stack.split('\n');
        const cut = lines.findIndex((l) => plumbing.test(l));
        if (cut > 0) e.stack = lines.slice(0, cut).join('\n');
      }
      text = e instanceof Error ? String(e.stack) : 'Uncaught ' + util.inspect(e);
      if (e instanceof SyntaxError && /import statement/.test(e.message))
        text += '\n(a session runs the code as a script: use `const m = await import("...")`)';
    } catch {
      text = 'Uncaught exception';
    }
    try {
      process.stderr.write(text + '\n');
    } catch {}
  }

  // An error no call catches: the running call's end (status 1, as a one-shot node exits), or,
  // between calls, its stack on stderr (dropped before the next call) and nothing else.
  function uncaught(e) {
    printError(e);
    if (call) call.done(1);
  }
  process.on('uncaughtException', uncaught);
  process.on('unhandledRejection', uncaught);
  function interrupted() {
    if (!call) return; // late: no call runs
    try {
      process.stderr.write('Interrupted (SIGINT): the call stopped waiting for what it awaited\n');
    } catch {}
    call.done(130);
  }
  process.on('SIGINT', interrupted);

  // Between calls what the code's background work writes is dropped, as a Python session's goes
  // to /dev/null: neither queued in this process nor left in the pipes for the next call.
  const writes = new Map();
  for (const s of [process.stdout, process.stderr]) {
    writes.set(s, s.write);
    s.write = function write(chunk, encoding, cb) {
      if (call) return writes.get(s).apply(s, arguments);
      const done = typeof encoding === 'function' ? encoding : cb;
      if (typeof done === 'function') process.nextTick(done);
      return true;
    };
  }

  // The REPL's streams: no input ever, output dropped (the code's own console writes to 1 and 2).
  const input = new Readable({ read() {} });
  const output = new Writable({ write(_c, _e, cb) { cb(); } });
  const r = repl.start({ input, output, prompt: '', terminal: false, useGlobal: true,
                         breakEvalOnSigint: true, ignoreUndefined: true });
  // An error thrown by the code, now or in a callback it made, reaches the REPL's domain: ours
  // first, before the REPL's own listener trims the error's stack to what it prints.
  r._domain.prependListener('error', uncaught);

  function emptyOut() {
    let names = [];
    try {
      names = fs.readdirSync(OUT_DIR);
    } catch {}
    for (const n of names) {
      try {
        fs.rmSync(path.join(OUT_DIR, n), { recursive: true, force: true });
      } catch {}
    }
  }

  const ctl = new net.Socket({ fd: 3, readable: true, writable: true });
  let buf = Buffer.alloc(0);
  let jobs = [];

  function start(code) {
    emptyOut();
    let over = false;
    call = {
      done(status) {
        if (over) return;
        over = true;
        call = null;
        if (status === 0 && process.exitCode) status = Number(process.exitCode) & 0xff;
        process.exitCode = undefined;
        flushed(() => {
          ctl.write(Buffer.from([status]));
          next();
        });
      },
    };
    const me = call;
    // Not ours while the code runs: the REPL's SIGINT watchdog is (breakEvalOnSigint). Node's
    // signal handle for a listener, removed later, would put back SIGINT's default over it.
    process.removeListener('SIGINT', interrupted);
    try {
      r.eval(code, r.context, '[session]', (err) => {
        if (err) printError(err);
        // After the rejections the code's synchronous part left unhandled (its own, as a one-shot
        // node's would be).
        setImmediate(() => me.done(err ? 1 : 0));
      });
    } catch (e) {
      uncaught(e);
    } finally {
      process.on('SIGINT', interrupted);
    }
  }

  // Node writes to a pipe at once while it has room, and queues the rest: the status byte waits
  // until all the call wrote is in the pipes (an empty write's callback comes after the others').
  function flushed(cb) {
    const busy = [process.stdout, process.stderr].filter((s) => s.writableLength > 0);
    let n = busy.length;
    if (!n) return cb();
    for (const s of busy) writes.get(s).call(s, '', () => --n || cb());
  }

  function next() {
    if (!call && jobs.length) start(jobs.shift());
  }

  ctl.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const frame = buf.subarray(4, 4 + buf.readUInt32BE(0)).toString();
      buf = buf.subarray(4 + buf.readUInt32BE(0));
      jobs.push(frame.slice(frame.indexOf('\n') + 1));
    }
    next();
  });
  ctl.on('end', () => process.exit(0));
  ctl.on('error', () => process.exit(0));
})();
