/**
 * Dynamic quantization helpers (rfcs/0002 section 5): turn f32 activations or weights into the
 * low-precision values and scales the quantized matmul consumes. Every helper rounds with RNE and
 * returns plain arrays ready for `Memory.write` (which takes logical values of any data type):
 * `values` are the quantized elements as numbers (exactly representable in the element type), so
 * `mem.write(values)` stores them without further rounding; `codes` are the same elements as
 * stored codes (one per element, unpacked) for callers that fill `mem.values` themselves.
 *
 * Dequantization is always `x ~ (values - zeroPoint) * scale`, matching the matmul's
 * `(src - zp_src) * s_src` with per-row (mask 1) or per-block (mask 3, groups [1, block]) src scales.
 */
import { check } from '../common/status.js';
import { checkOptionKeys } from '../common/option_keys.js';
import { roundHalfEven, F4_E2M1_MAX, F8_E4M3_MAX, F8_E5M2_MAX, e8m0FromExponent, toE8m0 } from '../common/low_precision.js';
import { fromStored, toStored, type DataType } from '../common/data_type.js';

/** Element types of the MX / FP8 helpers. */
export type LowFloat = 'f8_e4m3' | 'f8_e5m2' | 'f4_e2m1';

/** Largest finite value and its exponent `emax = floor(log2(max))` (OCP MX v1.0 table). */
const ELEM: Record<LowFloat, { max: number; emax: number }> = {
  f8_e4m3: { max: F8_E4M3_MAX, emax: 8 },
  f8_e5m2: { max: F8_E5M2_MAX, emax: 15 },
  f4_e2m1: { max: F4_E2M1_MAX, emax: 2 },
};

function checkShape(fn: string, x: ArrayLike<number>, shape: readonly [number, number]): [number, number] {
  check(Array.isArray(shape) && shape.length === 2, `${fn}: shape must be [rows, K]`);
  const [rows, K] = shape;
  check(Number.isSafeInteger(rows) && rows >= 0 && Number.isSafeInteger(K) && K >= 0, `${fn}: shape [${rows}, ${K}] must hold non-negative integers`);
  check(x.length === rows * K, `${fn}: x has ${x.length} elements, shape [${rows}, ${K}] needs ${rows * K}`);
  for (let i = 0; i < x.length; i++) check(Number.isFinite(x[i]), `${fn}: x[${i}] = ${x[i]} is not finite`);
  return [rows, K];
}

function checkElem(fn: string, elem: LowFloat): void {
  check(elem in ELEM, `${fn}: elem must be f8_e4m3, f8_e5m2 or f4_e2m1, got '${String(elem)}'`);
}

export interface PerTokenInt8 {
  /** s8 values, row-major [rows, K]: `mem.write(values)` on an s8 memory. */
  readonly values: Int8Array;
  /** f32 scale per row ([rows]; src scales mask 1). */
  readonly scales: Float32Array;
  /** s32 zero point per row ([rows]; src zero points mask 1), asymmetric only. */
  readonly zeroPoints: Int32Array | undefined;
}

/**
 * Per-token (per-row) int8 quantization of `x [rows, K]`.
 * Symmetric: `s = amax / 127`, `q = RNE(x / s)`. Asymmetric: `s = (max - min) / 255`,
 * `zp = RNE(-min / s) - 128`, `q = clamp(RNE(x / s) + zp, -128, 127)`. The scale is rounded to f32
 * first and q computed with that f32 scale. A row whose range is 0 (all zeros, or constant for the
 * asymmetric form) gets scale 1.
 */
export function perTokenInt8(x: ArrayLike<number>, shape: readonly [number, number], opts: { symmetric?: boolean } = {}): PerTokenInt8 {
  const fn = 'quant.perTokenInt8';
  const [rows, K] = checkShape(fn, x, shape);
  checkOptionKeys(fn, opts, ['symmetric']);
  const symmetric = opts.symmetric ?? true;
  const values = new Int8Array(rows * K);
  const scales = new Float32Array(rows);
  const zeroPoints = symmetric ? undefined : new Int32Array(rows);
  for (let r = 0; r < rows; r++) {
    let lo = Infinity, hi = -Infinity;
    for (let k = 0; k < K; k++) {
      lo = Math.min(lo, x[r * K + k]);
      hi = Math.max(hi, x[r * K + k]);
    }
    if (K === 0) lo = hi = 0;
    if (symmetric) {
      const amax = Math.max(Math.abs(lo), Math.abs(hi));
      const s = amax > 0 ? Math.fround(amax / 127) : 1;
      scales[r] = s;
      for (let k = 0; k < K; k++) values[r * K + k] = Math.max(-128, Math.min(127, roundHalfEven(x[r * K + k] / s)));
    } else {
      const s = hi > lo ? Math.fround((hi - lo) / 255) : 1;
      const zp = roundHalfEven(-lo / s) - 128;
      scales[r] = s;
      zeroPoints![r] = zp;
      for (let k = 0; k < K; k++) values[r * K + k] = Math.max(-128, Math.min(127, roundHalfEven(x[r * K + k] / s) + zp));
    }
  }
  return { values, scales, zeroPoints };
}

export interface PerBlockMx {
  /** Element values (exact in `elem`), same layout as x. */
  readonly values: Float32Array;
  /** Element codes (one per element: bytes for fp8, nibbles for f4_e2m1). */
  readonly codes: Uint8Array;
  /** Scale per block, 2^e (exact in e8m0): `mem.write(scales)` on an e8m0 memory. */
  readonly scales: Float32Array;
  /** e8m0 codes of the scales. */
  readonly scaleCodes: Uint8Array;
}

/** How `quant.perBlockMx` derives a block's shared exponent from its amax. */
export type MxScaleRounding = 'floor' | 'rceil';

/** Options of `quant.perBlockMx` (every accepted key is listed here). */
export interface PerBlockMxOptions {
  /** Elements per scale, along each row. Default 32. */
  readonly block?: number;
  /** Element type. Default f8_e4m3. */
  readonly elem?: LowFloat;
  /**
   * 'floor' (default, OCP MX v1.0): `e = floor(log2(amax)) - emax(elem)`; a block whose amax mantissa
   * exceeds max(elem)'s saturates its largest values. 'rceil' (NVIDIA cuBLAS / Transformer Engine, PTX
   * `cvt.rp.satfinite.ue8m0x2.f32`): `e = ceil(log2(f32(amax / max(elem))))`, the smallest power of two
   * that makes every element fit, so nothing saturates.
   */
  readonly rounding?: MxScaleRounding;
}

/**
 * MX block quantization of a row-major `x [rows, K]`: blocks of `block` consecutive elements along K,
 * never across rows (K % block must be 0: src scales `[rows, K / block]`, mask 3, groups `[1, block]`).
 * Shared exponent per block by `rounding` (see `PerBlockMxOptions`), clamped to the e8m0 range; an
 * all-zero block gets 2^-127. `q = convert(x / 2^e)` with RNE, saturating.
 * MXFP8 = `f8_e4m3` (or e5m2) with block 32, MXFP4 = `f4_e2m1` with block 32.
 */
export function perBlockMx(x: ArrayLike<number>, shape: readonly [number, number], opts: PerBlockMxOptions = {}): PerBlockMx {
  const fn = 'quant.perBlockMx';
  check(opts !== null && typeof opts === 'object', `${fn}: options must be an object { block, elem, rounding }`);
  const { block = 32, elem = 'f8_e4m3', rounding = 'floor' } = opts;
  checkElem(fn, elem);
  check(Number.isSafeInteger(block) && block >= 1, `${fn}: block must be a positive integer, got ${block}`);
  check(rounding === 'floor' || rounding === 'rceil', `${fn}: rounding must be 'floor' or 'rceil', got '${String(rounding)}'`);
  const [, K] = checkShape(fn, x, shape);
  check(K % block === 0, `${fn}: rows of ${K} elements are not a multiple of the block size ${block} (a block may not straddle two rows)`);
  const nb = x.length / block;
  const values = new Float32Array(x.length);
  const codes = new Uint8Array(x.length);
  const scales = new Float32Array(nb);
  const scaleCodes = new Uint8Array(nb);
  const { max, emax } = ELEM[elem];
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    for (let i = b * block; i < (b + 1) * block; i++) amax = Math.max(amax, Math.abs(x[i]));
    // floor: floor(log2(amax)) exactly is the e8m0 'floor' rounding of amax; rceil: the e8m0 'ceil'
    // rounding of the f32 quotient (0 -> code 0 = 2^-127, like an all-zero block under floor).
    const e = amax === 0 ? -127
      : rounding === 'floor' ? Math.max(-127, Math.min(127, (toE8m0(amax, 'floor') - 127) - emax))
        : toE8m0(Math.fround(amax / max), 'ceil') - 127;
    const code = e8m0FromExponent(e);
    scaleCodes[b] = code;
    scales[b] = 2 ** e;
    for (let i = b * block; i < (b + 1) * block; i++) {
      const c = toStored(elem, x[i] / 2 ** e);
      codes[i] = c;
      values[i] = fromStored(elem, c);
    }
  }
  return { values, codes, scales, scaleCodes };
}

export interface PerTokenFp8 {
  readonly values: Float32Array;
  readonly codes: Uint8Array;
  /** f32 scale per row. */
  readonly scales: Float32Array;
}

/** Options of `quant.perTokenFp8` (every accepted key is listed here). */
export interface PerTokenFp8Options {
  /**
   * Floor of a row's scale: `s = max(amax / max(elem), minScale)`. Default `1 / (max(elem) * 512)`, vLLM's
   * `min_scaling_factor` (e4m3: 1 / (448 * 512); e5m2: 1 / (57344 * 512)): an all-zero row gets it, and a
   * row of tiny values is not blown up past 512 * max(elem) times its size. A positive finite number.
   */
  readonly minScale?: number;
}

/** vLLM's floor of a dynamic fp8 scale: `1 / (max(elem) * 512)`. */
export function fp8MinScale(elem: 'f8_e4m3' | 'f8_e5m2'): number {
  return 1 / (ELEM[elem].max * 512);
}

/**
 * Per-token FP8 quantization of `x [rows, K]` (vLLM `dynamic_per_token_scaled_fp8_quant`):
 * `s = max(f32(amax / max(elem)), f32(minScale))` per row, `q = convert(x / s)` with RNE, saturating.
 */
export function perTokenFp8(x: ArrayLike<number>, shape: readonly [number, number], elem: 'f8_e4m3' | 'f8_e5m2' = 'f8_e4m3', opts: PerTokenFp8Options = {}): PerTokenFp8 {
  const fn = 'quant.perTokenFp8';
  check(elem === 'f8_e4m3' || elem === 'f8_e5m2', `${fn}: elem must be f8_e4m3 or f8_e5m2, got '${String(elem)}'`);
  check(opts !== null && typeof opts === 'object', `${fn}: options must be an object { minScale }`);
  const minScale = opts.minScale ?? fp8MinScale(elem);
  check(typeof minScale === 'number' && Number.isFinite(minScale) && Math.fround(minScale) > 0, `${fn}: minScale must be a positive finite number (f32), got ${String(minScale)}`);
  const floor = Math.fround(minScale);
  const [rows, K] = checkShape(fn, x, shape);
  const values = new Float32Array(rows * K);
  const codes = new Uint8Array(rows * K);
  const scales = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[r * K + k]));
    const s = Math.max(Math.fround(amax / ELEM[elem].max), floor);
    scales[r] = s;
    for (let k = 0; k < K; k++) {
      const c = toStored(elem, x[r * K + k] / s);
      codes[r * K + k] = c;
      values[r * K + k] = fromStored(elem, c);
    }
  }
  return { values, codes, scales };
}

export interface PerBlockNvfp4 {
  /** f4_e2m1 element values. */
  readonly values: Float32Array;
  readonly codes: Uint8Array;
  /** f8_e4m3 scale per block (values; `mem.write(blockScales)` on an f8_e4m3 memory is exact). */
  readonly blockScales: Float32Array;
  readonly blockScaleCodes: Uint8Array;
  /** The f32 per-tensor (per-expert) factor: x ~ values * blockScale * globalScale. */
  readonly globalScale: number;
}

/**
 * NVFP4: f4_e2m1 elements, one f8_e4m3 scale per `block` (16) consecutive elements and one f32
 * factor for the whole of x: `global = amax / (6 * 448)`, block scale `e4m3(amax_block / 6 / global)`,
 * `q = f4(x / (blockScale * global))`, all RNE (saturating). In a matmul the block scales are weights
 * scales `[G, K/16, N]` (mask 7, groups `[1, 16, 1]`, f8_e4m3) or src scales `[rows, K/16]` (mask 3,
 * groups `[1, 16]`), and the f32 factor is folded into the dst scale (dst = x / s_dst: pass
 * `1 / (global_src * global_wei)`) or applied with a `binary_mul` post-op of shape `[G, 1]`.
 */
export function perBlockNvfp4(x: ArrayLike<number>, block = 16): PerBlockNvfp4 {
  const fn = 'quant.perBlockNvfp4';
  check(Number.isSafeInteger(block) && block >= 1, `${fn}: block must be a positive integer, got ${block}`);
  check(x.length % block === 0, `${fn}: ${x.length} elements are not a multiple of the block size ${block}`);
  let amax = 0;
  for (let i = 0; i < x.length; i++) {
    check(Number.isFinite(x[i]), `${fn}: x[${i}] = ${x[i]} is not finite`);
    amax = Math.max(amax, Math.abs(x[i]));
  }
  const globalScale = amax > 0 ? Math.fround(amax / (F4_E2M1_MAX * F8_E4M3_MAX)) : 1;
  const nb = x.length / block;
  const values = new Float32Array(x.length), codes = new Uint8Array(x.length);
  const blockScales = new Float32Array(nb), blockScaleCodes = new Uint8Array(nb);
  for (let b = 0; b < nb; b++) {
    let bmax = 0;
    for (let i = b * block; i < (b + 1) * block; i++) bmax = Math.max(bmax, Math.abs(x[i]));
    const sc = toStored('f8_e4m3', bmax / F4_E2M1_MAX / globalScale);
    blockScaleCodes[b] = sc;
    const s = fromStored('f8_e4m3', sc);
    blockScales[b] = s;
    const div = s * globalScale;
    for (let i = b * block; i < (b + 1) * block; i++) {
      const c = div > 0 ? toStored('f4_e2m1', x[i] / div) : 0;
      codes[i] = c;
      values[i] = fromStored('f4_e2m1', c);
    }
  }
  return { values, codes, blockScales, blockScaleCodes, globalScale };
}

/** Dequantizes per-row or per-block quantized values: `(values[i] - zp) * scale` with `block` elements per scale. */
export function dequantize(values: ArrayLike<number>, scales: ArrayLike<number>, block: number, zeroPoints?: ArrayLike<number>): Float64Array {
  check(Number.isSafeInteger(block) && block >= 1 && values.length === scales.length * block, `quant.dequantize: ${values.length} values need ${Math.ceil(values.length / Math.max(1, block))} scales of block ${block}, got ${scales.length}`);
  check(!zeroPoints || zeroPoints.length === scales.length, 'quant.dequantize: one zero point per scale');
  return Float64Array.from(values, (v, i) => (v - (zeroPoints ? zeroPoints[Math.floor(i / block)] : 0)) * scales[Math.floor(i / block)]);
}

/** The element type's largest finite value (448, 57344, 6). */
export function maxOf(elem: LowFloat | DataType): number {
  check(elem in ELEM, `quant.maxOf: elem must be f8_e4m3, f8_e5m2 or f4_e2m1, got '${String(elem)}'`);
  return ELEM[elem as LowFloat].max;
}
