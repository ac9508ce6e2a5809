import type { MemoryDesc } from '../../memory/desc.js';
import type { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Fusion, QuantArg } from '../../attr/fusion.js';
import { ARG } from '../args.js';

/** Expert 0's argument id of each quantized argument (expert i's: + i), as in ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i). */
export const EXPERT_QUANT_ARG_ID: Readonly<Record<QuantArg, number>> = { src: ARG.MULTIPLE_SRC, weights: ARG.MULTIPLE_WEIGHTS, dst: ARG.MULTIPLE_DST };

/** Expert i of a pointer-array grouped GEMM: its own descriptors; M comes at execution. */
export interface Expert {
  readonly K: number;
  /** GEMM columns (gate + up with a GLU). */
  readonly N: number;
  /** Destination columns: N, or N / 2 with a GLU. */
  readonly dstN: number;
  readonly src: MemoryDesc;
  readonly weights: MemoryDesc;
  readonly dst: MemoryDesc;
  /**
   * This expert's scales, zero points and binary src1 (rfcs/0002), resolved: values descriptors of
   * the memories passed as `ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)` etc., and their index maps over
   * the expert's own `[m, k]` / `[k, n]` / `[m, n]` coordinates (g is always 0).
   */
  readonly fusion: Fusion;
}

/** RFC Proposal #3: G independent GEMMs dst_i[M_i, N_i] = src_i[M_i, K_i] x wei_i[K_i, N_i]. */
export interface GroupedGemmProblem {
  readonly G: number;
  readonly experts: readonly Expert[];
  readonly runtimeDims: MemoryDesc;
  readonly attr: PrimitiveAttr;
}
