import { DnnlError } from '../../common/status.js';

/* The errors of a matmul with dynamic int8 activations (`:dq`) found while quantizing its src rows: one wording
   on every engine kind. */

/** The last src offset (grouped src, or the grouped-offsets attribute) outside [0, rows]. */
export function dqOffsetsError(G: number, n: number, rows: number): DnnlError {
  return new DnnlError('invalid_arguments', `matmul.execute: src offsets[${G}] = ${n} must be in [0, ${rows}]`);
}

/** `what` (a src row) holds a value that no int8 scale represents. */
function nonFiniteRow(what: string): DnnlError {
  return new DnnlError('invalid_arguments', `${what} has a NaN or infinite value: dynamic quantization (attr.setDynamicQuantization) has no scale for it`);
}

/** A src row of a matmul that no int8 scale represents. */
export function dqNonFiniteRow(row: number): DnnlError {
  return nonFiniteRow(`matmul.execute: src row ${row}`);
}

/** Row `row` of expert `expert`'s src (grouped_gemm, Proposal #3) that no int8 scale represents. */
export function dqNonFiniteExpertRow(expert: number, row: number): DnnlError {
  return nonFiniteRow(`grouped_gemm.execute: src[${expert}] row ${row}`);
}
