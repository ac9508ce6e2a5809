import type { DataType } from '../../common/data_type.js';

/**
 * How a storage binding holds values of a data type in WGSL and how one element is loaded / stored.
 * 16-bit floats sit two per u32 word, little-endian, exactly as in host memory (so the host writes the
 * same bytes on both engines); f16 is unpacked with `unpack2x16float` (no `shader-f16` needed), bf16 by
 * shifting into the high half of an f32. 16-bit stores go through atomics on the word so two threads
 * writing the two halves never race.
 */
export interface WgslType {
  /** Element type of the storage array. */
  readonly array: string;
  /** The array type when written (16-bit: atomics). */
  readonly rwArray: string;
  /** WGSL expression loading element `i` (u32 expression) of buffer `buf` as f32. */
  load(buf: string, i: string): string;
  /** Integer types: the element as i32 (exact), for integer accumulation. */
  loadInt?(buf: string, i: string): string;
  /** Helper functions the expressions call (WGSL_16BIT_HELPERS or WGSL_LOWP_HELPERS). */
  readonly helpers: 'none' | '16bit' | 'lowp';
}

/** Element `i` of a byte-coded buffer: word and lane. */
const byteAt = (b: string, i: string): string => `${b}[(${i}) >> 2u], (${i}) & 3u`;
/** Element `i` of a nibble-coded buffer (two per byte, low nibble first): word and lane. */
const nibAt = (b: string, i: string): string => `${b}[(${i}) >> 3u], (${i}) & 7u`;

export function wgslType(t: DataType): WgslType {
  switch (t) {
    case 'f32': return { array: 'f32', rwArray: 'f32', load: (b, i) => `${b}[${i}]`, helpers: 'none' };
    case 'f16': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `ld_f16(${b}[(${i}) >> 1u], (${i}) & 1u)`, helpers: '16bit' };
    case 'bf16': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `ld_bf16(${b}[(${i}) >> 1u], (${i}) & 1u)`, helpers: '16bit' };
    // Byte and nibble codes sit in u32 words exactly as the host bytes (little-endian).
    case 's32': return { array: 'i32', rwArray: 'i32', load: (b, i) => `f32(${b}[${i}])`, loadInt: (b, i) => `${b}[${i}]`, helpers: 'none' };
    case 's8': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `f32(ldi_s8(${byteAt(b, i)}))`, loadInt: (b, i) => `ldi_s8(${byteAt(b, i)})`, helpers: 'lowp' };
    case 'u8': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `f32(ldi_u8(${byteAt(b, i)}))`, loadInt: (b, i) => `ldi_u8(${byteAt(b, i)})`, helpers: 'lowp' };
    case 's4': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `f32(ldi_s4(${nibAt(b, i)}))`, loadInt: (b, i) => `ldi_s4(${nibAt(b, i)})`, helpers: 'lowp' };
    case 'u4': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `f32(ldi_u4(${nibAt(b, i)}))`, loadInt: (b, i) => `ldi_u4(${nibAt(b, i)})`, helpers: 'lowp' };
    case 'f8_e4m3': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `dec_e4m3(byte_of(${byteAt(b, i)}))`, helpers: 'lowp' };
    case 'f8_e5m2': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `dec_e5m2(byte_of(${byteAt(b, i)}))`, helpers: 'lowp' };
    case 'e8m0': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `dec_e8m0(byte_of(${byteAt(b, i)}))`, helpers: 'lowp' };
    case 'f4_e2m1': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `dec_e2m1(nib_of(${nibAt(b, i)}))`, helpers: 'lowp' };
    default: throw new Error(`wgslType: ${t} has no WGSL storage mapping`);
  }
}

/** Helper functions every kernel with 16-bit operands includes. */
export const WGSL_16BIT_HELPERS = /* wgsl */ `
fn ld_f16(w: u32, hi: u32) -> f32 { return unpack2x16float(w)[hi]; }
fn ld_bf16(w: u32, hi: u32) -> f32 { return bitcast<f32>(select(w << 16u, w & 0xffff0000u, hi == 1u)); }
fn to_bf16(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
// pack2x16float is indeterminate outside f16's finite range: |x| past 65504 is rounded here (RNE: below 65520
// to 65504, from it to Inf), NaN kept quiet with its top payload bits (wasm/src/common.h f32_to_f16), branch-free.
fn to_f16(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let a = b & 0x7fffffffu;
  let inr = pack2x16float(vec2f(bitcast<f32>(min(a, 0x477fe000u)), 0.0)) & 0x7fffu;
  let big = select(0x7bffu, 0x7c00u, a >= 0x477ff000u);
  let nan = 0x7e00u | ((a >> 13u) & 0x3ffu);
  return ((b >> 16u) & 0x8000u) | select(select(inr, big, a > 0x477fe000u), nan, a > 0x7f800000u);
}
`;

/**
 * Decoders of the 8- and 4-bit codes (common/low_precision.ts semantics): s8/u8/s4/u4 integers,
 * OFP8 E4M3 (bias 7, no Inf, NaN = S.1111.111) and E5M2 (the upper byte of an f16), OCP MX E2M1 and
 * E8M0 (2^(c - 127), 0xFF NaN). NaNs are built from the code so they are never constant-expressions.
 * No control flow in the decoders (select, no `if` / `&&`): kernels inline one call per weight in
 * unrolled K loops (gemv-splitk: 13 loads x 4 columns at unroll 8), and SwiftShader's compile time
 * explodes with branches there (dec_e4m3 with an `if`: 3 s at unroll 4, no end in 300 s at unroll 8).
 */
export const WGSL_LOWP_HELPERS = /* wgsl */ `
fn byte_of(w: u32, lane: u32) -> u32 { return (w >> (lane * 8u)) & 0xffu; }
fn nib_of(w: u32, lane: u32) -> u32 { return (w >> (lane * 4u)) & 0xfu; }
fn ldi_s8(w: u32, lane: u32) -> i32 { return bitcast<i32>(byte_of(w, lane) << 24u) >> 24u; }
fn ldi_u8(w: u32, lane: u32) -> i32 { return i32(byte_of(w, lane)); }
fn ldi_s4(w: u32, lane: u32) -> i32 { return bitcast<i32>(nib_of(w, lane) << 28u) >> 28u; }
fn ldi_u4(w: u32, lane: u32) -> i32 { return i32(nib_of(w, lane)); }
fn dec_e4m3(c: u32) -> f32 {
  let e = (c >> 3u) & 0xfu; let m = c & 7u;
  let a = select(ldexp(1.0 + f32(m) * 0.125, i32(e) - 7), f32(m) * 0.001953125, e == 0u);
  let v = select(a, -a, (c & 0x80u) != 0u);
  return select(v, bitcast<f32>(0x7fc00000u | ((c & 0x80u) << 24u)), (c & 0x7fu) == 0x7fu);
}
fn dec_e5m2(c: u32) -> f32 { return unpack2x16float(c << 8u).x; }
fn dec_e8m0(c: u32) -> f32 {
  return select(ldexp(1.0, i32(c) - 127), bitcast<f32>(0x7fc00000u | (c & 0u)), c == 255u);
}
fn dec_e2m1(c: u32) -> f32 {
  let e = (c >> 1u) & 3u; let m = c & 1u;
  let a = select(ldexp(1.0 + f32(m) * 0.5, i32(e) - 1), f32(m) * 0.5, e == 0u);
  return select(a, -a, (c & 8u) != 0u);
}
fn sat_nan0(x: f32) -> f32 { return select(x, 0.0, (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u); }
fn sat_s8(x: f32) -> u32 { return bitcast<u32>(i32(clamp(round(sat_nan0(x)), -128.0, 127.0))) & 0xffu; }
fn sat_u8(x: f32) -> u32 { return u32(clamp(round(sat_nan0(x)), 0.0, 255.0)); }
fn sat_s32(x: f32) -> i32 {
  let r = round(sat_nan0(x));
  if (r >= 2147483648.0) { return 2147483647; }
  return i32(max(r, -2147483648.0));
}
`;

/** The helper text a set of types needs (each block once). */
export function wgslHelpersFor(types: readonly (DataType | undefined)[]): string {
  const kinds = new Set(types.filter((t): t is DataType => t !== undefined).map((t) => wgslType(t).helpers));
  return (kinds.has('16bit') ? WGSL_16BIT_HELPERS : '') + (kinds.has('lowp') ? WGSL_LOWP_HELPERS : '');
}

/** WGSL expression reading element `i` of the rw buffer `buf` of type `t` as f32 (the sum post-op's previous dst). */
export function wgslLoadRw(t: DataType, buf: string, i: string): string {
  if (t === 'f32') return `${buf}[${i}]`;
  if (t === 's32') return `f32(${buf}[${i}])`;
  if (t === 'f16' || t === 'bf16') return `ld_${t}(atomicLoad(&${buf}[(${i}) >> 1u]), (${i}) & 1u)`;
  if (t === 's8' || t === 'u8') return `f32(ldi_${t}(atomicLoad(&${buf}[(${i}) >> 2u]), (${i}) & 3u))`;
  throw new Error(`wgslLoadRw: ${t} is not a gpu dst type`);
}

/**
 * WGSL statements storing f32 `v` at element `i` of the rw buffer `buf` of type `t`. For a sub-word
 * type the code is computed before its lane is cleared, so `v` may read the element it replaces (an
 * in-place scaling); the block's own names carry a `st_` prefix so that `i` and `v` may use any name.
 */
export function wgslStore(t: DataType, buf: string, i: string, v: string): string {
  if (t === 'f32') return `${buf}[${i}] = ${v};`;
  if (t === 's32') return `${buf}[${i}] = sat_s32(${v});`;
  if (t === 's8' || t === 'u8') {
    // RNE + saturation, then the byte lane of the word (atomics: neighbours are other threads' elements).
    return `{ let st_c = sat_${t}(${v}); let st_e = ${i}; let st_sh = (st_e & 3u) * 8u; atomicAnd(&${buf}[st_e >> 2u], ~(0xffu << st_sh)); atomicOr(&${buf}[st_e >> 2u], st_c << st_sh); }`;
  }
  if (t !== 'f16' && t !== 'bf16') throw new Error(`wgslStore: ${t} is not a gpu dst type`);
  const conv = t === 'f16' ? `to_f16(${v})` : `to_bf16(${v})`;
  return `{ let st_c = ${conv}; let st_e = ${i}; let st_sh = (st_e & 1u) * 16u; atomicAnd(&${buf}[st_e >> 1u], ~(0xffffu << st_sh)); atomicOr(&${buf}[st_e >> 1u], st_c << st_sh); }`;
}
