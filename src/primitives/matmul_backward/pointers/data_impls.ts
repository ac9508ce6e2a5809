import { makeView, type ValuesView } from '../../../common/data_type.js';
import { DnnlError } from '../../../common/status.js';
import { elementReader } from '../../../attr/fusion.js';
import { GROUP_MODE, GROUP_REC, WEI_PACKED } from '../../../kernels/job_layout.js';
import type { Memory } from '../../../memory/memory.js';
import { plainDesc, type MemoryDesc } from '../../../memory/desc.js';
import { PACKED_P8T, packedTransposedWeightsDesc } from '../../../memory/packed_weights.js';
import type { Engine } from '../../../runtime/engine.js';
import { stateless } from '../../../runtime/lifetime.js';
import type { StreamTask } from '../../../runtime/stream.js';
import { elementWriter } from '../../matmul/ref_matmul.js';
import { DIMS_ERR, rowCapacity, runtimeDimsError } from '../../grouped_gemm/runtime_dims.js';
import type { BwdImpl } from '../impl.js';
import { KC_PACKED, gemmJob, jobDt, setTiles } from '../jobs.js';

const FN = 'grouped_gemm_backward_data.execute';

/** Expert i of the P#3 backward data: diff_src_i = diff_dst_i x W_i^T. */
export interface P3DataExpert {
  readonly K: number;
  readonly N: number;
  readonly diffSrc: MemoryDesc;
  /** `[K_i, N_i]`: plain (any strides) or `f32:p8t`. */
  readonly weights: MemoryDesc;
  readonly diffDst: MemoryDesc;
}

export interface P3DataProblem {
  readonly G: number;
  readonly experts: readonly P3DataExpert[];
  readonly runtimeDims: MemoryDesc;
}

export interface P3DataArgs {
  readonly diffDst: readonly Memory[];
  readonly weights: readonly Memory[];
  readonly diffSrc: readonly Memory[];
  readonly runtimeDims: Memory;
}

export interface P3DataImpl extends BwdImpl<P3DataProblem, P3DataArgs> {
  /** What `tag.any` weights of an expert resolve to. */
  weightsLayout(e: P3DataExpert): MemoryDesc;
}

const capacity = (a: P3DataArgs, i: number): number => Math.min(rowCapacity(a.diffDst[i]), rowCapacity(a.diffSrc[i]));

const dimsError = (code: number, i: number, x: number, y: number): DnnlError => runtimeDimsError(code, i, x, y, FN, 'diff_dst / diff_src');

/**
 * The kernel: the forward's pointer-table job (variable M) with A = diff_dst_i, B = W_i^T (`f32:p8t`
 * panels, or W_i's strides swapped) and C = diff_src_i; rows checked against both row allocations
 * before anything is written.
 */
const wasm: P3DataImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe: (engine, p) => `wasm:${engine.isa}:f32-gemm-4x8${p.experts.some((e) => e.weights.format === 'packed') ? ':p8t' : ''}`,
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    if (p.experts.some((e) => e.weights.format === 'packed' && e.weights.packed?.name !== PACKED_P8T)) return `packed weights other than ${PACKED_P8T}`;
    return undefined;
  },
  weightsLayout: (e) => packedTransposedWeightsDesc(e.weights.dims),
  executor(p: P3DataProblem, engine: Engine) {
    const job = gemmJob(engine, 'grouped_m');
    const table = engine.alloc(p.G * GROUP_REC.SIZE);
    const R = GROUP_REC.SIZE / 4;
    const anyPacked = p.experts.some((e) => e.weights.format === 'packed');
    const plainWei = p.experts.find((e) => e.weights.format !== 'packed');
    const fill = (a: P3DataArgs): void => {
      const t32 = new Int32Array(engine.buffer, table, p.G * R), t32u = new Uint32Array(engine.buffer, table, p.G * R);
      job.reset();
      job.set('group_mode', GROUP_MODE.pointers);
      job.set('G', p.G);
      setTiles(job, engine, p.G, anyPacked ? KC_PACKED : 0);
      job.set('offs', a.runtimeDims.handles[0]);
      job.set('groups', table);
      job.set('dt_src', jobDt(p.experts[0].diffDst.dataType));
      // One dt for every plain expert's weights (packed panels are f32 and ignore it).
      job.set('dt_wei', jobDt(plainWei ? plainWei.weights.dataType : 'f32'));
      job.set('dt_dst', jobDt(p.experts[0].diffSrc.dataType));
      p.experts.forEach((e, g) => {
        const o = g * R, packed = e.weights.format === 'packed';
        t32u[o + GROUP_REC.src / 4] = a.diffDst[g].handles[0];
        t32u[o + GROUP_REC.wei / 4] = a.weights[g].handles[0];
        t32u[o + GROUP_REC.dst / 4] = a.diffSrc[g].handles[0];
        t32u[o + GROUP_REC.max_rows / 4] = capacity(a, g);
        t32[o + GROUP_REC.K / 4] = e.N;
        t32[o + GROUP_REC.N / 4] = e.K;
        t32[o + GROUP_REC.s_0 / 4] = e.diffDst.strides[0];
        t32[o + GROUP_REC.d_0 / 4] = e.diffSrc.strides[0];
        // B(k', n') = W_i[n'][k']: W's column stride walks the contraction.
        t32[o + GROUP_REC.w_k / 4] = packed ? 0 : e.weights.strides[1];
        t32[o + GROUP_REC.w_n / 4] = packed ? 0 : e.weights.strides[0];
        t32[o + GROUP_REC.wei_packed / 4] = packed ? WEI_PACKED.f32_p8 : WEI_PACKED.plain;
      });
    };
    return {
      destroy: () => {
        job.free();
        engine.releaseBlock(table);
      },
      run: (a: P3DataArgs): StreamTask => job.task(() => fill(a), (s) => {
        if (s.code !== 0) throw dimsError(s.code, s.index, s.a, s.b);
      }),
    };
  },
};

function rowsView(m: Memory, rows: number): ValuesView {
  const md = m.desc;
  const n = rows === 0 ? 0 : (rows - 1) * md.strides[0] + md.dims[1];
  return makeView(md.dataType, m.engine.buffer, m.handles[0], n);
}

/** The reference: f32 products and sums per expert, after the kernel's runtime-dims checks. */
const ref: P3DataImpl = {
  name: 'ref:any',
  describe: () => 'ref:any',
  reject: (p) => (p.experts.some((e) => e.weights.format === 'packed') ? 'packed weights are read only by the wasm kernels' : undefined),
  weightsLayout: (e) => plainDesc(e.weights.dims, e.weights.dataType, 'ab'),
  executor: (p) => stateless((a) => () => {
    const M = Int32Array.from(a.runtimeDims.values as Int32Array);
    for (let i = 0; i < p.G; i++) {
      if (M[i] < 0) throw dimsError(DIMS_ERR.negative, i, M[i], 0);
      const cap = capacity(a, i);
      if (M[i] > cap) throw dimsError(DIMS_ERR.capacity, i, M[i], cap);
    }
    const f = Math.fround;
    p.experts.forEach((e, g) => {
      const dy = elementReader(e.diffDst.dataType, rowsView(a.diffDst[g], M[g])), w = elementReader(e.weights.dataType, a.weights[g].values);
      const out = elementWriter(e.diffSrc.dataType, rowsView(a.diffSrc[g], M[g]));
      const ds = e.diffDst.strides[0], xs = e.diffSrc.strides[0], [wk, wn] = e.weights.strides;
      for (let r = 0; r < M[g]; r++)
        for (let k = 0; k < e.K; k++) {
          let acc = 0;
          for (let n = 0; n < e.N; n++) acc = f(acc + f(dy(r * ds + n) * w(k * wk + n * wn)));
          out(r * xs + k, acc);
        }
    });
  }),
};

export const p3DataImplList: readonly P3DataImpl[] = [wasm, ref];
