import type { Memory } from '../../memory/memory.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { refGroupedGemm } from './ref_grouped_gemm.js';
import { wasmGroupedGemm } from './wasm_grouped_gemm.js';

export interface GroupedGemmArgs {
  readonly src: readonly Memory[];
  readonly weights: readonly Memory[];
  readonly dst: readonly Memory[];
  readonly runtimeDims: Memory;
}

export interface GroupedGemmImpl {
  readonly name: string;
  describe?(engine: Engine): string;
  reject(p: GroupedGemmProblem, engine: Engine): string | undefined;
  weightsLayout(e: Expert, engine: Engine): MemoryDesc;
  createExecutor(p: GroupedGemmProblem, engine: Engine): { task(args: GroupedGemmArgs): StreamTask };
}

/** Same kernel core as matmul first (pointer-table group mode), then the reference. */
export const groupedGemmImplList: GroupedGemmImpl[] = [wasmGroupedGemm, refGroupedGemm];
