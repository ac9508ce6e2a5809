import type { MemoryDesc } from '../../memory/desc.js';

/**
 * The grouped matmul backward problems, for the variable-M forward `dst[g] = src[g] x W[g]` (src
 * grouped `[total_M, K]`, W `[G, K, N]`, dst grouped `[total_M, N]`):
 *  - backward data:    diff_src[g] = diff_dst[g] x W[g]^T   (variable M, the weights read transposed)
 *  - backward weights: diff_weights[g] = src[g]^T x diff_dst[g]   (variable K: the contraction runs
 *                      over group g's rows; an empty group writes zeros), diff_bias[g] = sum of the
 *                      rows of diff_dst[g].
 * `offsetsFrom` is where the groups are defined: grouped descriptors (RFC Proposal #1) or the
 * grouped-offsets attribute, passed at execution as `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC` (Proposal #2:
 * the forward's attribute, reused as is).
 */
export interface BwdDataProblem {
  readonly G: number;
  /** Rows (total_M, an upper bound: rows past the last offset are not written). */
  readonly M: number;
  readonly K: number;
  readonly N: number;
  readonly diffSrc: MemoryDesc;
  /** `[G, K, N]`: plain (any strides) or packed `f32:p8t` (tag.any). */
  readonly weights: MemoryDesc;
  readonly diffDst: MemoryDesc;
  readonly offsetsFrom: 'desc' | 'attr';
}

export interface BwdWeightsProblem {
  readonly G: number;
  readonly M: number;
  readonly K: number;
  readonly N: number;
  readonly src: MemoryDesc;
  /** `[G, K, N]`, plain. */
  readonly diffWeights: MemoryDesc;
  /** `[G, N]` (or `[G, 1, N]`), plain; undefined when no bias gradient is wanted. */
  readonly diffBias: MemoryDesc | undefined;
  readonly diffDst: MemoryDesc;
  readonly offsetsFrom: 'desc' | 'attr';
}

/** "g8:m1536:k2048:n1408" for verbose lines and messages. */
export function bwdProblemString(p: { G: number; M: number; K: number; N: number }): string {
  return `g${p.G}:m${p.M}:k${p.K}:n${p.N}`;
}
