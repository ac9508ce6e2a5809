import type { DataType } from '../../common/data_type.js';
import { wgslHelpersFor, wgslStore, wgslType } from './wgsl_dtypes.js';
import { gemmParamsWgsl, gemmTileWgsl, type GemmTiledConfig } from './gemm_tiled.js';
import { ZERO_TILE } from './grouped_schedule.js';
import { fusionBindingsWgsl, fusionChainWgsl } from './gemm_fusion.js';
import { gemmFusionKey, type GemmFusion } from './wgsl_quant.js';
import type { GemmRows } from './gemm_rows.js';

/**
 * `gemm-tiled-vec4`: the f32 x f32 prefill GEMM. Same bindings, params and tile schedule as
 * `gemm-tiled` (gemm_tiled.ts), so the executor swaps one for the other; what differs is the inner
 * loop: A and B are read from global memory as vec4f (16-byte loads), the next K slice is loaded into
 * registers while the current one is multiplied (register double buffering), and each of the
 * 16 x TM / rm threads owns an rm x 8 register tile: columns `4 tx .. 4 tx + 3` and
 * `64 + 4 tx .. 64 + 4 tx + 3` (two vec4 reads of workgroup memory per k), rows `ty * rm ..`
 * contiguous when rm is a multiple of 4 (one vec4 read per 4 rows), else `ty + TM / rm * r`.
 * rm = 8 (TM = 32: 64 threads; 64: 128; 128: 256; a 32-row tile with a GLU: rm = 4, 128 threads);
 * the K slice's depth and loop form per tile are VEC4_DEFAULTS (measured on an H200,
 * reports/vec4b-h200.md, reports/vec4-layer-h200.md).
 *
 * The MoE row modes (gemm_rows.ts) and the epilogue fusions are the generic kernel's: a gather's A
 * rows are read through the token index (a thread's rows are the same in every slice, so the index is
 * read once, hoistA), a scatter writes dst row token * topK + slot, zero tiles store zeros, batched counts
 * bound each batch's rows (gemm_tiled.ts gemmTileWgsl); an expert map lives in the schedule. The GLU
 * (every alg and layout), binary / sum / eltwise post-ops and dst scales run in the epilogue with
 * gemm_fusion.ts's WGSL; src / weights scales and zero points (dequantized while staging) do not.
 *
 * Preconditions (vec4Eligible): f32 src and weights, unit column strides, K, N, lda, ldwk, the weights'
 * group stride and the src batch stride multiples of 4 (a GLU in halves: N / 2 too), TN = 128, grouped
 * M or dense (grouped K starts its K range at a runtime offset, not a multiple of 4), whole-buffer
 * bindings (the executor keeps binding windows on gemm-tiled). Each output is one fma chain over k
 * ascending, so a second run gives the same bits.
 */
export const VEC4_TN = 128;

/** How `gemm-tiled-vec4` stages and multiplies a K slice (see vec4Tuning for each field). */
export interface Vec4Variant {
  readonly bk: number;
  readonly doubleBuffer: boolean;
  readonly smallRowsPerThread: number;
  readonly unroll: boolean;
  readonly prefetch: boolean;
  readonly aRowsFast: boolean;
  readonly skipRows: boolean;
  readonly hoistA: boolean;
  readonly hoistB: boolean;
}

/**
 * The variant each M tile runs, the fastest measured on an H200 (bench/gpu_vec4_probe.ts on MoE-B P#1
 * f32 and bench/gpu_prefill_ab.ts on the MoE-B / Qwen3 layers, each variant interleaved in one process:
 * reports/vec4b-h200.md, reports/vec4-layer-h200.md). The NVIDIA compiler's outcome for 32-row tiles
 * hangs on small differences, so these are measured forms, not derived ones:
 *  - 32-row tiles (T = 256): an unrolled 8-deep slice with rows-fast A loads; without a GLU 8 rows per
 *    thread and the B columns worked out in every slice (P#1 0.68 ms; B columns as thread constants
 *    0.89, 4 rows per thread 1.0-1.1); with a GLU (the layer's gemm1) 4 rows per thread and thread
 *    constants (MoE-B gemm1 0.76 ms vs 0.90 with 8 rows; Qwen3 0.80 vs 0.90);
 *  - 64- and 128-row tiles (T = 4096): unrolled 12- and 16-deep slices, threads past the tile's last
 *    row skipping the products (128 rows: P#1 7.33 vs 7.52 ms, MoE-B gemm1 7.22 vs 7.79 ms; 64 rows:
 *    P#1 6.89 ms = 41 TFLOP/s).
 */
const VEC4_DEFAULTS: Readonly<Record<'32' | '32glu' | '64' | '128', Vec4Variant>> = {
  32: { bk: 8, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: true, skipRows: false, hoistA: true, hoistB: false },
  '32glu': { bk: 8, doubleBuffer: false, smallRowsPerThread: 4, unroll: true, prefetch: true, aRowsFast: true, skipRows: false, hoistA: true, hoistB: true },
  64: { bk: 12, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: false, skipRows: true, hoistA: true, hoistB: true },
  128: { bk: 16, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: false, skipRows: true, hoistA: true, hoistB: true },
};

/**
 * Benchmark-only switches (bench/gpu_vec4_probe.ts compares them in one process), read when a pipeline
 * is built; a field left undefined takes the tile's default (VEC4_DEFAULTS). `bk`: the K slice;
 * `doubleBuffer`: the staged slice double-buffered in workgroup memory (the next slice is stored while
 * the current one is multiplied: one barrier per slice instead of two); `smallRowsPerThread`: rows per
 * thread of 32- and 64-row tiles (fewer threads per workgroup, more FMAs per workgroup read); `unroll`:
 * the K slice's loop written out on 2D workgroup arrays (every workgroup index but the thread's own is
 * a constant, so the bounds clamps WGSL adds stay out of the inner loop); `prefetch`: the next slice
 * loaded into registers while the current one is multiplied (off: right before it is stored, fewer
 * live registers); `skipRows`: a thread whose rows all lie past the tile's last row skips the
 * products (a warp past it, e.g. in each group's last tile, issues no FMAs: the SM's other warps get
 * its issue slots); `aRowsFast`: consecutive threads load consecutive rows of A (conflict-free
 * transposed stores); `hoistA` / `hoistB`: the rows (a gather's token index read) and range checks of
 * a thread's A loads / the columns and range check of its B loads worked out once as thread
 * constants, or again in every slice. `wgBytes`: the workgroup memory a pipeline may use (a K slice
 * that does not fit is halved; 16 KiB, WebGPU's default, fits every default); `bigTile`: the M tile of
 * groups averaging more than 64 rows; undefined: 64 for grouped rows read and written in place (P#1 at
 * T = 4096: 6.89 vs 7.33 ms with 128), 128 for a gather or scatter and for dense (the MoE-B layer's
 * gemm1 / gemm2 at T = 4096: 7.22 / 3.89 ms vs 7.66 / 4.00 with 64).
 */
export const vec4Tuning: { -readonly [F in keyof Vec4Variant]: Vec4Variant[F] | undefined } & { wgBytes: number; bigTile: number | undefined } = {
  bk: undefined, doubleBuffer: undefined, smallRowsPerThread: undefined, unroll: undefined, prefetch: undefined, aRowsFast: undefined, skipRows: undefined,
  hoistA: undefined, hoistB: undefined, wgBytes: 16384, bigTile: undefined,
};

interface Vec4Shape {
  readonly tm: number; readonly bk: number; readonly rm: number; readonly nt: number; readonly db: boolean; readonly unroll: boolean; readonly prefetch: boolean;
  readonly aRowsFast: boolean; readonly skipRows: boolean; readonly hoistA: boolean; readonly hoistB: boolean;
}

/** The form of an M tile of `tm` rows (`glu`: the kernel fuses a GLU). */
function vec4Shape(tm: number, glu: boolean): Vec4Shape {
  const d = tm <= 32 ? VEC4_DEFAULTS[glu ? '32glu' : '32'] : tm <= 64 ? VEC4_DEFAULTS[64] : VEC4_DEFAULTS[128];
  const t = vec4Tuning;
  let bk = t.bk ?? d.bk;
  const small = t.smallRowsPerThread ?? d.smallRowsPerThread;
  // Rows per thread: tm / 16 (16 x 16 threads), at least `small` (8: 8 x 8 outputs per thread) below 128 rows.
  const rm = tm / 16 >= 8 || small <= 0 ? tm / 16 : Math.max(tm / 16, small);
  const bytes = (k: number): number => (tm * k + k * VEC4_TN) * 4;
  while (bk > 4 && bytes(bk) > t.wgBytes) bk = Math.max(4, Math.floor(bk / 8) * 4);
  const db = (t.doubleBuffer ?? d.doubleBuffer) && 2 * bytes(bk) <= t.wgBytes;
  return {
    tm, bk, rm, nt: 16 * (tm / rm), db, unroll: t.unroll ?? d.unroll, prefetch: (t.prefetch ?? d.prefetch) || db, aRowsFast: t.aRowsFast ?? d.aRowsFast,
    skipRows: t.skipRows ?? d.skipRows, hoistA: t.hoistA ?? d.hoistA, hoistB: t.hoistB ?? d.hoistB,
  };
}

/** The tile form's name (part of the pipeline key): `32x128x8r8urfxb` = TM x TN x BK, rows per thread, then the switches on. */
export function vec4ShapeTag(tm: number, glu = false): string {
  const s = vec4Shape(tm, glu);
  return `${tm}x${VEC4_TN}x${s.bk}r${s.rm}${s.db ? 'db' : ''}${s.unroll ? 'u' : ''}${s.prefetch ? '' : 'np'}${s.aRowsFast ? 'rf' : ''}${s.skipRows ? 'sr' : ''}${s.hoistA ? '' : 'xa'}${s.hoistB ? '' : 'xb'}`;
}

/** The row modes' part of the key (gemm_tiled.ts spells it the same way). */
function rowsKey(r: GemmRows | undefined): string {
  return r ? `:rows${r.gather ? 'G' : ''}${r.scatter ? 'S' : ''}${r.zeroFill ? 'Z' : ''}${r.counts ? 'C' : ''}` : '';
}

export function gemmTiledVec4Key(c: GemmTiledConfig): string {
  return `gemm-tiled-vec4:${c.mode}:${vec4ShapeTag(c.tm, c.fusion?.glu !== undefined)}:${c.dst}.${c.bias ?? 'nobias'}:${c.epilogue}${c.fusion ? `:${gemmFusionKey(c.fusion)}` : ''}${rowsKey(c.rows)}`;
}

export interface Vec4Strides {
  readonly K: number;
  readonly N: number;
  readonly lda: number;
  readonly ldwk: number;
  readonly ldwn: number;
  readonly wg: number;
  readonly sb: number;
}

/**
 * Whether `gemm-tiled-vec4` runs fusion `f`: the epilogue's (GLU, binary, sum, eltwise, dst scales and
 * zero points); not src / weights scales or zero points (they dequantize while staging, which this
 * kernel does not) nor an integer GEMM.
 */
export function vec4FusionOk(f: GemmFusion | undefined): boolean {
  return !f || !(f.intAcc || f.srcScale || f.srcZp || f.weiScale || f.weiZp);
}

/**
 * Whether `gemm-tiled-vec4` can run a problem with these types, strides and fusion. A GLU's gate and up
 * quads must be whole vec4 loads: `halves` puts the up columns N / 2 further, so N / 2 must be a
 * multiple of 4 (`interleaved` and `blocks32` tiles cover 128 consecutive columns).
 */
export function vec4Eligible(c: Pick<GemmTiledConfig, 'mode' | 'src' | 'wei' | 'fusion'>, s: Vec4Strides): boolean {
  if (c.mode === 'grouped_k' || c.src !== 'f32' || c.wei !== 'f32' || !vec4FusionOk(c.fusion)) return false;
  if (c.fusion?.glu?.layout === 'halves' && (s.N / 2) % 4 !== 0) return false;
  return s.ldwn === 1 && [s.K, s.N, s.lda, s.ldwk, s.wg, s.sb].every((v) => v % 4 === 0);
}

/**
 * Where the thread's B loads read (`bc`: the GEMM column of its vec4, `bo`: in range; `p`: its vec4
 * slot of a staged k row, the same for every load since the thread count is a multiple of 32). A GLU
 * tile holds the gate columns of 64 dst columns in tile columns 0..63 and their up columns in 64..127
 * (so thread tx has gate and up of dst columns n0 + 4 tx .. + 3 in its two accumulators): `halves` /
 * `blocks32` map a quad of dst columns to four consecutive GEMM columns; `interleaved` loads GEMM
 * columns 2 n0 + 4 p .. (gate, up, gate, up of dst columns n0 + 2 p, + 1), split when stored (bStoreWgsl).
 */
function bColWgsl(c: GemmTiledConfig): { col: string; ok: string } {
  const glu = c.fusion?.glu;
  if (!glu) return { col: 'n0 + 4u * p', ok: 'n0 + 4u * p < P.N' };
  if (glu.layout === 'interleaved') return { col: '2u * n0 + 4u * p', ok: '2u * n0 + 4u * p < P.N' };
  return { col: 'glu_col(n0 + 4u * (p % 16u), p / 16u)', ok: 'n0 + 4u * (p % 16u) < Q[0].x' };
}

/** Statements storing register `v` (the vec4 of slot p = q % 32 of k row kk) into the workgroup slice (`at(kk, slot)`: the vec4f there). */
function bStoreWgsl(c: GemmTiledConfig, v: string, at: (kk: string, slot: string) => string): string {
  if (c.fusion?.glu?.layout !== 'interleaved') return `${at('kk', 'p')} = ${v};`;
  return `let h = p / 2u; let l = 2u * (p % 2u); ${at('kk', 'h')}[l] = ${v}.x; ${at('kk', 'h')}[l + 1u] = ${v}.z; ${at('kk', '16u + h')}[l] = ${v}.y; ${at('kk', '16u + h')}[l + 1u] = ${v}.w;`;
}

/** The data types whose helpers the epilogue calls. */
function epilogueTypes(c: GemmTiledConfig): (DataType | undefined)[] {
  const f = c.fusion;
  return [c.dst, c.bias, ...(f ? [f.dstScale, f.dstZp, ...f.binary].map((o) => o?.dt) : [])];
}

/**
 * The store of one output (fn put): bias, then the GLU of the gate / up pair (x, y), the post-op chain
 * (gemm_fusion.ts, the generic kernel's) or the eltwise statements, the store at dst row `row` (a
 * scatter's dst row: the caller maps it).
 */
function putFnWgsl(c: GemmTiledConfig): string {
  const f = c.fusion, glu = f?.glu, R = c.rows;
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  const bias = (col: string): string => (Bi ? ` + ${Bi.load('BIAS', `g * P.bg + row * P.bm + (${col}) * P.bn`)}` : '');
  return `fn put(g: u32, gq: u32, dBase: u32, row: u32, cn: u32, x: f32${glu ? ', y: f32' : ''}) {
  if (cn >= ${f ? 'Q[0].x' : 'P.N'}) { return; }
  ${glu ? `let gc = glu_col(cn, 0u); let uc = glu_col(cn, 1u);
  var v = glu_act(x${bias('gc')}, y${bias('uc')});` : `var v = x${bias('cn')};`}
  let di = dBase + row * P.ldd + cn${R ? ' - P.dOff' : ''};
  ${f ? fusionChainWgsl(f, c.dst) : c.epilogue}
  ${wgslStore(c.dst, 'D', 'di', 'v')}
}`;
}

export function gemmTiledVec4Wgsl(c: GemmTiledConfig): string {
  const { tm, bk, rm, nt: NT, db, unroll, prefetch, aRowsFast, skipRows, hoistA, hoistB } = vec4Shape(c.tm, c.fusion?.glu !== undefined);
  if (tm % 16 !== 0 || tm > 128 || !Number.isInteger(tm / rm) || (rm !== 2 && rm % 4 !== 0 && rm !== 1) || bk % 4 !== 0) {
    throw new Error(`gemm-tiled-vec4: TM ${tm} (${rm} rows per thread, BK ${bk}) does not fit the thread layout`);
  }
  if (!vec4FusionOk(c.fusion)) throw new Error('gemm-tiled-vec4: src / weights scales, zero points and integer GEMMs stage on gemm-tiled');
  const f = c.fusion, glu = f?.glu, R = c.rows;
  const TY = tm / rm;
  if ((16 * TY) % (VEC4_TN / 4) !== 0) throw new Error(`gemm-tiled-vec4: ${16 * TY} threads do not stage whole k rows of B`);
  const vecRows = rm % 4 === 0;
  const D = wgslType(c.dst);
  // vec4 loads per thread per K slice: A is tm x bk (bk / 4 vec4 per row), B is bk x 128.
  const aVecs = (tm * bk) / 4, aLoads = Math.ceil(aVecs / NT), bVecs = (bk * VEC4_TN) / 4, bLoads = Math.ceil(bVecs / NT);
  const aGuard = aVecs % NT === 0 ? '' : `if (q < ${aVecs}u) `;
  const bGuard = bVecs % NT === 0 ? '' : `if (q < ${bVecs}u) `;
  // Words of one staged slice (double buffering: slice s at s % 2 * this).
  const aSlot = vecRows ? (bk * tm) / 4 : bk * tm, bSlot = bVecs;
  const slots = db ? 2 : 1;
  const off = (w: string): string => (R ? ` - P.${w}` : '');
  // Which row and K quad the thread's q-th A vec4 is: K quads fastest (a warp reads whole row pieces),
  // or (aRowsFast) rows fastest, so that a warp's transposed stores hit 32 consecutive words of As.
  const aIdx = aRowsFast ? `let m = q % ${tm}u; let kq = (q / ${tm}u) * 4u;` : `let m = q / ${bk / 4}u; let kq = (q % ${bk / 4}u) * 4u;`;
  const decl = (n: number, what: string): string => Array.from({ length: n }, (_, i) => `var ${what}${i} = vec4f(0.0);`).join(' ');
  // Thread constants, the same in every slice: each A load's src row (a gather's: the token of the
  // routed row, -1 reading zeros), K quad and range check; the B loads' first k row, GEMM column and
  // range check (load i reads k row bkk + i NT / 32).
  const bCol = bColWgsl(c);
  const aConsts = Array.from({ length: aLoads }, (_, i) => `
  var arow${i} = 0u; var aok${i} = false; var akq${i} = 0u;
  { let q = li + ${NT * i}u; ${aIdx} akq${i} = kq; let rr = m0 + m;
    if (q < ${aVecs}u && rr < m1) { ${R?.gather ? `let t = TI[rr]; arow${i} = u32(max(t, 0)); aok${i} = t >= 0;` : `arow${i} = rr; aok${i} = true;`} } }`).join('');
  const bConsts = `
  let bkk = li / ${VEC4_TN / 4}u;
  let bc = ${bCol.col.replace(/\bp\b/g, 'bp')}; let bo = ${bCol.ok.replace(/\bp\b/g, 'bp')};`;
  const consts = (hoistA ? aConsts : '') + (hoistB ? `
  let bp = li % ${VEC4_TN / 4}u;${bConsts}` : '');
  // Global -> registers for the K slice at kb (zeros past the rows, K or N); rows and columns from the
  // thread constants, or (benchmark switch) worked out again in every slice.
  const load = Array.from({ length: aLoads }, (_, i) => (hoistA ? `
    ra${i} = vec4f(0.0); if (aok${i} && kb + akq${i} < P.K) { ra${i} = A[(aBase + arow${i} * P.lda + kb + akq${i}${off('aOff')}) / 4u]; }` : `
    { let q = li + ${NT * i}u; ${aIdx} let rr = m0 + m;
      ra${i} = vec4f(0.0); if (q < ${aVecs}u && rr < m1 && kb + kq < P.K) { ${R?.gather ? `let t = TI[rr]; if (t >= 0) { ra${i} = A[(aBase + u32(t) * P.lda + kb + kq${off('aOff')}) / 4u]; }` : `ra${i} = A[(aBase + rr * P.lda + kb + kq${off('aOff')}) / 4u];`} } }`)).join('') +
    Array.from({ length: bLoads }, (_, i) => (hoistB ? `
    rb${i} = vec4f(0.0); { let k = kb + bkk + ${(NT / (VEC4_TN / 4)) * i}u; if (${bVecs % NT === 0 || i < bLoads - 1 ? '' : `bkk < ${bk - (NT / (VEC4_TN / 4)) * i}u && `}bo && k < P.K) { rb${i} = B[(wBase + k * P.ldwk + bc${off('wOff')}) / 4u]; } }` : `
    { let q = li + ${NT * i}u; let k = kb + q / ${VEC4_TN / 4}u; let p = q % ${VEC4_TN / 4}u;
      rb${i} = vec4f(0.0); if (q < ${bVecs}u && k < P.K && ${bCol.ok}) { rb${i} = B[(wBase + k * P.ldwk + ${bCol.col}${off('wOff')}) / 4u]; } }`)).join('');
  // Registers -> a workgroup slot (A transposed: k-major, rows contiguous). Flat arrays: the slot at
  // word offsets aS / bS; 2D arrays (unroll): slot `s` (a constant) starts at K row s * bk.
  const store = (s?: number): string => Array.from({ length: aLoads }, (_, i) => `
    { let q = li + ${NT * i}u; ${aIdx}
      ${aGuard}{ ${[0, 1, 2, 3].map((j) => {
    if (s !== undefined) return vecRows ? `As[kq + ${s * bk + j}u][m / 4u][m % 4u] = ra${i}[${j}];` : `As[kq + ${s * bk + j}u][m] = ra${i}[${j}];`;
    return vecRows ? `As[aS + (kq + ${j}u) * ${tm / 4}u + m / 4u][m % 4u] = ra${i}[${j}];` : `As[aS + (kq + ${j}u) * ${tm}u + m] = ra${i}[${j}];`;
  }).join(' ')} } }`).join('') +
    Array.from({ length: bLoads }, (_, i) => `
    { let q = li + ${NT * i}u; ${bGuard}{ let kk = q / ${VEC4_TN / 4}u; let p = q % ${VEC4_TN / 4}u; ${bStoreWgsl(c, `rb${i}`,
    s !== undefined ? (kk, slot) => `Bs[${kk} + ${s * bk}u][${slot}]` : (kk, slot) => `Bs[bS + ${kk} * ${VEC4_TN / 4}u + ${slot}]`)} } }`).join('');
  const accDecl = Array.from({ length: rm }, (_, r) => `var c${r}0 = vec4f(0.0); var c${r}1 = vec4f(0.0);`).join('\n  ');
  // rm a multiple of 4: a thread's rows are contiguous (ty * rm + r), one vec4 read of As per 4 rows;
  // else rows ty + TY r.
  const rowOf = (r: number | string): string => { const x = typeof r === 'number' ? `${r}u` : r; return vecRows ? `ty * ${rm}u + ${x}` : `ty + ${TY}u * ${x}`; };
  const fmaRows = (aOf: (r: number) => string): string => Array.from({ length: rm }, (_, r) => `
      { let a = vec4f(${aOf(r)}); c${r}0 = fma(a, b0, c${r}0); c${r}1 = fma(a, b1, c${r}1); }`).join('');
  // The stores: dst row (a scatter's: token * topK + slot of the routed row, -1 not written), then per
  // column (a GLU: per dst column, its gate and up accumulators) fn put.
  const puts = (r: number, j: string): string => (glu ? `put(g, gq, dBase, row, n0 + 4u * tx + ${j}, c${r}0[${j}], c${r}1[${j}]);`
    : `put(g, gq, dBase, row, n0 + 4u * tx + ${j}, c${r}0[${j}]); put(g, gq, dBase, row, n0 + 64u + 4u * tx + ${j}, c${r}1[${j}]);`);
  const stores = Array.from({ length: rm }, (_, r) => `
  { let rr = m0 + ${rowOf(r)};
    if (rr < m1${R?.scatter ? ' && TI[rr] >= 0' : ''}) {
      let row = ${R?.scatter ? 'u32(TI[rr]) * P.topK + u32(KS[rr])' : 'rr'};
      ${unroll ? [0, 1, 2, 3].map((j) => puts(r, `${j}u`)).join(' ') : `for (var j = 0u; j < 4u; j++) { ${puts(r, 'j')} }`}
    } }`).join('');
  // A zero tile (attr.setZeroFillUngroupedRows: rows in no group): zeros in this tile's dst columns.
  const zeroCol = (col: string): string => `{ let col = ${col}; if (col < ${f ? 'Q[0].x' : 'P.N'}) { ${wgslStore(c.dst, 'D', `dBase + row * P.ldd + col${off('dOff')}`, '0.0')} } }`;
  const zeroTile = R?.zeroFill ? `
  if (g == ${ZERO_TILE}u) {
    for (var r = 0u; r < ${rm}u; r++) {
      let row = m0 + ${rowOf('r')};
      if (row >= m1) { continue; }
      for (var j = 0u; j < 4u; j++) { ${zeroCol('n0 + 4u * tx + j')}${glu ? '' : ` ${zeroCol('n0 + 64u + 4u * tx + j')}`} }
    }
    return;
  }` : '';
  // One slice's products: a loop over the flat arrays, or (unroll) every k written out on slot `s`.
  const multiply = (s?: number): string => (skipRows ? `
    if (live) {${products(s)}
    }` : products(s));
  const products = (s?: number): string => {
    if (s === undefined) {
      const aVec = vecRows ? Array.from({ length: rm / 4 }, (_, h) => `
      let av${h} = As[aR + kk * ${tm / 4}u + ty * ${rm / 4}u + ${h}u];`).join('') : '';
      return `
    for (var kk = 0u; kk < ${bk}u; kk++) {
      let b0 = Bs[bR + kk * ${VEC4_TN / 4}u + tx];
      let b1 = Bs[bR + kk * ${VEC4_TN / 4}u + 16u + tx];${aVec}${fmaRows((r) => (vecRows ? `av${r >> 2}[${r & 3}]` : `As[aR + kk * ${tm}u + ty + ${TY * r}u]`))}
    }`;
    }
    return Array.from({ length: bk }, (_, kk) => {
      const k = s * bk + kk;
      const aVec = vecRows ? Array.from({ length: rm / 4 }, (_, h) => `
      let av${h} = As[${k}u][ar + ${h}u];`).join('') : '';
      return `
    {
      let b0 = Bs[${k}u][tx];
      let b1 = Bs[${k}u][tx16];${aVec}${fmaRows((r) => (vecRows ? `av${r >> 2}[${r & 3}]` : `As[${k}u][ty + ${TY * r}u]`))}
    }`;
    }).join('');
  };
  let mainLoop: string;
  if (unroll && db) {
    // Two slices per trip, slot 0 then slot 1, so every slot index is a constant (see the flat variant below).
    const half = (s: number): string => `
    if (kb >= P.K) { break; }
    kb += ${bk}u;
    if (kb < P.K) {${load}
    }${multiply(s)}
    if (kb < P.K) {${store(1 - s)}
    }
    workgroupBarrier();`;
    mainLoop = `
  var kb = 0u;
  ${load}
  ${store(0)}
  workgroupBarrier();
  loop {${half(0)}${half(1)}
  }`;
  } else if (db) {
    // Double buffering: slice i is multiplied from slot i % 2 while slice i + 1 is stored into the other
    // slot; the one barrier per slice both publishes slice i + 1 and retires slot i % 2 for slice i + 2.
    mainLoop = `
  var aS = 0u; var bS = 0u;
  var kb = 0u;
  ${load}
  ${store()}
  workgroupBarrier();
  loop {
    if (kb >= P.K) { break; }
    let aR = aS; let bR = bS;
    kb += ${bk}u;
    let more = kb < P.K;
    if (more) {${load}
    }${multiply()}
    aS = ${aSlot}u - aS; bS = ${bSlot}u - bS;
    if (more) {${store()}
    }
    workgroupBarrier();
  }`;
  } else {
    const s = unroll ? 0 : undefined;
    mainLoop = `
  ${unroll ? '' : 'let aS = 0u; let bS = 0u; let aR = 0u; let bR = 0u;'}
  var kb = 0u;
  ${prefetch ? load : ''}
  loop {
    if (kb >= P.K) { break; }
    ${prefetch ? '' : load}
    ${store(s)}
    workgroupBarrier();
    kb += ${bk}u;
    ${prefetch ? `if (kb < P.K) {${load}
    }` : ''}${multiply(s)}
    workgroupBarrier();
  }`;
  }
  const arrays = unroll ? `
var<workgroup> As: array<array<${vecRows ? `vec4f, ${tm / 4}` : `f32, ${tm}`}>, ${slots * bk}>;
var<workgroup> Bs: array<array<vec4f, ${VEC4_TN / 4}>, ${slots * bk}>;` : `
var<workgroup> As: array<${vecRows ? 'vec4f' : 'f32'}, ${slots * aSlot}>;
var<workgroup> Bs: array<vec4f, ${slots * bSlot}>;`;
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  // The tile (gemm_tiled.ts: the schedule's, a dense grid's or a batch's bounded by its count; row-mode
  // windows) and the params are the generic kernel's, so the executor binds either the same way.
  return /* wgsl */ `
${wgslHelpersFor(epilogueTypes(c))}
${gemmParamsWgsl(c)}
@group(0) @binding(1) var<storage, read> A: array<vec4f>;
@group(0) @binding(2) var<storage, read> B: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}
${f ? fusionBindingsWgsl(f, c) : ''}
${arrays}

${putFnWgsl(c)}

@compute @workgroup_size(${NT})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${gemmTileWgsl(c)}
  let n0 = wid.x * ${glu ? VEC4_TN / 2 : VEC4_TN}u;
  let tx = li % 16u;
  let ty = li / 16u;${zeroTile}
  ${unroll ? `let tx16 = tx + 16u; ${vecRows ? `let ar = ty * ${rm / 4}u;` : ''}` : ''}${consts}${skipRows ? `
  // The thread's first row (no barrier inside the branch: threads past the tile only skip products).
  let live = m0 + ${rowOf(0)} < m1;` : ''}
  ${decl(aLoads, 'ra')} ${decl(bLoads, 'rb')}
  ${accDecl}${mainLoop}
  ${stores}
}
`;
}
