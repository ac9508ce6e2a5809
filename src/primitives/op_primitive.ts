import { check } from '../common/status.js';
import { created } from '../runtime/live_engine.js';
import { Lifetime, type Executor } from '../runtime/lifetime.js';
import type { Engine } from '../runtime/engine.js';
import type { GpuEngine } from '../runtime/gpu/gpu_engine.js';
import type { Stream, StreamTask } from '../runtime/stream.js';
import { getVerbose, now, verboseLine } from '../common/verbose.js';

/**
 * What every op-job primitive shares (moe.dispatch, moe.combine, moe.activation, the backward ops,
 * dynamic_quant): its pd, the executor its implementation prepared (job struct in the engine heap),
 * the lifetime that gives that memory back (destroy, dispose, or the FinalizationRegistry), and the
 * two checks every `execute` starts with. Subclasses only check their arguments and enqueue.
 */
export abstract class OpPrimitive<P extends { readonly engine: Engine | GpuEngine }, A> {
  readonly pd: P;
  private readonly exec: Executor<A>;
  private readonly life: Lifetime;

  protected constructor(pd: P, exec: Executor<A>) {
    created('primitive', pd.engine);
    this.pd = pd;
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

  /** The checks before any argument's: the primitive is alive and the stream runs on its engine. */
  protected begin(fn: string, stream: Stream): void {
    check(!this.life.destroyed, `${fn}: primitive used after destroy()`);
    check(stream.engine === this.pd.engine, `${fn}: stream belongs to another engine`);
  }

  /**
   * Enqueues the work on checked arguments; with `verbose` (the fields of the exec line but the time),
   * a oneDNN-like exec line is printed when verbose is on (the fields are built only then).
   */
  protected enqueue(stream: Stream, args: A, verbose?: () => string[]): void {
    const task: StreamTask = this.exec.run(args);
    if (!verbose || getVerbose() < 1) {
      stream.enqueue(task, args);
      return;
    }
    stream.enqueue(() => {
      const t0 = now();
      const line = (): void => verboseLine('exec', [...verbose(), (now() - t0).toFixed(4)]);
      const r = task();
      if (r) return r.then(line);
      line();
    }, args);
  }
}
