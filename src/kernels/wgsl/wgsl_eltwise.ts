import type { EltwiseAlg } from '../../attr/eltwise.js';
import type { PostOp } from '../../attr/post_ops.js';
import { WGSL_VMATH } from './wgsl_vmath.js';

/** An f32 literal that WGSL parses back to the same value. */
export function f32Literal(x: number): string {
  const v = Math.fround(x);
  if (!Number.isFinite(v)) return v > 0 ? 'bitcast<f32>(0x7f800000u)' : v < 0 ? 'bitcast<f32>(0xff800000u)' : 'bitcast<f32>(0x7fc00000u)';
  return `${v.toPrecision(9)}f`.replace('e+', 'e');
}


/**
 * WGSL helpers the eltwise expressions call, the same approximations as the cpu's wasm/src/vmath.h
 * where a GPU compiler keeps them:
 * - erf as `x P(x^2)` below 1 and `1 - exp(-a^2) Q(1/a)` beyond (relative error < 1e-6 with an exact
 *   exp); gelu_erf through erfc below -sqrt 2 (relative accuracy on the negative tail, where 1 + erf
 *   cancels); an overflow-safe logistic;
 * - log as Cephes logf (WGSL's log is only absolutely accurate near 1, which log1p would turn into
 *   relative error); log1p as its series below 1/4 (the cpu's Goldberg form `log(u) t / (u - 1)` is
 *   undone by a compiler that folds (1 + t) - 1 into t, as SwiftShader's does); expm1 (elu) as a
 *   Taylor polynomial below 1/2; soft_relu `max(z, 0) + log1p(e^-|z|)`; mish `x n / (n + 2)`,
 *   `n = e^x (e^x + 2)`;
 * - log and sqrt give -Inf / NaN outside their domain, as the cpu (WGSL leaves those values
 *   indeterminate), made from the argument's bits (a constant NaN / Inf is a shader-creation error).
 * - NaN and infinities follow the f32 evaluation of the formulas in attr/eltwise.ts, as on the cpu: WGSL
 *   leaves builtins of a NaN indeterminate (SwiftShader's exp(NaN) is Inf, our log's frexp of NaN a
 *   number) and a compiler folds a literal `0.0 * x` to 0, so the tests are integer ones on the bits:
 *   `gd_keep_nan` returns a NaN argument as the result, `gd_zmul` is `0 * x` with its NaN for an
 *   infinite x, `gd_clamp01` keeps a NaN. Subnormal results may flush to 0 (GPUs do; WGSL allows it).
 * - the exp post-op is the cpu's v_exp (WGSL_VMATH's vm_exp, a few ulp everywhere): WGSL's exp is
 *   3 + 2|x| ulp, 3.4e-6 relative at x = 77, where the result is large and that error is the dst's.
 *   The helpers below keep the builtin where its result is damped (a logistic, an erfc tail, e^x - 1
 *   below 0, mish's ratio).
 */
export const WGSL_ELTWISE_HELPERS = /* wgsl */ `${WGSL_VMATH}
fn gd_nan(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) | 0x7fc00000u); }
fn gd_inf(x: f32) -> f32 { return bitcast<f32>((bitcast<u32>(x) & 0x80000000u) | 0x7f800000u); }
fn gd_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn gd_finite(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
fn gd_keep_nan(x: f32, y: f32) -> f32 { return select(y, x, gd_isnan(x)); }
fn gd_zmul(x: f32) -> f32 { return select(gd_nan(x), bitcast<f32>(bitcast<u32>(x) & 0x80000000u), gd_finite(x)); }
fn gd_clamp01(x: f32) -> f32 { return select(clamp(x, 0.0, 1.0), x, gd_isnan(x)); }
fn gd_erf_small(z: f32) -> f32 {
  let s = z * z;
  var p = 7.854026326871433e-05;
  p = p * s - 0.0008010247659407249;
  p = p * s + 0.0051883345022822325;
  p = p * s - 0.02685381607033449;
  p = p * s + 0.11283585270822155;
  p = p * s - 0.37612625839751235;
  p = p * s + 1.1283791657323474;
  return p;
}
fn gd_erfc_big(a: f32) -> f32 {
  let u = 1.0 / a;
  let s = max(u, 1.0 / 6.0) - 0.58;
  var q = 0.053761120415378456;
  q = q * s - 0.02542326501671487;
  q = q * s - 0.030674322277622762;
  q = q * s + 0.05440927241971381;
  q = q * s - 0.05925275973899749;
  q = q * s + 0.035121676568563076;
  q = q * s + 0.038511063460253486;
  q = q * s - 0.17797061212871848;
  q = q * s + 0.39805595690594;
  q = q * s + 0.2883972273252244;
  let u2 = u * u;
  let asym = u * 0.56418958354775628 * (1.0 + u2 * (-0.5 + u2 * 0.75));
  return exp(-a * a) * select(q, asym, a > 6.0);
}
fn gd_erf(x: f32) -> f32 {
  let a = abs(x);
  if (a < 1.0) { return x * gd_erf_small(x); }
  let y = 1.0 - gd_erfc_big(a);
  return select(y, -y, x < 0.0);
}
fn gd_gelu_erf(x: f32) -> f32 {
  let z = x * 0.70710678118654752;
  let a = abs(z);
  if (a < 1.0) { return 0.5 * x * (1.0 + z * gd_erf_small(z)); }
  let ec = gd_erfc_big(a);
  return 0.5 * x * select(2.0 - ec, ec, z < 0.0);
}
fn gd_logistic(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
fn gd_tanh(x: f32) -> f32 { return 2.0 * gd_logistic(2.0 * x) - 1.0; }
fn gd_log(x: f32) -> f32 {
  if (x < 0.0) { return gd_nan(x); }
  if (x == 0.0) { return gd_inf(-1.0); }
  if (bitcast<u32>(x) == 0x7f800000u) { return x; }
  let fe = frexp(x);
  var m = fe.fract;
  var e = f32(fe.exp);
  if (m < 0.707106781186547524) { m = m + m - 1.0; e = e - 1.0; } else { m = m - 1.0; }
  let z = m * m;
  var y = 7.0376836292e-2;
  y = y * m - 1.1514610310e-1;
  y = y * m + 1.1676998740e-1;
  y = y * m - 1.2420140846e-1;
  y = y * m + 1.4249322787e-1;
  y = y * m - 1.6668057665e-1;
  y = y * m + 2.0000714765e-1;
  y = y * m - 2.4999993993e-1;
  y = y * m + 3.3333331174e-1;
  y = y * m * z + e * -2.12194440e-4 - 0.5 * z;
  return m + y + e * 0.693359375;
}
fn gd_sqrt(x: f32) -> f32 { return select(sqrt(x), gd_nan(x), x < 0.0); }
fn gd_expm1(x: f32) -> f32 {
  if (abs(x) >= 0.5) { return exp(x) - 1.0; }
  var p = 1.0 / 362880.0;
  p = p * x + 1.0 / 40320.0;
  p = p * x + 1.0 / 5040.0;
  p = p * x + 1.0 / 720.0;
  p = p * x + 1.0 / 120.0;
  p = p * x + 1.0 / 24.0;
  p = p * x + 1.0 / 6.0;
  p = p * x + 0.5;
  return x + x * x * p;
}
fn gd_log1p(t: f32) -> f32 {
  if (t > 0.25) { return gd_log(1.0 + t); }
  var p = 1.0 / 13.0;
  p = 1.0 / 12.0 - t * p;
  p = 1.0 / 11.0 - t * p;
  p = 1.0 / 10.0 - t * p;
  p = 1.0 / 9.0 - t * p;
  p = 1.0 / 8.0 - t * p;
  p = 1.0 / 7.0 - t * p;
  p = 1.0 / 6.0 - t * p;
  p = 1.0 / 5.0 - t * p;
  p = 1.0 / 4.0 - t * p;
  p = 1.0 / 3.0 - t * p;
  p = 0.5 - t * p;
  return t * (1.0 - t * p);
}
fn gd_softplus(z: f32) -> f32 { return max(z, 0.0) + gd_log1p(exp(-abs(z))); }
fn gd_mish(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  let e = exp(x);
  let n = e * (e + 2.0);
  return x * (n / (n + 2.0));
}
fn gd_powf(x: f32, b: f32) -> f32 {
  if (x < 0.0) { return gd_nan(x); }
  if (x == 0.0) { return select(gd_inf(1.0), 0.0, b > 0.0); }
  return exp(b * gd_log(x));
}
`;

/**
 * `x^beta` for a constant beta: an integral |beta| <= 64 as a multiplication chain (repeated
 * squaring, the sign from beta's parity, as the cpu's v_pow), else exp(beta log x).
 */
function powWgsl(x: string, beta: number): string {
  if (!Number.isInteger(beta) || Math.abs(beta) > 64) return `gd_powf(${x}, ${f32Literal(beta)})`;
  let k = Math.abs(beta), b = x, acc = '';
  while (k) {
    if (k & 1) acc = acc ? `(${acc} * ${b})` : b;
    k >>= 1;
    if (k) b = `(${b} * ${b})`;
  }
  if (!acc) acc = '1.0';
  return beta < 0 ? `(1.0 / ${acc})` : acc;
}

/**
 * The WGSL expression of one eltwise algorithm on `x` (semantics of eltwiseScalar, attr/eltwise.ts,
 * in f32): a NaN x gives NaN (pow with beta 0 aside: x^0 = 1), and a product by alpha = 0 keeps IEEE's NaN of
 * `0 * Inf` (see WGSL_ELTWISE_HELPERS). `x` is evaluated more than once: pass a variable.
 */
export function eltwiseWgsl(alg: EltwiseAlg, x: string, alpha: number, beta: number): string {
  // x^0 is 1 for every x, NaN included (IEEE pow, JavaScript's Math.pow, the cpu's chain)
  if (alg === 'eltwise_pow' && beta === 0) return eltwiseOfNumber(alg, x, alpha, beta);
  return `gd_keep_nan(${x}, ${eltwiseOfNumber(alg, x, alpha, beta)})`;
}

/** alpha * y, where a literal 0 would be folded away with the NaN of an infinite y. */
function timesAlpha(alpha: number, y: string): string {
  if (alpha !== 0) return `${f32Literal(alpha)} * ${y}`;
  return Object.is(alpha, -0) ? `(-gd_zmul(${y}))` : `gd_zmul(${y})`;
}

/** The expression for a number x (eltwiseWgsl adds the NaN rule). */
function eltwiseOfNumber(alg: EltwiseAlg, x: string, alpha: number, beta: number): string {
  const a = f32Literal(alpha), b = f32Literal(beta);
  switch (alg) {
    case 'eltwise_relu': return `select(${timesAlpha(alpha, x)}, ${x}, ${x} > 0.0)`;
    case 'eltwise_gelu_erf': return `gd_gelu_erf(${x})`;
    case 'eltwise_gelu_tanh': return `0.5 * ${x} * (1.0 + gd_tanh(0.79788456080f * (${x} + 0.044715 * ${x} * ${x} * ${x})))`;
    // alpha 0: x * logistic(0 * x), so x / 2, and NaN at +-Inf (logistic of NaN)
    case 'eltwise_swish': return alpha === 0 ? `select(gd_nan(${x}), 0.5 * ${x}, gd_finite(${x}))` : `${x} * gd_logistic(${a} * ${x})`;
    case 'eltwise_logistic': return `gd_logistic(${x})`;
    case 'eltwise_tanh': return `gd_tanh(${x})`;
    case 'eltwise_linear': return `${timesAlpha(alpha, x)} + ${b}`;
    case 'eltwise_clip': case 'eltwise_clip_v2': return `min(${b}, max(${a}, ${x}))`;
    case 'eltwise_abs': return `abs(${x})`;
    case 'eltwise_square': return `${x} * ${x}`;
    case 'eltwise_exp': return `vm_exp(${x})`;
    case 'eltwise_elu': return `select(${timesAlpha(alpha, `gd_expm1(min(${x}, 0.0))`)}, ${x}, ${x} > 0.0)`;
    case 'eltwise_sqrt': return `gd_sqrt(${x})`;
    case 'eltwise_soft_relu': return alpha === 1 ? `gd_softplus(${x})` : `gd_softplus(${timesAlpha(alpha, x)}) / ${a}`;
    case 'eltwise_log': return `gd_log(${x})`;
    case 'eltwise_pow': return alpha === 1 ? powWgsl(x, beta) : timesAlpha(alpha, powWgsl(x, beta));
    case 'eltwise_round': return `round(${x})`;
    case 'eltwise_mish': return `gd_mish(${x})`;
    case 'eltwise_hardswish': return `${x} * gd_clamp01(${timesAlpha(alpha, x)} + ${b})`;
    case 'eltwise_hardsigmoid': return `gd_clamp01(${timesAlpha(alpha, x)} + ${b})`;
  }
}

/** Epilogue statements for a chain of eltwise post-ops on `v`; undefined when the chain has another kind of op. */
export function eltwiseChainWgsl(ops: readonly PostOp[]): string | undefined {
  const out: string[] = [];
  for (const op of ops) {
    if (op.kind !== 'eltwise') return undefined;
    out.push(`v = ${eltwiseWgsl(op.alg, 'v', op.alpha, op.beta)};`);
  }
  return out.join(' ');
}
