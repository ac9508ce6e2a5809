import type { Memory } from '../../memory/memory.js';
import type { Engine } from '../../runtime/engine.js';
import type { MemoryDesc } from '../../memory/desc.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../exec_args.js';
import { OpPrimitive } from '../op_primitive.js';

export type { ExecArgs };

/**
 * What the backward GEMM primitives share beyond OpPrimitive: argument lookup against the pd's
 * descriptors (an argument the pd does not take must be absent) and the no-overlap rule for outputs.
 */
export abstract class BwdPrimitiveBase<P extends { readonly engine: Engine }, A> extends OpPrimitive<P, A> {
  /** The argument `id` checked against `md`, or (md undefined) checked to be absent. */
  protected static arg(fn: string, engine: Engine, args: ExecArgs, id: number, md: MemoryDesc | undefined, why: string): Memory | undefined {
    if (md) return memArg(fn, engine, args, id, md);
    noArg(fn, args, id, why);
    return undefined;
  }

  protected static noOverlap(fn: string, outs: readonly [Memory | undefined, number][], all: readonly [Memory | undefined, number][]): void {
    checkNoOverlap(fn, outs, all);
  }
}
