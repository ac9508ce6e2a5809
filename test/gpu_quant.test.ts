/**
 * rfcs/0002 quantization on the gpu engine's matmul (WebGPU, SwiftShader in CI): weight-only
 * s8/u8/s4/u4 with per-column / per-expert-column / K-block scales and zero points, fp8 and MXFP4 /
 * NVFP4 block scales, src and dst scales, W8A8 int8. Same cases and the same independent float64
 * expectation as quant_matmul.test.ts (quant_helpers.ts): exact inputs, compared bit for bit.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Memory, Stream, dt, matmul, memory, tag, type GpuEngine } from '../src/index.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { DENSE, GM, expectBitwise, type GMCase } from './quant_helpers.js';
import { runGpuDense, runGpuGM } from './gpu_quant_helpers.js';

// K = 20 and N = 70: neither a multiple of the tile (bk 16, tn 64); an empty expert; one with all but one row.
const SHAPE = { G: 3, K: 20, N: 70, sizes: [5, 0, 1], totalM: 7 } as const;

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });

const run = async (c: GMCase): Promise<void> => expectBitwise(await runGpuGM(eng, strm, c));

describe('gpu matmul: weight-only integer weights (f32 / f16 / bf16 activations)', () => {
  const cases: ReadonlyArray<readonly [string, GMCase]> = [
    ['f32 x s8 -> f32, per expert column scales (P1)', { ...SHAPE, weiDt: dt.s8, scales: { weights: { gran: GM.weights.expertCol } } }],
    ['f32 x u8 -> f32, per expert column scales and u8 zero points (P2)', { ...SHAPE, proposal: 'P2', weiDt: dt.u8, scales: { weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: dt.u8 } } }],
    ['bf16 x u4 -> f32, K-blocks 4 bf16 scales, u4 zero points (AWQ-style)', { ...SHAPE, srcDt: dt.bf16, weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(4), dt: dt.bf16 } }, zps: { weights: { gran: GM.weights.kBlock(4), dt: dt.u4 } } }],
    ['f16 x s4 -> f16, K-blocks 4 f16 scales, s8 zero points, bias', { ...SHAPE, K: 8, srcDt: dt.f16, weiDt: dt.s4, dstDt: dt.f16, scales: { weights: { gran: GM.weights.kBlock(4), dt: dt.f16 } }, zps: { weights: { gran: GM.weights.kBlock(4), dt: dt.s8 } }, bias: true }],
    ['f32 x s4 -> bf16, 4x5 2D blocks, per tensor s32 zero point', { ...SHAPE, weiDt: dt.s4, dstDt: dt.bf16, scales: { weights: { gran: GM.weights.block2d(4, 5) } }, zps: { weights: { gran: GM.weights.tensor } } }],
    ['f32 x u8 -> f32, per expert column scales, E = 1 taking every row', { G: 1, K: 20, N: 70, sizes: [6], weiDt: dt.u8, scales: { weights: { gran: GM.weights.expertCol } } }],
  ];
  it.each(cases)('%s', async (_n, c) => run(c));
});

describe('gpu matmul: fp8 weights, MXFP4 and NVFP4 block scales', () => {
  const cases: ReadonlyArray<readonly [string, GMCase]> = [
    ['f32 x f8_e4m3 -> f32, per expert column scales', { ...SHAPE, weiDt: dt.f8_e4m3, scales: { weights: { gran: GM.weights.expertCol } } }],
    ['f16 x f8_e5m2 -> f16, f8_e4m3 scales per 16 (P2)', { ...SHAPE, K: 32, proposal: 'P2', srcDt: dt.f16, weiDt: dt.f8_e5m2, dstDt: dt.f16, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 } } }],
    ['bf16 x f4_e2m1 -> f32, MXFP4: e8m0 per 32', { ...SHAPE, K: 96, srcDt: dt.bf16, weiDt: dt.f4_e2m1, scales: { weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }],
    ['f32 x f4_e2m1 -> f32, NVFP4: f8_e4m3 per 16 and a per-expert dst scale', { ...SHAPE, K: 48, weiDt: dt.f4_e2m1, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 }, dst: { gran: GM.dst.expert } } }],
  ];
  it.each(cases)('%s', async (_n, c) => run(c));
});

describe('gpu matmul: src and dst scales, W8A8', () => {
  const cases: ReadonlyArray<readonly [string, GMCase]> = [
    ['f32: src per row x K-block 4, weights per expert column, dst per expert, bias', { ...SHAPE, scales: { src: { gran: GM.src.rowK(4) }, weights: { gran: GM.weights.expertCol }, dst: { gran: GM.dst.expert } }, bias: true }],
    ['s8 x s8 -> f32 (integer GEMM), per-row x per-expert-column scales (P2)', { ...SHAPE, proposal: 'P2', srcDt: dt.s8, weiDt: dt.s8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } }, fullRange: true }],
    ['s8 x s8 -> s32 full range (integer GEMM: exact beyond 2^24)', { G: 2, K: 1100, N: 3, sizes: [2, 1], srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, fullRange: true }],
    ['u8 x s4 -> s8, src zero point per expert, weights K-block zero points, dst scale + s32 zero point', { ...SHAPE, srcDt: dt.u8, weiDt: dt.s4, dstDt: dt.s8, zps: { src: { gran: GM.src.expert, dt: dt.u8 }, weights: { gran: GM.weights.kBlock(4), dt: dt.s8 }, dst: { gran: GM.dst.expert } }, scales: { dst: { gran: GM.dst.expert } } }],
    ['u8 x u8 -> f32, K-block 4 scales on both (f32 staging)', { ...SHAPE, srcDt: dt.u8, weiDt: dt.u8, scales: { src: { gran: GM.src.rowK(4) }, weights: { gran: GM.weights.kBlock(4) } } }],
    ['s8 x u8 -> u8, saturating at 0 and 255 (RNE)', { ...SHAPE, srcDt: dt.s8, weiDt: dt.u8, dstDt: dt.u8 }],
  ];
  it.each(cases)('%s', async (_n, c) => run(c));
});

describe('gpu matmul: W8A8 accumulates in i32', () => {
  it('s8 x s8 -> s32, sums past 2^24 with odd products: exact (an f32 accumulator rounds them)', async () => {
    const M = 2, K = 2100, N = 3;
    const srcMd = memory.desc([M, K], dt.s8, tag.ab), weiMd = memory.desc([K, N], dt.s8, tag.ab), dstMd = memory.desc([M, N], dt.s32, tag.ab);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
    expect(pd.implInfo).toMatch(/^webgpu/);
    const x = Array.from({ length: M * K }, (_, i) => (i % 7 === 0 ? 125 : 127) * (i < K ? 1 : -1));
    const w = Array.from({ length: K * N }, (_, i) => [127, 121, -127][i % N]);
    const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(w), dst = Memory.create(dstMd, eng);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    const want: number[] = [];
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) { let acc = 0; for (let k = 0; k < K; k++) acc += x[m * K + k] * w[k * N + n]; want.push(acc); }
    expect(want.some((v) => Math.abs(v) > 2 ** 24)).toBe(true);
    expect(Array.from(await dst.read())).toEqual(want);
    [src, wei, dst].forEach((m) => m.free());
  });
});

describe('gpu matmul: dense 2D quantization (oneDNN masks)', () => {
  it('u8 x u4 -> s8 with zero points and all scales', async () => {
    expectBitwise(await runGpuDense(eng, strm, { M: 5, K: 20, N: 70, srcDt: dt.u8, weiDt: dt.u4, dstDt: dt.s8, zps: { src: { gran: DENSE.src.tensor, dt: dt.u8 }, weights: { gran: DENSE.weights.col, dt: dt.u4 }, dst: { gran: DENSE.dst.tensor } }, scales: { src: { gran: DENSE.src.row }, weights: { gran: DENSE.weights.kBlock(4) }, dst: { gran: DENSE.dst.tensor } } }));
  });
  it('f32 x s8 -> f32, 4x7 weight blocks, dst per column', async () => {
    expectBitwise(await runGpuDense(eng, strm, { M: 3, K: 20, N: 70, weiDt: dt.s8, scales: { weights: { gran: DENSE.weights.block2d(4, 7) }, dst: { gran: DENSE.dst.col } }, bias: true }));
  });
});
