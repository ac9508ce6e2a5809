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
  return timingOf(t);
}

/**
 * Times `fn` and a reference `ref` alternately, sample by sample, so both see the same interference
 * from other tenants of a shared machine: their ratio is then meaningful even when each alone is not.
 */
export async function timePaired(fn: () => Promise<void> | void, ref: () => void, opts: { warmup?: number; minRuns?: number; minMs?: number; maxRuns?: number } = {}): Promise<[Timing, Timing]> {
  const { warmup = 2, minRuns = 7, minMs = 1000, maxRuns = 200 } = opts;
  for (let i = 0; i < warmup; i++) {
    await fn();
    ref();
  }
  const a: number[] = [], b: number[] = [];
  const start = performance.now();
  while (a.length < minRuns || (performance.now() - start < minMs && a.length < maxRuns)) {
    let t0 = performance.now();
    await fn();
    a.push(performance.now() - t0);
    t0 = performance.now();
    ref();
    b.push(performance.now() - t0);
  }
  return [timingOf(a), timingOf(b)];
}

/** Median / min / max of samples (ms). */
export function timingOf(t: readonly number[]): Timing {
  const s = [...t].sort((x, y) => x - y);
  return { median: s[s.length >> 1], min: s[0], max: s[s.length - 1], runs: s.length };
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
