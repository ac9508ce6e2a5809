/**
 * Lifetime of objects that hold engine memory (primitives: job structs, tables; layers: workspaces).
 * `destroy()` gives the memory back at once (deferred by the engine while work is in flight); if an
 * object is dropped without it, a FinalizationRegistry gives it back when the object is collected,
 * so a service creating primitives per shape cannot grow the heap without bound.
 */
export interface Releasable {
  release(): void;
}

const registry: FinalizationRegistry<Releasable> | undefined =
  typeof FinalizationRegistry === 'undefined' ? undefined : new FinalizationRegistry<Releasable>((r) => r.release());

export class Lifetime {
  private done = false;
  private readonly resource: Releasable;

  /** `resource` must not reference `owner` (the registry would keep the owner alive). */
  constructor(owner: object, resource: Releasable) {
    this.resource = resource;
    registry?.register(owner, resource, this);
  }

  get destroyed(): boolean {
    return this.done;
  }

  destroy(): void {
    if (this.done) return;
    this.done = true;
    registry?.unregister(this);
    this.resource.release();
  }
}

/** What an implementation prepares for one primitive: stream work per argument set, and its cleanup. */
export interface Executor<A> {
  run(args: A): () => void | Promise<void>;
  destroy(): void;
}

/** An executor that holds no engine memory. */
export function stateless<A>(run: (args: A) => () => void | Promise<void>): Executor<A> {
  return { run, destroy: () => undefined };
}
