/**
 * The benchdnn fuzz (bench/benchdnn/fuzz.ts) for one fixed seed on both engines: random valid matmul
 * lines (grouped M / K and dense, weight-only / W8A8 / fp8 / fp4 types, tags, bias, scales, zero
 * points, post-ops) each pass on the cpu and the gpu engine against the driver's float64 reference, or
 * the gpu engine refuses them for a documented reason; and the same lines FAIL when the library's
 * result is off by one unit (the check can fail).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { fuzzLines, report, runFuzz } from '../bench/benchdnn/fuzz.js';
import { useSwiftShaderWithoutDriver } from './swiftshader_env.js';

const SEED = 104;
const COUNT = 5;

beforeAll(() => {
  useSwiftShaderWithoutDriver(); // no GPU driver in CI: Dawn runs on SwiftShader
});

describe('benchdnn fuzz, seed 104', () => {
  const lines = fuzzLines(SEED, COUNT);

  it('draws the same valid lines every time', () => {
    expect(lines).toHaveLength(COUNT);
    expect(fuzzLines(SEED, COUNT)).toEqual(lines);
    expect(lines[0]).toBe('--dt=bf16 --stag=ab --wtag=abc --dtag=ab --grouped=0:2:balanced 46x45:2x45x100');
  });

  it('every line passes on the cpu and the gpu engine, or the gpu refuses a column-major src / dst', async () => {
    const results = await runFuzz(lines, { engines: ['cpu', 'gpu'], threads: 1 });
    const summary = report(results);
    const notPassed = results.filter((r) => r.verdict !== 'passed');
    expect(notPassed.filter((r) => r.verdict !== 'gpu_refused'), summary.join('\n')).toEqual([]);
    for (const r of notPassed) expect(r.results.gpu?.reason).toMatch(/need unit column strides on the gpu engine/);
    expect(results.filter((r) => r.verdict === 'passed').length).toBeGreaterThanOrEqual(COUNT - 2);
  }, 120_000);

  it('a result one unit off fails every line it runs on', async () => {
    const results = await runFuzz(lines.slice(0, 3), { engines: ['cpu'], threads: 1, perturb: (d) => { d[d.length >> 1] += 1; } });
    expect(results.map((r) => r.verdict)).toEqual(['failed', 'failed', 'failed']);
    expect(report(results)[0]).toBe('lines:3 passed:0 failed:3 crash:0 gpu_refused:0 refused:0');
  }, 60_000);
});
