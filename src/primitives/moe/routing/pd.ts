import { check, checkImpl } from '../../../common/status.js';
import { firstImpl } from '../../pick_impl.js';
import { checkOptionKeys } from '../../../common/option_keys.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { countPdTime } from '../../../common/census.js';
import { created } from '../../../runtime/live_engine.js';
import { MemoryDesc } from '../../../memory/desc.js';
import { tagToStrides } from '../../../memory/format_tag.js';
import type { DataType } from '../../../common/data_type.js';
import type { Engine } from '../../../runtime/engine.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { GpuRoutingImpl, RoutingImpl } from './impl.js';
import { gpuRoutingImplList, routingImplList } from './impl_list.js';
import { ROUTING_OPTION_KEYS, problemString, type RoutingOptions, type RoutingProblem } from './problem.js';

/** What `pd.queryMd` answers. */
export type RoutingQuery = 'src' | 'topk_ids' | 'topk_weights' | 'correction_bias';

const LOGITS_TYPES = ['f32', 'bf16', 'f16'];

function rowMajor(dims: readonly number[], dataType: DataType): MemoryDesc {
  return new MemoryDesc({ dims, dataType, format: 'blocked', strides: tagToStrides('ab'.slice(0, dims.length), dims, 'moe.routing') });
}

/**
 * MoE routing primitive descriptor (MindIE `select_experts`, vLLM `FusedMoE.select_experts`):
 * `new moe.routing.PrimitiveDesc(eng, logitsMd, { topK, scoring, ... })`. Router logits `[T, E]`
 * (f32, bf16 or f16, any strides) give each token `topK` expert ids (`topk_ids [T, topK]` s32) and
 * routing weights (`topk_weights [T, topK]` f32). Per token (rfcs/0003-moe-routing.md):
 *
 * 1. Scores, f32: `softmax` over the token's E logits (max-shifted), or `sigmoid` of each logit.
 * 2. Selection scores: the scores, plus `ARG.MOE_CORRECTION_BIAS[e]` (f32 addition) when the pd was
 *    created with `correctionBias: true` (DeepSeek-V3: the bias changes which experts are chosen, never
 *    their weights).
 * 3. Selection. Plain (`groupCount` 1): the topK largest selection scores. Grouped: the E experts form
 *    `groupCount` contiguous groups of E / groupCount; a group's score is its largest selection score
 *    (`groupSelectMode` 0) or the f32 sum of its largest two (1); the `kGroup` best groups are kept and
 *    the topK largest selection scores among their experts are chosen. Ties always go to the lower
 *    index (expert or group). Ids come out in descending selection score, ties lower id first.
 * 4. Weights: the scores (not the selection scores) of the chosen experts, in slot order; with
 *    `renormalize` divided by their sum plus `renormalizeEps` (default 0), for softmax and sigmoid alike
 *    (vLLM / DeepSeek; MindIE's sigmoid operator always normalizes: pass `renormalize: true` for its
 *    behaviour); a zero denominator (only sigmoid scores can all underflow) gives zero weights. Then times `routedScalingFactor` (as f32).
 *
 * Runtime data, checked before anything is written (the error names the token and is raised by
 * `stream.wait()`): a NaN logit; with softmax a +inf logit or a token whose logits are all -inf
 * (-inf alone is allowed: the expert gets score 0); a non-finite correction bias. A
 * `customRoutingFunction` replaces steps 1-4 (it receives `renormalize`; `routedScalingFactor` still
 * applies) and its result is validated (integer ids in [0, E), no expert twice in a token, finite
 * weights, T * topK of each) before anything is written.
 *
 * On a gpu engine everything runs on the device (webgpu_routing.ts), the checks of runtime data
 * included; a `customRoutingFunction` (a host function) is refused there as `unimplemented`.
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: RoutingProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, from the gpu list on a gpu engine. */
  readonly impl: RoutingImpl | GpuRoutingImpl;
  readonly creationMs: number;

  constructor(engine: Engine | GpuEngine, logits: MemoryDesc, options: RoutingOptions) {
    const t0 = now();
    created('primitive_desc', engine);
    this.engine = engine;
    this.problem = Object.freeze(PrimitiveDesc.init(engine, logits, options));
    this.impl = engine.kind === 'gpu' ? PrimitiveDesc.pick(gpuRoutingImplList, this.problem, engine) : PrimitiveDesc.pick(routingImplList, this.problem, engine);
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', ['moe_routing', this.implInfo, 'undef', this.mdsString(), '', '', problemString(this.problem), this.creationMs.toFixed(4)]);
  }

  /** The first implementation of `list` that accepts the problem, or `unimplemented` with every reason. */
  private static pick<E, I extends { readonly name: string; reject(p: RoutingProblem, engine: E): string | undefined }>(list: readonly I[], p: RoutingProblem, engine: E): I {
    return firstImpl(list, (i) => i.reject(p, engine), (reasons) => `moe.routing: no implementation for ${problemString(p)} (${reasons})`);
  }

  /** Validation rules, one per line. */
  private static init(engine: Engine | GpuEngine, src: MemoryDesc, o: RoutingOptions): RoutingProblem {
    check(engine !== undefined && engine !== null, 'moe.routing: engine is required');
    check(src instanceof MemoryDesc, 'moe.routing: src (logits) must be a memory descriptor');
    check(o !== null && typeof o === 'object', 'moe.routing: options must be an object { topK, ... }');
    checkOptionKeys('moe.routing', o, ROUTING_OPTION_KEYS);
    check(src.ndims === 2, `moe.routing: src (logits) must be 2D [T, E], got ${src.ndims} dims`);
    check(!src.hasRuntimeDims, 'moe.routing: src (logits) dims must be known (no RUNTIME_DIM_VAL)');
    check(src.format === 'blocked' || src.format === 'any', `moe.routing: src (logits) must be a plain descriptor, got ${src.format}`);
    checkImpl(LOGITS_TYPES.includes(src.dataType), `moe.routing: src (logits) data type ${src.dataType} is not supported (f32, bf16, f16)`);
    const [T, E] = src.dims;
    check(E >= 1, 'moe.routing: src (logits) dims[1] (experts E) must be at least 1');
    const { topK, scoring = 'softmax', renormalize = false, renormalizeEps = 0, routedScalingFactor = 1 } = o;
    const { groupCount = 1, kGroup = 1, groupSelectMode = 0, correctionBias = false, customRoutingFunction } = o;
    check(Number.isInteger(topK) && topK >= 1 && topK <= E, `moe.routing: topK must be an integer in [1, E = ${E}], got ${topK}`);
    check(scoring === 'softmax' || scoring === 'sigmoid', `moe.routing: scoring must be 'softmax' or 'sigmoid', got '${String(scoring)}'`);
    check(typeof renormalize === 'boolean', `moe.routing: renormalize must be a boolean, got ${String(renormalize)}`);
    check(typeof renormalizeEps === 'number' && Number.isFinite(Math.fround(renormalizeEps)) && renormalizeEps >= 0, `moe.routing: renormalizeEps must be a finite f32 number >= 0, got ${String(renormalizeEps)}`);
    check(typeof routedScalingFactor === 'number' && Number.isFinite(Math.fround(routedScalingFactor)), `moe.routing: routedScalingFactor must be a finite f32 number, got ${routedScalingFactor}`);
    check(Number.isInteger(groupCount) && groupCount >= 1, `moe.routing: groupCount must be a positive integer, got ${groupCount}`);
    check(E % groupCount === 0, `moe.routing: groupCount ${groupCount} must divide the expert count E = ${E}`);
    check(Number.isInteger(kGroup) && kGroup >= 1 && kGroup <= groupCount, `moe.routing: kGroup must be an integer in [1, groupCount = ${groupCount}], got ${kGroup}`);
    check(topK <= kGroup * (E / groupCount), `moe.routing: topK ${topK} exceeds the ${kGroup * (E / groupCount)} experts of the kGroup = ${kGroup} selected groups (E / groupCount = ${E / groupCount} each)`);
    check(groupSelectMode === 0 || groupSelectMode === 1, `moe.routing: groupSelectMode must be 0 (group max) or 1 (sum of the group's top 2), got ${String(groupSelectMode)}`);
    check(groupSelectMode === 0 || E / groupCount >= 2, `moe.routing: groupSelectMode 1 (sum of the group's top 2) needs at least 2 experts per group, got E / groupCount = ${E / groupCount}`);
    check(typeof correctionBias === 'boolean', `moe.routing: correctionBias must be a boolean, got ${String(correctionBias)}`);
    check(customRoutingFunction === undefined || typeof customRoutingFunction === 'function', 'moe.routing: customRoutingFunction must be a function');
    check(!customRoutingFunction || !correctionBias, 'moe.routing: customRoutingFunction cannot use correctionBias (the function receives only the logits)');
    check(!customRoutingFunction || (groupCount === 1 && kGroup === 1 && groupSelectMode === 0), 'moe.routing: customRoutingFunction replaces the selection: leave groupCount, kGroup and groupSelectMode at their defaults');
    return {
      T, E, topK, scoring, renormalize, renormalizeEps, routedScalingFactor, groupCount, kGroup, groupSelectMode, custom: customRoutingFunction,
      src: src.format === 'any' ? rowMajor(src.dims, src.dataType) : src,
      topkIds: rowMajor([T, topK], 's32'),
      topkWeights: rowMajor([T, topK], 'f32'),
      correctionBias: correctionBias ? rowMajor([E], 'f32') : undefined,
    };
  }

  /** The descriptor of an argument (`src` with `tag.any` resolved to row-major); undefined for a bias the pd does not take. */
  queryMd(what: RoutingQuery): MemoryDesc | undefined {
    const p = this.problem;
    return what === 'src' ? p.src : what === 'topk_ids' ? p.topkIds : what === 'topk_weights' ? p.topkWeights : p.correctionBias;
  }

  /** Name of the chosen implementation (oneDNN `impl_info_str`). */
  get implInfo(): string {
    const eng = this.engine;
    return (eng.kind === 'gpu' ? (this.impl as GpuRoutingImpl).describe?.(eng, this.problem) : (this.impl as RoutingImpl).describe?.(eng, this.problem)) ?? this.impl.name;
  }

  /** @internal verbose rendering of the descriptors. */
  mdsString(): string {
    const p = this.problem;
    const parts = [`src:${p.src}`, `topk_ids:${p.topkIds}`, `topk_weights:${p.topkWeights}`];
    if (p.correctionBias) parts.push(`correction_bias:${p.correctionBias}`);
    return parts.join(' ');
  }
}
