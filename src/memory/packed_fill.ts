import { check } from '../common/status.js';

/**
 * Whether a packed (`tag.any`-chosen) weights buffer has been filled. Its bytes are panels only the
 * reorder writes; a GEMM on a buffer nobody filled would silently compute with whatever the heap held.
 * Tracked per engine by buffer address, so every Memory object over the same buffer (a wrapper made
 * from its handle included) sees the same state: a fresh allocation starts unfilled, the reorder into
 * it (or raw access through `bytes()`, e.g. loading pre-packed panels) marks it filled.
 */

interface PackedBuffer {
  readonly engine: object;
  readonly handles: readonly number[];
}

const filled = new WeakMap<object, Set<number>>();

function set(engine: object): Set<number> {
  let s = filled.get(engine);
  if (!s) filled.set(engine, (s = new Set()));
  return s;
}

/** @internal the buffer was (re)allocated: nothing in it yet. */
export function markPackedEmpty(m: PackedBuffer): void {
  filled.get(m.engine)?.delete(m.handles[0]);
}

/** @internal the reorder (or the caller through raw bytes) wrote the panels. */
export function markPackedFilled(m: PackedBuffer): void {
  set(m.engine).add(m.handles[0]);
}

/** @internal throws, naming the argument, for packed weights nothing has filled. */
export function checkPackedFilled(fn: string, name: string | (() => string), m: PackedBuffer & { readonly desc: { readonly format: string } }): void {
  // (the message, and a lazy `name`, only for a buffer nobody filled: per expert, per execute on Proposal #3)
  if (m.desc.format !== 'packed' || filled.get(m.engine)?.has(m.handles[0]) === true) return;
  check(false, `${fn}: ${typeof name === 'string' ? name : name()} is a packed weights memory that was never filled: reorder the plain weights into it first (reorder.PrimitiveDesc(eng, plainMd, packedMd))`);
}
