/**
 * The package as users get it: `npm pack`, installed from the tarball into an empty project; a strict
 * TypeScript consumer type-checks against the shipped .d.ts and runs with plain `node` (and exits);
 * a Vite app bundling the package runs a 2-thread grouped matmul in Chromium.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium } from 'playwright-core';
import { startServer } from '../scripts/serve.mjs';

const root = resolve('.');
const dir = mkdtempSync(join(tmpdir(), 'groupdnn-pkg-'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

beforeAll(() => {
  expect(existsSync('dist/index.js'), 'dist/ is missing: npm test builds it').toBe(true);
  execFileSync(npm, ['pack', '--silent', '--pack-destination', dir], { cwd: root, stdio: 'pipe' });
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--offline', `./${tgz}`], { cwd: dir, stdio: 'pipe' });
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('installed package', () => {
  it('a strict TypeScript consumer type-checks against the .d.ts, runs with node and exits', () => {
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023', 'DOM', 'esnext.disposable'], types: [], skipLibCheck: false, noEmit: false, outDir: 'out' },
      include: ['consumer.ts'],
    }));
    writeFileSync(join(dir, 'consumer.ts'), `
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
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    const types = spawnSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8' });
    expect(types.status, types.stdout + types.stderr).toBe(0);
    const run = spawnSync(process.execPath, [join(dir, 'out/consumer.js')], { cwd: dir, encoding: 'utf8', timeout: 20_000 });
    expect(run.signal, `the process did not exit by itself: ${run.stderr}`).toBeNull();
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe('ok 16 invalid_arguments true');
  }, 60_000);

  it('a Vite app bundling the package runs the 2-thread grouped matmul in Chromium', async () => {
    writeFileSync(join(dir, 'index.html'), '<!doctype html><meta charset="utf-8"><title>app</title><script type="module" src="./app.js"></script>');
    writeFileSync(join(dir, 'app.js'), `
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag } from 'groupdnn';
const eng = await Engine.create({ threads: 2 });
const strm = new Stream(eng);
const srcMd = memory.desc.grouped([6, 8], dt.f32, 2, [RUNTIME_DIM_VAL, 8]);
const dstMd = memory.desc.grouped([6, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
const weiMd = memory.desc([2, 8, 4], dt.f32, tag.abc);
const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
src.values.fill(1); wei.values.fill(2); offsets.fromSizes([4, 2], src.offsets);
mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
await strm.wait();
document.title = 'result ' + dst.values[0] + ' threads ' + eng.threads;
`);
    const vite = join(root, 'node_modules/vite/bin/vite.js');
    const b = spawnSync(process.execPath, [vite, 'build', '--logLevel', 'error', '--outDir', 'web'], { cwd: dir, encoding: 'utf8' });
    expect(b.status, b.stdout + b.stderr).toBe(0);
    expect(readdirSync(join(dir, 'web/assets')).some((f) => f.startsWith('worker_main')), 'Vite emitted the worker beside the bundle').toBe(true);
    const { server, port } = (await startServer(0, { dir: join(dir, 'web') })) as { server: Server; port: number };
    const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
    try {
      const page = await browser.newPage();
      await page.goto(`http://127.0.0.1:${port}/`);
      await page.waitForFunction(() => document.title.startsWith('result'), undefined, { timeout: 30_000 });
      expect(await page.title()).toBe('result 16 threads 2');
    } finally {
      await browser.close();
      server.close();
    }
  }, 120_000);
});
