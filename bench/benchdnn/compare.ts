/**
 * Comparison of the library's dst with the float64 reference, per dst data type. The reference is
 * exact; the library computes in f32 and converts to dst's type once (round to nearest even), so the
 * allowed error, relative to max(|ref|, 1), is half a unit in the last place of dst's mantissa
 * (2^-(m+1)) plus 2^-20 for the f32 result it rounds; f32 dst: 2^-23, or 2^-20 after a transcendental
 * post-op (exp, tanh, erf, sigmoid in f32). Integer dst: the reference saturated to the type's range, within 0.5
 * (round to nearest; + 2^-20 relative after a transcendental post-op). Saturating fp8 types: the reference clamped to +-max first; f32 / bf16 / f16:
 * a reference beyond the type's range expects +-Infinity (IEEE overflow, as the library's f32 math).
 */
import type { DataType } from '../../src/index.js';
import { F32_OVERFLOW } from './reference.js';

/** Mantissa bits of the floating-point dst types. */
const MANTISSA: Partial<Record<DataType, number>> = { f32: 23, bf16: 7, f16: 10, f8_e4m3: 3, f8_e5m2: 2, f4_e2m1: 1 };
const INT_RANGE: Partial<Record<DataType, readonly [number, number]>> = { s8: [-128, 127], u8: [0, 255], s32: [-2147483648, 2147483647] };
const FP_MAX: Partial<Record<DataType, number>> = { f8_e4m3: 448, f8_e5m2: 57344, f4_e2m1: 6 };
/** IEEE dst types overflow to infinity: past these magnitudes (max finite + half an ulp) RNE gives +-Inf. */
const OVERFLOW: Partial<Record<DataType, number>> = { f32: F32_OVERFLOW, bf16: 2 ** 128 * (1 - 2 ** -9), f16: 65520 };

/** The error of an f32 result that went through a transcendental post-op (exp, tanh, erf, ...). */
const F32_ERROR = 2 ** -20;

/** Relative tolerance for a dst type (README "Running benchdnn problem files" lists these). */
export function tolerance(dst: DataType, transcendental: boolean): number {
  if (INT_RANGE[dst]) return 0;
  const m = MANTISSA[dst];
  if (m === undefined) throw new Error(`compare: no tolerance for dst ${dst}`);
  if (dst === 'f32') return transcendental ? F32_ERROR : 2 ** -23;
  return 2 ** -(m + 1) + F32_ERROR;
}

export interface Comparison {
  readonly errors: number;
  readonly total: number;
  /** Share of zeros in the reference (benchdnn mistrusts results that are mostly zero). */
  readonly zeroRatio: number;
  /** The worst element, for the FAILED line. */
  readonly worst: { readonly index: number; readonly expected: number; readonly got: number; readonly error: number } | undefined;
}

/**
 * Compares every element; an error is an element outside the dst type's tolerance (a NaN the reference does
 * not have included). `alt`, when given, is a second acceptable reference (post-ops evaluated without f32's
 * overflow, as the cpu's reference impl does in float64): an element passes when it matches either.
 */
export function compare(got: ArrayLike<number>, ref: ArrayLike<number>, dst: DataType, transcendental: boolean, alt?: ArrayLike<number>): Comparison {
  if (got.length !== ref.length) throw new Error(`compare: ${got.length} results for ${ref.length} reference values`);
  const tol = tolerance(dst, transcendental);
  const range = INT_RANGE[dst], fpMax = FP_MAX[dst], ovf = OVERFLOW[dst];
  /** The value dst should hold for a reference r, and the error of g against it. */
  const judge = (g: number, r: number): { exp: number; err: number; bad: boolean } => {
    let exp = r;
    // integer conversion: NaN gives 0 (oneDNN's nearbyint + saturation, src/common/data_type.ts)
    if (range) exp = Number.isNaN(exp) ? 0 : Math.min(range[1], Math.max(range[0], exp));
    if (fpMax !== undefined) exp = Math.min(fpMax, Math.max(-fpMax, exp));
    if (ovf !== undefined && Math.abs(exp) >= ovf) exp = exp > 0 ? Infinity : -Infinity;
    // NaN where the reference is NaN (log / sqrt / pow outside their domain) matches, as in benchdnn.
    const diff = g === exp || (Number.isNaN(g) && Number.isNaN(exp)) ? 0 : Math.abs(g - exp);
    const err = diff === 0 ? 0 : range ? diff : diff / Math.max(Math.abs(exp), 1);
    // Integer dst rounds the f32 result: after a transcendental post-op that result may lie on the other
    // side of a half (ref 17.4999991, f32 17.5 -> 18), so the half gets the f32 result's error too.
    const half = 0.5 + (transcendental ? F32_ERROR * Math.max(Math.abs(exp), 1) : 1e-9 * Math.abs(exp));
    return { exp, err, bad: range ? !(err <= half) : !(err <= tol) };
  };
  let errors = 0, zeros = 0;
  let worst: Comparison['worst'];
  for (let i = 0; i < ref.length; i++) {
    let j = judge(got[i], ref[i]);
    if (j.bad && alt) {
      const a = judge(got[i], alt[i]);
      if (!a.bad) j = a;
    }
    if (j.exp === 0) zeros++;
    if (j.bad) errors++;
    const e = Number.isNaN(j.err) ? Infinity : j.err;
    if (worst === undefined || e > worst.error) worst = { index: i, expected: j.exp, got: got[i], error: e };
  }
  return { errors, total: ref.length, zeroRatio: ref.length ? zeros / ref.length : 0, worst };
}
