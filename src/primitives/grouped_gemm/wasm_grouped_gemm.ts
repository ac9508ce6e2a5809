import type { DataType } from '../../common/data_type.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { packedLowpWeightsDesc, panelQuantKey, PACKED_P8, PACKED_X16, PACKED_X4, PACKED_X8, X4_TYPES, X8_TYPES } from '../../memory/packed_weights.js';
import { floatWeightsLayout, isX16, kernelName, lowpSuffix } from '../matmul/wasm_matmul.js';
import type { Engine } from '../../runtime/engine.js';
import { GROUP_MODE, GROUP_REC, JOB, JOB_DT_ALL, JOB_ERR, JOB_KIND, MAX_PO, PATH, WEI_PACKED, scratchBytes } from '../../kernels/job_layout.js';
import { writeEpilogue } from '../../kernels/epilogue.js';
import type { GroupedGemmArgs, GroupedGemmImpl } from './impl_list.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { checkedRuntimeDims, rowCapacity, runtimeDimsError } from './runtime_dims.js';
import { DnnlError } from '../../common/status.js';
import type { Memory } from '../../memory/memory.js';
import { ARG, argName } from '../args.js';
import { FLOAT_TYPES, type QuantArg } from '../../attr/fusion.js';
import { TILE } from '../../kernels/tile_geometry.js';
import { fits32, panelQuantOf, planFused, samePlan, takesIntPath, writeFused, type FusedPlan, type Roles } from '../../kernels/fused_job.js';
import { EXPERT_QUANT_ARG_ID } from './problem.js';

const { MB, NB, KC, KC_INT, KC_PACKED } = TILE;

/** Expert coordinates (fusion.ts): src [m, k], weights [k, n], dst and binary [m, n]; values per expert. */
export const ROLES: Roles = { src: ['r', 'k'], weights: ['k', 'n'], dst: ['r', 'n'], zeroG: {} };

/** One plan for every expert (the job has one set of strides; pointers come per expert), or why not. */
export function planExperts(p: GroupedGemmProblem): FusedPlan | string {
  let first: FusedPlan | undefined;
  for (let i = 0; i < p.G; i++) {
    const e = p.experts[i];
    const plan = planFused(e.src.dataType, e.weights.dataType, e.dst.dataType, undefined, e.fusion, p.attr, ROLES, ['r', 'n']);
    if (typeof plan === 'string') return `expert ${i}: ${plan}`;
    if (!first) first = plan;
    else if (!samePlan(first, plan)) return `expert ${i}'s scales / zero points / binary inputs are laid out differently from expert 0's (per-expert scale granularity, attr.setExpertScales, or experts of different N: the kernels take one layout for all experts, rfcs/0002 section 6)`;
  }
  return first!;
}

/** Why the kernels cannot run the problem on this plan (planExperts', or the dynamic-quantization impl's integer plan). */
export function rejectWith(p: GroupedGemmProblem, plan: FusedPlan | string): string | undefined {
  if (p.experts.some((e) => e.weights.format === 'packed' && ![PACKED_P8, PACKED_X8, PACKED_X4, PACKED_X16].includes(e.weights.packed?.name ?? ''))) return 'unknown packed layout';
  // x16:p8 experts: the job has one weights data type, which plain and x16 experts' codes share.
  const coded = p.experts.filter((e) => e.weights.format !== 'packed' || isX16(e.weights));
  if (p.experts.some((e) => isX16(e.weights)) && coded.some((e) => e.weights.dataType !== coded[0].weights.dataType)) return `experts with ${PACKED_X16} weights must share their data type with every plain or ${PACKED_X16} expert`;
  if (p.experts.some((e) => isX16(e.weights) && (e.fusion.scales.weights || e.fusion.zeroPoints.weights))) return `${PACKED_X16} weights with weights scales / zero points (their tag.any layout is ${PACKED_P8})`;
  if (typeof plan === 'string') return plan;
  // x8 / x4 weights: the job has one weights data type (the decoder's), on the fused or integer path.
  if (p.experts.some((e) => lowpSuffix(e.weights))) {
    if (plan.path === PATH.f32) return 'x8 / x4 packed weights run on the fused f32 x low-precision or the integer path only';
    if (p.experts.some((e) => e.weights.dataType !== p.experts[0].weights.dataType || (e.weights.format === 'packed') !== !!lowpSuffix(e.weights))) return 'experts with x8 / x4 packed weights must all share that layout and data type';
    // One job reads the scales / zero points from every expert's panels, or from none.
    const emb = panelQuantKey(p.experts[0].weights.packed?.quant);
    // (dynamic quantization reads the weights scales from the attribute's memories, as matmul's :dq does: its panels keep the weight-only +q layout)
    if (emb && plan.path === PATH.int && (!p.attr.dynamicQuantization || p.experts[0].weights.packed?.quant?.zeroPoints)) return 'the integer path applies the weights\' scales / zero points at execution: x8 / x4 panels with embedded ones (+q) run on the f32 x low-precision kernels only';
    if (p.experts.some((e) => panelQuantKey(e.weights.packed?.quant) !== emb)) return 'experts must all embed their scales / zero points in the packed weights (x8 / x4 +q), or none';
    if (emb && emb !== panelQuantKey(panelQuantOf(p.experts[0].fusion))) return `the packed weights embed scales / zero points (${emb}) that the attribute's weights scales / zero points (${panelQuantKey(panelQuantOf(p.experts[0].fusion)) || 'none'}) do not match`;
  }
  if (plan.po.length > MAX_PO) return `more than ${MAX_PO} post-ops`;
  for (const e of p.experts) {
    const mds = [...Object.values(e.fusion.scales), ...Object.values(e.fusion.zeroPoints)].map((q) => q!.md);
    if (mds.some((md) => !md.hasRuntimeDims && !fits32(md))) return 'a scales / zero points memory is too large for 32-bit indexing';
  }
  return undefined;
}

/**
 * Proposal #3 on the matmul kernel core: the job's group mode is a pointer table (one record per
 * expert: buffers, K, N, strides, row capacity) plus the runtime-dims buffer, read by the workers.
 * Rebuilding the table on every execution is the host-side cost this proposal carries.
 */
export const wasmGroupedGemm: GroupedGemmImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe(engine, p) {
    return `wasm:${engine.isa}:${kernelName(planExperts(p), p.experts[0].weights)}`;
  },
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    // (wasm_grouped_gemm_dq.ts hands rejectWith its inner problem: the quantized s8 src)
    if (p.attr.dynamicQuantization) return 'dynamic quantization runs on wasm:dynamic-quant';
    return rejectWith(p, planExperts(p));
  },
  weightsLayout(e: Expert) {
    if (FLOAT_TYPES.includes(e.weights.dataType)) return floatWeightsLayout(e.weights.dims, e.weights.dataType, !!(e.fusion.scales.weights || e.fusion.zeroPoints.weights));
    // x8 / x4 codes for both paths; the f32 kernels' scales / zero points beside the panels (`+q`).
    if ([...X8_TYPES, ...X4_TYPES].includes(e.weights.dataType))
      return packedLowpWeightsDesc(e.weights.dims, e.weights.dataType, takesIntPath(e.src.dataType, e.weights.dataType, e.fusion, ROLES) ? undefined : panelQuantOf(e.fusion));
    const w = e.weights;
    return new MemoryDesc({ dims: w.dims, dataType: w.dataType, format: 'blocked', strides: tagToStrides('ab', w.dims, 'weights') });
  },
  createExecutor(p, engine) {
    return new GroupedGemmExecutor(p, engine);
  },
};


/**
 * Runtime dims against src/dst, then per-row values memories against M_i (the reference's checks and
 * messages). `M`: the rows already read and checked against src/dst (wasm_grouped_gemm_dq.ts).
 */
function checkRowValues(a: GroupedGemmArgs, binaryPositions: readonly number[], M = checkedRuntimeDims(a.runtimeDims.values as Int32Array, (i) => Math.min(rowCapacity(a.src[i]), rowCapacity(a.dst[i])))): void {
  const check = (m: Memory, name: string, i: number): void => {
    // (no rows fit any allocation: an empty expert's memories are not looked up)
    if (M[i] === 0 || !m.desc.hasRuntimeDims) return;
    const cap = rowCapacity(m);
    if (M[i] > cap) throw new DnnlError('invalid_arguments', `ARG.RUNTIME_DIMS[${i}] = ${M[i]} rows do not fit ${name} (${cap} rows fit)`);
  };
  for (const [base, tbl] of [[ARG.ATTR_SCALES, a.scales], [ARG.ATTR_ZERO_POINTS, a.zeroPoints]] as const) {
    for (const [arg, mems] of Object.entries(tbl) as [QuantArg, readonly (Memory | undefined)[]][]) mems.forEach((m, i) => m && check(m, argName(base | (EXPERT_QUANT_ARG_ID[arg] + i)), i));
  }
  a.binary.forEach((mems, j) => mems.forEach((m, i) => check(m, argName(ARG.ATTR_MULTIPLE_POST_OP(binaryPositions[j]) | (ARG.MULTIPLE_SRC + i)), i)));
}

/**
 * wasm_grouped_gemm_dq.ts's rows of one execution: `M` read and checked against each expert's src / dst
 * allocations; expert g's rows (M[g] of them) at `src[g]` and their per-row src scales at `srcScales[g]`,
 * in the executor's workspace, read instead of the caller's src memories.
 */
export interface OwnRows {
  readonly M: Int32Array;
  readonly src: Uint32Array;
  readonly srcScales: Uint32Array;
}

export class GroupedGemmExecutor {
  private readonly job: number;
  private readonly table: number;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;
  private readonly t32: Int32Array;
  private readonly t32u: Uint32Array;
  private readonly plan: FusedPlan;
  /** Per-expert pointer tables of the values memories: 6 scale / zero-point slots, then one per binary post-op. */
  private readonly ptrs: number;
  private readonly p32: Uint32Array;
  /** The table's records as far as the problem fixes them (K, N, strides, weights layout): copied in on every execution. */
  private readonly records: Int32Array;
  private readonly kcPacked: number;
  private readonly wcacheK: number;
  private readonly scratchBytes: number;
  private readonly dtWei: number;
  private readonly binaryPositions: readonly number[];

  /** `given`: the caller's plan (wasm_grouped_gemm_dq.ts: the integer path with K-block folding), else planExperts'. */
  constructor(private readonly p: GroupedGemmProblem, private readonly engine: Engine, given?: FusedPlan) {
    const plan = given ?? planExperts(p);
    if (typeof plan === 'string') throw new Error(`wasm grouped_gemm: ${plan}`);
    this.plan = plan;
    const slots = 6 + p.experts[0].fusion.binary.length;
    this.ptrs = engine.alloc(slots * p.G * 4);
    this.p32 = new Uint32Array(engine.buffer, this.ptrs, slots * p.G);
    this.job = engine.alloc(JOB.SIZE);
    this.table = engine.alloc(p.G * GROUP_REC.SIZE);
    this.i32 = new Int32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.f32 = new Float32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.t32 = new Int32Array(engine.buffer, this.table, (p.G * GROUP_REC.SIZE) / 4);
    this.t32u = new Uint32Array(engine.buffer, this.table, (p.G * GROUP_REC.SIZE) / 4);
    this.binaryPositions = p.experts[0].fusion.binary.map((b) => b.position);
    // Plain experts on the f32 fast path: each N-block is packed once, K whole, into a per-worker cache.
    const plainK = p.experts.reduce((m, e) => (e.weights.format === 'packed' ? m : Math.max(m, e.weights.dims[0])), 0);
    this.wcacheK = plan.path === PATH.f32 ? Math.min(plainK, KC_PACKED) : 0;
    this.kcPacked = p.experts.some((e) => e.weights.format === 'packed') ? KC_PACKED : this.wcacheK ? Math.max(KC, this.wcacheK + (this.wcacheK & 1)) : 0;
    this.scratchBytes = scratchBytes(p.G, MB, NB, KC, this.kcPacked, 0, this.wcacheK);
    // One dt_wei serves every plain expert (packed panels are always f32 and ignore it), so take it
    // from the first plain expert, not expert 0, which may be packed while the others are bf16/f16.
    const dt = (t: DataType): number => JOB_DT_ALL[t as keyof typeof JOB_DT_ALL];
    const plainWei = p.experts.find((e) => e.weights.format !== 'packed');
    const x16Wei = p.experts.find((e) => isX16(e.weights));
    this.dtWei = plainWei ? dt(plainWei.weights.dataType) : x16Wei ? dt(x16Wei.weights.dataType) : lowpSuffix(p.experts[0].weights) ? dt(p.experts[0].weights.dataType) : JOB_DT_ALL.f32;
    const R = GROUP_REC.SIZE / 4;
    this.records = new Int32Array(p.G * R);
    p.experts.forEach((e, g) => {
      const o = g * R, t = this.records;
      t[o + GROUP_REC.K / 4] = e.K;
      t[o + GROUP_REC.N / 4] = e.N;
      t[o + GROUP_REC.s_0 / 4] = e.src.strides[0];
      t[o + GROUP_REC.d_0 / 4] = e.dst.strides[0];
      const packed = e.weights.format === 'packed';
      t[o + GROUP_REC.w_k / 4] = packed ? 0 : e.weights.strides[0];
      t[o + GROUP_REC.w_n / 4] = packed ? 0 : e.weights.strides[1];
      const name = e.weights.packed?.name;
      t[o + GROUP_REC.wei_packed / 4] = !packed ? WEI_PACKED.plain : name === PACKED_X8 ? WEI_PACKED.x8_p8 : name === PACKED_X4 ? WEI_PACKED.x4_p8k2
        : name === PACKED_X16 ? WEI_PACKED.x16_p8 : WEI_PACKED.f32_p8;
    });
  }

  destroy(): void {
    for (const p of [this.ptrs, this.job, this.table]) this.engine.releaseBlock(p);
  }

  /** `own`: the rows and src scales wasm_grouped_gemm_dq.ts quantized into its workspace this execution. */
  task(a: GroupedGemmArgs, own?: OwnRows): () => void | Promise<void> {
    const eng = this.engine;
    // Per-row values memories (scales, zero points, binary src1 with runtime rows) must hold M_i rows:
    // the kernel only knows src/dst capacities, so all runtime dims are checked on the host first
    // (same rules, order and messages as the reference). (`own` src scales hold exactly M_i rows.)
    const perRow = [...Object.values(a.scales), ...Object.values(a.zeroPoints), ...a.binary].some((ms) => ms!.some((m) => m?.desc.hasRuntimeDims));
    const pre = (): void => {
      if (perRow) checkRowValues(a, this.binaryPositions, own?.M);
    };
    if (eng.pool) return () => {
      pre();
      return eng.pool!.run(() => this.fill(a, own)).then(() => this.checkStatus());
    };
    return () => {
      pre();
      eng.kernels!.run_job(this.fill(a, own), 0);
      this.checkStatus();
    };
  }

  private fill(a: GroupedGemmArgs, own: OwnRows | undefined): number {
    const { p, i32 } = this;
    const scratch = this.engine.scratch(this.scratchBytes);
    i32.fill(0);
    const set = (f: keyof typeof JOB, v: number): void => {
      i32[JOB[f] / 4] = v;
    };
    set('kind', JOB_KIND.grouped_m);
    set('group_mode', GROUP_MODE.pointers);
    set('G', p.G);
    set('mb', MB);
    set('nb', NB);
    set('kc', this.plan.path === PATH.int ? KC_INT : KC);
    set('kc_packed', this.kcPacked);
    set('wcache_k', this.wcacheK);
    set('scratch', scratch.ptr);
    set('scratch_stride', scratch.stride);
    set('offs', a.runtimeDims.handles[0]);
    set('groups', this.table);
    const e0 = p.experts[0];
    set('dt_src', JOB_DT_ALL[e0.src.dataType as keyof typeof JOB_DT_ALL]);
    set('dt_wei', this.dtWei);
    set('dt_dst', JOB_DT_ALL[e0.dst.dataType as keyof typeof JOB_DT_ALL]);
    if (this.plan.path === PATH.f32) writeEpilogue(i32, this.f32, p.attr);
    const G = p.G, slot = (qa: QuantArg, kind: 'scales' | 'zeroPoints'): number => (kind === 'scales' ? 0 : 3) + (qa === 'src' ? 0 : qa === 'weights' ? 1 : 2);
    writeFused(i32, this.f32, this.plan, e0.fusion, undefined,
      (kind, arg) => {
        const s = slot(arg, kind);
        if (own && s === 0) this.p32.set(own.srcScales, 0);
        else {
          const mems = a[kind][arg]!;
          // planExperts took one layout for every expert: each has this operand.
          for (let g = 0; g < G; g++) this.p32[s * G + g] = mems[g]!.handles[0];
        }
        return { ptr: this.ptrs + s * G * 4, table: true };
      },
      (i) => {
        const s = 6 + i;
        for (let g = 0; g < G; g++) this.p32[s * G + g] = a.binary[i][g].handles[0];
        return { ptr: this.ptrs + s * G * 4, table: true };
      }, e0.weights.packed?.quant);
    const R = GROUP_REC.SIZE / 4, t = this.t32u;
    this.t32.set(this.records);
    // The kernel checks each M_i against max_rows: none fit an empty expert (its allocations are not looked
    // up), exactly M_i the workspace rows of `own` (checked against src / dst already).
    const M = own?.M ?? (a.runtimeDims.values as Int32Array);
    for (let g = 0; g < G; g++) {
      const o = g * R;
      t[o + GROUP_REC.src / 4] = own ? own.src[g] : a.src[g].handles[0];
      t[o + GROUP_REC.wei / 4] = a.weights[g].handles[0];
      t[o + GROUP_REC.dst / 4] = a.dst[g].handles[0];
      t[o + GROUP_REC.max_rows / 4] = M[g] <= 0 ? 0 : own ? M[g] : Math.min(rowCapacity(a.src[g]), rowCapacity(a.dst[g]));
    }
    return this.job;
  }

  private checkStatus(): void {
    const code = this.i32[JOB.status / 4];
    if (code === JOB_ERR.none) return;
    throw runtimeDimsError(code, this.i32[JOB.err_index / 4], this.i32[JOB.err_a / 4], this.i32[JOB.err_b / 4]);
  }
}
