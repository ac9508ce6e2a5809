import type { DataType } from '../../common/data_type.js';
import { wgslHelpersFor, wgslStore, wgslType } from './wgsl_dtypes.js';
import { gemmFusionKey, type GemmFusion } from './wgsl_quant.js';
import {
  type WeiKBlocks, fusionBindingsWgsl, fusionEpilogueWgsl, fusionLoadA, fusionLoadB, fusionLoadBHoisted, hoistedWeightOperands, hoistFlagsWgsl,
} from './gemm_fusion.js';
import { decodeKey, kLoopWgsl, stagingKey, weightsArrayType } from './gemm_tiled_staging.js';
import { Y_FOLD, ZERO_TILE } from './grouped_schedule.js';
import { colOfWgsl, gemmThreads, rowOfWgsl, vecOf } from './gemm_threads.js';
import { TOKEN_INDEX_BINDING, TOKEN_KS_BINDING, biasIndexWgsl, dstIndexWgsl, epilogueRowWgsl, type GemmRows } from './gemm_rows.js';

/**
 * `gemm-tiled`: a register-blocked GEMM, 16 x TY threads each computing an rm x rn register tile of a
 * TM x TN tile (gemm_threads.ts); BK-deep slices of A and B staged in workgroup memory, dequantized
 * once per element while staged (gemm_fusion.ts; K-slice-constant weight scales once per slice;
 * weights in chunks of consecutive columns, register prefetch of the next slice where a thread stages
 * few registers: gemm_tiled_staging.ts), then read back as vectors: per k a thread does rm x rn FMAs
 * for rm / wa + rn / wb vector reads (A's k rows padded by 4 words so the staging writes, 16
 * consecutive k of a row, spread over the banks). One family serves the three matmul kinds, which
 * differ only in where a tile's rows, expert and K range come from:
 *  - dense: tile (x = N tile, y = M tile, z = batch);
 *  - grouped_m: tile t of the device-written schedule (expert, m0, m1, group) (grouped_schedule.ts);
 *  - grouped_k: z = group, its K range from the validated offsets in the schedule.
 * Every row mode (gemm_rows.ts), fusion (GLU, scales, zero points, binary, sum) and binding window
 * takes this kernel. Accumulation is f32 (i32 for integer GEMMs) in a fixed k order: a second run
 * gives the same bits.
 */
export interface GemmTiledConfig {
  readonly mode: 'dense' | 'grouped_m' | 'grouped_k';
  readonly tm: number;
  readonly tn: number;
  readonly bk: number;
  readonly src: DataType;
  readonly wei: DataType;
  readonly dst: DataType;
  readonly bias: DataType | undefined;
  /** WGSL statements applied to `v` (f32) after the bias, e.g. eltwise post-ops. */
  readonly epilogue: string;
  /**
   * Scales, zero points, binary / sum post-ops and the GLU (rfcs/0002; gemm_fusion.ts). Given, it
   * replaces `epilogue` (its chain holds the eltwise steps too).
   */
  readonly fusion?: GemmFusion;
  /**
   * MoE row modes and bindings windows (gemm_rows.ts); absent, the kernel and its 16-word params are
   * those of a plain GEMM.
   */
  readonly rows?: GemmRows;
  /**
   * Weights staged in chunks of this many consecutive columns (gemm_tiled_staging.ts), set by the host
   * where the strides allow it; absent, one element per load.
   */
  readonly bChunk?: number;
  /**
   * K blocks of the weights' K-blocked scales / zero points, given by the host where they are
   * multiples of BK and K ranges start at 0 (dense, grouped M): the kernel holds them per column in
   * registers in every slice, with no per-element path (gemm_fusion.ts WeiKBlocks).
   */
  readonly weiKBlocks?: WeiKBlocks;
  /**
   * A dense matmul's batch launches (batch_dims.ts): the bias is read from an element offset (params
   * word 14, `bOff`; src / weights / dst take the row modes' aOff / wOff / dOff, so `rows` is set).
   */
  readonly launchOffsets?: boolean;
}


export function gemmTiledKey(c: GemmTiledConfig): string {
  const r = c.rows ? `:rows${c.rows.gather ? 'G' : ''}${c.rows.scatter ? 'S' : ''}${c.rows.zeroFill ? 'Z' : ''}${c.rows.counts ? 'C' : ''}` : '';
  return `gemm-tiled:${c.mode}:${c.tm}x${c.tn}x${c.bk}t${gemmThreads(c).threads}:${c.src}.${c.wei}.${c.dst}.${c.bias ?? 'nobias'}:${c.epilogue}${c.fusion ? `:${gemmFusionKey(c.fusion)}` : ''}${r}${c.launchOffsets ? ':lo' : ''}${stagingKey(c)}${kBlocksKey(c.weiKBlocks)}${decodeKey(c)}`;
}

function kBlocksKey(kb: WeiKBlocks | undefined): string {
  return kb ? `:kb${kb.wsc ?? ''}.${kb.wzp ?? ''}` : '';
}

/**
 * Where a workgroup's tile lies: g (expert / batch / group), gq (the group: src / dst scales, zero
 * points and binary src1 with one entry per group; g but under an expert map), rows [m0, m1), the src /
 * weights / dst bases and the K range; returns early for a tile outside the schedule or this
 * dispatch's window.
 */
export function gemmTileWgsl(c: GemmTiledConfig): string {
  const { tm } = c;
  const R = c.rows;
  return (
    c.mode === 'grouped_m' ? `
  let t = wid.y + wid.z * ${Y_FOLD}u;
  if (t >= S[3]) { return; }
  let g = S[4u + 4u * t];
  let m0 = S[5u + 4u * t];
  let m1 = S[6u + 4u * t];
  let gq = S[7u + 4u * t];
  let aBase = 0u; let wBase = g * P.wg; let dBase = 0u; let k0 = 0u; let k1 = P.K;${R ? `
  // Zero tiles run in the first expert window only.
  if (select(g < P.eLo || g >= P.eHi, P.eLo != 0u, g == ${ZERO_TILE}u)) { return; }
  if (m0 < P.rLo || m0 >= P.rHi) { return; }` : ''}` :
    c.mode === 'grouped_k' ? `
  // Dispatched over every (N, M, group) tile: nothing runs after the schedule found an error.
  if (S[3] == 0u) { return; }
  let g = wid.z; let gq = g;
  let m0 = wid.y * ${tm}u; let m1 = min(m0 + ${tm}u, P.M);
  let aBase = 0u; let wBase = 0u; let dBase = g * P.db; let k0 = S[4u + g]; let k1 = S[5u + g];` : `
${R?.counts ? `  // Dispatched over every batch's capacity: nothing runs after the schedule found an error.
  if (S[3] == 0u) { return; }
` : ''}  let g = wid.z; let gq = g;
  let m0 = wid.y * ${tm}u; let m1 = min(m0 + ${tm}u, ${R?.counts ? 'min(P.M, S[4u + g])' : 'P.M'});${R ? `
  if (m0 >= m1 || g < P.eLo || g >= P.eHi || m0 < P.rLo || m0 >= P.rHi) { return; }` : ''}
  let aBase = g * P.sb; let wBase = g * P.wg; let dBase = g * P.db; let k0 = 0u; let k1 = P.K;`);
}

/** The params struct (16 plain words, the row-mode words with row modes) and the storage bindings of the schedule and row maps. */
export function gemmParamsWgsl(c: GemmTiledConfig): string {
  const R = c.rows;
  return `struct Params { M: u32, K: u32, N: u32, lda: u32, ldwk: u32, ldwn: u32, wg: u32, ldd: u32, sb: u32, db: u32, bg: u32, bn: u32, tilesN: u32, bm: u32, ${c.launchOffsets ? 'bOff' : '_p1'}: u32, _p2: u32${R ? ', topK: u32, aOff: u32, wOff: u32, dOff: u32, eLo: u32, eHi: u32, rLo: u32, rHi: u32' : ''} }
@group(0) @binding(0) var<uniform> P: Params;
${c.mode !== 'dense' || R?.counts ? '@group(0) @binding(4) var<storage, read> S: array<u32>;' : ''}
${R?.gather || R?.scatter ? `@group(0) @binding(${TOKEN_INDEX_BINDING}) var<storage, read> TI: array<i32>;` : ''}
${R?.scatter ? `@group(0) @binding(${TOKEN_KS_BINDING}) var<storage, read> KS: array<i32>;` : ''}`;
}

/**
 * Params (uniform, 16 x u32): M, K, N, lda, ldwk, ldwn, wg (weights stride per group / batch), ldd,
 * sb (src batch stride), db (dst batch / group stride), bg (bias stride per group / batch), bn (bias
 * stride along N), tilesN, _, _, _.
 */
export function gemmTiledWgsl(c: GemmTiledConfig): string {
  const { tm, tn, bk } = c;
  const th = gemmThreads(c);
  const { ty: TY, threads: NT, rm, rn, wa, wb } = th;
  const A = wgslType(c.src), B = wgslType(c.wei), D = wgslType(c.dst);
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  const f = c.fusion;
  const R = c.rows;
  // The staged and accumulated type: i32 for an integer GEMM, else f32.
  const T = f?.intAcc ? 'i32' : 'f32';
  const zero = f?.intAcc ? '0i' : '0.0';
  // Words per k row of the staged A slice (padded: see the header).
  const lda = tm + 4;
  const tile = gemmTileWgsl(c);
  // Batch coordinates of src and weights in the rfcs/0002 maps (dense: 0 where broadcast).
  const batchIdx = c.mode === 'dense' ? 'let bS = select(0u, g, P.sb != 0u); let bW = select(0u, g, P.wg != 0u);' : 'let bS = g; let bW = g;';
  const defaultEpilogue = f ? '' : plainEpilogueWgsl(c);
  const aIdx = `aBase + r * P.lda + k${R ? ' - P.aOff' : ''}`, bIdx = `wBase + k * P.ldwk + col * P.ldwn${R ? ' - P.wOff' : ''}`;
  const loadA = f ? fusionLoadA(f, c, aIdx) : `v = ${A.load('A', aIdx)};`;
  const hoist = f !== undefined && hoistedWeightOperands(f).length > 0;
  const loadB = (e: number): string => (f ? (hoist ? fusionLoadBHoisted(f, c, bIdx, e) : fusionLoadB(f, c, bIdx)) : `v = ${B.load('B', bIdx)};`);
  // The inner loop, unrolled over the register tile: named vector accumulators c<r>_<q> (lane e: column
  // j = e qn + q, or j = q wb + e in the runs layout).
  const qn = rn / wb;
  const accDecl = Array.from({ length: rm }, (_, r) => Array.from({ length: qn }, (_, q) => `var c${r}_${q} = ${vecOf(T, wb)}();`).join(' ')).join('\n  ');
  const aReads = Array.from({ length: rm / wa }, (_, h) => `
      let a${h} = As[kk * ${lda / wa}u + ${h * TY}u + ty];`).join('');
  const bReads = Array.from({ length: qn }, (_, q) => `
      let b${q} = Bs[kk * ${tn / wb}u + ${q * 16}u + tx];`).join('');
  const aOf = (r: number): string => (wa === 1 ? `a${r}` : `a${Math.floor(r / wa)}[${r % wa}]`);
  const fmas = Array.from({ length: rm }, (_, r) => {
    const a = wb === 1 ? aOf(r) : `${vecOf(T, wb)}(${aOf(r)})`;
    return `
      { let a = ${a};${Array.from({ length: qn }, (_, q) => (f?.intAcc ? ` c${r}_${q} += a * b${q};` : ` c${r}_${q} = fma(a, b${q}, c${r}_${q});`)).join('')} }`;
  }).join('');
  // The epilogues index acc[r][j] (gemm_threads.ts row / column of each).
  const accCopy = Array.from({ length: rm }, (_, r) => Array.from({ length: rn }, (_, j) =>
    `acc[${r}][${j}] = ${th.runs ? `c${r}_${Math.floor(j / wb)}${wb === 1 ? '' : `[${j % wb}]`}` : `c${r}_${j % qn}${wb === 1 ? '' : `[${Math.floor(j / qn)}]`}`};`).join(' ')).join('\n  ');
  // grouped_m reads its tile from a storage buffer: the early return is uniform per workgroup
  // (workgroup_id and read-only storage), which the barriers below need.
  return /* wgsl */ `
${wgslHelpersFor([c.src, c.wei, c.dst, c.bias, ...(f ? fusionTypes(f) : [])])}
${gemmParamsWgsl(c)}
@group(0) @binding(1) var<storage, read> A: array<${A.array}>;
@group(0) @binding(2) var<storage, read> B: array<${weightsArrayType(c, B.array)}>;
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}
${f ? fusionBindingsWgsl(f, c) : ''}

var<workgroup> As: array<${vecOf(T, wa)}, ${(bk * lda) / wa}>;
var<workgroup> Bs: array<${vecOf(T, wb)}, ${(bk * tn) / wb}>;

@compute @workgroup_size(${NT})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${tile}
  ${f ? batchIdx : ''}
  ${f ? hoistFlagsWgsl(f, bk, c.weiKBlocks) : ''}
  let n0 = wid.x * ${f?.glu ? tn / 2 : tn}u;
  let tx = li % 16u;
  let ty = li / 16u;
  ${R?.zeroFill ? zeroTileWgsl(c) : ''}
  ${accDecl}
  ${kLoopWgsl({ c, T, zero, loadA, loadB, hoist }, `
    for (var kk = 0u; kk < ${bk}u; kk++) {${aReads}${bReads}${fmas}
    }`)}
  var acc: array<array<${T}, ${rn}>, ${rm}>;
  ${accCopy}
  ${f ? fusionEpilogueWgsl(f, c) : defaultEpilogue}
}
`;
}

/** The types whose helpers the fusion's loads and stores call. */
function fusionTypes(f: GemmFusion): DataType[] {
  return [f.srcScale, f.srcZp, f.weiScale, f.weiZp, f.dstScale, f.dstZp, ...f.binary].flatMap((o) => (o ? [o.dt] : []));
}

/** The plain epilogue: bias, the eltwise statements, the store. */
function plainEpilogueWgsl(c: GemmTiledConfig): string {
  const th = gemmThreads(c);
  const { rm, rn } = th;
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  return /* wgsl */ `
  for (var r = 0u; r < ${rm}u; r++) {
    ${epilogueRowWgsl(c)}
    for (var j = 0u; j < ${rn}u; j++) {
      let col = n0 + ${colOfWgsl(th, 'j')};
      if (col >= P.N) { continue; }
      var v = acc[r][j];
      ${Bi ? `v += ${Bi.load('BIAS', biasIndexWgsl(c, 'col'))};` : ''}
      ${c.epilogue}
      ${wgslStore(c.dst, 'D', dstIndexWgsl(c, 'col'), 'v')}
    }
  }`;
}

/** A ZERO_TILE tile (rows in no group): zeros in the dst columns of this N tile, nothing else. */
export function zeroTileWgsl(c: GemmTiledConfig): string {
  const th = gemmThreads(c);
  const { rm, rn } = th;
  const jn = c.fusion?.glu ? rn / 2 : rn;
  const cols = c.fusion ? 'Q[0].x' : 'P.N';
  return /* wgsl */ `if (g == ${ZERO_TILE}u) {
    for (var r = 0u; r < ${rm}u; r++) {
      let row = m0 + ${rowOfWgsl(th, 'r')};
      if (row >= m1) { continue; }
      for (var j = 0u; j < ${jn}u; j++) {
        let col = n0 + ${colOfWgsl(th, 'j')};
        if (col >= ${cols}) { continue; }
        ${wgslStore(c.dst, 'D', dstIndexWgsl(c, 'col'), '0.0')}
      }
    }
    return;
  }`;
}
