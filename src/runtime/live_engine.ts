import { check } from '../common/status.js';
import { countObject } from '../common/census.js';

/**
 * After `Engine.release()` the workers go (once the stream work enqueued before it is done) and the heap
 * is no longer the engine's to hand out:
 * creating a pd, a primitive or a stream, and executing, are refused here, in one place, for every
 * primitive kind (each pd and primitive constructor calls `created` first; streams call `requireLive`).
 */

/** Anything with an engine's lifetime flag (the cpu engine, and any other engine kind that has one). */
export interface EngineLike {
  readonly isReleased: boolean;
}

/** @internal throws `engine: used after release()` for a released engine (an absent one is left to the caller's own check). */
export function requireLive(engine: EngineLike | undefined | null): void {
  check(engine === undefined || engine === null || !engine.isReleased, 'engine: used after release()');
}

/** @internal the first call of every pd / primitive constructor: a live engine, then the census count. */
export function created(kind: 'primitive_desc' | 'primitive', engine: EngineLike | undefined | null): void {
  requireLive(engine);
  countObject(kind);
}
