/**
 * Float64 reference of an MoE layer given its routing (ids and weights per token slot): for every
 * token, sum over slots of weight * (glu(x . w13[e] + b13[e]) . w2[e] + b2[e]), plus the shared
 * expert. Also the magnitude (sum of |terms|) for relative tolerances. Independent of src/.
 */
import type { GluAlg, GluLayout } from '../src/index.js';
import { mulberry32, randomF32 } from './workloads.js';

function gluColumns(layout: GluLayout, N: number, j: number): [number, number] {
  if (layout === 'halves') return [j, N / 2 + j];
  if (layout === 'interleaved') return [2 * j, 2 * j + 1];
  const g = 64 * Math.floor(j / 32) + (j % 32);
  return [g, g + 32];
}

const sig = (x: number): number => 1 / (1 + Math.exp(-x));

/** swiglu: g sigmoid(a g) u; geglu_tanh: gelu_tanh(g) u; swiglu_oai: clamped (GPT-OSS). */
function gluScalar(alg: GluAlg, g: number, u: number, a: number, limit: number): number {
  if (alg === 'glu_swiglu') return g * sig(a * g) * u;
  if (alg === 'glu_geglu_tanh') return 0.5 * g * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (g + 0.044715 * g ** 3))) * u;
  if (alg === 'glu_swiglu_oai') {
    const gc = Math.min(g, limit), uc = Math.min(limit, Math.max(-limit, u));
    return gc * sig(a * gc) * (uc + 1);
  }
  throw new Error(`reference: ${alg} not modelled`);
}

export interface RefLayerInput {
  readonly T: number;
  readonly K: number;
  readonly I: number;
  readonly k: number;
  readonly hidden: ArrayLike<number>; // [T, K]
  readonly ids: ArrayLike<number>; // [T, k] local expert ids, -1 = not on this rank
  readonly weights: ArrayLike<number>; // [T, k]
  readonly w13: ArrayLike<number>; // [G, K, 2I]
  readonly w2: ArrayLike<number>; // [G, I, K]
  readonly b13?: ArrayLike<number>; // [G, 2I]
  readonly b2?: ArrayLike<number>; // [G, K]
  readonly glu: { alg: GluAlg; layout: GluLayout; alpha?: number; limit?: number };
  /**
   * The shared expert: w13 `[K, 2Is]` in its GLU's layout (default the routed GLU), w2 `[Is, K]`; with
   * `gate` (`[K]`, Qwen2-MoE) its output is scaled by sigmoid(x . gate).
   */
  readonly shared?: { readonly Is: number; readonly w13: ArrayLike<number>; readonly w2: ArrayLike<number>; readonly gate?: ArrayLike<number>; readonly glu?: RefLayerInput['glu'] };
  /** 'input' (Llama-4): the expert runs on weight * x and its output is not weighted. Default 'output'. */
  readonly routingWeight?: 'output' | 'input';
}

const GLU_ALPHA: Record<GluAlg, number> = { glu_swiglu: 1, glu_geglu_erf: 0, glu_geglu_tanh: 0, glu_swiglu_oai: 1.702 };

function expert(x: ArrayLike<number>, x0: number, K: number, I: number, w13: ArrayLike<number>, o13: number,
  b13: ArrayLike<number> | undefined, ob13: number, glu: RefLayerInput['glu']): { act: Float64Array; actMag: Float64Array } {
  const h = new Float64Array(2 * I), hm = new Float64Array(2 * I);
  for (let c = 0; c < 2 * I; c++) {
    let s = b13 ? b13[ob13 + c] : 0, m = Math.abs(s);
    for (let q = 0; q < K; q++) {
      const p = x[x0 + q] * w13[o13 + q * 2 * I + c];
      s += p;
      m += Math.abs(p);
    }
    h[c] = s;
    hm[c] = m;
  }
  const act = new Float64Array(I), actMag = new Float64Array(I);
  for (let j = 0; j < I; j++) {
    const [g, u] = gluColumns(glu.layout, 2 * I, j);
    act[j] = gluScalar(glu.alg, h[g], h[u], glu.alpha ?? GLU_ALPHA[glu.alg], glu.limit ?? 7);
    // |d act| <= ~|gate|*|up| scale: bound the magnitude by the inputs' magnitudes (for tolerance only).
    actMag[j] = Math.abs(act[j]) + (hm[g] + Math.abs(h[g])) * (hm[u] + 1) * 1.2;
  }
  return { act, actMag };
}

export function refMoeLayer(r: RefLayerInput): { value: Float64Array; mag: Float64Array } {
  const { T, K, I, k } = r;
  const value = new Float64Array(T * K), mag = new Float64Array(T * K);
  for (let t = 0; t < T; t++) {
    for (let s = 0; s < k; s++) {
      const e = r.ids[t * k + s];
      if (e < 0) continue;
      const input = r.routingWeight === 'input';
      const wgt = input ? 1 : r.weights[t * k + s];
      const x = input ? Float64Array.from({ length: K }, (_, q) => r.hidden[t * K + q] * r.weights[t * k + s]) : r.hidden;
      const { act, actMag } = expert(x, input ? 0 : t * K, K, I, r.w13, e * K * 2 * I, r.b13, e * 2 * I, r.glu);
      for (let n = 0; n < K; n++) {
        let y = r.b2 ? r.b2[e * K + n] : 0, m = Math.abs(y);
        for (let j = 0; j < I; j++) {
          y += act[j] * r.w2[e * I * K + j * K + n];
          m += actMag[j] * Math.abs(r.w2[e * I * K + j * K + n]);
        }
        value[t * K + n] += wgt * y;
        mag[t * K + n] += Math.abs(wgt) * m;
      }
    }
    if (r.shared) {
      const Is = r.shared.Is;
      const { act, actMag } = expert(r.hidden, t * K, K, Is, r.shared.w13, 0, undefined, 0, r.shared.glu ?? r.glu);
      let gs = 1;
      if (r.shared.gate) {
        let z = 0;
        for (let q = 0; q < K; q++) z += r.hidden[t * K + q] * r.shared.gate[q];
        gs = sig(z);
      }
      for (let n = 0; n < K; n++) {
        let y = 0, m = 0;
        for (let j = 0; j < Is; j++) {
          y += act[j] * r.shared.w2[j * K + n];
          m += actMag[j] * Math.abs(r.shared.w2[j * K + n]);
        }
        value[t * K + n] += gs * y;
        mag[t * K + n] += m;
      }
    }
  }
  return { value, mag };
}

/** A layer's shape and its deterministic inputs (shared by the cpu and gpu layer tests). */
export interface Shape { T: number; E: number; k: number; K: number; I: number }
export interface Data { hidden: Float64Array; logits: Float64Array; w13: Float64Array; w2: Float64Array; b13: Float64Array; b2: Float64Array }

export function data(s: Shape, seed: number, skew = false): Data {
  const rng = mulberry32(seed);
  const logits = randomF32(rng, s.T * s.E).map((v) => v * 4);
  if (skew) for (let t = 0; t < s.T; t++) logits[t * s.E] += 50; // every token's first choice: expert 0
  return {
    hidden: randomF32(rng, s.T * s.K), logits,
    w13: randomF32(rng, s.E * s.K * 2 * s.I).map((v) => v * 0.2), w2: randomF32(rng, s.E * s.I * s.K).map((v) => v * 0.2),
    b13: randomF32(rng, s.E * 2 * s.I).map((v) => v * 0.1), b2: randomF32(rng, s.E * s.K).map((v) => v * 0.1),
  };
}
