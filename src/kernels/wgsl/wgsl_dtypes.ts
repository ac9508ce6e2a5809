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
}

export function wgslType(t: DataType): WgslType {
  switch (t) {
    case 'f32': return { array: 'f32', rwArray: 'f32', load: (b, i) => `${b}[${i}]` };
    case 'f16': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `ld_f16(${b}[(${i}) >> 1u], (${i}) & 1u)` };
    case 'bf16': return { array: 'u32', rwArray: 'atomic<u32>', load: (b, i) => `ld_bf16(${b}[(${i}) >> 1u], (${i}) & 1u)` };
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
fn to_f16(x: f32) -> u32 { return pack2x16float(vec2f(x, 0.0)) & 0xffffu; }
`;

/** WGSL statements storing f32 `v` at element `i` of the rw buffer `buf` of type `t`. */
export function wgslStore(t: DataType, buf: string, i: string, v: string): string {
  if (t === 'f32') return `${buf}[${i}] = ${v};`;
  const conv = t === 'f16' ? `to_f16(${v})` : `to_bf16(${v})`;
  return `{ let e = ${i}; let sh = (e & 1u) * 16u; atomicAnd(&${buf}[e >> 1u], ~(0xffffu << sh)); atomicOr(&${buf}[e >> 1u], ${conv} << sh); }`;
}
