import { DnnlError } from '../../common/status.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { QuantArg } from '../../attr/fusion.js';
import { gemmTiledKey, gemmTiledWgsl, type GemmTiledConfig } from '../../kernels/wgsl/gemm_tiled.js';
import { WGSL_ELTWISE_HELPERS, eltwiseChainWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import { fusionStorageCount, type GemmFusion } from '../../kernels/wgsl/wgsl_quant.js';
import { fusionEntries, fusionUniform, gemmFusionOf, needsFusion, subjectRejectReason, type FusionArgs, type FusionSubject } from '../matmul/webgpu_fusion.js';
import { DIMS_ERR_OPERAND, DIMS_ERR_TILES, EXPERT_ARGS_WORDS, EXPERT_CHECK_WORDS, EXPERT_INFO_WORDS, expertDimsWgsl } from '../../kernels/wgsl/expert_dims.js';
import type { GpuGroupedGemmImpl, GroupedGemmArgs, GroupedGemmExecutor } from './impl_list.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { gpuRowCapacity, runtimeDimsError } from './runtime_dims.js';
import { planExpertWindows, type ExpertRowWindow } from './expert_windows.js';
import { GEMM_ROWS_PARAMS_WORDS } from '../../kernels/wgsl/gemm_rows.js';
import { GEMV_PARAMS_WORDS, GEMV_SCHED_WORD, GEMV_STATUS_BINDING, gemvBindings, gemvQuantStageWords, gemvSplitKKey, gemvSplitKWgsl, type GemvSplitKConfig } from '../../kernels/wgsl/gemm_splitk_gemv.js';
import { QROWS_ERR_NONFINITE } from '../../kernels/wgsl/quant_rows.js';
import { expertGemvPlan, gpuKernelTuning, type GemvPlan } from '../matmul/webgpu_kernel_choice.js';
import { dqNonFiniteExpertRow } from '../matmul/dq_errors.js';
import { ARG, argName } from '../args.js';
import { EXPERT_QUANT_ARG_ID } from './problem.js';
import { QUANT_ARGS } from '../../attr/fusion.js';

/** Bytes between experts' GEMM params in the params buffer: minUniformBufferOffsetAlignment's default and maximum. */
const PARAMS_STRIDE = 256;
/**
 * The largest grid an expert is dispatched over directly (its capacity's tiles, those past M_i
 * returning at once); larger ones take the expert-dims pass's indirect arguments. An empty workgroup
 * costs nanoseconds on a GPU, a validated indirect dispatch 0.7-1.1 ms (Dawn, H100); on a CPU WebGPU
 * (SwiftShader) the empty workgroups cost more, so the bound stays modest.
 */
const DIRECT_MAX_WORKGROUPS = 8192;

interface Tile {
  readonly tm: number;
  readonly tn: number;
  readonly bk: number;
}

/**
 * Tile of one expert from its row capacity (the host never knows the runtime rows): small capacities
 * (decode) take short M tiles; a capacity that would need more than one dispatch dimension of M tiles
 * takes the tallest tile.
 */
function tileFor(cap: number, N: number, maxY: number): Tile {
  const t = cap <= 16 ? { tm: 16, tn: 64, bk: 16 } : cap <= 32 ? { tm: 32, tn: 64, bk: 16 } : cap <= 256 || N < 512 ? { tm: 64, tn: 64, bk: 16 } : { tm: 128, tn: 128, bk: 8 };
  return Math.ceil(cap / t.tm) > maxY ? { tm: 128, tn: 128, bk: 8 } : t;
}

/** Expert i as the fusion helpers see it: its own descriptors and fusion, the primitive's attr. */
function subjectOf(p: GroupedGemmProblem, i: number): FusionSubject {
  return { ...p.experts[i], attr: p.attr };
}

/** Expert i's gemm-tiled fusion (scales, zero points, binary, sum, GLU, non-float types), undefined for a plain float GEMM. */
function expertFusion(p: GroupedGemmProblem, i: number): GemmFusion | undefined {
  const s = subjectOf(p, i);
  return needsFusion(s) ? gemmFusionOf(s) : undefined;
}

function rejectReason(p: GroupedGemmProblem, eng: GpuEngine): string | undefined {
  // Float src with the attribute: webgpu:dynamic-quant quantizes it first (the weight-only kernels would ignore it).
  if (p.attr.dynamicQuantization && p.experts[0].src.dataType !== 's8') return 'dynamic quantization runs on webgpu:dynamic-quant';
  if (p.experts.some((e) => e.weights.format === 'packed')) return 'packed weights layouts are not implemented on the gpu engine yet (use plain ab / ba weights)';
  const why = subjectRejectReason(subjectOf(p, 0));
  if (why) return why;
  const limit = eng.device.limits.maxStorageBuffersPerShaderStage;
  for (let i = 0; i < p.G; i++) {
    const f = expertFusion(p, i);
    const used = 3 + (f ? fusionStorageCount(f) : 0);
    if (used > limit) return `expert ${i}'s GEMM needs ${used} storage buffers (scales, zero points, binary src1 included), beyond the device's maxStorageBuffersPerShaderStage ${limit}`;
  }
  const max = eng.caps.maxStorageBufferBindingSize;
  const big = p.experts.findIndex((e) => e.weights.getSize(0) > max);
  if (big >= 0) return `expert ${big}'s weights (${p.experts[big].weights.getSize(0)} bytes) do not fit one storage binding (maxStorageBufferBindingSize ${max} bytes): not implemented on the gpu engine yet`;
  const maxX = eng.caps.maxComputeWorkgroupsPerDimension;
  const wide = p.experts.findIndex((e) => Math.ceil(e.N / 64) > maxX);
  if (wide >= 0) return `expert ${wide}'s N = ${p.experts[wide].N} needs more than ${maxX} column tiles in one dispatch`;
  return undefined;
}

/** Column tiles of expert e: a GLU tile holds the gate and up columns of tn / 2 dst columns. */
function tilesN(e: Expert, t: Tile, f: GemmFusion | undefined): number {
  return f?.glu ? Math.ceil(e.dstN / (t.tn / 2)) : Math.ceil(e.N / t.tn);
}

/** Expert i's fusion operands of one execution (rfcs/0002 per-expert memories; shared binary src1 as given for every expert). */
function expertFusionArgs(a: GroupedGemmArgs<GpuMemory>, i: number): FusionArgs {
  const pick = (r: Readonly<Partial<Record<QuantArg, readonly (GpuMemory | undefined)[]>>>): Partial<Record<QuantArg, GpuMemory>> =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v?.[i]]));
  return { scales: pick(a.scales), zeroPoints: pick(a.zeroPoints), binary: a.binary.map((b) => b[i]) };
}

/** The rows of an expert bound whole: one window of every tile, no element offsets. */
const WHOLE = { rLo: 0, rHi: 0xffffffff, aOff: 0, dOff: 0 };

/**
 * Expert e's gemm-tiled params (dense mode with row windows, gemm_rows.ts); M (word 0) is written on
 * the device per execution. The row-window words (topK, aOff, wOff, dOff, eLo, eHi, rLo, rHi) give
 * every tile at or past M_i an early return, and a window's tiles its bindings' element offsets.
 */
function expertParams(e: Expert, w: ExpertRowWindow | undefined): Uint32Array {
  const P = new Uint32Array(GEMM_ROWS_PARAMS_WORDS);
  const r = w ? { rLo: w.rLo, rHi: w.rHi, aOff: w.src.elemOffset, dOff: w.dst.elemOffset } : WHOLE;
  P.set([0, e.K, e.N, e.src.strides[0], e.weights.strides[0], e.weights.strides[1], 0, e.dst.strides[0]]);
  P.set([0, r.aOff, 0, r.dOff, 0, 1, r.rLo, r.rHi], 16);
  return P;
}

/** The buffers an execution binds, compared by identity for the bind-group cache. */
function sameBuffers(a: readonly GPUBuffer[], b: readonly GPUBuffer[] | undefined): boolean {
  return b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * Expert i's kernel for a row capacity: `gemv-splitk` (dense form: one tile of all its rows up to 8,
 * tiles of 8 rows beyond) where the capacity is at most gpuKernelTuning.gemvDenseMaxRows and its types /
 * fusion allow, else `gemm-tiled` with `tile`. Cached per expert and capacity: building a pipeline key or a plan costs
 * microseconds, and an execution of E experts would pay it E times.
 */
interface ExpertKernel {
  readonly tile: Tile;
  readonly gemv: GemvPlan | undefined;
  /** Undefined for an expert of no rows of capacity: it is never dispatched. */
  readonly pipeline: GPUComputePipeline | undefined;
}

/** How expert i runs in one execution: its row capacity, kernel, params slots and, past one binding, its row windows. */
interface ExpertRun {
  /** Rows that fit every tensor with runtime rows of the expert, and its src and dst alone. */
  readonly cap: number;
  readonly sd: number;
  readonly tile: Tile;
  readonly kernel: ExpertKernel;
  readonly slot: number;
  readonly windows: readonly ExpertRowWindow[] | undefined;
}

/**
 * Expert e's gemv-splitk params (gemm_splitk_gemv.ts GEMV_PARAMS_WORDS, dense form); M (word 0) is
 * written on the device per execution, `cap` bounds the rows.
 */
function expertGemvParams(e: Expert, g: GemvPlan, cap: number, i: number, quantLda: number): Uint32Array {
  const P = new Uint32Array(GEMV_PARAMS_WORDS);
  P.set([0, e.K, e.N, e.src.strides[0], e.weights.strides[0], e.weights.strides[1], 0, e.dst.strides[0]]);
  // Words 18, 19 (read by the kernel quantizing its src only): the caller's float src row stride, the expert.
  P.set([g.colTiles, g.cfg.kSplit, g.kChunk, 0, e.dstN, quantLda, i], 13);
  P.set([1, cap, 0, 0, 0, 1, 0], GEMV_SCHED_WORD);
  return P;
}

/** A tensor with runtime rows beside an expert's src / dst (a per-row scale, zero point or binary src1). */
interface RowOperand {
  readonly expert: number;
  /** Its argument's name, built only for a message. */
  readonly name: () => string;
  readonly cap: number;
}

/**
 * Every expert's tensors with runtime rows beside src / dst, in the cpu engine's checking order
 * (wasm_grouped_gemm.ts checkRowValues: scales then zero points, by argument, by expert; then each
 * binary src1 by expert), with their row capacities.
 */
function rowOperands(p: GroupedGemmProblem, a: GroupedGemmArgs<GpuMemory>): RowOperand[] {
  const out: RowOperand[] = [];
  for (const [base, tbl] of [[ARG.ATTR_SCALES, a.scales], [ARG.ATTR_ZERO_POINTS, a.zeroPoints]] as const) {
    for (const arg of QUANT_ARGS) {
      tbl[arg]?.forEach((m, i) => {
        if (m?.desc.hasRuntimeDims) out.push({ expert: i, name: () => argName(base | (EXPERT_QUANT_ARG_ID[arg] + i)), cap: gpuRowCapacity(m) });
      });
    }
  }
  a.binary.forEach((list, j) => list.forEach((m, i) => {
    if (m.desc.hasRuntimeDims) out.push({ expert: i, name: () => argName(ARG.ATTR_MULTIPLE_POST_OP(p.experts[i].fusion.binary[j].position) | (ARG.MULTIPLE_SRC + i)), cap: gpuRowCapacity(m) });
  }));
  return out;
}

/** How many row operands `p`'s executions have (rowOperands; the descriptors decide). */
function rowOperandCount(p: GroupedGemmProblem): number {
  let n = 0;
  for (const e of p.experts) {
    for (const q of [...Object.values(e.fusion.scales), ...Object.values(e.fusion.zeroPoints)]) if (q?.md.hasRuntimeDims) n++;
    for (const b of e.fusion.binary) if (b.perExpert && b.md.hasRuntimeDims) n++;
  }
  return n;
}

/**
 * webgpu:dynamic-quant's float src (the experts' GEMMs run on its s8 rows): where every expert with rows of
 * capacity runs the gemv (decode), the gemv quantizes its own rows (GemvSplitKConfig.quantSrc) from these
 * instead of a quantization pass per expert; `lda`: each expert's src row stride (elements).
 */
export interface GemmQuantSrc {
  readonly dt: 'f32' | 'bf16' | 'f16';
  readonly lda: readonly number[];
}

/** An execution's float src when its gemvs quantize it (GemmQuantSrc): the caller's src memories. */
export type QuantSrcArgs = readonly GpuMemory[];

/** The two-pass form of a GemmQuantSrc execution: each expert's s8 rows and their scales, and the recording of the passes writing them. */
export interface QuantPasses {
  readonly src: GpuMemory[];
  readonly scales: GpuMemory[];
  readonly record: () => void;
}

/** A gemv quantizing its src: whether it stages the codes, its config and its pipeline. */
interface QuantGemv {
  readonly staged: boolean;
  readonly cfg: GemvSplitKConfig;
  readonly pipe: GPUComputePipeline;
}

export class WebgpuGroupedGemmExecutor implements GroupedGemmExecutor<GpuMemory> {
  private readonly epilogue: string;
  /**
   * The gemvs quantizing their src (quantSrc), by the plan they derive from: whether they stage the codes
   * (quantStage), their config (whose bindings the bind groups follow) and pipeline.
   */
  private readonly quantGemvs = new Map<GemvPlan, QuantGemv>();
  /** Each expert's fusion (undefined: a plain float GEMM with the eltwise epilogue). */
  private readonly fusions: (GemmFusion | undefined)[];
  /** Each expert's fusion uniform (wgsl_quant.ts), `fusionStride` bytes apart, and their sizes. */
  private readonly fusionParams: GPUBuffer | undefined;
  private readonly fusionStride: number;
  private readonly fusionBytes: number[];
  private readonly dimsPipe: GPUComputePipeline;
  /**
   * The gemm-tiled params slots, PARAMS_STRIDE bytes apart: one per expert, or one per row window of an
   * expert past one binding; word 0 (M) written by the expert-dims pass. Grows with the windows.
   */
  private params: GPUBuffer;
  private paramSlots: number;
  /** Per-expert indirect dispatch args (EXPERT_ARGS_WORDS words each), written by the expert-dims pass. */
  private readonly args: GPUBuffer;
  /** Per-expert capacity, tm, N tiles, max y tiles, first slot, slots (EXPERT_INFO_WORDS words each), written by the host when they change. */
  private readonly info: GPUBuffer;
  private readonly dimsParams: GPUBuffer;
  /** The row operands' (expert, capacity) checks in the cpu's order (EXPERT_CHECK_WORDS each), written with the info. */
  private readonly checks: GPUBuffer;
  /**
   * Stand in for zero-size caller buffers (WebGPU binds no empty range; such an expert has 0 rows of
   * capacity): one for read bindings, one for dst, since a buffer may not be read and written in one dispatch.
   */
  private readonly emptyIn: GPUBuffer;
  private readonly emptyOut: GPUBuffer;
  /** The info and window words last written (the params slots follow from them). */
  private lastPlan: Uint32Array | undefined;
  private cache: { key: GPUBuffer[]; plan: Uint32Array; gemm: GPUBindGroup[][]; statusAt: number; staged: boolean } | undefined;
  /** Each expert's kernel by row capacity (ExpertKernel). */
  private readonly kernels: Map<number, ExpertKernel>[];

  constructor(private readonly p: GroupedGemmProblem, private readonly eng: GpuEngine, private readonly quantSrc?: GemmQuantSrc) {
    this.epilogue = eltwiseChainWgsl(p.attr.postOps.entries) ?? '';
    this.fusions = p.experts.map((_, i) => expertFusion(p, i));
    this.kernels = p.experts.map(() => new Map());
    const words = this.fusions.map((f, i) => (f ? fusionUniform(subjectOf(p, i), f) : new Uint32Array(0)));
    this.fusionBytes = words.map((w) => w.byteLength);
    this.fusionStride = Math.ceil(Math.max(...this.fusionBytes) / PARAMS_STRIDE) * PARAMS_STRIDE;
    if (this.fusionStride > 0) {
      const all = new Uint32Array((p.G * this.fusionStride) / 4);
      words.forEach((w, i) => all.set(w, (i * this.fusionStride) / 4));
      this.fusionParams = eng.createBuffer(all.byteLength, 'grouped_gemm fusion params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      eng.write(this.fusionParams, 0, all);
    }
    this.dimsPipe = eng.pipeline('expert-dims', expertDimsWgsl);
    const G = p.G;
    const storage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
    this.paramSlots = G;
    this.params = eng.createBuffer(G * PARAMS_STRIDE, 'grouped_gemm params', GPUBufferUsage.UNIFORM | storage);
    this.args = eng.createBuffer(G * EXPERT_ARGS_WORDS * 4, 'grouped_gemm dispatch args', GPUBufferUsage.STORAGE | GPUBufferUsage.INDIRECT);
    this.info = eng.createBuffer(G * EXPERT_INFO_WORDS * 4, 'grouped_gemm expert info', storage);
    this.dimsParams = eng.createBuffer(16, 'grouped_gemm dims params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.checks = eng.createBuffer(rowOperandCount(p) * EXPERT_CHECK_WORDS * 4, 'grouped_gemm row operand checks', storage);
    this.emptyIn = eng.createBuffer(16, 'grouped_gemm empty input binding');
    this.emptyOut = eng.createBuffer(16, 'grouped_gemm empty dst binding');
  }

  /**
   * `afterDims` (webgpu:dynamic-quant's quantization passes) is recorded between the expert-dims pass and the
   * experts' GEMMs: the runtime M_i checks then come first in the execution's errors, as on the cpu engine.
   */
  task(a: GroupedGemmArgs<GpuMemory>, afterDims?: () => void): StreamTask {
    // Planned at execute (buffer sizes are host facts): what no window can bind throws there.
    const ops = this.fusions.some((f) => f) ? rowOperands(this.p, a) : [];
    const runs = this.plan(a, ops);
    return () => this.encode(a, ops, runs, afterDims, undefined);
  }

  /**
   * An execution of a GemmQuantSrc executor: `a` holds the caller's float src and no src scales. Where its experts
   * with rows all run the gemv, it quantizes them (quantizesInGemv) and nothing else is allocated or recorded; else
   * `passes()` gives the s8 rows, their scales and the passes, recorded after the expert-dims pass. (The float src
   * plans as the s8 rows would: the capacity of the caller's src and dst, and one binding as the float rows take one.)
   */
  quantTask(a: GroupedGemmArgs<GpuMemory>, passes: () => QuantPasses): StreamTask {
    const ops = this.fusions.some((f) => f) ? rowOperands(this.p, a) : [];
    const runs = this.plan(a, ops);
    if (this.quantizesInGemv(runs)) return () => this.encode(a, ops, runs, undefined, a.src);
    const q = passes();
    return this.task({ ...a, src: q.src, scales: { ...a.scales, src: q.scales } }, q.record);
  }

  /**
   * Whether the gemvs quantize the src (gpuKernelTuning.gemvQuantSrc): every expert with rows of capacity on
   * the one-pass dense gemv (a tiled expert keeps its quantization pass, and then all do: the errors of NaN
   * rows stay in expert order), experts and rows within the 16 bits each of the reported key.
   */
  private quantizesInGemv(runs: readonly ExpertRun[]): boolean {
    return this.quantSrc !== undefined && gpuKernelTuning.gemvQuantSrc && this.p.G <= 0x10000
      && runs.every((r) => r.cap === 0 || (r.kernel.gemv?.cfg.kSplit === 1 && !r.windows && r.cap <= 0x10000));
  }

  /**
   * Expert i's gemv quantizing its src (GemvSplitKConfig.quantSrc): its codes staged in workgroup memory where R
   * rows of K codes fit the device's (gpuKernelTuning.gemvQuantStage), else requantized by each lane.
   */
  private quantGemv(i: number, g: GemvPlan): QuantGemv {
    const staged = gpuKernelTuning.gemvQuantStage;
    let q = this.quantGemvs.get(g);
    if (q?.staged !== staged) {
      const cfg = this.quantConfig(i, g.cfg, staged);
      q = { staged, cfg, pipe: this.eng.pipeline(gemvSplitKKey(cfg, 'main'), () => WGSL_ELTWISE_HELPERS + gemvSplitKWgsl(cfg)) };
      this.quantGemvs.set(g, q);
    }
    return q;
  }

  /** Expert i's gemv config quantizing its src, staging its codes (quantStage) when `staged` and they fit. */
  private quantConfig(i: number, cfg: GemvSplitKConfig, staged: boolean): GemvSplitKConfig {
    const q: GemvSplitKConfig = { ...cfg, quantSrc: this.quantSrc!.dt };
    const words = staged ? gemvQuantStageWords(q, this.p.experts[i].K, this.eng.caps.maxComputeWorkgroupStorageSize) : undefined;
    return words ? { ...q, quantStage: words } : q;
  }

  /** Expert i's kernel for capacity `cap` (windows: the tiled kernel, whose row windows split it). */
  private kernelFor(i: number, cap: number, windowed: boolean): ExpertKernel {
    const key = windowed ? -1 - cap : cap;
    let k = this.kernels[i].get(key);
    if (k) return k;
    const { eng } = this;
    const e = this.p.experts[i];
    const tile = tileFor(cap, e.N, eng.caps.maxComputeWorkgroupsPerDimension);
    if (cap === 0) return { tile, gemv: undefined, pipeline: undefined };
    const gemv = windowed ? undefined : expertGemvPlan({ ...subjectOf(this.p, i), K: e.K, N: e.N }, cap, eng);
    const pipeline = gemv ? eng.pipeline(gemvSplitKKey(gemv.cfg, 'main'), () => WGSL_ELTWISE_HELPERS + gemvSplitKWgsl(gemv.cfg)) : this.gemmPipeline(tile, i);
    k = { tile, gemv, pipeline };
    this.kernels[i].set(key, k);
    return k;
  }

  private gemmPipeline(t: Tile, i: number): GPUComputePipeline {
    const e0 = this.p.experts[0];
    const fusion = this.fusions[i];
    // Row windows (no row maps): the early return of tiles past M_i, and a split expert's offsets.
    const cfg: GemmTiledConfig = {
      mode: 'dense', ...t, src: e0.src.dataType, wei: e0.weights.dataType, dst: e0.dst.dataType, bias: undefined, epilogue: fusion ? '' : this.epilogue, fusion,
      rows: { gather: false, scatter: false, zeroFill: false, counts: false },
    };
    return this.eng.pipeline(gemmTiledKey(cfg), () => WGSL_ELTWISE_HELPERS + gemmTiledWgsl(cfg));
  }

  /** Each expert's capacity (its row tensors' buffers), tile and, past one binding, row windows; throws what no window can bind. */
  private plan(a: GroupedGemmArgs<GpuMemory>, ops: readonly RowOperand[]): ExpertRun[] {
    const { p, eng } = this;
    const maxY = eng.caps.maxComputeWorkgroupsPerDimension, max = eng.caps.maxStorageBufferBindingSize;
    const opsCap = p.experts.map(() => Infinity);
    for (const o of ops) opsCap[o.expert] = Math.min(opsCap[o.expert], o.cap);
    let slot = 0;
    return p.experts.map((e, i) => {
      const sd = Math.min(gpuRowCapacity(a.src[i]), gpuRowCapacity(a.dst[i]));
      const cap = Math.min(sd, opsCap[i]);
      const tiled = tileFor(cap, e.N, maxY);
      const windows = planExpertWindows({ md: e.src, bytes: a.src[i].buffers[0].size }, { md: e.dst, bytes: a.dst[i].buffers[0].size }, cap, tiled.tm, eng.caps);
      if (typeof windows === 'string') throw new DnnlError('unimplemented', `grouped_gemm: expert ${i}: ${windows}`);
      const kernel = this.kernelFor(i, cap, windows !== undefined);
      // The gemv's tile holds every row: one y tile for the expert-dims pass's checks.
      const tile = kernel.gemv ? { ...tiled, tm: kernel.gemv.cfg.rows } : tiled;
      const f = this.fusions[i] ? expertFusionArgs(a, i) : undefined;
      const big = f && [...Object.values(f.scales), ...Object.values(f.zeroPoints), ...f.binary].find((m) => m !== undefined && m.buffers[0].size > max);
      if (big) throw new DnnlError('unimplemented', `grouped_gemm: expert ${i}: a scales, zero points or binary src1 buffer of ${big.buffers[0].size} bytes is larger than one storage binding (maxStorageBufferBindingSize ${max} bytes): not implemented on the gpu engine yet`);
      const run = { cap, sd, tile, kernel, slot, windows };
      slot += windows?.length ?? 1;
      return run;
    });
  }

  private encode(a: GroupedGemmArgs<GpuMemory>, ops: readonly RowOperand[], runs: readonly ExpertRun[], afterDims: (() => void) | undefined, raw: QuantSrcArgs | undefined): void {
    const { p, eng } = this;
    eng.checkAlive();
    const G = p.G;
    const maxY = eng.caps.maxComputeWorkgroupsPerDimension;
    // The plan words: each expert's info, the row operand checks, then each window's rows and byte ranges
    // (plain loops: E experts per execution).
    let windows = 0;
    for (const r of runs) windows += r.windows?.length ?? 0;
    const nInfo = G * EXPERT_INFO_WORDS, nChecks = ops.length * EXPERT_CHECK_WORDS;
    const plan = new Uint32Array(nInfo + nChecks + 6 * windows);
    for (let i = 0; i < G; i++) {
      const r = runs[i], o = i * EXPERT_INFO_WORDS;
      plan[o] = r.cap; plan[o + 1] = r.tile.tm; plan[o + 2] = this.gridX(i, r); plan[o + 3] = maxY; plan[o + 4] = r.slot; plan[o + 5] = r.windows?.length ?? 1; plan[o + 6] = r.sd;
    }
    ops.forEach((c, j) => { plan[nInfo + EXPERT_CHECK_WORDS * j] = c.expert; plan[nInfo + EXPERT_CHECK_WORDS * j + 1] = Math.min(c.cap, 0xffffffff); });
    let at = nInfo + nChecks;
    for (const r of runs) {
      for (const w of r.windows ?? []) {
        plan.set([w.rLo, w.rHi, w.src.offset, w.src.size, w.dst.offset, w.dst.size], at);
        at += 6;
      }
    }
    const last = this.lastPlan;
    let same = last !== undefined && last.length === plan.length;
    for (let j = 0; same && j < plan.length; j++) same = last![j] === plan[j];
    if (!same) this.writePlan(runs, plan.slice(0, nInfo), plan.slice(nInfo, nInfo + nChecks), plan);
    // The device reports the cpu engine's first violation (expert_dims.ts): src / dst, then a row operand (y: its check).
    const slot = eng.status.take((code, i, x, y) => {
      if (code === DIMS_ERR_TILES) return new DnnlError('runtime_error', `grouped_gemm: ARG.RUNTIME_DIMS[${i}] = ${x} rows need more than ${maxY} row tiles of ${runs[i]?.tile.tm ?? 0} in one dispatch on this gpu engine`);
      const op = code === DIMS_ERR_OPERAND ? ops[y] : undefined;
      return op ? new DnnlError('invalid_arguments', `ARG.RUNTIME_DIMS[${i}] = ${x} rows do not fit ${op.name()} (${op.cap} rows fit)`) : runtimeDimsError(code, i, x, y);
    });
    eng.writeParams(this.dimsParams, new Uint32Array([G, slot.word, PARAMS_STRIDE / 4, ops.length]));
    // The gemvs quantizing their src report NaN rows in one slot after the M_i checks' (~word 1: expert << 16 | row).
    const nanSlot = raw && eng.status.take((code, i) => (code === QROWS_ERR_NONFINITE ? dqNonFiniteExpertRow((~i >>> 0) >>> 16, ~i & 0xffff) : new DnnlError('runtime_error', `grouped_gemm: kernel status ${code}`)));
    // The plan written last (equal to this one): its identity keys the bind-group cache.
    const groups = this.bindGroups(a, runs, this.lastPlan!, slot.binding, raw && nanSlot ? { src: raw, status: nanSlot.binding } : undefined);
    // One dispatch per expert (per row window past one binding): WGSL cannot index an array of
    // buffers, so each expert binds its own. A small grid covers the expert's capacity (host-known):
    // tiles at or past M_i (device-known) and those of other windows return at once; a larger one is
    // the indirect grid of M_i's tiles.
    const experts = (pass: GPUComputePassEncoder): void => {
      let current: GPUComputePipeline | undefined;
      for (let i = 0; i < G; i++) {
        const r = runs[i];
        if (r.cap === 0) continue;
        // Experts of one capacity share their pipeline: set it once per run of them (a Dawn call each).
        const pipe = raw ? this.quantGemv(i, r.kernel.gemv!).pipe : r.kernel.pipeline!;
        if (pipe !== current) pass.setPipeline((current = pipe));
        const x = this.gridX(i, r), y = Math.min(maxY, Math.ceil(r.cap / r.tile.tm));
        for (const bg of groups.gemm[i]) {
          pass.setBindGroup(0, bg);
          if (x * y <= DIRECT_MAX_WORKGROUPS) pass.dispatchWorkgroups(x, y, 1);
          else pass.dispatchWorkgroupsIndirect(this.args, i * EXPERT_ARGS_WORDS * 4);
        }
      }
    };
    eng.encode('grouped_gemm', (enc) => {
      const pass = enc.beginComputePass({ label: 'grouped_gemm' });
      pass.setPipeline(this.dimsPipe);
      pass.setBindGroup(0, groups.dims);
      pass.dispatchWorkgroups(1);
      if (!afterDims) experts(pass);
      pass.end();
    });
    if (!afterDims) return;
    afterDims();
    eng.encode('grouped_gemm', (enc) => {
      const pass = enc.beginComputePass({ label: 'grouped_gemm experts' });
      experts(pass);
      pass.end();
    });
  }

  /** Writes the info and every params slot (static words; M comes from the expert-dims pass), growing the params buffer for windows. */
  private writePlan(runs: readonly ExpertRun[], info: Uint32Array<ArrayBuffer>, checks: Uint32Array<ArrayBuffer>, plan: Uint32Array): void {
    const slots = runs.reduce((n, r) => n + (r.windows?.length ?? 1), 0);
    if (slots > this.paramSlots) {
      this.eng.retire(this.params);
      this.params = this.eng.createBuffer(slots * PARAMS_STRIDE, 'grouped_gemm params', GPUBufferUsage.UNIFORM | GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST);
      this.paramSlots = slots;
      this.cache = undefined;
    }
    const all = new Uint32Array((slots * PARAMS_STRIDE) / 4);
    runs.forEach((r, i) => {
      const e = this.p.experts[i];
      if (!r.windows) all.set(r.kernel.gemv ? expertGemvParams(e, r.kernel.gemv, r.cap, i, this.quantSrc?.lda[i] ?? 0) : expertParams(e, undefined), (r.slot * PARAMS_STRIDE) / 4);
      r.windows?.forEach((w, j) => all.set(expertParams(e, w), ((r.slot + j) * PARAMS_STRIDE) / 4));
    });
    this.eng.write(this.params, 0, all);
    this.eng.write(this.info, 0, info);
    if (checks.length) this.eng.write(this.checks, 0, checks);
    this.lastPlan = plan;
  }

  /** Bind groups of this set of buffers and plan: reused while the execution's memories, plan and status block stay the same. */
  private bindGroups(a: GroupedGemmArgs<GpuMemory>, runs: readonly ExpertRun[], plan: Uint32Array, status: GPUBufferBinding,
    quant: { src: QuantSrcArgs; status: GPUBufferBinding } | undefined): { gemm: GPUBindGroup[][]; dims: GPUBindGroup } {
    const nonEmpty = (b: GPUBuffer, out = false): GPUBuffer => (b.size > 0 ? b : out ? this.emptyOut : this.emptyIn);
    const fusionMems = [...Object.values(a.scales), ...Object.values(a.zeroPoints), ...a.binary].flatMap((list) => (list ?? []).filter((m) => m !== undefined));
    // The gemvs quantizing their src bind it and the NaN slot (the n-th execution after a wait: the same slot).
    const key = [a.runtimeDims.buffers[0], ...[...a.src, ...a.weights, ...a.dst, ...fusionMems, ...(quant?.src ?? [])].map((m) => m.buffers[0]), ...(quant ? [quant.status.buffer] : [])];
    const statusAt = quant ? quant.status.offset ?? 0 : -1;
    // (a gemvQuantStage change between executions changes the pipelines, and so their auto layouts)
    const staged = gpuKernelTuning.gemvQuantStage;
    // The status slot's range changes with the execution's place after the wait: the engine's cache.
    const dims = this.eng.bindGroup(this.dimsPipe, [
      { binding: 0, resource: { buffer: this.dimsParams } },
      { binding: 1, resource: { buffer: nonEmpty(a.runtimeDims.buffers[0]) } },
      { binding: 2, resource: { buffer: this.info } },
      { binding: 3, resource: { buffer: this.params } },
      { binding: 4, resource: { buffer: this.args } },
      { binding: 5, resource: status },
      { binding: 6, resource: { buffer: this.checks } },
    ]);
    const c = this.cache;
    if (c && sameBuffers(key, c.key) && c.plan === plan && c.statusAt === statusAt && c.staged === staged) return { gemm: c.gemm, dims };
    const dev = this.eng.device;
    const gemm = runs.map((r, i) => {
      // An expert of no capacity is never dispatched.
      if (!r.kernel.pipeline) return [];
      const f = this.fusions[i];
      // A gemv quantizing its src computes the src scales (gemvBindings binds none): its src stands in for their slot.
      const fa = expertFusionArgs(a, i);
      const fargs = quant ? { ...fa, scales: { ...fa.scales, src: quant.src[i] } } : fa;
      const fusion = f ? fusionEntries(subjectOf(this.p, i), f, { buffer: this.fusionParams!, offset: i * this.fusionStride, size: this.fusionBytes[i] },
        fargs, (m) => nonEmpty(m.buffers[0])) : [];
      const qg = quant ? this.quantGemv(i, r.kernel.gemv!) : undefined;
      const layout = (qg ? qg.pipe : r.kernel.pipeline).getBindGroupLayout(0);
      const src = (quant?.src ?? a.src)[i].buffers[0], wei = a.weights[i].buffers[0], dst = a.dst[i].buffers[0];
      const g = r.kernel.gemv;
      if (g) {
        // gemv-splitk binds exactly gemvBindings (its auto layout): params, src, weights, dst, the fusion.
        const all = new Map<number, GPUBindGroupEntry>([
          [0, { binding: 0, resource: { buffer: this.params, offset: r.slot * PARAMS_STRIDE, size: GEMV_PARAMS_WORDS * 4 } }],
          [1, { binding: 1, resource: { buffer: nonEmpty(src) } }], [2, { binding: 2, resource: { buffer: nonEmpty(wei) } }], [3, { binding: 3, resource: { buffer: nonEmpty(dst, true) } }],
          ...fusion.map((f): [number, GPUBindGroupEntry] => [f.binding, f]),
        ]);
        if (quant) all.set(GEMV_STATUS_BINDING, { binding: GEMV_STATUS_BINDING, resource: quant.status });
        return [dev.createBindGroup({ label: `grouped_gemm expert ${i} (gemv)`, layout, entries: gemvBindings(qg?.cfg ?? g.cfg, 'main').map((b) => all.get(b)!) })];
      }
      const entries = (slot: number, w?: ExpertRowWindow): GPUBindGroupEntry[] => [
        { binding: 0, resource: { buffer: this.params, offset: slot * PARAMS_STRIDE, size: GEMM_ROWS_PARAMS_WORDS * 4 } },
        { binding: 1, resource: w ? { buffer: src, offset: w.src.offset, size: w.src.size } : { buffer: nonEmpty(src) } },
        { binding: 2, resource: { buffer: nonEmpty(wei) } },
        { binding: 3, resource: w ? { buffer: dst, offset: w.dst.offset, size: w.dst.size } : { buffer: nonEmpty(dst, true) } },
        ...fusion,
      ];
      const label = `grouped_gemm expert ${i}`;
      return r.windows ? r.windows.map((w, j) => dev.createBindGroup({ label: `${label} rows ${w.rLo}+`, layout, entries: entries(r.slot + j, w) }))
        : [dev.createBindGroup({ label, layout, entries: entries(r.slot) })];
    });
    this.cache = { key, plan, gemm, statusAt, staged };
    return { gemm, dims };
  }

  /** Expert i's workgroups along x: the gemv's column tiles, or gemm-tiled's N tiles. */
  private gridX(i: number, r: ExpertRun): number {
    return r.kernel.gemv ? r.kernel.gemv.colTiles : tilesN(this.p.experts[i], r.tile, this.fusions[i]);
  }

  destroy(): void {
    this.cache = undefined;
    this.eng.retire(this.params, this.args, this.info, this.dimsParams, this.checks, this.emptyIn, this.emptyOut, this.fusionParams);
  }
}

/**
 * Proposal #3 on the gpu engine: an `expert-dims` pass validates the runtime rows on the device and
 * writes each expert's M (and indirect arguments), then one dispatch per expert (WGSL has no pointer
 * tables), each with its own bind group: the expert's tensors, its own fusion operands (scales, zero
 * points, per-row binary src1) and fusion uniform. An expert of at most gemvDenseMaxRows rows of
 * capacity runs `gemv-splitk` (dense form), a larger one `gemm-tiled` (dense mode), over its capacity's
 * tiles where they are few (tiles past M_i return at once).
 */
export const webgpuGroupedGemm: GpuGroupedGemmImpl = {
  name: 'webgpu',
  describe() {
    // The kernel of each expert is chosen at execute from its row capacity (its buffers' sizes).
    return 'webgpu:gemm-tiled|gemv-splitk+expert-dims';
  },
  reject(p, eng) {
    return rejectReason(p, eng);
  },
  weightsLayout(e) {
    // No gpu packing yet: tag.any resolves to plain row-major weights.
    return new MemoryDesc({ dims: e.weights.dims, dataType: e.weights.dataType, format: 'blocked', strides: tagToStrides('ab', e.weights.dims, 'weights') });
  },
  createExecutor(p, eng) {
    return new WebgpuGroupedGemmExecutor(p, eng);
  },
};
