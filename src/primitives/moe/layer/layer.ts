import { DnnlError, check } from '../../../common/status.js';
import { created } from '../../../runtime/live_engine.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { RUNTIME_DIM_VAL } from '../../../common/dims.js';
import { MemoryDesc, plainDesc } from '../../../memory/desc.js';
import { groupedDesc } from '../../../memory/grouped_desc.js';
import { Memory } from '../../../memory/memory.js';
import { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import { PrimitiveAttr } from '../../../attr/primitive_attr.js';
import type { Engine } from '../../../runtime/engine.js';
import type { Stream } from '../../../runtime/stream.js';
import { ARG, argName } from '../../args.js';
import * as matmul from '../../matmul/index.js';
import * as dynamic_quant from '../../dynamic_quant/index.js';
import * as routing from '../routing/index.js';
import * as dispatch from '../dispatch/index.js';
import * as combine from '../combine/index.js';
import * as activation from '../activation/index.js';
import { Lifetime } from '../../../runtime/lifetime.js';
import { resolveConfig, type LayerConfig, type ResolvedConfig, type WeightScales } from './config.js';
import { layerExecuteError, layerPdError } from './layer_errors.js';
import { enqueueInputWeighting } from './input_weighting.js';
import { sharedPds } from './shared_expert.js';
import { enqueueInputWeightingGpu } from './input_weighting_gpu.js';
import { gpuLayerTuning, ROUTE_DISPATCH_IMPL, RouteDispatchGpu, routeDispatchRefusal } from './route_dispatch_gpu.js';
import type { RoutingArgs } from '../routing/impl.js';
import type { DispatchArgs } from '../dispatch/impls.js';

/** The stages of a layer, in order; each is also a primitive of its own (`layer.stage(name)`). */
export type StageName = 'route' | 'quantize_hidden' | 'dispatch' | 'weight_input' | 'gemm1' | 'activation' | 'quantize_act' | 'gemm2' | 'combine'
  | 'shared_gate' | 'shared_gate_proj' | 'shared_gemm1' | 'shared_gemm2';

/** The memory kind of an engine kind: `Memory` on a cpu engine, `GpuMemory` (device buffers) on a gpu engine. */
export type MemoryOf<E extends Engine | GpuEngine> = E extends GpuEngine ? GpuMemory : Memory;

export type LayerArgs<M extends Memory | GpuMemory = Memory> = Readonly<Record<number, M | undefined>>;

/** One stage: what it runs, on the layer's arguments and workspace. */
export interface Stage<M extends Memory | GpuMemory = Memory> {
  readonly name: StageName;
  /** Implementation of the stage's primitive (pd.implInfo). */
  readonly implInfo: string;
  execute(strm: Stream, args: LayerArgs<M>): void;
}

/**
 * The workspace a layer needs for its shape (vLLM `workspace_shapes`): allocated once when the
 * primitive is created, reused by every execution, given back by `destroy()`.
 * R = T x topK routed rows (the grouped buffers' capacity).
 */
export interface Workspace<M extends Memory | GpuMemory = Memory> {
  readonly topkIds: M;
  readonly topkWeights: M;
  readonly tokenIndex: M;
  readonly tokenKs: M;
  readonly rowOf: M;
  /** `[R, I]` GLU output, grouped by expert; its offsets buffer is the one dispatch writes. */
  readonly act: M;
  /** forward_training: `[R, 2I]` GEMM1 output before the GLU (gate and up), grouped by expert. */
  readonly h13: M | undefined;
  /** `[R, K]` permuted hidden (gemm1: 'permute'). */
  readonly permuted: M | undefined;
  /** `[T * topK, K]` weighted expert outputs in token order (fused scatter), or `[R, K]` routed (weight_and_reduce). */
  readonly expertOut: M;
  /** w8a8: quantized hidden `[T, K]` s8 + scales `[T]`, quantized act `[R, I]` s8 + scales `[R]`. */
  readonly hiddenQ: M | undefined;
  readonly hiddenScales: M | undefined;
  readonly actQ: M | undefined;
  readonly actScales: M | undefined;
  /** Shared expert GLU output `[T, Is]`. */
  readonly sharedAct: M | undefined;
  /** Shared expert with separate projections: act(x · gate_proj) `[T, Is]` f32. */
  readonly sharedGateProj: M | undefined;
  /** Gated shared expert (Qwen2-MoE): sigmoid(x · w_gate) `[T, 1]` f32. */
  readonly sharedGate: M | undefined;
}

type AnyMemory = Memory | GpuMemory;
type StageArgsFn = (args: LayerArgs<AnyMemory>, ws: Workspace<AnyMemory>) => Record<number, AnyMemory | undefined>;

interface StagePlan {
  readonly name: StageName;
  readonly pd: { readonly implInfo: string };
  readonly prim: { execute(strm: Stream, args: Readonly<Record<number, AnyMemory | undefined>>): void; destroy(): void };
  readonly args: StageArgsFn;
}

/** A memory object on either engine kind (the overloads of Memory.create pick by the engine's type). */
function createOn(md: MemoryDesc, eng: Engine | GpuEngine, handles?: readonly (number | GPUBuffer | undefined)[]): AnyMemory {
  return eng.kind === 'gpu' ? Memory.create(md, eng, handles as (GPUBuffer | undefined)[] | undefined) : Memory.create(md, eng, handles as (number | undefined)[] | undefined);
}

/** Creates a stage's pd; a refusal names the layer, the stage and what it computes. */
function stagePd<P>(stage: string, what: string, make: () => P): P {
  try {
    return make();
  } catch (e) {
    throw layerPdError(e, stage, what);
  }
}

function scalesAttr(attr: PrimitiveAttr, arg: number, s: WeightScales | undefined): PrimitiveAttr {
  if (s) attr.setScales(arg, s.mask, s.groups ?? [], s.dataType ?? 'f32');
  return attr;
}

/**
 * MoE layer primitive descriptor: `new moe.layer.PrimitiveDesc(eng, config)` validates the
 * configuration and creates the pds of every stage (route -> [quantize] -> dispatch -> GEMM1 with
 * the fused GLU -> [quantize] -> GEMM2 with scatter + routing weight -> combine -> [shared expert]).
 * Arguments at execution: `ARG.SRC` hidden `[T, K]`, `ARG.MOE_ROUTER_LOGITS` `[T, E]`, `ARG.WEIGHTS`
 * w13, `ARG.WEIGHTS_1` w2, `ARG.DST` `[T, K]`; optional `ARG.BIAS` / `ARG.MOE_W2_BIAS`,
 * `ARG.ATTR_SCALES | ARG.WEIGHTS / WEIGHTS_1`, `ARG.MOE_EXPERT_MAP`, `ARG.MOE_CORRECTION_BIAS`,
 * `ARG.MOE_SHARED_W13 / W2`. See rfcs/0004-moe-layer.md.
 */
export class PrimitiveDesc<E extends Engine | GpuEngine = Engine> {
  readonly engine: E;
  readonly config: ResolvedConfig;
  /** @internal */ readonly routing: routing.PrimitiveDesc;
  /** @internal */ readonly dispatch: dispatch.PrimitiveDesc;
  /** @internal */ readonly gemm1: matmul.PrimitiveDesc;
  /** @internal forward_training: the GLU as a stage of its own. */ readonly activation: activation.PrimitiveDesc | undefined;
  /** @internal */ readonly gemm2: matmul.PrimitiveDesc;
  /** @internal */ readonly combine: combine.PrimitiveDesc;
  /** @internal */ readonly quantHidden: dynamic_quant.PrimitiveDesc | undefined;
  /** @internal */ readonly quantAct: dynamic_quant.PrimitiveDesc | undefined;
  /** @internal */ readonly shared1: matmul.PrimitiveDesc | undefined;
  /** @internal */ readonly shared2: matmul.PrimitiveDesc | undefined;
  /** @internal shared expert: the gate projection (separate gate / up) and Qwen2-MoE's sigmoid gate. */ readonly sharedGateProj: matmul.PrimitiveDesc | undefined;
  /** @internal */ readonly sharedGate: matmul.PrimitiveDesc | undefined;
  /** @internal descriptors of the layer's arguments and workspace. */
  readonly mds: Readonly<Record<string, MemoryDesc>>;

  constructor(engine: E, config: LayerConfig) {
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.layer: engine is required');
    const c = resolveConfig(config);
    this.engine = engine;
    this.config = c;
    const { tokens: T, hidden: K, intermediate: I, experts: E, topK: k, localExperts: G, dataType: adt } = c;
    const R = T * k;
    const w8a8 = c.quant === 'w8a8_dynamic';
    const hiddenMd = plainDesc([T, K], adt, 'ab');
    const logitsMd = plainDesc([T, E], adt, 'ab');
    this.routing = stagePd('route', 'router logits -> top-k', () => new routing.PrimitiveDesc(engine, logitsMd, { topK: k, ...c.routing }));
    const permute = c.gemm1 === 'permute';
    this.dispatch = stagePd('dispatch', 'top-k ids -> routed rows', () => new dispatch.PrimitiveDesc(engine, {
      tokens: T, topK: k, experts: E, localExperts: G, expertMap: G !== E, hidden: permute ? hiddenMd : undefined,
    }));
    // GEMM1: hidden (gathered, or the permuted copy) x w13 -> act [R, I] grouped, GLU fused.
    const actMd = groupedDesc([R, I], adt, G, [RUNTIME_DIM_VAL, I]);
    const training = c.propKind === 'forward_training';
    // Training keeps GEMM1's output before the GLU: the GLU then runs as a stage of its own.
    const h13Md = training ? groupedDesc([R, 2 * I], 'f32', G, [RUNTIME_DIM_VAL, 2 * I]) : undefined;
    this.activation = h13Md ? stagePd('activation', 'glu', () => new activation.PrimitiveDesc(engine, h13Md, actMd, c.glu)) : undefined;
    const a1 = new PrimitiveAttr();
    if (!training) a1.postOps.appendGlu(c.glu.alg, c.glu.layout, c.glu.alpha, c.glu.limit);
    scalesAttr(a1, ARG.WEIGHTS, c.weightScales.w13);
    if (c.dynamicQuantization === 's8') a1.setDynamicQuantization(ARG.SRC, 's8');
    a1.setAccumulationMode(c.accumulationMode);
    let src1Md: MemoryDesc;
    if (w8a8) {
      this.quantHidden = stagePd('quantize_hidden', 'hidden -> s8', () => new dynamic_quant.PrimitiveDesc(engine, hiddenMd, plainDesc([T, K], 's8', 'ab')));
      a1.setScales(ARG.SRC, 1);
    }
    if (permute) {
      src1Md = groupedDesc([R, K], w8a8 ? 's8' : adt, G, [RUNTIME_DIM_VAL, K]);
      checkPermuteQuant(w8a8);
    } else {
      src1Md = plainDesc([T, K], w8a8 ? 's8' : adt, 'ab');
      a1.setGather();
    }
    const b13Md = c.bias ? plainDesc([G, 2 * I], 'f32', 'ab') : undefined;
    const dst1Md = h13Md ?? actMd;
    this.gemm1 = stagePd('gemm1', 'hidden x w13 (its matmul weights) + w13 bias', () => (b13Md ? new matmul.PrimitiveDesc(engine, src1Md, c.weights.w13, b13Md, dst1Md, a1) : new matmul.PrimitiveDesc(engine, src1Md, c.weights.w13, dst1Md, a1)));
    // GEMM2: act x w2 -> weighted rows scattered to [T*k, K], or routed rows [R, K].
    let src2Md: MemoryDesc = actMd;
    const a2 = new PrimitiveAttr();
    scalesAttr(a2, ARG.WEIGHTS, c.weightScales.w2);
    if (c.dynamicQuantization === 's8') a2.setDynamicQuantization(ARG.SRC, 's8');
    a2.setAccumulationMode(c.accumulationMode);
    if (w8a8) {
      this.quantAct = stagePd('quantize_act', 'act -> s8', () => new dynamic_quant.PrimitiveDesc(engine, actMd, plainDesc([R, I], 's8', 'ab')));
      src2Md = groupedDesc([R, I], 's8', G, [RUNTIME_DIM_VAL, I]);
      a2.setScales(ARG.SRC, 1);
    }
    const scatter = c.combine === 'fused_scatter';
    const outMd = scatter ? plainDesc([T * k, K], 'f32', 'ab') : groupedDesc([R, K], 'f32', G, [RUNTIME_DIM_VAL, K]);
    const inputWeighted = c.routingWeight === 'input';
    if (scatter) {
      a2.setScatter(k);
      if (!inputWeighted) a2.postOps.appendBinary('binary_mul', plainDesc([T * k, 1], 'f32', 'ab'));
    }
    const b2Md = c.bias ? plainDesc([G, K], 'f32', 'ab') : undefined;
    this.gemm2 = stagePd('gemm2', 'act x w2 (its matmul weights) + w2 bias', () => (b2Md ? new matmul.PrimitiveDesc(engine, src2Md, c.weights.w2, b2Md, outMd, a2) : new matmul.PrimitiveDesc(engine, src2Md, c.weights.w2, outMd, a2)));
    const dstMd = plainDesc([T, K], adt, 'ab');
    this.combine = stagePd('combine', 'expert rows -> dst', () => new combine.PrimitiveDesc(engine, { tokens: T, topK: k, input: scatter ? 'scattered' : 'routed', src: outMd, dst: dstMd, weighted: !scatter && !inputWeighted }));
    // Shared expert: dense GEMMs on every token, the second one summed into the output.
    if (c.sharedExpert) {
      const sp = sharedPds(engine, c.sharedExpert, hiddenMd, dstMd, adt);
      this.shared1 = sp.gemm1;
      this.shared2 = sp.gemm2;
      this.sharedGateProj = sp.gateProj;
      this.sharedGate = sp.expertGate;
    }
    this.mds = Object.freeze({
      hidden: hiddenMd, logits: logitsMd, dst: dstMd, w13: this.gemm1.queryMd('weights')!, w2: this.gemm2.queryMd('weights')!,
      act: actMd, expertOut: outMd, src1: src1Md, src2: src2Md, ...(h13Md ? { h13: h13Md } : {}),
      ...(b13Md ? { w13_bias: b13Md } : {}), ...(b2Md ? { w2_bias: b2Md } : {}),
    });
    verboseLine('create', ['moe_layer', this.implInfo, 'undef', `src:${hiddenMd} w13:${this.mds.w13} w2:${this.mds.w2}`, '', '', `t${T}e${E}k${k}:${K}x${I}`, (now() - t0).toFixed(4)]);
  }

  /**
   * Descriptors of the arguments: `hidden`, `logits`, `dst`, `w13`, `w2` (packed when created from
   * `tag.any`: reorder user weights into these), `w13_bias`, `w2_bias`, `w13_scales`, `w2_scales`,
   * `expert_map`, `correction_bias`, `shared_w13` (or `shared_gate` + `shared_up`), `shared_w2`,
   * `shared_expert_gate`, and `shared_<w13|gate|up|w2>_scales`.
   */
  queryMd(what: string): MemoryDesc | undefined {
    if (what === 'w13_scales') return this.gemm1.queryMd('scales:weights');
    if (what === 'w2_scales') return this.gemm2.queryMd('scales:weights');
    if (what === 'expert_map') return this.config.localExperts !== this.config.experts ? plainDesc([this.config.experts], 's32', 'a') : undefined;
    if (what === 'correction_bias') return this.routing.queryMd('correction_bias');
    const split = this.config.sharedExpert?.split;
    if (what === 'shared_w13') return split ? undefined : this.shared1?.queryMd('weights');
    if (what === 'shared_up') return split ? this.shared1?.queryMd('weights') : undefined;
    if (what === 'shared_gate') return this.sharedGateProj?.queryMd('weights');
    if (what === 'shared_w2') return this.shared2?.queryMd('weights');
    if (what === 'shared_expert_gate') return this.sharedGate?.queryMd('weights');
    if (what === 'shared_w13_scales') return split ? undefined : this.shared1?.queryMd('scales:weights');
    if (what === 'shared_up_scales') return split ? this.shared1?.queryMd('scales:weights') : undefined;
    if (what === 'shared_gate_scales') return this.sharedGateProj?.queryMd('scales:weights');
    if (what === 'shared_w2_scales') return this.shared2?.queryMd('scales:weights');
    return this.mds[what];
  }

  get implInfo(): string {
    return `moe:${this.gemm1.implInfo}+${this.gemm2.implInfo}`;
  }
}

function checkPermuteQuant(w8a8: boolean): void {
  if (w8a8) throw new DnnlError('unimplemented', "moe.layer: w8a8_dynamic needs gemm1: 'gather' (per-token scales are gathered with the rows)");
}

/**
 * The MoE layer: `new moe.layer.Primitive(pd)` allocates the workspace once; `execute(strm, args)`
 * enqueues every stage. Each stage is reachable alone through `stages` (a framework can replace one,
 * e.g. run its own all-to-all between dispatch and GEMM1), with the workspace in `workspace`.
 */
export class Primitive<E extends Engine | GpuEngine = Engine> {
  readonly pd: PrimitiveDesc<E>;
  readonly workspace: Workspace<MemoryOf<E>>;
  /**
   * Every stage, each runnable alone with its own kernels (`stage(name).execute`). `execute` runs them
   * in this order, except the stages listed in `fused`, which it records as one kernel.
   */
  readonly stages: readonly Stage<MemoryOf<E>>[];
  /**
   * Stages `execute` records as one kernel instead of one by one, with that kernel's impl: on a gpu
   * engine at decode sizes, `route` + `dispatch` as one dispatch (`webgpu:moe-route+dispatch-one`;
   * same outputs, bits and errors as the two stages). Empty where nothing is fused; `fusedRefusal`
   * then says why route + dispatch are not.
   */
  readonly fused: readonly { readonly stages: readonly StageName[]; readonly implInfo: string }[];
  /** Why `execute` runs route and dispatch as two stages (undefined when it fuses them). */
  readonly fusedRefusal: string | undefined;
  private readonly runFused: StageRun | undefined;
  private readonly runStage: readonly StageRun[];
  private readonly argsVersion = new ArgsVersion();
  private readonly owned: AnyMemory[] = [];
  private readonly life: Lifetime;
  /** The stages executed at least once (the backward needs the workspace every one of them writes). */
  private readonly ran = new Set<StageName>();

  constructor(pd: PrimitiveDesc<E>) {
    created('primitive', pd.engine);
    this.pd = pd;
    const eng = pd.engine;
    const c = pd.config;
    const { tokens: T, hidden: K, intermediate: I, topK: k } = c;
    const R = T * k;
    const mk = (md: MemoryDesc | undefined, handles?: readonly (number | GPUBuffer | undefined)[]): AnyMemory => {
      const m = createOn(md!, eng, handles);
      this.owned.push(m);
      return m;
    };
    const w8a8 = c.quant === 'w8a8_dynamic';
    const dpd = pd.dispatch;
    const tokenIndex = mk(dpd.queryMd('token_index'));
    const tokenKs = mk(dpd.queryMd('token_ks'));
    const rowOf = mk(dpd.queryMd('row_of'));
    const dispatchDst = mk(dpd.queryMd('dst'));
    // The offsets dispatch writes: the grouped permuted copy's (permute), or the [G + 1] offsets memory (index-only).
    const offs = c.gemm1 === 'permute' ? dispatchDst.handles[1] : dispatchDst.handles[0];
    const act = mk(pd.mds.act, [undefined, offs]);
    const h13 = pd.activation ? mk(pd.mds.h13, [undefined, offs]) : undefined;
    const permuted = c.gemm1 === 'permute' ? dispatchDst : undefined;
    const expertOut = c.combine === 'fused_scatter' ? mk(pd.mds.expertOut) : mk(pd.mds.expertOut, [undefined, offs]);
    const hiddenQ = w8a8 ? mk(plainDesc([T, K], 's8', 'ab')) : undefined;
    const hiddenScales = w8a8 ? mk(plainDesc([T], 'f32', 'a')) : undefined;
    const actQ = w8a8 ? mk(plainDesc([R, I], 's8', 'ab')) : undefined;
    const actScales = w8a8 ? mk(plainDesc([R], 'f32', 'a')) : undefined;
    const sharedAct = pd.shared1 ? mk(pd.shared1.queryMd('dst')) : undefined;
    const sharedGateProj = pd.sharedGateProj ? mk(pd.sharedGateProj.queryMd('dst')) : undefined;
    const sharedGate = pd.sharedGate ? mk(pd.sharedGate.queryMd('dst')) : undefined;
    const ws: Workspace<AnyMemory> = Object.freeze({
      topkIds: mk(pd.routing.queryMd('topk_ids')), topkWeights: mk(pd.routing.queryMd('topk_weights')),
      tokenIndex, tokenKs, rowOf, act, h13, permuted, expertOut, hiddenQ, hiddenScales, actQ, actScales, sharedAct, sharedGateProj, sharedGate,
    });
    // One engine kind throughout: every workspace object was created on pd.engine.
    this.workspace = ws as Workspace<MemoryOf<E>>;
    // The quantized act as the grouped src of GEMM2: the same bytes, with dispatch's offsets.
    const actQGrouped = actQ ? createOn(pd.mds.src2, eng, [actQ.handles[0], offs]) : undefined;
    // topk weights [T, k] seen as the [T * k, 1] binary src1 of the scatter.
    const twFlat = createOn(plainDesc([T * k, 1], 'f32', 'ab'), eng, [ws.topkWeights.handles[0]]);
    const plans: StagePlan[] = [];
    const add = (name: StageName, p: { implInfo: string }, prim: StagePlan['prim'], args: StageArgsFn): void => { plans.push({ name, pd: p, prim, args }); };
    const routePrim = new routing.Primitive(pd.routing), dispatchPrim = new dispatch.Primitive(dpd);
    add('route', pd.routing, routePrim, (a, w) => ({
      [ARG.SRC]: a[ARG.MOE_ROUTER_LOGITS], [ARG.MOE_TOPK_IDS]: w.topkIds, [ARG.MOE_TOPK_WEIGHTS]: w.topkWeights, [ARG.MOE_CORRECTION_BIAS]: a[ARG.MOE_CORRECTION_BIAS],
    }));
    if (pd.quantHidden) add('quantize_hidden', pd.quantHidden, new dynamic_quant.Primitive(pd.quantHidden), (a, w) => ({ [ARG.SRC]: a[ARG.SRC], [ARG.DST]: w.hiddenQ, [ARG.ATTR_SCALES | ARG.DST]: w.hiddenScales }));
    add('dispatch', dpd, dispatchPrim, (a, w) => ({
      [ARG.MOE_TOPK_IDS]: w.topkIds, [ARG.SRC]: permuted ? a[ARG.SRC] : undefined, [ARG.MOE_EXPERT_MAP]: a[ARG.MOE_EXPERT_MAP],
      [ARG.DST]: dispatchDst, [ARG.MOE_TOKEN_INDEX]: w.tokenIndex, [ARG.MOE_TOKEN_KS]: w.tokenKs, [ARG.MOE_ROW_OF]: w.rowOf,
    }));
    if (c.routingWeight === 'input') {
      const gpu = eng.kind === 'gpu';
      const weightInput = { execute: (strm: Stream, a: Readonly<Record<number, AnyMemory | undefined>>): void => {
        const m = { permuted: a[ARG.SRC]!, tokenIndex: a[ARG.MOE_TOKEN_INDEX]!, tokenKs: a[ARG.MOE_TOKEN_KS]!, topkWeights: a[ARG.MOE_TOPK_WEIGHTS]! };
        if (gpu) enqueueInputWeightingGpu(strm, T, k, m as { [key in keyof typeof m]: GpuMemory });
        else enqueueInputWeighting(strm, T, k, m as { [key in keyof typeof m]: Memory });
      }, destroy: (): void => undefined };
      add('weight_input', { implInfo: gpu ? 'webgpu:moe-input-weighting' : 'ref:any' }, weightInput, (_a, w) => ({ [ARG.SRC]: w.permuted, [ARG.MOE_TOKEN_INDEX]: w.tokenIndex, [ARG.MOE_TOKEN_KS]: w.tokenKs, [ARG.MOE_TOPK_WEIGHTS]: w.topkWeights }));
    }
    add('gemm1', pd.gemm1, new matmul.Primitive(pd.gemm1), (a, w) => ({
      [ARG.SRC]: permuted ?? (w.hiddenQ ?? a[ARG.SRC]), [ARG.WEIGHTS]: a[ARG.WEIGHTS], [ARG.BIAS]: a[ARG.BIAS], [ARG.DST]: w.h13 ?? w.act,
      [ARG.ATTR_SCALES | ARG.WEIGHTS]: a[ARG.ATTR_SCALES | ARG.WEIGHTS], [ARG.ATTR_SCALES | ARG.SRC]: w.hiddenScales, [ARG.MOE_TOKEN_INDEX]: w.tokenIndex,
    }));
    if (pd.activation) add('activation', pd.activation, new activation.Primitive(pd.activation), (_a, w) => ({ [ARG.SRC]: w.h13, [ARG.DST]: w.act }));
    if (pd.quantAct) add('quantize_act', pd.quantAct, new dynamic_quant.Primitive(pd.quantAct), (_a, w) => ({ [ARG.SRC]: w.act, [ARG.DST]: w.actQ, [ARG.ATTR_SCALES | ARG.DST]: w.actScales }));
    add('gemm2', pd.gemm2, new matmul.Primitive(pd.gemm2), (a, w) => ({
      [ARG.SRC]: actQGrouped ?? w.act, [ARG.WEIGHTS]: a[ARG.WEIGHTS_1], [ARG.BIAS]: a[ARG.MOE_W2_BIAS], [ARG.DST]: w.expertOut,
      [ARG.ATTR_SCALES | ARG.WEIGHTS]: a[ARG.ATTR_SCALES | ARG.WEIGHTS_1], [ARG.ATTR_SCALES | ARG.SRC]: w.actScales,
      [ARG.MOE_TOKEN_INDEX]: w.tokenIndex, [ARG.MOE_TOKEN_KS]: w.tokenKs, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: pd.gemm2.problem.fusion.binary.length > 0 ? twFlat : undefined,
    }));
    add('combine', pd.combine, new combine.Primitive(pd.combine), (a, w) => ({
      [ARG.SRC]: w.expertOut, [ARG.MOE_ROW_OF]: w.rowOf, [ARG.MOE_TOPK_WEIGHTS]: pd.combine.problem.weighted ? w.topkWeights : undefined, [ARG.DST]: a[ARG.DST],
    }));
    if (pd.shared1 && pd.shared2) {
      const S = ARG.ATTR_SCALES;
      if (pd.sharedGate) add('shared_gate', pd.sharedGate, new matmul.Primitive(pd.sharedGate), (a, w) => ({ [ARG.SRC]: a[ARG.SRC], [ARG.WEIGHTS]: a[ARG.MOE_SHARED_EXPERT_GATE], [ARG.DST]: w.sharedGate }));
      if (pd.sharedGateProj) {
        add('shared_gate_proj', pd.sharedGateProj, new matmul.Primitive(pd.sharedGateProj), (a, w) => ({
          [ARG.SRC]: a[ARG.SRC], [ARG.WEIGHTS]: a[ARG.MOE_SHARED_GATE_PROJ], [S | ARG.WEIGHTS]: a[S | ARG.MOE_SHARED_GATE_PROJ], [ARG.DST]: w.sharedGateProj,
        }));
      }
      const w1 = pd.sharedGateProj ? ARG.MOE_SHARED_UP_PROJ : ARG.MOE_SHARED_W13;
      add('shared_gemm1', pd.shared1, new matmul.Primitive(pd.shared1), (a, w) => ({
        [ARG.SRC]: a[ARG.SRC], [ARG.WEIGHTS]: a[w1], [S | ARG.WEIGHTS]: a[S | w1], [ARG.DST]: w.sharedAct, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: w.sharedGateProj,
      }));
      add('shared_gemm2', pd.shared2, new matmul.Primitive(pd.shared2), (a, w) => ({
        [ARG.SRC]: w.sharedAct, [ARG.WEIGHTS]: a[ARG.MOE_SHARED_W2], [S | ARG.WEIGHTS]: a[S | ARG.MOE_SHARED_W2], [ARG.DST]: a[ARG.DST], [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: w.sharedGate,
      }));
    }
    // Route + dispatch as one dispatch where they are adjacent stages of a gpu layer and fit one workgroup.
    let fused: RouteDispatchGpu | undefined;
    if (eng.kind === 'gpu' && gpuLayerTuning.fuseRouteDispatch && plans[1].name === 'dispatch') {
      this.fusedRefusal = routeDispatchRefusal(pd.routing.problem, dpd.problem, eng);
      if (this.fusedRefusal === undefined) fused = new RouteDispatchGpu(pd.routing.problem, dpd.problem, eng);
    } else {
      this.fusedRefusal = eng.kind !== 'gpu' ? 'a cpu engine' : !gpuLayerTuning.fuseRouteDispatch ? 'switched off' : 'a stage between route and dispatch (quantize_hidden)';
    }
    this.fused = fused ? [{ stages: ['route', 'dispatch'], implInfo: ROUTE_DISPATCH_IMPL }] : [];
    const owned = this.owned, prims: { destroy(): void }[] = plans.map((s) => s.prim);
    if (fused) prims.push(fused);
    owned.push(twFlat);
    if (actQGrouped) owned.push(actQGrouped);
    this.life = new Lifetime(this, {
      release: () => {
        for (const p of prims) p.destroy();
        for (const m of owned.splice(0)) if (!m.isFreed) m.free();
      },
    });
    // Where each inner argument of a stage comes from: a layer argument, or the workspace (errors say so).
    const isMemory = (m: unknown): m is AnyMemory => m instanceof Memory || m instanceof GpuMemory;
    const wsNames = new Map<AnyMemory, string>(Object.entries(ws).filter(([, m]) => isMemory(m)).map(([key, m]) => [m as AnyMemory, `workspace.${key}`]));
    wsNames.set(twFlat, 'workspace.topkWeights');
    if (actQGrouped) wsNames.set(actQGrouped, 'workspace.actQ');
    if (!permuted) wsNames.set(dispatchDst, 'workspace offsets');
    const layerArg = new Proxy({}, { get: (_t, id) => (typeof id === 'string' ? { layerArg: Number(id) } : undefined) }) as unknown as LayerArgs<AnyMemory>;
    const argNames = (s: StagePlan): Map<string, string> => {
      const names = new Map<string, string>();
      for (const [id, v] of Object.entries(s.args(layerArg, ws))) {
        const from = isMemory(v) ? wsNames.get(v) : (v as { layerArg?: number } | undefined)?.layerArg;
        if (from !== undefined) names.set(argName(Number(id)), typeof from === 'number' ? argName(from) : from);
      }
      return names;
    };
    // Per stage: its inner arguments (rebuilt only when the layer's change: a decode loop executes the
    // layer on the same memory every time; the objects cost JS time per stage) and its error renaming.
    // `version`: the layer arguments' (argsVersion), compared once per layer execute, not per stage.
    const calls = plans.map((s) => {
      const names = argNames(s);
      const rename = (e: unknown): unknown => layerExecuteError(e, s.name, names);
      const mapError = (e: DnnlError): DnnlError => rename(e) as DnnlError;
      const cache = new StageArgsCache();
      /** `body` on the stage's inner arguments, its errors (thrown or raised at wait) said as the stage's. */
      const call = (strm: Stream, args: LayerArgs<AnyMemory>, version: number, body: (inner: Record<number, AnyMemory>) => void): void => {
        const inner = cache.get(version, () => dropUndefined(s.args(args, ws)));
        try {
          strm.mapErrors(mapError, () => body(inner));
        } catch (e) {
          throw rename(e);
        }
      };
      return { call, mapError };
    });
    this.runStage = plans.map((s, i) => (strm, args, version): void => {
      calls[i].call(strm, args, version, (inner) => s.prim.execute(strm, inner));
      this.ran.add(s.name);
    });
    this.stages = plans.map((s, i) => ({
      name: s.name,
      implInfo: s.pd.implInfo,
      execute: (strm: Stream, args: LayerArgs<MemoryOf<E>>): void => this.runStage[i](strm, args, this.argsVersion.of(args)),
    }));
    if (fused) {
      const f = fused, [route, disp] = calls;
      this.runFused = (strm, args, version): void => {
        let ra: ReturnType<typeof routePrim.resolve> | undefined;
        route.call(strm, args, version, (inner) => { ra = routePrim.resolve(strm, inner); });
        disp.call(strm, args, version, (inner) => {
          const da = dispatchPrim.resolve(strm, inner);
          // The task's own errors and the routing's slot are the route stage's; the dispatch's slot says its own.
          route.call(strm, args, version, () => strm.enqueue(f.task(ra as RoutingArgs<GpuMemory>, da as DispatchArgs<GpuMemory>, disp.mapError), [ra, da]));
        });
        this.ran.add('route').add('dispatch');
      };
    }
  }

  /** Enqueues the whole layer. Argument errors throw here, runtime-data errors at `stream.wait()`. */
  execute(strm: Stream, args: LayerArgs<MemoryOf<E>>): void {
    check(!this.life.destroyed, 'moe.layer.execute: primitive used after destroy()');
    check(strm.engine === this.pd.engine, 'moe.layer.execute: stream belongs to another engine');
    const need: number[] = [ARG.SRC, ARG.MOE_ROUTER_LOGITS, ARG.WEIGHTS, ARG.WEIGHTS_1, ARG.DST];
    if (this.pd.config.bias) need.push(ARG.BIAS, ARG.MOE_W2_BIAS);
    if (this.pd.config.localExperts !== this.pd.config.experts) need.push(ARG.MOE_EXPERT_MAP);
    if (this.pd.shared1) need.push(this.pd.sharedGateProj ? ARG.MOE_SHARED_GATE_PROJ : ARG.MOE_SHARED_W13, ARG.MOE_SHARED_W2);
    if (this.pd.shared1 && this.pd.sharedGateProj) need.push(ARG.MOE_SHARED_UP_PROJ);
    if (this.pd.sharedGate) need.push(ARG.MOE_SHARED_EXPERT_GATE);
    for (const id of need) if (args[id] === undefined) throw new DnnlError('invalid_arguments', `moe.layer.execute: missing argument ${argName(id)}`);
    // Said here: the dispatch stage would name its own pd option (expertMap), which the layer does not have.
    if (this.pd.config.localExperts === this.pd.config.experts && args[ARG.MOE_EXPERT_MAP] !== undefined) {
      throw new DnnlError('invalid_arguments', `moe.layer.execute: ARG.MOE_EXPERT_MAP must not be given: the layer holds all ${this.pd.config.experts} experts (a map is taken when config.localExperts < experts)`);
    }
    // Weights whose packed layout stores their scales / zero points (`+q`, filled by the reorder) take
    // none at execution; named here with the layer's argument (the GEMM's would say WEIGHTS for w2 too).
    for (const [wei, gemm] of [[ARG.WEIGHTS, this.pd.gemm1], [ARG.WEIGHTS_1, this.pd.gemm2]] as const) {
      if (!gemm.queryMd('weights')?.packed?.quant) continue;
      for (const id of [ARG.ATTR_SCALES | wei, ARG.ATTR_ZERO_POINTS | wei])
        if (args[id] !== undefined) throw new DnnlError('invalid_arguments', `moe.layer.execute: ${argName(id)} must not be given: the packed ${argName(wei)} (${gemm.queryMd('weights')?.packed?.name}+q) store their scales / zero points, filled by the reorder`);
    }
    const version = this.argsVersion.of(args), run = this.runStage;
    let i = 0;
    if (this.runFused) {
      this.runFused(strm, args, version);
      i = 2;
    }
    for (; i < run.length; i++) run[i](strm, args, version);
  }

  /** @internal every stage has been executed at least once (moe.layer.BackwardPrimitive's precondition). */
  get forwardRan(): boolean {
    return this.ran.size === this.stages.length;
  }

  /** The stage called `name` (throws if the layer has none). */
  stage(name: StageName): Stage<MemoryOf<E>> {
    const s = this.stages.find((x) => x.name === name);
    if (!s) throw new DnnlError('invalid_arguments', `moe.layer: no stage '${name}' (stages: ${this.stages.map((x) => x.name).join(', ')})`);
    return s;
  }

  /** Gives the workspace and the stages' memory back (deferred while work is in flight); execute then throws. */
  destroy(): void {
    this.life.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }
}

/** A stage recorded on the layer's arguments, whose ArgsVersion is `version`. */
type StageRun = (strm: Stream, args: LayerArgs<AnyMemory>, version: number) => void;

/**
 * Numbers the layer argument sets an execute is given: the same number while the same memory objects
 * come under the same ids (a decode loop), a new one when any changes. Compared once per layer execute.
 */
class ArgsVersion {
  private keys: string[] = [];
  private vals: unknown[] = [];
  private version = 0;

  of(args: LayerArgs<AnyMemory>): number {
    if (this.version > 0 && this.same(args)) return this.version;
    this.keys = [];
    this.vals = [];
    for (const k in args) {
      this.keys.push(k);
      this.vals.push(args[k]);
    }
    return ++this.version;
  }

  private same(args: LayerArgs<AnyMemory>): boolean {
    let n = 0;
    for (const k in args) {
      if (this.keys[n] !== k || this.vals[n] !== args[k]) return false;
      n++;
    }
    return n === this.keys.length;
  }
}

/** The inner arguments a stage last built, and the ArgsVersion they were built for. */
class StageArgsCache {
  private version = 0;
  private built: Record<number, AnyMemory> | undefined;

  get(version: number, build: () => Record<number, AnyMemory>): Record<number, AnyMemory> {
    if (this.built && this.version === version) return this.built;
    this.built = build();
    this.version = version;
    return this.built;
  }
}

/** @internal the arguments a stage was given, without the absent ones. */
export function dropUndefined<M>(a: Record<number, M | undefined>): Record<number, M> {
  const out: Record<number, M> = {};
  for (const k in a) {
    const v = a[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}
