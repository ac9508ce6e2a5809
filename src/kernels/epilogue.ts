import type { PrimitiveAttr } from '../attr/primitive_attr.js';
import { ELT_CODE, JOB, MAX_ELT } from './job_layout.js';

const isElt = (alg: string): alg is keyof typeof ELT_CODE => alg in ELT_CODE;

/** Why the kernels' epilogue cannot apply these post-ops, or undefined if it can. */
export function epilogueRejection(attr: PrimitiveAttr): string | undefined {
  const ops = attr.postOps.entries;
  if (ops.filter((o) => o.kind === 'eltwise').length > MAX_ELT) return `more than ${MAX_ELT} eltwise post-ops`;
  for (let i = 0; i < ops.length; i++) {
    const o = ops[i];
    if (o.kind === 'sum' && i !== 0) return 'a sum post-op must come first';
    if (o.kind === 'eltwise' && !isElt(o.alg)) return `eltwise ${o.alg} is not in the kernel epilogue`;
    if (o.kind === 'binary' || o.kind === 'glu') return `${o.alg} is not in the kernel epilogue`;
    // glu_backward: a PO_DGLU record read by both paths (written by the matmul executor), not an epilogue entry.
  }
  return undefined;
}

/** Writes the post-op chain into a job (views over the job struct). */
export function writeEpilogue(i32: Int32Array, f32: Float32Array, attr: PrimitiveAttr): void {
  let ne = 0;
  for (const op of attr.postOps.entries) {
    if (op.kind === 'sum') {
      i32[JOB.has_sum / 4] = 1;
      f32[JOB.sum_scale / 4] = op.scale;
      continue;
    }
    if (op.kind !== 'eltwise') continue; // binary / glu: the impls reject them before (not in the kernels yet)
    i32[JOB.elt_alg / 4 + ne] = ELT_CODE[op.alg as keyof typeof ELT_CODE];
    f32[JOB.elt_alpha / 4 + ne] = op.alpha;
    f32[JOB.elt_beta / 4 + ne] = op.beta;
    ne++;
  }
  i32[JOB.n_elt / 4] = ne;
}
