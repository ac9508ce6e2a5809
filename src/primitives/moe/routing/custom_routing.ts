import { DnnlError, check } from '../../../common/status.js';
import type { Memory } from '../../../memory/memory.js';
import type { RoutingArgs, RoutingImpl } from './impl.js';
import type { CustomRoutingResult, RoutingProblem } from './problem.js';
import { logitReader } from './runtime_data.js';

/**
 * `customRoutingFunction`: the user's function runs on the calling thread when the stream reaches the
 * work; its result is validated completely before anything is written (errors raised by `wait()`).
 */
export const customRouting: RoutingImpl = {
  name: 'host:custom_routing_function',
  reject(p) {
    if (!p.custom) return 'no customRoutingFunction';
    return undefined;
  },
  createExecutor(p) {
    return { task: (a: RoutingArgs) => () => runCustom(p, a) };
  },
};

/** The logits as row-major f32: a view of src when it already is exactly that, else a decoded copy. */
function logitsF32(p: RoutingProblem, src: Memory): Float32Array {
  const { T, E } = p;
  const [st, se] = src.desc.strides;
  if (src.desc.dataType === 'f32' && se === 1 && (st === E || T <= 1)) return new Float32Array(src.engine.buffer, src.handles[0], T * E);
  const out = new Float32Array(T * E);
  const logit = logitReader(src);
  for (let t = 0; t < T; t++) for (let e = 0; e < E; e++) out[t * E + e] = logit(t, e);
  return out;
}

function runCustom(p: RoutingProblem, a: RoutingArgs): void {
  const { T, E, topK: k } = p;
  let r: CustomRoutingResult;
  try {
    r = p.custom!(logitsF32(p, a.src), T, E, k, p.renormalize);
  } catch (e) {
    if (e instanceof DnnlError) throw e;
    throw new DnnlError('runtime_error', `moe.routing: customRoutingFunction threw: ${e instanceof Error ? e.message : String(e)}`);
  }
  const { ids, weights } = checkedResult(p, r);
  (a.topkIds.values as Int32Array).set(ids);
  (a.topkWeights.values as Float32Array).set(weights);
}

/** The function's result as s32 ids and f32 weights (scaled), or a DnnlError naming the first bad entry. */
function checkedResult(p: RoutingProblem, r: CustomRoutingResult): { ids: Int32Array; weights: Float32Array } {
  const { T, E, topK: k } = p;
  const fn = 'moe.routing: customRoutingFunction result';
  const n = T * k;
  check(r !== null && typeof r === 'object', `${fn} must be an object { weights, ids }`);
  const isList = (x: unknown): x is ArrayLike<number> => x !== null && typeof x === 'object' && typeof (x as ArrayLike<number>).length === 'number';
  check(isList(r.ids), `${fn} ids must be an array-like of T * topK = ${n} numbers`);
  check(isList(r.weights), `${fn} weights must be an array-like of T * topK = ${n} numbers`);
  check(r.ids.length === n, `${fn} ids has ${r.ids.length} entries, expected T * topK = ${T} x ${k} = ${n}`);
  check(r.weights.length === n, `${fn} weights has ${r.weights.length} entries, expected T * topK = ${T} x ${k} = ${n}`);
  const ids = new Int32Array(n), weights = new Float32Array(n);
  const seenAt = new Int32Array(E).fill(-1);
  const scale = Math.fround(p.routedScalingFactor);
  for (let i = 0; i < n; i++) {
    const t = Math.floor(i / k), q = i % k;
    const id = r.ids[i], w = r.weights[i];
    check(typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < E, `${fn} ids[${i}] (token ${t}, slot ${q}) = ${String(id)} is not an integer expert id in [0, E = ${E})`);
    check(seenAt[id] < t * k, `${fn} token ${t} chooses expert ${id} twice (slots ${seenAt[id] - t * k} and ${q})`);
    seenAt[id] = i;
    check(typeof w === 'number' && Number.isFinite(w), `${fn} weights[${i}] (token ${t}, slot ${q}) = ${String(w)} is not a finite number`);
    weights[i] = w * scale;
    check(Number.isFinite(weights[i]), `${fn} weights[${i}] (token ${t}, slot ${q}) = ${w} times routedScalingFactor ${p.routedScalingFactor} overflows f32`);
    ids[i] = id;
  }
  return { ids, weights };
}
