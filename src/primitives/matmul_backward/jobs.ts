import { OpJob, type OpStatus } from '../../kernels/op_job.js';
import { JOB, JOB_DT_ALL, JOB_KIND, scratchBytes } from '../../kernels/job_layout.js';
import { TILE } from '../../kernels/tile_geometry.js';
import type { DataType } from '../../common/data_type.js';
import type { Engine } from '../../runtime/engine.js';
import type { StreamTask } from '../../runtime/stream.js';

/**
 * The backward's wasm jobs. The GEMMs are ordinary `job_t` GEMM jobs (wasm/src/job.h) on the
 * forward's tile scheduler and microkernel: backward data is a variable-M job whose B operand is W^T
 * (packed `f32:p8t` panels, or W's strides swapped), backward weights a variable-K job whose A operand
 * is src^T (src's strides swapped; the driver packs it with one v128 copy per k). The bias gradient is
 * a small op job (KIND_MATMUL_BWD_BIAS, wasm/src/matmul-bwd-bias.c).
 */
export const { MB, NB, KC, KC_PACKED } = TILE;

/**
 * N block of the variable-K (weight-gradient) jobs: wider than the forward's 128 so each micro-row's
 * stores run 2 KiB before the next row (the B block, at most KC x 528 f32 = 540 KiB, stays in L2).
 */
export const NB_WEIGHTS = 512;

export const jobDt = (t: DataType): number => JOB_DT_ALL[t as keyof typeof JOB_DT_ALL];

/** A GEMM job struct (`job_t`) driven through the op-job plumbing: same head, same run_job entry. */
export function gemmJob(engine: Engine, kind: 'grouped_m' | 'grouped_k'): OpJob<typeof JOB> {
  return new OpJob(engine, JOB_KIND[kind], JOB);
}

/** Fields every GEMM job of the backward sets: tile geometry and this execution's scratch. */
export function setTiles(job: OpJob<typeof JOB>, engine: Engine, G: number, kcPacked: number, nb: number = NB): void {
  const scratch = engine.scratch(scratchBytes(G, MB, nb, KC, kcPacked));
  job.set('mb', MB);
  job.set('nb', nb);
  job.set('kc', KC);
  job.set('kc_packed', kcPacked);
  job.set('scratch', scratch.ptr);
  job.set('scratch_stride', scratch.stride);
}

/** Byte offsets of `bwd_bias_job_t` (wasm/src/matmul-bwd-bias.c). */
export const BIAS_JOB = { ddst: 32, offs: 36, dbias: 40, groups: 44, G: 48, N: 52, ld: 56, total: 60, dt_ddst: 64, dt_dbias: 68, b_g: 72, b_n: 76, SIZE: 80 } as const;
export const KIND_MATMUL_BWD_BIAS = 42;

/** Runs `first`, then `second` only if `first` did not throw (an offsets error leaves every output untouched). */
export function chain(first: StreamTask, second: StreamTask): StreamTask {
  return () => {
    const r = first();
    return r ? r.then(() => second()) : second();
  };
}

export type { OpStatus };
