// The code's standard output and error from a run_python result, as structuredContent carries them
// (the same shaped text as the text block: valid UTF-8, head and tail past --text-limit). No
// imports: tests/proxy uses it too.
export function outputOf(r) {
  const sc = r.structuredContent ?? {};
  return { stdout: sc.stdout ?? '', stderr: sc.stderr ?? '' };
}

export const stdoutOf = (r) => outputOf(r).stdout;
export const stderrOf = (r) => outputOf(r).stderr;
