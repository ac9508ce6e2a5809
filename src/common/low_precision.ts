/**
 * Codecs for the low-precision data types: `f8_e4m3`, `f8_e5m2` (OCP 8-bit Floating Point
 * Specification OFP8 v1.0), `f4_e2m1` and `e8m0` (OCP Microscaling Formats MX v1.0), and the 4-bit
 * integers `s4`, `u4`.
 *
 * A *code* is the bit pattern of one element as a small non-negative integer (0..255 for the 8-bit
 * types, 0..15 for `f4_e2m1` and `u4`); for `s4` the code is the integer value itself, -8..7, and
 * its two's-complement nibble (0..15) is accepted wherever a code is read.
 *
 * Number -> code conversions are exact: the input number (a float64, so every f32 is exact) is
 * rounded once, to nearest with ties to even, straight to the destination format — never through
 * f32 or f16 first — so an f32 input gets exactly the result of a correctly rounded f32 -> FP8/FP4
 * conversion. Special values (NaN, infinities, overflow, zero, negative numbers for `e8m0`) follow
 * the rules documented on each function.
 *
 * 4-bit packing: element 2i is stored in the low nibble (bits 0..3) of byte i and element 2i+1 in
 * the high nibble (bits 4..7), as in oneDNN (`s4`/`u4`/`f4_e2m1` memory) and PyTorch
 * (`float4_e2m1fn_x2`, `quint4x2`). An odd element count leaves the high nibble of the last byte as
 * padding, written as 0 by {@link pack4}.
 */

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/** floor(log2(a)) for a finite a > 0, exact for every double (subnormals included). */
function ilog2(a: number): number {
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  return e;
}

/** Rounds to the nearest integer, ties to even (C `nearbyint` in the default rounding mode). */
export function roundHalfEven(x: number): number {
  const n = Math.floor(x);
  const f = x - n; // exact: the fraction of a double is a double
  return f > 0.5 || (f === 0.5 && n % 2 !== 0) ? n + 1 : n;
}

/** A binary minifloat with a sign bit, `ebits` exponent bits and `mbits` stored mantissa bits. */
interface MiniFloat {
  readonly ebits: number;
  readonly mbits: number;
  readonly bias: number;
  /** Code of the largest finite magnitude (sign bit clear). */
  readonly maxCode: number;
  /** Code of +infinity, or -1 when the format has none. */
  readonly infCode: number;
  /** Canonical NaN code produced for NaN inputs, or -1 when the format has no NaN. */
  readonly nanCode: number;
  /** Code produced for a NaN input by a format without NaN. */
  readonly nanInputCode: number;
}

const E4M3: MiniFloat = { ebits: 4, mbits: 3, bias: 7, maxCode: 0x7e, infCode: -1, nanCode: 0x7f, nanInputCode: 0x7f };
const E5M2: MiniFloat = { ebits: 5, mbits: 2, bias: 15, maxCode: 0x7b, infCode: 0x7c, nanCode: 0x7e, nanInputCode: 0x7e };
const E2M1: MiniFloat = { ebits: 2, mbits: 1, bias: 1, maxCode: 0x7, infCode: -1, nanCode: -1, nanInputCode: 0x8 };

function signBit(f: MiniFloat): number {
  return 1 << (f.ebits + f.mbits);
}

/** Value of a finite, non-negative code (sign bit clear) of `f`. */
function magnitude(f: MiniFloat, code: number): number {
  const e = code >>> f.mbits;
  const m = code & ((1 << f.mbits) - 1);
  const emin = 1 - f.bias;
  return e === 0 ? m * 2 ** (emin - f.mbits) : ((1 << f.mbits) + m) * 2 ** (e - f.bias - f.mbits);
}

/**
 * Round-to-nearest-even conversion of a number to `f`. `saturate`: finite values beyond the largest
 * finite value and infinities become ±max; otherwise they become ±Inf (if the format has one) or
 * NaN (if it has one). A format with neither always saturates.
 */
function encodeMini(f: MiniFloat, x: number, saturate: boolean): number {
  if (x !== x) return f.nanCode >= 0 ? f.nanCode : f.nanInputCode;
  const sign = x < 0 || Object.is(x, -0) ? signBit(f) : 0;
  const a = Math.abs(x);
  if (a === 0) return sign;
  const overflow = saturate || (f.infCode < 0 && f.nanCode < 0) ? f.maxCode : f.infCode >= 0 ? f.infCode : f.nanCode;
  if (a === Infinity) return sign | overflow;
  const emin = 1 - f.bias;
  // Quantum (spacing of representable values) at a's binade, with an unbounded exponent range above.
  const qexp = Math.max(ilog2(a), emin) - f.mbits;
  const r = a / 2 ** qexp; // exact: scaling by a power of two, r < 2^(mbits+1)
  let n = Math.floor(r);
  const frac = r - n;
  if (frac > 0.5 || (frac === 0.5 && (n & 1) === 1)) n += 1;
  if (n === 0) return sign; // underflow to a signed zero
  const v = n * 2 ** qexp;
  if (v > magnitude(f, f.maxCode)) return sign | overflow;
  if (qexp === emin - f.mbits) return sign | n; // subnormal, or carried into the smallest normal binade: n is the code
  let e = qexp + f.mbits;
  if (n === 1 << (f.mbits + 1)) {
    n >>>= 1;
    e += 1;
  }
  return sign | ((e + f.bias) << f.mbits) | (n - (1 << f.mbits));
}

function decodeTable(f: MiniFloat, isNaN: (code: number) => boolean): Float64Array {
  const n = 1 << (1 + f.ebits + f.mbits);
  const sb = signBit(f);
  const t = new Float64Array(n);
  for (let c = 0; c < n; c++) {
    const mag = c & (sb - 1);
    const s = c & sb ? -1 : 1;
    if (isNaN(mag)) t[c] = NaN;
    else if (mag === f.infCode) t[c] = s * Infinity;
    else t[c] = s * magnitude(f, mag); // s * 0 gives -0 for the negative zero code
  }
  return t;
}

/** Options of the FP8 conversions. */
export interface Fp8Options {
  /**
   * Saturating conversion (default `true`, OFP8 "saturation mode"): finite values whose magnitude
   * exceeds the largest finite value, and ±Inf, become ±max normal (±448 for E4M3, ±57344 for
   * E5M2). `false` (OFP8 non-saturating mode): values that round beyond max normal become NaN
   * (E4M3) or ±Inf (E5M2), and ±Inf becomes NaN (E4M3) or stays ±Inf (E5M2). NaN always gives NaN.
   */
  readonly saturate?: boolean;
}

// ---------------------------------------------------------------------------------------------
// f8_e4m3 (OFP8 E4M3, a.k.a. E4M3FN)
// ---------------------------------------------------------------------------------------------

/** Largest finite f8_e4m3 value, code 0x7E (S.1111.110). */
export const F8_E4M3_MAX = 448;
/** Canonical f8_e4m3 NaN code produced for NaN inputs (S.1111.111 with S = 0). */
export const F8_E4M3_NAN = 0x7f;

const E4M3_TABLE = decodeTable(E4M3, (m) => m === 0x7f);

/**
 * f8_e4m3 code (0..255, low 8 bits used) -> value. Bias 7, no infinities, NaN = S.1111.111
 * (0x7F, 0xFF), max normal ±448 (0x7E), min normal 2^-6 (0x08), min subnormal 2^-9 (0x01);
 * 0x80 is -0.
 */
export function f8E4m3ToF32(code: number): number {
  return E4M3_TABLE[code & 0xff];
}

/**
 * Number -> f8_e4m3 code, round to nearest even. Saturating (default): |x| > 448 and ±Inf give
 * ±448 (0x7E/0xFE), following the OFP8 v1.0 conversion table for saturation mode.
 * Non-saturating: values that round beyond 448 — i.e. |x| > 464, since 464 is the tie between 448
 * (even) and the unrepresentable 480 — and ±Inf give NaN with the sign of x (0x7F/0xFF), as in
 * oneDNN's and PyTorch's `float8_e4m3fn` conversions. A NaN input always gives 0x7F (the sign of a
 * NaN is not observable reliably in JavaScript). Tiny values underflow to a zero of the same sign.
 */
export function f32ToF8E4m3(x: number, opts?: Fp8Options): number {
  return encodeMini(E4M3, x, opts?.saturate ?? true);
}

// ---------------------------------------------------------------------------------------------
// f8_e5m2 (OFP8 E5M2: IEEE-754-like, the upper byte of an IEEE half)
// ---------------------------------------------------------------------------------------------

/** Largest finite f8_e5m2 value, code 0x7B (S.11110.11). */
export const F8_E5M2_MAX = 57344;
/** Canonical f8_e5m2 NaN code produced for NaN inputs (quiet NaN S.11111.10 with S = 0). */
export const F8_E5M2_NAN = 0x7e;
/** f8_e5m2 +Inf code (S.11111.00); -Inf is 0xFC. */
export const F8_E5M2_INF = 0x7c;

const E5M2_TABLE = decodeTable(E5M2, (m) => m > 0x7c);

/**
 * f8_e5m2 code (0..255, low 8 bits used) -> value. Bias 15, ±Inf = 0x7C/0xFC, NaN = S.11111.{01,10,11},
 * max normal ±57344 (0x7B), min normal 2^-14 (0x04), min subnormal 2^-16 (0x01).
 */
export function f8E5m2ToF32(code: number): number {
  return E5M2_TABLE[code & 0xff];
}

/**
 * Number -> f8_e5m2 code, round to nearest even. Saturating (default): |x| > 57344 and ±Inf give
 * ±57344 (0x7B/0xFB) per the OFP8 v1.0 saturation-mode table. Non-saturating: IEEE overflow —
 * |x| >= 61440 (the tie between 57344, odd, and 2^16, even) gives ±Inf (0x7C/0xFC); ±Inf stays
 * ±Inf. NaN gives the quiet NaN 0x7E (what truncating the f16 quiet NaN 0x7E00 gives; oneDNN and
 * ml_dtypes produce it too).
 */
export function f32ToF8E5m2(x: number, opts?: Fp8Options): number {
  return encodeMini(E5M2, x, opts?.saturate ?? true);
}

// ---------------------------------------------------------------------------------------------
// f4_e2m1 (OCP MX FP4)
// ---------------------------------------------------------------------------------------------

/** Largest finite f4_e2m1 value, code 0x7 (S.11.1). */
export const F4_E2M1_MAX = 6;

const E2M1_TABLE = decodeTable(E2M1, () => false);

/**
 * f4_e2m1 code (0..15, low 4 bits used) -> value: 0x0..0x7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
 * 0x8..0xF the same negated (0x8 is -0). No Inf, no NaN.
 */
export function f4E2m1ToF32(code: number): number {
  return E2M1_TABLE[code & 0xf];
}

/**
 * Number -> f4_e2m1 code, round to nearest even, always saturating (the format has no Inf/NaN, and
 * the MX spec converts to FP4 with saturation): |x| > 6 and ±Inf give ±6 (0x7/0xF).
 * NaN -> 0x8 (-0): the MX spec leaves NaN conversion to FP4 implementation-defined; we follow
 * ml_dtypes (`float4_e2m1fn` quiet_NaN() is 0b1000), so a NaN element contributes zero. (oneDNN's
 * `float2e2m1` returns ±6 instead. In an MX block a NaN belongs in the e8m0 scale, see
 * {@link toE8m0}.)
 */
export function f32ToF4E2m1(x: number): number {
  return encodeMini(E2M1, x, true);
}

// ---------------------------------------------------------------------------------------------
// e8m0 (OCP MX scale)
// ---------------------------------------------------------------------------------------------

/** The e8m0 NaN code. */
export const E8M0_NAN = 0xff;

/**
 * e8m0 code (0..255, low 8 bits used) -> 2^(code - 127); 0xFF is NaN. No sign, no zero, no Inf:
 * the range is 2^-127 (0x00, an f32 subnormal, still exact in f32) .. 2^127 (0xFE).
 */
export function e8m0ToF32(code: number): number {
  const c = code & 0xff;
  return c === E8M0_NAN ? NaN : 2 ** (c - 127);
}

/** e8m0 code -> its unbiased exponent (code - 127), NaN for 0xFF. */
export function e8m0ToExponent(code: number): number {
  const c = code & 0xff;
  return c === E8M0_NAN ? NaN : c - 127;
}

/**
 * Unbiased power-of-two exponent -> e8m0 code, e.g. the OCP MX shared scale exponent
 * `floor(log2(amax)) - emax_elem`. Integers are clamped to the representable range [-127, 127]
 * (0x00..0xFE); -Infinity (log2 of 0) gives 0x00 and +Infinity or NaN give NaN (0xFF), so for
 * every x >= 0, `e8m0FromExponent(k)` with k = floor(log2(x)) computed exactly equals
 * `toE8m0(x, 'floor')` (beware: `Math.floor(Math.log2(x))` can be off by one just below a power of
 * two). A finite non-integer throws a RangeError.
 */
export function e8m0FromExponent(e: number): number {
  if (e !== e || e === Infinity) return E8M0_NAN;
  if (e === -Infinity) return 0;
  if (!Number.isInteger(e)) throw new RangeError(`e8m0FromExponent: exponent must be an integer, got ${e}`);
  return Math.max(-127, Math.min(127, e)) + 127;
}

/** How {@link toE8m0} picks a power of two for a value between two of them. */
export type E8m0Rounding = 'floor' | 'ceil' | 'rne';

/**
 * Number -> e8m0 code, i.e. a power of two 2^k, k in [-127, 127].
 *
 * - `'floor'` (default): the largest 2^k <= x, i.e. k = floor(log2(x)) — the rounding of the OCP
 *   MX v1.0 scale computation (shared exponent = floor(log2(amax)) - emax_elem) and of torchao's
 *   `ScaleCalculationMode.FLOOR`.
 * - `'ceil'`: the smallest 2^k >= x (a scale that never makes amax / scale exceed the target).
 * - `'rne'`: the nearest power of two in the *linear* domain: below 1.5 * 2^k round down, at or
 *   above it round up. With no stored mantissa bits the only significand bit is the implicit
 *   leading 1, so a round-to-nearest-even on the bits (guard/round/sticky, LSB = implicit 1) sends
 *   the tie up; this is exactly PyTorch's float -> `float8_e8m0fnu` conversion for normal f32 inputs.
 *
 * Special inputs (the format has no sign, no zero, no Inf): NaN, +Inf and negative numbers
 * (including -Inf) give NaN (0xFF) — a negative scale is an error, not something to round (PyTorch
 * instead ignores the sign); +0 and -0 give 0x00 (2^-127, the smallest scale, which is what
 * clamping floor(log2(0)) = -Inf to the range gives, and what PyTorch gives). Finite values beyond
 * the range saturate: anything that would round to 2^128 or more gives 0xFE (2^127), anything
 * below 2^-127 gives 0x00.
 */
export function toE8m0(x: number, mode: E8m0Rounding = 'floor'): number {
  if (x !== x || x === Infinity || x < 0) return E8M0_NAN;
  if (x === 0) return 0;
  const e = ilog2(x);
  let k: number;
  switch (mode) {
    case 'floor': k = e; break;
    case 'ceil': k = 2 ** e === x ? e : e + 1; break;
    case 'rne': k = x >= 1.5 * 2 ** e ? e + 1 : e; break;
    default: throw new RangeError(`toE8m0: unknown rounding mode '${String(mode)}'`);
  }
  return Math.max(-127, Math.min(127, k)) + 127;
}

// ---------------------------------------------------------------------------------------------
// s4 / u4
// ---------------------------------------------------------------------------------------------

/**
 * Number -> s4 value in [-8, 7]: round to nearest even (oneDNN converts float -> int with
 * `nearbyint`), then saturate; ±Inf saturate, NaN -> 0, -0 -> 0.
 */
export function f32ToS4(x: number): number {
  if (x !== x) return 0;
  return Math.max(-8, Math.min(7, roundHalfEven(x))) | 0;
}

/** Number -> u4 value in [0, 15]: round to nearest even, then saturate; NaN -> 0. */
export function f32ToU4(x: number): number {
  if (x !== x) return 0;
  return Math.max(0, Math.min(15, roundHalfEven(x))) | 0;
}

/** s4 code -> value: the low nibble sign-extended, so both -8..7 and the nibble 0..15 work. */
export function s4ToF32(code: number): number {
  return ((code & 0xf) ^ 0x8) - 0x8;
}

/** u4 code -> value: the low nibble. */
export function u4ToF32(code: number): number {
  return code & 0xf;
}

// ---------------------------------------------------------------------------------------------
// 4-bit packing
// ---------------------------------------------------------------------------------------------

/** Bytes holding `count` 4-bit elements: ceil(count / 2). */
export function packedBytes4(count: number): number {
  return Math.ceil(count / 2);
}

/**
 * Packs 4-bit codes two per byte: element 2i -> low nibble of byte i, element 2i+1 -> high nibble.
 * Only the low 4 bits of each code are used (so s4 values -8..7 are stored in two's complement).
 * With an odd count the padding high nibble of the last byte is written as 0. `out` (if given)
 * must hold at least ceil(n/2) bytes; bytes after those are left untouched.
 */
export function pack4(codes: ArrayLike<number>, out?: Uint8Array): Uint8Array {
  const n = codes.length;
  const nb = packedBytes4(n);
  const dst = out ?? new Uint8Array(nb);
  if (dst.length < nb) throw new RangeError(`pack4: output holds ${dst.length} bytes, ${nb} needed for ${n} elements`);
  for (let i = 0; i + 1 < n; i += 2) dst[i >>> 1] = (codes[i] & 0xf) | ((codes[i + 1] & 0xf) << 4);
  if (n & 1) dst[nb - 1] = codes[n - 1] & 0xf;
  return dst;
}

/**
 * Unpacks `count` 4-bit elements (element 2i from the low nibble of byte i). `signed`: sign-extend
 * each nibble (s4) into an Int8Array; otherwise return the nibbles (u4, f4_e2m1 codes) as a
 * Uint8Array. The padding nibble of an odd count is ignored.
 */
export function unpack4(bytes: ArrayLike<number>, count: number, signed: true): Int8Array;
export function unpack4(bytes: ArrayLike<number>, count: number, signed: false): Uint8Array;
export function unpack4(bytes: ArrayLike<number>, count: number, signed: boolean): Int8Array | Uint8Array;
export function unpack4(bytes: ArrayLike<number>, count: number, signed: boolean): Int8Array | Uint8Array {
  if (!Number.isSafeInteger(count) || count < 0) throw new RangeError(`unpack4: bad element count ${count}`);
  const nb = packedBytes4(count);
  if (bytes.length < nb) throw new RangeError(`unpack4: ${count} elements need ${nb} bytes, got ${bytes.length}`);
  const out = signed ? new Int8Array(count) : new Uint8Array(count);
  for (let i = 0; i < count; i++) {
    const nib = (bytes[i >>> 1] >>> ((i & 1) << 2)) & 0xf;
    out[i] = signed ? (nib ^ 0x8) - 0x8 : nib;
  }
  return out;
}

/** The 4-bit code of element `i` of packed `bytes` (unsigned nibble). */
export function getNibble(bytes: ArrayLike<number>, i: number): number {
  return (bytes[i >>> 1] >>> ((i & 1) << 2)) & 0xf;
}

/** Stores the low 4 bits of `code` as element `i` of packed `bytes`, keeping the other nibble. */
export function setNibble(bytes: Uint8Array, i: number, code: number): void {
  const b = i >>> 1;
  bytes[b] = i & 1 ? (bytes[b] & 0x0f) | ((code & 0xf) << 4) : (bytes[b] & 0xf0) | (code & 0xf);
}
