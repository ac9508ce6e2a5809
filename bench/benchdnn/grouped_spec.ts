/**
 * benchdnn's `--grouped=DIM_IDX:NUM_GROUPS:SIZES[:HINT]`: DIM_IDX 0 groups M (2D src x 3D [G, K, N]
 * weights; older files give 2D KxN weights and G is inserted), 1 groups K (2D x 2D -> [G, M, N]);
 * DIM_IDX may also be written M / K / N. SIZES is `s0+s1+...` (older files: `s0,s1,...`) or a named profile
 * `balanced[.SEED]`, `hot[.PCT]`, `decode` synthesized from the grouped dimension's total; HINT is
 * oneDNN's max-group-size dispatch hint (parsed and printed back; groupdnn takes no hint, and the
 * hint does not change the result).
 */

export type GroupProfile = 'balanced' | 'hot' | 'decode';

export interface GroupedSpec {
  readonly dimIdx: number;
  readonly groups: number;
  /** Explicit per-group sizes, or undefined when a profile synthesizes them. */
  readonly sizes: readonly number[] | undefined;
  readonly profile: GroupProfile | undefined;
  /** balanced: seed (default 1); hot: percent of the rows in the hot group (default 50). */
  readonly param: number | undefined;
  readonly hint: number | undefined;
  /** The knob value as written (repro lines print it back). */
  readonly text: string;
}

const PROFILES: readonly GroupProfile[] = ['balanced', 'hot', 'decode'];

const nonNegInt = (s: string): number | undefined => (/^\d+$/.test(s) ? Number(s) : undefined);
/** Older benchdnn files name the dimension: M, K, N. */
const DIM_NAMES: Record<string, number> = { M: 0, K: 1, N: 2 };

/**
 * Splits a `--grouped` comma list into specs. Older benchdnn files separate the sizes with commas
 * (`0:4:8,8,8,8`), so a comma starts a new spec only when `DIM_IDX:NUM_GROUPS:` follows it.
 */
export function splitGroupedList(value: string): string[] {
  const out: string[] = [];
  for (const part of value.split(',')) {
    if (out.length && !/^[0-9MKN]+:\d+:/.test(part)) out[out.length - 1] += `,${part}`;
    else out.push(part);
  }
  return out;
}

/** Parses one `--grouped` value; throws an Error whose message names the rule broken. */
export function parseGrouped(text: string): GroupedSpec {
  const parts = text.split(':');
  if (parts.length < 3 || parts.length > 4) throw new Error(`--grouped=${text}: expected DIM_IDX:NUM_GROUPS:SIZES[:HINT]`);
  const dimIdx = DIM_NAMES[parts[0]] ?? nonNegInt(parts[0]);
  const groups = nonNegInt(parts[1]);
  if (dimIdx === undefined) throw new Error(`--grouped=${text}: DIM_IDX '${parts[0]}' must be a non-negative integer (0 = M, 1 = K, 2 = N)`);
  if (groups === undefined || groups < 1) throw new Error(`--grouped=${text}: NUM_GROUPS '${parts[1]}' must be a positive integer`);
  let hint: number | undefined;
  if (parts.length === 4) {
    hint = nonNegInt(parts[3]);
    if (hint === undefined) throw new Error(`--grouped=${text}: HINT '${parts[3]}' must be a non-negative integer`);
  }
  const sizesText = parts[2];
  const [name, paramText, ...extra] = sizesText.split('.');
  if (PROFILES.includes(name as GroupProfile)) {
    if (extra.length) throw new Error(`--grouped=${text}: profile '${sizesText}' takes at most one .PARAM`);
    const param = paramText === undefined ? undefined : nonNegInt(paramText);
    if (paramText !== undefined && param === undefined) throw new Error(`--grouped=${text}: profile parameter '${paramText}' must be a non-negative integer`);
    if (name === 'decode' && param !== undefined) throw new Error(`--grouped=${text}: profile 'decode' takes no parameter`);
    if (name === 'hot' && param !== undefined && param > 100) throw new Error(`--grouped=${text}: hot percentage ${param} exceeds 100`);
    return { dimIdx, groups, sizes: undefined, profile: name as GroupProfile, param, hint, text };
  }
  const sizes = sizesText.split(/[+,]/).map(nonNegInt);
  if (sizes.some((s) => s === undefined)) {
    throw new Error(`--grouped=${text}: SIZES '${sizesText}' must be '+'-separated (older files: ',') non-negative integers or a profile (${PROFILES.join(', ')})`);
  }
  return { dimIdx, groups, sizes: sizes as number[], profile: undefined, param: undefined, hint, text };
}

/** xorshift32: the same sizes on every platform for a given seed. */
function rng(seed: number): () => number {
  let x = (seed >>> 0) || 0x9e3779b9;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

/** Splits `total` evenly over `count` groups, the remainder one each to the first groups. */
function even(total: number, count: number): number[] {
  const base = Math.floor(total / count), rem = total - base * count;
  return Array.from({ length: count }, (_, i) => base + (i < rem ? 1 : 0));
}

/**
 * Per-group sizes of `spec` for a grouped dimension of `total` (explicit sizes are returned as
 * given; the caller checks their count and sum). Profiles (groupdnn's definitions; oneDNN's exact
 * draws are not reproduced, only their shape):
 * - balanced[.SEED]: every row goes to a group drawn uniformly (seed 1 by default): sizes vary a
 *   little around total / G and small totals leave groups empty;
 * - hot[.PCT]: group 0 takes round(total * PCT / 100) rows (PCT 50 by default), the rest are spread
 *   evenly over the other groups, the remainder to the lowest-numbered;
 * - decode: rows spread one per group at an even stride (total <= G: G - total empty groups),
 *   evenly when total > G.
 */
export function resolveSizes(spec: GroupedSpec, total: number): number[] {
  const G = spec.groups;
  if (spec.sizes) return [...spec.sizes];
  if (spec.profile === 'balanced') {
    const r = rng(spec.param ?? 1);
    const sizes = new Array<number>(G).fill(0);
    for (let i = 0; i < total; i++) sizes[Math.min(G - 1, Math.floor(r() * G))]++;
    return sizes;
  }
  if (spec.profile === 'hot') {
    if (G === 1) return [total];
    const hot = Math.round((total * (spec.param ?? 50)) / 100);
    return [hot, ...even(total - hot, G - 1)];
  }
  if (total >= G) return even(total, G);
  const sizes = new Array<number>(G).fill(0);
  for (let i = 0; i < total; i++) sizes[Math.floor((i * G) / total)] = 1;
  return sizes;
}
