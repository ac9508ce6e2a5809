import type { Memory } from '../../memory/memory.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import type { QuantArg } from '../../attr/fusion.js';
import { refGroupedGemm } from './ref_grouped_gemm.js';
import { wasmGroupedGemm } from './wasm_grouped_gemm.js';
import { wasmDynamicQuantGroupedGemm } from './wasm_grouped_gemm_dq.js';
import { webgpuGroupedGemm } from './webgpu_grouped_gemm.js';
import { webgpuDynamicQuantGroupedGemm } from './webgpu_grouped_gemm_dq.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';

export interface GroupedGemmArgs<M = Memory> {
  readonly src: readonly M[];
  readonly weights: readonly M[];
  readonly dst: readonly M[];
  readonly runtimeDims: M;
  /**
   * Per expert: `ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)` (and `_WEIGHTS`, `_DST`) for each arg some
   * expert has scales of; undefined for an expert without (attr.setExpertScales on some experts only).
   */
  readonly scales: Readonly<Partial<Record<QuantArg, readonly (M | undefined)[]>>>;
  readonly zeroPoints: Readonly<Partial<Record<QuantArg, readonly (M | undefined)[]>>>;
  /**
   * `binary[j][i]`: src1 of binary post-op j (`experts[i].fusion.binary[j]`) for expert i: the shared
   * `ARG.ATTR_MULTIPLE_POST_OP(pos) | ARG.SRC_1` memory, or the per-expert
   * `ARG.ATTR_MULTIPLE_POST_OP(pos) | (ARG.MULTIPLE_SRC + i)` one.
   */
  readonly binary: readonly (readonly M[])[];
}

/** A prepared implementation for one pd: turns arguments into stream work. */
export interface GroupedGemmExecutor<M = Memory> {
  task(args: GroupedGemmArgs<M>): StreamTask;
  /** Gives the executor's engine memory back. */
  destroy?(): void;
}

export interface GroupedGemmImpl<E = Engine, M = Memory> {
  readonly name: string;
  describe?(engine: E, p: GroupedGemmProblem): string;
  reject(p: GroupedGemmProblem, engine: E): string | undefined;
  weightsLayout(e: Expert, engine: E): MemoryDesc;
  createExecutor(p: GroupedGemmProblem, engine: E): GroupedGemmExecutor<M>;
}

/** An implementation for the gpu engine (its own ordered list: the reference never runs there). */
export type GpuGroupedGemmImpl = GroupedGemmImpl<GpuEngine, GpuMemory>;

/** Dynamic int8 activations (rfcs/0006) first, then the same kernel core as matmul (pointer-table group mode), then the reference. */
export const groupedGemmImplList: GroupedGemmImpl[] = [wasmDynamicQuantGroupedGemm, wasmGroupedGemm, refGroupedGemm];

/** The gpu engine's list: WebGPU kernels only, dynamic int8 activations first. */
export const gpuGroupedGemmImplList: GpuGroupedGemmImpl[] = [webgpuDynamicQuantGroupedGemm, webgpuGroupedGemm];
