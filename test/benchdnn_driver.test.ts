/**
 * benchdnn driver (issue 17), execution: groupdnn's own batch files in correctness mode (0 failed),
 * the cases groupdnn rejects (each UNIMPLEMENTED / INVALID_ARGUMENTS, none run), a deliberately wrong
 * dst must FAIL, and the driver's float64 reference and comparison on hand-computed values.
 */
import { describe, expect, it } from 'vitest';
import { runDriver } from '../bench/benchdnn/driver.js';
import { compare, tolerance } from '../bench/benchdnn/compare.js';
import { eltwise64, erf64, referenceMatmul, type RefInputs } from '../bench/benchdnn/reference.js';

const INPUTS = 'bench/benchdnn/inputs';

async function run(args: string[], perturb?: (d: Float64Array) => void): Promise<{ lines: string[]; summary: Awaited<ReturnType<typeof runDriver>> }> {
  const lines: string[] = [];
  const summary = await runDriver(args, { out: (l) => lines.push(l), perturb });
  return { lines, summary };
}

describe('batch files in correctness mode', () => {
  it('test_groupdnn_ci: every problem passes', async () => {
    const { lines, summary } = await run(['--ctx-exe=2', '--matmul', `--batch=${INPUTS}/test_groupdnn_ci`]);
    const notPassed = lines.filter((l) => /^\d+:/.test(l) && !/^\d+:PASSED /.test(l));
    expect(notPassed).toEqual([]);
    expect(summary.failed).toBe(0);
    expect(summary.tests).toBeGreaterThan(600);
    expect(summary.passed).toBe(summary.tests);
    expect(lines.at(-1)).toBe(`tests:${summary.tests} passed:${summary.tests} skipped:0 mistrusted:0 unimplemented:0 invalid_arguments:0 failed:0 listed:0`);
  }, 240_000);

  it('test_groupdnn_unimplemented: each rejected with its reason, nothing run', async () => {
    const { lines, summary } = await run(['--ctx-exe=1', '--matmul', `--batch=${INPUTS}/test_groupdnn_unimplemented`]);
    expect(summary).toMatchObject({ passed: 0, failed: 0, mistrusted: 0, unimplemented: 14, invalid_arguments: 5 });
    expect(lines).toContain('2:UNIMPLEMENTED (data type u3 is not implemented in groupdnn) __REPRO: --matmul --dt=f16:u4:f16 --grouped=0:4:8+8+8+8 --attr-zero-points=wei:7:u3:32x1 32x64:4x64x32');
    expect(lines).toContain('15:INVALID_ARGUMENTS (--grouped=0:4:8+8+8+7: sizes sum to 31, the grouped dimension is 32) __REPRO: --matmul --grouped=0:4:8+8+8+7 32x64:4x64x32');
  }, 60_000);
});

describe('a wrong library result fails', () => {
  const problem = ['--ctx-exe=1', '--matmul', '--dt=f32,bf16', '--wtag=abc', '--grouped=0:4:3+0+5+8', '--attr-scales=src:1+wei:5', '--attr-post-ops=swish:1', '16x32:4x32x24'];

  it('passes as computed', async () => {
    expect((await run(problem)).summary).toMatchObject({ tests: 2, passed: 2, failed: 0 });
  });

  it('one element off by 2 ulps of bf16 fails (f32 and bf16 dst), and names it', async () => {
    const { lines, summary } = await run(problem, (d) => {
      d[37] = d[37] * (1 + 2 ** -6) + 2 ** -6;
    });
    expect(summary).toMatchObject({ tests: 2, passed: 0, failed: 2 });
    expect(lines[0]).toMatch(/^0:FAILED \(errors:1 total:384\) __REPRO: --matmul --wtag=abc /);
    expect(lines[1]).toMatch(/^ {2}worst error at dst\[37\]: exp:/);
  });

  it('sqrt is not correctly rounded on the gpu engine (WGSL: 1 / inverseSqrt): f32 dst after it allows 2^-20, not 2^-23', async () => {
    const off = (d: Float64Array): void => d.forEach((v, i) => { d[i] = v + 2 ** -22 * Math.max(Math.abs(v), 1); });
    expect((await run(['--ctx-exe=1', '--matmul', '--attr-post-ops=abs+sqrt', '4x8:8x4'], off)).summary).toMatchObject({ tests: 1, passed: 1 });
    expect((await run(['--ctx-exe=1', '--matmul', '--attr-post-ops=abs', '4x8:8x4'], off)).summary).toMatchObject({ tests: 1, failed: 1 });
  });

  it('rows of one group swapped with another (a routing bug) fail', async () => {
    const { summary } = await run(problem, (d) => {
      const N = 24;
      for (let n = 0; n < N; n++) [d[2 * N + n], d[3 * N + n]] = [d[3 * N + n], d[2 * N + n]];
    });
    expect(summary.failed).toBe(2);
  });
});

describe('reference and comparison', () => {
  it('grouped M: zero points, scales, bias, post-ops and dst scale in oneDNN order (hand-computed)', () => {
    // G = 2, sizes [1, 2], K = 2, N = 2. src rows r0 | r1 r2; weights per group.
    const src = Float64Array.from([1, 2, /**/ 3, -1, /**/ 0, 4]);
    const wei = Float64Array.from([1, 0, 0, 1, /* g1 */ 2, 1, -1, 3]);
    const out = referenceMatmul({
      shape: { kind: 'grouped_m', G: 2, M: 3, K: 2, N: 2, sizes: [1, 2] },
      src, wei,
      bias: { values: Float64Array.from([10, 20, 30, 40]), dims: [2, 2] },
      quant: {
        src: { scales: { values: Float64Array.from([1, 2, 0.5]), mask: 1, groups: [1, 1], dims: [3, 2], perGroup: false } },
        wei: { zeroPoints: { values: Float64Array.from([1]), mask: 0, groups: [1, 1, 1], dims: [2, 2, 2], perGroup: false } },
        dst: { scales: { values: Float64Array.from([1, 4]), mask: 0, groups: [1, 1], dims: [3, 2], perGroup: true } },
      },
      postOps: [{ kind: 'eltwise', alg: 'relu', alpha: 0, beta: 0 }, { kind: 'binary', alg: 'mul', values: Float64Array.from([1, -1]), dims: [1, 2], byGroup: true }],
    });
    // g0, r0: (w - 1) = [[0,-1],[-1,0]]; s = [1,2]*1 -> [-2, -1]; +bias [10,20] -> [8, 19]; relu; *[1,-1] -> [8, -19]; /1
    // g1, r1: (w - 1) = [[1,0],[-2,2]]; s = [3,-1]*2 = [6,-2] -> [6+4, -4] = [10, -4]; +[30,40] -> [40, 36]; *[1,-1] -> [40,-36]; /4 -> [10, -9]
    // g1, r2: s = [0,4]*0.5 = [0,2] -> [-4, 4]; +[30,40] -> [26, 44]; *[1,-1] -> [26,-44]; /4 -> [6.5, -11]
    expect([...out]).toEqual([8, -19, 10, -9, 6.5, -11]);
  });

  it('grouped K: an empty group gives the bias only; per-group scales', () => {
    const out = referenceMatmul({
      shape: { kind: 'grouped_k', G: 2, M: 1, K: 3, N: 1, sizes: [0, 3] },
      src: Float64Array.from([1, 2, 3]), wei: Float64Array.from([1, 1, 2]),
      bias: { values: Float64Array.from([5]), dims: [1, 1, 1] },
      quant: { src: { scales: { values: Float64Array.from([7, 2]), mask: 0, groups: [1, 1], dims: [1, 3], perGroup: true } }, wei: {}, dst: {} },
      postOps: [],
    });
    expect([...out]).toEqual([5, 2 * 9 + 5]);
  });

  it('a post-op result beyond f32 range is Infinity for the later post-ops (the library computes in f32)', () => {
    const inputs: RefInputs = {
      shape: { kind: 'dense', src: [1, 2], wei: [2, 2], dst: [1, 2], M: 1, K: 2, N: 2 },
      src: Float64Array.from([45, 1]), wei: Float64Array.from([2, 1, 0, -1]),
      quant: { src: {}, wei: {}, dst: {} },
      // e^90 overflows f32; e^44 / 4 does not
      postOps: [{ kind: 'eltwise', alg: 'exp', alpha: 0, beta: 0 }, { kind: 'eltwise', alg: 'linear', alpha: 0.25, beta: 0.5 }],
    };
    const out = referenceMatmul(inputs);
    expect(out[0]).toBe(Infinity);
    expect(out[1]).toBeCloseTo(0.25 * Math.exp(44) + 0.5, -10);
    // the cpu's reference impl keeps float64 between post-ops: its finite result is accepted too
    const wide = referenceMatmul({ ...inputs, wideIntermediates: true });
    expect(wide[0]).toBeCloseTo(0.25 * Math.exp(90) + 0.5, -30);
    expect(compare([Infinity, out[1]], out, 'f32', true, wide).errors).toBe(0);
    expect(compare([wide[0], out[1]], out, 'f32', true, wide).errors).toBe(0);
    expect(compare([1e38, out[1]], out, 'f32', true, wide).errors).toBe(1);
  });

  it('erf to ~1e-15', () => {
    expect(erf64(0)).toBe(0);
    expect(erf64(0.5)).toBeCloseTo(0.5204998778130465, 15);
    expect(erf64(-1.5)).toBeCloseTo(-0.9661051464753108, 15);
    expect(erf64(3)).toBeCloseTo(0.9999779095030014, 15);
  });

  it('per-dt tolerances: rounding passes, one more unit fails; saturation and overflow', () => {
    expect(tolerance('f32', false)).toBe(2 ** -23);
    expect(tolerance('bf16', false)).toBe(2 ** -8 + 2 ** -20);
    const ref = [1000.3, -3, 0];
    expect(compare([1000, -3, 0], ref, 'bf16', false).errors).toBe(0); // bf16 RNE of 1000.3 is 1000
    expect(compare([1008, -3, 0], ref, 'bf16', false).errors).toBe(1);
    expect(compare([Math.fround(1000.3), -3, 0], ref, 'f32', false).errors).toBe(0);
    expect(compare([1000.3 + 1e-3, -3, 0], ref, 'f32', false).errors).toBe(1);
    expect(compare([127, -128, 3], [300, -1000, 2.6], 's8', false).errors).toBe(0);
    expect(compare([127, -128, 2], [300, -1000, 2.6], 's8', false).errors).toBe(1);
    // integer dst after a transcendental post-op: its f32 result may round a reference just below a half up
    expect(compare([18], [17.49999912142878], 's32', false).errors).toBe(1);
    expect(compare([18, 17], [17.49999912142878, 17.49999912142878], 's32', true).errors).toBe(0);
    expect(compare([18], [17.4999], 's32', true).errors).toBe(1);
    // a NaN (log / sqrt of a negative sum) converts to 0 in an integer dst, as the library's conversion does
    expect(compare([0, 0, -128], [NaN, 0.2, -Infinity], 's8', true).errors).toBe(0);
    expect(compare([1], [NaN], 'u8', true).errors).toBe(1);
    expect(compare([448, Infinity], [1e6, 1e300], 'f8_e4m3', false).errors).toBe(1);
    expect(compare([Infinity, -Infinity, NaN], [1e40, -1e300, 1], 'f32', false).errors).toBe(1);
    expect(compare([65504], [70000], 'f16', false).errors).toBe(1);
    // NaN matches a NaN reference (log / sqrt of a negative sum), and nothing else
    expect(compare([NaN, -Infinity, NaN], [NaN, -Infinity, 2], 'f32', true).errors).toBe(1);
    expect(compare([NaN, 1], [NaN, NaN], 'bf16', false).errors).toBe(1);
  });

  it('eltwise references: oneDNN alpha / beta meanings, round half to even', () => {
    expect([2.5, 3.5, -2.5, -1.5, 1.2].map((x) => eltwise64('round', x, 0, 0))).toEqual([2, 4, -2, -2, 1]);
    expect(eltwise64('elu', -1, 0.5, 0)).toBeCloseTo(0.5 * (Math.exp(-1) - 1), 15);
    expect(eltwise64('soft_relu', 1, 2, 0)).toBeCloseTo(Math.log(1 + Math.exp(2)) / 2, 15);
    expect(eltwise64('soft_relu', 100, 1, 0)).toBe(100);
    // log1p: e^-40 is lost in 1 + e^-40 (float64), not in the library's f32 softplus
    expect(eltwise64('soft_relu', -80, 0.5, 0)).toBeCloseTo(2 * Math.exp(-40), 30);
    expect(eltwise64('mish', -40, 0, 0) / (-40 * Math.exp(-40))).toBeCloseTo(1, 12);
    expect(eltwise64('gelu_tanh', 1, 0, 0)).toBeCloseTo(0.5 * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * 1.044715)), 15);
    expect(eltwise64('gelu_tanh', -12, 0, 0)).toBeLessThan(0); // not 0: the negative tail keeps its sign
    expect(eltwise64('pow', -2, 0.5, 3)).toBe(-4);
    expect(eltwise64('hardswish', 1, 0.25, 0.5)).toBe(0.75);
    expect(eltwise64('hardsigmoid', -4, 0.25, 0.5)).toBe(0);
    expect(eltwise64('clip_v2', 7, -1, 6)).toBe(6);
    expect(eltwise64('mish', 1, 0, 0)).toBeCloseTo(Math.tanh(Math.log(1 + Math.E)), 15);
  });
});
