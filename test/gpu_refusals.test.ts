/**
 * Every primitive without a gpu implementation refuses a gpu engine at pd creation with
 * `unimplemented` naming itself (src/primitives/gpu_refusal.ts), before any rule could touch
 * cpu-engine state (`engine.heap`, kernels, workers). Descriptors are valid where that is short to
 * write, so without the refusal the pd would go on to its own rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, Engine, GpuEngine, PrimitiveAttr, RUNTIME_DIM_VAL, algorithm, dt, dynamic_quant, glu_backward, grouped_gemm, grouped_gemm_backward_data,
  grouped_gemm_backward_weights, matmul, matmul_backward_data, matmul_backward_weights, memory, moe, reorder, tag,
} from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';

/** A gpu engine where a cpu-only pd declares `Engine` (what a JavaScript caller can pass). */
type AsCpu = Engine;

const rows = (cols: number): ReturnType<typeof memory.desc> => memory.desc([RUNTIME_DIM_VAL, cols], dt.f32, tag.ab);
const plain = (dims: number[]): ReturnType<typeof memory.desc> => memory.desc(dims, dt.f32, dims.length === 2 ? tag.ab : tag.abc);
const grouped = (rowsTotal: number, cols: number, G: number): ReturnType<typeof memory.desc> => memory.desc.grouped([rowsTotal, cols], dt.f32, G, [RUNTIME_DIM_VAL, cols]);

/** [name in the message, pd creation on engine `e`]. */
const CASES: ReadonlyArray<readonly [string, (e: AsCpu) => unknown]> = [
  ['glu_backward', (e) => new glu_backward.PrimitiveDesc(e, plain([8, 8]), plain([8, 4]), plain([8, 8]), { alg: algorithm.glu_swiglu, layout: 'halves' })],
  ['matmul_backward_data', (e) => new matmul_backward_data.PrimitiveDesc(e, grouped(10, 4, 2), plain([2, 4, 6]), grouped(10, 6, 2))],
  ['matmul_backward_weights', (e) => new matmul_backward_weights.PrimitiveDesc(e, grouped(10, 4, 2), plain([2, 4, 6]), grouped(10, 6, 2))],
  ['grouped_gemm_backward_weights', (e) => new grouped_gemm_backward_weights.PrimitiveDesc(e, [rows(4)], [plain([4, 6])], [rows(6)], memory.desc([1], dt.s32, tag.x))],
  ['grouped_gemm_backward_data', (e) => new grouped_gemm_backward_data.PrimitiveDesc(e, [rows(4)], [plain([4, 6])], [rows(6)], memory.desc([1], dt.s32, tag.x))],
  ['moe.routing.backward', (e) => new moe.routing.BackwardPrimitiveDesc(e, {} as never)],
  ['moe.combine.backward', (e) => new moe.combine.BackwardPrimitiveDesc(e, {} as never)],
  ['moe.layer.backward', (e) => new moe.layer.BackwardPrimitiveDesc(e, {} as never)],
  ['moe.ExpertParallelRank', (e) => new moe.ExpertParallelRank(e, { rank: 0, worldSize: 1, experts: 4, topK: 2, tokens: 8, hidden: 4 } as never, {} as never)],
];

describe('primitives without a gpu implementation refuse a gpu engine at pd creation', () => {
  let gpu: GpuEngine;
  beforeAll(async () => {
    gpu = await gpuEngine();
  });
  afterAll(() => gpu.release());

  it.each(CASES)('%s', (name, create) => {
    let caught: unknown;
    try {
      create(gpu as unknown as AsCpu);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(DnnlError);
    const err = caught as DnnlError;
    expect(err.status).toBe('unimplemented');
    expect(err.message).toContain(`${name}: no implementation on the gpu engine yet`);
  });

  it('expertViews refuses gpu memory (a GpuMemory has no views at an offset)', () => {
    const m = { engine: gpu, desc: plain([8, 4]) } as never;
    expect(() => grouped_gemm.expertViews(m, [0, 8])).toThrow(/expertViews: no implementation on the gpu engine yet/);
  });

  it('matmul, grouped_gemm, reorder, moe.routing, moe.dispatch, moe.combine, moe.activation and dynamic_quant take a gpu engine (they have webgpu impls)', () => {
    expect(new reorder.PrimitiveDesc(gpu, plain([8, 4]), memory.desc([8, 4], dt.f32, tag.ba)).implInfo).toBe('webgpu:device:reorder-plain');
    expect(new grouped_gemm.PrimitiveDesc(gpu, [rows(4)], [plain([4, 6])], [rows(6)], memory.desc([1], dt.s32, tag.x)).implInfo).toMatch(/^webgpu:/);
    expect(new moe.combine.PrimitiveDesc(gpu, { tokens: 4, topK: 2, src: plain([8, 4]), dst: plain([4, 4]) }).implInfo).toBe('webgpu:moe-combine');
    expect(new moe.activation.PrimitiveDesc(gpu, plain([8, 8]), plain([8, 4]), { alg: algorithm.glu_swiglu }).implInfo).toBe('webgpu:moe-activation');
    expect(new dynamic_quant.PrimitiveDesc(gpu, plain([8, 4]), memory.desc([8, 4], dt.s8, tag.ab)).implInfo).toBe('webgpu:quant-rows-s8');
    expect(new moe.routing.PrimitiveDesc(gpu, plain([8, 4]), { topK: 2 }).implInfo).toMatch(/^webgpu:/);
    expect(new moe.dispatch.PrimitiveDesc(gpu, { tokens: 8, topK: 2, experts: 4 }).implInfo).toMatch(/^webgpu:/);
  });

  it('matmul, grouped_gemm and moe.layer with attr.setDynamicQuantization run on webgpu:dynamic-quant, never on the weight-only kernels', () => {
    // Found by a differential fuzzer (session 19): the weight-only kernels used to take the pd and compute the
    // exact src x dequant(W), not the int8-activation result of rfcs/0006. The attribute now has its own impl
    // (values: gpu_dynamic_int8_matmul.test.ts); what it cannot run is refused, never run weight-only.
    const attr = (): PrimitiveAttr => new PrimitiveAttr().setScales(ARG.WEIGHTS, 5, [], dt.f32).setDynamicQuantization(ARG.SRC, dt.s8);
    const pds = [
      new matmul.PrimitiveDesc(gpu, grouped(10, 16, 2), memory.desc([2, 16, 8], dt.s8, tag.abc), grouped(10, 8, 2), attr()),
      new matmul.PrimitiveDesc(gpu, grouped(10, 16, 2), memory.desc([2, 16, 8], dt.s4, tag.any), grouped(10, 8, 2), attr()),
      new matmul.PrimitiveDesc(gpu, plain([1, 16]), memory.desc([16, 8], dt.u8, tag.ab), plain([1, 8]), new PrimitiveAttr().setScales(ARG.WEIGHTS, 2, [], dt.f32).setDynamicQuantization(ARG.SRC, dt.s8)),
      // (values: gpu_grouped_gemm_dq.test.ts)
      new grouped_gemm.PrimitiveDesc(gpu, [memory.desc([RUNTIME_DIM_VAL, 16], dt.f32, tag.ab)], [memory.desc([16, 8], dt.s4, tag.any)], [memory.desc([RUNTIME_DIM_VAL, 8], dt.f32, tag.ab)],
        memory.desc([1], dt.s32, tag.x), new PrimitiveAttr().setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.f32).setDynamicQuantization(ARG.SRC, dt.s8)),
    ];
    for (const pd of pds) expect(pd.implInfo).toMatch(/^webgpu:dynamic-quant\+/);
    const layer = new moe.layer.PrimitiveDesc(gpu, {
      tokens: 4, hidden: 16, intermediate: 8, experts: 2, topK: 1, dynamicQuantization: 's8',
      weights: { w13: memory.desc([2, 16, 16], dt.s8, tag.abc), w2: memory.desc([2, 8, 16], dt.s8, tag.abc) }, weightScales: { w13: { mask: 5 }, w2: { mask: 5 } },
    });
    expect(layer.implInfo).toMatch(/webgpu:dynamic-quant\+/);
  });
});
