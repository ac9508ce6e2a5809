/**
 * Data filling in benchdnn's spirit: small integer-valued inputs per data type (and powers of two for
 * scales), so every input is exact in its type, products and sums are exact in f32, and the only
 * rounding left is the final conversion to dst's type. Deterministic: a seed per problem and tensor.
 */
import type { DataType } from '../../src/index.js';

/** Integer range of a tensor's values per data type (each value exactly representable). */
export function dataRange(t: DataType): readonly [number, number] {
  switch (t) {
    case 'u8': case 'u4': return [0, 8];
    case 's8': return [-5, 5];
    case 's32': return [-8, 8];
    // s4 [-8, 7], e4m3 / e5m2 exact on these integers; e2m1 holds 0 1 2 3 4 (and 1.5, 6).
    default: return [-4, 4];
  }
}

/** Zero points: small, and of the sign the zero-point type allows. */
export function zeroPointRange(t: DataType): readonly [number, number] {
  return t === 'u8' || t === 'u4' ? [0, 3] : [-2, 2];
}

/** xorshift32 stream in [0, 1). */
export function stream(seed: number): () => number {
  let x = (seed >>> 0) || 0x2545f491;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

/** FNV-1a of a string: a seed per problem (its repro line) and tensor name. */
export function seedOf(...parts: string[]): number {
  let h = 0x811c9dc5;
  for (const c of parts.join('|')) {
    h ^= c.charCodeAt(0);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function fillInts(n: number, [lo, hi]: readonly [number, number], seed: number): Float64Array {
  const r = stream(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + Math.floor(r() * (hi - lo + 1));
  return out;
}

/** Scales: 2^e, e in [-2, 1]: exact in every scale type (f32 bf16 f16 e8m0 f8_e4m3) and in products. */
export function fillScales(n: number, seed: number): Float64Array {
  const r = stream(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = 2 ** (Math.floor(r() * 4) - 2);
  return out;
}
