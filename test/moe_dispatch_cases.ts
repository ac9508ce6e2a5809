/**
 * moe.dispatch test data shared by the cpu and gpu engine tests: random top-k ids (distinct per token,
 * optionally skewed to one expert) and the placement reference (rows sorted by local expert, then
 * token, then slot; offsets padded to the alignment block).
 */
import type { Rng } from './workloads.js';

export function randomIds(rng: Rng, T: number, E: number, k: number, skewTo?: number): Int32Array {
  const ids = new Int32Array(T * k);
  for (let t = 0; t < T; t++) {
    const used = new Set<number>();
    for (let s = 0; s < k; s++) {
      let e = s === 0 && skewTo !== undefined ? skewTo : Math.floor(rng() * E);
      while (used.has(e)) e = (e + 1) % E;
      used.add(e);
      ids[t * k + s] = e;
    }
  }
  return ids;
}

/** Reference placement: rows sorted by (local expert, token, slot); offsets padded to `block`. */
export function refPlace(ids: Int32Array, T: number, k: number, G: number, map?: Int32Array, block = 1): { rows: [number, number][][]; offs: number[] } {
  const rows: [number, number][][] = Array.from({ length: G }, () => []);
  for (let t = 0; t < T; t++) for (let s = 0; s < k; s++) {
    const l = map ? map[ids[t * k + s]] : ids[t * k + s];
    if (l >= 0) rows[l].push([t, s]);
  }
  const offs = [0];
  rows.forEach((r) => offs.push(offs[offs.length - 1] + Math.ceil(r.length / block) * block));
  return { rows, offs };
}
