// Validate Kubernetes manifests against the API's schemas, offline, in two passes:
//  1. kubernetes-models' validators (JSON Schema generated from the Kubernetes OpenAPI: types,
//     enums, required fields, formats);
//  2. the TypeScript compiler over its types, which rejects a field the API does not have (those
//     schemas allow unknown properties; the API server drops or refuses them).
// Usage: node validate-k8s.mjs FILE.yaml...   Prints one line per problem, then
// "N passed, N failed" over the documents; exits 1 if any failed.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
// apiVersion -> the kubernetes-models module that holds its kinds.
const group = (apiVersion) => (apiVersion.includes("/") ? apiVersion : `v1`);

const docs = [];
let failed = 0;
const problem = (where, msg) => {
  console.log(`${where}: ${msg}`);
  failed++;
};
for (const file of process.argv.slice(2)) {
  parseAllDocuments(readFileSync(file, "utf8")).forEach((d, i) => {
    const where = `${basename(file)}#${i + 1}`;
    if (d.errors.length) return problem(where, `YAML: ${d.errors[0].message}`);
    const obj = d.toJSON();
    if (!obj?.apiVersion || !obj?.kind) return problem(where, "no apiVersion or kind");
    docs.push({ where, obj, bad: false });
  });
}

for (const doc of docs) {
  const { apiVersion, kind } = doc.obj;
  let mod;
  try {
    mod = await import(`kubernetes-models/${group(apiVersion)}/${kind}`);
  } catch {
    doc.bad = true;
    problem(doc.where, `unknown kind ${apiVersion} ${kind}`);
    continue;
  }
  try {
    new mod[kind](doc.obj).validate();
  } catch (e) {
    doc.bad = true;
    problem(doc.where, `${apiVersion} ${kind}: ${e.message.replaceAll("\n", "; ")}`);
  }
}

// Pass 2: each document as a typed object literal; excess-property errors name the field.
const ok = docs.filter((d) => !d.bad);
const tmp = mkdtempSync(join(tmpdir(), "validate-k8s-"));
try {
  symlinkSync(join(here, "node_modules"), join(tmp, "node_modules"));
  const lines = [];
  ok.forEach((d, i) => {
    const { apiVersion, kind } = d.obj;
    lines.push(`import type { I${kind} as T${i} } from "kubernetes-models/${group(apiVersion)}/${kind}";`);
    lines.push(`export const d${i}: T${i} = ${JSON.stringify(d.obj)};`);
  });
  writeFileSync(join(tmp, "m.ts"), lines.join("\n") + "\n");
  try {
    execFileSync(join(here, "node_modules", ".bin", "tsc"),
      ["--noEmit", "--strict", "--skipLibCheck", "--module", "esnext", "--moduleResolution", "bundler",
       "--target", "es2022", "--pretty", "false", join(tmp, "m.ts")], { encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    for (const line of String(e.stdout).split("\n").filter((l) => l.includes("error TS"))) {
      const m = line.match(/m\.ts\((\d+),\d+\): (.*)/);
      const d = m ? ok[Math.floor((Number(m[1]) - 1) / 2)] : null;
      if (d && !d.bad) d.bad = true;
      problem(d ? d.where : "tsc", m ? m[2] : line);
    }
    if (!ok.some((d) => d.bad)) problem("tsc", String(e.stdout || e.message).slice(0, 400));
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const nbad = docs.filter((d) => d.bad).length + (failed && !docs.some((d) => d.bad) ? 1 : 0);
console.log(`${docs.length - docs.filter((d) => d.bad).length} passed, ${nbad} failed`);
process.exit(failed ? 1 : 0);
