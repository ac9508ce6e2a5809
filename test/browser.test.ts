/**
 * The library as shipped (dist/, built by `npm test` before vitest) in headless Chromium (Debian's
 * chromium driven by playwright-core), unbundled from a static server with the isolation headers:
 * engine start at 1 and 2 threads, the grouped matmul against a float64 loop, a worker that fails to
 * load, the lifetime rules; a page without isolation; and the browser demo (screenshot written to
 * build/browser-demo.png: generated artefacts go to the ignored build/, never over tracked files).
 * A second Chromium with WebGPU on SwiftShader (Debian's chromium ships it) runs the gpu engine from
 * navigator.gpu: grouped_gemm (Proposal #3) and a grouped matmul (Proposal #1) against float64 loops,
 * bad runtime rows raised at wait(), and the demo's gpu row.
 */
import { existsSync, mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { startServer } from '../scripts/serve.mjs';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const QUIET = ['--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
/** WebGPU on a CPU adapter: a page served from localhost is a secure context, so navigator.gpu exists. */
const WEBGPU = ['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--enable-features=Vulkan'];
let browser: Browser;
let server: Server, plain: Server;
let base = '', basePlain = '';

beforeAll(async () => {
  expect(existsSync('dist/index.js'), 'dist/ is missing: npm test builds it (npm run build)').toBe(true);
  expect(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: install Debian's chromium (.ci/run does)`).toBe(true);
  const s = await startServer(0) as { server: Server; port: number };
  const p = await startServer(0, { isolated: false }) as { server: Server; port: number };
  [server, plain] = [s.server, p.server];
  base = `http://127.0.0.1:${s.port}`;
  basePlain = `http://127.0.0.1:${p.port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', ...QUIET],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  server?.close();
  plain?.close();
});

describe('in Chromium', () => {
  it('engine at 1 and 2 threads, grouped matmul, worker failure, lifetime (dist/ unbundled)', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/test/browser/checks.html`);
    await page.waitForFunction(() => (window as unknown as { __done?: boolean }).__done === true, undefined, { timeout: 60_000 });
    const results = await page.evaluate(() => (window as unknown as { __results: { name: string; ok: boolean; detail: string }[] }).__results);
    await page.close();
    expect(errors).toEqual([]);
    for (const r of results) expect(r.ok, `${r.name}: ${r.detail}`).toBe(true);
    expect(results.map((r) => r.name)).toHaveLength(6);
    expect(results.find((r) => r.name.includes('2 threads'))!.detail).toContain('threads=2');
  }, 90_000);

  it('without cross-origin isolation: one thread on the reference, or a clear refusal', async () => {
    const page = await browser.newPage();
    await page.goto(`${basePlain}/test/browser/checks.html`.replace('checks.html', 'blank.html'));
    // A string, not a function: vitest's transform would rewrite a dynamic import inside a function.
    const r = await page.evaluate(`(async () => {
      const g = await import('/dist/index.js');
      const eng = await g.Engine.create();
      const info = { threads: eng.threads, isa: String(eng.isa), isolated: crossOriginIsolated };
      let refusal = '';
      try { await g.Engine.create({ threads: 2 }); } catch (e) { refusal = String(e.message); }
      return { ...info, refusal };
    })()`) as { threads: number; isa: string; isolated: boolean; refusal: string };
    await page.close();
    expect(r).toMatchObject({ threads: 1, isa: 'undefined', isolated: false });
    expect(r.refusal).toContain('needs SharedArrayBuffer');
  }, 60_000);

  it('the browser demo runs an MoE-shaped grouped matmul at 1 and N threads and charts it', async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 760 } });
    await page.goto(`${base}/examples/browser/`);
    await page.waitForFunction(() => document.querySelectorAll('[data-gflops]').length >= 2, undefined, { timeout: 120_000 });
    const gflops = await page.$$eval('[data-gflops]', (els) => els.map((e) => Number(e.getAttribute('data-gflops'))));
    expect(gflops.every((v) => v > 0 && Number.isFinite(v))).toBe(true);
    expect(await page.locator('svg rect').count()).toBeGreaterThan(3);
    mkdirSync('build', { recursive: true });
    await page.screenshot({ path: 'build/browser-demo.png', fullPage: true });
    await page.close();
  }, 150_000);
});

describe('in Chromium with WebGPU (SwiftShader adapter)', () => {
  let gpuBrowser: Browser;
  beforeAll(async () => {
    gpuBrowser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless=new', '--no-sandbox', ...WEBGPU, ...QUIET] });
  }, 60_000);
  afterAll(async () => {
    await gpuBrowser?.close();
  });

  it('gpu engine from navigator.gpu: grouped_gemm (P#3) and grouped matmul (P#1) against float64, bad rows raised at wait() (dist/ unbundled)', async () => {
    const page = await gpuBrowser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/test/browser/blank.html`);
    // A string, not a function: vitest's transform would rewrite a dynamic import inside a function.
    const results = await page.evaluate(`import('/test/browser/gpu_checks.js').then((m) => m.run())`) as { name: string; ok: boolean; detail: string }[];
    await page.close();
    expect(errors).toEqual([]);
    expect(results.map((r) => r.name)).toHaveLength(3);
    for (const r of results) expect(r.ok, `${r.name}: ${r.detail}`).toBe(true);
    expect(results[0].detail).toContain('navigator.gpu');
  }, 120_000);

  it('the browser demo adds a gpu engine row', async () => {
    const page = await gpuBrowser.newPage({ viewport: { width: 1000, height: 820 } });
    await page.goto(`${base}/examples/browser/`);
    await page.waitForFunction(() => document.querySelector('[data-engine="gpu"], [data-engine-unavailable]') !== null, undefined, { timeout: 150_000 });
    expect(await page.locator('[data-engine-unavailable]').count(), await page.locator('#table').innerText()).toBe(0);
    const row = page.locator('[data-engine="gpu"]');
    expect(Number(await row.getAttribute('data-gflops'))).toBeGreaterThan(0);
    expect(Number(await row.getAttribute('data-err'))).toBeLessThan(1e-5);
    // The MoE layer row: the whole layer on the gpu engine agrees with the cpu engine's.
    await page.waitForFunction(() => document.querySelector('[data-layer-engine="gpu"], [data-layer-engine-unavailable]') !== null, undefined, { timeout: 150_000 });
    expect(await page.locator('[data-layer-engine-unavailable]').count(), await page.locator('#layer').innerText()).toBe(0);
    expect(Number(await page.locator('[data-layer-engine="gpu"]').getAttribute('data-err'))).toBeLessThan(1e-5);
    mkdirSync('reports', { recursive: true });
    await page.screenshot({ path: 'build/browser-demo-gpu.png', fullPage: true });
    await page.close();
  }, 300_000);
});
