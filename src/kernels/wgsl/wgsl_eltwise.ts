import type { EltwiseAlg } from '../../attr/eltwise.js';
import type { PostOp } from '../../attr/post_ops.js';

/** An f32 literal that WGSL parses back to the same value. */
export function f32Literal(x: number): string {
  const v = Math.fround(x);
  if (!Number.isFinite(v)) return v > 0 ? 'bitcast<f32>(0x7f800000u)' : v < 0 ? 'bitcast<f32>(0xff800000u)' : 'bitcast<f32>(0x7fc00000u)';
  return `${v.toPrecision(9)}f`.replace('e+', 'e');
}

/** WGSL helpers the eltwise expressions call (erf to 1.5e-7: Abramowitz-Stegun 7.1.26; exp overflow-safe logistic). */
export const WGSL_ELTWISE_HELPERS = /* wgsl */ `
fn gd_erf(x: f32) -> f32 {
  let a = abs(x);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return select(y, -y, x < 0.0);
}
fn gd_logistic(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
fn gd_tanh(x: f32) -> f32 { return 2.0 * gd_logistic(2.0 * x) - 1.0; }
`;

/** The WGSL expression of one eltwise algorithm on `x` (semantics of eltwiseScalar, attr/eltwise.ts). */
export function eltwiseWgsl(alg: EltwiseAlg, x: string, alpha: number, beta: number): string {
  const a = f32Literal(alpha), b = f32Literal(beta);
  switch (alg) {
    case 'eltwise_relu': return `select(${a} * ${x}, ${x}, ${x} > 0.0)`;
    case 'eltwise_gelu_erf': return `0.5 * ${x} * (1.0 + gd_erf(${x} * 0.70710678118f))`;
    case 'eltwise_gelu_tanh': return `0.5 * ${x} * (1.0 + gd_tanh(0.79788456080f * (${x} + 0.044715 * ${x} * ${x} * ${x})))`;
    case 'eltwise_swish': return `${x} * gd_logistic(${a} * ${x})`;
    case 'eltwise_logistic': return `gd_logistic(${x})`;
    case 'eltwise_tanh': return `gd_tanh(${x})`;
    case 'eltwise_linear': return `${a} * ${x} + ${b}`;
    case 'eltwise_clip': return `min(${b}, max(${a}, ${x}))`;
    case 'eltwise_abs': return `abs(${x})`;
    case 'eltwise_square': return `${x} * ${x}`;
    case 'eltwise_exp': return `exp(${x})`;
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
