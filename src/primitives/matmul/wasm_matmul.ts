import type { DataType } from '../../common/data_type.js';
import {
  packedGeometry, packedLowpGeometry, packedLowpWeightsDesc, packedWeightsDesc, packedX16Geometry, packedX16WeightsDesc, panelQuantKey,
  PACKED_P8, PACKED_X16, PACKED_X4, PACKED_X8, X16_TYPES, X4_TYPES, X8_TYPES,
} from '../../memory/packed_weights.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import type { Engine } from '../../runtime/engine.js';
import { ACC_MODE, GROUP_MODE, JOB, JOB_DT_ALL, JOB_ERR, JOB_KIND, PATH, PATH_KERNEL, WEI_PACKED, scratchBytes, type JobField } from '../../kernels/job_layout.js';
import { writeEpilogue } from '../../kernels/epilogue.js';
import type { MatmulArgs, MatmulExecutor, MatmulImpl } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { checkedOffsets, groupingOf, offsetsError } from './runtime_offsets.js';
import { rowMapsError } from './row_maps.js';
import { FLOAT_TYPES } from '../../attr/fusion.js';
import { fits32, panelQuantOf, planFused, writeFused, type FusedPlan, type Role, type Roles } from '../../kernels/fused_job.js';

import { TILE } from '../../kernels/tile_geometry.js';
import { GLU_CODE, GLU_LAYOUT_CODE, PO, PO_DGLU, PO_KIND } from '../../kernels/job_layout.js';
import { DGLU_CHUNK, DglReduceJob } from '../../kernels/dglu_job.js';
import { splitBatch, type BatchOffsets, type BatchSplit } from './batch_dims.js';
import { dtBits } from '../../common/data_type.js';
import type { Memory } from '../../memory/memory.js';

const { MB, NB, KC, KC_INT, KC_PACKED } = TILE;
/** @internal the tile geometry (tests check the scratch it needs; NB must stay a multiple of 64 for GLU blocks32). */
export { TILE };

/** Roles of each logical dimension of the arguments of a matmul (fusion.ts's table of coordinates). */
export function matmulRoles(p: MatmulProblem): { roles: Roles; binary: Role[] } {
  if (p.kind === 'grouped_m') return { roles: { src: ['r', 'k'], weights: ['g', 'k', 'n'], dst: ['r', 'n'], zeroG: {} }, binary: ['r', 'n'] };
  if (p.kind === 'grouped_k') return { roles: { src: ['r', 'k'], weights: ['k', 'n'], dst: ['g', 'r', 'n'], zeroG: {} }, binary: ['g', 'r', 'n'] };
  if (p.dst.ndims === 2) return { roles: { src: ['r', 'k'], weights: ['k', 'n'], dst: ['r', 'n'], zeroG: {} }, binary: ['r', 'n'] };
  const zeroG = { src: p.src.dims[0] === 1, weights: p.weights.dims[0] === 1 };
  return { roles: { src: ['g', 'r', 'k'], weights: ['g', 'k', 'n'], dst: ['g', 'r', 'n'], zeroG }, binary: ['g', 'r', 'n'] };
}

const KNOWN_PACKED: readonly string[] = [PACKED_P8, PACKED_X8, PACKED_X4, PACKED_X16];

/** Whether weights are in the `x16:p8` layout (bf16 / f16 codes, converted in registers on the f32 paths). */
export function isX16(md: MemoryDesc): boolean {
  return md.format === 'packed' && md.packed?.name === PACKED_X16;
}

/**
 * The layout `tag.any` float weights resolve to on the cpu kernels: bf16 / f16 keep their codes
 * (`x16:p8`, 2 bytes per weight) unless the fusion has weights scales / zero points (those stay on the
 * `f32:p8` panels, which the fused path scales as it packs); f32 takes `f32:p8`. Shared with grouped_gemm.
 */
export function floatWeightsLayout(dims: readonly number[], dataType: DataType, hasWeightsQuant: boolean): MemoryDesc {
  return X16_TYPES.includes(dataType) && !hasWeightsQuant ? packedX16WeightsDesc(dims, dataType) : packedWeightsDesc(dims);
}

/** `-w8` / `-w4` for weights in the x8 / x4 packed layouts (the microkernel decodes them), else ''. */
export function lowpSuffix(md: MemoryDesc): string {
  if (md.format !== 'packed') return '';
  return md.packed?.name === PACKED_X8 ? (md.dataType.startsWith('f8') ? '-wf8' : '-w8') : md.packed?.name === PACKED_X4 ? (md.dataType === 'f4_e2m1' ? '-wf4' : '-w4') : '';
}

/**
 * The kernel a plan runs: x8 / x4 weights are decoded in registers by the f32 x low-precision kernels
 * (`f32-gemm-4x8-w8`, ...) or, on the integer path, widened by the integer kernel (`s16-gemm-3x8-w8`).
 * Shared with grouped_gemm.
 */
export function kernelName(plan: FusedPlan | string, weights: MemoryDesc): string {
  const path = typeof plan === 'string' ? PATH.f32 : plan.path;
  if (isX16(weights)) return `f32-gemm-4x8-wx16${path === PATH.f32 ? '' : '-fused'}`;
  const w = lowpSuffix(weights);
  return w ? `${path === PATH.int ? PATH_KERNEL[PATH.int] : 'f32-gemm-4x8'}${w}` : PATH_KERNEL[path];
}

/**
 * Whether accumulation_mode relaxed (rfcs/0007) changes the kernels of this problem: weight-only s8 / u8 /
 * s4 / u4 weights in their code panels on the f32 x low-precision path, without zero points and with
 * per-column scales or K blocks of a multiple of 4. Its 1-2 row tiles then run `f32-gemm-1x16r-w8` /
 * `-w4`; other problems keep the strict kernels (relaxed allows reordering, it does not require it).
 */
export function relaxedDecode(p: MatmulProblem, plan: FusedPlan | string): boolean {
  if (!p.attr.relaxedAccumulation || typeof plan === 'string' || plan.path !== PATH.f32_fused) return false;
  if (!['-w8', '-w4', '-wf4'].includes(lowpSuffix(p.weights)) || !['s8', 'u8', 's4', 'u4', 'f4_e2m1'].includes(p.weights.dataType)) return false;
  if (p.fusion.zeroPoints.weights || p.weights.packed?.quant?.zeroPoints) return false;
  const ws = p.fusion.scales.weights;
  const kDim = p.weights.ndims - 2;
  // K blocks of scales (the mask covers K): whole blocks of a multiple of 4 k (the kernels' step)
  return !ws || !(ws.mask & (1 << kDim)) || ws.groups[kDim] % 4 === 0;
}

/** The kernels' plan for a problem, or why they cannot run it. */
function planMatmul(p: MatmulProblem): FusedPlan | string {
  const { roles, binary } = matmulRoles(p);
  return planFused(p.src.dataType, p.weights.dataType, p.dst.dataType, p.bias?.dataType, p.fusion, p.attr, roles, binary);
}

/**
 * The SIMD wasm implementation: one job per execution, run by the workers (or the calling thread
 * when threads = 1). Grouped variable-M, variable-K, dense 2D and batched 3D all become the same tile
 * space; only how a group finds its rows differs. The job's path (fused_job.ts) picks the f32 4x8
 * microkernel with its in-register epilogue, the same kernel with the fused tile epilogue (any data
 * type, scales, zero points, GLU, binary / eltwise / sum chains), or the int16 x int16 -> int32 kernel
 * for s8/u8 x s8/u8/s4/u4. Weights `tag.any` of an 8-bit / 4-bit type resolve to the `x8:p8` /
 * `x4:p8k2` code panels on both the f32 x low-precision and the integer paths: one reorder serves
 * weight-only and W8A8 users.
 */
export const wasmMatmul: MatmulImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe(engine, p0) {
    const split = splitBatch(p0);
    const p = split === undefined || typeof split === 'string' ? p0 : split.inner;
    const plan = planMatmul(p);
    const relaxed = relaxedDecode(p, plan) ? `+f32-gemm-1x16r${lowpSuffix(p.weights)}` : '';
    const launches = p !== p0 && typeof split === 'object' && split.outer.length > 1 ? `+${split.outer.length}-batch-launches` : '';
    return `wasm:${engine.isa}:${kernelName(plan, p.weights)}${relaxed}${launches}`;
  },
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    // (wasm_dynamic_quant.ts hands this impl its inner problem: the quantized s8 src)
    if (p.attr.dynamicQuantization && p.src.dataType !== 's8') return 'dynamic quantization runs on wasm:dynamic-quant';
    // (tag.any weights of more than one batch dim resolve to plain ones: weightsLayout)
    const split = splitBatch(p.weights.format === 'any' ? { ...p, weights: plainWeights(p.weights) } : p);
    if (split !== undefined) return splitRejection(p, split, engine);
    for (const [name, md] of [['src', p.src], ['weights', p.weights], ['dst', p.dst]] as const) {
      if (md.format !== 'any' && md.format !== 'packed' && !fits32(md)) return `${name} is too large for 32-bit indexing`;
    }
    if (p.weights.format === 'packed' && !KNOWN_PACKED.includes(p.weights.packed?.name ?? '')) return `packed layout ${p.weights.packed?.name} is not one of ${KNOWN_PACKED.join(', ')}`;
    if (isX16(p.weights) && (p.fusion.scales.weights || p.fusion.zeroPoints.weights)) return `${PACKED_X16} weights with weights scales / zero points (their tag.any layout is ${PACKED_P8})`;
    if (p.kind === 'grouped_k' && p.weights.format !== 'blocked' && p.weights.format !== 'grouped') return 'variable-K weights must be plain (not packed)';
    if (p.bias) {
      if (!FLOAT_TYPES.includes(p.bias.dataType)) return `bias data type ${p.bias.dataType} (kernels take f32, bf16, f16 bias)`;
      const nd = p.bias.ndims;
      if ((p.kind !== 'grouped_m' || nd === 3) && nd >= 2 && p.bias.dims[nd - 2] !== 1) return 'bias that varies along M';
    }
    const plan = planMatmul(p);
    if (typeof plan === 'string') return plan;
    if (p.fusion.gluBackward && NB % DGLU_CHUNK !== 0) return `glu_backward needs tiles of a multiple of ${DGLU_CHUNK} columns`;
    if (p.fusion.gluBackward && !fits32(p.fusion.gluBackward.src)) return 'the glu_backward src is too large for 32-bit indexing';
    if (lowpSuffix(p.weights) && plan.path === PATH.f32) return `${p.weights.packed?.name} weights run on the fused f32 x low-precision or the integer path only`;
    const emb = panelQuantKey(p.weights.packed?.quant);
    if (emb && plan.path === PATH.int && p.weights.packed?.quant?.zeroPoints) return `the integer path applies the weights' zero points at execution: ${p.weights.packed?.name} panels with embedded ones (+q) run on the f32 x low-precision kernels only`;
    if (emb && emb !== panelQuantKey(panelQuantOf(p.fusion))) return `the packed weights embed scales / zero points (${emb}) that the attribute's weights scales / zero points (${panelQuantKey(panelQuantOf(p.fusion)) || 'none'}) do not match`;
    const mds = [...Object.values(p.fusion.scales), ...Object.values(p.fusion.zeroPoints)].map((q) => q!.md);
    for (const b of p.fusion.binary) mds.push(b.md);
    if (mds.some((md) => !fits32(md))) return 'a scales / zero points / binary memory is too large for 32-bit indexing';
    return undefined;
  },
  weightsLayout(p) {
    // More than one batch dim: the panels hold one batch dim of experts; the kernels read plain weights in place.
    if (p.kind === 'dense' && p.batch.length > 1) return plainWeights(p.weights);
    if (FLOAT_TYPES.includes(p.weights.dataType))
      return p.kind === 'grouped_k' ? packedWeightsDesc(p.weights.dims) : floatWeightsLayout(p.weights.dims, p.weights.dataType, !!(p.fusion.scales.weights || p.fusion.zeroPoints.weights));
    // 8-bit and 4-bit weights: their codes in panels, decoded in registers right before the FMAs (f32 x
    // low-precision) or the int16 dot products (W8A8 / W4A8): one layout, so one reorder serves both.
    // For the f32 kernels the weights' scales / zero points are stored beside the panels (`+q`); the
    // integer path applies them in its epilogue, so its panels hold the codes only.
    if (p.kind !== 'grouped_k' && [...X8_TYPES, ...X4_TYPES].includes(p.weights.dataType)) {
      const plan = planMatmul(p);
      const int = typeof plan !== 'string' && plan.path === PATH.int;
      return packedLowpWeightsDesc(p.weights.dims, p.weights.dataType, int ? undefined : panelQuantOf(p.fusion));
    }
    // Low-precision weights on the f32 path are decoded per tile from their own plain layout.
    return plainWeights(p.weights);
  },
  createExecutor(p, engine) {
    const split = splitBatch(p);
    if (split === undefined) return new WasmMatmulExecutor(p, engine);
    if (typeof split === 'string') throw new Error(`wasm matmul: ${split}`);
    return new BatchLaunchesExecutor(split, engine);
  },
};

function plainWeights(w: MemoryDesc): MemoryDesc {
  return new MemoryDesc({ dims: w.dims, dataType: w.dataType, format: 'blocked', strides: tagToStrides('abcdefghijkl'.slice(0, w.ndims), w.dims, 'weights') });
}

/** Why the kernels cannot run a dense problem with more than one batch dim as launches of its inner 3D problem. */
function splitRejection(p: MatmulProblem, split: BatchSplit | string, engine: Engine): string | undefined {
  if (typeof split === 'string') return split;
  if (p.attr.dynamicQuantization) return 'dynamic quantization with more than one batch dim';
  if (p.weights.format === 'packed') return 'packed weights with more than one batch dim (the panels hold one batch dim: use plain weights, which tag.any resolves to here)';
  for (const [name, md] of [['src', p.src], ['weights', p.weights], ['dst', p.dst]] as const) {
    if (md.format !== 'any' && !fits32(md)) return `${name} is too large for 32-bit indexing`;
  }
  if (split.outer.some((o) => launchBytes(split.inner, o) === undefined)) return 'a batch offset that splits a byte of a 4-bit tensor';
  return wasmMatmul.reject(split.inner, engine);
}

/** Byte offsets of one launch's operands (the executor's order: src, weights, dst, bias, scales, zero points, binary), undefined when one is not whole. */
function launchBytes(p: MatmulProblem, o: BatchOffsets): number[] | undefined {
  const bytes = (dt: DataType, elems: number): number => (elems * dtBits(dt)) / 8;
  const q = (kind: 'scales' | 'zeroPoints'): number[] => (['src', 'weights', 'dst'] as const).flatMap((a) => {
    const param = p.fusion[kind][a];
    return param ? [bytes(param.dataType, o[kind][a] ?? 0)] : [];
  });
  const out = [bytes(p.src.dataType, o.src), bytes(p.weights.dataType, o.weights), bytes(p.dst.dataType, o.dst), p.bias ? bytes(p.bias.dataType, o.bias) : 0,
    ...q('scales'), ...q('zeroPoints'), ...p.fusion.binary.map((b, i) => bytes(b.md.dataType, o.binary[i]))];
  return out.every(Number.isInteger) ? out : undefined;
}

/** A memory whose first handle is moved by `bytes` (the kernels read only the handles). */
function moved(m: Memory, bytes: number): Memory {
  return bytes === 0 ? m : ({ handles: [m.handles[0] + bytes, ...m.handles.slice(1)] } as unknown as Memory);
}

/**
 * A dense matmul with more than one batch dim: its inner 3D problem's job, once per outer launch, every
 * operand moved by the launch's offsets. The launches queue on the pool in order (each job is written
 * when it is next in line, so one job struct serves them all).
 */
class BatchLaunchesExecutor implements MatmulExecutor {
  private readonly inner: WasmMatmulExecutor;
  private readonly split: BatchSplit;

  constructor(split: BatchSplit, engine: Engine) {
    this.split = split;
    this.inner = new WasmMatmulExecutor(split.inner, engine);
  }

  destroy(): void {
    this.inner.destroy();
  }

  task(a: MatmulArgs): () => void | Promise<void> {
    const p = this.split.inner;
    const tasks = this.split.outer.map((o) => {
      const b = launchBytes(p, o)!;
      let i = 4;
      const q = (t: MatmulArgs['scales']): MatmulArgs['scales'] =>
        Object.fromEntries((['src', 'weights', 'dst'] as const).flatMap((arg) => (t[arg] ? [[arg, moved(t[arg], b[i++])]] : [])));
      const scales = q(a.scales), zeroPoints = q(a.zeroPoints);
      return this.inner.task({
        ...a, src: moved(a.src, b[0]), weights: moved(a.weights, b[1]), dst: moved(a.dst, b[2]), bias: a.bias && moved(a.bias, b[3]),
        scales, zeroPoints, binary: a.binary.map((m) => moved(m, b[i++])),
      });
    });
    return () => {
      const pending = tasks.map((t) => t()).filter((r): r is Promise<void> => r instanceof Promise);
      return pending.length ? Promise.all(pending).then(() => undefined) : undefined;
    };
  }
}

/**
 * The quantized rows of a `:dq` execution (wasm_dynamic_quant.ts): the s8 rows' address, read as src's values
 * (src's offsets stay the caller's), and their per-row scales' address, read as the src scales. Addresses rather
 * than `Object.create` views of the caller's memories, which made those memories V8 prototypes (slow-mode
 * objects: every later property read of them slower; the same fix as grouped_gemm's OwnRows).
 */
export interface WorkspaceSrc {
  readonly src: number;
  readonly srcScales: number;
}

export class WasmMatmulExecutor implements MatmulExecutor {
  private readonly p: MatmulProblem;
  private readonly engine: Engine;
  private readonly job: number;
  private readonly sizes: number;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;
  private readonly plan: FusedPlan;
  /** glu_backward with prob: the chunk-sum workspace and the job that folds it into dprob. */
  private readonly reduce: DglReduceJob | undefined;

  /** `plan`: the caller's (wasm_dynamic_quant.ts: the integer path with K-block folding), else the problem's. */
  constructor(p: MatmulProblem, engine: Engine, given?: FusedPlan) {
    this.p = p;
    this.engine = engine;
    const plan = given ?? planMatmul(p);
    if (typeof plan === 'string') throw new Error(`wasm matmul: ${plan}`);
    this.plan = plan;
    this.job = engine.alloc(JOB.SIZE);
    this.i32 = new Int32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.f32 = new Float32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.reduce = p.fusion.gluBackward?.prob ? new DglReduceJob(engine, p.M, p.N) : undefined;
    const known = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
    this.sizes = 0;
    if (known) {
      this.sizes = engine.alloc(known.length * 4);
      new Int32Array(engine.buffer, this.sizes, known.length).set(known);
    }
  }

  destroy(): void {
    this.engine.releaseBlock(this.job);
    if (this.sizes) this.engine.releaseBlock(this.sizes);
    this.reduce?.free();
  }

  /** `own`: wasm_dynamic_quant.ts's workspace, read instead of src's values and as the per-row src scales
   * (addresses, not views of the caller's memories: see WorkspaceSrc). */
  task(a: MatmulArgs, own?: WorkspaceSrc): () => void | Promise<void> {
    const eng = this.engine;
    // Grouped values memories beyond src/dst carry their own offsets: validate all of them on the host
    // first (same rules and messages as the kernel's check and the reference).
    const extra = this.p.kind === 'grouped_m' && this.p.offsetsFrom === 'desc' && groupingOf(this.p, a).others.length > 1;
    const pre = (): void => {
      if (extra) checkedOffsets(groupingOf(this.p, a));
    };
    const gemm: () => void | Promise<void> = eng.pool ? () => {
      pre();
      return eng.pool!.run(() => this.fill(a, own)).then(() => this.checkStatus(a));
    } : () => {
      pre();
      eng.kernels!.run_job(this.fill(a, own), 0);
      this.checkStatus(a);
    };
    if (!this.reduce) return gemm;
    // glu_backward dprob: the GEMM's tiles wrote chunk sums; fold them into dprob in chunk order.
    const p = this.p;
    const offs = p.offsetsFrom === 'attr' ? a.offsets!.handles[0] : p.kind === 'grouped_m' ? a.src.handles[1] : 0;
    const reduce = this.reduce.task(a.gluBackward!.diffProb!, offs, p.kind === 'grouped_m' ? p.G : 0);
    return () => {
      const r = gemm();
      return r instanceof Promise ? r.then(reduce) : reduce();
    };
  }

  private set(field: JobField, v: number): void {
    this.i32[JOB[field] / 4] = v;
  }

  /** Writes the job for these arguments; runs when the job is next in line, so the scratch is free. */
  private fill(a: MatmulArgs, own: WorkspaceSrc | undefined): number {
    const p = this.p;
    const G = p.kind === 'dense' ? (p.batch.length ? p.batch[0] : 1) : p.G;
    const kc = this.plan.path === PATH.int ? KC_INT : KC;
    // Plain weights on the f32 fast path: each N-block is packed once, K whole, into a per-worker cache.
    const wcacheK = p.weights.format !== 'packed' && this.plan.path === PATH.f32 ? Math.min(p.K, KC_PACKED) : 0;
    // The A block must hold K whole for the cached panels (k_block): no more than that.
    const kcPacked = p.weights.format === 'packed' ? KC_PACKED : wcacheK ? Math.max(KC, wcacheK + (wcacheK & 1)) : 0;
    const moe = p.moe;
    const seenBytes = moe.scatterTopK ? Math.ceil(moe.dstRows / 8 / 64) * 64 : 0;
    const scratch = this.engine.scratch(scratchBytes(G, MB, NB, Math.max(KC, kc / 2), kcPacked, seenBytes, wcacheK));
    this.i32.fill(0);
    const dt = (t: DataType): number => JOB_DT_ALL[t as keyof typeof JOB_DT_ALL];
    this.set('kind', p.kind === 'grouped_k' ? JOB_KIND.grouped_k : JOB_KIND.grouped_m);
    this.set('group_mode', p.kind === 'dense' ? GROUP_MODE.uniform : GROUP_MODE.offsets);
    this.set('G', G);
    this.set('M', p.M);
    this.set('K', p.K);
    this.set('N', p.N);
    this.set('total', p.kind === 'grouped_k' ? p.K : p.M);
    this.set('mb', MB);
    this.set('nb', NB);
    this.set('kc', kc);
    this.set('kc_packed', kcPacked);
    this.set('wcache_k', wcacheK);
    this.set('scratch', scratch.ptr);
    this.set('scratch_stride', scratch.stride);
    this.set('nthreads', this.engine.threads);
    this.set('src', own ? own.src : a.src.handles[0]);
    this.set('wei', a.weights.handles[0]);
    this.set('dst', a.dst.handles[0]);
    this.set('dt_src', dt(p.src.dataType));
    this.set('dt_wei', dt(p.weights.dataType));
    this.set('dt_dst', dt(p.dst.dataType));
    const ss = p.src.strides, ws = p.weights.strides, ds = p.dst.strides;
    const batched = p.kind === 'dense' && p.batch.length === 1;
    const tail = (s: readonly number[], n: number): number[] => s.slice(s.length - n);
    if (p.kind === 'grouped_k') {
      this.set('s_0', ss[0]); this.set('s_1', ss[1]);
      this.set('w_k', ws[0]); this.set('w_n', ws[1]);
      this.set('d_g', ds[0]); this.set('d_0', ds[1]); this.set('d_1', ds[2]);
      this.set('offs', a.src.handles[1]);
      this.set('offs2', a.weights.handles[1]);
    } else {
      const [s0, s1] = tail(ss, 2), [d0, d1] = tail(ds, 2);
      this.set('s_g', batched && p.src.dims[0] !== 1 ? ss[0] : 0);
      this.set('s_0', s0); this.set('s_1', s1);
      this.set('d_g', batched ? ds[0] : 0);
      this.set('d_0', d0); this.set('d_1', d1);
      const weiBatched = p.weights.ndims === 3 && p.weights.dims[0] !== 1;
      if (isX16(p.weights)) {
        this.set('wei_packed', WEI_PACKED.x16_p8);
        this.set('w_g', weiBatched ? packedX16Geometry(p.weights.dims).expertBytes : 0);
      } else if (lowpSuffix(p.weights)) {
        this.set('wei_packed', p.weights.packed?.name === PACKED_X8 ? WEI_PACKED.x8_p8 : WEI_PACKED.x4_p8k2);
        this.set('w_g', weiBatched ? packedLowpGeometry(p.weights.dims, p.weights.dataType, p.weights.packed?.quant).expertBytes : 0);
      } else if (p.weights.format === 'packed') {
        this.set('wei_packed', WEI_PACKED.f32_p8);
        this.set('dt_wei', JOB_DT_ALL.f32);
        this.set('w_g', weiBatched ? packedGeometry(p.weights.dims).expertFloats : 0);
      } else {
        const [wk, wn] = tail(ws, 2);
        this.set('w_g', weiBatched ? ws[0] : 0);
        this.set('w_k', wk); this.set('w_n', wn);
      }
      if (p.offsetsFrom === 'attr') {
        this.set('offs', a.offsets!.handles[0]);
      } else if (p.kind === 'grouped_m') {
        // MoE gather: only dst is grouped; scatter: only src.
        this.set('offs', p.offsetsArg === 'dst' ? a.dst.handles[1] : a.src.handles[1]);
        this.set('offs2', p.offsetsArg === 'src' && p.dst.isGrouped ? a.dst.handles[1] : 0);
      }
    }
    if (a.tokenIndex) this.set('tok_idx', a.tokenIndex.handles[0]);
    if (a.tokenKs) this.set('tok_ks', a.tokenKs.handles[0]);
    if (a.counts) this.set('counts', a.counts.handles[0]);
    this.set('zero_fill', moe.zeroFill ? 1 : 0);
    this.set('expert_of', a.expertMap ? a.expertMap.handles[0] : 0);
    this.set('experts', moe.experts);
    this.set('gather', moe.gather ? 1 : 0);
    this.set('scatter_k', moe.scatterTopK);
    this.set('src_rows', moe.srcRows);
    this.set('dst_rows', moe.dstRows);
    this.set('seen_bytes', seenBytes);
    this.set('accum_mode', relaxedDecode(p, this.plan) ? ACC_MODE.relaxed : ACC_MODE.strict);
    this.set('sizes', this.sizes);
    if (a.bias && p.bias) {
      const b = p.bias, nd = b.ndims;
      this.set('bias', a.bias.handles[0]);
      this.set('b_n', b.dims[nd - 1] === 1 ? 0 : b.strides[nd - 1]);
      const perGroup = p.kind !== 'dense' || (batched && nd === 3);
      this.set('b_g', perGroup && b.dims[0] !== 1 ? b.strides[0] : 0);
    }
    if (this.plan.path === PATH.f32) writeEpilogue(this.i32, this.f32, p.attr);
    writeFused(this.i32, this.f32, this.plan, p.fusion, p.bias?.dataType,
      (kind, arg) => ({ ptr: own && kind === 'scales' && arg === 'src' ? own.srcScales : a[kind][arg]!.handles[0], table: false }),
      (i) => ({ ptr: a.binary[i].handles[0], table: false }), p.weights.packed?.quant);
    const gb = p.fusion.gluBackward;
    if (gb) {
      const o = JOB.po / 4;
      this.set('n_po', 1);
      this.i32[o + PO.kind / 4] = PO_KIND.dglu;
      this.i32[o + PO.alg / 4] = GLU_CODE[gb.op.alg];
      this.f32[o + PO.alpha / 4] = gb.op.alpha;
      this.f32[o + PO.beta / 4] = gb.op.limit;
      this.i32[o + PO.ptr / 4] = a.gluBackward!.src.handles[0];
      this.i32[o + PO_DGLU.h13_dt / 4] = dt(gb.src.dataType);
      this.i32[o + PO_DGLU.h13_ld / 4] = gb.src.strides[0];
      this.i32[o + PO_DGLU.h13_s1 / 4] = gb.src.strides[1];
      this.i32[o + PO_DGLU.layout / 4] = GLU_LAYOUT_CODE[gb.op.layout];
      this.i32[o + PO_DGLU.prob / 4] = a.gluBackward!.prob?.handles[0] ?? 0;
      this.i32[o + PO_DGLU.ws / 4] = this.reduce?.ws ?? 0;
      // cuDNN's per-group alpha / beta in the unused second post-op record (glu-bwd.c dglu_tile).
      const o1 = o + PO.SIZE / 4;
      this.i32[o1 + PO.ptr / 4] = a.gluBackward!.alpha?.handles[0] ?? 0;
      this.i32[o1 + PO.table / 4] = a.gluBackward!.beta?.handles[0] ?? 0;
    }
    return this.job;
  }

  /** Turns the kernel's verdict on the runtime offsets into the same errors as the reference. */
  private checkStatus(a: MatmulArgs): void {
    const code = this.i32[JOB.status / 4];
    if (code === JOB_ERR.none) return;
    if (code >= JOB_ERR.dims_negative) throw rowMapsError(this.p, code, this.i32[JOB.err_index / 4], this.i32[JOB.err_a / 4], this.i32[JOB.err_b / 4]);
    throw offsetsError(groupingOf(this.p, a), code, this.i32[JOB.err_index / 4], this.i32[JOB.err_a / 4], this.i32[JOB.err_b / 4]);
  }
}
