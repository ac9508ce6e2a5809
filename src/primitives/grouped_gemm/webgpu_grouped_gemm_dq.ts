/**
 * Dynamic int8 activations (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`, rfcs/0006) on Proposal #3 on the gpu
 * engine: one execution records, in order and with nothing read back in between,
 *   0. the GEMM's expert-dims pass (webgpu_grouped_gemm.ts): every M_i checked first, as on the cpu engine;
 *   1. per expert with rows of capacity, quant-rows-s8 (the dynamic_quant kernel, kernels/wgsl/quant_rows.ts):
 *      its first M_i src rows to s8 with one f32 scale each, M_i read on the device (rows past it never read),
 *      into a workspace of its own (dense rows of K_i bytes, and the scales), the cpu engine's codes and scales
 *      bit for bit;
 *   2. the experts' GEMMs of the webgpu grouped_gemm on those s8 rows with per-row src scales: the cpu's
 *      inner problem (wasm_grouped_gemm_dq.ts innerProblem) with the caller's weights, scales and post-ops.
 * Where every expert with rows of capacity runs the gemv (decode), step 1 is not recorded and its workspace not
 * allocated: each gemv quantizes its own rows with the same integer functions (gemm_splitk_gemv.ts quantSrc), same
 * codes, scales and bits, and reports NaN rows in the same words (gpuKernelTuning.gemvQuantSrc = false keeps the passes).
 * The integer products are exact on both engines; the float epilogue may round in another order than the
 * cpu's, so the engines agree within tolerance, not bit for bit (as matmul's :dq, webgpu_dynamic_quant.ts).
 */
import { DnnlError } from '../../common/status.js';
import { MemoryDesc } from '../../memory/desc.js';
import { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Executor } from '../../runtime/lifetime.js';
import { FLOAT_TYPES } from '../../attr/fusion.js';
import { webgpuDynamicQuant, type GpuDynamicQuantArgs } from '../dynamic_quant/webgpu_dynamic_quant.js';
import type { DynamicQuantProblem } from '../dynamic_quant/pd.js';
import { dqNonFiniteExpertRow } from '../matmul/dq_errors.js';
import { NOT_THIS_FEATURE } from '../pick_impl.js';
import type { GpuGroupedGemmImpl, GroupedGemmArgs, GroupedGemmExecutor } from './impl_list.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { DIMS_ERR, gpuRowCapacity, runtimeDimsError } from './runtime_dims.js';
import { innerProblem } from './wasm_grouped_gemm_dq.js';
import { WebgpuGroupedGemmExecutor, webgpuGroupedGemm, type QuantPasses } from './webgpu_grouped_gemm.js';

/**
 * Expert i's quantization pass over `cap` rows of capacity. Its src is read as a grouped src of i groups
 * whose offsets buffer is ARG.RUNTIME_DIMS: the kernel bounds the rows by offsets[i] = M_i, and reports an
 * M_i outside [0, cap] (nothing written).
 */
function quantProblem(e: Expert, i: number, cap: number): DynamicQuantProblem {
  const K = e.K;
  const grouped = { groupCount: i, variableDim: 0, groupSizes: undefined, offsetsDt: 's32' as const };
  const src = new MemoryDesc({ dims: [cap, K], dataType: e.src.dataType, format: 'grouped', strides: [e.src.strides[0], 1], grouped });
  const dst = new MemoryDesc({ dims: [cap, K], dataType: 's8', format: 'blocked', strides: [K, 1] });
  const scales = new MemoryDesc({ dims: [cap], dataType: 'f32', format: 'blocked', strides: [1] });
  return { src, dst, scales, rows: cap, cols: K, grouped: true };
}

export const webgpuDynamicQuantGroupedGemm: GpuGroupedGemmImpl = {
  name: 'webgpu:dynamic-quant',
  describe(eng, p) {
    return `webgpu:dynamic-quant+${(webgpuGroupedGemm.describe?.(eng, innerProblem(p)) ?? webgpuGroupedGemm.name).replace(/^webgpu:/, '')}`;
  },
  reject(p, eng) {
    if (!p.attr.dynamicQuantization) return NOT_THIS_FEATURE;
    const e0 = p.experts[0];
    if (!FLOAT_TYPES.includes(e0.src.dataType)) return `src ${e0.src.dataType} (f32 / bf16 / f16 are quantized)`;
    const q = p.experts.some((e) => e.weights.format === 'any') ? { ...p, experts: p.experts.map((e) => (e.weights.format === 'any' ? { ...e, weights: webgpuGroupedGemm.weightsLayout(e, eng) } : e)) } : p;
    return webgpuGroupedGemm.reject(innerProblem(q), eng);
  },
  weightsLayout(e, eng) {
    return webgpuGroupedGemm.weightsLayout(e, eng);
  },
  createExecutor(p, eng) {
    return new WebgpuDynamicQuantExecutor(p, eng);
  },
};

/** Expert i's workspace for one row capacity: its s8 rows, their scales and the pass that writes them. */
interface Workspace {
  readonly cap: number;
  readonly qp: DynamicQuantProblem;
  readonly codes: GpuMemory;
  readonly scales: GpuMemory;
  readonly quant: Executor<GpuDynamicQuantArgs>;
  /** The last view of the caller's src made for `quant` (quantSrc). */
  srcView?: GpuMemory;
}

class WebgpuDynamicQuantExecutor implements GroupedGemmExecutor<GpuMemory> {
  private readonly inner: GroupedGemmProblem;
  private readonly gemm: WebgpuGroupedGemmExecutor;
  /** Per expert, rebuilt when its capacity (a host fact: its src / dst buffers' sizes) changes; made by the first execution with the passes. */
  private readonly ws: (Workspace | undefined)[];
  /** Per expert, its quantization problem for the capacity last checked (checked whether or not the passes run). */
  private readonly qps: ({ readonly cap: number; readonly qp: DynamicQuantProblem } | undefined)[];

  constructor(private readonly p: GroupedGemmProblem, private readonly eng: GpuEngine) {
    this.inner = innerProblem(p);
    const dt = p.experts[0].src.dataType as 'f32' | 'bf16' | 'f16';
    this.gemm = new WebgpuGroupedGemmExecutor(this.inner, eng, { dt, lda: p.experts.map((e) => e.src.strides[0]) });
    this.ws = p.experts.map(() => undefined);
    this.qps = p.experts.map(() => undefined);
  }

  destroy(): void {
    this.gemm.destroy();
    this.ws.forEach((w) => w && free(w));
  }

  /** Expert i's quantization of `cap` rows, or why the gpu engine has none (thrown). */
  private quantProblemFor(i: number, cap: number): DynamicQuantProblem {
    const held = this.qps[i];
    if (held?.cap === cap) return held.qp;
    const qp = quantProblem(this.p.experts[i], i, cap);
    const why = webgpuDynamicQuant.reject(qp, this.eng);
    if (why) throw new DnnlError('unimplemented', `grouped_gemm: expert ${i}: quantizing ${cap} rows of src: ${why}`);
    this.qps[i] = { cap, qp };
    return qp;
  }

  /** Expert i's workspace for `cap` rows (those of its src and dst allocations). */
  private workspace(i: number, cap: number): Workspace {
    const held = this.ws[i];
    if (held?.cap === cap) return held;
    if (held) free(held);
    const e = this.p.experts[i], qp = this.quantProblemFor(i, cap);
    // Runtime-rows memories of exactly `cap` rows: the GEMM's checks see the caller's capacity.
    const inner = this.inner.experts[i];
    const codes = GpuMemory.create(inner.src, this.eng, undefined, { capacityBytes: cap * e.K });
    const scales = GpuMemory.create(inner.fusion.scales.src!.md, this.eng, undefined, { capacityBytes: cap * 4 });
    const quant = webgpuDynamicQuant.task(qp, this.eng, {
      offsets: (_g, n, rows) => runtimeDimsError(n < 0 ? DIMS_ERR.negative : DIMS_ERR.capacity, i, n, rows),
      nonFinite: (row) => dqNonFiniteExpertRow(i, row),
    });
    return (this.ws[i] = { cap, qp, codes, scales, quant });
  }

  task(a: GroupedGemmArgs<GpuMemory>): StreamTask {
    const max = this.eng.caps.maxStorageBufferBindingSize;
    const caps = this.p.experts.map((_e, i) => {
      const cap = Math.min(gpuRowCapacity(a.src[i]), gpuRowCapacity(a.dst[i]));
      this.quantProblemFor(i, cap);
      // No rows of capacity: nothing to read (the GEMM's expert-dims pass checks M_i).
      const buf = a.src[i].buffers[0];
      if (cap > 0 && buf.size > max) throw new DnnlError('unimplemented', `grouped_gemm: expert ${i}: dynamic quantization reads src as one storage binding; its buffer of ${buf.size} bytes exceeds maxStorageBufferBindingSize ${max} bytes`);
      return cap;
    });
    return this.gemm.quantTask(a, () => this.passes(a, caps));
  }

  /**
   * The two-pass form: each expert's workspace and the quantization passes writing it, recorded after the GEMM's
   * expert-dims pass (its M_i checks first among the errors, as on the cpu engine) and before the experts' GEMMs.
   * (A webgpu pass only records: no promise to wait for.)
   */
  private passes(a: GroupedGemmArgs<GpuMemory>, caps: readonly number[]): QuantPasses {
    const quants: StreamTask[] = [], src: GpuMemory[] = [], scales: GpuMemory[] = [];
    caps.forEach((cap, i) => {
      const w = this.workspace(i, cap);
      src.push(w.codes);
      scales.push(w.scales);
      if (cap > 0) quants.push(w.quant.run({ src: quantSrc(w, a.src[i], a.runtimeDims), dst: w.codes, scales: w.scales }));
    });
    return { src, scales, record: () => quants.forEach((q) => void q()) };
  }
}

/** Expert i's src as the quantization pass reads it (its buffer with the M_i buffer as offsets): one view kept per
 * workspace and made again only when the caller's buffers change, not E new objects per execute. */
function quantSrc(w: Workspace, src: GpuMemory, dims: GpuMemory): GpuMemory {
  const buf = src.buffers[0], off = dims.buffers[0], v = w.srcView;
  if (v?.buffers[0] === buf && v.buffers[1] === off && v.byteSizes[0] === src.byteSizes[0] && v.byteSizes[1] === dims.byteSizes[0]) return v;
  return (w.srcView = GpuMemory.view(src, w.qp.src, [buf, off], [src.byteSizes[0], dims.byteSizes[0]]));
}

function free(w: Workspace): void {
  w.quant.destroy();
  w.codes.free();
  w.scales.free();
}
