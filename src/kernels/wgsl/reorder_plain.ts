import { dtBits, type DataType } from '../../common/data_type.js';

/**
 * The gpu engine's plain -> plain reorder: one invocation per u32 word of dst, so sub-word elements
 * (16-, 8- and 4-bit) are written without atomics and no two invocations touch one word. Each slot of
 * the word is mapped back to its logical index by dividing its element offset by dst's strides from the
 * largest down (strides never overlap, so the digits are unique); a slot that is not an element (the
 * padding of a strided layout, the tail past the span) keeps its bits, as the host copy does.
 * Conversions work on the bits in integer arithmetic (round to nearest even, as common/data_type.ts),
 * so results are bit-identical to the cpu engine's reorder whatever the device's float rounding or
 * subnormal flushing.
 */

/** Dims with extent > 1, sorted by dst stride (largest first): [dim, dst stride, src stride] each. */
export const REORDER_HEADER_WORDS = 4;
export const REORDER_WORKGROUP = 256;

/** How the element bits are turned into dst bits. */
export type ReorderConversion = 'bits' | 'f32>bf16' | 'f32>f16' | 'bf16>f32' | 'f16>f32' | 'f16>bf16' | 'bf16>f16';

export interface ReorderKernelConfig {
  readonly srcBits: number;
  readonly dstBits: number;
  readonly conv: ReorderConversion;
}

export function reorderKernelConfig(src: DataType, dst: DataType): ReorderKernelConfig {
  const conv = src === dst ? 'bits' : (`${src}>${dst}` as ReorderConversion);
  return { srcBits: dtBits(src), dstBits: dtBits(dst), conv };
}

export function reorderKernelKey(c: ReorderKernelConfig): string {
  return `reorder-plain:${c.srcBits}:${c.dstBits}:${c.conv}`;
}

/** Params: [dst words, dst span (elements), dims, workgroups in x] then [dim, dst stride, src stride] per dim. */
export function reorderParams(dstWords: number, dstSpan: number, dims: readonly (readonly [number, number, number])[], groupsX: number): Uint32Array<ArrayBuffer> {
  const p = new Uint32Array(REORDER_HEADER_WORDS + 3 * Math.max(1, dims.length));
  p.set([dstWords, dstSpan, dims.length, groupsX]);
  dims.forEach((d, i) => p.set(d, REORDER_HEADER_WORDS + 3 * i));
  return p;
}

const CONVERT = /* wgsl */ `
fn bf16_to_f32(b: u32) -> u32 { return b << 16u; }
fn f16_to_f32(h: u32) -> u32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  var m = h & 0x3ffu;
  if (e == 0x1fu) { return select(sign | 0x7f800000u, 0x7fc00000u, m != 0u); }
  if (e != 0u) { return sign | ((e + 112u) << 23u) | (m << 13u); }
  if (m == 0u) { return sign; }
  // subnormal: m * 2^-24, normalised (exact in f32)
  var ex = 113u;
  while ((m & 0x400u) == 0u) { m = m << 1u; ex = ex - 1u; }
  return sign | (ex << 23u) | ((m & 0x3ffu) << 13u);
}
fn f32_to_bf16(u: u32) -> u32 {
  if ((u & 0x7fffffffu) > 0x7f800000u) { return ((u >> 16u) | 0x40u) & 0xffffu; }
  return ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) & 0xffffu;
}
fn f32_to_f16(u: u32) -> u32 {
  let sign = (u >> 16u) & 0x8000u;
  let exp = i32((u >> 23u) & 0xffu);
  var mant = u & 0x7fffffu;
  if (exp == 0xff) { return sign | 0x7c00u | select(0u, 0x200u | (mant >> 13u), mant != 0u); }
  let e = exp - 127 + 15;
  if (e >= 0x1f) { return sign | 0x7c00u; }
  if (e <= 0) {
    if (e < -10) { return sign; }
    mant = mant | 0x800000u;
    let shift = u32(14 - e);
    let half = 1u << (shift - 1u);
    let rem = mant & ((1u << shift) - 1u);
    var r = mant >> shift;
    if (rem > half || (rem == half && (r & 1u) != 0u)) { r = r + 1u; }
    return sign | r;
  }
  var r = (u32(e) << 10u) | (mant >> 13u);
  let rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) { r = r + 1u; }
  return sign | r;
}
`;

function convertExpr(conv: ReorderConversion): string {
  switch (conv) {
    case 'bits': return 'v';
    case 'f32>bf16': return 'f32_to_bf16(v)';
    case 'f32>f16': return 'f32_to_f16(v)';
    case 'bf16>f32': return 'bf16_to_f32(v)';
    case 'f16>f32': return 'f16_to_f32(v)';
    case 'f16>bf16': return 'f32_to_bf16(f16_to_f32(v))';
    case 'bf16>f16': return 'f32_to_f16(bf16_to_f32(v))';
  }
}

/** The element at element offset `i` of a buffer of `bits`-bit elements, as its bits. */
function loadExpr(bits: number): string {
  if (bits === 32) return 'src[i]';
  const per = 32 / bits, shift = Math.log2(per), mask = (2 ** bits - 1) >>> 0;
  return `(src[i >> ${shift}u] >> ((i & ${per - 1}u) * ${bits}u)) & 0x${mask.toString(16)}u`;
}

export function reorderPlainWgsl(c: ReorderKernelConfig): string {
  const per = 32 / c.dstBits, mask = (2 ** c.dstBits - 1) >>> 0;
  const insert = c.dstBits === 32 ? 'word = c;' : `word = (word & ~(0x${mask.toString(16)}u << (j * ${c.dstBits}u))) | (c << (j * ${c.dstBits}u));`;
  return /* wgsl */ `
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
${c.conv === 'bits' ? '' : CONVERT}
fn load_src(i: u32) -> u32 { return ${loadExpr(c.srcBits)}; }

@compute @workgroup_size(${REORDER_WORKGROUP})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let w = (wg.y * P[3] + wg.x) * ${REORDER_WORKGROUP}u + li;
  if (w >= P[0]) { return; }
  let span = P[1];
  let nd = P[2];
  var word = ${c.dstBits === 32 ? '0u' : 'dst[w]'};
  for (var j = 0u; j < ${per}u; j++) {
    let pe = w * ${per}u + j;
    if (pe >= span) { break; }
    var rem = pe;
    var so = 0u;
    var ok = true;
    for (var d = 0u; d < nd; d++) {
      let ds = P[${REORDER_HEADER_WORDS}u + 3u * d + 1u];
      let k = rem / ds;
      if (k >= P[${REORDER_HEADER_WORDS}u + 3u * d]) { ok = false; break; }
      rem = rem - k * ds;
      so = so + k * P[${REORDER_HEADER_WORDS}u + 3u * d + 2u];
    }
    if (!ok || rem != 0u) { ${c.dstBits === 32 ? 'return;' : 'continue;'} }
    let i = so;
    let v = load_src(i);
    let c = ${convertExpr(c.conv)};
    ${insert}
  }
  dst[w] = word;
}
`;
}
