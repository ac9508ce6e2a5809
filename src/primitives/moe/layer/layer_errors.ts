import { DnnlError } from '../../../common/status.js';

/**
 * Errors raised by a layer's inner primitives, said in the layer's terms: a user who passed
 * `ARG.WEIGHTS_1` (w2) should not read `matmul.execute: ARG.WEIGHTS ...` about GEMM2.
 */

/** Inner argument name -> the layer's (`ARG.WEIGHTS` -> `ARG.WEIGHTS_1`, `ARG.DST` -> `workspace.expertOut`). */
export type ArgNames = ReadonlyMap<string, string>;

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Strips the status and the inner function (`invalid_arguments: matmul.execute: `) from a message. */
function innerText(e: DnnlError): string {
  return e.message.slice(e.status.length + 2).replace(/^[\w.]+: /, '');
}

/**
 * `moe.layer.execute: <the inner message, arguments renamed> (stage <name>)`. Names are replaced
 * longest first, so `ARG.ATTR_SCALES | ARG.WEIGHTS` is one name, and only whole names (`ARG.WEIGHTS`
 * never matches inside `ARG.WEIGHTS_1`). Errors about the engine itself pass unchanged.
 */
export function layerExecuteError(e: unknown, stage: string, names: ArgNames): unknown {
  if (!(e instanceof DnnlError) || e.message.includes(': engine: ')) return e;
  let text = innerText(e);
  if (names.size) {
    const keys = [...names.keys()].sort((a, b) => b.length - a.length).map(escape);
    text = text.replace(new RegExp(`(?:${keys.join('|')})(?![A-Z0-9_])`, 'g'), (m) => names.get(m) ?? m);
  }
  return new DnnlError(e.status, `moe.layer.execute: ${text} (stage ${stage})`);
}

/** A stage's pd refused the layer's configuration: `moe.layer: <stage> (<what it computes>): <inner message>`. */
export function layerPdError(e: unknown, stage: string, what: string): unknown {
  if (!(e instanceof DnnlError) || e.message.includes(': engine: ')) return e;
  return new DnnlError(e.status, `moe.layer: ${stage} (${what}): ${e.message.slice(e.status.length + 2)}`);
}
