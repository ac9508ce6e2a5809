/**
 * MoE routing test data shared by the cpu and gpu engine tests: the case shape, separated (near-tie
 * free) random logits checked against the float64 reference's decision margins, the weight tolerance,
 * and the parameter cases every engine runs.
 */
import { expect } from 'vitest';
import type { DataType } from '../src/index.js';
import type { RoutingOptions } from '../src/primitives/moe/routing/index.js';
import { routeF64, type RouteSpec } from './moe_routing_reference.js';
import { mulberry32, type Rng } from './workloads.js';

export interface Case {
  readonly T: number;
  readonly E: number;
  /** Logical row-major [T, E] values, exactly representable in `dt`. */
  readonly logits: ArrayLike<number>;
  readonly dt?: DataType;
  /** 'ab' (default), 'ba', or explicit strides. */
  readonly layout?: string | number[];
  readonly options: RoutingOptions;
  readonly bias?: ArrayLike<number>;
}

export function specOf(c: Case): RouteSpec {
  const o = c.options;
  return {
    topK: o.topK, scoring: o.scoring ?? 'softmax', renormalize: o.renormalize ?? false, eps: o.renormalizeEps === undefined ? undefined : Math.fround(o.renormalizeEps), scale: o.routedScalingFactor ?? 1,
    groupCount: o.groupCount ?? 1, kGroup: o.kGroup ?? 1, mode: o.groupSelectMode ?? 0, bias: c.bias,
  };
}

/** f32 results vs float64: a few f32 roundings of softmax / sigmoid, the sum and the division. */
export const REL_TOL = 1.5e-6;

export function expectWeightsClose(got: Float32Array, want: ArrayLike<number>, what: string): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < got.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= REL_TOL * Math.abs(want[i]) + 1e-30)) throw new Error(`${what}: weights[${i}] = ${got[i]}, float64 ${want[i]} (rel err ${err / Math.abs(want[i])})`);
  }
}


// ---------------------------------------------------------------------------------------------------
// Data without near-ties: each token's logits are distinct multiples of 1/16 (exact in bf16 / f16 /
// f32; f32 adds a jitter below the spacing), resampled until every decision of the float64
// reference has a relative margin of at least 1e-5 (f32 scores are good to ~1e-6).

function shuffled(rng: Rng, n: number): number[] {
  const a = [...Array(n).keys()];
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

function separatedLogits(rng: Rng, T: number, E: number, spec: RouteSpec, dt: DataType = 'f32'): Float64Array {
  const out = new Float64Array(T * E);
  const pool = Math.max(2 * E, 128);
  for (let t = 0; t < T; t++) {
    for (let attempt = 0; ; attempt++) {
      if (attempt > 1000) throw new Error('separatedLogits: could not avoid near-ties');
      const pick = shuffled(rng, pool).slice(0, E);
      const row = pick.map((k) => (k - pool / 2) / 16 * (pool > 256 ? 256 / pool : 1)).map((v) => (dt === 'f32' ? Math.fround(v + rng() * 0.03) : v));
      if (routeF64(row, 1, E, spec).margin[0] < 1e-5) continue;
      out.set(row, t * E);
      break;
    }
  }
  return out;
}

function randomBias(rng: Rng, E: number, amplitude: number): Float64Array {
  return Float64Array.from({ length: E }, () => Math.fround((rng() * 2 - 1) * amplitude));
}

export function separatedCase(seed: number, T: number, E: number, options: RoutingOptions, extra: { dt?: DataType; layout?: string | number[]; biasAmplitude?: number } = {}): Case {
  const rng = mulberry32(seed);
  const bias = extra.biasAmplitude ? randomBias(rng, E, extra.biasAmplitude) : undefined;
  const partial: Case = { T, E, logits: [], options, bias, dt: extra.dt, layout: extra.layout };
  return { ...partial, logits: separatedLogits(rng, T, E, specOf(partial), extra.dt) };
}


/** Ids exactly and weights within REL_TOL of the float64 reference. */
export function expectMatchesF64(r: { readonly ids: Int32Array; readonly weights: Float32Array }, c: Case, what: string): void {
  const ref = routeF64(c.logits, c.T, c.E, specOf(c));
  expect(Array.from(r.ids), `${what}: ids`).toEqual(Array.from(ref.ids));
  expectWeightsClose(r.weights, ref.weights, what);
}

export const PARAMETER_CASES: ReadonlyArray<readonly [string, () => Case]> = [
  ['softmax top-2, E 8, T 37', () => separatedCase(1, 37, 8, { topK: 2 })],
  ['sigmoid top-2', () => separatedCase(2, 37, 8, { topK: 2, scoring: 'sigmoid' })],
  ['softmax renormalize', () => separatedCase(3, 21, 16, { topK: 4, renormalize: true })],
  ['softmax renormalize, renormalizeEps 0.3', () => separatedCase(31, 21, 16, { topK: 4, renormalize: true, renormalizeEps: 0.3 })],
  ['sigmoid renormalize, renormalizeEps 0.7', () => separatedCase(32, 21, 16, { topK: 3, scoring: 'sigmoid', renormalize: true, renormalizeEps: 0.7 })],
  ['sigmoid renormalize, routedScalingFactor 2.5', () => separatedCase(4, 21, 16, { topK: 4, scoring: 'sigmoid', renormalize: true, routedScalingFactor: 2.5 })],
  ['softmax, routedScalingFactor 0.1 (not exact in f32)', () => separatedCase(5, 17, 16, { topK: 3, routedScalingFactor: 0.1 })],
  ['grouped mode 0: E 16, 4 groups, kGroup 2, k 3', () => separatedCase(6, 33, 16, { topK: 3, groupCount: 4, kGroup: 2 })],
  ['grouped mode 1: E 64, 8 groups, kGroup 3, k 6', () => separatedCase(7, 33, 64, { topK: 6, groupCount: 8, kGroup: 3, groupSelectMode: 1 })],
  ['grouped mode 1, sigmoid', () => separatedCase(8, 20, 32, { topK: 4, scoring: 'sigmoid', groupCount: 4, kGroup: 2, groupSelectMode: 1 })],
  ['correction bias, softmax', () => separatedCase(9, 40, 32, { topK: 4, correctionBias: true }, { biasAmplitude: 0.05 })],
  ['correction bias, grouped mode 0', () => separatedCase(10, 40, 32, { topK: 4, groupCount: 8, kGroup: 2, correctionBias: true, renormalize: true }, { biasAmplitude: 0.05 })],
  ['DeepSeek-V3: E 256, 8 groups, kGroup 4, k 8, sigmoid, bias, renormalize, scale 2.5', () =>
    separatedCase(11, 19, 256, { topK: 8, scoring: 'sigmoid', groupCount: 8, kGroup: 4, groupSelectMode: 1, correctionBias: true, renormalize: true, routedScalingFactor: 2.5 }, { biasAmplitude: 0.1 })],
  ['MoE-B: E 64, k 6, T 256', () => separatedCase(12, 256, 64, { topK: 6 })],
  ['E 256 plain softmax, k 8', () => separatedCase(13, 5, 256, { topK: 8, renormalize: true })],
  ['k = E = 8', () => separatedCase(14, 9, 8, { topK: 8 })],
  ['k = E, grouped mode 1 keeping every group', () => separatedCase(15, 9, 8, { topK: 8, groupCount: 4, kGroup: 4, groupSelectMode: 1, scoring: 'sigmoid' })],
  ['T = 1', () => separatedCase(16, 1, 64, { topK: 6, renormalize: true })],
  ['E = 1, k = 1', () => separatedCase(17, 5, 1, { topK: 1 })],
  ['E = 1, k = 1, sigmoid renormalized', () => separatedCase(18, 5, 1, { topK: 1, scoring: 'sigmoid', renormalize: true })],
  ['bf16 logits', () => separatedCase(19, 23, 64, { topK: 6, renormalize: true }, { dt: 'bf16' })],
  ['f16 logits, sigmoid grouped', () => separatedCase(20, 23, 64, { topK: 6, scoring: 'sigmoid', groupCount: 8, kGroup: 4, groupSelectMode: 1 }, { dt: 'f16' })],
  ['strided rows (row stride E + 3)', () => separatedCase(21, 18, 13, { topK: 3 }, { layout: [16, 1] })],
  ['transposed logits (ba), bf16', () => separatedCase(22, 18, 24, { topK: 5, scoring: 'sigmoid' }, { layout: 'ba', dt: 'bf16' })],
  ['E 6 (not a multiple of 4), k 5', () => separatedCase(23, 17, 6, { topK: 5, renormalize: true })],
];
