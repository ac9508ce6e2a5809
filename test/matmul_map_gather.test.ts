/**
 * Gathered src rows (`attr.setGather`) with groups mapped to experts (`attr.setExpertMap`): neighbouring
 * groups on one expert read different tokens. Regression: the cpu kernels kept a worker's packed A
 * block keyed by expert, src and row offset, which a gather and a map leave equal for two such groups,
 * so the second group multiplied the first's tokens. Against float64, plain and fused kernels (f32 and
 * bf16 src, with a GLU), padding rows (token -1), 1 and 2 threads.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, tag, type EngineOptions } from '../src/index.js';
import { ENGINE_CONFIGS } from './helpers.js';

const CONFIGS: ReadonlyArray<readonly [string, EngineOptions]> = [...ENGINE_CONFIGS, ['wasm simd128, 2 threads', { threads: 2, kernels: 'simd128' }]];

// Groups 2 and 3 (and 4 and 6) use one expert and hold different tokens; row 6 is padding.
const T = 6, E = 3, SIZES = [0, 1, 1, 1, 3, 0, 1], MAP = [1, 1, 0, 0, 1, 0, 0], TI = [3, 5, 1, 0, 2, -1, 4];

describe.each(CONFIGS)('matmul gather + expert map [%s]', (_n, opts) => {
  it.each([
    ['f32 src', dt.f32, false, 16],
    ['bf16 src (fused kernel)', dt.bf16, false, 40],
    ['f32 src, GLU (fused kernel)', dt.f32, true, 64],
  ] as const)('%s: every group its own tokens', async (_c, srcDt, glu, K) => {
    const eng = await Engine.create(opts);
    try {
      const strm = new Stream(eng);
      const G = SIZES.length, R = TI.length, N = glu ? 6 : 5, Nd = glu ? N / 2 : N;
      const offs = [0];
      for (const s of SIZES) offs.push(offs[offs.length - 1] + s);
      // Exact in bf16 and f32: small integers and quarters.
      const x = Float64Array.from({ length: T * K }, (_, i) => ((i * 7) % 9) - 4);
      const w = Float64Array.from({ length: E * K * N }, (_, i) => (((i * 5) % 7) - 3) / 4);
      const attr = new PrimitiveAttr().setGather().setExpertMap();
      if (glu) attr.postOps.appendGlu('glu_swiglu', 'interleaved');
      const srcMd = memory.desc([T, K], srcDt, tag.ab), weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
      const dstMd = memory.desc.grouped([R, Nd], dt.f32, G, [RUNTIME_DIM_VAL, Nd]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
      const dst = Memory.create(dstMd, eng);
      dst.offsets.set(offs);
      const mem = (md: ReturnType<typeof memory.desc>, v: ArrayLike<number>): Memory => Memory.create(md, eng).write(v);
      const args = {
        [ARG.SRC]: mem(srcMd, x), [ARG.WEIGHTS]: mem(weiMd, w), [ARG.DST]: dst,
        [ARG.MOE_TOKEN_INDEX]: mem(memory.desc([R], dt.s32, tag.a), TI), [ARG.MOE_EXPERT_MAP]: mem(memory.desc([G], dt.s32, tag.a), MAP),
      };
      const prim = new matmul.Primitive(pd);
      // Twice: the second run starts from the blocks the first left in the workers.
      for (let run = 0; run < 2; run++) {
        prim.execute(strm, args);
        await strm.wait();
        const got = dst.read();
        for (let g = 0; g < G; g++) {
          for (let r = offs[g]; r < offs[g + 1]; r++) {
            const col = (n: number): number => {
              let a = 0;
              for (let k = 0; k < K; k++) a += (TI[r] < 0 ? 0 : x[TI[r] * K + k]) * w[(MAP[g] * K + k) * N + n];
              return a;
            };
            for (let n = 0; n < Nd; n++) {
              const want = glu ? (col(2 * n) / (1 + Math.exp(-col(2 * n)))) * col(2 * n + 1) : col(n);
              expect(Math.abs(got[r * Nd + n] - want), `run ${run}, row ${r} (group ${g}, expert ${MAP[g]}, token ${TI[r]}), column ${n}: ${got[r * Nd + n]} vs ${want}`).toBeLessThanOrEqual(glu ? 1e-5 * Math.max(1, Math.abs(want)) : 0);
            }
          }
        }
      }
    } finally {
      eng.release();
    }
  });
});
