/** Element-wise algorithms (oneDNN `algorithm::eltwise_*`), shared by post-ops and the reference. */
export const algorithm = {
  eltwise_relu: 'eltwise_relu',
  eltwise_gelu_erf: 'eltwise_gelu_erf',
  eltwise_gelu_tanh: 'eltwise_gelu_tanh',
  eltwise_swish: 'eltwise_swish',
  eltwise_logistic: 'eltwise_logistic',
  eltwise_tanh: 'eltwise_tanh',
  eltwise_linear: 'eltwise_linear',
  eltwise_clip: 'eltwise_clip',
  eltwise_abs: 'eltwise_abs',
  eltwise_square: 'eltwise_square',
  eltwise_exp: 'eltwise_exp',
} as const;
export type EltwiseAlg = (typeof algorithm)[keyof typeof algorithm];

export function isEltwiseAlg(x: unknown): x is EltwiseAlg {
  return typeof x === 'string' && Object.values(algorithm).includes(x as EltwiseAlg);
}

/** erf with |error| < 1.5e-7 (Abramowitz-Stegun 7.1.26); enough for an f32 result. */
function erf(x: number): number {
  const s = x < 0 ? -1 : 1;
  const a = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * a);
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-a * a);
  return s * y;
}

/** Scalar semantics of each algorithm, with oneDNN's alpha/beta meanings. */
export function eltwiseScalar(alg: EltwiseAlg, x: number, alpha: number, beta: number): number {
  switch (alg) {
    case 'eltwise_relu': return x > 0 ? x : alpha * x;
    case 'eltwise_gelu_erf': return 0.5 * x * (1 + erf(x / Math.SQRT2));
    case 'eltwise_gelu_tanh': return 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case 'eltwise_swish': return x / (1 + Math.exp(-alpha * x));
    case 'eltwise_logistic': return 1 / (1 + Math.exp(-x));
    case 'eltwise_tanh': return Math.tanh(x);
    case 'eltwise_linear': return alpha * x + beta;
    case 'eltwise_clip': return Math.min(beta, Math.max(alpha, x));
    case 'eltwise_abs': return Math.abs(x);
    case 'eltwise_square': return x * x;
    case 'eltwise_exp': return Math.exp(x);
  }
}
