/** Built-in benchmark workloads: MoE shapes with deterministic routing (seeded), and dense 512^3. */

export interface Workload {
  readonly name: string;
  /** Rows per expert (dense: one group of M rows). */
  readonly sizes: readonly number[];
  readonly K: number;
  readonly N: number;
  readonly dense?: boolean;
  readonly description: string;
}

/** mulberry32: small, fast, seedable. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Simulates top-k routing of `tokens` tokens over E experts with Zipf(s) popularity: rows per expert. */
export function routeZipf(tokens: number, E: number, topk: number, s: number, seed: number): number[] {
  const r = rng(seed);
  const w = Array.from({ length: E }, (_, i) => 1 / (i + 1) ** s);
  const sizes = new Array<number>(E).fill(0);
  for (let t = 0; t < tokens; t++) {
    const taken = new Set<number>();
    while (taken.size < topk) {
      let total = 0;
      for (let e = 0; e < E; e++) if (!taken.has(e)) total += w[e];
      let x = r() * total;
      let pick = -1;
      for (let e = 0; e < E && pick < 0; e++) if (!taken.has(e) && (x -= w[e]) <= 0) pick = e;
      taken.add(pick < 0 ? [...Array(E).keys()].find((e) => !taken.has(e))! : pick);
    }
    for (const e of taken) sizes[e]++;
  }
  // Shuffle which expert is popular, so the hot one is not always first.
  for (let i = E - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [sizes[i], sizes[j]] = [sizes[j], sizes[i]];
  }
  return sizes;
}

export const WORKLOADS: Record<string, Workload> = {
  dense512: { name: 'dense512', sizes: [512], K: 512, N: 512, dense: true, description: 'dense 512x512x512' },
  'moe-a': {
    name: 'moe-a',
    // E=8, top-2, 512 tokens -> 1024 rows; skewed, with one empty expert.
    sizes: [312, 221, 160, 118, 93, 71, 49, 0],
    K: 1024,
    N: 2816,
    description: 'E=8 top-2 512 tokens K=1024 N=2816, skewed, one empty expert',
  },
  'moe-b': {
    name: 'moe-b',
    sizes: routeZipf(256, 64, 6, 1.0, 7),
    K: 2048,
    N: 1408,
    description: 'E=64 top-6 256 tokens K=2048 N=1408, Zipf-routed',
  },
  decode: {
    name: 'decode',
    sizes: routeZipf(4, 64, 6, 0.6, 11),
    K: 2048,
    N: 1408,
    description: 'E=64 top-6 4 tokens K=2048 N=1408 (decode)',
  },
};

export function usefulFlops(w: Workload): number {
  return 2 * w.sizes.reduce((a, b) => a + b, 0) * w.K * w.N;
}
