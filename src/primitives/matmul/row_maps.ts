import { DnnlError } from '../../common/status.js';
import type { MatmulArgs } from './impl.js';
import type { MatmulProblem } from './problem.js';

/** Error codes shared with the wasm driver (wasm/src/job.h): batched counts and MoE row maps. */
export const ROW_ERR = { countNegative: 6, countCapacity: 7, index: 8, slot: 9, duplicate: 10, expertMap: 11 } as const;

/** The message for a row-map or batched-count violation; the reference and the kernels report identical text. */
export function rowMapsError(p: MatmulProblem, code: number, i: number, x: number, y: number): DnnlError {
  const k = p.moe.scatterTopK;
  const msg =
    code === ROW_ERR.countNegative ? `ARG.MOE_EXPERT_NUM_TOKENS[${i}] = ${x} must be >= 0` :
    code === ROW_ERR.countCapacity ? `ARG.MOE_EXPERT_NUM_TOKENS[${i}] = ${x} exceeds the batch capacity dims[1] = ${y}` :
    code === ROW_ERR.index ? `ARG.MOE_TOKEN_INDEX[${i}] = ${x} is out of range [-1, ${y}) (-1 marks a padding row)` :
    code === ROW_ERR.slot && y === -1 ? `ARG.MOE_TOKEN_KS[${i}] = ${x} must be -1 for a padding row (ARG.MOE_TOKEN_INDEX[${i}] = -1)` :
    code === ROW_ERR.slot ? `ARG.MOE_TOKEN_KS[${i}] = ${x} is out of range [0, topK = ${y})` :
    code === ROW_ERR.duplicate ? `routed row ${i} scatters to dst row ${x} * ${k} + ${y}, already written by an earlier row (ARG.MOE_TOKEN_INDEX / ARG.MOE_TOKEN_KS repeat a (token, slot) pair)` :
    code === ROW_ERR.expertMap ? `ARG.MOE_EXPERT_MAP[${i}] = ${x} is out of range [0, experts = ${y}) (group ${i} must name the expert whose weights it uses)` :
    `kernel status ${code}`;
  return new DnnlError(code >= 6 && code <= 11 ? 'invalid_arguments' : 'runtime_error', `matmul.execute: ${msg}`);
}

/**
 * Host-side twin of the kernel's check (gemm-driver.c check_row_maps), for the reference: the rows
 * [0, routed) of the row maps, in the kernel's order and with its messages.
 */
export function checkRowMaps(p: MatmulProblem, a: MatmulArgs, routed: number): void {
  const { gather, scatterTopK: k, srcRows, dstRows } = p.moe;
  if (!gather && !k) return;
  const ti = a.tokenIndex!.values as Int32Array;
  const ks = k ? (a.tokenKs!.values as Int32Array) : undefined;
  const tokens = k ? dstRows / k : srcRows;
  const bound = gather ? Math.min(tokens, srcRows) : tokens;
  const seen = k ? new Uint8Array(dstRows) : undefined;
  for (let r = 0; r < routed; r++) {
    const t = ti[r];
    if (t < -1 || t >= bound) throw rowMapsError(p, ROW_ERR.index, r, t, bound);
    if (!ks || !seen) continue;
    if (t < 0 && ks[r] !== -1) throw rowMapsError(p, ROW_ERR.slot, r, ks[r], -1);
    if (t < 0) continue;
    if (ks[r] < 0 || ks[r] >= k) throw rowMapsError(p, ROW_ERR.slot, r, ks[r], k);
    const d = t * k + ks[r];
    if (seen[d]) throw rowMapsError(p, ROW_ERR.duplicate, r, t, ks[r]);
    seen[d] = 1;
  }
}

/** Host-side twin of the kernel's batched-count check. */
export function checkedCounts(p: MatmulProblem, a: MatmulArgs, G: number): Int32Array {
  const c = Int32Array.from((a.counts!.values as Int32Array).subarray(0, G));
  for (let g = 0; g < G; g++) {
    if (c[g] < 0) throw rowMapsError(p, ROW_ERR.countNegative, g, c[g], 0);
    if (c[g] > p.M) throw rowMapsError(p, ROW_ERR.countCapacity, g, c[g], p.M);
  }
  return c;
}
