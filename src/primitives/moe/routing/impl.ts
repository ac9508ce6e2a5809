import type { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import type { StreamTask } from '../../../runtime/stream.js';
import type { RoutingProblem } from './problem.js';

/** Execution arguments, already checked against the pd. */
export interface RoutingArgs {
  readonly src: Memory;
  readonly topkIds: Memory;
  readonly topkWeights: Memory;
  readonly correctionBias: Memory | undefined;
}

/** One entry of the ordered implementation list; `reject` says why it cannot run a problem (undefined = it can). */
export interface RoutingImpl {
  readonly name: string;
  describe?(engine: Engine, p: RoutingProblem): string;
  reject(p: RoutingProblem, engine: Engine): string | undefined;
  createExecutor(p: RoutingProblem, engine: Engine): { task(args: RoutingArgs): StreamTask; destroy?(): void };
}
