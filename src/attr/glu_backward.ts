/**
 * GLU backward, scalar float64 semantics (rfcs/0002 section 10), shared by the reference
 * implementations of the standalone `glu_backward` primitive and of the matmul `glu_backward`
 * post-op. The kernels (wasm/src/dglu.h) compute the same formulas in f32.
 */
import { erf, gluColumns, type GluAlg, type GluLayout } from './eltwise.js';

const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));
const INV_SQRT_2PI = 0.3989422804014327;
const GELU_C = 0.7978845608028654;

/** Result of one element: the gradients of gate and up and the element's dprob term. */
export interface GluGrad {
  dGate: number;
  dUp: number;
  /** `act(gate) * up' * diff` (up' = clamp(up) + 1 for swiglu_oai): summed per row into dprob. */
  term: number;
}

/**
 * Gradients of `prob * act(gate) * up` (swiglu_oai: `prob * act(min(gate, limit)) * (clamp(up) + 1)`)
 * for one element given the diff of the output. No gradient flows through an active clamp
 * (`gate > limit`, `|up| > limit`); at the boundary it does (PyTorch's clamp convention).
 */
export function gluBackwardScalar(alg: GluAlg, gate: number, up: number, diff: number, prob: number, alpha: number, limit: number, out: GluGrad): GluGrad {
  const dp = diff * prob;
  let a: number, da: number, u = up, gPass = true, uPass = true;
  switch (alg) {
    case 'glu_swiglu': {
      const s = sigmoid(alpha * gate);
      a = gate * s;
      da = s * (1 + alpha * gate * (1 - s));
      break;
    }
    case 'glu_geglu_erf': {
      const Phi = 0.5 * (1 + erf(gate / Math.SQRT2));
      a = gate * Phi;
      da = Phi + gate * INV_SQRT_2PI * Math.exp(-0.5 * gate * gate);
      break;
    }
    case 'glu_geglu_tanh': {
      const y = GELU_C * (gate + 0.044715 * gate * gate * gate);
      const s = sigmoid(2 * y);
      a = gate * s;
      da = s + gate * 2 * s * (1 - s) * GELU_C * (1 + 3 * 0.044715 * gate * gate);
      break;
    }
    case 'glu_swiglu_oai': {
      const g = Math.min(gate, limit);
      const s = sigmoid(alpha * g);
      a = g * s;
      da = s * (1 + alpha * g * (1 - s));
      u = Math.min(limit, Math.max(-limit, up)) + 1;
      gPass = gate <= limit;
      uPass = up >= -limit && up <= limit;
      break;
    }
  }
  out.dGate = gPass ? dp * u * da : 0;
  out.dUp = uPass ? dp * a : 0;
  out.term = a * u * diff;
  return out;
}

/** h13 columns (gate, up) of GLU output column n: the forward's layouts over 2N columns. */
export function gluBackwardColumns(layout: GluLayout, N: number, n: number): [gate: number, up: number] {
  return gluColumns(layout, 2 * N, n);
}
