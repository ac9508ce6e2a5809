/**
 * Reorders into packed weights as one op job on the engine's workers (wasm/src/pack-weights.c, issue
 * 19): f32:p8 / f32:p8t, x8:p8, x4:p8k2, x16:p8 (their codes; a `+q` layout's scales / zero points are written
 * by the host beside them), and a plain byte copy, the streaming rate a packing is measured against.
 * The bytes are those of the single-threaded packers at any thread count (tiles own their bytes).
 */
import { DnnlError } from '../../common/status.js';
import type { Engine } from '../../runtime/engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import { OpJob, type OpStatus } from '../../kernels/op_job.js';

const KIND_PACK_WEIGHTS = 52;
const PACK_JOB = {
  src: 32, dst: 36, fmt: 40, dt: 44, G: 48, K: 52, N: 56, sg: 60, sk: 64, sn: 68, ps: 72,
  qsrc: 80, qoff: 84, qbytes: 88, qnkb: 92, qsg: 96, qsb: 100, qpad: 104, SIZE: 112,
} as const;

/** pack_job_t.fmt. */
export const PACK_FMT = { f32: 0, x8: 1, x4: 2, copy: 3, x16: 4 } as const;

/** What to pack: [G, K, N] weights with element strides (sg, sk, sn) from src into dst. */
export interface PackGeometry {
  readonly fmt: number;
  /** Source type code for f32 panels (job DT: 0 f32, 1 bf16, 2 f16); 0 otherwise. */
  readonly dt: number;
  readonly G: number;
  readonly K: number;
  readonly N: number;
  readonly sg: number;
  readonly sk: number;
  readonly sn: number;
  /** Bytes per x8 / x4 / x16 panel (the layout's stride); for a copy, the byte count. */
  readonly ps: number;
  /** `+q` per-column values of one byte size the job copies beside the panels (pack-weights.c pack_job_t). */
  readonly values?: { readonly src: number; readonly off: number; readonly bytes: number; readonly nkb: number; readonly sg: number; readonly sb: number; readonly pad: number };
}

/**
 * The stream task that runs one packing: the job struct lives for that run only (reorders hold no
 * engine memory between executions). `before` runs right before the job (host-side writes beside the
 * panels), `after` once every worker is done.
 */
export function packTask(engine: Engine, src: number, dst: number, geo: PackGeometry, before?: () => void, after?: () => void): StreamTask {
  return () => {
    const job = new OpJob(engine, KIND_PACK_WEIGHTS, PACK_JOB);
    const run = job.task(() => {
      job.reset();
      job.set('src', src);
      job.set('dst', dst);
      for (const f of ['fmt', 'dt', 'G', 'K', 'N', 'sg', 'sk', 'sn', 'ps'] as const) job.set(f, geo[f]);
      const v = geo.values;
      if (v) {
        job.set('qsrc', v.src);
        job.set('qoff', v.off);
        job.set('qbytes', v.bytes);
        job.set('qnkb', v.nkb);
        job.set('qsg', v.sg);
        job.set('qsb', v.sb);
        job.set('qpad', v.pad);
      }
      before?.();
    }, (s: OpStatus) => {
      job.free();
      if (s.code !== 0) throw new DnnlError('runtime_error', `reorder: packing kernel status ${s.code}`);
      after?.();
    });
    return run();
  };
}
