/**
 * The thread layout of the tiled GEMM family (gemm_tiled.ts, gemm_tiled_dot4.ts) and of the epilogues
 * they share (gemm_fusion.ts, gemm_rows.ts): 16 x TY threads, thread (tx, ty) owning an rm x rn register
 * tile of a TM x TN output tile, read from workgroup memory as vectors: its rows are runs of `wa`
 * consecutive rows (one vector each), its columns the lanes of `qn = rn / wb` vectors, vector slot
 * p of a staged k row holding the columns p + e TN / wb (e the lane):
 *   row(r) = TY wa (r / wa) + wa ty + r % wa,   col(j) = (TN / wb) (j / qn) + 16 (j % qn) + tx.
 * So the 16 threads of a row read 16 consecutive vectors (no bank conflicts), and the threads staging
 * a k row load consecutive columns for each lane (coalesced global loads). With a GLU, columns
 * j < rn / 2 are the gate columns (col < TN / 2) and j + rn / 2 the up column of the same dst column
 * (col(j) + TN / 2), as the staging of B expects.
 * Up to 32 rows per tile take 8 (TM = 32) or 4 (TM = 16) thread rows, so a thread keeps 4 rows: small
 * tiles (few rows per expert) still do rm x rn FMAs per rm / wa + rn / wb vector reads.
 * `runs` (gemm-tiled with chunked weight loads, gemm_tiled_staging.ts): vector slot p holds the wb
 * consecutive columns wb p .. wb p + wb - 1 instead, so a chunk of consecutive weights columns (a vec4
 * of f32, a word of 4 bytes / 8 nibbles) is staged as whole vectors:
 *   col(j) = 16 wb (j / wb) + wb tx + j % wb.
 * A GLU then needs qn even (the up column of j is j + rn / 2 = TN / 2 further), so wb drops to 2 where
 * qn would be 1.
 */
export interface GemmThreads {
  /** Thread rows; the workgroup has 16 x ty threads. */
  readonly ty: number;
  readonly threads: number;
  readonly rm: number;
  readonly rn: number;
  readonly wa: number;
  readonly wb: number;
  readonly tn: number;
  /** Vector slots hold runs of consecutive columns (see above), else columns TN / wb apart. */
  readonly runs: boolean;
}

/**
 * Benchmark-only switches (bench compares layouts in one process; read when a kernel is generated, so
 * they are part of its key): rows per thread in tiles of up to 32 rows; register prefetch of the next
 * K slice (gemm_tiled_staging.ts) where a thread stages few registers; integer codes of chunked
 * weights converted to f32 with the 2^23 mantissa trick (`magicDecode`) or a conversion; `skipDecode`
 * (wrong results: times the staging without the decode).
 */
export const gemmThreadTuning: { smallTileRowsPerThread: number; prefetch: boolean; magicDecode: boolean; skipDecode: boolean } = {
  smallTileRowsPerThread: 4, prefetch: true, magicDecode: false, skipDecode: false,
};

function vecWidth(n: number): number {
  return n % 4 === 0 ? 4 : n % 2 === 0 ? 2 : 1;
}

export function gemmThreads(c: { readonly tm: number; readonly tn: number; readonly fusion?: { readonly glu?: unknown }; readonly bChunk?: number }): GemmThreads {
  const ty = c.tm >= 64 ? 16 : Math.max(1, Math.min(16, c.tm / gemmThreadTuning.smallTileRowsPerThread));
  const rm = c.tm / ty, rn = c.tn / 16;
  if (!Number.isInteger(rm) || !Number.isInteger(rn) || rn < 1) throw new Error(`gemm-tiled: tile ${c.tm} x ${c.tn} does not fit the thread layout`);
  const glu = c.fusion?.glu !== undefined;
  if (glu && rn % 2 !== 0) throw new Error(`gemm-tiled: a GLU tile needs an even number of columns per thread (TN ${c.tn})`);
  const runs = (c.bChunk ?? 0) > 0;
  let wb = vecWidth(rn);
  if (runs && glu && (rn / wb) % 2 !== 0) wb /= 2;
  return { ty, threads: 16 * ty, rm, rn, wa: vecWidth(rm), wb, tn: c.tn, runs };
}

/** The tile row of accumulator row `r` (a WGSL u32 expression; `ty` in scope). */
export function rowOfWgsl(t: GemmThreads, r: string): string {
  return t.wa === 1 ? `(ty + ${t.ty}u * ${r})` : `(${t.ty * t.wa}u * (${r} / ${t.wa}u) + ${t.wa}u * ty + ${r} % ${t.wa}u)`;
}

/** The tile column of accumulator column `j` (`tx` in scope). */
export function colOfWgsl(t: GemmThreads, j: string): string {
  if (t.runs) return t.wb === 1 ? `(tx + 16u * ${j})` : `(${16 * t.wb}u * (${j} / ${t.wb}u) + ${t.wb}u * tx + ${j} % ${t.wb}u)`;
  const qn = t.rn / t.wb;
  return t.wb === 1 ? `(tx + 16u * ${j})` : `(${t.tn / t.wb}u * (${j} / ${qn}u) + 16u * (${j} % ${qn}u) + tx)`;
}

/** The WGSL type of a run of `w` values of scalar type `T`. */
export function vecOf(T: string, w: number): string {
  return w === 1 ? T : `vec${w}<${T}>`;
}
