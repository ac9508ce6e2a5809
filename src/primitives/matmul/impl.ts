import type { Memory } from '../../memory/memory.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { StreamTask } from '../../runtime/stream.js';
import type { Engine } from '../../runtime/engine.js';
import type { MatmulProblem } from './problem.js';
import type { QuantArg } from '../../attr/fusion.js';

/** Resolved execution arguments, already checked against the pd. */
export interface MatmulArgs {
  readonly src: Memory;
  readonly weights: Memory;
  readonly dst: Memory;
  readonly bias: Memory | undefined;
  /** Proposal #2: the offsets passed as `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`. */
  readonly offsets: Memory | undefined;
  /** `ARG.ATTR_SCALES | ARG.SRC / WEIGHTS / DST`, one per entry of `problem.fusion.scales`. */
  readonly scales: Readonly<Partial<Record<QuantArg, Memory>>>;
  /** `ARG.ATTR_ZERO_POINTS | ARG.SRC / WEIGHTS / DST`, one per entry of `problem.fusion.zeroPoints`. */
  readonly zeroPoints: Readonly<Partial<Record<QuantArg, Memory>>>;
  /** `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1`: entry j is the src1 of `problem.fusion.binary[j]`. */
  readonly binary: readonly Memory[];
  /** MoE gather / scatter: `ARG.MOE_TOKEN_INDEX` and (scatter) `ARG.MOE_TOKEN_KS`, `[M]` s32. */
  readonly tokenIndex?: Memory;
  readonly tokenKs?: Memory;
  /** Batched format: `ARG.MOE_EXPERT_NUM_TOKENS`, `[G]` s32. */
  readonly counts?: Memory;
  /** attr.setExpertMap: `ARG.MOE_EXPERT_MAP`, `[G]` s32, the expert of each group. */
  readonly expertMap?: Memory;
  /**
   * GLU backward post-op: `ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1` (h13), and with prob
   * `| ARG.GLU_PROB` and `| ARG.GLU_DIFF_PROB`.
   */
  readonly gluBackward?: { readonly src: Memory; readonly prob: Memory | undefined; readonly diffProb: Memory | undefined; readonly alpha?: Memory; readonly beta?: Memory };
}

/** A prepared implementation for one pd: turns arguments into stream work. */
export interface MatmulExecutor {
  task(args: MatmulArgs): StreamTask;
  /** Gives the executor's engine memory back (job struct, tables). */
  destroy?(): void;
}

/**
 * One entry of the ordered implementation list. `reject` says why the impl cannot run a problem
 * (undefined = it can). `weightsLayout` resolves `tag.any` weights to the layout the impl wants.
 */
export interface MatmulImpl {
  readonly name: string;
  /** Full name for `pd.implInfo` of this problem on this engine (ISA, kernel path); defaults to `name`. */
  describe?(engine: Engine, p: MatmulProblem): string;
  reject(p: MatmulProblem, engine: Engine): string | undefined;
  weightsLayout(p: MatmulProblem, engine: Engine): MemoryDesc;
  createExecutor(p: MatmulProblem, engine: Engine): MatmulExecutor;
}
