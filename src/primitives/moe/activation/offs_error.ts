import { DnnlError } from '../../../common/status.js';

/** A grouped src's last offset outside [0, rows], the same message on every engine kind. */
export function offsError(G: number, n: number, rows: number): DnnlError {
  return new DnnlError('invalid_arguments', `moe.activation.execute: src offsets[${G}] = ${n} must be in [0, ${rows}]`);
}
