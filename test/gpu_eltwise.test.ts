/**
 * Every eltwise algorithm of the gpu engine's epilogue (src/kernels/wgsl/wgsl_eltwise.ts) against
 * double-precision truth written here: a dense matmul [M, 1] x [1, 1] = 1 puts each x of a sweep
 * through the post-op alone (the product is exact), as test/fused_kernels.test.ts does for the cpu's
 * vector math. Bounds are relative errors where the truth is a normal f32; the composites inherit the
 * f32 rounding of their inner argument (see the cpu table), WGSL's exp adds its 3 + 2|x| ulp.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Memory, PrimitiveAttr, Stream, dt, matmul, memory, tag, type EltwiseAlg, type GpuEngine } from '../src/index.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { mulberry32 } from './workloads.js';

function erfcD(a: number): number {
  if (a < 2.5) return 1 - erfD(a);
  let f = 0;
  for (let n = 100; n >= 1; n--) f = n / 2 / (a + f);
  return Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + f);
}

function erfD(x: number): number {
  const a = Math.abs(x);
  let r: number;
  if (a < 2.5) {
    let term = a, sum = a;
    for (let n = 1; n < 200; n++) {
      term *= (-a * a) / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-18 * Math.abs(sum)) break;
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    r = 1 - erfcD(a);
  }
  return x < 0 ? -r : r;
}

const geluErfD = (x: number): number => (x < 0 ? 0.5 * x * erfcD(-x / Math.SQRT2) : 0.5 * x * (1 + erfD(x / Math.SQRT2)));
const softplusD = (z: number): number => (z > 40 ? z : Math.log1p(Math.exp(z)));
const roundEvenD = (x: number): number => (x - Math.floor(x) === 0.5 ? 2 * Math.round(x / 2) : Math.round(x));

/**
 * [name, algorithm, alpha, beta, truth, [relative bound, up to |x|]..., sweep range]. soft_relu's sweep
 * stops at -60: WGSL's exp may flush tiny results (SwiftShader's gives 0 for e^-77, a normal f32).
 */
const CASES: ReadonlyArray<readonly [string, EltwiseAlg, number, number, (x: number) => number, ReadonlyArray<readonly [number, number]>, number]> = [
  // the cpu's bounds are 1e-6 / 1e-5; WGSL's exp differs from vmath.h's by a few ulp
  ['gelu_erf', 'eltwise_gelu_erf', 0, 0, geluErfD, [[2e-6, 3], [1e-5, 8]], 8],
  ['elu (alpha 1.5)', 'eltwise_elu', 1.5, 0, (x) => (x > 0 ? x : 1.5 * Math.expm1(x)), [[2e-6, 80]], 80],
  // exp's relative error must not grow with |x| (WGSL's builtin is 3 + 2|x| ulp: 3.4e-6 at x = 77, beyond
  // benchdnn's 2^-20); up to 88, where e^x is still a finite f32
  ['exp', 'eltwise_exp', 0, 0, Math.exp, [[1e-6, 88]], 88],
  ['sqrt', 'eltwise_sqrt', 0, 0, Math.sqrt, [[1e-6, 1e30]], 1e30],
  ['soft_relu', 'eltwise_soft_relu', 1, 0, softplusD, [[4e-6, 60]], 60],
  ['log', 'eltwise_log', 0, 0, Math.log, [[1e-6, 1e30]], 1e30],
  ['clip_v2', 'eltwise_clip_v2', -0.75, 2.5, (x) => (x >= 2.5 ? 2.5 : x <= -0.75 ? -0.75 : x), [[1e-9, 10]], 10],
  ['pow (alpha 1.5, beta 3)', 'eltwise_pow', 1.5, 3, (x) => 1.5 * x ** 3, [[1e-6, 1e12]], 1e12],
  ['pow (beta 0.5)', 'eltwise_pow', 1, 0.5, (x) => x ** 0.5, [[1e-5, 1e20]], 1e20],
  ['round', 'eltwise_round', 0, 0, roundEvenD, [[1e-9, 40]], 40],
  ['mish', 'eltwise_mish', 0, 0, (x) => x * Math.tanh(softplusD(x)), [[1e-5, 30]], 30],
  ['hardswish (alpha 1.5)', 'eltwise_hardswish', 1.5, 0, (x) => x * Math.min(1, Math.max(0, 1.5 * x)), [[1e-6, 10]], 10],
  ['hardsigmoid (alpha 0.25, beta 0.5)', 'eltwise_hardsigmoid', 0.25, 0.5, (x) => Math.min(1, Math.max(0, 0.25 * x + 0.5)), [[1e-6, 10]], 10],
];

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });

/** alg(x) for each x, through the gpu matmul's epilogue. */
async function throughEpilogue(alg: EltwiseAlg, alpha: number, beta: number, xs: Float32Array): Promise<Float32Array> {
  const M = xs.length;
  const srcMd = memory.desc([M, 1], dt.f32, tag.ab), weiMd = memory.desc([1, 1], dt.f32, tag.ab), dstMd = memory.desc([M, 1], dt.f32, tag.ab);
  const attr = new PrimitiveAttr();
  attr.postOps.appendEltwise(alg, alpha, beta);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  expect(pd.implInfo).toMatch(/^webgpu:/); // never the cpu or reference impl on a gpu engine
  const src = Memory.create(srcMd, eng).write(Float64Array.from(xs));
  const wei = Memory.create(weiMd, eng).write(Float64Array.of(1));
  const dst = Memory.create(dstMd, eng);
  new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  await strm.wait();
  return Float32Array.from(await dst.read());
}

describe('gpu eltwise post-ops against float64', () => {
  it.each(CASES.map((c) => [c[0], c] as const))('%s: relative error below the bounds', async (_n, [, alg, alpha, beta, truth, bounds, range]) => {
    const rng = mulberry32(alg.length * 7 + Math.round(range));
    const n = 4096;
    const xs = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const u = rng();
      xs[i] = i % 2 ? (u - 0.5) * 2 * range : (rng() < 0.5 ? -1 : 1) * Math.min(range, 2 ** (-20 + 27 * u));
    }
    const ys = await throughEpilogue(alg, alpha, beta, xs);
    for (const [bound, upTo] of bounds) {
      let worst = 0, at = 0;
      for (let i = 0; i < n; i++) {
        const t = truth(xs[i]);
        if (Math.abs(xs[i]) > upTo || !Number.isFinite(t) || Math.abs(t) < 1.2e-38 || Math.abs(t) > 3.4e38) continue;
        const e = Math.abs(ys[i] - t) / Math.abs(t);
        if (!(e <= worst)) { worst = e; at = xs[i]; }
      }
      expect(worst, `|x| <= ${upTo}: worst at x = ${at}`).toBeLessThan(bound);
    }
  });

  it('round halves to even; log / sqrt / pow outside their domain give -Inf / NaN as the cpu', async () => {
    expect(Array.from(await throughEpilogue('eltwise_round', 0, 0, Float32Array.of(0.5, 1.5, 2.5, -1.5, -2.5, 3.7)))).toEqual([0, 2, 2, -2, -2, 4]);
    expect(Array.from(await throughEpilogue('eltwise_log', 0, 0, Float32Array.of(0, -1, 1, 2)))).toEqual([-Infinity, NaN, 0, Math.fround(Math.LN2)]);
    expect(Array.from(await throughEpilogue('eltwise_sqrt', 0, 0, Float32Array.of(-1, 0, 4, 2.25)))).toEqual([NaN, 0, 2, 1.5]);
    expect(Array.from(await throughEpilogue('eltwise_pow', 1, 0.5, Float32Array.of(-2, 0, 4, 16)))).toEqual([NaN, 0, 2, 4]);
    expect(Array.from(await throughEpilogue('eltwise_pow', 2, 3, Float32Array.of(-2, 0, 3, -1)))).toEqual([-16, 0, 54, -2]);
  });
});
