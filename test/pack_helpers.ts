/**
 * The package as users get it, for the package, types and bundler tests: `npm pack` into a temp
 * folder and `npm install` of the tarball into an empty project there; a cross-origin isolated static
 * server and headless Chromium to load a built app.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../scripts/serve.mjs';

export const root = resolve('.');
export const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
export const tsc = join(root, 'node_modules/typescript/bin/tsc');
const run = promisify(execFile);

/**
 * Packs `from` (the repository, or a copy of it) into a new temp folder. With `scripts`, npm runs the
 * `prepare` lifecycle script (the build) as it does for `npm pack`, `npm publish` and git installs;
 * without, the dist/ that `npm test` built is packed as it is. Asynchronous: a build blocking the
 * test worker for a minute would time out vitest's own messages.
 */
export async function pack(from: string, prefix: string, scripts: boolean): Promise<{ dir: string; tgz: string }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const args = ['pack', '--silent', '--pack-destination', dir, ...(scripts ? [] : ['--ignore-scripts'])];
  await run(npm, args, { cwd: from });
  const tgz = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (tgz === undefined) throw new Error(`npm pack wrote no tarball into ${dir}`);
  return { dir, tgz: join(dir, tgz) };
}

/** An empty ESM project in `dir` with the tarball installed (offline: the package has no dependencies). */
export async function installInto(dir: string, tgz: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await run(npm, ['install', '--no-audit', '--no-fund', '--offline', tgz], { cwd: dir });
}

/**
 * Runs a command without blocking the test worker (a minute-long synchronous tsc or bundler run would
 * time out vitest's own messages); resolves with its status, signal and output, never rejects.
 */
export async function exec(command: string, args: string[], options: { cwd?: string; timeout?: number } = {}): Promise<{ status: number | null; signal: string | null; stdout: string; stderr: string }> {
  try {
    const r = await run(command, args, { ...options, encoding: 'utf8', maxBuffer: 64 << 20 });
    return { status: 0, signal: null, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code?: number | string; signal?: string | null; stdout?: string; stderr?: string };
    return { status: typeof x.code === 'number' ? x.code : null, signal: x.signal ?? null, stdout: x.stdout ?? '', stderr: x.stderr ?? String(e) };
  }
}

/** Makes a package of the repository's node_modules visible to a temp project (types, bundlers). */
export function linkDevPackage(dir: string, name: string): void {
  const to = join(dir, 'node_modules', name);
  if (existsSync(to)) return;
  mkdirSync(join(to, '..'), { recursive: true });
  symlinkSync(join(root, 'node_modules', name), to, 'dir');
}

/** The app every bundler test builds: a 2-thread grouped matmul whose result goes into the title. */
export const browserApp = `
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag } from 'groupdnn';
const eng = await Engine.create({ threads: 2 });
const strm = new Stream(eng);
const srcMd = memory.desc.grouped([6, 8], dt.f32, 2, [RUNTIME_DIM_VAL, 8]);
const dstMd = memory.desc.grouped([6, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
const weiMd = memory.desc([2, 8, 4], dt.f32, tag.abc);
const mm = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
for (let i = 0; i < src.values.length; i++) src.values[i] = (i % 8) + 1;
wei.values.fill(0.5);
offsets.fromSizes([4, 2], src.offsets);
mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
await strm.wait();
const out = typeof document === 'undefined' ? (s) => console.log(s) : (s) => { document.title = s; };
out('result ' + dst.values[0] + ' threads ' + eng.threads);
`;
/** What browserApp reports: row 0 is 1..8, times 0.5 summed over K = 8. */
export const browserAppResult = 'result 18 threads 2';

/** Serves `dir` cross-origin isolated, opens it in headless Chromium, returns the page title once set. */
export async function titleInChromium(dir: string, path = '/'): Promise<string> {
  const { server, port } = (await startServer(0, { dir })) as { server: Server; port: number };
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
  try {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`http://127.0.0.1:${port}${path}`);
    try {
      await page.waitForFunction(() => document.title.startsWith('result'), undefined, { timeout: 30_000 });
    } catch (e) {
      throw new Error(`no result in the page: ${errors.join('; ') || String(e)}`);
    }
    return await page.title();
  } finally {
    await browser.close();
    server.close();
  }
}
