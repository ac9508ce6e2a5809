/**
 * The shared expert of an MoE layer (DeepSeek, Qwen2-MoE, Llama-4): dense GEMMs on every token, summed
 * into the layer's output. Its weights take descriptors like the routed ones (strides, `tag.any`
 * packing, bf16 and quantized types with their scales), it may have its own GLU, its gate / up
 * projections may be one `[K, 2Is]` tensor or two `[K, Is]` tensors (the checkpoint layout), and
 * Qwen2-MoE's `shared_expert_gate` scales its output by `sigmoid(x · w_gate)`.
 */
import { check, checkImpl } from '../../../common/status.js';
import type { DataType } from '../../../common/data_type.js';
import type { EltwiseAlg } from '../../../attr/eltwise.js';
import { resolveGlu, type GluOptions, type ResolvedGlu } from '../../../attr/glu_options.js';
import { PrimitiveAttr } from '../../../attr/primitive_attr.js';
import { MemoryDesc, plainDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import * as matmul from '../../matmul/index.js';
import { ARG } from '../../args.js';

/** Scales of one quantized weight tensor (`attr.setScales(ARG.WEIGHTS, mask, groups, dataType)` of its GEMM). */
export interface SharedWeightScales {
  readonly mask: number;
  readonly groups?: readonly number[];
  readonly dataType?: DataType;
}

/** `sharedExpert` of the layer config: every accepted key is listed here. */
export interface SharedExpertConfig {
  /** Intermediate size Is. */
  readonly intermediate: number;
  /**
   * Qwen2-MoE's gated shared expert: `out += sigmoid(x · w_gate) · shared(x)`, `w_gate` `[K, 1]` f32 at
   * `ARG.MOE_SHARED_EXPERT_GATE` (descriptor `pd.queryMd('shared_expert_gate')`). Default false.
   */
  readonly gate?: boolean;
  /** The shared expert's own GLU (same options as the layer's `glu`); default the routed experts' GLU. */
  readonly glu?: GluOptions;
  /**
   * Weight descriptors: `w13` `[K, 2Is]` (gate and up in the GLU's layout, `ARG.MOE_SHARED_W13`), or
   * `gate` and `up` `[K, Is]` each (`ARG.MOE_SHARED_GATE_PROJ`, `ARG.MOE_SHARED_UP_PROJ`), and `w2`
   * `[Is, K]` (`ARG.MOE_SHARED_W2`). Any strides and data types a matmul takes; `tag.any` picks the
   * packed layout: reorder into `pd.queryMd('shared_w13' | 'shared_gate' | 'shared_up' | 'shared_w2')`.
   * Default f32 `ab` w13 and w2.
   */
  readonly weights?: { readonly w13?: MemoryDesc; readonly gate?: MemoryDesc; readonly up?: MemoryDesc; readonly w2?: MemoryDesc };
  /** Scales of quantized weights, values at execution as `ARG.ATTR_SCALES | ARG.MOE_SHARED_*` (none for `+q` packed weights: the reorder stores them). */
  readonly weightScales?: { readonly w13?: SharedWeightScales; readonly gate?: SharedWeightScales; readonly up?: SharedWeightScales; readonly w2?: SharedWeightScales };
}

export interface ResolvedShared {
  readonly intermediate: number;
  readonly gate: boolean;
  readonly glu: ResolvedGlu;
  /** Separate gate / up projections (two GEMMs) instead of one w13 with a fused GLU. */
  readonly split: boolean;
  readonly weights: { readonly w13?: MemoryDesc; readonly gate?: MemoryDesc; readonly up?: MemoryDesc; readonly w2: MemoryDesc };
  readonly weightScales: NonNullable<SharedExpertConfig['weightScales']>;
}

const FN = 'moe.layer: sharedExpert';

/** The eltwise that a separate gate projection ends with: act(gate); the up GEMM then multiplies it in. */
function gateEltwise(glu: ResolvedGlu): { alg: EltwiseAlg; alpha: number } {
  if (glu.alg === 'glu_swiglu') return { alg: 'eltwise_swish', alpha: glu.alpha };
  if (glu.alg === 'glu_geglu_erf') return { alg: 'eltwise_gelu_erf', alpha: 0 };
  if (glu.alg === 'glu_geglu_tanh') return { alg: 'eltwise_gelu_tanh', alpha: 0 };
  // swiglu_oai clamps up and adds 1 to it: not act(gate) * up.
  checkImpl(false, `${FN}: separate gate / up projections support glu_swiglu, glu_geglu_erf and glu_geglu_tanh, not ${glu.alg} (it clamps up and adds 1: give one w13 tensor)`);
  return { alg: 'eltwise_swish', alpha: 1 };
}

const posInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= 0x7fffffff;

/** Validation rules of `sharedExpert`, one per line. */
export function resolveShared(s: SharedExpertConfig, K: number, routedGlu: GluOptions): ResolvedShared {
  check(s !== null && typeof s === 'object', `${FN} must be an object { intermediate, gate, glu, weights, weightScales }`);
  check(posInt(s.intermediate), `${FN}.intermediate must be a positive integer`);
  const Is = s.intermediate;
  const gate = s.gate ?? false;
  check(typeof gate === 'boolean', `${FN}.gate must be a boolean, got ${String(gate)}`);
  const glu = resolveGlu(FN, s.glu ?? routedGlu);
  const w = s.weights ?? {};
  check(w !== null && typeof w === 'object', `${FN}.weights must be an object { w13 | gate + up, w2 }`);
  const split = w.gate !== undefined || w.up !== undefined;
  check(!split || w.w13 === undefined, `${FN}.weights: give w13 [K, 2Is] or gate and up [K, Is], not both`);
  check(!split || (w.gate !== undefined && w.up !== undefined), `${FN}.weights: separate projections need both gate and up [K, Is]`);
  const want: [string, MemoryDesc | undefined, number[]][] = split
    ? [['gate', w.gate, [K, Is]], ['up', w.up, [K, Is]], ['w2', w.w2, [Is, K]]]
    : [['w13', w.w13, [K, 2 * Is]], ['w2', w.w2, [Is, K]]];
  for (const [name, md, dims] of want) {
    check(md === undefined || md instanceof MemoryDesc, `${FN}.weights.${name} must be a memory descriptor`);
    check(md === undefined || md.dims.join() === dims.join(), `${FN}.weights.${name} dims [${md?.dims.join(',')}] must be [${dims.join(',')}]`);
  }
  check(glu.layout !== 'blocks32' || split || Is % 32 === 0, `${FN}: glu layout blocks32 needs intermediate % 32 == 0, got ${Is}`);
  if (split) gateEltwise(glu);
  const ws = s.weightScales ?? {};
  check(ws !== null && typeof ws === 'object', `${FN}.weightScales must be an object`);
  check(split ? ws.w13 === undefined : ws.gate === undefined && ws.up === undefined, `${FN}.weightScales: name the tensors the shared expert has (${split ? 'gate, up' : 'w13'}, w2)`);
  return {
    intermediate: Is, gate, glu, split,
    weights: split
      ? { gate: w.gate, up: w.up, w2: w.w2 ?? plainDesc([Is, K], 'f32', 'ab') }
      : { w13: w.w13 ?? plainDesc([K, 2 * Is], 'f32', 'ab'), w2: w.w2 ?? plainDesc([Is, K], 'f32', 'ab') },
    weightScales: ws,
  };
}

function withScales(attr: PrimitiveAttr, s: SharedWeightScales | undefined): PrimitiveAttr {
  if (s) attr.setScales(ARG.WEIGHTS, s.mask, s.groups ?? [], s.dataType ?? 'f32');
  return attr;
}

/** The pds of the shared expert's GEMMs: its own workspace tensors are their dsts. */
export interface SharedPds {
  /** sigmoid(x · w_gate) `[T, 1]` f32 (gate only). */
  readonly expertGate: matmul.PrimitiveDesc | undefined;
  /** act(x · gate_proj) `[T, Is]` f32 (split only). */
  readonly gateProj: matmul.PrimitiveDesc | undefined;
  /** x · w13 with the fused GLU, or x · up_proj times the gate projection: `[T, Is]`. */
  readonly gemm1: matmul.PrimitiveDesc;
  /** act · w2 (times the expert gate) summed into the layer's dst. */
  readonly gemm2: matmul.PrimitiveDesc;
}

export function sharedPds(engine: Engine | GpuEngine, r: ResolvedShared, hiddenMd: MemoryDesc, dstMd: MemoryDesc, adt: DataType): SharedPds {
  const [T, K] = hiddenMd.dims, Is = r.intermediate;
  const actMd = plainDesc([T, Is], adt, 'ab');
  let expertGate: matmul.PrimitiveDesc | undefined;
  if (r.gate) {
    const ag = new PrimitiveAttr();
    ag.postOps.appendEltwise('eltwise_logistic');
    expertGate = new matmul.PrimitiveDesc(engine, hiddenMd, plainDesc([K, 1], 'f32', 'ab'), plainDesc([T, 1], 'f32', 'ab'), ag);
  }
  let gateProj: matmul.PrimitiveDesc | undefined;
  let gemm1: matmul.PrimitiveDesc;
  if (r.split) {
    const e = gateEltwise(r.glu);
    const ap = withScales(new PrimitiveAttr(), r.weightScales.gate);
    ap.postOps.appendEltwise(e.alg, e.alpha);
    const gateMd = plainDesc([T, Is], 'f32', 'ab');
    gateProj = new matmul.PrimitiveDesc(engine, hiddenMd, r.weights.gate!, gateMd, ap);
    const au = withScales(new PrimitiveAttr(), r.weightScales.up);
    au.postOps.appendBinary('binary_mul', gateMd);
    gemm1 = new matmul.PrimitiveDesc(engine, hiddenMd, r.weights.up!, actMd, au);
  } else {
    const a1 = withScales(new PrimitiveAttr(), r.weightScales.w13);
    a1.postOps.appendGlu(r.glu.alg, r.glu.layout, r.glu.alg === 'glu_swiglu' || r.glu.alg === 'glu_swiglu_oai' ? r.glu.alpha : undefined, r.glu.alg === 'glu_swiglu_oai' ? r.glu.limit : undefined);
    gemm1 = new matmul.PrimitiveDesc(engine, hiddenMd, r.weights.w13!, actMd, a1);
  }
  const a2 = withScales(new PrimitiveAttr(), r.weightScales.w2);
  if (r.gate) a2.postOps.appendBinary('binary_mul', plainDesc([T, 1], 'f32', 'ab'));
  a2.postOps.appendSum(1);
  const gemm2 = new matmul.PrimitiveDesc(engine, actMd, r.weights.w2, dstMd, a2);
  return { expertGate, gateProj, gemm1, gemm2 };
}
