/**
 * The installed package inside the bundlers users have: one app (a 2-thread grouped matmul, so the
 * compute workers must start) built with Vite, esbuild and webpack and run in headless Chromium, and
 * bundled by esbuild for Node and run there. The worker must be found after bundling in every case;
 * an unbundled page resolves 'groupdnn' through an import map.
 */
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserApp, browserAppResult, exec, installInto, linkDevPackage, pack, root, titleInChromium } from './pack_helpers.js';

let dir = '';
/** esbuild's command (a native binary; the package's install step puts it in place of the JS shim). */
const esbuild = join(root, 'node_modules/.bin/esbuild');
const html = (script: string, module = true): string =>
  `<!doctype html><meta charset="utf-8"><title>app</title><script ${module ? 'type="module" ' : ''}src="${script}"></script>`;

beforeAll(async () => {
  expect(existsSync('dist/index.js'), 'dist/ is missing: npm test builds it').toBe(true);
  const packed = await pack(root, 'groupdnn-bundlers-', false);
  dir = packed.dir;
  await installInto(dir, packed.tgz);
  writeFileSync(join(dir, 'app.js'), browserApp);
}, 120_000);

afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

/** Runs a command (node by default) in the consumer project. */
async function run(args: string[], command = process.execPath): Promise<void> {
  const r = await exec(command, args, { cwd: dir });
  expect(r.status, r.stdout + r.stderr).toBe(0);
}

describe('bundled', () => {
  it('Vite: the app runs the 2-thread grouped matmul in Chromium', async () => {
    writeFileSync(join(dir, 'index.html'), html('./app.js'));
    await run([join(root, 'node_modules/vite/bin/vite.js'), 'build', '--logLevel', 'error', '--outDir', 'out-vite']);
    expect(await titleInChromium(join(dir, 'out-vite'))).toBe(browserAppResult);
  }, 120_000);

  it('esbuild (browser, ESM): the app runs the 2-thread grouped matmul in Chromium', async () => {
    await run(['app.js', '--bundle', '--format=esm', '--log-level=error', '--outfile=out-esbuild/app.js'], esbuild);
    writeFileSync(join(dir, 'out-esbuild/index.html'), html('./app.js'));
    expect(await titleInChromium(join(dir, 'out-esbuild'))).toBe(browserAppResult);
  }, 120_000);

  it('webpack 5 (production, classic script): the app runs the 2-thread grouped matmul in Chromium', async () => {
    writeFileSync(join(dir, 'webpack.mjs'), `
import webpack from 'webpack';
import { resolve } from 'node:path';
webpack({ mode: 'production', context: resolve('.'), entry: './app.js', output: { path: resolve('out-webpack'), filename: 'app.js' }, performance: { hints: false } }, (err, stats) => {
  if (err || stats.hasErrors()) { console.error(err ?? stats.toString('errors-only')); process.exit(1); }
});
`);
    linkDevPackage(dir, 'webpack');
    await run(['webpack.mjs']);
    writeFileSync(join(dir, 'out-webpack/index.html'), html('./app.js', false));
    expect(await titleInChromium(join(dir, 'out-webpack'))).toBe(browserAppResult);
  }, 120_000);

  it('esbuild (Node, ESM): the bundled script starts its workers, prints the result and exits', async () => {
    await run(['app.js', '--bundle', '--platform=node', '--format=esm', '--log-level=error', '--outfile=out-node/app.mjs'], esbuild);
    // Alone in a folder: nothing of the package beside the bundle.
    const alone = join(dir, 'out-node-alone');
    mkdirSync(alone, { recursive: true });
    cpSync(join(dir, 'out-node/app.mjs'), join(alone, 'app.mjs'));
    const r = await exec(process.execPath, [join(alone, 'app.mjs')], { cwd: alone, timeout: 30_000 });
    expect(r.signal, `the process did not exit by itself: ${r.stderr}`).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(browserAppResult);
  }, 60_000);

  it('unbundled: a page maps "groupdnn" to the installed dist/index.js with an import map', async () => {
    writeFileSync(join(dir, 'importmap.html'), `<!doctype html><meta charset="utf-8"><title>app</title>
<script type="importmap">{ "imports": { "groupdnn": "./node_modules/groupdnn/dist/index.js" } }</script>
<script type="module" src="./app.js"></script>`);
    expect(await titleInChromium(dir, '/importmap.html')).toBe(browserAppResult);
  }, 60_000);
});
