import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, reorder, tag } from '../src/index.js';
import { DISTRIBUTIONS, balanced, geometricSkew, linearSkew, mulberry32, randomRouting } from './workloads.js';
import {
  ENGINE_CONFIGS, SENTINEL, expectMatchesReference, readLogical, runGroupedM, setupGroupedM, writeLogical, type GroupedMCase,
} from './helpers.js';
import { assertClose, refGroupedM } from './reference.js';

describe.each(ENGINE_CONFIGS)('matmul grouped variable M: [total_M, K] x [G, K, N] -> [total_M, N] [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: GroupedMCase): Promise<void> => expectMatchesReference(await runGroupedM(eng, strm, c));

  describe.each([32, 256])('G = %i, K = 37, N = 19, total_M = 101', (G) => {
    it.each(DISTRIBUTIONS)('%s', async (_name, gen) => {
      await run({ G, K: 37, N: 19, sizes: gen(G, 101), seed: G });
    });
  });

  it.each([1, 2, 3])('random routing (seed %i), G = 64, K = 24, N = 40, 200 tokens', async (seed) => {
    await run({ G: 64, K: 24, N: 40, sizes: randomRouting(mulberry32(seed), 64, 200), seed });
  });

  it('E = 1 (a single expert is a plain GEMM)', async () => {
    await run({ G: 1, K: 37, N: 19, sizes: [101] });
  });

  it('E = 1 with zero tokens leaves the whole dst untouched', async () => {
    await run({ G: 1, K: 5, N: 3, sizes: [0], totalM: 6 });
  });

  it('K = 1', async () => {
    await run({ G: 8, K: 1, N: 19, sizes: linearSkew(8, 101) });
  });

  it('N = 1', async () => {
    await run({ G: 8, K: 37, N: 1, sizes: geometricSkew(8, 101) });
  });

  it('K = 1 and N = 1', async () => {
    await run({ G: 5, K: 1, N: 1, sizes: [0, 3, 0, 1, 2] });
  });

  it('rows past the last offset keep their sentinel (total_M larger than the routed tokens)', async () => {
    const r = await runGroupedM(eng, strm, { G: 8, K: 37, N: 19, sizes: balanced(8, 90), totalM: 101 });
    expectMatchesReference(r);
  });

  it('all experts empty: nothing is written', async () => {
    await run({ G: 32, K: 7, N: 5, sizes: new Array<number>(32).fill(0), totalM: 9 });
  });

  it('zero rows in total (total_M = 0)', async () => {
    await run({ G: 4, K: 7, N: 5, sizes: [0, 0, 0, 0] });
  });

  it('strided (padded) src: row stride 37 + 6 > K, padding full of NaN never read', async () => {
    await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), srcRowStride: 43 });
  });

  it('strided (padded) dst: row stride 19 + 5 > N, padding left untouched', async () => {
    await run({ G: 8, K: 37, N: 19, sizes: geometricSkew(8, 101), dstRowStride: 24, totalM: 110 });
  });

  it('acb weights ([G, N, K] storage, nn.Linear style)', async () => {
    await run({ G: 16, K: 37, N: 19, sizes: linearSkew(16, 101), weiTag: 'acb' });
  });

  it('acb weights with padded src and dst and empty experts', async () => {
    await run({ G: 12, K: 37, N: 19, sizes: [0, 30, 0, 0, 20, 1, 0, 40, 0, 0, 10, 0], weiTag: 'acb', srcRowStride: 40, dstRowStride: 20 });
  });

  it.each([
    ['[G, N] per expert', [6, 19]],
    ['[1, N] broadcast over experts', [1, 19]],
    ['[G, 1] broadcast over columns', [6, 1]],
    ['[1, 1] scalar', [1, 1]],
  ] as const)('bias %s', async (_name, bias) => {
    await run({ G: 6, K: 37, N: 19, sizes: [20, 0, 31, 7, 0, 43], bias });
  });

  it('bias on empty experts is never applied to any row', async () => {
    await run({ G: 6, K: 3, N: 4, sizes: [0, 5, 0, 0, 5, 0], bias: [6, 4], totalM: 12 });
  });

  it('shared offsets buffer between src and dst', async () => {
    await run({ G: 32, K: 37, N: 19, sizes: geometricSkew(32, 101), offsets: 'shared' });
  });

  it('separate but equal offsets buffers', async () => {
    await run({ G: 32, K: 37, N: 19, sizes: geometricSkew(32, 101), offsets: 'separate' });
  });

  it('per-group (host-known) groupedDims', async () => {
    await run({ G: 5, K: 37, N: 19, sizes: [10, 0, 50, 1, 40], perGroup: true });
  });

  it('per-group groupedDims with shared offsets (filled by Memory.create)', async () => {
    await run({ G: 5, K: 37, N: 19, sizes: [10, 0, 50, 1, 40], perGroup: true, offsets: 'shared' });
  });

  describe('low precision', () => {
    it('bf16 src, weights and dst', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16 });
    });

    it('bf16 src and weights, f32 dst (exact inputs: f32 tolerance applies)', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.f32 });
    });

    it('f32 src and weights, bf16 dst', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: geometricSkew(8, 101), dstDt: dt.bf16 });
    });

    it('f16 src, weights and dst', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: balanced(8, 101), srcDt: dt.f16, weiDt: dt.f16, dstDt: dt.f16 });
    });

    it('f32 src, f16 weights, f16 dst, bf16 bias, acb, padded', async () => {
      await run({ G: 4, K: 37, N: 19, sizes: [0, 60, 41, 0], weiDt: dt.f16, dstDt: dt.f16, biasDt: dt.bf16, bias: [4, 19], weiTag: 'acb', srcRowStride: 38, dstRowStride: 21 });
    });

    it('bf16 dst with rows past the last offset: sentinel rows keep their bits', async () => {
      await run({ G: 8, K: 11, N: 9, sizes: balanced(8, 30), totalM: 37, dstDt: dt.bf16 });
    });
  });

  describe('post-ops', () => {
    it('relu', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), postOps: [{ kind: 'relu', alpha: 0 }] });
    });

    it('leaky relu + linear', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), bias: [8, 19], postOps: [{ kind: 'relu', alpha: 0.25 }, { kind: 'linear', alpha: -2, beta: 0.5 }] });
    });

    it('sum (accumulate into dst) leaves rows past the last offset alone', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: geometricSkew(8, 90), totalM: 101, postOps: [{ kind: 'sum', scale: 0.5 }] });
    });

    it('bias + sum + relu on bf16 dst', async () => {
      await run({ G: 4, K: 9, N: 7, sizes: [5, 0, 6, 2], bias: [1, 7], dstDt: dt.bf16, postOps: [{ kind: 'sum', scale: 1 }, { kind: 'relu', alpha: 0 }] });
    });
  });

  it('tag.any weights: the pd picks a layout; a reorder fills it from plain weights', async () => {
    const G = 4, K = 37, N = 19, sizes = [10, 0, 25, 66];
    const total = 101;
    const srcMd = memory.desc.grouped([total, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([total, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], dt.f32, tag.any), dstMd);
    const weiMd = pd.queryMd('weights');
    if (!weiMd) throw new Error('queryMd(weights) returned nothing');
    expect(weiMd.format).not.toBe('any');
    expect(weiMd.dims).toEqual([G, K, N]);
    const rng = mulberry32(5);
    const plainMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const plain = Memory.create(plainMd, eng);
    const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const x = Float64Array.from({ length: total * K }, () => Math.fround(rng() - 0.5));
    const w = Float64Array.from({ length: G * K * N }, () => Math.fround(rng() - 0.5));
    writeLogical(src, x);
    writeLogical(plain, w);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, weiMd)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei });
    src.offsets.set([0, 10, 10, 35, 101]);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    assertClose(readLogical(dst), refGroupedM(x, w, sizes, K, N));
    [plain, src, wei, dst].forEach((m) => m.free());
  });

  /** Packed (tag.any) weights filled by a reorder; src rewritten between executions (no block survives a run). */
  const runPacked = async (G: number, K: number, N: number, sizes: readonly number[], rewrites = 1): Promise<void> => {
    const total = sizes.reduce((a, b) => a + b, 0);
    const srcMd = memory.desc.grouped([total, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([total, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], dt.f32, tag.any), dstMd);
    const weiMd = pd.queryMd('weights')!;
    const plainMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const plain = Memory.create(plainMd, eng), wei = Memory.create(weiMd, eng), src = Memory.create(srcMd, eng);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const rng = mulberry32(K + N);
    const w = Float64Array.from({ length: G * K * N }, () => Math.fround(rng() - 0.5));
    writeLogical(plain, w);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, weiMd)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei });
    let acc = 0;
    src.offsets.set([0, ...sizes.map((v) => (acc += v))]);
    const prim = new matmul.Primitive(pd);
    try {
      for (let r = 0; r < rewrites; r++) {
        const x = Float64Array.from({ length: total * K }, () => Math.fround(rng() - 0.5));
        writeLogical(src, x);
        prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
        await strm.wait();
        assertClose(readLogical(dst), refGroupedM(x, w, sizes, K, N));
      }
    } finally {
      [plain, src, wei, dst].forEach((m) => m.free());
    }
  };

  it('packed weights, K = 4099 (split in K blocks for full tiles, whole for small ones), N = 140 (tiles share A blocks)', async () => {
    await runPacked(6, 4099, 140, [0, 3, 64, 70, 1, 5]);
  });

  it('packed weights: a second execution with new src values does not reuse the previous A blocks', async () => {
    await runPacked(3, 301, 150, [9, 0, 66], 3);
  });

  it.each([['plain', tag.abc], ['packed', tag.any]] as const)(
    'a token\'s result does not depend on how many tokens its expert got (%s weights, K = 4099: whole or blocked K, 1..4-row kernels)',
    async (_name, weiTag) => {
      const G = 4, K = 4099, N = 20, R = 70;
      const srcMd = memory.desc.grouped([R, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
      const dstMd = memory.desc.grouped([R, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], dt.f32, weiTag), dstMd);
      const plainMd = memory.desc([G, K, N], dt.f32, tag.abc);
      const plain = Memory.create(plainMd, eng), wei = Memory.create(pd.queryMd('weights')!, eng), src = Memory.create(srcMd, eng);
      const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      const rng = mulberry32(11);
      const w1 = Float64Array.from({ length: K * N }, () => Math.fround(rng() - 0.5));
      const w = new Float64Array(G * K * N);
      for (let g = 0; g < G; g++) w.set(w1, g * K * N); // every expert has the same weights
      writeLogical(plain, w);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei });
      writeLogical(src, Float64Array.from({ length: R * K }, () => Math.fround(rng() - 0.5)));
      const prim = new matmul.Primitive(pd);
      let first: Float64Array | undefined;
      try {
        for (const sizes of [[70, 0, 0, 0], [1, 2, 3, 64], [5, 65, 0, 0], [33, 33, 3, 1], [0, 0, 0, 70]]) {
          let acc = 0;
          src.offsets.set([0, ...sizes.map((v) => (acc += v))]);
          prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
          await strm.wait();
          const got = readLogical(dst);
          if (!first) first = got;
          else expect(got, `routing ${sizes.join('+')}`).toEqual(first);
        }
      } finally {
        [plain, src, wei, dst].forEach((m) => m.free());
      }
    },
  );

  it('re-executing the same primitive with new offsets recomputes with the new routing', async () => {
    const G = 6, K = 13, N = 11, totalM = 40;
    const f = setupGroupedM(eng, { G, K, N, sizes: balanced(G, totalM), offsets: 'shared' });
    try {
      for (const sizes of [balanced(G, totalM), [40, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 40], [1, 2, 3, 4, 5, 6]]) {
        const used = sizes.reduce((a, b) => a + b, 0);
        writeLogical(f.dst, new Float64Array(totalM * N).fill(SENTINEL));
        let acc = 0;
        f.src.offsets.set([0, ...sizes.map((s) => (acc += s))]);
        f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
        await strm.wait();
        const got = readLogical(f.dst);
        assertClose(got.subarray(0, used * N), refGroupedM(f.x, f.w, sizes, K, N));
        expect([...got.subarray(used * N)].every((v) => v === SENTINEL)).toBe(true);
      }
    } finally {
      f.free();
    }
  });

  it('K = 0: routed rows get the bias, the rest stay untouched', async () => {
    await run({ G: 3, K: 0, N: 5, sizes: [2, 0, 3], totalM: 7, bias: [3, 5] });
  });

  it('N = 0 is a no-op', async () => {
    await run({ G: 3, K: 4, N: 0, sizes: [2, 0, 3] });
  });

  it('groups larger than one tile (M_g > 64, N > 128, K > 256)', async () => {
    await run({ G: 3, K: 300, N: 140, sizes: [70, 0, 65], totalM: 140 });
  });
});
