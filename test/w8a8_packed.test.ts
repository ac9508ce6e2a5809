/**
 * W8A8 / W4A8 on the 1-byte / half-byte packed weights: weights `tag.any` of s8 / u8 / s4 / u4 resolve
 * to the `x8:p8` / `x4:p8k2` code panels (the weight-only layouts) on the integer path too, and the
 * integer kernel widens the codes in registers (wasm/src/s16-gemm-3x8-wasmsimd.c). Integer inputs and
 * power-of-two scales keep every result exact: compared bit for bit (s32 dst: the int32 sums
 * themselves) with the independent float64 expectation of quant_helpers.ts, for P#1 (grouped memory),
 * P#2 (offsets attribute) and P#3 (grouped_gemm), at 1, 2 and 3 threads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, tag, type DataType } from '../src/index.js';
import { GM, expectBitwise, expectClose, runGM, runP3Q, type GMCase, type P3QCase } from './quant_helpers.js';

const W8 = 'wasm:simd128:s16-gemm-3x8-w8', W4 = 'wasm:simd128:s16-gemm-3x8-w4';
const kernelOf = (w: DataType): string => (w === dt.s8 || w === dt.u8 ? W8 : W4);

/** Shapes: empty groups, a group over one M-block (64 rows), one-row groups; K odd and prime (37: no
 * block divides it), N = 13 (a partial panel); one group taking every row; E = 1. */
const SHAPES = {
  mixed: { G: 5, K: 37, N: 13, sizes: [3, 0, 70, 1, 0] },
  allInOne: { G: 4, K: 37, N: 13, sizes: [0, 0, 9, 0] },
  single: { G: 1, K: 37, N: 13, sizes: [11] },
} as const;

/** Integer-path problems (scales / zero points constant along K). */
const INT_CASES: ReadonlyArray<readonly [string, Omit<GMCase, 'G' | 'K' | 'N' | 'sizes'>]> = [
  ['s8 x s8 -> s32, full s8 range', { srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, fullRange: true }],
  ['s8 x u8 -> s32, full range', { srcDt: dt.s8, weiDt: dt.u8, dstDt: dt.s32, fullRange: true }],
  ['u8 x u8 -> s32, full range, src zp per expert, u8 weights zp per column', { srcDt: dt.u8, weiDt: dt.u8, dstDt: dt.s32, fullRange: true, zps: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.expertCol, dt: dt.u8 } } }],
  ['s8 x u8 -> f32, per-row x per-column scales, weights zp per tensor', { srcDt: dt.s8, weiDt: dt.u8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.tensor } } }],
  ['u8 x s8 -> s8, src zp per row, weights scale per expert, dst scale', { srcDt: dt.u8, weiDt: dt.s8, dstDt: dt.s8, zps: { src: { gran: GM.src.row, dt: dt.u8 } }, scales: { weights: { gran: GM.weights.expert }, dst: { gran: GM.dst.expert } } }],
  ['s8 x s4 -> s32, full s8 range', { srcDt: dt.s8, weiDt: dt.s4, dstDt: dt.s32, fullRange: true }],
  ['s8 x s4 -> f32, per-row x per-column scales, s4 weights zp per column', { srcDt: dt.s8, weiDt: dt.s4, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: dt.s4 } } }],
  ['u8 x u4 -> s32, full u8 range, src zp per expert, u4 weights zp per column', { srcDt: dt.u8, weiDt: dt.u4, dstDt: dt.s32, fullRange: true, zps: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.expertCol, dt: dt.u4 } } }],
  ['s8 x u4 -> bf16, weights scale per tensor, zp per expert', { srcDt: dt.s8, weiDt: dt.u4, dstDt: dt.bf16, scales: { weights: { gran: GM.weights.tensor } }, zps: { weights: { gran: GM.weights.expert } } }],
];

/** K-varying weights scales / zero points leave the integer path: the same panels on the f32 x low-precision kernels. */
const KBLOCK_CASES: ReadonlyArray<readonly [string, string, Omit<GMCase, 'G' | 'K' | 'N' | 'sizes'>]> = [
  ['s8 x s8, weights scales per K-block of 8', 'wasm:simd128:f32-gemm-4x8-w8', { srcDt: dt.s8, weiDt: dt.s8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.kBlock(8) } } }],
  ['u8 x u4, weights scales and u4 zp per K-block of 4', 'wasm:simd128:f32-gemm-4x8-w4', { srcDt: dt.u8, weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(4) } }, zps: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.kBlock(4), dt: dt.u4 } } }],
];

const THREADS = [1, 2, 3] as const;

describe.each(THREADS)('W8A8 on x8 / x4 packed weights, %i thread(s)', (threads) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create({ threads, kernels: 'simd128' });
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  it('the pd picks x8:p8 / x4:p8k2 for integer weights tag.any on the integer path (the weight-only layouts)', () => {
    for (const [w, name] of [[dt.s8, 'x8:p8'], [dt.u8, 'x8:p8'], [dt.s4, 'x4:p8k2'], [dt.u4, 'x4:p8k2']] as const) {
      for (const s of [dt.s8, dt.f32] as const) {
        const src = memory.desc.grouped([10, 37], s, 2, [RUNTIME_DIM_VAL, 37]), d = memory.desc.grouped([10, 13], dt.f32, 2, [RUNTIME_DIM_VAL, 13]);
        const pd = new matmul.PrimitiveDesc(eng, src, memory.desc([2, 37, 13], w, tag.any), d);
        expect(pd.queryMd('weights')?.packed?.name, `${s} x ${w}`).toBe(name);
      }
    }
  });

  it('with weights scales, the integer path keeps codes-only panels (its epilogue reads the scales at execution); the f32 path embeds them (+q)', () => {
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.WEIGHTS, 5, [1, 1, 1], dt.f32); // per expert and column
    for (const [s, embedded] of [[dt.s8, false], [dt.f32, true]] as const) {
      const src = memory.desc.grouped([10, 37], s, 2, [RUNTIME_DIM_VAL, 37]), d = memory.desc.grouped([10, 13], dt.f32, 2, [RUNTIME_DIM_VAL, 13]);
      const pd = new matmul.PrimitiveDesc(eng, src, memory.desc([2, 37, 13], dt.s8, tag.any), d, attr);
      expect(pd.queryMd('weights')?.packed?.quant !== undefined, `${s} src`).toBe(embedded);
      expect(pd.implInfo).toBe(embedded ? 'wasm:simd128:f32-gemm-4x8-w8' : W8);
    }
  });

  describe.each(['P1', 'P2'] as const)('%s', (proposal) => {
    for (const [shapeName, shape] of Object.entries(SHAPES)) {
      it.each(INT_CASES)(`${shapeName}: %s`, async (_n, c) => {
        const o = await runGM(eng, strm, { ...shape, ...c, proposal, packed: true, seed: 11 + threads });
        expect(o.pd.implInfo).toBe(kernelOf(c.weiDt!));
        expectBitwise(o);
      });
    }

    it.each(KBLOCK_CASES)('mixed: %s (f32 x low-precision path, same panels)', async (_n, impl, c) => {
      const o = await runGM(eng, strm, { ...SHAPES.mixed, K: 40, ...c, proposal, packed: true });
      expect(o.pd.implInfo).toBe(impl);
      expectBitwise(o);
    });
  });

  it.each([dt.s8, dt.u4] as const)('P1, K = 4099: K blocks of a 64-row tile start mid-panel (%s weights)', async (w) => {
    const o = await runGM(eng, strm, { G: 3, K: 4099, N: 20, sizes: [70, 0, 2], srcDt: dt.u8, weiDt: w, dstDt: dt.s32, packed: true, fullRange: true, zps: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.expertCol, dt: w === dt.s8 ? dt.s8 : dt.u4 } } });
    expect(o.pd.implInfo).toBe(kernelOf(w));
    expectBitwise(o);
  });

  it.each([dt.u8, dt.s4] as const)('P1, GLU halves with N / 2 = 10: the up half starts mid-panel, its codes read one by one (%s weights)', async (w) => {
    const o = await runGM(eng, strm, { ...SHAPES.mixed, N: 20, srcDt: dt.s8, weiDt: w, packed: true, glu: { alg: 'glu_swiglu', layout: 'halves' }, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: w } } });
    expect(o.pd.implInfo).toBe(kernelOf(w));
    expectClose(o);
  });

  describe('P3 grouped_gemm', () => {
    const experts = [{ K: 37, N: 13, rows: 5 }, { K: 37, N: 13, rows: 0 }, { K: 37, N: 13, rows: 70 }, { K: 37, N: 13, rows: 1 }];
    const cases: ReadonlyArray<readonly [string, P3QCase]> = [
      ['s8 x s8 -> s32, full range', { experts, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, fullRange: true }],
      ['s8 x u8 -> s32, full range', { experts, srcDt: dt.s8, weiDt: dt.u8, dstDt: dt.s32, fullRange: true }],
      ['u8 x u8 -> f32, src zp, weights zp and scales per column, src scales per row', { experts, srcDt: dt.u8, weiDt: dt.u8, scales: { src: { kind: 'row' }, weights: { kind: 'col' } }, zps: { src: { kind: 'tensor' }, weights: { kind: 'col', dt: dt.u8 } } }],
      ['s8 x s4 -> s32, full s8 range, weights zp per tensor', { experts, srcDt: dt.s8, weiDt: dt.s4, dstDt: dt.s32, fullRange: true, zps: { weights: { kind: 'tensor' } } }],
      ['s8 x u4 -> f32, u4 weights zp and scales per column', { experts, srcDt: dt.s8, weiDt: dt.u4, scales: { weights: { kind: 'col' } }, zps: { weights: { kind: 'col', dt: dt.u4 } } }],
      ['E = 1, one expert taking all rows', { experts: [{ K: 37, N: 13, rows: 9 }], srcDt: dt.u8, weiDt: dt.s4, dstDt: dt.s32, zps: { src: { kind: 'tensor' } } }],
    ];
    it.each(cases)('%s', async (_n, c) => {
      const o = await runP3Q(eng, strm, { ...c, packed: true, seed: 3 + threads });
      expect(o.pd.implInfo).toBe(kernelOf(c.weiDt!));
      expectBitwise(o);
    });
  });
});
