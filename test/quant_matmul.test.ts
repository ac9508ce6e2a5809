/**
 * rfcs/0002 numerics: scales at every granularity, scale data types, zero points, every supported
 * data-type combination, for P#1 (grouped descriptors), P#2 (offsets attribute) and dense matmul.
 * Inputs are integer / few-bit values with power-of-two (or 3-bit) scales, so results are exact and
 * compared bit for bit with the independent float64 computation of quant_helpers.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, Stream, dt, matmul, memory, tag, type DataType } from '../src/index.js';
import { DENSE, GM, QUANT_ENGINES, RT, convert, expectBitwise, runDense, runGM, type GMCase, type Granularity } from './quant_helpers.js';

const SHAPE = { G: 3, K: 16, N: 6, sizes: [2, 0, 3], totalM: 6 } as const;

describe.each(QUANT_ENGINES)('quantized matmul [%s]', (_name, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: GMCase): Promise<void> => {
    expectBitwise(await runGM(eng, strm, c));
  };

  describe.each(['P1', 'P2'] as const)('%s: scales at every granularity (f32 data)', (proposal) => {
    const srcGrans: Granularity[] = [GM.src.expert, GM.src.row, GM.src.rowK(4), GM.src.rowK(8), GM.src.rowK(16)];
    const weiGrans: Granularity[] = [GM.weights.tensor, GM.weights.expert, GM.weights.expertCol, GM.weights.kBlock(4), GM.weights.kBlock(16), GM.weights.block2d(4, 2), GM.weights.block2d(8, 3), GM.weights.block2d(16, 6)];

    it.each(srcGrans.map((g) => [g.name, g] as const))('%s', async (_n, gran) => {
      await run({ ...SHAPE, proposal, scales: { src: { gran } } });
    });

    it.each(weiGrans.map((g) => [g.name, g] as const))('%s', async (_n, gran) => {
      await run({ ...SHAPE, proposal, scales: { weights: { gran } } });
    });

    it('dst per expert (mask 0, [G]) divides', async () => {
      await run({ ...SHAPE, proposal, scales: { dst: { gran: GM.dst.expert } } });
    });

    it.each(srcGrans.flatMap((s) => [GM.weights.expertCol, GM.weights.block2d(4, 2)].map((w) => [`${s.name} + ${w.name} + dst`, s, w] as const)))('%s', async (_n, s, w) => {
      await run({ ...SHAPE, proposal, scales: { src: { gran: s }, weights: { gran: w }, dst: { gran: GM.dst.expert } }, bias: true });
    });

    it('empty groups, rows past the last offset untouched, one-row groups', async () => {
      await run({ proposal, G: 4, K: 8, N: 4, sizes: [0, 1, 0, 1], totalM: 5, scales: { src: { gran: GM.src.rowK(4) }, weights: { gran: GM.weights.kBlock(2) } } });
    });
  });

  describe('P1: per-row values as grouped descriptors sharing src\'s offsets', () => {
    it.each([GM.src.row, GM.src.rowK(8)].map((g) => [g.name, g] as const))('%s', async (_n, gran) => {
      await run({ ...SHAPE, proposal: 'P1', groupedRowValues: true, srcDt: dt.s8, weiDt: dt.s8, scales: { src: { gran } }, zps: { src: { gran, dt: dt.s8 } } });
    });
  });

  describe('scale data types', () => {
    it.each(['f32', 'bf16', 'f16', 'e8m0', 'f8_e4m3'] as const)('%s scales on src (row x K-block), weights (2D blocks) and dst', async (sdt) => {
      await run({ ...SHAPE, scales: { src: { gran: GM.src.rowK(8), dt: sdt }, weights: { gran: GM.weights.block2d(4, 3), dt: sdt }, dst: { gran: GM.dst.expert, dt: sdt } } });
    });

    it.each(['f32', 'bf16', 'f16', 'e8m0', 'f8_e4m3'] as const)('%s scales with an int8 GEMM (P2)', async (sdt) => {
      await run({ ...SHAPE, proposal: 'P2', srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.f32, scales: { src: { gran: GM.src.row, dt: sdt }, weights: { gran: GM.weights.expertCol, dt: sdt } } });
    });
  });

  describe('zero points (integer tensors)', () => {
    const src: ReadonlyArray<readonly [string, Granularity, DataType]> = [
      ['src per expert s32', GM.src.expert, dt.s32], ['src per row s8', GM.src.row, dt.s8], ['src per row x K-block u8', GM.src.rowK(4), dt.u8],
    ];
    it.each(src)('%s (u8 src)', async (_n, gran, zdt) => {
      await run({ ...SHAPE, srcDt: dt.u8, weiDt: dt.s8, dstDt: dt.s32, zps: { src: { gran, dt: zdt } } });
    });

    const wei: ReadonlyArray<readonly [string, Granularity, DataType, DataType]> = [
      ['per tensor s32 zp, s8 weights', GM.weights.tensor, dt.s32, dt.s8],
      ['per expert s8 zp, s8 weights', GM.weights.expert, dt.s8, dt.s8],
      ['per expert column u8 zp, u8 weights', GM.weights.expertCol, dt.u8, dt.u8],
      ['K-blocks s4 zp, s4 weights', GM.weights.kBlock(4), dt.s4, dt.s4],
      ['K-blocks u4 zp, u4 weights (AWQ-style)', GM.weights.kBlock(8), dt.u4, dt.u4],
      ['2D blocks s32 zp, u4 weights', GM.weights.block2d(4, 2), dt.s32, dt.u4],
    ];
    it.each(wei)('weights %s', async (_n, gran, zdt, wdt) => {
      await run({ ...SHAPE, srcDt: dt.s8, weiDt: wdt, dstDt: dt.s32, zps: { weights: { gran, dt: zdt } }, scales: { weights: { gran } } });
    });

    it.each([dt.s8, dt.u8, dt.s32] as const)('dst zero point per expert, %s dst, with a dst scale', async (ddt) => {
      await run({ ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, dstDt: ddt, scales: { dst: { gran: GM.dst.expert } }, zps: { dst: { gran: GM.dst.expert, dt: dt.s32 } } });
    });

    it('all three zero points and scales at once (P2, u8 x u4 -> u8)', async () => {
      await run({ ...SHAPE, proposal: 'P2', srcDt: dt.u8, weiDt: dt.u4, dstDt: dt.u8, zps: { src: { gran: GM.src.row, dt: dt.u8 }, weights: { gran: GM.weights.kBlock(8), dt: dt.u4 }, dst: { gran: GM.dst.expert } }, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.kBlock(8) }, dst: { gran: GM.dst.expert } } });
    });
  });

  describe('data type combinations (rfcs/0002 section 3)', () => {
    const combos: ReadonlyArray<readonly [string, GMCase]> = [
      ['s8 x s8 -> s32', { ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32 }],
      ['s8 x s8 -> f32 (per-row x per-column scales)', { ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.f32, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } } }],
      ['s8 x s8 -> s8 (dst scale, RNE + saturation)', { ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s8, scales: { dst: { gran: GM.dst.expert } } }],
      ['s8 x s8 -> bf16 / f16', { ...SHAPE, K: 8, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.bf16, scales: { weights: { gran: GM.weights.expert } } }],
      ['u8 x s8 -> u8 (saturating at 0 and 255)', { ...SHAPE, srcDt: dt.u8, weiDt: dt.s8, dstDt: dt.u8 }],
      ['s8 x u8 -> f16', { ...SHAPE, K: 8, srcDt: dt.s8, weiDt: dt.u8, dstDt: dt.f16, scales: { dst: { gran: GM.dst.expert } } }],
      ['u8 x s4 -> f32 (K-block scales and zero points)', { ...SHAPE, srcDt: dt.u8, weiDt: dt.s4, dstDt: dt.f32, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.kBlock(8) } }, zps: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.kBlock(8), dt: dt.s8 } } }],
      ['s8 x u4 -> s32', { ...SHAPE, srcDt: dt.s8, weiDt: dt.u4, dstDt: dt.s32 }],
      ['f16 x s4 -> f16 (weight-only, f16 K-block scales)', { ...SHAPE, K: 8, srcDt: dt.f16, weiDt: dt.s4, dstDt: dt.f16, scales: { weights: { gran: GM.weights.kBlock(4), dt: dt.f16 } } }],
      ['bf16 x u4 -> f32 (weight-only with zero points)', { ...SHAPE, srcDt: dt.bf16, weiDt: dt.u4, dstDt: dt.f32, scales: { weights: { gran: GM.weights.kBlock(8), dt: dt.bf16 } }, zps: { weights: { gran: GM.weights.kBlock(8), dt: dt.u4 } } }],
      ['f32 x s8 -> f32 (weight-only, per expert column)', { ...SHAPE, weiDt: dt.s8, scales: { weights: { gran: GM.weights.expertCol } } }],
      ['f32 x u8 -> bf16', { ...SHAPE, K: 8, weiDt: dt.u8, dstDt: dt.bf16, scales: { weights: { gran: GM.weights.tensor } } }],
      ['f32 x f8_e4m3 -> f32 (weight-only fp8, per expert column)', { ...SHAPE, weiDt: dt.f8_e4m3, scales: { weights: { gran: GM.weights.expertCol } } }],
      ['bf16 x f4_e2m1 -> f32 (weight-only MXFP4, e8m0 per 32)', { ...SHAPE, K: 64, srcDt: dt.bf16, weiDt: dt.f4_e2m1, scales: { weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }],
      ['f16 x f8_e5m2 -> f16 (weight-only, NVFP4-style f8_e4m3 scales per 16)', { ...SHAPE, K: 32, srcDt: dt.f16, weiDt: dt.f8_e5m2, dstDt: dt.f16, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 } } }],
      ['MXFP8: f8_e4m3 x f8_e4m3 -> f32, e8m0 per 32', { ...SHAPE, K: 64, srcDt: dt.f8_e4m3, weiDt: dt.f8_e4m3, scales: { src: { gran: GM.src.rowK(32), dt: dt.e8m0 }, weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }],
      ['MXFP8: f8_e5m2 x f8_e4m3 -> bf16', { ...SHAPE, K: 32, srcDt: dt.f8_e5m2, weiDt: dt.f8_e4m3, dstDt: dt.bf16, scales: { src: { gran: GM.src.rowK(32), dt: dt.e8m0 }, weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }],
      ['MXFP4: f4_e2m1 x f4_e2m1 -> f32, e8m0 per 32', { ...SHAPE, K: 64, srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, scales: { src: { gran: GM.src.rowK(32), dt: dt.e8m0 }, weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }],
      ['NVFP4: f4 x f4, f8_e4m3 per 16 + per-expert f32 folded into the dst scale', { ...SHAPE, K: 32, srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, scales: { src: { gran: GM.src.rowK(16), dt: dt.f8_e4m3 }, weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 }, dst: { gran: GM.dst.expert } } }],
      ['NVFP4: per-expert f32 as a binary_mul [G, 1] post-op', { ...SHAPE, K: 32, srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 } }, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'expert_1' }] }],
      ['f8_e4m3 x f4_e2m1 -> f8_e4m3 (dst scale, saturating)', { ...SHAPE, K: 32, srcDt: dt.f8_e4m3, weiDt: dt.f4_e2m1, dstDt: dt.f8_e4m3, scales: { dst: { gran: GM.dst.expert } } }],
      ['f8_e5m2 x f8_e5m2 -> f8_e5m2', { ...SHAPE, srcDt: dt.f8_e5m2, weiDt: dt.f8_e5m2, dstDt: dt.f8_e5m2 }],
      ['f16 x bf16 -> f32 with scales (float GEMM, scaled)', { ...SHAPE, srcDt: dt.f16, weiDt: dt.bf16, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol }, dst: { gran: GM.dst.expert } } }],
    ];
    it.each(combos)('P1 %s', async (_n, c) => run(c));
    it.each(combos)('P2 %s', async (_n, c) => run({ ...c, proposal: 'P2', seed: 17 }));
  });

  describe('weights packed by the pd (tag.any), K = 4099: blocked K on 64-row tiles, whole on small ones', () => {
    const BIG = { G: 6, K: 4099, N: 24, sizes: [0, 3, 64, 70, 1, 5], packed: true } as const;
    const cases: ReadonlyArray<readonly [string, GMCase]> = [
      ['s8 x s8 -> f32 (int path, x8 code panels), per-row x per-column scales', { ...BIG, srcDt: dt.s8, weiDt: dt.s8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } } }],
      ['u8 x s8 -> f32 with src and weights zero points', { ...BIG, srcDt: dt.u8, weiDt: dt.s8, zps: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.expertCol, dt: dt.s8 } } }],
      ['f32 x f32 -> f32, per-column weight scales, bias and relu (fused f32 path on f32 panels)', { ...BIG, scales: { weights: { gran: GM.weights.expertCol } }, bias: true, ops: [{ kind: 'eltwise', alg: 'eltwise_relu' }] }],
      ['bf16 x bf16 -> f32, K-block weight scales (panels repacked per tile)', { ...BIG, K: 4128, srcDt: dt.bf16, weiDt: dt.bf16, scales: { weights: { gran: GM.weights.kBlock(32) } } }],
    ];
    it.each(cases)('%s', async (_n, c) => run(c));
  });

  describe('dense 2D matmul (oneDNN mask rule)', () => {
    const D = { M: 5, K: 16, N: 6 } as const;
    const grans: ReadonlyArray<readonly [string, 'src' | 'weights' | 'dst', Granularity]> = [
      ...[DENSE.src.tensor, DENSE.src.row, DENSE.src.rowK(4), DENSE.src.kOnly(8)].map((g) => [g.name, 'src', g] as const),
      ...[DENSE.weights.tensor, DENSE.weights.col, DENSE.weights.kBlock(8), DENSE.weights.block2d(4, 3)].map((g) => [g.name, 'weights', g] as const),
      ...[DENSE.dst.tensor, DENSE.dst.col, DENSE.dst.row].map((g) => [g.name, 'dst', g] as const),
    ];
    it.each(grans)('%s', async (_n, arg, gran) => {
      const o = await runDense(eng, strm, { ...D, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.f32, scales: { [arg]: { gran } }, bias: true });
      expectBitwise(o);
    });

    it('u8 x u4 -> s8 with zero points and all scales', async () => {
      expectBitwise(await runDense(eng, strm, { ...D, srcDt: dt.u8, weiDt: dt.u4, dstDt: dt.s8, zps: { src: { gran: DENSE.src.tensor, dt: dt.u8 }, weights: { gran: DENSE.weights.col, dt: dt.u4 }, dst: { gran: DENSE.dst.tensor } }, scales: { src: { gran: DENSE.src.row }, weights: { gran: DENSE.weights.kBlock(4) }, dst: { gran: DENSE.dst.tensor } } }));
    });

    it('batched 3D with broadcast weights: masks name batch dims too (src [M, K/4] per row x K-block, weights per column, dst per batch)', async () => {
      const B = 2, M = 3, K = 8, N = 4;
      const attr = new PrimitiveAttr().setScales(ARG.SRC, 6, [1, 1, 4]).setScales(ARG.WEIGHTS, 4).setScales(ARG.DST, 1).setZeroPoints(ARG.WEIGHTS, 0);
      const srcMd = memory.desc([B, M, K], dt.s8, tag.abc), weiMd = memory.desc([1, K, N], dt.u8, tag.abc), dstMd = memory.desc([B, M, N], dt.f32, tag.abc);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
      expect(pd.queryMd('scales:src')?.dims).toEqual([M, K / 4]);
      expect(pd.queryMd('scales:weights')?.dims).toEqual([N]);
      expect(pd.queryMd('scales:dst')?.dims).toEqual([B]);
      const x = Array.from({ length: B * M * K }, (_, i) => ((i * 5) % 13) - 6), w = Array.from({ length: K * N }, (_, i) => (i * 7) % 10);
      const ss = [0.5, 1, 2, 4, 0.25, 1], sw = [1, 2, 0.5, 4], sd = [2, 0.5], zw = [3];
      const mk = (md: ReturnType<typeof memory.desc>, v: number[]): Memory => Memory.create(md, eng).write(v);
      const mems = [mk(srcMd, x), mk(weiMd, w), Memory.create(dstMd, eng), mk(memory.desc([M, K / 4], dt.f32, tag.ab), ss), mk(memory.desc([N], dt.f32, tag.a), sw), mk(memory.desc([B], dt.f32, tag.a), sd), mk(memory.desc([1], dt.s32, tag.a), zw)];
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: mems[0], [ARG.WEIGHTS]: mems[1], [ARG.DST]: mems[2], [ARG.ATTR_SCALES | ARG.SRC]: mems[3], [ARG.ATTR_SCALES | ARG.WEIGHTS]: mems[4], [ARG.ATTR_SCALES | ARG.DST]: mems[5], [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: mems[6] });
      await strm.wait();
      const want: number[] = [];
      for (let b = 0; b < B; b++) for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += x[(b * M + m) * K + k] * ss[m * 2 + Math.floor(k / 4)] * (w[k * N + n] - zw[0]) * sw[n];
        want.push(Math.fround(acc) / sd[b]);
      }
      expect(Array.from(mems[2].read())).toEqual(want);
      mems.forEach((m) => m.free());
    });

    it('MXFP4 dense', async () => {
      expectBitwise(await runDense(eng, strm, { M: 3, K: 64, N: 4, srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, scales: { src: { gran: DENSE.src.rowK(32), dt: dt.e8m0 }, weights: { gran: DENSE.weights.kBlock(32), dt: dt.e8m0 } } }));
    });
  });

  describe('variable-K grouped matmul (per-tensor scales only)', () => {
    it('s8 x s8 -> f32: src / weights per group [G], dst [1], src zero point per group', async () => {
      const G = 3, M = 3, N = 4, tK = 9;
      const attr = new PrimitiveAttr().setScales(ARG.SRC, 0).setScales(ARG.WEIGHTS, 0).setScales(ARG.DST, 0).setZeroPoints(ARG.SRC, 0);
      const srcMd = memory.desc.grouped([M, tK], dt.s8, G, [M, RT]);
      const weiMd = memory.desc.grouped([tK, N], dt.s8, G, [RT, N]);
      const dstMd = memory.desc([G, M, N], dt.f32, tag.abc);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
      expect(pd.queryMd('scales:src')?.dims).toEqual([G]);
      expect(pd.queryMd('scales:weights')?.dims).toEqual([G]);
      expect(pd.queryMd('scales:dst')?.dims).toEqual([1]);
      const x = Array.from({ length: M * tK }, (_, i) => ((i * 5) % 11) - 5), w = Array.from({ length: tK * N }, (_, i) => ((i * 3) % 7) - 3);
      const ss = [0.5, 2, 0.25], sw = [4, 1, 0.5], sd = [2], zs = [1, -2, 3];
      const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng, [undefined, src.handles[1]]).write(w), dst = Memory.create(dstMd, eng);
      src.offsets.set([0, 4, 4, 9]);
      const q = (md: ReturnType<typeof memory.desc>, v: number[]): Memory => Memory.create(md, eng).write(v);
      const mems = [q(memory.desc([G], dt.f32, tag.a), ss), q(memory.desc([G], dt.f32, tag.a), sw), q(memory.desc([1], dt.f32, tag.a), sd), q(memory.desc([G], dt.s32, tag.a), zs)];
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.SRC]: mems[0], [ARG.ATTR_SCALES | ARG.WEIGHTS]: mems[1], [ARG.ATTR_SCALES | ARG.DST]: mems[2], [ARG.ATTR_ZERO_POINTS | ARG.SRC]: mems[3] });
      await strm.wait();
      const offs = [0, 4, 4, 9];
      const want: number[] = [];
      for (let g = 0; g < G; g++) for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = offs[g]; k < offs[g + 1]; k++) acc += (x[m * tK + k] - zs[g]) * ss[g] * w[k * N + n] * sw[g];
        want.push(Math.fround(acc) / sd[0]);
      }
      expect(Array.from(dst.read())).toEqual(want);
      [src, wei, dst, ...mems].forEach((m) => m.free());
    });
  });

  describe('output conversion', () => {
    it('s8 dst: x / s_dst rounds half to even and saturates', async () => {
      // 1 x 1 x 1: dst = src * wei / 2, so every product lands on a .5 tie or beyond the range.
      const srcMd = memory.desc([6, 1], dt.s8, tag.ab), weiMd = memory.desc([1, 1], dt.s8, tag.ab), dstMd = memory.desc([6, 1], dt.s8, tag.ab);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, new PrimitiveAttr().setScales(ARG.DST, 0));
      const src = Memory.create(srcMd, eng).write([1, 3, 5, -1, -3, 127]);
      const wei = Memory.create(weiMd, eng).write([100]);
      const dst = Memory.create(dstMd, eng);
      const sd = Memory.create(memory.desc([1], dt.f32, tag.a), eng).write([200]);
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sd });
      await strm.wait();
      // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2, 63.5 -> 64
      expect(Array.from(dst.read())).toEqual([0, 2, 2, 0, -2, 64]);
      expect([0.5, 1.5, 2.5, -0.5, -1.5, 63.5].map((v) => convert('s8', v))).toEqual([0, 2, 2, 0, -2, 64]);
      // s_dst = 0.5: x * 2 saturates at -128 / 127.
      sd.write([0.5]);
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sd });
      await strm.wait();
      expect(Array.from(dst.read())).toEqual([127, 127, 127, -128, -128, 127]);
      [src, wei, dst, sd].forEach((m) => m.free());
    });
  });
});
