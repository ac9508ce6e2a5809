import type { DataType } from '../../common/data_type.js';
import { wgslHelpersFor, wgslStore, wgslType } from './wgsl_dtypes.js';
import { FUSION_BINDING, fusionOperands, mapFnWgsl, type FusedOperand, type GemmFusion } from './wgsl_quant.js';
import { Y_FOLD } from './grouped_schedule.js';

/**
 * `gemv-splitk`: the decode grouped GEMM (a few rows per expert), bound by streaming the touched
 * weights once. A tile of the device schedule (grouped_schedule.ts, TM = R rows) is split over many
 * workgroups: along N into column tiles of L lanes x C columns, and along K twice, into S slices
 * inside the workgroup and KG splits across workgroups. Each thread streams C consecutive weight
 * columns of its K slice with one vector load per k (vec4f for f32, two u32 for 16-bit, one u32
 * for 8-bit and 4-bit codes, decoded in registers), unrolled by 4 so four loads are in flight, and
 * keeps R x C accumulators (rows past the tile's end read its last row and are never stored).
 *
 * Reduction in a fixed order, no atomics: the S slices of a workgroup are summed through workgroup
 * memory in slice order; with KG > 1 the workgroups write partial sums to a scratch buffer and a
 * second pass (`gemv-splitk-reduce`, same dispatch) adds them in split order and runs the epilogue.
 * A second run gives the same bits.
 *
 * Weight-only quantization (rfcs/0002): weight scales and zero points through their index maps,
 * evaluated once per thread per K block (the map's K block, 1 for per-element K, the whole slice for
 * per-column ones), not per element. Epilogue: bias, the eltwise chain, the store.
 *
 * Params: the 16 words of gemm-tiled (gemm_tiled.ts) with _p0 = column tiles, _p1 = KG, _p2 = K per
 * split (of the KG x S splits). Dispatch (indirect, from the schedule): x = column tiles x KG, y / z =
 * schedule tiles.
 */
export interface GemvSplitKConfig {
  /** Rows per schedule tile (the schedule's TM). */
  readonly rows: number;
  readonly src: DataType;
  readonly wei: DataType;
  readonly dst: DataType;
  readonly bias: DataType | undefined;
  /** Vector loads of the weights (unit column stride, K stride and group stride multiples of C). */
  readonly vec: boolean;
  /** Splits of K across workgroups (1: one pass, epilogue in place). */
  readonly kSplit: number;
  /** WGSL statements applied to `v` (f32) after the bias. */
  readonly epilogue: string;
  /** Weight scales / zero points only (gemvEligible), undefined without. */
  readonly fusion: GemmFusion | undefined;
}

/** Binding of the partial sums (KG > 1). */
export const GEMV_PARTIALS_BINDING = 20;

/** Columns per thread and lanes per workgroup for a weights type (256 threads = L lanes x S slices). */
export function gemvGeometry(wei: DataType): { C: number; L: number; S: number } {
  const C = wei === 's4' || wei === 'u4' || wei === 'f4_e2m1' ? 8 : 4;
  const L = wei === 'f32' ? 16 : 32;
  return { C, L, S: 256 / L };
}

/** K iterations per thread the split aims at: enough loads in flight per thread, short dependency chains. */
export function gemvKPerThread(wei: DataType): number {
  const bits = wei === 'f32' ? 32 : wei === 'f16' || wei === 'bf16' ? 16 : gemvGeometry(wei).C === 8 ? 4 : 8;
  return bits >= 16 ? 128 : bits === 8 ? 64 : 32;
}

/** The weight operands the kernel handles: scale and zero point only. */
export function gemvFusionSupported(f: GemmFusion): boolean {
  return !f.intAcc && !f.glu && !f.srcScale && !f.srcZp && !f.dstScale && !f.dstZp && f.binary.length === 0 &&
    f.chain.every((s) => s.kind === 'eltwise');
}

export function gemvSplitKKey(c: GemvSplitKConfig, pass: 'main' | 'reduce'): string {
  const f = c.fusion;
  const q = f ? `:${f.weiScale ? `s=${f.weiScale.dt}.${termsKey(f.weiScale)}` : ''}${f.weiZp ? `z=${f.weiZp.dt}.${termsKey(f.weiZp)}` : ''}` : '';
  return `gemv-splitk-${pass}:r${c.rows}:${c.src}.${c.wei}.${c.dst}.${c.bias ?? 'nobias'}:${c.vec ? 'vec' : 'scalar'}:kg${c.kSplit > 1 ? 'n' : '1'}:${c.epilogue}${q}`;
}

function termsKey(o: FusedOperand): string {
  return `${o.terms.g ? 'g' : ''}${o.terms.dims.join('')}`;
}

const HEADER = /* wgsl */ `
struct Params { M: u32, K: u32, N: u32, lda: u32, ldwk: u32, ldwn: u32, wg: u32, ldd: u32, sb: u32, db: u32, bg: u32, bn: u32, tilesN: u32, colTiles: u32, kSplit: u32, kChunk: u32 }
@group(0) @binding(0) var<uniform> P: Params;`;

/** The schedule tile of this workgroup: g, m0, m1 (early return past the last tile: uniform). */
const TILE = /* wgsl */ `
  let t = wid.y + wid.z * ${Y_FOLD}u;
  if (t >= S[3]) { return; }
  let g = S[4u + 3u * t];
  let m0 = S[5u + 3u * t];
  let m1 = S[6u + 3u * t];
  let ct = wid.x % P.colTiles;
  let kg = wid.x / P.colTiles;`;

/** `fn put(g, row, col, acc)`: bias, eltwise chain, store (cols past N skipped). */
function putFn(c: GemvSplitKConfig): string {
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  return `fn put(g: u32, row: u32, col: u32, acc: f32) {
  if (col >= P.N) { return; }
  var v = acc;
  ${Bi ? `v += ${Bi.load('BIAS', 'g * P.bg + col * P.bn')};` : ''}
  ${c.epilogue}
  ${wgslStore(c.dst, 'D', 'row * P.ldd + col', 'v')}
}`;
}

function commonBindings(c: GemvSplitKConfig, withWeights: boolean): string {
  const D = wgslType(c.dst);
  const Bi = c.bias ? wgslType(c.bias) : undefined;
  let s = `${HEADER}
@group(0) @binding(3) var<storage, read_write> D: array<${D.rwArray}>;
@group(0) @binding(4) var<storage, read> S: array<u32>;
${Bi ? `@group(0) @binding(5) var<storage, read> BIAS: array<${Bi.array}>;` : ''}
${c.kSplit > 1 ? `@group(0) @binding(${GEMV_PARTIALS_BINDING}) var<storage, read_write> PART: array<f32>;` : ''}`;
  if (withWeights) {
    s += `
@group(0) @binding(1) var<storage, read> A: array<${wgslType(c.src).array}>;
@group(0) @binding(2) var<storage, read> B: array<${weightsArray(c)}>;`;
    const f = c.fusion;
    if (f) {
      const ops = fusionOperands(f);
      s += `\n@group(0) @binding(${FUSION_BINDING}) var<uniform> Q: array<vec4u, ${1 + 2 * ops.length}>;\n`;
      for (const o of ops) {
        s += `@group(0) @binding(${o.binding}) var<storage, read> ${o.name.toUpperCase()}: array<${wgslType(o.op.dt).array}>;\n`;
        s += mapFnWgsl(o.name, o.op.terms, o.slot);
      }
    }
  }
  return s;
}

function weightsArray(c: GemvSplitKConfig): string {
  if (!c.vec) return wgslType(c.wei).array;
  if (c.wei === 'f32') return 'vec4f';
  if (c.wei === 'f16' || c.wei === 'bf16') return 'vec2u';
  return 'u32';
}

/** WGSL setting `w0` (and `w1` when C = 8), vec4f, to the raw decoded weights at (k, col0..col0+C-1). */
function weightLoad(c: GemvSplitKConfig, C: number, k: string, sfx: string): string {
  const e = `wBase + (${k}) * P.ldwk + col0`;
  if (!c.vec) {
    const T = wgslType(c.wei);
    const el = (j: number): string => T.load('B', `wBase + (${k}) * P.ldwk + min(col0 + ${j}u, P.N - 1u) * P.ldwn`);
    const v = (j0: number): string => `vec4f(${[0, 1, 2, 3].map((j) => el(j0 + j)).join(', ')})`;
    return `let w0${sfx} = ${v(0)};${C === 8 ? ` let w1${sfx} = ${v(4)};` : ''}`;
  }
  switch (c.wei) {
    case 'f32': return `let w0${sfx} = B[(${e}) / 4u];`;
    case 'f16': return `let q${sfx} = B[(${e}) / 4u]; let w0${sfx} = vec4f(unpack2x16float(q${sfx}.x), unpack2x16float(q${sfx}.y));`;
    case 'bf16': return `let q${sfx} = B[(${e}) / 4u]; let w0${sfx} = bitcast<vec4f>(vec4u(q${sfx}.x << 16u, q${sfx}.x & 0xffff0000u, q${sfx}.y << 16u, q${sfx}.y & 0xffff0000u));`;
    case 's8': return `let q${sfx} = vec4i(bitcast<i32>(B[(${e}) / 4u])); let w0${sfx} = vec4f((q${sfx} << vec4u(24u, 16u, 8u, 0u)) >> vec4u(24u));`;
    case 'u8': return `let q${sfx} = vec4u(B[(${e}) / 4u]); let w0${sfx} = vec4f((q${sfx} >> vec4u(0u, 8u, 16u, 24u)) & vec4u(255u));`;
    case 's4': return `let q${sfx} = vec4i(bitcast<i32>(B[(${e}) / 8u])); let w0${sfx} = vec4f((q${sfx} << vec4u(28u, 24u, 20u, 16u)) >> vec4u(28u)); let w1${sfx} = vec4f((q${sfx} << vec4u(12u, 8u, 4u, 0u)) >> vec4u(28u));`;
    case 'u4': return `let q${sfx} = vec4u(B[(${e}) / 8u]); let w0${sfx} = vec4f((q${sfx} >> vec4u(0u, 4u, 8u, 12u)) & vec4u(15u)); let w1${sfx} = vec4f((q${sfx} >> vec4u(16u, 20u, 24u, 28u)) & vec4u(15u));`;
    case 'f8_e4m3': case 'f8_e5m2': {
      const d = c.wei === 'f8_e4m3' ? 'dec_e4m3' : 'dec_e5m2';
      return `let q${sfx} = B[(${e}) / 4u]; let w0${sfx} = vec4f(${[0, 1, 2, 3].map((j) => `${d}(byte_of(q${sfx}, ${j}u))`).join(', ')});`;
    }
    case 'f4_e2m1': {
      const v = (j0: number): string => `vec4f(${[0, 1, 2, 3].map((j) => `dec_e2m1(nib_of(q${sfx}, ${j0 + j}u))`).join(', ')})`;
      return `let q${sfx} = B[(${e}) / 8u]; let w0${sfx} = ${v(0)}; let w1${sfx} = ${v(4)};`;
    }
    default: throw new Error(`gemv-splitk: no vector load for ${c.wei}`);
  }
}

/** Upper end of the current scale block: min over the weight operands' K blocks (none: the slice end). */
function blockEnd(f: GemmFusion | undefined): string {
  const parts: string[] = [];
  for (const o of f ? fusionOperands(f) : []) {
    const d = o.op.terms.dims[1];
    if (d === 'u') parts.push('k + 1u');
    else if (d === 'b') parts.push(`(k / Q[${o.slot + 1}u].y + 1u) * Q[${o.slot + 1}u].y`);
  }
  return parts.reduce((acc, p) => `min(${acc}, ${p})`, 'ke');
}

/** The per-block scale / zero-point vectors (sc0, zp0, and sc1 / zp1 when C = 8) at (k, col0 + j). */
function blockQuant(f: GemmFusion | undefined, C: number): string {
  if (!f) return '';
  let s = '';
  for (const [o, name] of [[f.weiScale, 'wsc'], [f.weiZp, 'wzp']] as const) {
    if (!o) continue;
    const T = wgslType(o.dt);
    const el = (j: number): string => T.load(name.toUpperCase(), `ix_${name}(g, g, k, min(col0 + ${j}u, P.N - 1u))`);
    for (let h = 0; h < C / 4; h++) s += `\n      let ${name}${h} = vec4f(${[0, 1, 2, 3].map((j) => el(4 * h + j)).join(', ')});`;
  }
  return s;
}

function dequant(f: GemmFusion | undefined, C: number, sfx: string): string {
  if (!f) return '';
  let s = '';
  for (let h = 0; h < C / 4; h++) {
    s += ` let d${h}${sfx} = ${f.weiZp ? `(w${h}${sfx} - wzp${h})` : `w${h}${sfx}`}${f.weiScale ? ` * wsc${h}` : ''};`;
  }
  return s;
}

export function gemvSplitKWgsl(c: GemvSplitKConfig): string {
  const { C, L, S: SL } = gemvGeometry(c.wei);
  const R = c.rows, CV = C / 4;
  const A = wgslType(c.src);
  const f = c.fusion;
  const wv = (h: number, sfx: string): string => (f ? `d${h}${sfx}` : `w${h}${sfx}`);
  const step = (sfx: string, k: string): string => {
    let s = `${weightLoad(c, C, k, sfx)}${dequant(f, C, sfx)}`;
    for (let r = 0; r < R; r++) {
      s += `\n        { let a = vec4f(${A.load('A', `ar${r} + ${k}`)});`;
      for (let h = 0; h < CV; h++) s += ` c${r}_${h} = fma(a, ${wv(h, sfx)}, c${r}_${h});`;
      s += ' }';
    }
    return s;
  };
  const accDecl = Array.from({ length: R }, (_, r) => Array.from({ length: CV }, (_, h) => `var c${r}_${h} = vec4f(0.0);`).join(' ')).join('\n  ');
  const rowDecl = Array.from({ length: R }, (_, r) => `let ar${r} = min(m0 + ${r}u, m1 - 1u) * P.lda;`).join(' ');
  // Loads of the four k first, then their FMAs: four loads in flight per thread.
  const unrolled = `${[0, 1, 2, 3].map((u) => weightLoad(c, C, `k + ${u}u`, `_${u}`) + dequant(f, C, `_${u}`)).join('\n        ')}
        ${[0, 1, 2, 3].map((u) => Array.from({ length: R }, (_, r) => `{ let a = vec4f(${A.load('A', `ar${r} + k + ${u}u`)});${Array.from({ length: CV }, (_, h) => ` c${r}_${h} = fma(a, ${wv(h, `_${u}`)}, c${r}_${h});`).join('')} }`).join(' ')).join('\n        ')}`;
  const out = c.kSplit > 1
    ? (r: number, j: number, v: string): string => `if (m0 + ${r}u < m1 && col0 + ${j}u < P.N) { PART[(kg * P.M + m0 + ${r}u) * P.N + col0 + ${j}u] = ${v}; }`
    : (r: number, j: number, v: string): string => `if (m0 + ${r}u < m1) { put(g, m0 + ${r}u, col0 + ${j}u, ${v}); }`;
  let reduce = '';
  for (let r = 0; r < R; r++) {
    reduce += `
  ${Array.from({ length: CV }, (_, h) => `red[li * ${CV}u + ${h}u] = c${r}_${h};`).join(' ')}
  workgroupBarrier();
  if (s == 0u) {
    ${Array.from({ length: CV }, (_, h) => `var t${h} = red[lane * ${CV}u + ${h}u];`).join(' ')}
    for (var i = 1u; i < ${SL}u; i++) { ${Array.from({ length: CV }, (_, h) => `t${h} += red[(i * ${L}u + lane) * ${CV}u + ${h}u];`).join(' ')} }
    ${Array.from({ length: C }, (_, j) => out(r, j, `t${j >> 2}[${j & 3}]`)).join('\n    ')}
  }
  workgroupBarrier();`;
  }
  return /* wgsl */ `
${wgslHelpersFor([c.src, c.wei, c.dst, c.bias, ...(f ? [f.weiScale?.dt, f.weiZp?.dt] : [])])}
${commonBindings(c, true)}

var<workgroup> red: array<vec4f, ${256 * CV}>;

${putFn(c)}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${TILE}
  let lane = li % ${L}u;
  let s = li / ${L}u;
  let col0 = (ct * ${L}u + lane) * ${C}u;
  let wBase = g * P.wg;
  ${rowDecl}
  ${accDecl}
  let split = kg * ${SL}u + s;
  let ks = min(P.K, split * P.kChunk);
  let ke = min(P.K, ks + P.kChunk);
  var k = ks;
  if (col0 < P.N) {
    loop {
      if (k >= ke) { break; }
      let kc = ${blockEnd(f)};${blockQuant(f, C)}
      loop {
        if (k + 4u > kc) { break; }
        ${unrolled}
        k += 4u;
      }
      loop {
        if (k >= kc) { break; }
        ${step('', 'k')}
        k += 1u;
      }
    }
  }
  ${reduce}
}
`;
}

/** The second pass (KG > 1): partial sums added in split order, then the epilogue. */
export function gemvSplitKReduceWgsl(c: GemvSplitKConfig): string {
  const { C, L } = gemvGeometry(c.wei);
  const R = c.rows, LC = L * C;
  return /* wgsl */ `
${wgslHelpersFor([c.dst, c.bias])}
${commonBindings(c, false)}

${putFn(c)}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) li: u32) {
  ${TILE}
  if (kg != 0u) { return; }
  for (var i = li; i < ${R * LC}u; i += 256u) {
    let row = m0 + i / ${LC}u;
    let col = ct * ${LC}u + i % ${LC}u;
    if (row < m1 && col < P.N) {
      var v = 0.0;
      for (var j = 0u; j < P.kSplit; j++) { v += PART[(j * P.M + row) * P.N + col]; }
      put(g, row, col, v);
    }
  }
}
`;
}
