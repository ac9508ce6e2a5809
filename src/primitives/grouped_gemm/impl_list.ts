import type { Memory } from '../../memory/memory.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import type { QuantArg } from '../../attr/fusion.js';
import { refGroupedGemm } from './ref_grouped_gemm.js';
import { wasmGroupedGemm } from './wasm_grouped_gemm.js';

export interface GroupedGemmArgs {
  readonly src: readonly Memory[];
  readonly weights: readonly Memory[];
  readonly dst: readonly Memory[];
  readonly runtimeDims: Memory;
  /** Per expert: `ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)` (and `_WEIGHTS`, `_DST`) for each arg with scales. */
  readonly scales: Readonly<Partial<Record<QuantArg, readonly Memory[]>>>;
  readonly zeroPoints: Readonly<Partial<Record<QuantArg, readonly Memory[]>>>;
  /**
   * `binary[j][i]`: src1 of binary post-op j (`experts[i].fusion.binary[j]`) for expert i: the shared
   * `ARG.ATTR_MULTIPLE_POST_OP(pos) | ARG.SRC_1` memory, or the per-expert
   * `ARG.ATTR_MULTIPLE_POST_OP(pos) | (ARG.MULTIPLE_SRC + i)` one.
   */
  readonly binary: readonly (readonly Memory[])[];
}

export interface GroupedGemmImpl {
  readonly name: string;
  describe?(engine: Engine, p: GroupedGemmProblem): string;
  reject(p: GroupedGemmProblem, engine: Engine): string | undefined;
  weightsLayout(e: Expert, engine: Engine): MemoryDesc;
  createExecutor(p: GroupedGemmProblem, engine: Engine): { task(args: GroupedGemmArgs): StreamTask };
}

/** Same kernel core as matmul first (pointer-table group mode), then the reference. */
export const groupedGemmImplList: GroupedGemmImpl[] = [wasmGroupedGemm, refGroupedGemm];
