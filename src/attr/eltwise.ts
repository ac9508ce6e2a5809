/** Element-wise algorithms (oneDNN `algorithm::eltwise_*`), shared by post-ops and the reference. */
export const eltwiseAlgorithm = {
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
  eltwise_elu: 'eltwise_elu',
  eltwise_sqrt: 'eltwise_sqrt',
  eltwise_soft_relu: 'eltwise_soft_relu',
  eltwise_log: 'eltwise_log',
  eltwise_clip_v2: 'eltwise_clip_v2',
  eltwise_pow: 'eltwise_pow',
  eltwise_round: 'eltwise_round',
  eltwise_mish: 'eltwise_mish',
  eltwise_hardswish: 'eltwise_hardswish',
  eltwise_hardsigmoid: 'eltwise_hardsigmoid',
} as const;
export type EltwiseAlg = (typeof eltwiseAlgorithm)[keyof typeof eltwiseAlgorithm];

/** Binary post-op algorithms (oneDNN `algorithm::binary_*`): `x = x (op) src1`. */
export const binaryAlgorithm = {
  binary_mul: 'binary_mul',
  binary_add: 'binary_add',
} as const;
export type BinaryAlg = (typeof binaryAlgorithm)[keyof typeof binaryAlgorithm];

/**
 * Fused gated-linear-unit post-ops (not in oneDNN; rfcs/0002 section 4): the GEMM's N columns hold
 * gate and up, the destination N/2 columns `act(gate) * up`.
 */
export const gluAlgorithm = {
  glu_swiglu: 'glu_swiglu',
  glu_geglu_erf: 'glu_geglu_erf',
  glu_geglu_tanh: 'glu_geglu_tanh',
  glu_swiglu_oai: 'glu_swiglu_oai',
} as const;
export type GluAlg = (typeof gluAlgorithm)[keyof typeof gluAlgorithm];

/** Every algorithm name: `algorithm.eltwise_relu`, `algorithm.binary_mul`, `algorithm.glu_swiglu`, ... */
export const algorithm = { ...eltwiseAlgorithm, ...binaryAlgorithm, ...gluAlgorithm } as const;
export type Algorithm = EltwiseAlg | BinaryAlg | GluAlg;

export function isEltwiseAlg(x: unknown): x is EltwiseAlg {
  return typeof x === 'string' && Object.values(eltwiseAlgorithm).includes(x as EltwiseAlg);
}

export function isBinaryAlg(x: unknown): x is BinaryAlg {
  return typeof x === 'string' && Object.values(binaryAlgorithm).includes(x as BinaryAlg);
}

export function isGluAlg(x: unknown): x is GluAlg {
  return typeof x === 'string' && Object.values(gluAlgorithm).includes(x as GluAlg);
}

/**
 * erf to about 1e-15 relative: the Maclaurin series for |x| < 3, the erfc continued fraction
 * (Laplace) beyond, ±1 past 6. The reference is the oracle the kernels' approximations are measured
 * against, so it is accurate rather than fast.
 */
export function erf(x: number): number {
  const a = Math.abs(x);
  if (a >= 6) return x < 0 ? -1 : 1;
  if (a < 3) {
    // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
    let term = x, sum = x;
    for (let n = 1; n < 100; n++) {
      term *= (-x * x) / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + 2 / ...))))
  let f = a;
  for (let n = 80; n >= 1; n--) f = a + n / 2 / f;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return x < 0 ? erfc - 1 : 1 - erfc;
}

/** Round half to even (oneDNN's eltwise_round: nearbyint in the default rounding mode). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** ln(1 + e^z) without overflow: max(z, 0) + log1p(e^-|z|). */
const softplus = (z: number): number => Math.max(z, 0) + Math.log1p(Math.exp(-Math.abs(z)));

/**
 * Scalar semantics of each algorithm, with oneDNN's alpha/beta meanings (dev_guide_eltwise): elu
 * `x > 0 ? x : alpha (e^x - 1)`; soft_relu `ln(1 + e^(alpha x)) / alpha`; clip_v2 `min(beta, max(alpha, x))`
 * (clip's forward; they differ only in the backward at x = beta); pow `alpha x^beta`; round half to even;
 * mish `x tanh(ln(1 + e^x))`; hardswish `x max(0, min(1, alpha x + beta))`; hardsigmoid
 * `max(0, min(1, alpha x + beta))`.
 */
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
    case 'eltwise_elu': return x > 0 ? x : alpha * Math.expm1(x);
    case 'eltwise_sqrt': return Math.sqrt(x);
    case 'eltwise_soft_relu': return softplus(alpha * x) / alpha;
    case 'eltwise_log': return Math.log(x);
    case 'eltwise_clip_v2': return Math.min(beta, Math.max(alpha, x));
    case 'eltwise_pow': return alpha * Math.pow(x, beta);
    case 'eltwise_round': return roundHalfEven(x);
    case 'eltwise_mish': return x * Math.tanh(softplus(x));
    case 'eltwise_hardswish': return x * Math.max(0, Math.min(1, alpha * x + beta));
    case 'eltwise_hardsigmoid': return Math.max(0, Math.min(1, alpha * x + beta));
  }
}

/** Default alpha of each GLU (the sigmoid's slope): 1 for swiglu (SiLU), 1.702 for GPT-OSS's swiglu_oai. */
export const GLU_DEFAULT_ALPHA: Readonly<Record<GluAlg, number>> = { glu_swiglu: 1, glu_geglu_erf: 0, glu_geglu_tanh: 0, glu_swiglu_oai: 1.702 };
/** Default clamp of swiglu_oai (GPT-OSS). */
export const GLU_DEFAULT_LIMIT = 7;

/** How a GLU's gate and up columns are laid out in the GEMM's N columns (rfcs/0002 section 4). */
export type GluLayout = 'halves' | 'interleaved' | 'blocks32';
export const GLU_LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];

/**
 * GEMM columns of destination column `j` of a GLU over `N` GEMM columns (dst has N/2):
 * `halves`: gate j, up N/2 + j; `interleaved`: gate 2j, up 2j + 1; `blocks32`: alternating 32-column
 * blocks, gate first: gate 64*floor(j/32) + j%32, up that + 32.
 */
export function gluColumns(layout: GluLayout, N: number, j: number): [gate: number, up: number] {
  if (layout === 'halves') return [j, N / 2 + j];
  if (layout === 'interleaved') return [2 * j, 2 * j + 1];
  const g = 64 * Math.floor(j / 32) + (j % 32);
  return [g, g + 32];
}

const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));

/**
 * `act(gate) * up` of each GLU: swiglu `gate * sigmoid(alpha * gate) * up` (alpha 1 = SiLU),
 * geglu_erf / geglu_tanh `gelu(gate) * up`, swiglu_oai (GPT-OSS) `g * sigmoid(alpha * g) * (u + 1)`
 * with `g = min(gate, limit)`, `u = clamp(up, -limit, limit)`.
 */
export function gluScalar(alg: GluAlg, gate: number, up: number, alpha: number, limit: number): number {
  switch (alg) {
    case 'glu_swiglu': return gate * sigmoid(alpha * gate) * up;
    case 'glu_geglu_erf': return eltwiseScalar('eltwise_gelu_erf', gate, 0, 0) * up;
    case 'glu_geglu_tanh': return eltwiseScalar('eltwise_gelu_tanh', gate, 0, 0) * up;
    case 'glu_swiglu_oai': {
      const g = Math.min(gate, limit);
      const u = Math.min(limit, Math.max(-limit, up));
      return g * sigmoid(alpha * g) * (u + 1);
    }
  }
}
