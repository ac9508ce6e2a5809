import type { MemoryDesc } from '../../memory/desc.js';
import type { PrimitiveAttr } from '../../attr/primitive_attr.js';

/** Expert i of a pointer-array grouped GEMM: its own descriptors; M comes at execution. */
export interface Expert {
  readonly K: number;
  readonly N: number;
  readonly src: MemoryDesc;
  readonly weights: MemoryDesc;
  readonly dst: MemoryDesc;
}

/** RFC Proposal #3: G independent GEMMs dst_i[M_i, N_i] = src_i[M_i, K_i] x wei_i[K_i, N_i]. */
export interface GroupedGemmProblem {
  readonly G: number;
  readonly experts: readonly Expert[];
  readonly runtimeDims: MemoryDesc;
  readonly attr: PrimitiveAttr;
}
