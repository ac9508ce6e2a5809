import type { RoutingProblem } from './problem.js';

/**
 * Indices of the `cap` largest values pushed in ascending index order, in descending value with ties
 * to the lower index (wasm/src/moe-route.c's topn_push).
 */
class TopN {
  readonly v: number[] = [];
  readonly i: number[] = [];
  constructor(private readonly cap: number) {}

  push(x: number, idx: number): void {
    const { v, i, cap } = this;
    let p: number;
    if (v.length === cap) {
      if (!(x > v[cap - 1])) return;
      p = cap - 1;
    } else {
      p = v.length;
      v.push(x);
      i.push(idx);
    }
    while (p > 0 && v[p - 1] < x) {
      v[p] = v[p - 1];
      i[p] = i[p - 1];
      p--;
    }
    v[p] = x;
    i[p] = idx;
  }
}

/** Group score from its experts' selection scores: the max (mode 0) or the f32 sum of the top two (mode 1). */
function groupScore(sel: Float32Array, from: number, n: number, mode: number): number {
  let a = -Infinity, b = -Infinity;
  for (let e = from; e < from + n; e++) {
    const v = sel[e];
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) b = v;
  }
  return mode === 0 ? a : Math.fround(a + b);
}

/** The experts a token chooses from its f32 selection scores, best first (plain or grouped top-k). */
export function selectExperts(p: RoutingProblem, sel: Float32Array): number[] {
  const top = new TopN(p.topK);
  if (p.groupCount === 1) {
    for (let e = 0; e < p.E; e++) top.push(sel[e], e);
    return top.i;
  }
  const per = p.E / p.groupCount;
  const groups = new TopN(p.kGroup);
  for (let g = 0; g < p.groupCount; g++) groups.push(groupScore(sel, g * per, per, p.groupSelectMode), g);
  const keep = new Set(groups.i);
  for (let g = 0; g < p.groupCount; g++) {
    if (!keep.has(g)) continue;
    for (let e = g * per; e < (g + 1) * per; e++) top.push(sel[e], e);
  }
  return top.i;
}
