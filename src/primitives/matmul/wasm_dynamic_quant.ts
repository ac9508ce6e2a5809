/**
 * Dynamic int8 activations for weight-only matmuls (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`,
 * rfcs/0006): one execution is two jobs on the workers, in order:
 *   1. quant_rows_s8 (wasm/src/quant-rows-s8.c): every src row to s8 with its own scale, into a
 *      workspace the executor owns (s = amax / 127 in f32, q = RNE(x / s), |q| <= 127);
 *   2. the integer GEMM (s16-gemm-3x8-w8 / -w4, exact int32 sums) on those rows, with the row scales as
 *      per-row src scales; weights scales per column in the epilogue, or per K block folded into an f32
 *      tile block by block (wasm/src/gemm-fused.c fold_block).
 * The weights keep the weight-only layout (`x8:p8+q` / `x4:p8k2+q`): the same reorder serves the exact
 * weight-only path and this one, so the accuracy choice is a pd attribute, not a re-pack.
 */
import { tagToStrides } from '../../memory/format_tag.js';
import { MemoryDesc } from '../../memory/desc.js';
import { packedLowpWeightsDesc, PACKED_X4, X4_TYPES, X8_TYPES } from '../../memory/packed_weights.js';
import type { Engine } from '../../runtime/engine.js';
import { DnnlError } from '../../common/status.js';
import { PATH, Q } from '../../kernels/job_layout.js';
import { panelQuantOf, planFused, type FusedPlan } from '../../kernels/fused_job.js';
import { FLOAT_TYPES, type Fusion, type QuantParam } from '../../attr/fusion.js';
import { OpJob, type OpStatus } from '../../kernels/op_job.js';
import { KIND_QUANT_ROWS_S8, QUANT_ROWS, SRC_DT } from '../../kernels/quant_rows_job.js';
import type { MatmulArgs, MatmulExecutor, MatmulImpl } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { dqNonFiniteRow, dqOffsetsError } from './dq_errors.js';
import { WasmMatmulExecutor, kernelName, type WorkspaceSrc, lowpSuffix, matmulRoles, wasmMatmul } from './wasm_matmul.js';
import { NOT_THIS_FEATURE } from '../pick_impl.js';

/** Weights the integer kernels take: the integer types, and f4_e2m1 as the integers 2 v (exact in [-12, 12]
 * for every e2m1 value; the kernels put the 0.5 into the weights scales as they stage them, exactly). */
export const INT_WEIGHTS: readonly string[] = [...X8_TYPES, ...X4_TYPES].filter((t) => ['s8', 'u8', 's4', 'u4', 'f4_e2m1'].includes(t));


/** Rows of src the GEMM may read (all of them are quantized): tokens with a gather, else src's rows. */
export function srcRows(p: MatmulProblem): number {
  return p.src.dims.slice(0, -1).reduce((a, b) => a * b, 1);
}

/** The per-row f32 scales of the quantized src, as the integer path reads src scales. */
function rowScales(p: MatmulProblem): QuantParam {
  const nd = p.src.ndims, rows = srcRows(p);
  // The map is over src's logical dims: [row, k] (grouped, 2D dense) or [b, m, k] (batched dense).
  const strides = p.kind === 'grouped_m' || nd === 2 ? [1, 0] : [p.src.dims[1], 1, 0];
  const mask = p.kind === 'grouped_m' || nd === 2 ? 1 : 3;
  const md = new MemoryDesc({ dims: [rows], dataType: 'f32', format: 'blocked', strides: [1] });
  return Object.freeze({ kind: 'scales', arg: 'src', mask, groups: Object.freeze([]), dataType: 'f32', md, altMd: undefined, map: Object.freeze({ gStride: 0, strides, blocks: strides.map(() => 1) }) });
}

/** The problem the GEMM job runs: src is the s8 workspace (dense rows, same grouping), with row scales (the
 * gpu's `:dq` runs the same problem: webgpu_dynamic_quant.ts). */
export function innerProblem(p: MatmulProblem): MatmulProblem {
  const t = 'abcdefghijkl'.slice(0, p.src.ndims);
  const src = new MemoryDesc({ dims: p.src.dims, dataType: 's8', format: p.src.isGrouped ? 'grouped' : 'blocked', strides: tagToStrides(t, p.src.dims, 'src'), grouped: p.src.grouped });
  return { ...p, src, fusion: Object.freeze({ ...p.fusion, scales: Object.freeze({ ...p.fusion.scales, src: rowScales(p) }) }) };
}

/** The integer plan of the inner problem, or why there is none. K-block weights scales take the integer
 * path too (folded per block), when the weights are read in place and no zero point is involved; so do
 * f4_e2m1 weights (the job's integer path reads their codes as 2 v: wasm/src/lowp.h f4e2m1_x2). */
function planInner(q: MatmulProblem): FusedPlan | string {
  const { roles, binary } = matmulRoles(q);
  return dynamicIntPlan(planFused(q.src.dataType, q.weights.dataType, q.dst.dataType, q.bias?.dataType, q.fusion, q.attr, roles, binary), q.weights, q.fusion, q.N);
}

/** The integer plan of a quantized-src problem from its fused plan (shared with grouped_gemm, Proposal #3): see planInner. */
export function dynamicIntPlan(plan: FusedPlan | string, weights: MemoryDesc, fusion: Fusion, N: number): FusedPlan | string {
  if (typeof plan === 'string' || plan.path === PATH.int) return plan;
  const fp4 = weights.dataType === 'f4_e2m1';
  const ws = plan.q[Q.wei_scale];
  if (!fp4 && (!ws || ws.st_k === 0)) return 'the integer path cannot run this problem';
  if ([Q.src_zp, Q.wei_zp].some((i) => plan.q[i])) return fp4 ? 'f4_e2m1 weights with zero points' : 'K-block weights scales with zero points';
  if (!ws || ws.st_k === 0) return { ...plan, path: PATH.int };
  if (ws.blk_k % 2 !== 0) return `weights scales in K blocks of ${ws.blk_k} (the integer kernels take k in pairs: blocks must be even)`;
  if (!lowpSuffix(weights)) return 'K-block weights scales need the weights packed (tag.any): plain ones are packed per tile into the room the folding uses';
  const glu = fusion.glu;
  if (glu && glu.layout === 'halves' && (N / 2) % 8 !== 0) return 'K-block weights scales with GLU halves that do not split on an 8-column panel (N / 2 % 8 != 0)';
  return { ...plan, path: PATH.int };
}

/** The relaxed dots the `:dq` decode tiles of these packed weights run on, for implInfo: `+rd16`, the 1-2 row tiles of s4 / u4 /
 * f4_e2m1 codes on i16x8.relaxed_dot_i8x16_i7x16_s (wherever relaxed SIMD is native and the kernel probes exact; s8 src), and `+rdot`,
 * the 1-row x4 tiles the int16 kernels cannot take on i32x4.relaxed_dot_i8x16_i7x16_add_s (opt-in: Engine relaxedDot). */
export function relaxedDotSuffix(engine: Engine, weights: MemoryDesc): string {
  if (weights.packed?.name !== PACKED_X4) return '';
  const rd16 = ['s4', 'u4', 'f4_e2m1'].includes(weights.dataType) && engine.kernels?.relaxed_dot16_ok() === 1 ? '+rd16' : '';
  return rd16 + (engine.kernels?.relaxed_dot_ok() === 1 ? '+rdot' : '');
}

/** The weight-only layout: codes with their scales beside the panels, as the f32 x low-precision path stores them
 * (grouped_gemm `:dq` picks it per expert too). */
export function weightOnlyLayout(p: Pick<MatmulProblem, 'weights' | 'fusion'>): MemoryDesc {
  return packedLowpWeightsDesc(p.weights.dims, p.weights.dataType, panelQuantOf(p.fusion));
}

export const wasmDynamicQuantMatmul: MatmulImpl = {
  name: 'wasm:dynamic-quant',
  describe(engine, p) {
    const plan = planInner(innerProblem(p));
    return `wasm:${engine.isa}:${typeof plan === 'string' ? 'dynamic-s8' : `${kernelName(plan, p.weights)}-dq8${relaxedDotSuffix(engine, p.weights)}`}`;
  },
  reject(p, engine) {
    if (!p.attr.dynamicQuantization) return NOT_THIS_FEATURE;
    if (!engine.kernels) return 'the engine was created without kernels';
    if (p.kind === 'grouped_k') return 'variable-K matmuls';
    if (!FLOAT_TYPES.includes(p.src.dataType) || !INT_WEIGHTS.includes(p.weights.dataType)) return `src ${p.src.dataType} x weights ${p.weights.dataType} (f32 / bf16 / f16 x s8 / u8 / s4 / u4 / f4_e2m1)`;
    if (p.src.format !== 'any' && p.src.strides[p.src.ndims - 1] !== 1) return 'src rows must be contiguous';
    if (srcRows(p) * Math.max(p.K, 1) > 0x7fffffff) return 'src too large for 32-bit indexing';
    const q = innerProblem(p.weights.format === 'any' ? { ...p, weights: weightOnlyLayout(p) } : p);
    const plan = planInner(q);
    if (typeof plan === 'string') return plan;
    return wasmMatmul.reject(q, engine);
  },
  weightsLayout: weightOnlyLayout,
  createExecutor(p, engine) {
    return new DynamicQuantExecutor(p, engine);
  },
};

class DynamicQuantExecutor implements MatmulExecutor {
  private readonly p: MatmulProblem;
  private readonly engine: Engine;
  private readonly gemm: WasmMatmulExecutor;
  private readonly quant: OpJob<typeof QUANT_ROWS>;
  private readonly q: number;
  private readonly s: number;
  private readonly rows: number;
  private readonly own: WorkspaceSrc;

  constructor(p: MatmulProblem, engine: Engine) {
    this.p = p;
    this.engine = engine;
    const inner = innerProblem(p);
    const plan = planInner(inner);
    if (typeof plan === 'string') throw new Error(`wasm dynamic quant matmul: ${plan}`);
    this.gemm = new WasmMatmulExecutor(inner, engine, plan);
    this.quant = new OpJob(engine, KIND_QUANT_ROWS_S8, QUANT_ROWS);
    this.rows = srcRows(p);
    this.q = engine.alloc(Math.max(this.rows * p.K, 16));
    this.s = engine.alloc(Math.max(this.rows * 4, 16));
    this.own = { src: this.q, srcScales: this.s };
  }

  destroy(): void {
    this.gemm.destroy();
    this.quant.free();
    this.engine.releaseBlock(this.q);
    this.engine.releaseBlock(this.s);
  }

  task(a: MatmulArgs): () => void | Promise<void> {
    const p = this.p, G = p.G;
    // Rows past the last offset of a grouped src (P#1) or of the P#2 offsets are not the GEMM's: not read.
    const offs = p.offsetsFrom === 'attr' && !p.moe.gather ? a.offsets!.handles[0] : p.kind === 'grouped_m' && p.src.isGrouped ? a.src.handles[1] : 0;
    const quant = this.quant.task(() => {
      const j = this.quant;
      j.reset();
      j.set('src', a.src.handles[0]);
      j.set('dst', this.q);
      j.set('scales', this.s);
      j.set('offs', offs);
      j.set('G', offs ? G : 0);
      j.set('rows', this.rows);
      j.set('cols', p.K);
      j.set('src_ld', p.src.strides[p.src.ndims - 2] ?? p.K);
      j.set('dst_ld', p.K);
      j.set('src_dt', SRC_DT[p.src.dataType]);
    }, (s: OpStatus) => {
      if (s.code === 0) return;
      if (s.code === 101) throw dqOffsetsError(s.index, s.a, s.b);
      if (s.code === 102) throw dqNonFiniteRow(s.index);
      throw new DnnlError('runtime_error', `matmul: quantization kernel status ${s.code}`);
    });
    // The GEMM reads the workspace's rows and row scales (offsets and the rest: the caller's memories).
    const gemm = this.gemm.task(a, this.own);
    return () => {
      const r = quant();
      return r instanceof Promise ? r.then(gemm) : gemm();
    };
  }
}
