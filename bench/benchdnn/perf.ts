/**
 * Performance mode: `bench/timing.ts`'s method (warm-up runs, then repeated runs until both a count
 * and a time budget are met), driven by benchdnn's `--max-ms-per-prb` / `--fix-times-per-prb`.
 * benchdnn's default template reports the minimum and the average time.
 */
import { timeIt } from '../timing.js';
import type { GlobalSettings } from './settings.js';

export interface PerfResult {
  readonly minMs: number;
  readonly avgMs: number;
  readonly medianMs: number;
  readonly runs: number;
}

export async function measure(run: () => Promise<void>, g: Pick<GlobalSettings, 'maxMsPerPrb' | 'fixTimesPerPrb'>): Promise<PerfResult> {
  const warmup = 2;
  const samples: number[] = [];
  const fixed = g.fixTimesPerPrb > 0;
  const t = await timeIt(async () => {
    const t0 = performance.now();
    await run();
    samples.push(performance.now() - t0);
  }, fixed ? { warmup, minRuns: g.fixTimesPerPrb, maxRuns: g.fixTimesPerPrb, minMs: 0 } : { warmup, minMs: g.maxMsPerPrb });
  const timed = samples.slice(warmup);
  return { minMs: t.min, avgMs: timed.reduce((a, b) => a + b, 0) / timed.length, medianMs: t.median, runs: t.runs };
}

/**
 * benchdnn's default perf template `perf,%engine%,%impl%,%name%,%prb%,%Gops%,%-time%,%-Gflops%,%0time%,%0Gflops%`
 * (`-` = minimum, `0` = average; times in ms).
 */
export function perfLine(engine: string, impl: string, name: string, prb: string, flops: number, r: PerfResult): string {
  const gops = flops / 1e9;
  const gf = (ms: number): string => (ms > 0 ? (gops / (ms / 1e3)).toPrecision(6) : 'inf');
  return `perf,${engine},${impl},${name},${prb},${gops.toPrecision(6)},${r.minMs.toPrecision(6)},${gf(r.minMs)},${r.avgMs.toPrecision(6)},${gf(r.avgMs)}`;
}
