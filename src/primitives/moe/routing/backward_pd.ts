import { check, checkImpl } from '../../../common/status.js';
import { firstImpl } from '../../pick_impl.js';
import { countPdTime } from '../../../common/census.js';
import { created } from '../../../runtime/live_engine.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { plainDesc, type MemoryDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import { routingBackwardImplList, type RoutingBackwardImpl } from './backward_impls.js';
import { PrimitiveDesc } from './pd.js';
import { problemString, type RoutingProblem } from './problem.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

/** What `pd.queryMd` of the backward answers. */
export type RoutingBackwardQuery = 'src' | 'topk_ids' | 'diff_topk_weights' | 'diff_src';

/**
 * Routing backward (oneDNN `backward_data` with a forward hint): `new moe.routing.BackwardPrimitiveDesc(
 * eng, fwdPd)`. Given the forward's logits (`ARG.SRC`) and chosen ids (`ARG.MOE_TOPK_IDS`) and the
 * gradient of the routing weights (`ARG.MOE_DIFF_TOPK_WEIGHTS [T, k]` f32), writes the gradient of
 * the logits (`ARG.DIFF_SRC [T, E]` f32, row-major, every entry). The selection is piecewise constant,
 * so grouped top-k and the correction bias contribute nothing; the gradient flows through the chosen
 * experts' scores: through `routedScalingFactor`, `renormalize` (a zero sum gives zero gradient, as
 * the forward gives zero weights), then sigmoid (the chosen logits only) or softmax (every logit of
 * the token: the softmax denominator couples them; with `renormalize` the unchosen ones cancel to 0).
 * Runtime data (the forward's rules on logits, ids in [0, E), no expert twice in a token) is checked
 * before anything is written and raised by `stream.wait()`.
 */
export class BackwardPrimitiveDesc {
  readonly engine: Engine;
  readonly problem: RoutingProblem;
  readonly diffSrc: MemoryDesc;
  readonly diffTopkWeights: MemoryDesc;
  readonly impl: RoutingBackwardImpl;

  constructor(engine: Engine, hint: PrimitiveDesc) {
    refuseGpuEngine(engine, 'moe.routing.backward');
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.routing.backward: engine is required');
    check(hint instanceof PrimitiveDesc, 'moe.routing.backward: hint must be the forward moe.routing.PrimitiveDesc');
    check(hint.engine === engine, 'moe.routing.backward: the forward hint belongs to another engine');
    checkImpl(hint.problem.custom === undefined, 'moe.routing.backward: a customRoutingFunction has no gradient here (differentiate it in the caller)');
    const p = hint.problem;
    this.engine = engine;
    this.problem = p;
    this.diffSrc = plainDesc([p.T, p.E], 'f32', 'ab');
    this.diffTopkWeights = plainDesc([p.T, p.topK], 'f32', 'ab');
    this.impl = firstImpl(routingBackwardImplList, (i) => i.reject(p, engine), (reasons) => `moe.routing.backward: no implementation for ${problemString(p)} (${reasons})`);
    const ms = now() - t0;
    countPdTime(ms);
    verboseLine('create', ['moe_routing_bwd', this.implInfo, 'undef', `src:${p.src} diff_src:${this.diffSrc}`, '', '', problemString(p), ms.toFixed(4)]);
  }

  queryMd(what: RoutingBackwardQuery): MemoryDesc {
    const p = this.problem;
    return what === 'src' ? p.src : what === 'topk_ids' ? p.topkIds : what === 'diff_topk_weights' ? this.diffTopkWeights : this.diffSrc;
  }

  get implInfo(): string {
    return this.impl.name === 'wasm' ? `wasm:${this.engine.isa}:moe-route-bwd` : this.impl.name;
  }
}
