/**
 * README's TypeScript blocks, so the documentation cannot drift from the library: every ```ts block is
 * written to build/readme/, type-checked (strict, against the shipped .d.ts: 'groupdnn' resolves to
 * dist/ through the package's "exports", as in a user's project) and run with tsx; it must exit by
 * itself with status 0. A block opened with ```ts fragment is only type-checked (it may use names
 * declared as `declare const` at its top); plain ```js / ```sh blocks are not code to run.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { root, tsc } from './pack_helpers.js';
import { useSwiftShaderWithoutDriver } from './swiftshader_env.js';

const run = promisify(execFile);
const dir = join(root, 'build/readme');

interface Block { readonly file: string; readonly line: number; readonly fragment: boolean; readonly code: string }

/** The ```ts blocks of a markdown text, with the line each starts on. */
export function tsBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```ts(?:\s+(\S+))?\s*$/.exec(lines[i]);
    if (!open) continue;
    if (open[1] !== undefined && open[1] !== 'fragment') throw new Error(`README.md:${i + 1}: unknown block marker '${open[1]}' (ts or ts fragment)`);
    const start = i + 1;
    while (i + 1 < lines.length && lines[i + 1] !== '```') i++;
    const fragment = open[1] === 'fragment';
    const n = blocks.length + 1;
    // `export {}`: each block is a module of its own (top-level await, no shared names).
    blocks.push({ file: `block${n}${fragment ? '_fragment' : ''}.ts`, line: start, fragment, code: `${lines.slice(start, i + 1).join('\n')}\nexport {};\n` });
    i++;
  }
  return blocks;
}

const blocks = tsBlocks(readFileSync(join(root, 'README.md'), 'utf8'));

beforeAll(() => {
  expect(existsSync(join(root, 'dist/types/index.d.ts')), 'dist/ is missing: npm test builds it').toBe(true);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const b of blocks) writeFileSync(join(dir, b.file), `// README.md line ${b.line}\n${b.code}`);
  // No "paths": the blocks import 'groupdnn' as a user's code does (the package's own name and exports).
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023', 'esnext.disposable'], types: ['node'], skipLibCheck: false, noEmit: true },
    files: blocks.map((b) => b.file),
  }));
});

describe('README', () => {
  it('has runnable TypeScript blocks, among them the matmul and the MoE layer examples', () => {
    expect(blocks.filter((b) => !b.fragment).length).toBeGreaterThanOrEqual(2);
    expect(blocks.some((b) => b.code.includes('moe.layer.PrimitiveDesc'))).toBe(true);
  });

  it('every ts block type-checks against the shipped types', async () => {
    const r = await run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8' }).catch((e: { stdout: string; stderr: string }) => e);
    expect('code' in r ? `${r.stdout}${r.stderr}` : '').toBe('');
  }, 120_000);

  it.each(blocks.filter((b) => !b.fragment).map((b) => [b.file, b] as const))('%s runs with tsx and exits by itself', async (_name, b) => {
    const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');
    // The gpu engine's block needs an adapter: SwiftShader where the machine has no GPU driver, as the gpu tests.
    const env = useSwiftShaderWithoutDriver();
    const r = await run(process.execPath, [tsx, join(dir, b.file)], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 })
      .catch((e: { code?: number; signal?: string; stdout: string; stderr: string }) => e);
    expect('code' in r || 'signal' in r ? `README.md line ${b.line}: ${JSON.stringify({ code: r.code, signal: r.signal })}\n${r.stderr}` : '').toBe('');
  }, 90_000);
});
