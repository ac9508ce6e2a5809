/**
 * Float64 GLU backward for the tests, written independently of src/attr/glu_backward.ts: the
 * derivatives in other algebraic forms (tanh / sech^2, sigma(-x)), erf by Simpson integration
 * (quant_helpers.ts), and a central-finite-difference oracle over the forward `gluExpected`.
 */
import type { GluAlg, GluLayout } from '../src/index.js';
import { erf, gluExpected, type GluSpec } from './quant_helpers.js';

const sig = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));

export interface BwdSpec {
  readonly alg: GluAlg;
  readonly layout: GluLayout;
  readonly alpha?: number;
  readonly limit?: number;
}

/** h13 columns of GLU output column n (h13 has 2N columns). */
export function gateUp(layout: GluLayout, N: number, n: number): [number, number] {
  if (layout === 'halves') return [n, N + n];
  if (layout === 'interleaved') return [2 * n, 2 * n + 1];
  const b = Math.floor(n / 32);
  return [64 * b + (n % 32), 64 * b + 32 + (n % 32)];
}

/** act(g) and act'(g); swiglu_oai's act is on the clamped gate. */
function act(spec: BwdSpec, g: number): [number, number] {
  switch (spec.alg) {
    case 'glu_swiglu':
    case 'glu_swiglu_oai': {
      const a = spec.alpha ?? (spec.alg === 'glu_swiglu' ? 1 : 1.702);
      return [g * sig(a * g), sig(a * g) * (1 + a * g * sig(-a * g))];
    }
    case 'glu_geglu_erf': {
      const Phi = 0.5 * (1 + erf(g / Math.SQRT2));
      return [g * Phi, Phi + (g * Math.exp(-(g * g) / 2)) / Math.sqrt(2 * Math.PI)];
    }
    case 'glu_geglu_tanh': {
      const c = Math.sqrt(2 / Math.PI);
      const y = c * (g + 0.044715 * g ** 3), t = Math.tanh(y);
      return [0.5 * g * (1 + t), 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * c * (1 + 3 * 0.044715 * g * g)];
    }
  }
}

/**
 * One row: h13 (2N values), diff (N), prob (or undefined = 1 and no dprob). Returns d(h13), the dprob
 * increment and the sum of |terms| (for tolerances).
 */
export function gluBackwardRow(spec: BwdSpec, N: number, h: ArrayLike<number>, diff: ArrayLike<number>, prob: number | undefined): { dh: Float64Array; dprob: number; scale: number } {
  const dh = new Float64Array(2 * N);
  let dprob = 0, scale = 0;
  const p = prob ?? 1;
  const L = spec.limit ?? 7;
  for (let n = 0; n < N; n++) {
    const [gc, uc] = gateUp(spec.layout, N, n);
    const g = h[gc], u = h[uc], d = diff[n];
    if (spec.alg === 'glu_swiglu_oai') {
      const [a, da] = act(spec, Math.min(g, L));
      const uu = Math.max(-L, Math.min(L, u)) + 1;
      dh[gc] = g <= L ? d * p * uu * da : 0;
      dh[uc] = Math.abs(u) <= L ? d * p * a : 0;
      dprob += d * a * uu;
      scale += Math.abs(d * a * uu);
    } else {
      const [a, da] = act(spec, g);
      dh[gc] = d * p * u * da;
      dh[uc] = d * p * a;
      dprob += d * a * u;
      scale += Math.abs(d * a * u);
    }
  }
  return { dh, dprob, scale };
}

/** Central finite differences of L = prob * sum_n diff[n] * glu_n(h13) with respect to every h13 column. */
export function finiteDifferenceRow(spec: BwdSpec, N: number, h: ArrayLike<number>, diff: ArrayLike<number>, prob: number, eps = 1e-6): Float64Array {
  const s: GluSpec = spec;
  const x = Float64Array.from(h);
  const loss = (): number => {
    let l = 0;
    for (let n = 0; n < N; n++) l += diff[n] * gluExpected(s, 2 * N, n, (c) => x[c]);
    return prob * l;
  };
  const out = new Float64Array(2 * N);
  for (let c = 0; c < 2 * N; c++) {
    const x0 = x[c];
    x[c] = x0 + eps;
    const lp = loss();
    x[c] = x0 - eps;
    const lm = loss();
    x[c] = x0;
    out[c] = (lp - lm) / (2 * eps);
  }
  return out;
}

/** dL/dprob = sum_n diff[n] * glu_n(h13), from the forward. */
export function forwardDotRow(spec: BwdSpec, N: number, h: ArrayLike<number>, diff: ArrayLike<number>): number {
  let l = 0;
  for (let n = 0; n < N; n++) l += diff[n] * gluExpected(spec, 2 * N, n, (c) => h[c]);
  return l;
}
