import { wgslHelpersFor, wgslStore, wgslType } from './wgsl_dtypes.js';
import type { GemmTiledConfig } from './gemm_tiled.js';
import { Y_FOLD } from './grouped_schedule.js';

/**
 * `gemm-tiled-vec4`: the f32 x f32 prefill GEMM. Same bindings, params and tile schedule as
 * `gemm-tiled` (gemm_tiled.ts), so the executor swaps one for the other; what differs is the inner
 * loop: A and B are read from global memory as vec4f (16-byte loads), the next K slice is loaded into
 * registers while the current one is multiplied (register double buffering), and each of the
 * 16 x TM / rm threads owns an rm x 8 register tile: columns `4 tx .. 4 tx + 3` and
 * `64 + 4 tx .. 64 + 4 tx + 3` (two vec4 reads of workgroup memory per k), rows `ty * rm ..`
 * contiguous when rm is a multiple of 4 (one vec4 read per 4 rows), else `ty + TM / rm * r`.
 * rm = 8 for every tile (TM = 32: 64 threads; 64: 128; 128: 256); the K slice's depth and loop form
 * per tile are VEC4_DEFAULTS (measured on an H200, reports/vec4b-h200.md).

 * Preconditions (vec4Eligible): f32 src and weights, unit column strides, K, N, lda, ldwk, the weights'
 * group stride and the src batch stride multiples of 4, TN = 128, grouped M or dense (grouped K starts
 * its K range at a runtime offset, not a multiple of 4). No rfcs/0002 fusion: bias and eltwise only.
 * Each output is one fma chain over k ascending, so a second run gives the same bits.
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
}

/**
 * The variant each M tile runs, the fastest measured on an H200 (bench/gpu_vec4_probe.ts, MoE-B P#1
 * f32, reports/vec4b-h200.md): 32-row tiles (T = 256) an unrolled 8-deep slice with rows-fast A loads,
 * 0.68 ms (flat loop 0.87); 128-row tiles (T = 4096) an unrolled 16-deep slice, 7.65 ms (flat BK 8:
 * 8.19; BK 32 or double-buffered slices, which need more than 16 KiB, were slower); 64-row tiles the
 * unrolled 12-deep slice that ran best as the big tile of T = 4096 (7.65 ms).
 */
const VEC4_DEFAULTS: Readonly<Record<32 | 64 | 128, Vec4Variant>> = {
  32: { bk: 8, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: true },
  64: { bk: 12, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: false },
  128: { bk: 16, doubleBuffer: false, smallRowsPerThread: 8, unroll: true, prefetch: true, aRowsFast: false },
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
 * live registers); `aRowsFast`: consecutive threads load consecutive rows of A (conflict-free
 * transposed stores). `wgBytes`: the workgroup memory a pipeline may use (a K slice that does not fit
 * is halved; 16 KiB, WebGPU's default, fits every default); `bigTile`: the M tile of groups averaging
 * more than 64 rows (128; 64 or 96 pad less of each group's last tile).
 */
export const vec4Tuning: { -readonly [F in keyof Vec4Variant]: Vec4Variant[F] | undefined } & { wgBytes: number; bigTile: number } = {
  bk: undefined, doubleBuffer: undefined, smallRowsPerThread: undefined, unroll: undefined, prefetch: undefined, aRowsFast: undefined, wgBytes: 16384, bigTile: 128,
};

interface Vec4Shape { readonly tm: number; readonly bk: number; readonly rm: number; readonly nt: number; readonly db: boolean; readonly unroll: boolean; readonly prefetch: boolean; readonly aRowsFast: boolean }

function vec4Shape(tm: number): Vec4Shape {
  const d = tm <= 32 ? VEC4_DEFAULTS[32] : tm <= 64 ? VEC4_DEFAULTS[64] : VEC4_DEFAULTS[128];
  const t = vec4Tuning;
  let bk = t.bk ?? d.bk;
  const small = t.smallRowsPerThread ?? d.smallRowsPerThread;
  // Rows per thread: tm / 16 (16 x 16 threads), at least `small` (8: 8 x 8 outputs per thread) below 128 rows.
  const rm = tm / 16 >= 8 || small <= 0 ? tm / 16 : Math.max(tm / 16, small);
  const bytes = (k: number): number => (tm * k + k * VEC4_TN) * 4;
  while (bk > 4 && bytes(bk) > t.wgBytes) bk = Math.max(4, Math.floor(bk / 8) * 4);
  const db = (t.doubleBuffer ?? d.doubleBuffer) && 2 * bytes(bk) <= t.wgBytes;
  return { tm, bk, rm, nt: 16 * (tm / rm), db, unroll: t.unroll ?? d.unroll, prefetch: (t.prefetch ?? d.prefetch) || db, aRowsFast: t.aRowsFast ?? d.aRowsFast };
}

export function vec4ShapeTag(tm: number): string {
  const s = vec4Shape(tm);
  return `${tm}x${VEC4_TN}x${s.bk}r${s.rm}${s.db ? 'db' : ''}${s.unroll ? 'u' : ''}${s.prefetch ? '' : 'np'}${s.aRowsFast ? 'rf' : ''}`;
}

export function gemmTiledVec4Key(c: GemmTiledConfig): string {
  return `gemm-tiled-vec4:${c.mode}:${vec4ShapeTag(c.tm)}:${c.dst}.${c.bias ?? 'nobias'}:${c.epilogue}`;
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

/** Whether `gemm-tiled-vec4` can run a problem with these types, strides and fusion. */
export function vec4Eligible(c: Pick<GemmTiledConfig, 'mode' | 'src' | 'wei' | 'fusion'>, s: Vec4Strides): boolean {
  if (c.mode === 'grouped_k' || c.fusion || c.src !== 'f32' || c.wei !== 'f32') return false;
  return s.ldwn === 1 && [s.K, s.N, s.lda, s.ldwk, s.wg, s.sb].every((v) => v % 4 === 0);
}

export function gemmTiledVec4Wgsl(c: GemmTiledConfig): string {
  const { tm, bk, rm, nt: NT, db, unroll, prefetch, aRowsFast } = vec4Shape(c.tm);
  if (tm % 16 !== 0 || tm > 128 || !Number.isInteger(tm / rm) || (rm !== 2 && rm % 4 !== 0 && rm !== 1) || bk % 4 !== 0) {
    throw new Error(`gemm-tiled-vec4: TM ${tm} (${rm} rows per thread, BK ${bk}) does not fit the thread layout`);
  }
  const TY = tm / rm;
  const vecRows = rm % 4 === 0;
  const D = wgslType(c.dst);
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  // vec4 loads per thread per K slice: A is tm x bk (bk / 4 vec4 per row), B is bk x 128.
  const aVecs = (tm * bk) / 4, aLoads = Math.ceil(aVecs / NT), bVecs = (bk * VEC4_TN) / 4, bLoads = Math.ceil(bVecs / NT);
  const aGuard = aVecs % NT === 0 ? '' : `if (q < ${aVecs}u) `;
  const bGuard = bVecs % NT === 0 ? '' : `if (q < ${bVecs}u) `;
  // Words of one staged slice (double buffering: slice s at s % 2 * this).
  const aSlot = vecRows ? (bk * tm) / 4 : bk * tm, bSlot = bVecs;
  const slots = db ? 2 : 1;
  const tile = c.mode === 'grouped_m' ? `
  let t = wid.y + wid.z * ${Y_FOLD}u;
  if (t >= S[3]) { return; }
  let g = S[4u + 3u * t];
  let m0 = S[5u + 3u * t];
  let m1 = S[6u + 3u * t];
  let aBase = 0u; let wBase = g * P.wg; let dBase = 0u;` : `
  let g = wid.z;
  let m0 = wid.y * ${tm}u; let m1 = min(m0 + ${tm}u, P.M);
  let aBase = g * P.sb; let wBase = g * P.wg; let dBase = g * P.db;`;
  // Which row and K quad the thread's q-th A vec4 is: K quads fastest (a warp reads whole row pieces),
  // or (aRowsFast) rows fastest, so that a warp's transposed stores hit 32 consecutive words of As.
  const aIdx = aRowsFast ? `let m = q % ${tm}u; let kq = (q / ${tm}u) * 4u;` : `let m = q / ${bk / 4}u; let kq = (q % ${bk / 4}u) * 4u;`;
  const decl = (n: number, what: string): string => Array.from({ length: n }, (_, i) => `var ${what}${i} = vec4f(0.0);`).join(' ');
  // Global -> registers for the K slice at kb (zeros past the rows, K or N).
  const load = Array.from({ length: aLoads }, (_, i) => `
    { let q = li + ${NT * i}u; ${aIdx} let r = m0 + m;
      ra${i} = vec4f(0.0); if (q < ${aVecs}u && r < m1 && kb + kq < P.K) { ra${i} = A[(aBase + r * P.lda + kb + kq) / 4u]; } }`).join('') +
    Array.from({ length: bLoads }, (_, i) => `
    { let q = li + ${NT * i}u; let kk = q / ${VEC4_TN / 4}u; let nq = (q % ${VEC4_TN / 4}u) * 4u; let k = kb + kk; let col = n0 + nq;
      rb${i} = vec4f(0.0); if (q < ${bVecs}u && k < P.K && col < P.N) { rb${i} = B[(wBase + k * P.ldwk + col) / 4u]; } }`).join('');
  // Registers -> a workgroup slot (A transposed: k-major, rows contiguous). Flat arrays: the slot at
  // word offsets aS / bS; 2D arrays (unroll): slot `s` (a constant) starts at K row s * bk.
  const store = (s?: number): string => Array.from({ length: aLoads }, (_, i) => `
    { let q = li + ${NT * i}u; ${aIdx}
      ${aGuard}{ ${[0, 1, 2, 3].map((j) => {
    if (s !== undefined) return vecRows ? `As[kq + ${s * bk + j}u][m / 4u][m % 4u] = ra${i}[${j}];` : `As[kq + ${s * bk + j}u][m] = ra${i}[${j}];`;
    return vecRows ? `As[aS + (kq + ${j}u) * ${tm / 4}u + m / 4u][m % 4u] = ra${i}[${j}];` : `As[aS + (kq + ${j}u) * ${tm}u + m] = ra${i}[${j}];`;
  }).join(' ')} } }`).join('') +
    Array.from({ length: bLoads }, (_, i) => `
    { let q = li + ${NT * i}u; ${bGuard}{ ${s !== undefined ? `Bs[q / ${VEC4_TN / 4}u + ${s * bk}u][q % ${VEC4_TN / 4}u]` : 'Bs[bS + q]'} = rb${i}; } }`).join('');
  const accDecl = Array.from({ length: rm }, (_, r) => `var c${r}0 = vec4f(0.0); var c${r}1 = vec4f(0.0);`).join('\n  ');
  // rm a multiple of 4: a thread's rows are contiguous (ty * rm + r), one vec4 read of As per 4 rows;
  // else rows ty + TY r.
  const rowOf = (r: number): string => (vecRows ? `ty * ${rm}u + ${r}u` : `ty + ${TY * r}u`);
  const fmaRows = (aOf: (r: number) => string): string => Array.from({ length: rm }, (_, r) => `
      { let a = vec4f(${aOf(r)}); c${r}0 = fma(a, b0, c${r}0); c${r}1 = fma(a, b1, c${r}1); }`).join('');
  const stores = Array.from({ length: rm }, (_, r) => `
  { let row = m0 + ${rowOf(r)};
    if (row < m1) {
      ${unroll ? [0, 1, 2, 3].map((j) => `put(row, n0 + 4u * tx + ${j}u, c${r}0[${j}]); put(row, n0 + 64u + 4u * tx + ${j}u, c${r}1[${j}]);`).join(' ')
    : `for (var c = 0u; c < 4u; c++) { put(row, n0 + 4u * tx + c, c${r}0[c]); put(row, n0 + 64u + 4u * tx + c, c${r}1[c]); }`}
    } }`).join('');
  // One slice's products: a loop over the flat arrays, or (unroll) every k written out on slot `s`.
  const multiply = (s?: number): string => {
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
  return /* wgsl */ `
${wgslHelpersFor([c.dst, c.bias])}
struct Params { M: u32, K: u32, N: u32, lda: u32, ldwk: u32, ldwn: u32, wg: u32, ldd: u32, sb: u32, db: u32, bg: u32, bn: u32, tilesN: u32, _p0: u32, _p1: u32, _p2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<vec4f>;
@group(0) @binding(2) var<storage, read> B: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
${c.mode !== 'dense' ? '@group(0) @binding(4) var<storage, read> S: array<u32>;' : ''}
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}
${arrays}

fn put(row: u32, col: u32, acc: f32) {
  if (col >= P.N) { return; }
  var v = acc;
  ${Bi ? `v += ${Bi.load('BIAS', 'gg * P.bg + col * P.bn')};` : ''}
  ${c.epilogue}
  ${wgslStore(c.dst, 'D', 'dd + row * P.ldd + col', 'v')}
}

var<private> gg: u32;
var<private> dd: u32;

@compute @workgroup_size(${NT})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${tile}
  gg = g; dd = dBase;
  let n0 = wid.x * ${VEC4_TN}u;
  let tx = li % 16u;
  let ty = li / 16u;
  ${unroll ? `let tx16 = tx + 16u; ${vecRows ? `let ar = ty * ${rm / 4}u;` : ''}` : ''}
  ${decl(aLoads, 'ra')} ${decl(bLoads, 'rb')}
  ${accDecl}${mainLoop}
  ${stores}
}
`;
}
