import type { Engine } from '../../../runtime/engine.js';
import type { RoutingArgs, RoutingImpl } from './impl.js';
import type { RoutingProblem } from './problem.js';
import { checkRoutingData, logitReader } from './runtime_data.js';
import { selectExperts } from './select.js';

/**
 * Reference routing: scores in float64 rounded once to f32 (the precision the contract states),
 * selection on those f32 values with the kernel's rules, weights renormalized and scaled in float64
 * from the f32 scores and rounded once. Runs on the calling thread.
 */
export const refRouting: RoutingImpl = {
  name: 'ref:any',
  reject(p) {
    if (p.custom) return 'a custom routing function has its own implementation';
    return undefined;
  },
  createExecutor(p: RoutingProblem, _engine: Engine) {
    return { task: (a: RoutingArgs) => () => runReference(p, a) };
  },
};

function runReference(p: RoutingProblem, a: RoutingArgs): void {
  const { T, E, topK: k } = p;
  const logit = logitReader(a.src);
  const bias = a.correctionBias ? (a.correctionBias.values as Float32Array) : undefined;
  checkRoutingData(p, logit, bias);
  const ids = new Int32Array(T * k), weights = new Float32Array(T * k);
  const x = new Float64Array(E), score = new Float32Array(E), sel = new Float32Array(E);
  const scale = Math.fround(p.routedScalingFactor);
  for (let t = 0; t < T; t++) {
    for (let e = 0; e < E; e++) x[e] = logit(t, e);
    scoresF64(p, x, score);
    for (let e = 0; e < E; e++) sel[e] = bias ? Math.fround(score[e] + bias[e]) : score[e];
    const chosen = selectExperts(p, sel);
    let sum = 0;
    for (const e of chosen) sum += score[e];
    const den = sum + Math.fround(p.renormalizeEps);
    chosen.forEach((e, q) => {
      const w = p.renormalize ? (den > 0 ? score[e] / den : 0) : score[e];
      ids[t * k + q] = e;
      weights[t * k + q] = w * scale;
    });
  }
  (a.topkIds.values as Int32Array).set(ids);
  (a.topkWeights.values as Float32Array).set(weights);
}

/** Softmax (max-shifted) or sigmoid of one token's logits in float64, stored rounded to f32. */
export function scoresF64(p: RoutingProblem, x: Float64Array, out: Float32Array): void {
  if (p.scoring === 'sigmoid') {
    for (let e = 0; e < x.length; e++) out[e] = 1 / (1 + Math.exp(-x[e]));
    return;
  }
  let m = -Infinity;
  for (const v of x) m = Math.max(m, v);
  let s = 0;
  for (const v of x) s += Math.exp(v - m);
  for (let e = 0; e < x.length; e++) out[e] = Math.exp(x[e] - m) / s;
}
