/**
 * rfcs/0002 section 4: binary post-ops of every src1 shape, the fused GLU in every layout and
 * activation (tolerance: transcendental), sum, and their order with bias and scales; for P#1, P#2,
 * dense and P#3 (grouped_gemm). Exact cases compare bit for bit with quant_helpers.ts's float64
 * computation.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { Engine, Stream, dt, type GluAlg, type GluLayout } from '../src/index.js';
import {
  GM, QUANT_ENGINES, expectBitwise, expectClose, runDense, runGM, P3_F32_SCALE_CASES, runP3Q, type BinaryShape, type GMCase, type GluSpec,
} from './quant_helpers.js';

const SHAPE = { G: 3, K: 8, N: 6, sizes: [2, 0, 3], totalM: 6 } as const;
const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];

describe.each(QUANT_ENGINES)('fused post-ops [%s]', (_name, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  describe('binary post-ops (grouped M)', () => {
    const P1_SHAPES: readonly BinaryShape[] = ['row_n', 'row_1', 'row_n_grouped', 'row_1_grouped', 'expert_1', 'expert_n', 'expert3_1', 'expert3_n'];
    const P2_SHAPES = P1_SHAPES.filter((s) => !s.endsWith('grouped'));
    it.each(P1_SHAPES.flatMap((shape) => (['binary_mul', 'binary_add'] as const).map((alg) => [shape, alg] as const)))('P1 src1 %s, %s', async (shape, alg) => {
      expectBitwise(await runGM(eng, strm, { ...SHAPE, proposal: 'P1', bias: true, ops: [{ kind: 'binary', alg, shape }] }));
    });
    it.each(P2_SHAPES.flatMap((shape) => (['binary_mul', 'binary_add'] as const).map((alg) => [shape, alg] as const)))('P2 src1 %s, %s', async (shape, alg) => {
      expectBitwise(await runGM(eng, strm, { ...SHAPE, proposal: 'P2', ops: [{ kind: 'binary', alg, shape }] }));
    });

    // oneDNN's binary src1 types beyond f32 (benchdnn's test_matmul_grouped: mul:f16:3:grouped, mul:bf16:1, ...)
    it.each([dt.bf16, dt.f16, dt.s8, dt.u8, dt.s32])('src1 %s: P1 grouped [ΣM, N] mul, [G, N] add, [ΣM, 1] mul; P2 [G, 1] add with f16 dst', async (t) => {
      expectBitwise(await runGM(eng, strm, { ...SHAPE, proposal: 'P1', bias: true, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_n_grouped', dt: t }, { kind: 'binary', alg: 'binary_add', shape: 'expert_n', dt: t }, { kind: 'binary', alg: 'binary_mul', shape: 'row_1', dt: t }] }));
      expectBitwise(await runGM(eng, strm, { G: 1, K: 9, N: 11, sizes: [5], proposal: 'P2', dstDt: dt.f16, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'expert_1', dt: t }] }));
    });

    it('G = total_M: 2D [G, N] is per row, 3D [G, 1, N] per expert', async () => {
      const c = { G: 3, K: 4, N: 4, sizes: [1, 1, 1] } as const;
      expectBitwise(await runGM(eng, strm, { ...c, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_n' }] }));
      expectBitwise(await runGM(eng, strm, { ...c, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'expert3_n' }] }));
    });

    it('routing weights with int8 and dst scales: s8 x s8 -> s8, binary_mul [total_M, 1] before the dst scale', async () => {
      expectBitwise(await runGM(eng, strm, { ...SHAPE, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol }, dst: { gran: GM.dst.expert } }, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_1' }] }));
    });

    it('a chain: eltwise, two binaries, sum, in order', async () => {
      expectBitwise(await runGM(eng, strm, {
        ...SHAPE, bias: true,
        ops: [{ kind: 'eltwise', alg: 'eltwise_relu', alpha: 0.5 }, { kind: 'binary', alg: 'binary_add', shape: 'expert_n' }, { kind: 'binary', alg: 'binary_mul', shape: 'row_1' }, { kind: 'sum', scale: 0.5 }, { kind: 'eltwise', alg: 'eltwise_clip', alpha: -6, beta: 6 }],
      }));
    });
  });

  describe('sum', () => {
    it.each([dt.f32, dt.bf16, dt.s8, dt.u8, dt.s32] as const)('sum reads dst in its own type (%s dst), before the dst scale', async (ddt) => {
      expectBitwise(await runGM(eng, strm, { ...SHAPE, srcDt: ddt === 'f32' || ddt === 'bf16' ? dt.f32 : dt.s8, weiDt: dt.s8, dstDt: ddt, scales: { dst: { gran: GM.dst.expert } }, ops: [{ kind: 'sum', scale: 2 }] }));
    });
  });

  describe('GLU', () => {
    const gluCase = (glu: GluSpec, extra: Partial<GMCase> = {}): GMCase => ({ G: 2, K: 8, N: glu.layout === 'blocks32' ? 128 : 12, sizes: [2, 3], totalM: 6, bias: true, glu, ...extra });

    it.each(LAYOUTS.flatMap((layout) => ALGS.map((alg) => [layout, alg] as const)))('P1 layout %s, %s', async (layout, alg) => {
      expectClose(await runGM(eng, strm, gluCase({ alg, layout })));
    });

    it.each(LAYOUTS.map((layout) => [layout] as const))('P2 layout %s with per-column weight scales (per original column), then binary and sum', async (layout) => {
      expectClose(await runGM(eng, strm, gluCase({ alg: 'glu_swiglu', layout }, {
        proposal: 'P2', srcDt: dt.s8, weiDt: dt.s4, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } },
        ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_1' }, { kind: 'sum', scale: 1 }],
      })));
    });

    it('swiglu alpha and swiglu_oai alpha / limit (clamping exercised)', async () => {
      expectClose(await runGM(eng, strm, gluCase({ alg: 'glu_swiglu', layout: 'interleaved', alpha: 1.5 })));
      expectClose(await runGM(eng, strm, gluCase({ alg: 'glu_swiglu_oai', layout: 'interleaved', alpha: 1, limit: 2 })));
      expectClose(await runGM(eng, strm, gluCase({ alg: 'glu_swiglu_oai', layout: 'halves' }, { scales: { weights: { gran: GM.weights.expertCol } } })));
    });

    it('bf16 dst and an int8 GEMM with a dst scale', async () => {
      expectClose(await runGM(eng, strm, gluCase({ alg: 'glu_geglu_tanh', layout: 'halves' }, { srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.f32, scales: { dst: { gran: GM.dst.expert } } })));
    });

    it.each(LAYOUTS.map((layout) => [layout] as const))('dense, layout %s', async (layout) => {
      expectClose(await runDense(eng, strm, { M: 3, K: 8, N: layout === 'blocks32' ? 64 : 10, bias: true, glu: { alg: 'glu_swiglu', layout }, ops: [{ kind: 'binary_dense', alg: 'binary_add', dims: [1, layout === 'blocks32' ? 32 : 5] }] }));
    });
  });

  describe('dense binary broadcast (oneDNN: each dim equal or 1)', () => {
    it.each([[5, 6], [1, 6], [5, 1], [1, 1]] as const)('src1 [%i, %i]', async (r, n) => {
      expectBitwise(await runDense(eng, strm, { M: 5, K: 8, N: 6, ops: [{ kind: 'binary_dense', alg: 'binary_mul', dims: [r, n] }, { kind: 'binary_dense', alg: 'binary_add', dims: [r, n] }] }));
    });
  });

  describe('Proposal #3 (grouped_gemm)', () => {
    const experts = [{ K: 8, N: 6, rows: 3, cap: 4 }, { K: 4, N: 6, rows: 0, cap: 2 }, { K: 16, N: 6, rows: 2 }] as const;

    it.each(P3_F32_SCALE_CASES)('f32: %s', async (_n, c) => {
      expectBitwise(await runP3Q(eng, strm, { experts, ...c }));
    });

    it.each([
      ['s8 x s8 -> s32 with src / weights zero points', { srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, zps: { src: { kind: 'tensor', dt: dt.s8 }, weights: { kind: 'col' } } }],
      ['u8 x s4 -> s8 with per-row / per-column scales and a dst scale', { srcDt: dt.u8, weiDt: dt.s4, dstDt: dt.s8, scales: { src: { kind: 'row' }, weights: { kind: 'col' }, dst: { kind: 'tensor' } }, zps: { weights: { kind: 'tensor', dt: dt.s4 } } }],
      ['f16 x u4 -> f32 weight-only', { srcDt: dt.f16, weiDt: dt.u4, scales: { weights: { kind: 4, dt: dt.f16 } }, zps: { weights: { kind: 'col', dt: dt.u4 } } }],
      ['f8_e4m3 x f8_e4m3 -> bf16', { srcDt: dt.f8_e4m3, weiDt: dt.f8_e4m3, dstDt: dt.bf16, scales: { src: { kind: 'tensor', dt: dt.e8m0 }, weights: { kind: 'col', dt: dt.e8m0 } } }],
      ['f4_e2m1 x f4_e2m1 -> f32', { srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, scales: { weights: { kind: 4, dt: dt.f8_e4m3 }, dst: { kind: 'tensor' } } }],
    ] as const)('%s', async (_n, c) => {
      expectBitwise(await runP3Q(eng, strm, { experts, ...c }));
    });

    it.each([
      ['s8 x s8 -> s32, src zero point per expert (folded into the packed A block)', { srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, zps: { src: { kind: 'tensor', dt: dt.s8 } } }],
      ['f8_e4m3 x f8_e4m3 -> f32, src scale per expert', { srcDt: dt.f8_e4m3, weiDt: dt.f8_e4m3, scales: { src: { kind: 'tensor' } } }],
    ] as const)('experts given the same src memory: %s', async (_n, c) => {
      const same = [{ K: 8, N: 6, rows: 3, cap: 4 }, { K: 8, N: 6, rows: 3, cap: 4 }, { K: 8, N: 6, rows: 2, cap: 4 }];
      expectBitwise(await runP3Q(eng, strm, { experts: same, sharedSrc: true, ...c }));
    });

    it.each([dt.bf16, dt.f16, dt.s8, dt.u8, dt.s32])('binary src1 %s: shared [1, N] mul, per-row [RT, N] add', async (t) => {
      expectBitwise(await runP3Q(eng, strm, { experts, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'shared_n', dt: t }, { kind: 'binary', alg: 'binary_add', shape: 'row_n', dt: t }] }));
    });

    it.each(['shared_1', 'shared_n', 'row_1', 'row_n'] as const)('binary src1 %s', async (shape) => {
      expectBitwise(await runP3Q(eng, strm, { experts, ops: [{ kind: 'binary', alg: 'binary_mul', shape }, { kind: 'binary', alg: 'binary_add', shape }, { kind: 'sum', scale: 0.5 }] }));
    });

    it.each(LAYOUTS.flatMap((layout) => ALGS.map((alg) => [layout, alg] as const)))('GLU layout %s, %s', async (layout, alg) => {
      const N = layout === 'blocks32' ? 64 : 6;
      expectClose(await runP3Q(eng, strm, { experts: [{ K: 8, N, rows: 3 }, { K: 4, N, rows: 1, cap: 3 }], glu: { alg, layout }, scales: { weights: { kind: 'col' } }, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_1' }] }));
    });
  });
});
