/**
 * Deterministic workloads for the tests: a seeded PRNG and MoE-like group-size distributions.
 * Nothing here imports the library.
 */

/** mulberry32: a tiny, fast, seeded 32-bit PRNG. Returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Rng = () => number;

/** Random integer in [lo, hi] (inclusive). */
export function randInt(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** `n` f32-exact values uniform in [-1, 1). */
export function randomF32(rng: Rng, n: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.fround(rng() * 2 - 1);
  return out;
}

/**
 * `n` values of the form k/16 with |k| <= 32: exactly representable in bf16, f16 and f32, and every
 * product and short sum of them is exact in f32, so low-precision inputs carry no rounding.
 */
export function randomLowPrecisionExact(rng: Rng, n: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = randInt(rng, -32, 32) / 16;
  return out;
}

/** Splits `total` into integer parts proportional to `weights` (largest remainder; sums exactly). */
export function apportion(total: number, weights: readonly number[]): number[] {
  const wsum = weights.reduce((a, b) => a + b, 0);
  if (wsum === 0) throw new Error('apportion: all weights are zero');
  const exact = weights.map((w) => (w / wsum) * total);
  const parts = exact.map(Math.floor);
  let rest = total - parts.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (let j = 0; rest > 0; j = (j + 1) % order.length, rest--) parts[order[j][1]] += 1;
  return parts;
}

/** As equal as possible: the first `total % G` groups get one extra row. */
export function balanced(G: number, total: number): number[] {
  return Array.from({ length: G }, (_, i) => Math.floor(total / G) + (i < total % G ? 1 : 0));
}

/** Linear skew: group i gets a share proportional to i + 1 (last expert busiest). */
export function linearSkew(G: number, total: number): number[] {
  return apportion(total, Array.from({ length: G }, (_, i) => i + 1));
}

/** Geometric skew: group i gets a share proportional to ratio^i (first expert busiest). */
export function geometricSkew(G: number, total: number, ratio = 0.5): number[] {
  return apportion(total, Array.from({ length: G }, (_, i) => ratio ** i));
}

/** Balanced over the experts not listed in `empty`, which get zero rows. */
export function withEmpty(G: number, total: number, empty: readonly number[]): number[] {
  const weights = Array.from({ length: G }, (_, i) => (empty.includes(i) ? 0 : 1));
  return apportion(total, weights);
}

export const emptyFirst = (G: number, total: number): number[] => withEmpty(G, total, [0]);
export const emptyLast = (G: number, total: number): number[] => withEmpty(G, total, [G - 1]);
export const emptyMiddle = (G: number, total: number): number[] => withEmpty(G, total, [Math.floor(G / 2)]);

/** Every token routed to the first expert. */
export function allFirst(G: number, total: number): number[] {
  const s = new Array<number>(G).fill(0);
  s[0] = total;
  return s;
}

/** Every token routed to the last expert. */
export function allLast(G: number, total: number): number[] {
  const s = new Array<number>(G).fill(0);
  s[G - 1] = total;
  return s;
}

/** Random routing: each of `total` tokens goes to a uniformly random expert. */
export function randomRouting(rng: Rng, G: number, total: number): number[] {
  const s = new Array<number>(G).fill(0);
  for (let t = 0; t < total; t++) s[Math.floor(rng() * G)] += 1;
  return s;
}

/** Canonical G+1 offsets from sizes, computed independently of the library's converters. */
export function cumulative(sizes: readonly number[]): number[] {
  const out = [0];
  for (const s of sizes) out.push(out[out.length - 1] + s);
  return out;
}

export type SizeGenerator = (G: number, total: number) => number[];

/** Named distributions for table-driven tests. */
export const DISTRIBUTIONS: ReadonlyArray<readonly [string, SizeGenerator]> = [
  ['balanced', balanced],
  ['linear skew', linearSkew],
  ['geometric skew', (G, t) => geometricSkew(G, t)],
  ['empty first expert', emptyFirst],
  ['empty last expert', emptyLast],
  ['empty middle expert', emptyMiddle],
  ['all tokens in the first expert', allFirst],
  ['all tokens in the last expert', allLast],
];
