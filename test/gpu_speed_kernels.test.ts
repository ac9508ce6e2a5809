/**
 * The gpu matmul's speed kernels against float64 references (SwiftShader in CI): `gemv-splitk`
 * (decode: few rows per group, vector and scalar weight loads, K split inside the workgroup and across
 * workgroups with a second pass, weight-only quantized types) and `gemm-tiled-vec4` (f32 prefill).
 * Each case asserts which kernel ran, so a choice change cannot silently skip the path under test.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag, type DataType, type GpuEngine, type GpuMemory } from '../src/index.js';
import { GEMV_PREVIOUS_TUNING, gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { vec4ShapeTag, vec4Tuning } from '../src/kernels/wgsl/gemm_tiled_vec4.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { attrFor, toleranceFor, exactValues } from './helpers.js';
import { assertClose, refDense, refGroupedM, type RefPostOp } from './reference.js';
import { GM, expectBitwise, expectClose, type GMCase } from './quant_helpers.js';
import { runGpuGM } from './gpu_quant_helpers.js';

const SENTINEL = 7.5;
let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });
const DEFAULT_TUNING = { ...gpuKernelTuning };
afterEach(() => Object.assign(gpuKernelTuning, DEFAULT_TUNING));

interface Case {
  readonly sizes: readonly number[];
  readonly K: number;
  readonly N: number;
  readonly totalM?: number;
  readonly dt?: DataType;
  readonly bias?: boolean;
  readonly postOps?: readonly RefPostOp[];
  readonly weiTag?: 'abc' | 'acb';
}

async function runGM(c: Case, kernel: RegExp): Promise<Float32Array> {
  const G = c.sizes.length, { K, N } = c;
  const rows = c.sizes.reduce((a, b) => a + b, 0);
  const totalM = c.totalM ?? rows;
  const t = c.dt ?? 'f32';
  const weiMd = memory.desc([G, K, N], t, c.weiTag === 'acb' ? tag.acb : tag.abc);
  const biasMd = c.bias ? memory.desc([G, N], t, tag.ab) : undefined;
  const srcMd = memory.desc.grouped([totalM, K], t, G, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([totalM, N], t, G, [RUNTIME_DIM_VAL, N]);
  const attr = attrFor(c.postOps);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  expect(pd.implInfo).toMatch(kernel);
  const prim = new matmul.Primitive(pd);
  const x = exactValues(totalM * K, 11), w = exactValues(G * K * N, 12), b = exactValues(G * N, 13);
  const mems: GpuMemory[] = [];
  const src = Memory.create(srcMd, eng).write(x).writeOffsets(offsets.fromSizes(c.sizes));
  const wei = Memory.create(weiMd, eng);
  if (c.weiTag === 'acb') {
    const phys = new Float64Array(G * K * N);
    for (let g = 0; g < G; g++) for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) phys[(g * N + n) * K + k] = w[(g * K + k) * N + n];
    wei.write(phys);
  } else wei.write(w);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]).write(new Float64Array(totalM * N).fill(SENTINEL));
  mems.push(src, wei, dst);
  const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (biasMd) { const bm = Memory.create(biasMd, eng).write(b); mems.push(bm); args[ARG.BIAS] = bm; }
  prim.execute(strm, args);
  await strm.wait();
  const got = Float32Array.from(await dst.read());
  const ref = refGroupedM(x, w, c.sizes, K, N, { bias: c.bias ? { dims: [G, N], data: b } : undefined, postOps: c.postOps });
  assertClose(got.subarray(0, rows * N), ref, toleranceFor(t), 'grouped M');
  for (let i = rows * N; i < totalM * N; i++) if (got[i] !== SENTINEL) throw new Error(`row ${Math.floor(i / N)} past the last offset was written`);
  prim.destroy();
  mems.forEach((m) => m.free());
  return got;
}

describe('gpu gemv-splitk (decode: few rows per group)', () => {
  // The kernel names below pin the previous geometry (4 / 8 rows per tile, its K splits); the
  // defaults run the same shapes in test/gpu_gemv_moe.test.ts and gpu_gemv_inline.test.ts.
  beforeEach(() => Object.assign(gpuKernelTuning, GEMV_PREVIOUS_TUNING));
  it('vector loads, empty experts, rows left past the end', async () => {
    await runGM({ sizes: [1, 0, 2, 1, 0, 3], K: 40, N: 72, totalM: 10 }, /gemv-splitk-r4-kg1-vec/);
  });
  it('scalar loads: K and N not multiples of the vector width, bias + relu + linear', async () => {
    await runGM({ sizes: [2, 0, 1, 3], K: 37, N: 70, bias: true, postOps: [{ kind: 'relu', alpha: 0.25 }, { kind: 'linear', alpha: 2, beta: -1 }] }, /gemv-splitk-r4-kg1\+/);
  });
  it('acb weights (strided columns) take the scalar loads', async () => {
    await runGM({ sizes: [1, 2, 0], K: 24, N: 32, weiTag: 'acb' }, /gemv-splitk-r4-kg1\+/);
  });
  it('one expert takes every row (several schedule tiles of 4 rows), rows of 8', async () => {
    await runGM({ sizes: [0, 0, 13, 0], K: 20, N: 36 }, /gemv-splitk-r4-/);
    await runGM({ sizes: [0, 23, 0, 0], K: 20, N: 36 }, /gemv-splitk-r8-/);
  });
  it('E = 1', async () => {
    await runGM({ sizes: [3], K: 16, N: 64 }, /gemv-splitk-r4-kg1-vec/);
  });
  it('K split across workgroups (second pass), K not a multiple of the split, odd N', async () => {
    gpuKernelTuning.kPerThread = 2;
    await runGM({ sizes: [2, 0, 5, 1], K: 101, N: 75, bias: true, postOps: [{ kind: 'tanh' }] }, /gemv-splitk-r4-kg4\+/);
    await runGM({ sizes: [2, 0, 5, 1], K: 100, N: 76 }, /gemv-splitk-r4-kg4-vec/);
  });
  it('f16 and bf16 storage (vector loads of 16-bit pairs)', async () => {
    await runGM({ sizes: [1, 2, 0, 4], K: 24, N: 40, dt: 'f16', bias: true }, /gemv-splitk-r4-kg1-vec/);
    await runGM({ sizes: [3, 1], K: 30, N: 36, dt: 'bf16' }, /gemv-splitk-r4-kg1-vec/);
  });
  it('a second run gives the same bits (split K)', async () => {
    gpuKernelTuning.kPerThread = 2;
    const c: Case = { sizes: [3, 1, 0, 4], K: 150, N: 44 };
    const a = await runGM(c, /gemv-splitk-r4-kg5-vec/), b = await runGM(c, /gemv-splitk-r4-kg5-vec/);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
  });
  it('bad offsets are reported at wait() and dst stays untouched', async () => {
    const G = 3, K = 8, N = 16, M = 6;
    const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
    expect(pd.implInfo).toMatch(/gemv-splitk/);
    const src = Memory.create(srcMd, eng).write(exactValues(M * K, 4)).writeOffsets([0, 4, 2, 6]);
    const wei = Memory.create(weiMd, eng).write(exactValues(G * K * N, 5));
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]).write(new Float64Array(M * N).fill(SENTINEL));
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    const err = await strm.wait().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(DnnlError);
    expect((err as DnnlError).message).toMatch(/non-decreasing: offsets\[2\] = 2 < offsets\[1\] = 4/);
    expect((await dst.read()).every((v) => v === SENTINEL)).toBe(true);
  });
});

describe('gpu gemv-splitk: weight-only quantized weights', () => {
  // Mean rows per expert 2: the decode kernel. K = 96 and 64: K blocks of 32 within a thread's slice.
  const SHAPE = { G: 4, K: 96, N: 72, sizes: [3, 0, 4, 1], totalM: 9 } as const;
  const cases: ReadonlyArray<readonly [string, GMCase, RegExp]> = [
    ['f32 x u4, K-block 32 scales and u4 zero points (vector loads)', { ...SHAPE, weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(32) } }, zps: { weights: { gran: GM.weights.kBlock(32), dt: dt.u4 } } }, /gemv-splitk-r4-kg1-vec/],
    ['f32 x s4, K-block 32 scales (vector loads)', { ...SHAPE, weiDt: dt.s4, scales: { weights: { gran: GM.weights.kBlock(32) } } }, /gemv-splitk-r4-kg1-vec/],
    ['f16 x s4 -> f16, K-block 4 f16 scales, s8 zero points, bias, N = 70 (scalar loads)', { ...SHAPE, N: 70, srcDt: dt.f16, weiDt: dt.s4, dstDt: dt.f16, scales: { weights: { gran: GM.weights.kBlock(4), dt: dt.f16 } }, zps: { weights: { gran: GM.weights.kBlock(4), dt: dt.s8 } }, bias: true }, /gemv-splitk-r4-kg1\+/],
    ['f32 x s8, per expert column scales (vector loads)', { ...SHAPE, weiDt: dt.s8, scales: { weights: { gran: GM.weights.expertCol } } }, /gemv-splitk-r4-kg1-vec/],
    ['bf16 x u8, per expert column scales and u8 zero points', { ...SHAPE, srcDt: dt.bf16, weiDt: dt.u8, scales: { weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: dt.u8 } } }, /gemv-splitk-r4-kg1-vec/],
    ['f32 x s4, 4x6 2D blocks, per tensor zero point', { ...SHAPE, weiDt: dt.s4, scales: { weights: { gran: GM.weights.block2d(4, 6) } }, zps: { weights: { gran: GM.weights.tensor } } }, /gemv-splitk-r4-kg1-vec/],
    ['f32 x f8_e4m3, per expert column scales', { ...SHAPE, weiDt: dt.f8_e4m3, scales: { weights: { gran: GM.weights.expertCol } } }, /gemv-splitk-r4-kg1-vec/],
    ['f16 x f8_e5m2 -> f16, f8_e4m3 scales per 16', { ...SHAPE, srcDt: dt.f16, weiDt: dt.f8_e5m2, dstDt: dt.f16, scales: { weights: { gran: GM.weights.kBlock(16), dt: dt.f8_e4m3 } } }, /gemv-splitk-r4-kg1-vec/],
    ['bf16 x f4_e2m1, MXFP4: e8m0 per 32', { ...SHAPE, srcDt: dt.bf16, weiDt: dt.f4_e2m1, scales: { weights: { gran: GM.weights.kBlock(32), dt: dt.e8m0 } } }, /gemv-splitk-r4-kg1-vec/],
    ['E = 1 taking every row, u8 per column scales', { G: 1, K: 64, N: 72, sizes: [5], weiDt: dt.u8, scales: { weights: { gran: GM.weights.expertCol } } }, /gemv-splitk-r8-kg1-vec/],
  ];
  it.each(cases)('%s', async (_n, c, kernel) => {
    const o = await runGpuGM(eng, strm, c);
    expect(o.pd.implInfo).toMatch(kernel);
    expectBitwise(o);
  });
  it('split K across workgroups: u4 K-block 32, a block straddling two splits', async () => {
    // 16 lanes (16 K slices; set: this small grid would take 8): K / (16 x 5) -> 2 splits of 48 (slices of 3): the block 32..63 straddles them.
    gpuKernelTuning.kPerThread = 5;
    gpuKernelTuning.gemvLanes = 16;
    const o = await runGpuGM(eng, strm, { ...SHAPE, weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(32) } }, zps: { weights: { gran: GM.weights.kBlock(32), dt: dt.u4 } } });
    expect(o.pd.implInfo).toMatch(/gemv-splitk-r4-kg2-vec/);
    expectBitwise(o);
  });
  it('every f8_e4m3 code (NaN S.1111.111, subnormals, +-0, +-448) decoded through the loop unrolled by 8 (branch-free decoder)', async () => {
    // One row, K = 128: 16 K slices of 8, so each thread runs the unrolled loop once. Weights row k0 holds
    // the 256 codes (column n: code n), every other row code 0 (+0); src is one-hot at k0, so dst[n] is
    // the decoded code n exactly (no other NaN in its column).
    const K = 128, N = 256, k0 = 77;
    const pd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([1, K], dt.f32, 1, [RUNTIME_DIM_VAL, K]), memory.desc([1, K, N], dt.f8_e4m3, tag.abc),
      memory.desc.grouped([1, N], dt.f32, 1, [RUNTIME_DIM_VAL, N]));
    expect(pd.implInfo).toBe('webgpu:gemv-splitk-r1-kg1-vec+inline-schedule');
    const prim = new matmul.Primitive(pd);
    const codes = new Uint8Array(K * N);
    for (let n = 0; n < N; n++) codes[k0 * N + n] = n;
    const src = Memory.create(pd.queryMd('src')!, eng).write(Float64Array.from({ length: K }, (_, k) => (k === k0 ? 1 : 0))).writeOffsets([0, 1]);
    const wei = Memory.create(pd.queryMd('weights')!, eng).writeBytes(codes);
    const dst = Memory.create(pd.queryMd('dst')!, eng, [undefined, src.handles[1]]);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    const got = await dst.read();
    // OFP8 E4M3 (E4M3FN): bias 7, subnormals m / 8 * 2^-6, no infinities, S.1111.111 NaN.
    const e4m3 = (c: number): number => {
      const e = (c >> 3) & 15, m = c & 7, sign = c & 128 ? -1 : 1;
      if (e === 15 && m === 7) return NaN;
      return sign * (e === 0 ? (m / 8) * 2 ** -6 : (1 + m / 8) * 2 ** (e - 7));
    };
    const bad = Array.from({ length: N }, (_, n) => n).filter((n) => !(Number.isNaN(e4m3(n)) ? Number.isNaN(got[n]) : got[n] === e4m3(n)));
    expect(bad.map((n) => `0x${n.toString(16)}: ${got[n]} (want ${e4m3(n)})`)).toEqual([]);
    expect([0x7f, 0xff].every((n) => Number.isNaN(got[n])) && got[0x7e] === 448 && got[0xfe] === -448 && got[1] === 2 ** -9).toBe(true);
    prim.destroy();
    [src, wei, dst].forEach((m) => m.free());
  });
  it('with the fused GLU the decode kernel runs too (gpu_gemv_moe.test.ts covers its algs, layouts and row modes)', async () => {
    const o = await runGpuGM(eng, strm, { ...SHAPE, weiDt: dt.s8, scales: { weights: { gran: GM.weights.expertCol } }, glu: { alg: 'glu_swiglu', layout: 'halves' } });
    expect(o.pd.implInfo).toMatch(/gemv-splitk-r4-kg1-vec/);
    expectClose(o);
  });
});

describe('gpu gemm-tiled-vec4 (f32 prefill)', () => {
  it('each tile takes its default form: unrolled K slices of 8 (rows-fast A loads; 4 rows per thread with a GLU), 12 and 16 (rows past the tile skipped)', () => {
    expect([32, 64, 128].map((tm) => vec4ShapeTag(tm))).toEqual(['32x128x8r8urfxb', '64x128x12r8usr', '128x128x16r8usr']);
    expect(vec4ShapeTag(32, true)).toBe('32x128x8r4urf');
  });
  it('a K slice beyond the workgroup memory allowed is halved (to a multiple of 4), double buffering dropped first', () => {
    const saved = { ...vec4Tuning };
    try {
      Object.assign(vec4Tuning, { wgBytes: 8192 });
      expect(vec4ShapeTag(128)).toBe('128x128x8r8usr');
      Object.assign(vec4Tuning, { bk: 12 });
      expect(vec4ShapeTag(128)).toBe('128x128x4r8usr');
      Object.assign(vec4Tuning, { bk: 16, doubleBuffer: true, wgBytes: 16384 });
      expect(vec4ShapeTag(128)).toBe('128x128x16r8usr');
      Object.assign(vec4Tuning, { wgBytes: 32768 });
      expect(vec4ShapeTag(128)).toBe('128x128x16r8dbusr');
    } finally {
      Object.assign(vec4Tuning, saved);
    }
  });
  it('32-row tiles: mean rows 24, an empty expert, K and N multiples of 4 but not of the tile', async () => {
    await runGM({ sizes: [20, 0, 31, 45], K: 36, N: 140, bias: true, postOps: [{ kind: 'relu', alpha: 0 }] }, /gemm-tiled-vec4-32x128/);
  });
  it('64-row tiles, E = 1', async () => {
    await runGM({ sizes: [50], K: 20, N: 132 }, /gemm-tiled-vec4-64x128/);
  });
  it('groups averaging more than 64 rows take 64-row tiles (128 with a gather / scatter or dense): one expert takes every row, rows left past the end', async () => {
    await runGM({ sizes: [0, 300, 0], K: 40, N: 68, totalM: 310 }, /gemm-tiled-vec4-64x128/);
    const saved = vec4Tuning.bigTile;
    try {
      vec4Tuning.bigTile = 128;
      await runGM({ sizes: [0, 300, 0], K: 40, N: 68, totalM: 310 }, /gemm-tiled-vec4-128x128/);
    } finally {
      vec4Tuning.bigTile = saved;
    }
  });
  it('K or N not a multiple of 4: the scalar tiled kernel', async () => {
    await runGM({ sizes: [30, 40], K: 37, N: 64 }, /gemm-tiled-64x64/);
    await runGM({ sizes: [30, 40], K: 36, N: 66 }, /gemm-tiled-64x64/);
  });
  it('a second run gives the same bits', async () => {
    const c: Case = { sizes: [70, 3, 0, 90], K: 52, N: 200 };
    const a = await runGM(c, /gemm-tiled-vec4-64x128/), b = await runGM(c, /gemm-tiled-vec4-64x128/);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
  });
  it('dense 3D batched, weights broadcast over the batch', async () => {
    const B = 2, M = 70, K = 24, N = 132;
    const srcMd = memory.desc([B, M, K], dt.f32, tag.abc), weiMd = memory.desc([1, K, N], dt.f32, tag.abc), dstMd = memory.desc([B, M, N], dt.f32, tag.abc);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
    expect(pd.implInfo).toMatch(/gemm-tiled-vec4-128x128/);
    const x = exactValues(B * M * K, 21), w = exactValues(K * N, 22);
    const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(w), dst = Memory.create(dstMd, eng);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    assertClose(await dst.read(), refDense(x, [B, M, K], w, [1, K, N]), toleranceFor('f32'), 'dense');
  });
});

// Each tile's default (VEC4_DEFAULTS) runs in the cases above; these force the other forms.
describe.each([
  // The flat K loop, double-buffered; 2 rows per thread of a 32-row tile (scalar A reads).
  { bk: 8, doubleBuffer: true, smallRowsPerThread: 0, unroll: false, prefetch: true, aRowsFast: false, tag: [32, '32x128x8r2dbxb'] },
  // The flat K loop without register prefetch, rows-fast A loads, 4 rows per thread of a 64-row tile.
  { bk: 16, doubleBuffer: false, smallRowsPerThread: 4, unroll: false, prefetch: false, aRowsFast: true, tag: [64, '64x128x16r4nprfsr'] },
  // Unrolled and double-buffered (two slots of constant indices), scalar A reads.
  { bk: 8, doubleBuffer: true, smallRowsPerThread: 0, unroll: true, prefetch: true, aRowsFast: false, bigTile: 128, tag: [128, '128x128x8r8dbusr'] },
  // A 12-deep slice (partial vec4 loads per thread), a 96-row big tile, rows-fast A loads.
  { bk: 12, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: true, bigTile: 96, tag: [96, '96x128x12r8urfsr'] },
  // Threads past the tile's last row skip the products (unrolled, then flat double-buffered slices).
  { bk: 16, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: false, skipRows: true, hoistB: false, bigTile: 128, tag: [128, '128x128x16r8usrxb'] },
  { bk: 8, doubleBuffer: true, smallRowsPerThread: 4, unroll: false, prefetch: true, aRowsFast: false, skipRows: true, tag: [64, '64x128x8r4dbsr'] },
] as const)('gpu gemm-tiled-vec4 variant %o', ({ tag, ...v }) => {
  const saved = { ...vec4Tuning };
  beforeAll(() => { Object.assign(vec4Tuning, v); });
  afterAll(() => { Object.assign(vec4Tuning, saved); });
  it('takes the forced form', () => {
    expect(vec4ShapeTag(tag[0])).toBe(tag[1]);
  });
  it('32-, 64- and 128-row tiles: empty experts, K and N not multiples of the slice or tile, E = 1, all rows in one expert', async () => {
    await runGM({ sizes: [20, 0, 31, 45], K: 36, N: 140, bias: true, postOps: [{ kind: 'relu', alpha: 0 }] }, /gemm-tiled-vec4-32x128/);
    await runGM({ sizes: [50], K: 20, N: 132 }, /gemm-tiled-vec4-64x128/);
    await runGM({ sizes: [0, 300, 0], K: 44, N: 68, totalM: 310 }, new RegExp(`gemm-tiled-vec4-${'bigTile' in v ? v.bigTile : 64}x128`));
  });
});

describe('gpu gemm-tiled-dot4 (W8A8 with packed 4 x 8-bit dot products)', () => {
  // K = 37: the last packed word of each row is partial; N = 70 not a multiple of the tile.
  const SHAPE = { G: 3, K: 37, N: 70, sizes: [9, 0, 20], totalM: 31 } as const;
  it('the device has packed_4x8_integer_dot_product (Dawn)', () => {
    expect(eng.caps.packedDot4).toBe(true);
  });
  const cases: ReadonlyArray<readonly [string, GMCase, RegExp]> = [
    ['s8 x s8 -> f32, per-row x per-expert-column scales, bias, full range', { ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } }, bias: true, fullRange: true }, /gemm-tiled-dot4-/],
    ['u8 x u8 -> f32, dst scale (P2), full range', { ...SHAPE, proposal: 'P2', srcDt: dt.u8, weiDt: dt.u8, scales: { dst: { gran: GM.dst.expert } }, fullRange: true }, /gemm-tiled-dot4-/],
    ['s8 x s8 -> s32, E = 1 taking every row', { G: 1, K: 70, N: 9, sizes: [40], srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, fullRange: true }, /gemm-tiled-dot4-/],
    ['u8 x u8 with a src zero point: the i32 path', { ...SHAPE, srcDt: dt.u8, weiDt: dt.u8, zps: { src: { gran: GM.src.expert, dt: dt.u8 } } }, /gemm-tiled-\d/],
  ];
  it.each(cases)('%s', async (_n, c, kernel) => {
    const o = await runGpuGM(eng, strm, c);
    expect(o.pd.implInfo).toMatch(kernel);
    expectBitwise(o);
  });
});
