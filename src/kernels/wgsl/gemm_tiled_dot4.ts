import { gemmParamsWgsl, gemmTiledKey, gemmTileWgsl, zeroTileWgsl, type GemmTiledConfig } from './gemm_tiled.js';
import { gemmThreads, vecOf } from './gemm_threads.js';
import { wgslHelpersFor, wgslType } from './wgsl_dtypes.js';
import { fusionBindingsWgsl, fusionEpilogueWgsl } from './gemm_fusion.js';
import type { GemmFusion } from './wgsl_quant.js';

/**
 * `gemm-tiled-dot4`: the W8A8 integer GEMM with WGSL's packed 4 x 8-bit dot products
 * (`dot4I8Packed` for s8 x s8, `dot4U8Packed` for u8 x u8; the `packed_4x8_integer_dot_product`
 * language feature). The tile, thread layout (gemm_threads.ts), row modes and binding windows
 * (gemm_rows.ts), bindings, params and epilogue are those of `gemm-tiled` with an integer fusion
 * (gemm_tiled.ts, gemm_fusion.ts): the staged slices hold four consecutive k of a row of A / a column
 * of B packed in one u32, read back as vectors of such words, so the inner loop does one dot4 (four
 * MACs, exact i32) per operand pair. Zero points are refused (codes minus zero points leave the
 * 8-bit range), as are the GLU and K blocked scales (dot4Eligible): those keep the i32 path of
 * gemm-tiled.
 */
export function dot4Eligible(c: Pick<GemmTiledConfig, 'src' | 'wei'>, f: GemmFusion | undefined): boolean {
  if (!f?.intAcc || f.glu || f.srcZp || f.weiZp) return false;
  return (c.src === 's8' && c.wei === 's8') || (c.src === 'u8' && c.wei === 'u8');
}

export function gemmTiledDot4Key(c: GemmTiledConfig): string {
  return `gemm-tiled-dot4:${gemmTiledKey(c)}`;
}

export function gemmTiledDot4Wgsl(c: GemmTiledConfig, f: GemmFusion): string {
  const { tm, tn } = c;
  const bk = Math.max(16, c.bk);
  const bq = bk / 4;
  const th = gemmThreads(c);
  const { ty: TY, threads: NT, rm, rn, wa, wb } = th;
  const A = wgslType(c.src), B = wgslType(c.wei), D = wgslType(c.dst);
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  const R = c.rows;
  const dot = c.src === 's8' ? 'dot4I8Packed' : 'dot4U8Packed';
  const batchIdx = c.mode === 'dense' ? 'let bS = select(0u, g, P.sb != 0u); let bW = select(0u, g, P.wg != 0u);' : 'let bS = g; let bW = g;';
  // Words per packed-k row of the staged A slice, padded as in gemm-tiled.
  const lda = tm + 4;
  const off = (o: string): string => (R ? ` - P.${o}` : '');
  // One byte of a staged word: the code's low 8 bits (0 past the K range / rows / columns).
  const loadA = (j: number): string => `select(0u, u32(${A.loadInt!('A', `aBase + r * P.lda + k + ${j}u${off('aOff')}`)}) & 0xffu, inA && k + ${j}u < k1)`;
  const loadB = (j: number): string => `select(0u, u32(${B.loadInt!('B', `wBase + (k + ${j}u) * P.ldwk + col * P.ldwn${off('wOff')}`)}) & 0xffu, inB && k + ${j}u < k1)`;
  // Staging: a run of wa rows (A) / wb columns (B) of packed words per thread, written as one vector.
  const rowA = (e: number): string => R?.gather
    ? `let rr = m0 + mq + ${e}u; var r = 0u; var inA = false; if (rr < m1) { let ti = TI[rr]; inA = ti >= 0; r = u32(max(ti, 0)); }`
    : `let r = m0 + mq + ${e}u; let inA = r < m1;`;
  const word = (ld: (j: number) => string): string => `${ld(0)} | (${ld(1)} << 8u) | (${ld(2)} << 16u) | (${ld(3)} << 24u)`;
  const lanes = (w: number): string => Array.from({ length: w }, (_, e) => `x${e}`).join(', ');
  const stageA = Array.from({ length: wa }, (_, e) => `
      var x${e} = 0u; { ${rowA(e)} x${e} = ${word(loadA)}; }`).join('');
  const stageB = Array.from({ length: wb }, (_, e) => `
      var x${e} = 0u; { let col = n0 + p + ${(e * tn) / wb}u; let inB = col < P.N; x${e} = ${word(loadB)}; }`).join('');
  const aReads = Array.from({ length: rm / wa }, (_, h) => `
      let a${h} = As[kq * ${lda / wa}u + ${h * TY}u + ty];`).join('');
  const bReads = Array.from({ length: rn / wb }, (_, q) => `
      let b${q} = Bs[kq * ${tn / wb}u + ${q * 16}u + tx];`).join('');
  // Row r: lane r % wa of A vector r / wa; column j: lane j / qn of B vector j % qn (gemm_threads.ts).
  const qn = rn / wb;
  const laneA = (r: number): string => (wa === 1 ? `a${r}` : `a${Math.floor(r / wa)}[${r % wa}]`);
  const laneB = (j: number): string => (wb === 1 ? `b${j}` : `b${j % qn}[${Math.floor(j / qn)}]`);
  const cast = (e: string): string => (c.src === 's8' ? e : `i32(${e})`);
  const dots = Array.from({ length: rm }, (_, r) => Array.from({ length: rn }, (_, j) =>
    `acc[${r}][${j}] += ${cast(`${dot}(${laneA(r)}, ${laneB(j)})`)};`).join(' ')).join('\n      ');
  return /* wgsl */ `
${wgslHelpersFor([c.src, c.wei, c.dst, c.bias, ...[f.srcScale, f.weiScale, f.dstScale, f.dstZp, ...f.binary].flatMap((o) => (o ? [o.dt] : []))])}
${gemmParamsWgsl(c)}
@group(0) @binding(1) var<storage, read> A: array<${A.array}>;
@group(0) @binding(2) var<storage, read> B: array<${B.array}>;
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}
${fusionBindingsWgsl(f, c)}

var<workgroup> As: array<${vecOf('u32', wa)}, ${(bq * lda) / wa}>;
var<workgroup> Bs: array<${vecOf('u32', wb)}, ${(bq * tn) / wb}>;

@compute @workgroup_size(${NT})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${gemmTileWgsl(c)}
  ${batchIdx}
  let n0 = wid.x * ${tn}u;
  let tx = li % 16u;
  let ty = li / 16u;
  ${R?.zeroFill ? zeroTileWgsl(c) : ''}
  var acc: array<array<i32, ${rn}>, ${rm}>;
  for (var kb = k0; kb < k1; kb += ${bk}u) {
    for (var q = li; q < ${(bq * tm) / wa}u; q += ${NT}u) {
      let mq = (q / ${bq}u) * ${wa}u; let kq = q % ${bq}u; let k = kb + 4u * kq;${stageA}
      As[kq * ${lda / wa}u + mq / ${wa}u] = ${vecOf('u32', wa)}(${lanes(wa)});
    }
    for (var q = li; q < ${(bq * tn) / wb}u; q += ${NT}u) {
      let kq = q / ${tn / wb}u; let p = q % ${tn / wb}u; let k = kb + 4u * kq;${stageB}
      Bs[q] = ${vecOf('u32', wb)}(${lanes(wb)});
    }
    workgroupBarrier();
    for (var kq = 0u; kq < ${bq}u; kq++) {${aReads}${bReads}
      ${dots}
    }
    workgroupBarrier();
  }
  ${fusionEpilogueWgsl(f, c)}
}
`;
}
