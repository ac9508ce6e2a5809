import {
  e8m0ToF32, f32ToF4E2m1, f32ToF8E4m3, f32ToF8E5m2, f32ToS4, f32ToU4, f4E2m1ToF32, f8E4m3ToF32, f8E5m2ToF32,
  pack4, roundHalfEven, s4ToF32, toE8m0, u4ToF32, unpack4, type E8m0Rounding, type Fp8Options,
} from './low_precision.js';
import { DnnlError, check } from './status.js';
import { checkOptionKeys, optionKeys } from './option_keys.js';

/**
 * Element data types. Names follow oneDNN (`dnnl::memory::data_type`).
 *
 * Low-precision types (codecs in `low_precision.ts`):
 * - `s4`, `u4`: 4-bit integers [-8, 7] / [0, 15];
 * - `f8_e4m3`, `f8_e5m2`: OCP FP8 (OFP8 v1.0) E4M3 (no Inf, max 448) and E5M2 (IEEE-like, max 57344);
 * - `f4_e2m1`: OCP MX FP4 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 with sign; no Inf/NaN);
 * - `e8m0`: OCP MX scale, 2^(code - 127), 0xFF = NaN, no sign, no zero.
 *
 * The 4-bit types (`s4 u4 f4_e2m1`) are packed two per byte: element 2i in the low nibble of byte
 * i, element 2i+1 in the high nibble (the oneDNN/PyTorch convention); an odd count leaves the high
 * nibble of the last byte as padding.
 */
export const dt = {
  undef: 'undef',
  f32: 'f32',
  bf16: 'bf16',
  f16: 'f16',
  s8: 's8',
  u8: 'u8',
  s32: 's32',
  s4: 's4',
  u4: 'u4',
  f8_e4m3: 'f8_e4m3',
  f8_e5m2: 'f8_e5m2',
  f4_e2m1: 'f4_e2m1',
  e8m0: 'e8m0',
} as const;
export type DataType = (typeof dt)[keyof typeof dt];

const BITS: Record<DataType, number> = {
  undef: 0, f32: 32, bf16: 16, f16: 16, s8: 8, u8: 8, s32: 32,
  s4: 4, u4: 4, f8_e4m3: 8, f8_e5m2: 8, f4_e2m1: 4, e8m0: 8,
};

export function isDataType(x: unknown): x is DataType {
  return typeof x === 'string' && x in BITS && x !== 'undef';
}

/** Size of one element in bits (4 for `s4 u4 f4_e2m1`). */
export function dtBits(t: DataType): number {
  return BITS[t];
}

/** Bytes needed for `count` elements of type `t`: ceil(count * bits / 8). */
export function dtBytes(t: DataType, count: number): number {
  return Math.ceil((count * BITS[t]) / 8);
}

/** The f32/bf16/f16 compute types (the low-precision floats are not included: see {@link isLowPrecisionType}). */
export function isFloatType(t: DataType): boolean {
  return t === 'f32' || t === 'bf16' || t === 'f16';
}

/** `s4 u4 f8_e4m3 f8_e5m2 f4_e2m1 e8m0`: the types stored as codes, read through `low_precision.ts`. */
export function isLowPrecisionType(t: DataType): boolean {
  return t === 's4' || t === 'u4' || t === 'f8_e4m3' || t === 'f8_e5m2' || t === 'f4_e2m1' || t === 'e8m0';
}

/** Types smaller than a byte (`s4 u4 f4_e2m1`), packed two elements per byte. */
export function isSubByteType(t: DataType): boolean {
  return BITS[t] > 0 && BITS[t] < 8;
}

/**
 * The typed array a memory object exposes for its values: raw bits for 16-bit floats; raw bytes
 * (codes) for the low-precision types — one byte per element for the 8-bit ones, packed pairs for
 * the 4-bit ones.
 */
export type ValuesView = Float32Array | Uint16Array | Int8Array | Uint8Array | Int32Array;

/**
 * View of `count` elements of type `t`. For the low-precision types the view is a Uint8Array of the
 * raw bytes: `count` bytes for `f8_e4m3 f8_e5m2 e8m0`, ceil(count / 2) bytes for `s4 u4 f4_e2m1`.
 */
export function makeView(t: DataType, buffer: ArrayBufferLike, byteOffset: number, count: number): ValuesView {
  switch (t) {
    case 'f32': return new Float32Array(buffer, byteOffset, count);
    case 'bf16':
    case 'f16': return new Uint16Array(buffer, byteOffset, count);
    case 's8': return new Int8Array(buffer, byteOffset, count);
    case 'u8': return new Uint8Array(buffer, byteOffset, count);
    case 's32': return new Int32Array(buffer, byteOffset, count);
    case 's4':
    case 'u4':
    case 'f4_e2m1':
    case 'f8_e4m3':
    case 'f8_e5m2':
    case 'e8m0': return new Uint8Array(buffer, byteOffset, dtBytes(t, count));
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

/** Round half to even, then saturate to [lo, hi]; NaN gives 0 (oneDNN `nearbyint` + saturation). */
function toInt(x: number, lo: number, hi: number): number {
  if (x !== x) return 0;
  return Math.max(lo, Math.min(hi, roundHalfEven(x)));
}

/**
 * Converts a number to the stored representation of `t` for one element: bits for 16-bit floats,
 * integers rounded half to even and saturated (NaN -> 0), and for the low-precision types the element's code (not a packed byte): the
 * value -8..7 for `s4`, 0..15 for `u4`, the nibble 0..15 for `f4_e2m1`, the byte 0..255 for
 * `f8_e4m3 f8_e5m2 e8m0`. FP8 conversion saturates, e8m0 rounds down (`'floor'`); see
 * `low_precision.ts` for every rule.
 */
export function toStored(t: DataType, x: number): number {
  switch (t) {
    case 'bf16': return f32ToBf16(x);
    case 'f16': return f32ToF16(x);
    case 's8': return toInt(x, -128, 127);
    case 'u8': return toInt(x, 0, 255);
    case 's32': return toInt(x, -2147483648, 2147483647);
    case 's4': return f32ToS4(x);
    case 'u4': return f32ToU4(x);
    case 'f8_e4m3': return f32ToF8E4m3(x);
    case 'f8_e5m2': return f32ToF8E5m2(x);
    case 'f4_e2m1': return f32ToF4E2m1(x);
    case 'e8m0': return toE8m0(x);
    default: return x;
  }
}

/** Converts a stored representation (an element code for the low-precision types) of `t` back to a number. */
export function fromStored(t: DataType, v: number): number {
  switch (t) {
    case 'bf16': return bf16ToF32(v);
    case 'f16': return f16ToF32(v);
    case 's4': return s4ToF32(v);
    case 'u4': return u4ToF32(v);
    case 'f8_e4m3': return f8E4m3ToF32(v);
    case 'f8_e5m2': return f8E5m2ToF32(v);
    case 'f4_e2m1': return f4E2m1ToF32(v);
    case 'e8m0': return e8m0ToF32(v);
    default: return v;
  }
}

/** Options of {@link encodeArray}. */
export interface EncodeOptions {
  /** FP8 saturation (default true), see {@link Fp8Options}. */
  readonly saturate?: boolean;
  /** Rounding of e8m0 values (default `'floor'`), see `toE8m0`. */
  readonly e8m0Rounding?: E8m0Rounding;
}

const ENCODE_OPTION_KEYS = optionKeys<EncodeOptions>({ saturate: true, e8m0Rounding: true });

function checkCount(fn: string, count: number): void {
  check(Number.isSafeInteger(count) && count >= 0, `${fn}: count must be a non-negative integer, got ${count}`);
}

function checkType(fn: string, t: DataType): void {
  check(isDataType(t), `${fn}: unknown data type '${String(t)}' (one of ${Object.keys(BITS).filter((k) => k !== 'undef').join(', ')})`);
}

/**
 * Encodes numbers as the little-endian bytes of `dtBytes(t, n)` for any data type: f32 as IEEE
 * single, bf16/f16 as 16-bit patterns (round to nearest even), s8/u8/s32 rounded half to even and saturated, the 8-bit
 * low-precision types one code per byte, the 4-bit types packed two per byte (element 2i in the
 * low nibble of byte i, padding nibble 0).
 */
export function encodeArray(t: DataType, values: ArrayLike<number>, opts?: EncodeOptions): Uint8Array {
  checkType('encodeArray', t);
  checkOptionKeys('encodeArray', opts, ENCODE_OPTION_KEYS);
  const n = values.length;
  const out = new Uint8Array(dtBytes(t, n));
  const dv = new DataView(out.buffer);
  const fp8: Fp8Options = { saturate: opts?.saturate ?? true };
  switch (t) {
    case 'f32': for (let i = 0; i < n; i++) dv.setFloat32(4 * i, values[i], true); break;
    case 'bf16': for (let i = 0; i < n; i++) dv.setUint16(2 * i, f32ToBf16(values[i]), true); break;
    case 'f16': for (let i = 0; i < n; i++) dv.setUint16(2 * i, f32ToF16(values[i]), true); break;
    case 's32': for (let i = 0; i < n; i++) dv.setInt32(4 * i, toStored(t, values[i]), true); break;
    case 's8':
    case 'u8': for (let i = 0; i < n; i++) out[i] = toStored(t, values[i]) & 0xff; break;
    case 'f8_e4m3': for (let i = 0; i < n; i++) out[i] = f32ToF8E4m3(values[i], fp8); break;
    case 'f8_e5m2': for (let i = 0; i < n; i++) out[i] = f32ToF8E5m2(values[i], fp8); break;
    case 'e8m0': {
      const mode = opts?.e8m0Rounding ?? 'floor';
      for (let i = 0; i < n; i++) out[i] = toE8m0(values[i], mode);
      break;
    }
    case 's4':
    case 'u4':
    case 'f4_e2m1': {
      const codes = new Uint8Array(n);
      for (let i = 0; i < n; i++) codes[i] = toStored(t, values[i]) & 0xf;
      pack4(codes, out);
      break;
    }
    default: throw new DnnlError('invalid_arguments', `encodeArray: no encoding for data type ${t}`);
  }
  return out;
}

/**
 * Decodes `count` elements of type `t` from little-endian bytes (the layout {@link encodeArray}
 * writes) to f32. Every low-precision value (and every bf16/f16/s8/u8 value) is exact in f32;
 * s32 values beyond 2^24 are rounded to f32.
 */
export function decodeArray(t: DataType, bytes: Uint8Array, count: number): Float32Array {
  checkType('decodeArray', t);
  checkCount('decodeArray', count);
  const need = dtBytes(t, count);
  check(bytes.length >= need, `decodeArray: ${count} ${t} elements need ${need} bytes, got ${bytes.length}`);
  const out = new Float32Array(count);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (t) {
    case 'f32': for (let i = 0; i < count; i++) out[i] = dv.getFloat32(4 * i, true); break;
    case 'bf16': for (let i = 0; i < count; i++) out[i] = bf16ToF32(dv.getUint16(2 * i, true)); break;
    case 'f16': for (let i = 0; i < count; i++) out[i] = f16ToF32(dv.getUint16(2 * i, true)); break;
    case 's32': for (let i = 0; i < count; i++) out[i] = dv.getInt32(4 * i, true); break;
    case 's8': for (let i = 0; i < count; i++) out[i] = dv.getInt8(i); break;
    case 'u8': for (let i = 0; i < count; i++) out[i] = bytes[i]; break;
    case 'f8_e4m3': for (let i = 0; i < count; i++) out[i] = f8E4m3ToF32(bytes[i]); break;
    case 'f8_e5m2': for (let i = 0; i < count; i++) out[i] = f8E5m2ToF32(bytes[i]); break;
    case 'e8m0': for (let i = 0; i < count; i++) out[i] = e8m0ToF32(bytes[i]); break;
    case 's4': out.set(unpack4(bytes, count, true)); break;
    case 'u4': out.set(unpack4(bytes, count, false)); break;
    case 'f4_e2m1': {
      const codes = unpack4(bytes, count, false);
      for (let i = 0; i < count; i++) out[i] = f4E2m1ToF32(codes[i]);
      break;
    }
    default: throw new DnnlError('invalid_arguments', `decodeArray: no decoding for data type ${t}`);
  }
  return out;
}
