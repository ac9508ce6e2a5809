/**
 * examples/train_step.ts end to end: a teacher-student MoE regression trained through the layer's
 * training forward and backward. Bound: after 300 Adam steps the mean loss of the last 10 steps must
 * be below half of (a) the loss of predicting zero and (b) the mean loss of the first 10 steps. The
 * run is deterministic (fixed seeds, thread-count-independent kernels) and measured at 0.33 of the
 * baseline, so the bound has a 1.5x margin; a wrong sign or scale in any gradient that matters keeps
 * the student near the baseline (measured: a 100x too small step size ends at 1.02 of the baseline).
 */
import { expect, it } from 'vitest';
import { train } from '../examples/train_step.js';

it('a tiny MoE layer learns a teacher layer: the loss falls below half of the zero predictor within 300 steps', async () => {
  const r = await train({ steps: 300, threads: 2 });
  const mean = (a: number[]): number => a.reduce((s, v) => s + v, 0) / a.length;
  const first = mean(r.losses.slice(0, 10)), last = mean(r.losses.slice(-10));
  expect(r.losses.every((v) => Number.isFinite(v))).toBe(true);
  expect(last).toBeLessThan(0.5 * r.baseline);
  expect(last).toBeLessThan(0.5 * first);
}, 60_000);
