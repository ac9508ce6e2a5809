/**
 * cuDNN's discrete grouped GEMM dSwiGLU epilogue with its per-group scales (seed 001): alpha multiplies
 * the GEMM result (`ref = alpha_g^2 · sum_k A · B`) and beta the saved gate / up (`gate = beta_g · C_gate`),
 * as arguments of the matmul's glu_backward post-op (`{ groupAlpha, groupBeta }`). Expected values: the
 * float64 GEMM and the float64 GLU backward of test/glu_backward_reference.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag, type GluAlg } from '../src/index.js';
import { expectDnnlError } from './helpers.js';
import { gluBackwardRow } from './glu_backward_reference.js';
import { mulberry32 } from './workloads.js';

const RT = RUNTIME_DIM_VAL;

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 2T', { threads: 2, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('matmul glu_backward post-op with per-group alpha / beta [%s]', (_n, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  async function run(alg: GluAlg, sizes: number[], K: number, N: number, useAlpha: boolean, useBeta: boolean, seed: number): Promise<void> {
    const G = sizes.length, T = sizes.reduce((a, b) => a + b, 0) + 2;
    const rng = mulberry32(seed);
    const u = (n: number, lo: number, hi: number): Float64Array => Float64Array.from({ length: n }, () => Math.fround(lo + (hi - lo) * rng()));
    const attr = new PrimitiveAttr();
    attr.postOps.appendGluBackward(alg, 'halves', undefined, undefined, { prob: true, groupAlpha: useAlpha, groupBeta: useBeta });
    const srcMd = memory.desc.grouped([T, K], dt.f32, G, [RT, K]), dstMd = memory.desc.grouped([T, 2 * N], dt.f32, G, [RT, 2 * N]);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], dt.f32, tag.abc), dstMd, attr);
    const x = u(T * K, -1, 1), w = u(G * K * N, -0.5, 0.5), h = u(T * 2 * N, -3, 3), prob = u(T, 0.1, 1);
    const alpha = u(G, 0.5, 2), beta = u(G, 0.5, 1.5);
    const src = Memory.create(srcMd, eng).write(x);
    offsets.fromSizes(sizes, src.offsets);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const wei = Memory.create(pd.queryMd('weights')!, eng).write(w);
    const h13 = Memory.create(pd.queryMd('glu_backward:src')!, eng).write(h);
    const pm = Memory.create(pd.queryMd('glu_backward:prob')!, eng).write(prob);
    const dpm = Memory.create(pd.queryMd('glu_backward:diff_prob')!, eng).write(new Float64Array(T));
    const po = (id: number): number => ARG.ATTR_MULTIPLE_POST_OP(0) | id;
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [po(ARG.SRC_1)]: h13, [po(ARG.GLU_PROB)]: pm, [po(ARG.GLU_DIFF_PROB)]: dpm };
    const am = useAlpha ? Memory.create(pd.queryMd('glu_backward:alpha')!, eng).write(alpha) : undefined;
    const bm = useBeta ? Memory.create(pd.queryMd('glu_backward:beta')!, eng).write(beta) : undefined;
    if (am) args[po(ARG.GLU_ALPHA)] = am;
    if (bm) args[po(ARG.GLU_BETA)] = bm;
    new matmul.Primitive(pd).execute(strm, args);
    await strm.wait();
    const got = dst.read(), dprob = dpm.read();
    let r = 0;
    for (let g = 0; g < G; g++) {
      const a2 = useAlpha ? alpha[g] * alpha[g] : 1, b = useBeta ? beta[g] : 1;
      for (let m = 0; m < sizes[g]; m++, r++) {
        const diff = Float64Array.from({ length: N }, (_, n) => {
          let s = 0;
          for (let k = 0; k < K; k++) s += x[r * K + k] * w[(g * K + k) * N + n];
          return a2 * s;
        });
        const hs = Float64Array.from(h.subarray(r * 2 * N, (r + 1) * 2 * N), (v) => b * v);
        const ref = gluBackwardRow({ alg, layout: 'halves' }, N, hs, diff, prob[r]);
        for (let c = 0; c < 2 * N; c++) expect(Math.abs(got[r * 2 * N + c] - ref.dh[c]), `row ${r} col ${c}`).toBeLessThanOrEqual(1e-4 * (1 + Math.abs(ref.dh[c])));
        expect(Math.abs(dprob[r] - ref.dprob), `dprob row ${r}`).toBeLessThanOrEqual(1e-4 * (1 + ref.scale));
      }
    }
    [src, dst, wei, h13, pm, dpm, am, bm].forEach((mm) => mm?.free());
  }

  it('dswiglu: alpha and beta per expert, an empty expert, K and N not multiples of the tile', async () => {
    await run('glu_swiglu', [3, 0, 5], 13, 10, true, true, 1);
  });
  it('dgeglu: alpha only, then beta only; E = 1', async () => {
    await run('glu_geglu_tanh', [4, 6], 9, 6, true, false, 2);
    await run('glu_geglu_erf', [7], 9, 6, false, true, 3);
  });
  it('per-group scales need grouped rows; an alpha argument without groupAlpha is refused', () => {
    const attr = new PrimitiveAttr();
    attr.postOps.appendGluBackward('glu_swiglu', 'halves', undefined, undefined, { groupAlpha: true });
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([4, 3], dt.f32, tag.ab), memory.desc([3, 5], dt.f32, tag.ab), memory.desc([4, 10], dt.f32, tag.ab), attr), 'unimplemented', 'per-group alpha / beta need grouped rows');
    const a2 = new PrimitiveAttr();
    a2.postOps.appendGluBackward('glu_swiglu', 'halves');
    const srcMd = memory.desc.grouped([4, 3], dt.f32, 2, [RT, 3]), dstMd = memory.desc.grouped([4, 10], dt.f32, 2, [RT, 10]);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 3, 5], dt.f32, tag.abc), dstMd, a2);
    const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]), wei = Memory.create(pd.queryMd('weights')!, eng);
    const h = Memory.create(pd.queryMd('glu_backward:src')!, eng), al = Memory.create(memory.desc([2], dt.f32, tag.a), eng);
    expectDnnlError(() => new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: h, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.GLU_ALPHA]: al }), 'invalid_arguments', 'the glu_backward post-op has no groupAlpha');
    [src, dst, wei, h, al].forEach((m) => m.free());
  });
});
