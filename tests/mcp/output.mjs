// The code's standard output and error from a run_python result. The reply carries them once, in
// the text block (stdout, then a line `--- stderr ---` and stderr, then sandboxd's own `--- ...`
// lines); structuredContent gives their sizes. No imports: tests/proxy uses it too.
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
const NOTE = /(?:^|\n)(?=--- (?:\d+ bytes of control|output truncated at|status: ))/;

// Up to the first of sandboxd's lines, without the newline it adds when the output lacked one.
function upTo(s, marker, bytes) {
  const m = marker.exec(s);
  let part = m ? s.slice(0, m.index + (m[0].length ? 1 : 0)) : s;
  if (m && part.endsWith('\n') && Buffer.byteLength(part) === bytes + 1) part = part.slice(0, -1);
  return [part, m ? s.slice(m.index + m[0].length) : ''];
}

export function outputOf(r) {
  const sc = r.structuredContent ?? {};
  const t = text(r);
  if (!sc.stdout_bytes && !sc.stderr_bytes) return { stdout: '', stderr: '' };
  const [stdout, rest] = upTo(t, /(?:^|\n)(?=--- stderr ---\n|--- (?:\d+ bytes of control|output truncated at|status: ))/,
    sc.stdout_bytes);
  if (!rest.startsWith('--- stderr ---\n')) return { stdout, stderr: '' };
  const [stderr] = upTo(rest.slice('--- stderr ---\n'.length), NOTE, sc.stderr_bytes);
  return { stdout, stderr };
}

export const stdoutOf = (r) => outputOf(r).stdout;
export const stderrOf = (r) => outputOf(r).stderr;
