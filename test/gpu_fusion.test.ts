/**
 * rfcs/0002 section 4 on the gpu engine's matmul: binary post-ops of every grouped-M src1 shape, sum,
 * chains in order, the fused GLU (every algorithm and layout) with scales, bias and post-ops after it.
 * Same cases and independent float64 expectation as quant_fusion.test.ts (quant_helpers.ts).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { Stream, dt, type GluAlg, type GluLayout, type GpuEngine } from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { gpuEngine } from './gpu_helpers.js';
import { GM, expectBitwise, expectClose, type BinaryShape, type GMCase, type GluSpec } from './quant_helpers.js';
import { runGpuDense, runGpuGM } from './gpu_quant_helpers.js';

// K = 20, N = 70: not multiples of the tile (bk 16, tn 64); an empty expert.
const SHAPE = { G: 3, K: 20, N: 70, sizes: [4, 0, 2], totalM: 7 } as const;
const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];

let eng: GpuEngine;
let strm: Stream;
// These shapes are decode-sized: gemm-tiled's fusion is tested here with the decode kernel off
// (gpu_gemv_moe.test.ts runs the same fusions on gemv-splitk).
beforeAll(async () => {
  gpuKernelTuning.gemv = false;
  eng = await gpuEngine();
  strm = new Stream(eng);
});
afterAll(() => {
  gpuKernelTuning.gemv = true;
  eng?.release();
});

describe('gpu matmul: binary post-ops (grouped M)', () => {
  const shapes: ReadonlyArray<readonly [BinaryShape, 'P1' | 'P2']> = [['row_n', 'P2'], ['row_1', 'P1'], ['row_n_grouped', 'P1'], ['expert_1', 'P2'], ['expert_n', 'P1'], ['expert3_n', 'P2']];
  it.each(shapes)('src1 %s (%s): binary_mul then binary_add', async (shape, proposal) => {
    expectBitwise(await runGpuGM(eng, strm, { ...SHAPE, proposal, bias: true, ops: [{ kind: 'binary', alg: 'binary_mul', shape }, { kind: 'binary', alg: 'binary_add', shape }] }));
  });

  it('a chain in order: relu, binary_add [G, N], binary_mul [ΣM, 1], sum 0.5, clip', async () => {
    expectBitwise(await runGpuGM(eng, strm, {
      ...SHAPE, bias: true,
      ops: [{ kind: 'eltwise', alg: 'eltwise_relu', alpha: 0.5 }, { kind: 'binary', alg: 'binary_add', shape: 'expert_n' }, { kind: 'binary', alg: 'binary_mul', shape: 'row_1' }, { kind: 'sum', scale: 0.5 }, { kind: 'eltwise', alg: 'eltwise_clip', alpha: -6, beta: 6 }],
    }));
  });

  it('routing weights with int8: s8 x s8 -> s8, binary_mul [ΣM, 1] before the dst scale, sum reads the s8 dst', async () => {
    expectBitwise(await runGpuGM(eng, strm, { ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol }, dst: { gran: GM.dst.expert } }, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_1' }, { kind: 'sum', scale: 2 }] }));
  });

  it.each([dt.bf16, dt.f16, dt.s8, dt.u8, dt.s32])('src1 %s: grouped [ΣM, N] mul, [G, N] add, [ΣM, 1] mul (P1); [G, 1] add, E = 1 (P2)', async (t) => {
    expectBitwise(await runGpuGM(eng, strm, { ...SHAPE, bias: true, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_n_grouped', dt: t }, { kind: 'binary', alg: 'binary_add', shape: 'expert_n', dt: t }, { kind: 'binary', alg: 'binary_mul', shape: 'row_1', dt: t }] }));
    expectBitwise(await runGpuGM(eng, strm, { G: 1, K: 20, N: 70, sizes: [5], proposal: 'P2', ops: [{ kind: 'binary', alg: 'binary_add', shape: 'expert_1', dt: t }] }));
  });

  it('E = 1, bf16 dst, sum', async () => {
    expectBitwise(await runGpuGM(eng, strm, { G: 1, K: 20, N: 70, sizes: [5], dstDt: dt.bf16, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'expert_n' }, { kind: 'sum', scale: 1 }] }));
  });
});

describe('gpu matmul: fused GLU', () => {
  // blocks32 needs N a multiple of 64: 128 (two blocks, the second past one 64-column tile's worth of dst).
  const gluCase = (glu: GluSpec, extra: Partial<GMCase> = {}): GMCase => ({ G: 3, K: 20, N: glu.layout === 'blocks32' ? 192 : 74, sizes: [2, 0, 3], totalM: 6, bias: true, glu, ...extra });

  it.each(ALGS.flatMap((alg) => LAYOUTS.map((layout) => [alg, layout] as const)))('%s, %s layout, bias (P1)', async (alg, layout) => {
    expectClose(await runGpuGM(eng, strm, gluCase({ alg, layout })));
  });

  it('swiglu_oai alpha / limit (clamping exercised), int4 weights with K-block scales, then binary_mul [ΣM, 1] and sum (P2)', async () => {
    expectClose(await runGpuGM(eng, strm, gluCase({ alg: 'glu_swiglu_oai', layout: 'interleaved', alpha: 1, limit: 2 }, {
      proposal: 'P2', weiDt: dt.s4, scales: { weights: { gran: GM.weights.kBlock(4) } }, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_1' }, { kind: 'sum', scale: 1 }],
    })));
  });

  it('geglu_tanh on an integer GEMM (s8 x s8) with per-column weight scales (original columns) and a dst scale', async () => {
    expectClose(await runGpuGM(eng, strm, gluCase({ alg: 'glu_geglu_tanh', layout: 'halves' }, { srcDt: dt.s8, weiDt: dt.s8, scales: { weights: { gran: GM.weights.expertCol }, dst: { gran: GM.dst.expert } } })));
  });

  it('dense: swiglu blocks32 with a binary_add [1, N/2]', async () => {
    expectClose(await runGpuDense(eng, strm, { M: 3, K: 20, N: 128, bias: true, glu: { alg: 'glu_swiglu', layout: 'blocks32' }, ops: [{ kind: 'binary_dense', alg: 'binary_add', dims: [1, 64] }] }));
  });
});
