// Runs INSIDE the sandbox, under node: pushes one limit until it bites (the JavaScript
// counterpart of limits.py). Usage: node limits.js heap|buffer|spin|sleep [MiB]
//   heap    JavaScript objects until V8's heap or the sandbox's memory limit stops it
//   buffer  Buffers (memory outside V8's heap), every page touched
//   spin    a busy loop, never ending
//   sleep   a timer that never fires in time
// Prints {"mode": ..., "allocated_mib": N} when the allocation finished (it should not), and
// progress on stderr.
"use strict";
// As a file or as `node -e CODE ARG...` (there the arguments start at argv[1]).
const args = process.argv.slice(require.main === module ? 2 : 1);
const mode = args[0];
const mib = Number(args[1] || 4096);
const keep = [];

if (mode === "heap") {
  // 1 MiB of small objects at a time: what a program that leaks keeps.
  for (let i = 0; i < mib; i++) {
    const chunk = new Array(1 << 15);
    for (let j = 0; j < chunk.length; j++) chunk[j] = { i, j, s: "x" + j };
    keep.push(chunk);
    if (i % 64 === 0) process.stderr.write(`heap ${i} MiB\n`);
  }
} else if (mode === "buffer") {
  for (let i = 0; i < mib; i++) {
    keep.push(Buffer.alloc(1 << 20, 1)); // filled: the pages really exist
    if (i % 64 === 0) process.stderr.write(`buffer ${i} MiB\n`);
  }
} else if (mode === "spin") {
  for (;;);
} else if (mode === "sleep") {
  setTimeout(() => {}, 1e9);
} else {
  console.error(`limits.js: unknown mode ${mode}`);
  process.exit(2);
}
if (mode === "heap" || mode === "buffer") console.log(JSON.stringify({ mode, allocated_mib: keep.length }));
