/**
 * Float64 reference of the grouped matmul backward, independent of src/: for the forward
 * dst[r] = x[r] W[g(r)] (+ b[g(r)]) with rows r of group g in [offs[g], offs[g+1]):
 *   dx[r, k] = sum_n dy[r, n] W[g, k, n],  dW[g, k, n] = sum_{r in g} x[r, k] dy[r, n],  db[g, n] = sum_{r in g} dy[r, n].
 * `mag` is the same sum of absolute terms: the tolerance scale of a float result.
 */
import type { RefOut } from './reference.js';

export interface BwdRefOut {
  readonly dx: RefOut;
  readonly dw: RefOut;
  readonly db: RefOut;
}

export function refBackward(x: Float64Array, w: Float64Array, dy: Float64Array, sizes: readonly number[], K: number, N: number): BwdRefOut {
  const G = sizes.length, M = sizes.reduce((a, b) => a + b, 0);
  const dx = { value: new Float64Array(M * K), mag: new Float64Array(M * K) };
  const dw = { value: new Float64Array(G * K * N), mag: new Float64Array(G * K * N) };
  const db = { value: new Float64Array(G * N), mag: new Float64Array(G * N) };
  let r0 = 0;
  for (let g = 0; g < G; g++) {
    for (let r = r0; r < r0 + sizes[g]; r++) {
      for (let k = 0; k < K; k++) {
        let s = 0, m = 0;
        for (let n = 0; n < N; n++) {
          const t = dy[r * N + n] * w[(g * K + k) * N + n];
          s += t;
          m += Math.abs(t);
        }
        dx.value[r * K + k] = s;
        dx.mag[r * K + k] = m;
        for (let n = 0; n < N; n++) {
          const t = x[r * K + k] * dy[r * N + n];
          dw.value[(g * K + k) * N + n] += t;
          dw.mag[(g * K + k) * N + n] += Math.abs(t);
        }
      }
      for (let n = 0; n < N; n++) {
        db.value[g * N + n] += dy[r * N + n];
        db.mag[g * N + n] += Math.abs(dy[r * N + n]);
      }
    }
    r0 += sizes[g];
  }
  return { dx, dw, db };
}
