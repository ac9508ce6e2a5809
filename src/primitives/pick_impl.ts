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
 * The first implementation of `list` that `reject` accepts (undefined), or `unimplemented` with the primitive's
 * `message` around every reason ("name: why", joined by '; '; NOT_THIS_FEATURE ones left out). Every pd picks
 * its implementation here.
 */
export function firstImpl<I extends { readonly name: string }>(list: readonly I[], reject: (impl: I) => string | undefined, message: (reasons: string) => string): I {
  const reasons: string[] = [];
  for (const impl of list) {
    const why = reject(impl);
    if (why === undefined) return impl;
    if (why !== NOT_THIS_FEATURE) reasons.push(`${impl.name}: ${why}`);
  }
  throw new DnnlError('unimplemented', message(reasons.join('; ')));
}

/**
 * firstImpl of `list` (the engine kind's ordered list) with the common message. On a gpu engine the list holds
 * WebGPU kernels only: the reference never runs silently there.
 */
export function pickImpl<P, E extends { readonly kind: string }, I extends ListedImpl<P, E>>(what: string, list: readonly I[], p: P, engine: E): I {
  return firstImpl(list, (impl) => impl.reject(p, engine), (reasons) => `${what}: no implementation${engine.kind === 'gpu' ? ' on the gpu engine' : ''} (${reasons})`);
}
