import { makeView, type ValuesView } from '../../../common/data_type.js';
import { DnnlError } from '../../../common/status.js';
import { elementReader } from '../../../attr/fusion.js';
import { GROUP_MODE, GROUP_REC } from '../../../kernels/job_layout.js';
import type { Memory } from '../../../memory/memory.js';
import type { MemoryDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import { stateless } from '../../../runtime/lifetime.js';
import type { StreamTask } from '../../../runtime/stream.js';
import { elementWriter } from '../../matmul/ref_matmul.js';
import { DIMS_ERR, rowCapacity, runtimeDimsError } from '../../grouped_gemm/runtime_dims.js';
import type { BwdImpl } from '../impl.js';
import { BIAS_JOB, KIND_MATMUL_BWD_BIAS, NB_WEIGHTS, chain, gemmJob, jobDt, setTiles } from '../jobs.js';
import { OpJob } from '../../../kernels/op_job.js';

const FN = 'grouped_gemm_backward_weights.execute';

export interface P3Expert {
  readonly K: number;
  readonly N: number;
  readonly src: MemoryDesc;
  readonly diffWeights: MemoryDesc;
  readonly diffDst: MemoryDesc;
}

export interface P3WeightsProblem {
  readonly G: number;
  readonly experts: readonly P3Expert[];
  readonly runtimeDims: MemoryDesc;
  /** `[G, N]`: row i is expert i's bias gradient; undefined without one. */
  readonly diffBias: MemoryDesc | undefined;
}

export interface P3WeightsArgs {
  readonly src: readonly Memory[];
  readonly diffDst: readonly Memory[];
  readonly diffWeights: readonly Memory[];
  readonly diffBias: Memory | undefined;
  readonly runtimeDims: Memory;
}

export type P3WeightsImpl = BwdImpl<P3WeightsProblem, P3WeightsArgs>;

/** Rows that fit both of expert i's row tensors (the kernel checks the runtime dims against it). */
const capacity = (a: P3WeightsArgs, i: number): number => Math.min(rowCapacity(a.src[i]), rowCapacity(a.diffDst[i]));

const dimsError = (code: number, i: number, x: number, y: number): DnnlError => runtimeDimsError(code, i, x, y, FN, 'src / diff_dst');

/**
 * The kernel: a variable-K GEMM job in pointer-table mode (gemm-driver.c view_group): expert i's
 * record gives its src (A = src_i^T), diff_dst (B) and diff_weights (C) buffers, and its runtime rows
 * are the contraction length. Rows are checked against every allocation before anything is written.
 */
const wasm: P3WeightsImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe: (engine) => `wasm:${engine.isa}:f32-gemm-4x8`,
  reject: (_p, engine) => (engine.kernels ? undefined : 'the engine was created without kernels'),
  executor(p: P3WeightsProblem, engine: Engine) {
    const job = gemmJob(engine, 'grouped_k');
    const table = engine.alloc(p.G * GROUP_REC.SIZE);
    const R = GROUP_REC.SIZE / 4;
    const fill = (a: P3WeightsArgs): void => {
      const t32 = new Int32Array(engine.buffer, table, p.G * R), t32u = new Uint32Array(engine.buffer, table, p.G * R);
      job.reset();
      job.set('group_mode', GROUP_MODE.pointers);
      job.set('G', p.G);
      setTiles(job, engine, p.G, 0, NB_WEIGHTS);
      job.set('offs', a.runtimeDims.handles[0]);
      job.set('groups', table);
      const e0 = p.experts[0];
      job.set('dt_src', jobDt(e0.src.dataType));
      job.set('dt_wei', jobDt(e0.diffDst.dataType));
      job.set('dt_dst', jobDt(e0.diffWeights.dataType));
      p.experts.forEach((e, g) => {
        const o = g * R;
        t32u[o + GROUP_REC.src / 4] = a.src[g].handles[0];
        t32u[o + GROUP_REC.wei / 4] = a.diffDst[g].handles[0];
        t32u[o + GROUP_REC.dst / 4] = a.diffWeights[g].handles[0];
        t32u[o + GROUP_REC.max_rows / 4] = capacity(a, g);
        t32[o + GROUP_REC.K / 4] = e.K;
        t32[o + GROUP_REC.N / 4] = e.N;
        t32[o + GROUP_REC.s_0 / 4] = e.src.strides[0];
        t32[o + GROUP_REC.d_0 / 4] = e.diffWeights.strides[0];
        t32[o + GROUP_REC.w_k / 4] = e.diffDst.strides[0];
        t32[o + GROUP_REC.w_n / 4] = 1;
        t32[o + GROUP_REC.wei_packed / 4] = 0;
      });
    };
    // The bias op job reads each expert's diff_dst through the GEMM's pointer table (same rows).
    const bias = p.diffBias ? new OpJob(engine, KIND_MATMUL_BWD_BIAS, BIAS_JOB) : undefined;
    const biasTask = (a: P3WeightsArgs): StreamTask => bias!.task(() => {
      const b = p.diffBias!;
      bias!.reset();
      bias!.set('offs', a.runtimeDims.handles[0]);
      bias!.set('groups', table);
      bias!.set('dbias', a.diffBias!.handles[0]);
      bias!.set('G', p.G);
      bias!.set('N', p.experts[0].N);
      bias!.set('dt_ddst', jobDt(p.experts[0].diffDst.dataType));
      bias!.set('dt_dbias', jobDt(b.dataType));
      bias!.set('b_g', b.strides[0]);
      bias!.set('b_n', b.strides[1]);
    }, (s) => {
      if (s.code !== 0) throw dimsError(s.code, s.index, s.a, s.b);
    });
    const gemm = (a: P3WeightsArgs): StreamTask => job.task(() => fill(a), (s) => {
      if (s.code !== 0) throw dimsError(s.code, s.index, s.a, s.b);
    });
    return {
      destroy: () => {
        job.free();
        bias?.free();
        engine.releaseBlock(table);
      },
      run: (a: P3WeightsArgs): StreamTask => (bias && a.diffBias ? chain(gemm(a), biasTask(a)) : gemm(a)),
    };
  },
};

/** The first `rows` rows of a runtime-rows memory. */
function rowsView(m: Memory, rows: number): ValuesView {
  const md = m.desc;
  const n = rows === 0 ? 0 : (rows - 1) * md.strides[0] + md.dims[1];
  return makeView(md.dataType, m.engine.buffer, m.handles[0], n);
}

/** The reference: f32 products and sums per expert, after the same runtime-dims checks. */
const ref: P3WeightsImpl = {
  name: 'ref:any',
  describe: () => 'ref:any',
  reject: () => undefined,
  executor: (p) => stateless((a) => () => {
    // The kernel's rules and order (gemm-driver.c load_groups): non-negative, within both allocations.
    const M = Int32Array.from(a.runtimeDims.values as Int32Array);
    for (let i = 0; i < p.G; i++) {
      if (M[i] < 0) throw dimsError(DIMS_ERR.negative, i, M[i], 0);
      const cap = capacity(a, i);
      if (M[i] > cap) throw dimsError(DIMS_ERR.capacity, i, M[i], cap);
    }
    const f = Math.fround;
    p.experts.forEach((e, g) => {
      const x = elementReader(e.src.dataType, rowsView(a.src[g], M[g])), dy = elementReader(e.diffDst.dataType, rowsView(a.diffDst[g], M[g]));
      const out = elementWriter(e.diffWeights.dataType, a.diffWeights[g].values);
      const xs = e.src.strides[0], ds = e.diffDst.strides[0], ws = e.diffWeights.strides[0];
      for (let k = 0; k < e.K; k++)
        for (let n = 0; n < e.N; n++) {
          let acc = 0;
          for (let r = 0; r < M[g]; r++) acc = f(acc + f(x(r * xs + k) * dy(r * ds + n)));
          out(k * ws + n, acc);
        }
    });
    if (!p.diffBias || !a.diffBias) return;
    const b = elementWriter(p.diffBias.dataType, a.diffBias.values), [bg, bn] = p.diffBias.strides;
    p.experts.forEach((e, g) => {
      const dy = elementReader(e.diffDst.dataType, rowsView(a.diffDst[g], M[g])), ds = e.diffDst.strides[0];
      for (let n = 0; n < e.N; n++) {
        let acc = 0;
        for (let r = 0; r < M[g]; r++) acc = f(acc + dy(r * ds + n));
        b(g * bg + n * bn, acc);
      }
    });
  }),
};

export const p3WeightsImplList: readonly P3WeightsImpl[] = [wasm, ref];
