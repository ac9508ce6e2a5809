/**
 * The scales tool's workload: MoE activations with outlier channels and varying token magnitudes,
 * Gaussian expert weights, Zipf routing, and the float64 reference product.
 */
import { rng, routeZipf } from '../workloads.js';

export interface WorkloadOptions {
  readonly E: number;
  readonly tokens: number;
  readonly topk: number;
  readonly K: number;
  readonly N: number;
  readonly seed: number;
  /** Zipf exponent of the expert popularity. */
  readonly zipf: number;
  /** Fraction of K channels that are outliers. */
  readonly outlierFrac: number;
  /** Outlier channel gain range [lo, hi]. */
  readonly outlierGain: readonly [number, number];
  /** Standard deviation of log(token magnitude) (lognormal per-token scale; 0 = all rows alike). */
  readonly tokenSigma: number;
}

export interface Workload {
  readonly opts: WorkloadOptions;
  /** Rows per expert. */
  readonly sizes: readonly number[];
  /** Prefix sums of sizes: G+1 entries. */
  readonly offs: Int32Array;
  readonly totalM: number;
  /** Activations [totalM, K] row-major (f32 values). */
  readonly src: Float32Array;
  /** Weights [E, K, N] row-major (f32 values). */
  readonly wei: Float32Array;
  /** Channels scaled as outliers, and their gains. */
  readonly outliers: readonly { k: number; gain: number }[];
  /** Expert of each row. */
  readonly rowExpert: Int32Array;
}

/** Standard normal sample (Box-Muller) from a uniform generator. */
function gaussian(r: () => number): () => number {
  let spare: number | undefined;
  return () => {
    if (spare !== undefined) {
      const s = spare;
      spare = undefined;
      return s;
    }
    let u = 0;
    while (u === 0) u = r();
    const v = r();
    const mag = Math.sqrt(-2 * Math.log(u));
    spare = mag * Math.sin(2 * Math.PI * v);
    return mag * Math.cos(2 * Math.PI * v);
  };
}

export function makeWorkload(o: WorkloadOptions): Workload {
  const { E, tokens, topk, K, N, seed } = o;
  if (topk > E) throw new Error(`--topk ${topk} exceeds --E ${E}`);
  const sizes = routeZipf(tokens, E, topk, o.zipf, seed);
  const offs = new Int32Array(E + 1);
  for (let g = 0; g < E; g++) offs[g + 1] = offs[g] + sizes[g];
  const totalM = offs[E];
  const rowExpert = new Int32Array(totalM);
  for (let g = 0; g < E; g++) rowExpert.fill(g, offs[g], offs[g + 1]);

  const gs = gaussian(rng(seed * 7919 + 1));
  // Outlier channels: a fixed set of K channels (the same for every token, as in LLM activations).
  const nOut = Math.max(1, Math.round(o.outlierFrac * K));
  const pick = rng(seed * 31 + 5);
  const chosen = new Set<number>();
  while (chosen.size < nOut) chosen.add(Math.floor(pick() * K));
  const [glo, ghi] = o.outlierGain;
  const outliers = [...chosen].sort((a, b) => a - b).map((k) => ({ k, gain: glo + (ghi - glo) * pick() }));
  const gain = new Float64Array(K).fill(1);
  for (const { k, gain: gv } of outliers) gain[k] = gv;

  // Rows are stored expert by expert (the grouped layout); each row is a token copy routed there.
  const src = new Float32Array(totalM * K);
  for (let m = 0; m < totalM; m++) {
    const tokenScale = Math.exp(o.tokenSigma * gs());
    for (let k = 0; k < K; k++) src[m * K + k] = gs() * gain[k] * tokenScale;
  }
  const wstd = 1 / Math.sqrt(K);
  const wg = gaussian(rng(seed * 104729 + 3));
  const wei = new Float32Array(E * K * N);
  for (let i = 0; i < wei.length; i++) wei[i] = wg() * wstd;
  return { opts: o, sizes, offs, totalM, src, wei, outliers, rowExpert };
}

/**
 * Float64 product of grouped src [totalM, K] (as f64 or f32 values) and weights [E, K, N]:
 * out[m, n] = sum_k src[m, k] * wei[e(m), k, n], for the listed rows only (all rows by default).
 * Weights are transposed per expert once for a contiguous inner loop.
 */
export class F64Gemm {
  private readonly weiT: Float64Array;
  constructor(
    private readonly w: Workload,
    wei: ArrayLike<number>,
  ) {
    const { E, K, N } = w.opts;
    this.weiT = new Float64Array(E * N * K);
    for (let e = 0; e < E; e++) {
      const base = e * K * N;
      for (let k = 0; k < K; k++) {
        const row = base + k * N;
        for (let n = 0; n < N; n++) this.weiT[base + n * K + k] = wei[row + n];
      }
    }
  }

  /** Rows `rows` of the product, [rows.length, N] row-major. */
  run(src: ArrayLike<number>, rows: ArrayLike<number>): Float64Array {
    const { K, N } = this.w.opts;
    const out = new Float64Array(rows.length * N);
    const a = new Float64Array(K);
    const wt = this.weiT;
    for (let r = 0; r < rows.length; r++) {
      const m = rows[r];
      for (let k = 0; k < K; k++) a[k] = src[m * K + k];
      const eb = this.w.rowExpert[m] * N * K;
      for (let n = 0; n < N; n++) {
        const wb = eb + n * K;
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        let k = 0;
        for (; k + 3 < K; k += 4) {
          s0 += a[k] * wt[wb + k];
          s1 += a[k + 1] * wt[wb + k + 1];
          s2 += a[k + 2] * wt[wb + k + 2];
          s3 += a[k + 3] * wt[wb + k + 3];
        }
        for (; k < K; k++) s0 += a[k] * wt[wb + k];
        out[r * N + n] = s0 + s1 + s2 + s3;
      }
    }
    return out;
  }
}

/** Every row index 0..totalM-1. */
export function allRows(w: Workload): Int32Array {
  return Int32Array.from({ length: w.totalM }, (_, i) => i);
}

/** Up to `perExpert` evenly spaced rows of every non-empty expert (first and last row included). */
export function sampleRows(w: Workload, perExpert: number): Int32Array {
  const rows: number[] = [];
  for (let g = 0; g < w.opts.E; g++) {
    const n = w.sizes[g];
    if (n === 0) continue;
    const take = Math.min(n, perExpert);
    for (let i = 0; i < take; i++) rows.push(w.offs[g] + (take === 1 ? 0 : Math.round((i * (n - 1)) / (take - 1))));
  }
  return Int32Array.from(new Set(rows));
}
