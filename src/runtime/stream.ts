import { DnnlError } from '../common/status.js';
import type { Engine } from './engine.js';
import type { GpuEngine } from './gpu/gpu_engine.js';
import { requireLive } from './live_engine.js';

/** One unit of stream work: runs synchronously (reference, threads = 1) or returns a promise (workers). */
export type StreamTask = () => void | Promise<void>;

/**
 * An in-order execution queue on an engine. `execute` calls enqueue work and return at once; `wait()`
 * resolves when everything enqueued so far has finished, or rejects with the first error raised by
 * that work (e.g. invalid runtime offsets) since the previous `wait()`. Later work still runs after
 * an error, as on a device queue.
 */
export class Stream {
  readonly engine: Engine | GpuEngine;
  private tail: Promise<void> | undefined;
  private firstError: DnnlError | undefined;
  private errorMap: ((e: DnnlError) => DnnlError) | undefined;

  constructor(engine: Engine | GpuEngine) {
    requireLive(engine);
    this.engine = engine;
  }

  /**
   * @internal runs `body`; errors of the work it enqueues are reported through `map` (a composite
   * primitive, e.g. moe.layer, names itself and its own arguments instead of its inner primitives').
   */
  mapErrors(map: (e: DnnlError) => DnnlError, body: () => void): void {
    const prev = this.errorMap;
    this.errorMap = map;
    try {
      body();
    } finally {
      this.errorMap = prev;
    }
  }

  /**
   * @internal used by primitives. The engine counts the work as in flight until it settles; so do the
   * host memories among `uses` (the execute's arguments, or the memories the primitive resolved from them,
   * searched a few levels deep), whose `read` and `write` refuse meanwhile.
   */
  enqueue(task: StreamTask, uses?: unknown): void {
    const eng = this.engine;
    requireLive(eng); // every execute of every primitive comes through here
    const map = this.errorMap;
    // A gpu engine's memories are device buffers: no host memory to hold (the walk cost ~4% of a decode layer's JS).
    const held = eng.kind === 'gpu' ? NO_HOST_MEMORIES : hostMemoriesIn(uses);
    eng.beginWork();
    for (const m of held) m.streamUse(1);
    const settle = (): void => {
      for (const m of held) m.streamUse(-1);
      eng.endWork();
    };
    const run = (): Promise<void> | undefined => {
      const r = this.runGuarded(task, map);
      if (!r) {
        settle();
        return undefined;
      }
      return r.finally(settle);
    };
    if (this.tail === undefined) {
      const r = run();
      if (r) this.track(r);
      return;
    }
    this.track(this.tail.then(run));
  }

  /** Resolves when all enqueued work is done; rejects with the first error since the last wait. */
  async wait(): Promise<void> {
    while (this.tail !== undefined) await this.tail;
    // gpu: tasks only submitted their command buffers; wait for the device and its status slots.
    if (this.engine.kind === 'gpu') {
      try {
        await this.engine.flush();
      } catch (e) {
        this.record(e, undefined);
      }
    }
    const e = this.firstError;
    this.firstError = undefined;
    if (e) throw e;
  }

  /**
   * gpu engine: hands the commands recorded so far to the device queue now (they otherwise go in one
   * submit at `wait()` or at a memory read), e.g. before work of your own on the same `GPUQueue`.
   * cpu engine: nothing to do.
   */
  submit(): void {
    if (this.engine.kind === 'gpu') this.engine.submit();
  }

  /** True while enqueued work has not finished. */
  get busy(): boolean {
    return this.tail !== undefined;
  }

  private track(p: Promise<void>): void {
    const t: Promise<void> = p.then(() => {
      if (this.tail === t) this.tail = undefined;
    });
    this.tail = t;
  }

  private runGuarded(task: StreamTask, map: ((e: DnnlError) => DnnlError) | undefined): Promise<void> | undefined {
    const slots = this.engine.kind === 'gpu' ? this.engine.status : undefined;
    const prevMap = slots?.errorMap;
    if (slots) slots.errorMap = map;
    try {
      const r = task();
      return r ? r.catch((e: unknown) => this.record(e, map)) : undefined;
    } catch (e) {
      this.record(e, map);
      return undefined;
    } finally {
      if (slots) slots.errorMap = prevMap;
    }
  }

  private record(e: unknown, map: ((e: DnnlError) => DnnlError) | undefined): void {
    const err = e instanceof DnnlError ? e : new DnnlError('runtime_error', `stream: ${e instanceof Error ? e.message : String(e)}`);
    this.firstError ??= map ? map(err) : err;
  }
}

const NO_HOST_MEMORIES: readonly HostMemoryUse[] = [];

/** What Stream.enqueue holds while a task is in flight: a host (cpu engine) memory object. */
interface HostMemoryUse {
  streamUse(delta: 1 | -1): void;
}

/**
 * The cpu memory objects in an execute's arguments: a record of memories, or an implementation's
 * argument struct (memories, plain records and arrays of them, nested a few levels). A memory met twice
 * is listed twice (its uses count up and down alike): no Set to fill per execute.
 */
function hostMemoriesIn(x: unknown, out: HostMemoryUse[] = [], depth = 0): HostMemoryUse[] {
  if (typeof x !== 'object' || x === null || ArrayBuffer.isView(x)) return out;
  if (typeof (x as Partial<HostMemoryUse>).streamUse === 'function') {
    out.push(x as HostMemoryUse);
    return out;
  }
  // Into plain records and arrays only (not engines, descriptors, gpu memories...).
  const proto: unknown = Object.getPrototypeOf(x);
  if (depth >= 3 || !(Array.isArray(x) || proto === Object.prototype || proto === null)) return out;
  for (const v of Array.isArray(x) ? x : Object.values(x)) hostMemoriesIn(v, out, depth + 1);
  return out;
}
