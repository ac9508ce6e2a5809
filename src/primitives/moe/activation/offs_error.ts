import { DnnlError } from '../../../common/status.js';

/**
 * The wasm kernel's own guard: a grouped src's last offset outside [0, rows]. Execute checks every offset
 * first (the grouped matmul's rules and messages), so this is reached only when the offsets change while
 * the job runs.
 */
export function offsError(G: number, n: number, rows: number): DnnlError {
  return new DnnlError('invalid_arguments', `moe.activation.execute: src offsets[${G}] = ${n} must be in [0, ${rows}]`);
}
