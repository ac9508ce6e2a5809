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

/** The bias element of (g, row, col); with launch offsets (a dense matmul's batch launches) moved by the launch's `bOff`. */
export function biasIndexWgsl(c: GemmTiledConfig, col: string): string {
  return `g * P.bg + row * P.bm + ${col} * P.bn${c.launchOffsets ? ' + P.bOff' : ''}`;
}

/**
 * The row-map rules of the routed rows, in WGSL, for both places that check them on the device (the
 * grouped-schedule dispatch and the schedule inside gemv-splitk, grouped_schedule.ts), so that their
 * rules and error words cannot drift apart; the cpu engine's check_row_maps, codes of row_maps.ts
 * ROW_ERR. `ti` / `ks` name the token index and slot arrays, `prefix` the functions:
 *  - `fn <prefix>row_code(r) -> u32`: the rule routed row r breaks before the duplicate check (0: none;
 *    8: token id outside [-1, tokens); 9: a scatter's slot outside [0, topK), or not -1 on a padding row);
 *  - `fn <prefix>report_row(b)` (where `fail` is given: the pass reports): the status words of row b,
 *    the first bad row, through `<fail>(code, i, x, y)` (10: a scatter's duplicate (token, slot) pair,
 *    where b broke no other rule).
 * Needs `P.tokens` (and `P.topK` for a scatter) in the pass's params.
 */
export function rowMapRulesWgsl(o: { prefix: string; ti: string; ks: string; scatter: boolean; fail: string | undefined }): string {
  const { prefix, ti, ks, scatter, fail } = o;
  const code = /* wgsl */ `
// The rule routed row r breaks before the duplicate check (0: none).
fn ${prefix}row_code(r: u32) -> u32 {
  let t = ${ti}[r];
  if (t < -1 || t >= i32(P.tokens)) { return 8u; }
  ${scatter ? `if (t < 0 && ${ks}[r] != -1) { return 9u; }
  if (t >= 0 && (${ks}[r] < 0 || ${ks}[r] >= i32(P.topK))) { return 9u; }` : ''}
  return 0u;
}`;
  if (!fail) return code;
  return `${code}

// Row b is the first bad routed row: its rule (the duplicate when no other).
fn ${prefix}report_row(b: u32) {
  let code = ${prefix}row_code(b);
  if (code == 8u) { ${fail}(8u, b, ${ti}[b], i32(P.tokens)); }
  ${scatter ? `else if (code == 9u) { ${fail}(9u, b, ${ks}[b], select(i32(P.topK), -1, ${ti}[b] < 0)); }
  else { ${fail}(10u, b, ${ti}[b], ${ks}[b]); }` : ''}
}`;
}
