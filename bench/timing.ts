/** Repeated timing with warm-up; medians, never single runs (shared, noisy machines). */
export interface Timing {
  median: number;
  min: number;
  max: number;
  runs: number;
}

export async function timeIt(fn: () => Promise<void> | void, opts: { warmup?: number; minRuns?: number; minMs?: number; maxRuns?: number } = {}): Promise<Timing> {
  const { warmup = 2, minRuns = 7, minMs = 1000, maxRuns = 200 } = opts;
  for (let i = 0; i < warmup; i++) await fn();
  const t: number[] = [];
  const start = performance.now();
  while (t.length < minRuns || (performance.now() - start < minMs && t.length < maxRuns)) {
    const t0 = performance.now();
    await fn();
    t.push(performance.now() - t0);
  }
  t.sort((a, b) => a - b);
  return { median: t[Math.floor(t.length / 2)], min: t[0], max: t[t.length - 1], runs: t.length };
}

export function fillRandom(a: Float32Array, seed: number, scale = 1): void {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < a.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    a[i] = ((x >>> 0) / 4294967296 - 0.5) * scale;
  }
}
