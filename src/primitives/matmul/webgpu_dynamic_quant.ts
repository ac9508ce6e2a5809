/**
 * Dynamic int8 activations (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`, rfcs/0006) on the gpu engine: one
 * execution records two passes in order, with nothing read back in between:
 *   1. quant-rows-s8 (the dynamic_quant kernel, kernels/wgsl/quant_rows.ts): every src row to s8 with its own
 *      scale, into device buffers the executor owns, the cpu engine's codes and scales bit for bit; a grouped src
 *      (P#1) or the grouped-offsets attribute (P#2) bounds the rows on the device, as on the cpu;
 *   2. the webgpu matmul of those s8 rows (the cpu's inner problem, `innerProblem`: s8 src, per-row src scales)
 *      with the caller's weights, scales and post-ops: W8A8 `dot4` for s8 weights where the device has packed
 *      dot products, codes converted in the loop otherwise.
 * The integer products are exact on both engines; the float epilogue (scales, the K-block folds) may round in
 * another order than the cpu's, so the two engines agree within tolerance, not bit for bit.
 */
import { MemoryDesc } from '../../memory/desc.js';
import { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Executor } from '../../runtime/lifetime.js';
import { FLOAT_TYPES } from '../../attr/fusion.js';
import { webgpuDynamicQuant, type GpuDynamicQuantArgs } from '../dynamic_quant/webgpu_dynamic_quant.js';
import type { DynamicQuantProblem } from '../dynamic_quant/pd.js';
import type { GpuMatmulImpl, MatmulArgs, MatmulExecutor } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { innerProblem, srcRows } from './wasm_dynamic_quant.js';
import { webgpuMatmul } from './webgpu_matmul.js';
import { dqNonFiniteRow, dqOffsetsError } from './dq_errors.js';
import { NOT_THIS_FEATURE } from '../pick_impl.js';

/** Where the rows to quantize end: a grouped src's offsets (P#1), the offsets attribute (P#2, no gather), or
 * nowhere (dense, or a gather, whose token rows are all read). */
function rowBound(p: MatmulProblem): 'src' | 'attr' | undefined {
  if (p.offsetsFrom === 'attr' && !p.moe.gather) return 'attr';
  return p.kind === 'grouped_m' && p.src.isGrouped ? 'src' : undefined;
}

/** The quantization pass over src's rows (row stride: the one before K). */
function quantProblem(p: MatmulProblem): DynamicQuantProblem {
  const rows = srcRows(p), K = p.K, bound = rowBound(p);
  const ld = p.src.strides[p.src.ndims - 2] ?? K;
  const grouped = bound === undefined ? undefined : { groupCount: p.G, variableDim: 0, groupSizes: undefined, offsetsDt: 's32' as const };
  const src = new MemoryDesc({ dims: [rows, K], dataType: p.src.dataType, format: grouped ? 'grouped' : 'blocked', strides: [ld, 1], grouped });
  const dst = new MemoryDesc({ dims: [rows, K], dataType: 's8', format: 'blocked', strides: [K, 1] });
  const scales = new MemoryDesc({ dims: [rows], dataType: 'f32', format: 'blocked', strides: [1] });
  return { src, dst, scales, rows, cols: K, grouped: grouped !== undefined };
}

export const webgpuDynamicQuantMatmul: GpuMatmulImpl = {
  name: 'webgpu:dynamic-quant',
  describe(eng, p) {
    return `webgpu:dynamic-quant+${(webgpuMatmul.describe?.(eng, innerProblem(p)) ?? webgpuMatmul.name).replace(/^webgpu:/, '')}`;
  },
  reject(p, eng) {
    if (!p.attr.dynamicQuantization) return NOT_THIS_FEATURE;
    if (!FLOAT_TYPES.includes(p.src.dataType)) return `src ${p.src.dataType} (f32 / bf16 / f16 are quantized)`;
    if (p.src.format !== 'any' && p.src.strides[p.src.ndims - 1] !== 1) return 'src rows must be contiguous';
    // The rows are quantized as one strided run: a batched src must be uniformly strided over its rows.
    if (p.src.ndims > 2 && p.src.strides.slice(0, -2).some((s, i) => s !== p.src.dims[i + 1] * p.src.strides[i + 1])) return 'a batched src whose batches are not evenly strided rows';
    if (srcRows(p) * Math.max(p.K, 1) > 0x7fffffff) return 'src too large for 32-bit indexing';
    const q = quantProblem(p);
    return webgpuDynamicQuant.reject(q, eng) ?? webgpuMatmul.reject(innerProblem(p.weights.format === 'any' ? { ...p, weights: webgpuMatmul.weightsLayout(p, eng) } : p), eng);
  },
  weightsLayout(p, eng) {
    return webgpuMatmul.weightsLayout(innerProblem(p), eng);
  },
  createExecutor(p, eng) {
    return new WebgpuDynamicQuantExecutor(p, eng);
  },
};

class WebgpuDynamicQuantExecutor implements MatmulExecutor<GpuMemory> {
  private readonly p: MatmulProblem;
  private readonly inner: MatmulProblem;
  private readonly gemm: MatmulExecutor<GpuMemory>;
  private readonly quant: Executor<GpuDynamicQuantArgs>;
  private readonly qp: DynamicQuantProblem;
  private readonly codes: GpuMemory;
  private readonly scales: GpuMemory;

  constructor(p: MatmulProblem, eng: GpuEngine) {
    this.p = p;
    this.inner = innerProblem(p);
    this.qp = quantProblem(p);
    this.gemm = webgpuMatmul.createExecutor(this.inner, eng);
    this.quant = webgpuDynamicQuant.task(this.qp, eng, { offsets: dqOffsetsError, nonFinite: dqNonFiniteRow });
    // The workspaces: s8 rows (rounded up to whole words: the kernel stores codes four to a u32) and f32 scales.
    this.codes = GpuMemory.create(this.qp.dst, eng);
    this.scales = GpuMemory.create(this.qp.scales, eng);
  }

  destroy(): void {
    this.gemm.destroy?.();
    this.quant.destroy();
    this.codes.free();
    this.scales.free();
  }

  task(a: MatmulArgs<GpuMemory>): StreamTask {
    const bound = rowBound(this.p);
    // The pass reads src's values, and the offsets that bound its rows (src's own, or the attribute's).
    const qsrc = bound === 'attr' ? GpuMemory.view(a.src, this.qp.src, [a.src.buffers[0], a.offsets!.buffers[0]], [a.src.byteSizes[0], a.offsets!.byteSizes[0]]) : a.src;
    const quant = this.quant.run({ src: qsrc, dst: this.codes, scales: this.scales });
    // The GEMM reads the workspace through a view of the caller's src (its offsets buffer unchanged).
    const src = GpuMemory.view(a.src, this.inner.src, [this.codes.buffers[0], ...a.src.buffers.slice(1)], [this.codes.byteSizes[0], ...a.src.byteSizes.slice(1)]);
    const gemm = this.gemm.task({ ...a, src, scales: { ...a.scales, src: this.scales } });
    return () => {
      const r = quant();
      return r instanceof Promise ? r.then(gemm) : gemm();
    };
  }
}
