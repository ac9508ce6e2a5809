import type { Memory } from '../../memory/memory.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Engine } from '../../runtime/engine.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { MatmulProblem } from './problem.js';
import type { QuantArg } from '../../attr/fusion.js';

/** Resolved execution arguments, already checked against the pd. */
export interface MatmulArgs<M = Memory> {
  readonly src: M;
  readonly weights: M;
  readonly dst: M;
  readonly bias: M | undefined;
  /** Proposal #2: the offsets passed as `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`. */
  readonly offsets: M | undefined;
  /** `ARG.ATTR_SCALES | ARG.SRC / WEIGHTS / DST`, one per entry of `problem.fusion.scales`. */
  readonly scales: Readonly<Partial<Record<QuantArg, M>>>;
  /** `ARG.ATTR_ZERO_POINTS | ARG.SRC / WEIGHTS / DST`, one per entry of `problem.fusion.zeroPoints`. */
  readonly zeroPoints: Readonly<Partial<Record<QuantArg, M>>>;
  /** `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1`: entry j is the src1 of `problem.fusion.binary[j]`. */
  readonly binary: readonly M[];
  /** MoE gather / scatter: `ARG.MOE_TOKEN_INDEX` and (scatter) `ARG.MOE_TOKEN_KS`, `[M]` s32. */
  readonly tokenIndex?: M;
  readonly tokenKs?: M;
  /** Batched format: `ARG.MOE_EXPERT_NUM_TOKENS`, `[G]` s32. */
  readonly counts?: M;
  /** attr.setExpertMap: `ARG.MOE_EXPERT_MAP`, `[G]` s32, the expert of each group. */
  readonly expertMap?: M;
  /**
   * GLU backward post-op: `ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1` (h13), and with prob
   * `| ARG.GLU_PROB` and `| ARG.GLU_DIFF_PROB`.
   */
  readonly gluBackward?: { readonly src: M; readonly prob: M | undefined; readonly diffProb: M | undefined; readonly alpha?: M; readonly beta?: M };
}

/** A prepared implementation for one pd: turns arguments into stream work. */
export interface MatmulExecutor<M = Memory> {
  task(args: MatmulArgs<M>): StreamTask;
  /** Gives the executor's engine memory back (job struct, tables). */
  destroy?(): void;
}

/**
 * One entry of the ordered implementation list. `reject` says why the impl cannot run a problem
 * (undefined = it can). `weightsLayout` resolves `tag.any` weights to the layout the impl wants.
 */
export interface MatmulImpl<E = Engine, M = Memory> {
  readonly name: string;
  /** Full name for `pd.implInfo` of this problem on this engine (ISA, kernel path); defaults to `name`. */
  describe?(engine: E, p: MatmulProblem): string;
  reject(p: MatmulProblem, engine: E): string | undefined;
  weightsLayout(p: MatmulProblem, engine: E): MemoryDesc;
  createExecutor(p: MatmulProblem, engine: E): MatmulExecutor<M>;
}

/** An implementation for the gpu engine (its own ordered list: the reference never runs there). */
export type GpuMatmulImpl = MatmulImpl<GpuEngine, GpuMemory>;
