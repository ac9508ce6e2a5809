import { DnnlError } from '../../../common/status.js';
import { gluColumns, gluScalar } from '../../../attr/eltwise.js';
import type { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import { stateless, type Executor } from '../../../runtime/lifetime.js';
import { OpJob, type OpStatus } from '../../../kernels/op_job.js';
import type { StreamTask } from '../../../runtime/stream.js';
import type { ActivationProblem } from './pd.js';
import { offsError } from './offs_error.js';
import { ARG } from '../../args.js';
import { checkedBwdOffsets, rowsGrouping } from '../../matmul_backward/runtime_offsets.js';
import { webgpuActivation, type GpuActivationImpl } from './webgpu_activation.js';

export interface ActivationArgs {
  readonly src: Memory;
  readonly dst: Memory;
}

export interface ActivationImpl {
  readonly name: string;
  reject(p: ActivationProblem, engine: Engine): string | undefined;
  task(p: ActivationProblem, engine: Engine): Executor<ActivationArgs>;
}

const GLU_ALG = { glu_swiglu: 1, glu_geglu_erf: 2, glu_geglu_tanh: 3, glu_swiglu_oai: 4 } as const;
const GLU_LAYOUT = { halves: 0, interleaved: 1, blocks32: 2 } as const;

const FN = 'moe.activation.execute';

/**
 * Rows to process: all, or up to a grouped src's last offset. Grouped offsets are checked with the grouped
 * matmul's validator, rules, order and messages (offsets[0] = 0, non-decreasing, offsets[G] <= rows,
 * host-known group sizes, a grouped dst's own offsets equal to src's), at execute time, before any row is
 * touched.
 */
function rowCount(p: ActivationProblem, a: ActivationArgs): number {
  if (!p.grouped) return p.rows;
  const G = p.src.grouped!.groupCount;
  return checkedBwdOffsets(FN, rowsGrouping(G, p.rows, [a.src, ARG.SRC], p.dst.isGrouped ? [a.dst, ARG.DST] : undefined, undefined))[G];
}

/** Reference: the library's scalar GLU (float64 inside, rounded to f32 once). */
const ref: ActivationImpl = {
  name: 'ref:any',
  reject: () => undefined,
  task: (p) => stateless((a) => () => {
    const rows = rowCount(p, a);
    const x = a.src.values as Float32Array, y = a.dst.values as Float32Array;
    const [sl] = p.src.strides, [dl] = p.dst.strides;
    for (let r = 0; r < rows; r++) for (let j = 0; j < p.I; j++) {
      const [g, u] = gluColumns(p.layout, 2 * p.I, j);
      y[r * dl + j] = gluScalar(p.alg, x[r * sl + g], x[r * sl + u], p.alpha, p.limit);
    }
  }),
};

/** The host's offsets check (the grouped matmul's), then the job: the kernel itself checks only the last offset. */
function checkedFirst(p: ActivationProblem, a: ActivationArgs, run: StreamTask): StreamTask {
  if (!p.grouped) return run;
  return () => {
    rowCount(p, a);
    return run();
  };
}

const ACT_JOB = { src: 32, dst: 36, offs: 40, rows: 48, I: 52, src_ld: 56, dst_ld: 60, alg: 64, layout: 68, G: 72, alpha: 80, limit: 84, SIZE: 96 } as const;
const KIND_MOE_ACTIVATION = 51;

const wasm: ActivationImpl = {
  name: 'wasm',
  reject: (p, engine) => (!engine.kernels ? 'the engine was created without kernels' : p.rows * 2 * p.I > 0x7fffffff ? 'too large for 32-bit indexing' : undefined),
  task: (p, engine) => {
    const job = new OpJob(engine, KIND_MOE_ACTIVATION, ACT_JOB);
    return { destroy: () => job.free(), run: (a) => checkedFirst(p, a, job.task(() => {
      job.reset();
      job.set('src', a.src.handles[0]);
      job.set('dst', a.dst.handles[0]);
      job.set('offs', p.grouped ? a.src.handles[1] : 0);
      job.set('G', p.grouped ? p.src.grouped!.groupCount : 0);
      job.set('rows', p.rows);
      job.set('I', p.I);
      job.set('src_ld', p.src.strides[0]);
      job.set('dst_ld', p.dst.strides[0]);
      job.set('alg', GLU_ALG[p.alg]);
      job.set('layout', GLU_LAYOUT[p.layout]);
      job.setF32('alpha', p.alpha);
      job.setF32('limit', p.limit);
    }, (s: OpStatus) => {
      if (s.code === 0) return;
      // The kernel's own guard of the last offset (offsets changed after the host's check).
      if (s.code === 140) throw offsError(s.index, s.a, s.b);
      throw new DnnlError('runtime_error', `moe.activation: kernel status ${s.code}`);
    })) };
  },
};

export const activationImplList: readonly ActivationImpl[] = [wasm, ref];

/** The gpu engine's list. */
export const gpuActivationImplList: readonly GpuActivationImpl[] = [webgpuActivation];
