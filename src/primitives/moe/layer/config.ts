import { check, checkImpl } from '../../../common/status.js';
import { checkOptionKeys, optionKeys } from '../../../common/option_keys.js';
import type { DataType } from '../../../common/data_type.js';
import type { GluAlg, GluLayout } from '../../../attr/eltwise.js';
import { resolveGlu, type GluOptions } from '../../../attr/glu_options.js';
import { resolveShared, type ResolvedShared, type SharedExpertConfig } from './shared_expert.js';
import { MemoryDesc, plainDesc } from '../../../memory/desc.js';
import type { AccumulationMode } from '../../../attr/primitive_attr.js';

/** Scales of one weight tensor (`attr.setScales(ARG.WEIGHTS, mask, groups, dataType)` of its GEMM). */
export interface WeightScales {
  readonly mask: number;
  readonly groups?: readonly number[];
  readonly dataType?: DataType;
}

/** Routing options of the layer (moe.routing's, without topK). */
export interface LayerRouting {
  readonly scoring?: 'softmax' | 'sigmoid';
  readonly renormalize?: boolean;
  readonly renormalizeEps?: number;
  readonly routedScalingFactor?: number;
  readonly groupCount?: number;
  readonly kGroup?: number;
  readonly groupSelectMode?: 0 | 1;
  readonly correctionBias?: boolean;
}

/**
 * An MoE layer (MindIE `fused_moe`, vLLM `FusedMoE`): hidden `[T, K]` + router logits `[T, E]` +
 * `w13 [G, K, 2I]` + `w2 [G, I, K]` -> `[T, K]` = sum over each token's top-k experts of
 * `weight * (glu(hidden . w13[e] + b13[e]) . w2[e] + b2[e])`, plus an optional shared expert.
 */
export interface LayerConfig {
  /** Tokens T of this shape (a pd per shape, like every oneDNN pd; the workspace is sized for it). */
  readonly tokens: number;
  /** Hidden size K. */
  readonly hidden: number;
  /** Intermediate size I (w13 has 2I columns: gate and up, in `glu.layout`). */
  readonly intermediate: number;
  /** Experts E of the router. */
  readonly experts: number;
  readonly topK: number;
  /** Expert parallel: G experts on this rank, global ids mapped by `ARG.MOE_EXPERT_MAP` (default E, no map). */
  readonly localExperts?: number;
  /** Activations and output (default f32). */
  readonly dataType?: 'f32' | 'bf16' | 'f16';
  readonly routing?: LayerRouting;
  /** The GLU between the GEMMs (default swiglu, halves: w13 columns [0, I) gate, [I, 2I) up); the options of `moe.activation` and `glu_backward`. */
  readonly glu?: GluOptions;
  /** Weight descriptors `[G, K, 2I]` and `[G, I, K]`; default f32 `tag.any` (packed: reorder into `pd.queryMd('w13' | 'w2')`). */
  readonly weights?: { readonly w13: MemoryDesc; readonly w2: MemoryDesc };
  /**
   * Scales of low-precision weights (values at execution as `ARG.ATTR_SCALES | ARG.WEIGHTS` / `ARG.WEIGHTS_1`).
   * With 8-/4-bit `tag.any` weights the layer's `w13` / `w2` descriptors store them beside the panels
   * (`+q`): give them to the reorder (`ARG.ATTR_SCALES | ARG.WEIGHTS`) instead of the layer.
   */
  readonly weightScales?: { readonly w13?: WeightScales; readonly w2?: WeightScales };
  /** w13 bias `[G, 2I]` (`ARG.BIAS`) and w2 bias `[G, K]` (`ARG.MOE_W2_BIAS`), f32. */
  readonly bias?: boolean;
  /** `w8a8_dynamic` (MindIE): s8 weights with per-column scales, activations quantized per token before each GEMM. */
  readonly quant?: 'none' | 'w8a8_dynamic';
  /**
   * `s8`: dynamic int8 activations for weight-only s8 / u8 / s4 / u4 weights (rfcs/0006, ONNX Runtime
   * MatMulNBits accuracy_level 4): both GEMMs get `attr.setDynamicQuantization(ARG.SRC, dt.s8)`, so each
   * row is quantized to int8 inside its GEMM and multiplied on the integer path. The weights, their
   * layout (`+q`) and the reorder stay those of the exact weight-only layer. Default `none`.
   */
  readonly dynamicQuantization?: 'none' | 's8';
  /**
   * oneDNN accumulation_mode of the routed experts' two GEMMs, rfcs/0007: `strict` (default, the
   * kernels' fixed order), `relaxed` / `any` (reordered summation allowed: weight-only s8 / u8 / s4 / u4 /
   * f4_e2m1 weights then run their decode tiles on the f32_gemm_1x16r kernels). `s32` / `f32` / `f16` are not
   * implemented.
   */
  readonly accumulationMode?: AccumulationMode;
  /**
   * One shared expert applied to every token (`ARG.MOE_SHARED_W13 [K, 2Is]` or gate / up projections,
   * `ARG.MOE_SHARED_W2 [Is, K]`): descriptors, its own GLU, Qwen2-MoE's sigmoid gate (`SharedExpertConfig`).
   */
  readonly sharedExpert?: SharedExpertConfig;
  /**
   * Where the routing weight applies: `output` (default: the expert's output is weighted, Mixtral,
   * DeepSeek, Qwen) or `input` (Llama-4: the expert runs on `x · w`, so the weight passes through the
   * GLU; any top-k). Input weighting scales the rows of the permuted copy, so GEMM1 runs `permute`
   * (the default then; `gather` is refused); not with w8a8_dynamic or forward_training.
   */
  readonly routingWeight?: 'output' | 'input';
  /** GEMM1 reads hidden rows through the token index (`gather`, default) or from a permuted copy (`permute`). */
  readonly gemm1?: 'gather' | 'permute';
  /** GEMM2 scatters weighted rows and a reduce sums the slots (`fused_scatter`, default), or writes routed rows that a weight-and-reduce combines. */
  readonly combine?: 'fused_scatter' | 'weight_and_reduce';
  /**
   * `forward_inference` (default) or `forward_training` (oneDNN prop_kind): training keeps what the
   * backward (`moe.layer.BackwardPrimitiveDesc`) reads — the permuted hidden rows, GEMM1's output
   * before the GLU, the GLU output and the unweighted expert outputs — so it runs GEMM1 on the
   * permuted copy, the GLU as a stage of its own and GEMM2 into routed rows with a weight-and-reduce
   * (`gemm1` / `combine` must be left unset or set to `permute` / `weight_and_reduce`). f32 only, plain
   * `abc` weights (the default then), no quantization, no shared expert.
   */
  readonly propKind?: 'forward_inference' | 'forward_training';
}

export interface ResolvedConfig extends Required<Omit<LayerConfig, 'weights' | 'weightScales' | 'sharedExpert' | 'glu' | 'routing'>> {
  readonly routing: LayerRouting;
  readonly glu: { readonly alg: GluAlg; readonly layout: GluLayout; readonly alpha: number | undefined; readonly limit: number | undefined };
  readonly weights: { readonly w13: MemoryDesc; readonly w2: MemoryDesc };
  readonly weightScales: { readonly w13?: WeightScales; readonly w2?: WeightScales };
  readonly sharedExpert: ResolvedShared | undefined;
}

type LayerGlu = NonNullable<LayerConfig['glu']>;
type LayerWeights = NonNullable<LayerConfig['weights']>;
type LayerWeightScales = NonNullable<LayerConfig['weightScales']>;
type LayerSharedExpert = NonNullable<LayerConfig['sharedExpert']>;

/** @internal the keys of the layer's options objects (checked for typos). */
export const LAYER_OPTION_KEYS = {
  config: optionKeys<LayerConfig>({
    tokens: true, hidden: true, intermediate: true, experts: true, topK: true, localExperts: true, dataType: true, routing: true, glu: true,
    weights: true, weightScales: true, bias: true, quant: true, dynamicQuantization: true, accumulationMode: true, sharedExpert: true, gemm1: true, combine: true, propKind: true, routingWeight: true,
  }),
  routing: optionKeys<LayerRouting>({ scoring: true, renormalize: true, renormalizeEps: true, routedScalingFactor: true, groupCount: true, kGroup: true, groupSelectMode: true, correctionBias: true }),
  glu: optionKeys<LayerGlu>({ alg: true, layout: true, alpha: true, limit: true }),
  weights: optionKeys<LayerWeights>({ w13: true, w2: true }),
  weightScales: optionKeys<LayerWeightScales>({ w13: true, w2: true }),
  scales: optionKeys<WeightScales>({ mask: true, groups: true, dataType: true }),
  sharedExpert: optionKeys<LayerSharedExpert>({ intermediate: true, gate: true, glu: true, weights: true, weightScales: true }),
} as const;

/** Unknown keys anywhere in a layer config (`routing: { renormalise: true }`) are refused, naming where. */
export function checkLayerKeys(where: string, c: LayerConfig, configKeys: readonly string[] = LAYER_OPTION_KEYS.config): void {
  const k = LAYER_OPTION_KEYS;
  checkOptionKeys(where, c, configKeys);
  checkOptionKeys(`${where}: routing`, c.routing, k.routing);
  checkOptionKeys(`${where}: glu`, c.glu, k.glu);
  checkOptionKeys(`${where}: weights`, c.weights, k.weights);
  checkOptionKeys(`${where}: weightScales`, c.weightScales, k.weightScales);
  checkOptionKeys(`${where}: weightScales.w13`, c.weightScales?.w13, k.scales);
  checkOptionKeys(`${where}: weightScales.w2`, c.weightScales?.w2, k.scales);
  checkOptionKeys(`${where}: sharedExpert`, c.sharedExpert, k.sharedExpert);
}

/** Tokens may be 0: an empty batch is a no-op (as routing). */
const count = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 0x7fffffff;
const posInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= 0x7fffffff;

function anyDesc(dims: number[], dataType: DataType): MemoryDesc {
  return plainDesc(dims, dataType, 'any');
}

/** Validation rules of the layer's configuration, one per line; returns the config with defaults. */
export function resolveConfig(c: LayerConfig): ResolvedConfig {
  check(c !== null && typeof c === 'object', 'moe.layer: config must be an object { tokens, hidden, intermediate, experts, topK, ... }');
  checkLayerKeys('moe.layer', c);
  check(count(c.tokens), `moe.layer: tokens must be a non-negative integer, got ${String(c.tokens)}`);
  check(posInt(c.hidden), `moe.layer: hidden must be a positive integer, got ${String(c.hidden)}`);
  check(posInt(c.intermediate), `moe.layer: intermediate must be a positive integer, got ${String(c.intermediate)}`);
  check(posInt(c.experts), `moe.layer: experts must be a positive integer, got ${String(c.experts)}`);
  check(posInt(c.topK) && c.topK <= c.experts, `moe.layer: topK must be an integer in [1, experts = ${c.experts}], got ${String(c.topK)}`);
  const G = c.localExperts ?? c.experts;
  check(posInt(G) && G <= c.experts, `moe.layer: localExperts must be an integer in [1, experts = ${c.experts}], got ${String(c.localExperts)}`);
  const dtype = c.dataType ?? 'f32';
  checkImpl(['f32', 'bf16', 'f16'].includes(dtype), `moe.layer: dataType ${String(dtype)} is not supported (f32, bf16, f16)`);
  const glu = c.glu ?? { alg: 'glu_swiglu' as const };
  const { layout } = resolveGlu('moe.layer', glu);
  check(layout !== 'blocks32' || c.intermediate % 32 === 0, `moe.layer: glu layout blocks32 needs intermediate % 32 == 0, got ${c.intermediate}`);
  const quant = c.quant ?? 'none';
  check(quant === 'none' || quant === 'w8a8_dynamic', `moe.layer: quant must be 'none' or 'w8a8_dynamic', got ${String(quant)}`);
  const dynamicQuantization = c.dynamicQuantization ?? 'none';
  check(dynamicQuantization === 'none' || dynamicQuantization === 's8', `moe.layer: dynamicQuantization must be 'none' or 's8', got ${String(dynamicQuantization)}`);
  const accumulationMode = c.accumulationMode ?? 'strict';
  check(['strict', 'relaxed', 'any', 's32', 'f32', 'f16'].includes(accumulationMode), `moe.layer: accumulationMode must be one of strict, relaxed, any, s32, f32, f16 (oneDNN accumulation_mode), got ${String(accumulationMode)}`);
  checkImpl(['strict', 'relaxed', 'any'].includes(accumulationMode), `moe.layer: accumulationMode '${accumulationMode}' (an accumulator data type) is not implemented; use strict, relaxed or any`);
  const propKind = c.propKind ?? 'forward_inference';
  check(propKind === 'forward_inference' || propKind === 'forward_training', `moe.layer: propKind must be 'forward_inference' or 'forward_training', got ${String(propKind)}`);
  const training = propKind === 'forward_training';
  // Before the quantization rules: their messages would name weights a training layer cannot take.
  checkImpl(!training || (quant === 'none' && dynamicQuantization === 'none'), 'moe.layer: forward_training does not support quant (no gradient through quantization here)');
  const wdt: DataType = quant === 'w8a8_dynamic' ? 's8' : 'f32';
  const K = c.hidden, I = c.intermediate;
  const defaultWeights = (dims: number[]): MemoryDesc => (training ? plainDesc(dims, 'f32', 'abc') : anyDesc(dims, wdt));
  const weights = c.weights ?? { w13: defaultWeights([G, K, 2 * I]), w2: defaultWeights([G, I, K]) };
  check(weights.w13 instanceof MemoryDesc && weights.w2 instanceof MemoryDesc, 'moe.layer: weights.w13 and weights.w2 must be memory descriptors');
  check(weights.w13.dims.join() === [G, K, 2 * I].join(), `moe.layer: w13 dims [${weights.w13.dims.join(',')}] must be [local experts, hidden, 2 x intermediate] = [${G},${K},${2 * I}]`);
  check(weights.w2.dims.join() === [G, I, K].join(), `moe.layer: w2 dims [${weights.w2.dims.join(',')}] must be [local experts, intermediate, hidden] = [${G},${I},${K}]`);
  check(quant !== 'w8a8_dynamic' || (weights.w13.dataType === 's8' && weights.w2.dataType === 's8'), 'moe.layer: w8a8_dynamic needs s8 w13 and w2');
  check(quant !== 'w8a8_dynamic' || (c.weightScales?.w13 !== undefined && c.weightScales?.w2 !== undefined), 'moe.layer: w8a8_dynamic needs weightScales for w13 and w2 (e.g. { mask: 5 }: per expert and column)');
  if (dynamicQuantization === 's8') {
    check(quant === 'none', "moe.layer: dynamicQuantization 's8' is for weight-only weights; quant 'w8a8_dynamic' already quantizes the activations");
    for (const [name, md] of [['w13', weights.w13], ['w2', weights.w2]] as const)
      checkImpl(['s8', 'u8', 's4', 'u4', 'f4_e2m1'].includes(md.dataType), `moe.layer: dynamicQuantization 's8' needs s8, u8, s4, u4 or f4_e2m1 ${name} (weight-only int or fp4 weights), got ${md.dataType}`);
  }
  const routingWeight = c.routingWeight ?? 'output';
  check(routingWeight === 'output' || routingWeight === 'input', `moe.layer: routingWeight must be 'output' or 'input', got ${String(routingWeight)}`);
  const inputWeighted = routingWeight === 'input';
  check(!inputWeighted || c.gemm1 !== 'gather', "moe.layer: routingWeight 'input' scales the rows of the permuted copy: leave gemm1 unset or 'permute'");
  checkImpl(!inputWeighted || quant === 'none', "moe.layer: routingWeight 'input' with w8a8_dynamic is not supported (the activations are quantized per token before the per-slot weight is known)");
  checkImpl(!inputWeighted || !training, "moe.layer: routingWeight 'input' with forward_training is not supported (no gradient through the input weighting here)");
  const gemm1 = c.gemm1 ?? (inputWeighted ? 'permute' : 'gather');
  check(gemm1 === 'gather' || gemm1 === 'permute', `moe.layer: gemm1 must be 'gather' or 'permute', got ${String(gemm1)}`);
  const combine = c.combine ?? 'fused_scatter';
  check(combine === 'fused_scatter' || combine === 'weight_and_reduce', `moe.layer: combine must be 'fused_scatter' or 'weight_and_reduce', got ${String(combine)}`);
  const sharedExpert = c.sharedExpert === undefined ? undefined : resolveShared(c.sharedExpert, c.hidden, glu);
  check(c.tokens * c.topK <= 0x7fffffff, 'moe.layer: tokens x topK must fit int32');
  if (training) {
    checkImpl(dtype === 'f32', `moe.layer: forward_training supports dataType f32, got ${dtype}`);
    checkImpl(quant === 'none' && dynamicQuantization === 'none', 'moe.layer: forward_training does not support quant (no gradient through quantization here)');
    checkImpl(c.sharedExpert === undefined, 'moe.layer: forward_training does not support a shared expert (train it as a dense layer beside the MoE layer)');
    checkImpl(c.weightScales === undefined, 'moe.layer: forward_training does not support weight scales');
    for (const [name, md] of [['w13', weights.w13], ['w2', weights.w2]] as const) {
      checkImpl(md.dataType === 'f32' && md.format === 'blocked' && md.strides.join() === [md.dims[1] * md.dims[2], md.dims[2], 1].join(), `moe.layer: forward_training needs plain f32 abc ${name} (the backward reads it transposed), got ${md}`);
    }
    check(c.gemm1 === undefined || c.gemm1 === 'permute', "moe.layer: forward_training runs GEMM1 on the permuted copy (the backward's weight gradient reads it): leave gemm1 unset or 'permute'");
    check(c.combine === undefined || c.combine === 'weight_and_reduce', "moe.layer: forward_training keeps the unweighted expert outputs (the routing weights' gradient reads them): leave combine unset or 'weight_and_reduce'");
  }
  return {
    tokens: c.tokens, hidden: K, intermediate: I, experts: c.experts, topK: c.topK, localExperts: G, dataType: dtype,
    routing: c.routing ?? {}, glu: { alg: glu.alg, layout, alpha: glu.alpha, limit: glu.limit }, weights,
    weightScales: c.weightScales ?? {}, bias: c.bias ?? false, quant, dynamicQuantization, accumulationMode, sharedExpert,
    gemm1: training ? 'permute' : gemm1, combine: training ? 'weight_and_reduce' : combine, propKind, routingWeight,
  };
}
