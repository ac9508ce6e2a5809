import type { GemmTiledConfig } from './gemm_tiled.js';
import { wgslHelpersFor, wgslType } from './wgsl_dtypes.js';
import { fusionBindingsWgsl, fusionEpilogueWgsl } from './gemm_fusion.js';
import { Y_FOLD } from './grouped_schedule.js';
import type { GemmFusion } from './wgsl_quant.js';

/**
 * `gemm-tiled-dot4`: the W8A8 integer GEMM with WGSL's packed 4 x 8-bit dot products
 * (`dot4I8Packed` for s8 x s8, `dot4U8Packed` for u8 x u8; the `packed_4x8_integer_dot_product`
 * language feature). The tile, thread layout (16 x 16 threads, rows `ty + 16 r`, columns
 * `tx + 16 j`), bindings, params and epilogue are those of `gemm-tiled` with an integer fusion
 * (gemm_tiled.ts, gemm_fusion.ts): the staged slices hold four consecutive k of a row of A / a column
 * of B packed in one u32, so the inner loop does one dot4 (four MACs, exact i32) per operand pair.
 * Zero points are refused (codes minus zero points leave the 8-bit range), as are the GLU and K
 * blocked scales (dot4Eligible): those keep the i32 path of gemm-tiled.
 */
export function dot4Eligible(c: Pick<GemmTiledConfig, 'src' | 'wei'>, f: GemmFusion | undefined): boolean {
  if (!f?.intAcc || f.glu || f.srcZp || f.weiZp) return false;
  return (c.src === 's8' && c.wei === 's8') || (c.src === 'u8' && c.wei === 'u8');
}

export function gemmTiledDot4Key(c: GemmTiledConfig): string {
  return `gemm-tiled-dot4:${c.mode}:${c.tm}x${c.tn}x${c.bk}:${c.src}.${c.wei}.${c.dst}.${c.bias ?? 'nobias'}`;
}

export function gemmTiledDot4Wgsl(c: GemmTiledConfig, f: GemmFusion): string {
  const { tm, tn } = c;
  const bk = Math.max(16, c.bk);
  const bq = bk / 4;
  const rm = tm / 16, rn = tn / 16;
  const A = wgslType(c.src), B = wgslType(c.wei), D = wgslType(c.dst);
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  const dot = c.src === 's8' ? 'dot4I8Packed' : 'dot4U8Packed';
  const tile =
    c.mode === 'grouped_m' ? `
  let t = wid.y + wid.z * ${Y_FOLD}u;
  if (t >= S[3]) { return; }
  let g = S[4u + 3u * t];
  let m0 = S[5u + 3u * t];
  let m1 = S[6u + 3u * t];
  let aBase = 0u; let wBase = g * P.wg; let dBase = 0u; let k0 = 0u; let k1 = P.K;` :
    c.mode === 'grouped_k' ? `
  let g = wid.z;
  let m0 = wid.y * ${tm}u; let m1 = min(m0 + ${tm}u, P.M);
  let aBase = 0u; let wBase = 0u; let dBase = g * P.db; let k0 = S[4u + g]; let k1 = S[5u + g];` : `
  let g = wid.z;
  let m0 = wid.y * ${tm}u; let m1 = min(m0 + ${tm}u, P.M);
  let aBase = g * P.sb; let wBase = g * P.wg; let dBase = g * P.db; let k0 = 0u; let k1 = P.K;`;
  const batchIdx = c.mode === 'dense' ? 'let bS = select(0u, g, P.sb != 0u); let bW = select(0u, g, P.wg != 0u);' : 'let bS = g; let bW = g;';
  // One byte of a staged word: the code's low 8 bits (0 past the K range / rows / columns).
  const loadA = (j: number): string => `select(0u, u32(${A.loadInt!('A', `aBase + r * P.lda + k + ${j}u`)}) & 0xffu, inA && k + ${j}u < k1)`;
  const loadB = (j: number): string => `select(0u, u32(${B.loadInt!('B', `wBase + (k + ${j}u) * P.ldwk + col * P.ldwn`)}) & 0xffu, inB && k + ${j}u < k1)`;
  return /* wgsl */ `
${wgslHelpersFor([c.src, c.wei, c.dst, c.bias, ...[f.srcScale, f.weiScale, f.dstScale, f.dstZp, ...f.binary].flatMap((o) => (o ? [o.dt] : []))])}
struct Params { M: u32, K: u32, N: u32, lda: u32, ldwk: u32, ldwn: u32, wg: u32, ldd: u32, sb: u32, db: u32, bg: u32, bn: u32, tilesN: u32, _p0: u32, _p1: u32, _p2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> A: array<${A.array}>;
@group(0) @binding(2) var<storage, read> B: array<${B.array}>;
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
${c.mode !== 'dense' ? '@group(0) @binding(4) var<storage, read> S: array<u32>;' : ''}
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}
${fusionBindingsWgsl(f, c)}

var<workgroup> As: array<u32, ${bq * tm}>;
var<workgroup> Bs: array<u32, ${bq * tn}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${tile}
  ${batchIdx}
  let n0 = wid.x * ${tn}u;
  let tx = li % 16u;
  let ty = li / 16u;
  var acc: array<array<i32, ${rn}>, ${rm}>;
  for (var kb = k0; kb < k1; kb += ${bk}u) {
    for (var i = li; i < ${bq * tm}u; i += 256u) {
      let m = i / ${bq}u; let kq = i % ${bq}u;
      let r = m0 + m; let k = kb + 4u * kq; let inA = r < m1;
      As[kq * ${tm}u + m] = ${loadA(0)} | (${loadA(1)} << 8u) | (${loadA(2)} << 16u) | (${loadA(3)} << 24u);
    }
    for (var i = li; i < ${bq * tn}u; i += 256u) {
      let kq = i / ${tn}u; let n = i % ${tn}u;
      let k = kb + 4u * kq; let col = n0 + n; let inB = col < P.N;
      Bs[kq * ${tn}u + n] = ${loadB(0)} | (${loadB(1)} << 8u) | (${loadB(2)} << 16u) | (${loadB(3)} << 24u);
    }
    workgroupBarrier();
    for (var kq = 0u; kq < ${bq}u; kq++) {
      var a: array<u32, ${rm}>;
      var b: array<u32, ${rn}>;
      for (var r = 0u; r < ${rm}u; r++) { a[r] = As[kq * ${tm}u + ty + 16u * r]; }
      for (var j = 0u; j < ${rn}u; j++) { b[j] = Bs[kq * ${tn}u + tx + 16u * j]; }
      for (var r = 0u; r < ${rm}u; r++) {
        for (var j = 0u; j < ${rn}u; j++) { acc[r][j] += ${c.src === 's8' ? '' : 'i32('}${dot}(a[r], b[j])${c.src === 's8' ? '' : ')'}; }
      }
    }
    workgroupBarrier();
  }
  ${fusionEpilogueWgsl(f, c)}
}
`;
}
