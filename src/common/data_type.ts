/** Element data types. Names follow oneDNN (`dnnl::memory::data_type`). */
export const dt = {
  undef: 'undef',
  f32: 'f32',
  bf16: 'bf16',
  f16: 'f16',
  s8: 's8',
  u8: 'u8',
  s32: 's32',
} as const;
export type DataType = (typeof dt)[keyof typeof dt];

const BITS: Record<DataType, number> = { undef: 0, f32: 32, bf16: 16, f16: 16, s8: 8, u8: 8, s32: 32 };

export function isDataType(x: unknown): x is DataType {
  return typeof x === 'string' && x in BITS && x !== 'undef';
}

/** Size of one element in bits (sub-byte types will report 4). */
export function dtBits(t: DataType): number {
  return BITS[t];
}

/** Bytes needed for `count` elements of type `t`. */
export function dtBytes(t: DataType, count: number): number {
  return Math.ceil((count * BITS[t]) / 8);
}

export function isFloatType(t: DataType): boolean {
  return t === 'f32' || t === 'bf16' || t === 'f16';
}

/** The typed array a memory object exposes for its values: raw bits for 16-bit floats. */
export type ValuesView = Float32Array | Uint16Array | Int8Array | Uint8Array | Int32Array;

export function makeView(t: DataType, buffer: ArrayBufferLike, byteOffset: number, count: number): ValuesView {
  switch (t) {
    case 'f32': return new Float32Array(buffer, byteOffset, count);
    case 'bf16':
    case 'f16': return new Uint16Array(buffer, byteOffset, count);
    case 's8': return new Int8Array(buffer, byteOffset, count);
    case 'u8': return new Uint8Array(buffer, byteOffset, count);
    case 's32': return new Int32Array(buffer, byteOffset, count);
    default: throw new Error(`no view for data type ${t}`);
  }
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** f32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN. */
export function f32ToBf16(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0];
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToF32(b: number): number {
  u32Scratch[0] = (b & 0xffff) << 16;
  return f32Scratch[0];
}

/** f32 -> IEEE half bits, round to nearest even, overflow to infinity, subnormals kept. */
export function f32ToF16(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  let mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rem = mant & ((1 << shift) - 1);
    let r = mant >>> shift;
    if (rem > half || (rem === half && (r & 1))) r += 1;
    return sign | r;
  }
  let r = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (r & 1))) r += 1; // may carry into the exponent: correct
  return sign | r;
}

export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** Converts a number to the stored representation of `t` (bits for 16-bit floats, saturated ints). */
export function toStored(t: DataType, x: number): number {
  switch (t) {
    case 'bf16': return f32ToBf16(x);
    case 'f16': return f32ToF16(x);
    case 's8': return Math.max(-128, Math.min(127, Math.round(x)));
    case 'u8': return Math.max(0, Math.min(255, Math.round(x)));
    case 's32': return Math.max(-2147483648, Math.min(2147483647, Math.round(x)));
    default: return x;
  }
}

/** Converts a stored representation of `t` back to a number. */
export function fromStored(t: DataType, v: number): number {
  switch (t) {
    case 'bf16': return bf16ToF32(v);
    case 'f16': return f16ToF32(v);
    default: return v;
  }
}
