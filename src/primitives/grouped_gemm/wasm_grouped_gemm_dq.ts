/**
 * Dynamic int8 activations for weight-only experts (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`,
 * rfcs/0006) on Proposal #3: the same semantics and bits as matmul's `:dq` (wasm_dynamic_quant.ts) for
 * the same rows. One execution, in order on the workers:
 *   1. quant_rows_s8 (wasm/src/quant-rows-s8.c) with a table of runs: every expert's M_i src rows to s8,
 *      each with its own f32 scale, into a workspace the executor owns (expert after expert, dense rows of
 *      K_i bytes: P#1's layout; sized from the runtime M_i, which the host reads and checks first, with the
 *      kernel's rules and messages). A run is an expert's rows, or those of consecutive experts that follow
 *      one another in memory (expertViews of one buffer: one run). One job, one pool dispatch, as P#1's;
 *   2. the pointer-table GEMM (wasm_grouped_gemm.ts) on the integer path (s16-gemm-3x8-w8 / -w4), each
 *      expert's record pointing at its s8 rows, its row scales as per-row src scales: the kernels and the
 *      epilogue matmul `:dq` runs, so the results are bitwise those of Proposal #1.
 * The weights keep the weight-only layout (`x8:p8+q` / `x4:p8k2+q`), as matmul's.
 */
import { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import { DnnlError } from '../../common/status.js';
import { planFused, samePlan, type FusedPlan } from '../../kernels/fused_job.js';
import { FLOAT_TYPES, type QuantParam } from '../../attr/fusion.js';
import { OpJob, type OpStatus } from '../../kernels/op_job.js';
import { INT_WEIGHTS, dynamicIntPlan, relaxedDotSuffix, weightOnlyLayout } from '../matmul/wasm_dynamic_quant.js';
import { KIND_QUANT_ROWS_S8, QUANT_ROWS, SRC_DT } from '../../kernels/quant_rows_job.js';

/** quant_rows_s8 with runs (wasm/src/quant-rows-s8.c): the table of runs and their count; a run is 8 int32s. */
const QUANT_RUNS_JOB = { ...QUANT_ROWS, runs: 72, nruns: 76 } as const;
const RUN = { src: 0, dst: 1, scales: 2, rows: 3, cols: 4, src_ld: 5, dst_ld: 6, tile0: 7, INTS: 8 } as const;
import { kernelName } from '../matmul/wasm_matmul.js';
import type { GroupedGemmArgs, GroupedGemmImpl } from './impl_list.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { checkedRuntimeDims, rowCapacity } from './runtime_dims.js';
import { GroupedGemmExecutor, ROLES, rejectWith } from './wasm_grouped_gemm.js';
import { NOT_THIS_FEATURE } from '../pick_impl.js';
import { dqNonFiniteExpertRow } from '../matmul/dq_errors.js';

/** The per-row f32 scales of an expert's quantized rows, as the integer path reads src scales (one per row: [RUNTIME_DIM_VAL]). */
function rowScales(e: Expert): QuantParam {
  const md = new MemoryDesc({ dims: [e.src.dims[0]], dataType: 'f32', format: 'blocked', strides: [1] });
  return Object.freeze({ kind: 'scales', arg: 'src', mask: 1, groups: Object.freeze([]), dataType: 'f32', md, altMd: undefined, map: Object.freeze({ gStride: 0, strides: [1, 0], blocks: [1, 1] }) });
}

/** The expert the GEMM job runs: src is its s8 rows in the workspace (dense, K bytes a row), with row scales. */
function innerExpert(e: Expert): Expert {
  const src = new MemoryDesc({ dims: e.src.dims, dataType: 's8', format: 'blocked', strides: [e.K, 1] });
  return { ...e, src, fusion: Object.freeze({ ...e.fusion, scales: Object.freeze({ ...e.fusion.scales, src: rowScales(e) }) }) };
}

/** The GEMM after the quantization: every expert's src its s8 rows (dense), with per-row src scales (shared with webgpu:dynamic-quant). */
export function innerProblem(p: GroupedGemmProblem): GroupedGemmProblem {
  return { ...p, experts: p.experts.map(innerExpert) };
}

/** One integer plan for every expert (matmul `:dq`'s rules per expert: dynamicIntPlan), or why not. */
function planInner(q: GroupedGemmProblem): FusedPlan | string {
  let first: FusedPlan | undefined;
  for (let i = 0; i < q.G; i++) {
    const e = q.experts[i];
    const plan = dynamicIntPlan(planFused(e.src.dataType, e.weights.dataType, e.dst.dataType, undefined, e.fusion, q.attr, ROLES, ['r', 'n']), e.weights, e.fusion, e.N);
    if (typeof plan === 'string') return `expert ${i}: ${plan}`;
    if (!first) first = plan;
    else if (!samePlan(first, plan)) return `expert ${i}'s scales / zero points / binary inputs are laid out differently from expert 0's (per-expert scale granularity, attr.setExpertScales, or experts of different N: the kernels take one layout for all experts, rfcs/0002 section 6)`;
  }
  return first!;
}

export const wasmDynamicQuantGroupedGemm: GroupedGemmImpl = {
  name: 'wasm:dynamic-quant',
  describe(engine, p) {
    const plan = planInner(innerProblem(p));
    const w = p.experts[0].weights;
    return `wasm:${engine.isa}:${typeof plan === 'string' ? 'dynamic-s8' : `${kernelName(plan, w)}-dq8${relaxedDotSuffix(engine, w)}`}`;
  },
  reject(p, engine) {
    if (!p.attr.dynamicQuantization) return NOT_THIS_FEATURE;
    if (!engine.kernels) return 'the engine was created without kernels';
    const e0 = p.experts[0];
    if (!FLOAT_TYPES.includes(e0.src.dataType) || !INT_WEIGHTS.includes(e0.weights.dataType)) return `src ${e0.src.dataType} x weights ${e0.weights.dataType} (f32 / bf16 / f16 x s8 / u8 / s4 / u4 / f4_e2m1)`;
    const q = innerProblem(p.experts.some((e) => e.weights.format === 'any') ? { ...p, experts: p.experts.map((e) => (e.weights.format === 'any' ? { ...e, weights: weightOnlyLayout(e) } : e)) } : p);
    return rejectWith(q, planInner(q));
  },
  weightsLayout: weightOnlyLayout,
  createExecutor(p, engine) {
    return new DynamicQuantExecutor(p, engine);
  },
};

class DynamicQuantExecutor {
  private readonly inner: GroupedGemmProblem;
  private readonly gemm: GroupedGemmExecutor;
  private readonly quant: OpJob<typeof QUANT_RUNS_JOB>;
  /** The table of runs (one per expert at most). */
  private readonly runs: number;
  private readonly r32: Uint32Array;
  /** Per execution, expert g's s8 rows and their scales in the workspace (offsets, then addresses). */
  private readonly qOff: Uint32Array;
  private readonly sOff: Uint32Array;
  /** The workspace: every expert's s8 rows, then their f32 scales; grown to the rows of an execution. */
  private ws = 0;
  private wsBytes = 0;

  constructor(private readonly p: GroupedGemmProblem, private readonly engine: Engine) {
    this.inner = innerProblem(p);
    const plan = planInner(this.inner);
    if (typeof plan === 'string') throw new Error(`wasm dynamic quant grouped_gemm: ${plan}`);
    this.gemm = new GroupedGemmExecutor(this.inner, engine, plan);
    this.quant = new OpJob(engine, KIND_QUANT_ROWS_S8, QUANT_RUNS_JOB);
    this.runs = engine.alloc(p.G * RUN.INTS * 4);
    this.r32 = new Uint32Array(engine.buffer, this.runs, p.G * RUN.INTS);
    this.qOff = new Uint32Array(p.G);
    this.sOff = new Uint32Array(p.G);
  }

  destroy(): void {
    this.gemm.destroy();
    this.quant.free();
    this.engine.releaseBlock(this.runs);
    if (this.ws) this.engine.releaseBlock(this.ws);
  }

  task(a: GroupedGemmArgs): () => void | Promise<void> {
    const { p, engine } = this;
    return () => {
      // The rows of every expert, checked against its src / dst allocations with the kernel's rules and
      // messages (nothing is written when one is bad): the workspace is laid out from them.
      const M = checkedRuntimeDims(a.runtimeDims.values as Int32Array, (i) => Math.min(rowCapacity(a.src[i]), rowCapacity(a.dst[i])));
      // Dense rows expert after expert (P#1's layout of the same rows): expert g's s8 rows at qOff[g], its scales at sOff[g].
      const { qOff, sOff } = this;
      let qBytes = 0, sBytes = 0;
      for (let g = 0; g < p.G; g++) {
        qOff[g] = qBytes;
        sOff[g] = sBytes;
        qBytes += M[g] * p.experts[g].K;
        sBytes += M[g] * 4;
      }
      qBytes = Math.ceil(qBytes / 64) * 64;
      if (qBytes + sBytes > this.wsBytes) {
        // (the job before this one is done: the old block is free once the stream's work is)
        if (this.ws) engine.releaseBlock(this.ws);
        this.wsBytes = Math.max(qBytes + sBytes, 2 * this.wsBytes, 64);
        this.ws = engine.allocForWork(this.wsBytes);
      }
      const q0 = this.ws, s0 = this.ws + qBytes;
      // The GEMM reads each expert's M_i rows and row scales in the workspace (the executions of a stream run one after another).
      for (let g = 0; g < p.G; g++) {
        qOff[g] += q0;
        sOff[g] += s0;
      }
      const gemm = this.gemm.task(a, { M, src: qOff, srcScales: sOff });
      // Runs of experts whose rows follow one another in memory with the same K and row stride (expertViews of
      // one buffer: a single run); experts in buffers of their own, one run each.
      const runs: { g: number; last: number; rows: number }[] = [];
      for (let g = 0; g < p.G; g++) {
        if (M[g] === 0) continue;
        const r = runs[runs.length - 1], e = p.experts[g];
        if (r) {
          const f = p.experts[r.g], prev = p.experts[r.last];
          const esz = e.src.dataType === 'f32' ? 4 : 2;
          if (e.K === f.K && e.src.strides[0] === f.src.strides[0] && a.src[g].handles[0] === a.src[r.last].handles[0] + M[r.last] * prev.src.strides[0] * esz) {
            r.last = g;
            r.rows += M[g];
            continue;
          }
        }
        runs.push({ g, last: g, rows: M[g] });
      }
      if (runs.length === 0) return gemm();
      // One job over every run (8-row tiles numbered run after run), then the GEMM: two dispatches, as P#1's.
      const quant = this.quant.task(() => {
        const R = this.r32;
        let tile0 = 0;
        runs.forEach((u, k) => {
          const e = p.experts[u.g], o = k * RUN.INTS;
          R[o + RUN.src] = a.src[u.g].handles[0];
          R[o + RUN.dst] = qOff[u.g];
          R[o + RUN.scales] = sOff[u.g];
          R[o + RUN.rows] = u.rows;
          R[o + RUN.cols] = e.K;
          R[o + RUN.src_ld] = e.src.strides[0];
          R[o + RUN.dst_ld] = e.K;
          R[o + RUN.tile0] = tile0;
          tile0 += Math.ceil(u.rows / 8);
        });
        const j = this.quant;
        j.reset();
        j.set('src_dt', SRC_DT[p.experts[0].src.dataType]);
        j.set('runs', this.runs);
        j.set('nruns', runs.length);
      }, (s: OpStatus) => {
        if (s.code === 0) return;
        if (s.code === 102) {
          // row s.index of run s.a: the expert that holds it
          const { g, last } = runs[s.a];
          let h = g, row = s.index;
          while (h < last && row >= M[h]) row -= M[h++];
          throw dqNonFiniteExpertRow(h, row);
        }
        throw new DnnlError('runtime_error', `grouped_gemm: quantization kernel status ${s.code}`);
      });
      const r = quant();
      return r instanceof Promise ? r.then(gemm) : gemm();
    };
  }
}
