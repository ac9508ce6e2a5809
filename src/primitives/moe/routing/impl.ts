import type { Memory } from '../../../memory/memory.js';
import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { Engine } from '../../../runtime/engine.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../../runtime/stream.js';
import type { RoutingProblem } from './problem.js';

/** Execution arguments, already checked against the pd. */
export interface RoutingArgs<M = Memory> {
  readonly src: M;
  readonly topkIds: M;
  readonly topkWeights: M;
  readonly correctionBias: M | undefined;
}

/** One entry of the ordered implementation list; `reject` says why it cannot run a problem (undefined = it can). */
export interface RoutingImpl<E = Engine, M = Memory> {
  readonly name: string;
  describe?(engine: E, p: RoutingProblem): string;
  reject(p: RoutingProblem, engine: E): string | undefined;
  createExecutor(p: RoutingProblem, engine: E): { task(args: RoutingArgs<M>): StreamTask; destroy?(): void };
}

/** An implementation for the gpu engine (its own ordered list: the host reference never runs there). */
export type GpuRoutingImpl = RoutingImpl<GpuEngine, GpuMemory>;
