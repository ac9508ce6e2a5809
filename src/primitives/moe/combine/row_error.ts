import { DnnlError } from '../../../common/status.js';
import type { CombineProblem } from './pd.js';

/** The error of row_of entry `i` = `v` out of range, the same on every engine kind. */
export function rowError(p: CombineProblem, i: number, v: number): DnnlError {
  const range = p.scattered ? '[-1, inf) (a mask: >= 0 means the slot is present)' : `[-1, rows = ${p.rows})`;
  return new DnnlError('invalid_arguments', `moe.combine.execute: ARG.MOE_ROW_OF[${Math.floor(i / p.k)}, ${i % p.k}] = ${v} is out of range ${range}`);
}
