import { DnnlError } from '../../../common/status.js';
import { elementReader } from '../../../attr/fusion.js';
import type { Memory } from '../../../memory/memory.js';
import type { RoutingProblem } from './problem.js';

/** Status codes of bad runtime data (wasm/src/moe-route.c); the kernel reports token and expert. */
export const ROUTE_ERR = { nan: 110, posInf: 111, noFinite: 112, bias: 113 } as const;

/** The error for a runtime-data violation: the same text from the kernel and from the reference. */
export function routingDataError(code: number, token: number, expert: number): DnnlError {
  const msg =
    code === ROUTE_ERR.nan ? `moe.routing: ARG.SRC token ${token}: the logit of expert ${expert} is NaN` :
    code === ROUTE_ERR.posInf ? `moe.routing: ARG.SRC token ${token}: the logit of expert ${expert} is +inf (softmax scoring needs logits that are finite or -inf)` :
    code === ROUTE_ERR.noFinite ? `moe.routing: ARG.SRC token ${token}: every logit is -inf (softmax scoring needs a finite one)` :
    code === ROUTE_ERR.bias ? `moe.routing: ARG.MOE_CORRECTION_BIAS[${expert}] is not finite` :
    `moe.routing: kernel status ${code}`;
  return new DnnlError(code >= ROUTE_ERR.nan && code <= ROUTE_ERR.bias ? 'invalid_arguments' : 'runtime_error', msg);
}

/** `(t, e) -> logit` of a `[T, E]` src memory, any strides, decoded to a number. */
export function logitReader(src: Memory): (t: number, e: number) => number {
  const [st, se] = src.desc.strides;
  const read = elementReader(src.desc.dataType, src.values);
  return (t, e) => read(t * st + e * se);
}

/**
 * Host check of the rules the kernel checks, in the kernel's order (logits token by token, then the
 * bias), throwing the same error: no NaN logit; with softmax no +inf and at least one logit above
 * -inf per token; a finite correction bias.
 */
export function checkRoutingData(p: RoutingProblem, logit: (t: number, e: number) => number, bias: Float32Array | undefined): void {
  const softmax = p.scoring === 'softmax';
  for (let t = 0; t < p.T; t++) {
    let any = false;
    for (let e = 0; e < p.E; e++) {
      const x = logit(t, e);
      if (Number.isNaN(x)) throw routingDataError(ROUTE_ERR.nan, t, e);
      if (softmax && x === Infinity) throw routingDataError(ROUTE_ERR.posInf, t, e);
      if (x > -Infinity) any = true;
    }
    if (softmax && !any) throw routingDataError(ROUTE_ERR.noFinite, t, 0);
  }
  if (bias) for (let e = 0; e < p.E; e++) if (!Number.isFinite(bias[e])) throw routingDataError(ROUTE_ERR.bias, 0, e);
}
