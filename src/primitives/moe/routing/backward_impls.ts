import { DnnlError } from '../../../common/status.js';
import { fits32 } from '../../../kernels/fused_job.js';
import { OpJob, type OpStatus } from '../../../kernels/op_job.js';
import type { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import { stateless, type Executor } from '../../../runtime/lifetime.js';
import type { RoutingProblem } from './problem.js';
import { scoresF64 } from './ref_routing.js';
import { checkRoutingData, logitReader, routingDataError } from './runtime_data.js';
import { ROUTE_JOB, fillRouteJob } from './wasm_routing.js';

export interface RoutingBackwardArgs {
  readonly src: Memory;
  readonly topkIds: Memory;
  readonly diffTopkWeights: Memory;
  readonly diffSrc: Memory;
}

export interface RoutingBackwardImpl {
  readonly name: string;
  reject(p: RoutingProblem, engine: Engine): string | undefined;
  executor(p: RoutingProblem, engine: Engine): Executor<RoutingBackwardArgs>;
}

/** Status codes of the ids (wasm/src/moe-route.c); err_index = token, a = slot, b = id. */
const ID_RANGE = 114, ID_TWICE = 115;

function dataError(p: RoutingProblem, s: OpStatus): DnnlError {
  if (s.code === ID_RANGE) return new DnnlError('invalid_arguments', `moe.routing.backward: ARG.MOE_TOPK_IDS[${s.index}, ${s.a}] = ${s.b} is out of range [0, E = ${p.E})`);
  if (s.code === ID_TWICE) return new DnnlError('invalid_arguments', `moe.routing.backward: ARG.MOE_TOPK_IDS token ${s.index} chooses expert ${s.b} twice (slot ${s.a})`);
  return routingDataError(s.code, s.index, s.a);
}

/** Host check of the ids, in the kernel's order. */
function checkIds(p: RoutingProblem, ids: Int32Array): void {
  for (let t = 0; t < p.T; t++) {
    const seen = new Set<number>();
    for (let q = 0; q < p.topK; q++) {
      const e = ids[t * p.topK + q];
      if (e < 0 || e >= p.E) throw dataError(p, { code: ID_RANGE, index: t, a: q, b: e });
      if (seen.has(e)) throw dataError(p, { code: ID_TWICE, index: t, a: q, b: e });
      seen.add(e);
    }
  }
}

/** The routing job's fields (wasm_routing.ts) plus the gradient pointer at 112. */
const ROUTE_BWD_JOB = { ...ROUTE_JOB, dsrc: 112, SIZE: 128 } as const;
const KIND_MOE_ROUTE_BWD = 40;

const wasm: RoutingBackwardImpl = {
  name: 'wasm',
  reject: (p, engine) => (!engine.kernels ? 'the engine was created without kernels' : !fits32(p.src) ? 'too large for 32-bit indexing' : undefined),
  executor(p, engine) {
    const job = new OpJob(engine, KIND_MOE_ROUTE_BWD, ROUTE_BWD_JOB);
    const fill = (a: RoutingBackwardArgs): void => {
      // The forward's struct describes the logits and the scoring; `weights` carries d(topk_weights).
      fillRouteJob(job, engine, p, { src: a.src, ids: a.topkIds, weights: a.diffTopkWeights }, false);
      job.set('dsrc', a.diffSrc.handles[0]);
    };
    return {
      destroy: () => job.free(),
      run: (a) => (p.T === 0 ? () => undefined : job.task(() => fill(a), (s) => {
        if (s.code !== 0) throw dataError(p, s);
      })),
    };
  },
};

/** Reference: scores as the forward's reference (float64, rounded to f32), the chain rule in float64. */
const ref: RoutingBackwardImpl = {
  name: 'ref:any',
  reject: () => undefined,
  executor: (p) => stateless((a) => () => {
    const { T, E, topK: k } = p;
    const logit = logitReader(a.src);
    checkRoutingData(p, logit, undefined);
    const ids = a.topkIds.values as Int32Array, dw = a.diffTopkWeights.values as Float32Array;
    checkIds(p, ids);
    const out = new Float32Array(T * E), x = new Float64Array(E), sc = new Float32Array(E);
    const scale = Math.fround(p.routedScalingFactor);
    for (let t = 0; t < T; t++) {
      for (let e = 0; e < E; e++) x[e] = logit(t, e);
      scoresF64(p, x, sc);
      const id = Array.from(ids.subarray(t * k, t * k + k));
      const g = id.map((_, q) => scale * dw[t * k + q]);
      const den = id.reduce((s, e) => s + sc[e], 0) + Math.fround(p.renormalizeEps);
      const dot = id.reduce((s, e, q) => s + g[q] * (den > 0 ? sc[e] / den : 0), 0);
      const draw = g.map((gq) => (!p.renormalize ? gq : den > 0 ? (gq - dot) / den : 0));
      if (p.scoring === 'sigmoid') {
        id.forEach((e, q) => { out[t * E + e] = draw[q] * sc[e] * (1 - sc[e]); });
        continue;
      }
      const c = id.reduce((s, e, q) => s + draw[q] * sc[e], 0);
      for (let e = 0; e < E; e++) out[t * E + e] = -sc[e] * c;
      id.forEach((e, q) => { out[t * E + e] = sc[e] * (draw[q] - c); });
    }
    (a.diffSrc.values as Float32Array).set(out);
  }),
};

export const routingBackwardImplList: readonly RoutingBackwardImpl[] = [wasm, ref];
