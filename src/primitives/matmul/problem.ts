import type { MemoryDesc } from '../../memory/desc.js';
import type { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Fusion, QuantArg } from '../../attr/fusion.js';
import { ARG } from '../args.js';

/** The argument id of each quantized argument, as in ARG.ATTR_SCALES | ARG.SRC. */
export const MATMUL_QUANT_ARG_ID: Readonly<Record<QuantArg, number>> = { src: ARG.SRC, weights: ARG.WEIGHTS, dst: ARG.DST };

/**
 * What a matmul computes, derived once by the pd from the descriptors.
 *  - dense:     dst[b, M, N] = src[b|1, M, K] x wei[b|1, K, N]  (2D or batched with broadcast)
 *  - grouped_m: grouped src [total_M, K] x dense wei [G, K, N] -> grouped dst [total_M, N]
 *               (rows offs[g] .. offs[g+1] use expert g's weights)
 *  - grouped_k: grouped src [M, total_K] x grouped wei [total_K, N] -> dense dst [G, M, N]
 *               (contraction over columns offs[g] .. offs[g+1]; weight-gradient shape)
 */
export type MatmulKind = 'dense' | 'grouped_m' | 'grouped_k';

/**
 * MoE row maps of a grouped_m problem (attr.setGather / setScatter) and the batched format's runtime
 * counts of a 3D dense one (attr.setBatchedTokenCounts). `srcRows` / `dstRows` are the row extents of
 * the src / dst tensors: M (the routed rows) unless a gather (T tokens) or a scatter (T * topK).
 */
export interface MoeRows {
  readonly gather: boolean;
  readonly scatterTopK: number;
  readonly batchedCounts: boolean;
  readonly srcRows: number;
  readonly dstRows: number;
  /** attr.setZeroFillUngroupedRows: offsets[0] may be > 0, dst rows in no group are zero-filled. */
  readonly zeroFill: boolean;
  /** attr.setExpertMap: group g uses expert `ARG.MOE_EXPERT_MAP[g]` of the weights' `experts`. */
  readonly expertMap: boolean;
  /** Experts of the weights (dims[0] of 3D weights; G without an expert map). */
  readonly experts: number;
}

export interface MatmulProblem {
  readonly kind: MatmulKind;
  readonly M: number;
  readonly K: number;
  /** GEMM columns: weights' N (the GLU's gate + up columns when there is one). */
  readonly N: number;
  /** Destination columns: N, or N / 2 with a GLU post-op. */
  readonly dstN: number;
  /** Group count (grouped kinds), 1 for dense. */
  readonly G: number;
  /** Dense: dst batch dims (empty for 2D). */
  readonly batch: readonly number[];
  readonly src: MemoryDesc;
  readonly weights: MemoryDesc;
  readonly bias: MemoryDesc | undefined;
  readonly dst: MemoryDesc;
  readonly attr: PrimitiveAttr;
  /** grouped_m: where the offsets come from: the grouped src/dst memory (P#1) or an attribute argument (P#2). */
  readonly offsetsFrom: 'desc' | 'attr' | undefined;
  /** P#1 grouped_m: the grouped memory whose offsets define the groups (dst with a gather: src is then plain). */
  readonly offsetsArg: 'src' | 'dst';
  readonly moe: MoeRows;
  /**
   * Scales, zero points, binary post-op inputs and the GLU (rfcs/0002), resolved by the pd: values
   * descriptors and index maps. `NO_FUSION` when the attribute has none of them.
   */
  readonly fusion: Fusion;
}

/** "mb8:m512k1024n2816"-like short problem string for verbose and benchmarks. */
export function problemString(p: MatmulProblem): string {
  if (p.kind === 'dense') return `${[...p.batch, p.M, p.K].join('x')}:${[...p.batch, p.K, p.N].join('x')}`;
  if (p.kind === 'grouped_m') return `g${p.G}:${p.M}x${p.K}:${p.G}x${p.K}x${p.N}`;
  return `g${p.G}:${p.M}x${p.K}:${p.K}x${p.N}`;
}
