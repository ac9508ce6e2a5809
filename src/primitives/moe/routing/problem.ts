import type { MemoryDesc } from '../../../memory/desc.js';
import { optionKeys } from '../../../common/option_keys.js';

/** How router logits become scores: softmax over the experts of a token, or an elementwise sigmoid. */
export type RoutingScoring = 'softmax' | 'sigmoid';

/** Group score of grouped top-k: 0 = the group's best selection score, 1 = the sum of its best two. */
export type GroupSelectMode = 0 | 1;

/** What a custom routing function returns: `[T * topK]` weights and expert ids, token-major. */
export interface CustomRoutingResult {
  readonly weights: ArrayLike<number>;
  readonly ids: ArrayLike<number>;
}

/**
 * A user routing function (MindIE / vLLM `custom_routing_function`), run on the host at execution.
 * `logits` is `[T * E]` row-major f32 (a view of the src memory when it is dense f32: do not write
 * it). It replaces scoring, selection and renormalization; `routedScalingFactor` still multiplies
 * the weights it returns.
 */
export type CustomRoutingFunction = (logits: Float32Array, T: number, E: number, topK: number, renormalize: boolean) => CustomRoutingResult;

/** Options of `new moe.routing.PrimitiveDesc(eng, logitsMd, options)` (see the pd for semantics). */
export interface RoutingOptions {
  readonly topK: number;
  /** Default 'softmax'. */
  readonly scoring?: RoutingScoring;
  /** Divide the chosen weights by their sum (softmax and sigmoid alike). Default false. */
  readonly renormalize?: boolean;
  /**
   * Added to the sum before the division of `renormalize` (MindIE `npu_moe_gating_top_k`'s `eps`,
   * vLLM's `+ 1e-20` of some routers): `w = s / (sum + eps)`, a zero `sum + eps` gives zero weights.
   * A finite f32 number >= 0. Default 0.
   */
  readonly renormalizeEps?: number;
  /** Multiplies the final weights. Default 1. */
  readonly routedScalingFactor?: number;
  /** Experts split into this many contiguous groups (grouped top-k). Default 1. */
  readonly groupCount?: number;
  /** Groups kept per token. Default 1. */
  readonly kGroup?: number;
  /** Default 0. */
  readonly groupSelectMode?: GroupSelectMode;
  /** True: an `[E]` f32 `ARG.MOE_CORRECTION_BIAS` is added to the scores for selection only. Default false. */
  readonly correctionBias?: boolean;
  readonly customRoutingFunction?: CustomRoutingFunction;
}

export const ROUTING_OPTION_KEYS = optionKeys<RoutingOptions>({
  topK: true, scoring: true, renormalize: true, renormalizeEps: true, routedScalingFactor: true, groupCount: true, kGroup: true, groupSelectMode: true,
  correctionBias: true, customRoutingFunction: true,
});

/** What a routing primitive computes, resolved and validated by the pd. */
export interface RoutingProblem {
  /** Tokens and experts: logits are `[T, E]`. */
  readonly T: number;
  readonly E: number;
  readonly topK: number;
  readonly scoring: RoutingScoring;
  readonly renormalize: boolean;
  readonly renormalizeEps: number;
  readonly routedScalingFactor: number;
  readonly groupCount: number;
  readonly kGroup: number;
  readonly groupSelectMode: GroupSelectMode;
  readonly custom: CustomRoutingFunction | undefined;
  readonly src: MemoryDesc;
  /** `[T, topK]` s32, row-major. */
  readonly topkIds: MemoryDesc;
  /** `[T, topK]` f32, row-major. */
  readonly topkWeights: MemoryDesc;
  /** `[E]` f32 when the pd was created with `correctionBias: true`. */
  readonly correctionBias: MemoryDesc | undefined;
}

/** Human-readable problem for verbose lines: `T64:E8:k2:softmax:g4k2m1:renorm:bias`. */
export function problemString(p: RoutingProblem): string {
  const parts = [`T${p.T}`, `E${p.E}`, `k${p.topK}`, p.custom ? 'custom' : p.scoring];
  if (p.groupCount > 1) parts.push(`g${p.groupCount}k${p.kGroup}m${p.groupSelectMode}`);
  if (p.renormalize) parts.push(p.renormalizeEps ? `renorm${p.renormalizeEps}` : 'renorm');
  if (p.routedScalingFactor !== 1) parts.push(`scale${p.routedScalingFactor}`);
  if (p.correctionBias) parts.push('bias');
  return parts.join(':');
}
