/**
 * A dense 2D matmul of few rows (decode: a shared expert, a router, the P#3 baseline's per-expert
 * GEMMs) takes `gemv-splitk` in its dense form on the gpu engine: one tile of every row, each weight
 * read once. Checked against the float64 references (test/reference.ts, quant_helpers.ts) with the
 * decode kernel on and off (gemm-tiled), over M = 1..8, K / N off every tile, K split across workgroups
 * (its reduce pass), bias shapes, post-ops, the GLU and quantized types.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Memory, Stream, dt, matmul, memory, tag, type GpuEngine } from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { assertClose, refDense, type RefPostOp } from './reference.js';
import { attrFor, toleranceFor, exactValues } from './helpers.js';
import { DENSE, expectBitwise, expectClose } from './quant_helpers.js';
import { runGpuDense } from './gpu_quant_helpers.js';

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });

interface F32Case {
  readonly M: number;
  readonly K: number;
  readonly N: number;
  /** Bias dims (each 1 or the dst's). */
  readonly bias?: readonly [number, number];
  readonly postOps?: readonly RefPostOp[];
  /** Weights stored [N, K] (tag.ba): the scalar weights load. */
  readonly transposed?: boolean;
}

/** Runs a case and returns the kernel name; dst compared to refDense. */
async function runF32(c: F32Case): Promise<string> {
  const { M, K, N } = c;
  const srcMd = memory.desc([M, K], dt.f32, tag.ab), weiMd = memory.desc([K, N], dt.f32, c.transposed ? tag.ba : tag.ab), dstMd = memory.desc([M, N], dt.f32, tag.ab);
  const biasMd = c.bias ? memory.desc([...c.bias], dt.f32, tag.ab) : undefined;
  const attr = attrFor(c.postOps);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const x = exactValues(M * K, 3 + M), w = exactValues(K * N, 5 + N), b = c.bias ? exactValues(c.bias[0] * c.bias[1], 7) : undefined;
  // Weights written in their storage order: w is [K, N] row-major.
  const wStored = c.transposed ? Float64Array.from({ length: K * N }, (_, i) => w[(i % K) * N + Math.floor(i / K)]) : w;
  const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(wStored), dst = Memory.create(dstMd, eng);
  const bias = biasMd && b ? Memory.create(biasMd, eng).write(b) : undefined;
  const prim = new matmul.Primitive(pd);
  try {
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, ...(bias ? { [ARG.BIAS]: bias } : {}) });
    await strm.wait();
    const want = refDense(x, [M, K], w, [K, N], { ...(b && c.bias ? { bias: { dims: [...c.bias], data: b } } : {}), postOps: c.postOps ?? [] });
    assertClose(await dst.read(), want, toleranceFor('f32'), `dense ${M}x${K}x${N}`);
    return pd.implInfo;
  } finally {
    prim.destroy();
    [src, wei, dst, bias].forEach((m) => m?.free());
  }
}

const GEMV = /^webgpu:gemv-splitk-r\d+-kg\d+(-vec)?$/;

describe.each([['gemv-splitk (the default for M <= 8)', true], ['gemm-tiled (decode kernel off)', false]] as const)('gpu dense matmul of few rows: %s', (_n, gemv) => {
  beforeAll(() => { gpuKernelTuning.gemv = gemv; });
  afterAll(() => { gpuKernelTuning.gemv = true; });
  const kernel = gemv ? GEMV : /^webgpu:gemm-tiled/;

  it.each([1, 2, 3, 5, 8])('M = %i, K and N off the tiles', async (M) => {
    expect(await runF32({ M, K: 37, N: 45 })).toMatch(kernel);
  });

  it('K split across workgroups where allowed (the reduce pass, epilogue there); one pass by default', async () => {
    const c: F32Case = { M: 3, K: 9000, N: 40, bias: [1, 40], postOps: [{ kind: 'relu', alpha: 0.5 }] };
    expect(await runF32(c)).toMatch(gemv ? /^webgpu:gemv-splitk-r4-kg1-vec$/ : /^webgpu:gemm-tiled/);
    gpuKernelTuning.gemvDenseMaxKSplit = 16;
    try {
      expect(await runF32(c)).toMatch(gemv ? /^webgpu:gemv-splitk-r4-kg([2-9]|1\d)-vec$/ : /^webgpu:gemm-tiled/);
    } finally {
      gpuKernelTuning.gemvDenseMaxKSplit = 1;
    }
  });

  it.each([[1, 45], [1, 1]] as const)('bias [%i, %i] broadcast over the rows', async (b0, b1) => {
    expect(await runF32({ M: 4, K: 20, N: 45, bias: [b0, b1] })).toMatch(kernel);
  });

  it.each([[1, 45], [1, 1]] as const)('one row, bias [%i, %i] of its own', async (b0, b1) => {
    expect(await runF32({ M: 1, K: 20, N: 45, bias: [b0, b1] })).toMatch(kernel);
  });

  it('a bias per row takes gemm-tiled (the GEMV bias has no row term)', async () => {
    expect(await runF32({ M: 3, K: 20, N: 45, bias: [3, 45] })).toMatch(/^webgpu:gemm-tiled/);
    expect(await runF32({ M: 3, K: 20, N: 45, bias: [3, 1] })).toMatch(/^webgpu:gemm-tiled/);
  });

  it('transposed weights (scalar loads) and an eltwise chain', async () => {
    expect(await runF32({ M: 2, K: 33, N: 21, transposed: true, postOps: [{ kind: 'square' }, { kind: 'linear', alpha: 0.5, beta: -1 }] })).toMatch(gemv ? /^webgpu:gemv-splitk-r2-kg\d+$/ : /^webgpu:gemm-tiled/);
  });

  it('u4 weights with K-block scales and zero points, dst per-column scale', async () => {
    const o = await runGpuDense(eng, strm, { M: 3, K: 64, N: 70, weiDt: dt.u4, scales: { weights: { gran: DENSE.weights.kBlock(16) }, dst: { gran: DENSE.dst.col } }, zps: { weights: { gran: DENSE.weights.col, dt: dt.u4 } } });
    expect(o.pd.implInfo).toMatch(kernel);
    expectBitwise(o);
  });

  it('s8 x s8 -> s32 (the integer GEMM), src zero point', async () => {
    const o = await runGpuDense(eng, strm, { M: 2, K: 40, N: 9, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, zps: { src: { gran: DENSE.src.tensor, dt: dt.s8 } } });
    expect(o.pd.implInfo).toMatch(gemv ? GEMV : /^webgpu:gemm-tiled/);
    expectBitwise(o);
  });

  it('f16 x s4 -> bf16, per-row src scales, a binary [M, N] add and a [1, 1] mul', async () => {
    const o = await runGpuDense(eng, strm, { M: 5, K: 24, N: 30, srcDt: dt.f16, weiDt: dt.s4, dstDt: dt.bf16, scales: { src: { gran: DENSE.src.row }, weights: { gran: DENSE.weights.col } },
      ops: [{ kind: 'binary_dense', alg: 'binary_add', dims: [5, 30] }, { kind: 'binary_dense', alg: 'binary_mul', dims: [1, 1] }] });
    expect(o.pd.implInfo).toMatch(kernel);
    expectBitwise(o);
  });

  it.each(['halves', 'interleaved', 'blocks32'] as const)('GLU %s over s8 weights', async (layout) => {
    const o = await runGpuDense(eng, strm, { M: 2, K: 16, N: 128, weiDt: dt.s8, scales: { weights: { gran: DENSE.weights.col } }, glu: { alg: 'glu_swiglu', layout } });
    expect(o.pd.implInfo).toMatch(kernel);
    expectClose(o);
  });
});

describe('gpu dense matmul: more rows than one gemv tile (gemvDenseMaxRows 64: tiles of 8 rows)', () => {
  let saved = 0;
  beforeAll(() => { saved = gpuKernelTuning.gemvDenseMaxRows; gpuKernelTuning.gemvDenseMaxRows = 64; });
  afterAll(() => { gpuKernelTuning.gemvDenseMaxRows = saved; });

  it.each([9, 20, 64])('M = %i: tiles of 8 rows', async (M) => {
    expect(await runF32({ M, K: 37, N: 45, bias: [1, 45], postOps: [{ kind: 'relu', alpha: 0 }] })).toMatch(/^webgpu:gemv-splitk-r8-kg1(-vec)?$/);
  });

  it('u4 weights, 20 rows', async () => {
    const o = await runGpuDense(eng, strm, { M: 20, K: 64, N: 70, weiDt: dt.u4, scales: { weights: { gran: DENSE.weights.kBlock(16) } } });
    expect(o.pd.implInfo).toMatch(/^webgpu:gemv-splitk-r8-kg1(-vec)?$/);
    expectBitwise(o);
  });
});

describe('gpu dense matmul: the rows decide the kernel', () => {
  it('more rows than gemvDenseMaxRows take gemm-tiled', async () => {
    expect(await runF32({ M: gpuKernelTuning.gemvDenseMaxRows + 1, K: 20, N: 45 })).toMatch(/^webgpu:gemm-tiled/);
  });

  it('a second run gives the same bits (no order-dependent reduction, K split too)', async () => {
    const M = 3, K = 9000, N = 40;
    const mds = [memory.desc([M, K], dt.f32, tag.ab), memory.desc([K, N], dt.f32, tag.ab), memory.desc([M, N], dt.f32, tag.ab)] as const;
    gpuKernelTuning.gemvDenseMaxKSplit = 16;
    const pd = new matmul.PrimitiveDesc(eng, ...mds);
    expect(pd.implInfo).toMatch(/-kg([2-9]|1\d)-/);
    const rnd = (n: number, seed: number): Float32Array => Float32Array.from({ length: n }, (_, i) => Math.sin(seed + i * 0.37));
    const src = Memory.create(mds[0], eng).write(rnd(M * K, 1)), wei = Memory.create(mds[1], eng).write(rnd(K * N, 2)), dst = Memory.create(mds[2], eng);
    // The plan is made again when the primitive is created (read the tuning there too).
    const prim = new matmul.Primitive(pd);
    gpuKernelTuning.gemvDenseMaxKSplit = 1;
    const once = async (): Promise<number[]> => {
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      await strm.wait();
      return Array.from(await dst.read());
    };
    expect(await once()).toEqual(await once());
    prim.destroy();
    [src, wei, dst].forEach((m) => m.free());
  });
});
