import { wgslHelpersFor, wgslStore, wgslType } from './wgsl_dtypes.js';
import type { GemmTiledConfig } from './gemm_tiled.js';
import { Y_FOLD } from './grouped_schedule.js';

/**
 * `gemm-tiled-vec4`: the f32 x f32 prefill GEMM. Same bindings, params and tile schedule as
 * `gemm-tiled` (gemm_tiled.ts), so the executor swaps one for the other; what differs is the inner
 * loop: A and B are read from global memory as vec4f (16-byte loads), the next K slice is loaded into
 * registers while the current one is multiplied (one shared-memory buffer, register double
 * buffering), and each of the 256 threads (16 x 16) owns a (TM/16) x 8 register tile: columns
 * `4 tx .. 4 tx + 3` and `64 + 4 tx .. 64 + 4 tx + 3` (two vec4 reads of workgroup memory per k), rows
 * `ty * TM/16 ..` contiguous for TM = 64 / 128 (one vec4 read per 4 rows), `ty + 16 r` for TM = 32.
 *
 * Preconditions (vec4Eligible): f32 src and weights, unit column strides, K, N, lda, ldwk, the weights'
 * group stride and the src batch stride multiples of 4, TN = 128, grouped M or dense (grouped K starts
 * its K range at a runtime offset, not a multiple of 4). No rfcs/0002 fusion: bias and eltwise only.
 * Each output is one fma chain over k ascending, so a second run gives the same bits.
 */
export const VEC4_TN = 128;
export const VEC4_BK = 16;

export function gemmTiledVec4Key(c: GemmTiledConfig): string {
  return `gemm-tiled-vec4:${c.mode}:${c.tm}x${VEC4_TN}x${VEC4_BK}:${c.dst}.${c.bias ?? 'nobias'}:${c.epilogue}`;
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
  const tm = c.tm, bk = VEC4_BK;
  if (tm % 16 !== 0 || tm > 128) throw new Error(`gemm-tiled-vec4: TM ${tm} must be a multiple of 16 up to 128`);
  const rm = tm / 16;
  const vecRows = rm % 4 === 0;
  const D = wgslType(c.dst);
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  // vec4 loads per thread per K slice: A is tm x bk (bk / 4 vec4 per row), B is bk x 128.
  const aVecs = (tm * bk) / 4, aLoads = Math.ceil(aVecs / 256), bLoads = (bk * VEC4_TN) / 4 / 256;
  const aGuard = aVecs % 256 === 0 ? '' : `if (q < ${aVecs}u) `;
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
  const decl = (n: number, what: string): string => Array.from({ length: n }, (_, i) => `var ${what}${i} = vec4f(0.0);`).join(' ');
  // Global -> registers for the K slice at kb (zeros past the rows, K or N).
  const load = Array.from({ length: aLoads }, (_, i) => `
    { let q = li + ${256 * i}u; let m = q / ${bk / 4}u; let kq = (q % ${bk / 4}u) * 4u; let r = m0 + m;
      ra${i} = vec4f(0.0); if (q < ${aVecs}u && r < m1 && kb + kq < P.K) { ra${i} = A[(aBase + r * P.lda + kb + kq) / 4u]; } }`).join('') +
    Array.from({ length: bLoads }, (_, i) => `
    { let q = li + ${256 * i}u; let kk = q / ${VEC4_TN / 4}u; let nq = (q % ${VEC4_TN / 4}u) * 4u; let k = kb + kk; let col = n0 + nq;
      rb${i} = vec4f(0.0); if (k < P.K && col < P.N) { rb${i} = B[(wBase + k * P.ldwk + col) / 4u]; } }`).join('');
  const store = Array.from({ length: aLoads }, (_, i) => `
    { let q = li + ${256 * i}u; let m = q / ${bk / 4}u; let kq = (q % ${bk / 4}u) * 4u;
      ${aGuard}{ ${[0, 1, 2, 3].map((j) => (vecRows ? `As[(kq + ${j}u) * ${tm / 4}u + m / 4u][m % 4u] = ra${i}[${j}];` : `As[(kq + ${j}u) * ${tm}u + m] = ra${i}[${j}];`)).join(' ')} } }`).join('') +
    Array.from({ length: bLoads }, (_, i) => `
    Bs[li + ${256 * i}u] = rb${i};`).join('');
  const accDecl = Array.from({ length: rm }, (_, r) => `var c${r}0 = vec4f(0.0); var c${r}1 = vec4f(0.0);`).join('\n  ');
  // 4 or 8 rows per thread: its rows are contiguous (ty * rm + r), one vec4 read of As per 4 rows.
  const aOf = (r: number): string => (vecRows ? `av${r >> 2}[${r & 3}]` : `As[kk * ${tm}u + ty + ${16 * r}u]`);
  const aVec = vecRows ? Array.from({ length: rm / 4 }, (_, h) => `
      let av${h} = As[kk * ${tm / 4}u + ty * ${rm / 4}u + ${h}u];`).join('') : '';
  const fmas = aVec + Array.from({ length: rm }, (_, r) => `
      { let a = vec4f(${aOf(r)}); c${r}0 = fma(a, b0, c${r}0); c${r}1 = fma(a, b1, c${r}1); }`).join('');
  const stores = Array.from({ length: rm }, (_, r) => `
  { let row = m0 + ${vecRows ? `ty * ${rm}u + ${r}u` : `ty + ${16 * r}u`};
    if (row < m1) {
      for (var c = 0u; c < 4u; c++) { put(row, n0 + 4u * tx + c, c${r}0[c]); put(row, n0 + 64u + 4u * tx + c, c${r}1[c]); }
    } }`).join('');
  return /* wgsl */ `
${wgslHelpersFor([c.dst, c.bias])}
struct Params { M: u32, K: u32, N: u32, lda: u32, ldwk: u32, ldwn: u32, wg: u32, ldd: u32, sb: u32, db: u32, bg: u32, bn: u32, tilesN: u32, _p0: u32, _p1: u32, _p2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<vec4f>;
@group(0) @binding(2) var<storage, read> B: array<vec4f>;
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
${c.mode !== 'dense' ? '@group(0) @binding(4) var<storage, read> S: array<u32>;' : ''}
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}

var<workgroup> As: array<${vecRows ? `vec4f, ${(bk * tm) / 4}` : `f32, ${bk * tm}`}>;
var<workgroup> Bs: array<vec4f, ${(bk * VEC4_TN) / 4}>;

fn put(row: u32, col: u32, acc: f32) {
  if (col >= P.N) { return; }
  var v = acc;
  ${Bi ? `v += ${Bi.load('BIAS', 'gg * P.bg + col * P.bn')};` : ''}
  ${c.epilogue}
  ${wgslStore(c.dst, 'D', 'dd + row * P.ldd + col', 'v')}
}

var<private> gg: u32;
var<private> dd: u32;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${tile}
  gg = g; dd = dBase;
  let n0 = wid.x * ${VEC4_TN}u;
  let tx = li % 16u;
  let ty = li / 16u;
  ${decl(aLoads, 'ra')} ${decl(bLoads, 'rb')}
  ${accDecl}
  var kb = 0u;
  ${load}
  loop {
    if (kb >= P.K) { break; }
    ${store}
    workgroupBarrier();
    kb += ${bk}u;
    if (kb < P.K) {${load}
    }
    for (var kk = 0u; kk < ${bk}u; kk++) {
      let b0 = Bs[kk * ${VEC4_TN / 4}u + tx];
      let b1 = Bs[kk * ${VEC4_TN / 4}u + 16u + tx];${fmas}
    }
    workgroupBarrier();
  }
  ${stores}
}
`;
}
