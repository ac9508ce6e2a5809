/**
 * Float64 reference of MoE routing (rfcs/0003-moe-routing.md), written from the specification and
 * independent of src/: sort-based selection instead of the library's insertion lists. It also
 * reports each token's decision margin (the smallest relative gap between two quantities whose order
 * decides the output), so that tests can keep near-ties out of data meant to match exactly.
 */

export interface RouteSpec {
  readonly topK: number;
  readonly scoring: 'softmax' | 'sigmoid';
  readonly renormalize: boolean;
  /** Added to the sum before the division of renormalize. */
  readonly eps?: number;
  readonly scale: number;
  readonly groupCount: number;
  readonly kGroup: number;
  readonly mode: 0 | 1;
  readonly bias?: ArrayLike<number>;
}

export interface RouteRef {
  readonly ids: Int32Array;
  readonly weights: Float64Array;
  /** Per token: the smallest relative gap between compared values at a decision (Infinity if none). */
  readonly margin: Float64Array;
}

function relGap(a: number, b: number): number {
  if (a === b) return 0;
  return Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b));
}

/** Indices sorted by value descending, ties by ascending index. */
function rank(values: readonly number[], idx: readonly number[]): number[] {
  return [...idx].sort((x, y) => (values[y] - values[x]) || x - y);
}

/** Smallest gap between neighbours among the first `upto + 1` entries of a ranking (the order inside and the cut). */
function cutMargin(values: readonly number[], order: readonly number[], upto: number): number {
  let m = Infinity;
  for (let i = 0; i + 1 < order.length && i < upto; i++) m = Math.min(m, relGap(values[order[i]], values[order[i + 1]]));
  return m;
}

export function routeF64(logits: ArrayLike<number>, T: number, E: number, s: RouteSpec): RouteRef {
  const k = s.topK;
  const ids = new Int32Array(T * k), weights = new Float64Array(T * k), margin = new Float64Array(T);
  const per = E / s.groupCount;
  for (let t = 0; t < T; t++) {
    const x = Array.from({ length: E }, (_, e) => logits[t * E + e]);
    let score: number[];
    if (s.scoring === 'softmax') {
      const m = Math.max(...x);
      const ex = x.map((v) => Math.exp(v - m));
      const sum = ex.reduce((a, b) => a + b, 0);
      score = ex.map((v) => v / sum);
    } else {
      score = x.map((v) => 1 / (1 + Math.exp(-v)));
    }
    const sel = score.map((v, e) => v + (s.bias ? s.bias[e] : 0));
    const all = [...Array(E).keys()];
    let candidates = all;
    let m = Infinity;
    if (s.groupCount > 1) {
      const gscore = [...Array(s.groupCount).keys()].map((g) => {
        const top = rank(sel, all.slice(g * per, (g + 1) * per));
        return s.mode === 0 ? sel[top[0]] : sel[top[0]] + sel[top[1]];
      });
      const gorder = rank(gscore, [...Array(s.groupCount).keys()]);
      if (s.kGroup < s.groupCount) m = Math.min(m, relGap(gscore[gorder[s.kGroup - 1]], gscore[gorder[s.kGroup]]));
      const kept = new Set(gorder.slice(0, s.kGroup));
      candidates = all.filter((e) => kept.has(Math.floor(e / per)));
    }
    const order = rank(sel, candidates);
    m = Math.min(m, cutMargin(sel, order, k));
    const chosen = order.slice(0, k);
    let w = chosen.map((e) => score[e]);
    if (s.renormalize) {
      const den = w.reduce((a, b) => a + b, 0) + (s.eps ?? 0);
      w = w.map((v) => (den > 0 ? v / den : 0));
    }
    chosen.forEach((e, q) => {
      ids[t * k + q] = e;
      weights[t * k + q] = w[q] * s.scale;
    });
    margin[t] = m;
  }
  return { ids, weights, margin };
}
