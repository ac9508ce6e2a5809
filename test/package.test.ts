/**
 * The package as users get it. A copy of the repository's files without dist/ (what a clone or a git
 * install starts from) is packed with `npm pack`, which runs the `prepare` script (the build); the
 * tarball holds dist/ and LICENSE and installs into an empty project, where a strict TypeScript
 * consumer type-checks against the shipped .d.ts, runs with plain `node` and exits. The shipped types
 * also compile in a Node-only project (lib ES2022 + @types/node, no DOM) and a DOM-only one (no
 * @types/node), with skipLibCheck off, and hold no `@internal` member. Bundlers: test/bundlers.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exec, installInto, linkDevPackage, pack, root, tsc } from './pack_helpers.js';

const work = mkdtempSync(join(tmpdir(), 'groupdnn-pkg-'));
const app = join(work, 'app');
let tgz = '';

/** The files a clone has: tracked and untracked-but-not-ignored ones (no dist/, no build/). */
function copyOfClone(to: string): void {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  for (const f of files) {
    if (!existsSync(join(root, f))) continue; // deleted in the working tree
    mkdirSync(dirname(join(to, f)), { recursive: true });
    cpSync(join(root, f), join(to, f));
  }
  symlinkSync(join(root, 'node_modules'), join(to, 'node_modules'), 'dir');
}

beforeAll(async () => {
  const clone = join(work, 'clone');
  copyOfClone(clone);
  expect(existsSync(join(clone, 'dist'))).toBe(false);
  tgz = (await pack(clone, 'groupdnn-tgz-', true)).tgz;
  await installInto(app, tgz);
}, 300_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  if (tgz) rmSync(dirname(tgz), { recursive: true, force: true });
});

/** Writes a TypeScript project (tsconfig + one file) and compiles it; returns tsc's output on failure. */
async function compile(dir: string, compilerOptions: Record<string, unknown>, source: string, file = 'consumer.ts'): Promise<{ status: number | null; out: string }> {
  writeFileSync(join(dir, `tsconfig.${file}.json`), JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', skipLibCheck: false, ...compilerOptions }, files: [file] }));
  writeFileSync(join(dir, file), source);
  const r = await exec(process.execPath, [tsc, '-p', join(dir, `tsconfig.${file}.json`)]);
  return { status: r.status, out: r.stdout + r.stderr };
}

/**
 * Type packages the shipped declarations reference (`/// <reference types="..." />`, e.g. the gpu
 * engine's @webgpu/types) are installed beside them, as a consumer's package manager would.
 */
function linkReferencedTypes(): void {
  const index = readFileSync(join(app, 'node_modules/groupdnn/dist/types/index.d.ts'), 'utf8');
  for (const m of index.matchAll(/<reference types="([^"]+)"/g)) linkDevPackage(app, m[1]);
}

/** What a types-only consumer touches: classes, namespaces, option objects, errors, disposal. */
const typesConsumer = `
import { ARG, DnnlError, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, tag, type Status } from 'groupdnn';
export async function run(): Promise<number> {
  const eng: Engine = await Engine.create({ threads: 1 });
  const strm = new Stream(eng);
  const srcMd = memory.desc.grouped([4, 8], dt.f32, 2, [RUNTIME_DIM_VAL, 8]);
  const dstMd = memory.desc.grouped([4, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
  const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 8, 4], dt.f32, tag.abc), dstMd));
  const src = Memory.create(srcMd, eng);
  offsets.fromSizes([4, 0], src.offsets);
  mm.execute(strm, { [ARG.SRC]: src });
  mm[Symbol.dispose]();
  const pd: moe.layer.PrimitiveDesc = new moe.layer.PrimitiveDesc(eng, { tokens: 4, hidden: 8, intermediate: 4, experts: 2, topK: 1 });
  const s: Status = new DnnlError('invalid_arguments', 'x').status;
  await eng[Symbol.asyncDispose]();
  return pd.implInfo.length + s.length;
}
`;

describe('packed from a clone (npm pack runs prepare = the build)', () => {
  it('the tarball holds dist/ (library, types) and the license', () => {
    const listing = execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n');
    for (const f of ['package/dist/index.js', 'package/dist/types/index.d.ts', 'package/LICENSE', 'package/README.md', 'package/package.json'])
      expect(listing, f).toContain(f);
    expect(listing.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);
    const pkg = JSON.parse(readFileSync(join(app, 'node_modules/groupdnn/package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg.license).toBe('Apache-2.0');
    expect(readFileSync(join(app, 'node_modules/groupdnn/LICENSE'), 'utf8')).toContain('Apache License\n                        Version 2.0, January 2004');
    expect(pkg.repository).toBeDefined();
    expect(pkg.author ?? pkg.contributors).toBeDefined();
  });

  it('a strict TypeScript consumer type-checks against the .d.ts, runs a grouped matmul with node and exits', async () => {
    const types = await compile(app, { lib: ['ES2023', 'DOM', 'esnext.disposable'], types: [], outDir: 'out' }, `
import { ARG, DnnlError, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, tag, type Status } from 'groupdnn';
const eng: Engine = await Engine.create({ threads: 2 });
const strm = new Stream(eng);
const E = 4, K = 32, N = 16, R = 20;
const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
using mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
src.write(new Float64Array(R * K).fill(1));
wei.write(new Float64Array(E * K * N).fill(0.5));
offsets.fromSizes([10, 0, 6, 4], src.offsets);
mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
await strm.wait();
const layerPd: moe.layer.PrimitiveDesc = new moe.layer.PrimitiveDesc(eng, { tokens: 4, hidden: 8, intermediate: 4, experts: 4, topK: 2 });
let status: Status = 'success';
try { new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K + 1, N], dt.f32, tag.abc), dstMd); } catch (e) { if (e instanceof DnnlError) status = e.status; }
console.log(\`ok \${dst.read()[0]} \${status} \${layerPd.implInfo.length > 0}\`);
`);
    expect(types.status, types.out).toBe(0);
    const run = await exec(process.execPath, [join(app, 'out/consumer.js')], { cwd: app, timeout: 20_000 });
    expect(run.signal, `the process did not exit by itself: ${run.stderr}`).toBeNull();
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('ok 16 invalid_arguments true');
  }, 60_000);
});

describe('shipped types', () => {
  it('compile in a Node-only project: lib ES2022, @types/node, no DOM, skipLibCheck off', async () => {
    linkDevPackage(app, '@types/node');
    linkReferencedTypes();
    const r = await compile(app, { lib: ['ES2022'], types: ['node'], noEmit: true }, typesConsumer, 'node_only.ts');
    expect(r.status, r.out).toBe(0);
  }, 60_000);

  it('compile in a DOM-only project: lib ES2022 + DOM, no @types/node, skipLibCheck off', async () => {
    linkReferencedTypes();
    const r = await compile(app, { lib: ['ES2022', 'DOM'], types: [], noEmit: true }, typesConsumer, 'dom_only.ts');
    expect(r.status, r.out).toBe(0);
  }, 60_000);

  it('every shipped declaration file compiles in both, and none holds an @internal member', async () => {
    const typesDir = join(app, 'node_modules/groupdnn/dist/types');
    const all: string[] = [];
    const walk = (d: string): void => {
      for (const f of readdirSync(d, { withFileTypes: true })) {
        if (f.isDirectory()) walk(join(d, f.name));
        else if (f.name.endsWith('.d.ts')) all.push(join(d, f.name));
      }
    };
    walk(typesDir);
    expect(all.length).toBeGreaterThan(20);
    const internal = all.filter((f) => readFileSync(f, 'utf8').includes('@internal'));
    expect(internal, 'stripInternal (tsconfig.build.json) keeps @internal members out').toEqual([]);
    const engine = readFileSync(join(typesDir, 'runtime/engine.d.ts'), 'utf8');
    expect(engine).not.toMatch(/readonly pool:|readonly kernels:|scratch\(/);
    linkDevPackage(app, '@types/node');
    linkReferencedTypes();
    for (const [lib, types] of [[['ES2022'], ['node']], [['ES2022', 'DOM'], []]]) {
      const cfg = join(app, `tsconfig.all-${lib.length}.json`);
      writeFileSync(cfg, JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib, types, skipLibCheck: false, noEmit: true }, files: all }));
      const r = await exec(process.execPath, [tsc, '-p', cfg]);
      expect(r.status, `lib ${lib.join(',')}: ${r.stdout}${r.stderr}`).toBe(0);
    }
  }, 120_000);
});
