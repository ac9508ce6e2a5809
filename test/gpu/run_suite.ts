/**
 * Runs one gpu suite (a module that registers cases with test/gpu/harness.ts) in this plain Node
 * process and prints one JSON line per case: `{"index", "name", "ok", "error"?}`. Usage:
 *   node --import tsx test/gpu/run_suite.ts test/gpu/matmul.suite.ts [from] [to]
 * runs cases from..to-1 (default all); `--list` prints the case names only.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { writeSync } from 'node:fs';
import { registered } from './harness.js';

// Synchronous writes: a pipe write is asynchronous in Node and would be lost if the process aborts later.
const line = (x: object): void => {
  writeSync(1, JSON.stringify(x) + '\n');
};

const file = process.argv[2];
if (!file) throw new Error('usage: run_suite.ts <suite file>');
await import(pathToFileURL(resolve(file)).href);
const { cases, hooks } = registered();
if (process.argv[3] === '--list') {
  line(cases.map((c) => c.name));
  process.exit(0);
}
const from = Number(process.argv[3] ?? 0), to = Number(process.argv[4] ?? cases.length);
for (const h of hooks.beforeAll) await h();
for (let index = from; index < to; index++) {
  const c = cases[index];
  const t0 = performance.now();
  try {
    await c.fn();
    line({ index, name: c.name, ok: true, ms: performance.now() - t0 });
  } catch (e) {
    line({ index, name: c.name, ok: false, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
  }
}
line({ done: true });
for (const h of hooks.afterAll) await h();
// Leave without waiting for Dawn's threads to wind down (SwiftShader aborted at teardown at times).
process.exit(0);
