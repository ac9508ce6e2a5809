import { DnnlError, check, checkImpl } from '../../../common/status.js';
import { created } from '../../../runtime/live_engine.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { RUNTIME_DIM_VAL } from '../../../common/dims.js';
import { plainDesc, type MemoryDesc } from '../../../memory/desc.js';
import { groupedDesc } from '../../../memory/grouped_desc.js';
import { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import type { Stream } from '../../../runtime/stream.js';
import { Lifetime } from '../../../runtime/lifetime.js';
import { ARG, argName } from '../../args.js';
import * as matmul from '../../matmul/index.js';
import * as matmul_backward_data from '../../matmul_backward/data/index.js';
import { PrimitiveAttr } from '../../../attr/primitive_attr.js';
import * as matmul_backward_weights from '../../matmul_backward/weights/index.js';
import * as routing from '../routing/index.js';
import * as combine from '../combine/index.js';
import { PrimitiveDesc, dropUndefined, type Primitive, type LayerArgs } from './layer.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

/** The stages of the backward, in the order they run. */
export type BackwardStageName = 'combine_bwd' | 'route_bwd' | 'gemm2_bwd_data_glu' | 'gemm2_bwd_weights'
  | 'gemm1_bwd_data' | 'gemm1_bwd_weights' | 'gather_bwd';

/** Workspace of the backward (allocated once per primitive). R = T x topK routed rows. */
export interface BackwardWorkspace {
  /** `[R, K]` gradient of the unweighted expert outputs (routed rows). */
  readonly dY: Memory;
  /** `[T, k]` gradient of the routing weights. */
  readonly dTopkWeights: Memory;
  /** `[R, 2I]` gradient of GEMM1's output (gate and up). */
  readonly dH13: Memory;
  /** `[R, K]` gradient of the permuted hidden rows. */
  readonly dX: Memory;
}

interface BwdPlan {
  readonly name: BackwardStageName;
  readonly implInfo: string;
  readonly prim: { execute(strm: Stream, args: Readonly<Record<number, Memory | undefined>>): void; destroy(): void };
  readonly args: (a: LayerArgs, ws: BackwardWorkspace) => Record<number, Memory | undefined>;
}

/**
 * MoE layer backward (oneDNN `backward` with a forward hint): `new moe.layer.BackwardPrimitiveDesc(eng,
 * fwdPd)`, where `fwdPd` was created with `propKind: 'forward_training'`. The forward's workspace holds
 * what the backward reads (routing ids and weights, dispatch maps and offsets, the permuted hidden
 * rows, GEMM1's output before the GLU, the GLU output, the unweighted expert outputs): run the backward
 * after the forward's `execute` with the same weights and logits, before the forward runs again.
 *
 * Arguments: `ARG.DIFF_DST [T, K]` (gradient of the layer output), `ARG.MOE_ROUTER_LOGITS`,
 * `ARG.WEIGHTS` (w13) and `ARG.WEIGHTS_1` (w2) as given to the forward; outputs `ARG.DIFF_SRC [T, K]`
 * (hidden), `ARG.MOE_DIFF_ROUTER_LOGITS [T, E]`, `ARG.DIFF_WEIGHTS [G, K, 2I]`, `ARG.DIFF_WEIGHTS_1
 * [G, I, K]` and, with biases, `ARG.DIFF_BIAS [G, 2I]`, `ARG.MOE_DIFF_W2_BIAS [G, K]`; all f32, every
 * element written (an expert with no rows gets zero gradients). The chain, each stage a primitive:
 * weight-and-reduce backward (d expert outputs, d routing weights) -> routing backward (d logits) ->
 * GEMM2 backward data (dY . w2ᵀ) / weights (actᵀ . dY per expert) / bias -> GLU backward -> GEMM1
 * backward data / weights / bias -> gather backward (each token sums its rows' gradients in slot
 * order). Deterministic: fixed-order sums everywhere, the same bits for any thread count.
 */
export class BackwardPrimitiveDesc {
  readonly engine: Engine;
  readonly hint: PrimitiveDesc;
  /** @internal */ readonly combineBwd: combine.BackwardPrimitiveDesc;
  /** @internal */ readonly routingBwd: routing.BackwardPrimitiveDesc;
  /** @internal GEMM2's d(src) with the GLU backward as its epilogue: dY . w2ᵀ -> d(h13). */ readonly gemm2DataGlu: matmul.PrimitiveDesc;
  /** @internal */ readonly gemm2Weights: matmul_backward_weights.PrimitiveDesc;
  /** @internal */ readonly gemm1Data: matmul_backward_data.PrimitiveDesc;
  /** @internal */ readonly gemm1Weights: matmul_backward_weights.PrimitiveDesc;
  /** @internal */ readonly gatherBwd: combine.PrimitiveDesc;
  /** @internal descriptors of the backward's arguments, views and workspace. */
  readonly mds: Readonly<Record<string, MemoryDesc>>;

  constructor(engine: Engine, hint: PrimitiveDesc) {
    refuseGpuEngine(engine, 'moe.layer.backward');
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.layer.backward: engine is required');
    check(hint instanceof PrimitiveDesc, 'moe.layer.backward: hint must be a moe.layer.PrimitiveDesc');
    check(hint.engine === engine, 'moe.layer.backward: the forward hint belongs to another engine');
    checkImpl(hint.config.propKind === 'forward_training', "moe.layer.backward: the forward hint must be created with propKind: 'forward_training' (an inference forward keeps nothing to differentiate)");
    const c = hint.config;
    const { tokens: T, hidden: K, intermediate: I, topK: k, localExperts: G, experts: E } = c;
    const R = T * k;
    this.engine = engine;
    this.hint = hint;
    this.combineBwd = new combine.BackwardPrimitiveDesc(engine, hint.combine);
    this.routingBwd = new routing.BackwardPrimitiveDesc(engine, hint.routing);
    const rows = (n: number): MemoryDesc => groupedDesc([R, n], 'f32', G, [RUNTIME_DIM_VAL, n]);
    const dyMd = rows(K), dH13Md = rows(2 * I), dxMd = rows(K);
    const w13Md = hint.mds.w13, w2Md = hint.mds.w2;
    const db13Md = c.bias ? plainDesc([G, 2 * I], 'f32', 'ab') : undefined, db2Md = c.bias ? plainDesc([G, K], 'f32', 'ab') : undefined;
    // The forward's GEMMs are the hints: d(src) = d(dst) . Wᵀ reads the caller's abc weights with their
    // strides swapped; d(W)[g] = src[g]ᵀ . d(dst)[g] (+ d(bias)[g] = row sums) reads the saved src.
    // d(act) = dY . w2ᵀ never leaves registers: the GLU backward epilogue turns each tile into d(gate, up)
    // from the saved h13 (cuDNN's dSwiGLU fusion, seed 001). w2 [G, I, K] abc is read as [G, K, I] acb.
    const dglu = new PrimitiveAttr();
    dglu.postOps.appendGluBackward(c.glu.alg, c.glu.layout, c.glu.alpha, c.glu.limit);
    this.gemm2DataGlu = new matmul.PrimitiveDesc(engine, dyMd, plainDesc([G, K, I], 'f32', 'acb'), dH13Md, dglu);
    this.gemm2Weights = new matmul_backward_weights.PrimitiveDesc(engine, hint.mds.act, w2Md, dyMd, hint.gemm2, undefined, db2Md);
    this.gemm1Data = new matmul_backward_data.PrimitiveDesc(engine, dxMd, w13Md, dH13Md, hint.gemm1);
    this.gemm1Weights = new matmul_backward_weights.PrimitiveDesc(engine, hint.mds.src1, w13Md, dH13Md, hint.gemm1, undefined, db13Md);
    this.gatherBwd = new combine.PrimitiveDesc(engine, { tokens: T, topK: k, input: 'routed', src: dxMd, dst: plainDesc([T, K], 'f32', 'ab'), weighted: false });
    this.mds = Object.freeze({
      diff_dst: plainDesc([T, K], 'f32', 'ab'), diff_src: plainDesc([T, K], 'f32', 'ab'), diff_logits: plainDesc([T, E], 'f32', 'ab'),
      diff_w13: plainDesc([G, K, 2 * I], 'f32', 'abc'), diff_w2: plainDesc([G, I, K], 'f32', 'abc'),
      ...(db13Md && db2Md ? { diff_w13_bias: db13Md, diff_w2_bias: db2Md } : {}),
      dY: dyMd, dH13: dH13Md, dX: dxMd, dTopkWeights: plainDesc([T, k], 'f32', 'ab'),
      w2T: plainDesc([G, K, I], 'f32', 'acb'), h13Plain: plainDesc([R, 2 * I], 'f32', 'ab'),
    });
    verboseLine('create', ['moe_layer_bwd', this.implInfo, 'undef', `diff_dst:${this.mds.diff_dst} w13:${hint.mds.w13} w2:${hint.mds.w2}`, '', '', `t${T}e${E}k${k}:${K}x${I}`, (now() - t0).toFixed(4)]);
  }

  /** Descriptors: `diff_dst`, `diff_src`, `diff_logits`, `diff_w13`, `diff_w2`, `diff_w13_bias`, `diff_w2_bias`. */
  queryMd(what: string): MemoryDesc | undefined {
    return this.mds[what];
  }

  get implInfo(): string {
    return `moe-bwd:${this.gemm1Data.implInfo}+${this.gemm1Weights.implInfo}`;
  }
}

/**
 * `new moe.layer.BackwardPrimitive(bpd, forward)`: the backward of the layer `forward` (a
 * `moe.layer.Primitive` of `bpd.hint`), whose workspace it reads. `execute(strm, args)` enqueues every
 * stage; `stages` reaches each alone.
 */
export class BackwardPrimitive {
  readonly pd: BackwardPrimitiveDesc;
  readonly forward: Primitive;
  readonly workspace: BackwardWorkspace;
  readonly stages: readonly { readonly name: BackwardStageName; readonly implInfo: string; execute(strm: Stream, args: LayerArgs): void }[];
  private readonly life: Lifetime;

  constructor(pd: BackwardPrimitiveDesc, forward: Primitive) {
    check(pd instanceof BackwardPrimitiveDesc, 'moe.layer.BackwardPrimitive: pd must be a moe.layer.BackwardPrimitiveDesc');
    created('primitive', pd.engine);
    check(forward !== undefined && forward !== null && forward.pd === pd.hint, 'moe.layer.BackwardPrimitive: forward must be the moe.layer.Primitive of the pd\'s forward hint');
    this.pd = pd;
    this.forward = forward;
    const eng = pd.engine, fw = forward.workspace;
    const owned: Memory[] = [];
    const offs = fw.act.handles[1];
    const mk = (md: MemoryDesc, handles?: (number | undefined)[]): Memory => {
      const m = Memory.create(md, eng, handles);
      owned.push(m);
      return m;
    };
    const ws: BackwardWorkspace = Object.freeze({
      dY: mk(pd.mds.dY, [undefined, offs]), dTopkWeights: mk(pd.mds.dTopkWeights),
      dH13: mk(pd.mds.dH13, [undefined, offs]), dX: mk(pd.mds.dX, [undefined, offs]),
    });
    this.workspace = ws;
    const plans: BwdPlan[] = [];
    const add = (name: BackwardStageName, p: { implInfo: string }, prim: BwdPlan['prim'], args: BwdPlan['args']): void => {
      plans.push({ name, implInfo: p.implInfo, prim, args });
    };
    add('combine_bwd', pd.combineBwd, new combine.BackwardPrimitive(pd.combineBwd), (a, w) => ({
      [ARG.DIFF_DST]: a[ARG.DIFF_DST], [ARG.SRC]: fw.expertOut, [ARG.MOE_TOPK_WEIGHTS]: fw.topkWeights, [ARG.MOE_ROW_OF]: fw.rowOf,
      [ARG.MOE_TOKEN_INDEX]: fw.tokenIndex, [ARG.MOE_TOKEN_KS]: fw.tokenKs, [ARG.DIFF_SRC]: w.dY, [ARG.MOE_DIFF_TOPK_WEIGHTS]: w.dTopkWeights,
    }));
    add('route_bwd', pd.routingBwd, new routing.BackwardPrimitive(pd.routingBwd), (a, w) => ({
      [ARG.SRC]: a[ARG.MOE_ROUTER_LOGITS], [ARG.MOE_TOPK_IDS]: fw.topkIds, [ARG.MOE_DIFF_TOPK_WEIGHTS]: w.dTopkWeights, [ARG.DIFF_SRC]: a[ARG.MOE_DIFF_ROUTER_LOGITS],
    }));
    // The saved h13 as the post-op's plain [R, 2I] input (same bytes), and w2 seen transposed (a view per weights buffer).
    const h13 = mk(pd.mds.h13Plain, [fw.h13!.handles[0]]);
    let w2T: Memory | undefined;
    const w2View = (w2: Memory | undefined): Memory | undefined => {
      if (!w2) return undefined;
      if (w2T?.handles[0] !== w2.handles[0]) w2T = Memory.create(pd.mds.w2T, eng, [w2.handles[0]]);
      return w2T;
    };
    add('gemm2_bwd_data_glu', pd.gemm2DataGlu, new matmul.Primitive(pd.gemm2DataGlu), (a, w) => ({
      [ARG.SRC]: w.dY, [ARG.WEIGHTS]: w2View(a[ARG.WEIGHTS_1]), [ARG.DST]: w.dH13, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: h13,
    }));
    add('gemm2_bwd_weights', pd.gemm2Weights, new matmul_backward_weights.Primitive(pd.gemm2Weights), (a, w) => ({
      [ARG.SRC]: fw.act, [ARG.DIFF_DST]: w.dY, [ARG.DIFF_WEIGHTS]: a[ARG.DIFF_WEIGHTS_1], [ARG.DIFF_BIAS]: a[ARG.MOE_DIFF_W2_BIAS],
    }));
    add('gemm1_bwd_data', pd.gemm1Data, new matmul_backward_data.Primitive(pd.gemm1Data), (a, w) => ({ [ARG.DIFF_DST]: w.dH13, [ARG.WEIGHTS]: a[ARG.WEIGHTS], [ARG.DIFF_SRC]: w.dX }));
    add('gemm1_bwd_weights', pd.gemm1Weights, new matmul_backward_weights.Primitive(pd.gemm1Weights), (a, w) => ({
      [ARG.SRC]: fw.permuted, [ARG.DIFF_DST]: w.dH13, [ARG.DIFF_WEIGHTS]: a[ARG.DIFF_WEIGHTS], [ARG.DIFF_BIAS]: a[ARG.DIFF_BIAS],
    }));
    add('gather_bwd', pd.gatherBwd, new combine.Primitive(pd.gatherBwd), (a, w) => ({ [ARG.SRC]: w.dX, [ARG.MOE_ROW_OF]: fw.rowOf, [ARG.DST]: a[ARG.DIFF_SRC] }));
    const prims = plans.map((p) => p.prim);
    this.life = new Lifetime(this, {
      release: () => {
        for (const p of prims) p.destroy();
        for (const m of owned.splice(0)) if (!m.isFreed) m.free();
      },
    });
    this.stages = plans.map((s) => ({
      name: s.name,
      implInfo: s.implInfo,
      execute: (strm: Stream, args: LayerArgs): void => s.prim.execute(strm, dropUndefined(s.args(args, ws))),
    }));
  }

  /** Enqueues the whole backward. Argument errors throw here, runtime-data errors at `stream.wait()`. */
  execute(strm: Stream, args: LayerArgs): void {
    check(!this.life.destroyed, 'moe.layer.backward.execute: primitive used after destroy()');
    check(strm.engine === this.pd.engine, 'moe.layer.backward.execute: stream belongs to another engine');
    const need: number[] = [ARG.DIFF_DST, ARG.MOE_ROUTER_LOGITS, ARG.WEIGHTS, ARG.WEIGHTS_1, ARG.DIFF_SRC, ARG.MOE_DIFF_ROUTER_LOGITS, ARG.DIFF_WEIGHTS, ARG.DIFF_WEIGHTS_1];
    if (this.pd.hint.config.bias) need.push(ARG.DIFF_BIAS, ARG.MOE_DIFF_W2_BIAS);
    for (const id of need) if (args[id] === undefined) throw new DnnlError('invalid_arguments', `moe.layer.backward.execute: missing argument ${argName(id)}`);
    const md = this.pd.mds, hint = this.pd.hint.mds;
    const expect: [number, MemoryDesc][] = [[ARG.WEIGHTS, hint.w13], [ARG.WEIGHTS_1, hint.w2], [ARG.MOE_ROUTER_LOGITS, hint.logits], [ARG.DIFF_DST, md.diff_dst], [ARG.DIFF_SRC, md.diff_src], [ARG.MOE_DIFF_ROUTER_LOGITS, md.diff_logits], [ARG.DIFF_WEIGHTS, md.diff_w13], [ARG.DIFF_WEIGHTS_1, md.diff_w2]];
    if (md.diff_w13_bias) expect.push([ARG.DIFF_BIAS, md.diff_w13_bias], [ARG.MOE_DIFF_W2_BIAS, md.diff_w2_bias]);
    // Not `check(cond, msg)`: the message renders two descriptors, too slow to build on every call.
    for (const [id, d] of expect) if (!args[id]!.desc.equals(d)) check(false, `moe.layer.backward.execute: ${argName(id)} descriptor ${args[id]!.desc} does not match the primitive's ${d}`);
    // Before any forward the workspace holds no routing (zeros: every token on expert 0, gradients of nothing).
    check(this.forward.forwardRan, 'moe.layer.backward.execute: the forward moe.layer.Primitive has not been executed: execute it (forward_training) on these inputs first, its workspace is what the backward differentiates');
    for (const s of this.stages) s.execute(strm, args);
  }

  /** Gives the workspace and the stages' memory back (deferred while work is in flight); execute then throws. */
  destroy(): void {
    this.life.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }
}
