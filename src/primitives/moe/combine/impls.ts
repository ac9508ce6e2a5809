import { DnnlError } from '../../../common/status.js';
import { toStored } from '../../../common/data_type.js';
import { OpJob, type OpStatus } from '../../../kernels/op_job.js';
import type { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import { stateless, type Executor } from '../../../runtime/lifetime.js';
import type { CombineProblem } from './pd.js';
import { rowError } from './row_error.js';
import { webgpuCombine, type GpuCombineImpl } from './webgpu_combine.js';

export interface CombineArgs {
  readonly src: Memory;
  readonly rowOf: Memory;
  readonly weights: Memory | undefined;
  readonly dst: Memory;
}

export interface CombineImpl {
  readonly name: string;
  reject(p: CombineProblem, engine: Engine): string | undefined;
  task(p: CombineProblem, engine: Engine): Executor<CombineArgs>;
}

const ERR_ROW = 130;

const ref: CombineImpl = {
  name: 'ref:any',
  reject: () => undefined,
  task: (p) => stateless((a) => () => {
    const ro = a.rowOf.values as Int32Array;
    for (let i = 0; i < p.T * p.k; i++) if (ro[i] < -1 || (!p.scattered && ro[i] >= p.rows)) throw rowError(p, i, ro[i]);
    const y = a.src.values as Float32Array, w = a.weights?.values as Float32Array | undefined;
    const out = a.dst.values, dl = p.dst.strides[0];
    const acc = new Float32Array(p.N);
    for (let t = 0; t < p.T; t++) {
      acc.fill(0);
      for (let s = 0; s < p.k; s++) {
        const r = ro[t * p.k + s];
        if (r < 0) continue;
        const o = (p.scattered ? t * p.k + s : r) * p.srcLd;
        // f32 product, then f32 sum (Float32Array stores round each step), slot order.
        for (let n = 0; n < p.N; n++) acc[n] += p.weighted ? Math.fround(w![t * p.k + s] * y[o + n]) : y[o + n];
      }
      for (let n = 0; n < p.N; n++) out[t * dl + n] = p.dst.dataType === 'f32' ? acc[n] : toStored(p.dst.dataType, acc[n]);
    }
  }),
};

const COMBINE_JOB = { src: 32, row_of: 36, weights: 40, dst: 44, T: 48, k: 52, N: 56, src_ld: 60, dst_ld: 64, dst_dt: 68, scattered: 72, weighted: 76, rows: 80, SIZE: 96 } as const;
const KIND_MOE_COMBINE = 19;
const DT = { f32: 0, bf16: 1, f16: 2 } as const;

const wasm: CombineImpl = {
  name: 'wasm',
  reject: (_p, engine) => (engine.kernels ? undefined : 'the engine was created without kernels'),
  task: (p, engine) => {
    const job = new OpJob(engine, KIND_MOE_COMBINE, COMBINE_JOB);
    return { destroy: () => job.free(), run: (a) => job.task(() => {
      job.reset();
      job.set('src', a.src.handles[0]);
      job.set('row_of', a.rowOf.handles[0]);
      job.set('weights', a.weights ? a.weights.handles[0] : 0);
      job.set('dst', a.dst.handles[0]);
      job.set('T', p.T);
      job.set('k', p.k);
      job.set('N', p.N);
      job.set('src_ld', p.srcLd);
      job.set('dst_ld', p.dst.strides[0]);
      job.set('dst_dt', DT[p.dst.dataType as keyof typeof DT]);
      job.set('scattered', p.scattered ? 1 : 0);
      job.set('weighted', p.weighted ? 1 : 0);
      job.set('rows', p.rows);
    }, (s: OpStatus) => {
      if (s.code === ERR_ROW) throw rowError(p, s.index, s.a);
      if (s.code !== 0) throw new DnnlError('runtime_error', `moe.combine: kernel status ${s.code}`);
    }) };
  },
};

export const combineImplList: readonly CombineImpl[] = [wasm, ref];

/** The gpu engine's list. */
export const gpuCombineImplList: readonly GpuCombineImpl[] = [webgpuCombine];
