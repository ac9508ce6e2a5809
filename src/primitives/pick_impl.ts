import { DnnlError } from '../common/status.js';

/** An entry of an ordered implementation list: `reject` says why it cannot run a problem (undefined: it can). */
export interface ListedImpl<P, E> {
  readonly name: string;
  reject(p: P, engine: E): string | undefined;
}

/** The reason of an impl made for a feature the problem does not ask for (e.g. the `:dq` impls without the
 * attribute): it rejects the problem and stays out of the `unimplemented` message, which lists real reasons. */
export const NOT_THIS_FEATURE = '';

/**
 * The first implementation of `list` (the engine kind's ordered list) that accepts the problem, or
 * `unimplemented` with every reason. On a gpu engine the list holds WebGPU kernels only: the reference
 * never runs silently there.
 */
export function pickImpl<P, E extends { readonly kind: string }, I extends ListedImpl<P, E>>(what: string, list: readonly I[], p: P, engine: E): I {
  const reasons: string[] = [];
  for (const impl of list) {
    const why = impl.reject(p, engine);
    if (why === undefined) return impl;
    if (why !== NOT_THIS_FEATURE) reasons.push(`${impl.name}: ${why}`);
  }
  throw new DnnlError('unimplemented', `${what}: no implementation${engine.kind === 'gpu' ? ' on the gpu engine' : ''} (${reasons.join('; ')})`);
}
