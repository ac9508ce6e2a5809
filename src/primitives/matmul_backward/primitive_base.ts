import { check } from '../../common/status.js';
import { countObject } from '../../common/census.js';
import { getVerbose, now, verboseLine } from '../../common/verbose.js';
import type { Memory } from '../../memory/memory.js';
import type { Engine } from '../../runtime/engine.js';
import { Lifetime, type Executor } from '../../runtime/lifetime.js';
import type { Stream, StreamTask } from '../../runtime/stream.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../moe/exec_args.js';
import type { MemoryDesc } from '../../memory/desc.js';

export type { ExecArgs };

/**
 * What the two backward primitives share: the executor's lifetime, argument lookup against the pd's
 * descriptors, the no-overlap rule for outputs, and the verbose exec line.
 */
export abstract class BwdPrimitiveBase<A> {
  private readonly exec: Executor<A>;
  private readonly life: Lifetime;

  protected constructor(exec: Executor<A>) {
    countObject('primitive');
    this.exec = exec;
    this.life = new Lifetime(this, { release: () => exec.destroy() });
  }

  /** Gives the primitive's engine memory back (deferred while its work is in flight); execute then throws. */
  destroy(): void {
    this.life.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }

  protected begin(fn: string, stream: Stream, engine: Engine): void {
    check(!this.life.destroyed, `${fn}: primitive used after destroy()`);
    check(stream.engine === engine, `${fn}: stream belongs to another engine`);
  }

  /** The argument `id` checked against `md`, or (md undefined) checked to be absent. */
  protected static arg(fn: string, engine: Engine, args: ExecArgs, id: number, md: MemoryDesc | undefined, why: string): Memory | undefined {
    if (md) return memArg(fn, engine, args, id, md);
    noArg(fn, args, id, why);
    return undefined;
  }

  protected static noOverlap(fn: string, outs: readonly [Memory | undefined, number][], all: readonly [Memory | undefined, number][]): void {
    checkNoOverlap(fn, outs, all);
  }

  protected enqueue(stream: Stream, a: A, verbose: () => string[]): void {
    const task: StreamTask = this.exec.run(a);
    if (getVerbose() < 1) {
      stream.enqueue(task);
      return;
    }
    stream.enqueue(() => {
      const t0 = now();
      const line = (): void => verboseLine('exec', [...verbose(), (now() - t0).toFixed(4)]);
      const r = task();
      if (r) return r.then(line);
      line();
    });
  }
}
