/**
 * The one options shape of a GLU, shared by the forward (`moe.activation`, the layer's `glu`) and the
 * backward (`glu_backward`), and the rules for its parameters, shared with `appendGlu` /
 * `appendGluBackward`.
 */
import { check } from '../common/status.js';
import { GLU_DEFAULT_ALPHA, GLU_DEFAULT_LIMIT, GLU_LAYOUTS, isGluAlg, type GluAlg, type GluLayout } from './eltwise.js';

/** A GLU: every accepted key is listed here. */
export interface GluOptions {
  readonly alg: GluAlg;
  /** Where gate and up sit among the 2I columns. Default 'halves'. */
  readonly layout?: GluLayout;
  /**
   * Sigmoid slope of glu_swiglu (default 1: SiLU) and glu_swiglu_oai (default 1.702). Rejected for
   * glu_geglu_erf / glu_geglu_tanh: GELU has no slope parameter (a scaled gate is a scaled weight).
   */
  readonly alpha?: number;
  /** Clamp of glu_swiglu_oai (default 7, > 0); no other GLU clamps. */
  readonly limit?: number;
}

/** A GLU with its defaults filled in. */
export interface ResolvedGlu {
  readonly alg: GluAlg;
  readonly layout: GluLayout;
  readonly alpha: number;
  readonly limit: number;
}

/** alpha / limit of `alg` with their defaults; a parameter the GLU does not take is `invalid_arguments` with the reason. */
export function gluParams(fn: string, alg: GluAlg, alpha: number | undefined, limit: number | undefined): { alpha: number; limit: number } {
  check(alpha === undefined || alg === 'glu_swiglu' || alg === 'glu_swiglu_oai', `${fn}: alpha applies to glu_swiglu and glu_swiglu_oai only, not ${alg} (GELU has no slope parameter)`);
  check(limit === undefined || alg === 'glu_swiglu_oai', `${fn}: limit applies to glu_swiglu_oai only, not ${alg}`);
  check(alpha === undefined || (typeof alpha === 'number' && Number.isFinite(alpha)), `${fn}: alpha must be finite`);
  check(limit === undefined || (typeof limit === 'number' && Number.isFinite(limit) && limit > 0), `${fn}: limit must be finite and positive`);
  return { alpha: alpha ?? GLU_DEFAULT_ALPHA[alg], limit: limit ?? (alg === 'glu_swiglu_oai' ? GLU_DEFAULT_LIMIT : 0) };
}

/** Validates a `GluOptions` object (`what` names it in messages, e.g. `glu`) and fills in the defaults. */
export function resolveGlu(fn: string, glu: GluOptions, what = 'glu'): ResolvedGlu {
  check(glu !== null && typeof glu === 'object', `${fn}: ${what} must be an object { alg, layout, alpha, limit }`);
  check(isGluAlg(glu.alg), `${fn}: ${what}.alg must be a GLU algorithm (glu_swiglu, glu_geglu_erf, glu_geglu_tanh, glu_swiglu_oai), got ${String(glu.alg)}`);
  const layout = glu.layout ?? 'halves';
  check(GLU_LAYOUTS.includes(layout), `${fn}: ${what}.layout must be halves, interleaved or blocks32, got ${String(layout)}`);
  return { alg: glu.alg, layout, ...gluParams(`${fn}: ${what}`, glu.alg, glu.alpha, glu.limit) };
}
