import type { Memory } from '../../memory/memory.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import type { Executor } from '../../runtime/lifetime.js';
import type { BwdDataProblem, BwdWeightsProblem } from './problem.js';

/** Execution arguments of backward data, checked against the pd. */
export interface BwdDataArgs {
  readonly diffDst: Memory;
  readonly weights: Memory;
  readonly diffSrc: Memory;
  /** Proposal #2: `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`. */
  readonly offsets: Memory | undefined;
}

/** Execution arguments of backward weights, checked against the pd. */
export interface BwdWeightsArgs {
  readonly src: Memory;
  readonly diffDst: Memory;
  readonly diffWeights: Memory;
  readonly diffBias: Memory | undefined;
  readonly offsets: Memory | undefined;
}

/** One entry of an ordered implementation list: why it cannot run a problem (undefined = it can). */
export interface BwdImpl<P, A> {
  readonly name: string;
  describe(engine: Engine, p: P): string;
  reject(p: P, engine: Engine): string | undefined;
  executor(p: P, engine: Engine): Executor<A>;
}

export interface BwdDataImpl extends BwdImpl<BwdDataProblem, BwdDataArgs> {
  /** The weights layout `tag.any` resolves to. */
  weightsLayout(p: BwdDataProblem): MemoryDesc;
}

export type BwdWeightsImpl = BwdImpl<BwdWeightsProblem, BwdWeightsArgs>;
