import type { GemmTiledConfig } from './gemm_tiled.js';
import { gemmThreads, rowOfWgsl } from './gemm_threads.js';

/**
 * How a tile finds its rows beyond the plain kinds: a gather reads src row `TI[r]` (-1: zeros), a
 * scatter writes dst row `TI[r] * topK + KS[r]` (-1: not written), zero tiles (attr.setZeroFillUngroupedRows)
 * store zeros, batched counts bound each batch's rows by the validated count in the schedule. Windows:
 * src / weights / dst may be bound from an element offset (a range of a buffer larger than one
 * binding); a dispatch then runs only the tiles whose expert and first row lie in its window.
 */
export interface GemmRows {
  readonly gather: boolean;
  readonly scatter: boolean;
  readonly zeroFill: boolean;
  readonly counts: boolean;
}

/** Words of the params with row modes: the 16 plain ones, then topK, aOff, wOff, dOff, eLo, eHi, rLo, rHi. */
export const GEMM_ROWS_PARAMS_WORDS = 24;
/** Bindings of the row maps (clear of the fusion's 6 + operands). */
export const TOKEN_INDEX_BINDING = 40;
export const TOKEN_KS_BINDING = 41;

/**
 * The epilogue's `row` (the dst row) for accumulator row r, or `continue` (past the tile; a scatter's
 * padding row). A scatter reads the validated token and slot of its routed row (gemm_threads.ts: the
 * tile row of accumulator row r).
 */
export function epilogueRowWgsl(c: GemmTiledConfig): string {
  const tr = rowOfWgsl(gemmThreads(c), 'r');
  if (!c.rows?.scatter) return `let row = m0 + ${tr};\n    if (row >= m1) { continue; }`;
  return `let rr = m0 + ${tr};\n    if (rr >= m1 || TI[rr] < 0) { continue; }\n    let row = u32(TI[rr]) * P.topK + u32(KS[rr]);`;
}

/** The dst element of (row, col) in the bound dst range. */
export function dstIndexWgsl(c: GemmTiledConfig, col: string): string {
  return `dBase + row * P.ldd + ${col}${c.rows ? ' - P.dOff' : ''}`;
}

