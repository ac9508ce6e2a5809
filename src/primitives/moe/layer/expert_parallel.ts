import { DnnlError, check, checkImpl } from '../../../common/status.js';
import { plainDesc } from '../../../memory/desc.js';
import { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import type { Stream } from '../../../runtime/stream.js';
import { ARG } from '../../args.js';
import * as routing from '../routing/index.js';
import * as combine from '../combine/index.js';
import { PrimitiveDesc, Primitive, type LayerArgs } from './layer.js';
import { LAYER_OPTION_KEYS, checkLayerKeys, type LayerConfig } from './config.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

/**
 * A user-supplied all-to-all (one call per exchange, on every rank): `send[q]` goes to rank q; the
 * result's entry p is what rank p sent to this rank. Byte buffers, so any transport (MPI, NCCL-like
 * collectives, WebSockets, worker postMessage) can carry them.
 */
export type AllToAll = (send: readonly Uint8Array[]) => Promise<Uint8Array[]>;

/** Expert-parallel configuration: the layer's, plus this rank's place; experts are placed contiguously (rank q holds experts [q G, (q+1) G)). */
export interface ExpertParallelConfig extends Omit<LayerConfig, 'tokens' | 'localExperts' | 'weights'> {
  readonly rank: number;
  readonly worldSize: number;
  /** Tokens of this rank (each rank routes its own tokens: MindIE `tokens_full = False`). */
  readonly tokens: number;
}

const EP_CONFIG_KEYS = [...LAYER_OPTION_KEYS.config.filter((k) => k !== 'localExperts' && k !== 'weights'), 'rank', 'worldSize'];

/** Per received-row metadata sent with each hidden row: source token, slot, global expert, weight bits. */
const META_INTS = 4;

/**
 * One rank of an expert-parallel MoE layer, split at vLLM's prepare / finalize points:
 * 1. route this rank's tokens (moe.routing);
 * 2. prepare: every (token, slot) row goes, with its routing weight, to the rank owning its expert (all-to-all);
 * 3. experts: the received rows run through a local single-slot layer (dispatch, GEMM1 + GLU, GEMM2 x weight);
 * 4. finalize: results go back to their source rank (all-to-all) and land at row token * topK + slot;
 * 5. combine: the slots of each token are summed in slot order (moe.combine, scattered input).
 * Each (token, slot) row is computed exactly as on one rank (a row's GEMM result does not depend on
 * its group's other rows), travels back in f32 as the single-rank layer keeps it (its `expertOut`),
 * and the slots are reduced in the same order, so the output equals the single-rank layer's bit for
 * bit, whatever `dataType`. Steps 2 and 4 are the hooks a deployment replaces with its communication
 * library (rfcs/0004-moe-layer.md). Not here: a shared expert (it belongs to a token's own rank, once,
 * not to the ranks of its routed experts) and `dynamicQuantization` (its s8 weights; the local weights
 * are plain f32, or s8 with `quant: 'w8a8_dynamic'`).
 */
export class ExpertParallelRank {
  readonly engine: Engine;
  readonly config: ExpertParallelConfig;
  readonly localExperts: number;
  private readonly allToAll: AllToAll;
  private readonly routingPrim: routing.Primitive;
  private readonly routingPd: routing.PrimitiveDesc;
  private readonly ids: Memory;
  private readonly weights: Memory;
  private readonly slots: Memory;
  private readonly rowOf: Memory;
  private readonly reduce: combine.Primitive;
  /** Local layers by received-row count (a pd per shape, workspace reused). */
  private readonly local = new Map<number, Primitive>();

  constructor(engine: Engine, config: ExpertParallelConfig, allToAll: AllToAll) {
    check(config !== null && typeof config === 'object', 'moe.ExpertParallelRank: config must be an object');
    checkLayerKeys('moe.ExpertParallelRank', config as LayerConfig, EP_CONFIG_KEYS);
    refuseGpuEngine(engine, 'moe.ExpertParallelRank');
    const { rank, worldSize, experts: E, topK: k, tokens: T, hidden: K } = config;
    check(Number.isSafeInteger(worldSize) && worldSize >= 1, `moe.ExpertParallelRank: worldSize must be a positive integer, got ${worldSize}`);
    check(Number.isSafeInteger(rank) && rank >= 0 && rank < worldSize, `moe.ExpertParallelRank: rank must be in [0, ${worldSize}), got ${rank}`);
    check(E % worldSize === 0, `moe.ExpertParallelRank: experts ${E} must be divisible by worldSize ${worldSize}`);
    check(typeof allToAll === 'function', 'moe.ExpertParallelRank: allToAll must be a function (send by rank) => Promise<received by rank>');
    checkImpl(config.sharedExpert === undefined, 'moe.ExpertParallelRank: a shared expert is not implemented here (the ranks of a token\'s routed experts would each add it); run it on the token\'s own rank beside forward()');
    checkImpl((config.dynamicQuantization ?? 'none') === 'none', `moe.ExpertParallelRank: dynamicQuantization '${String(config.dynamicQuantization)}' is not implemented here (it needs s8 weights; the local weights are plain f32, or s8 with quant: 'w8a8_dynamic')`);
    this.engine = engine;
    this.config = config;
    this.localExperts = E / worldSize;
    this.allToAll = allToAll;
    const adt = config.dataType ?? 'f32';
    this.routingPd = new routing.PrimitiveDesc(engine, plainDesc([T, E], adt, 'ab'), { topK: k, ...(config.routing ?? {}) });
    this.routingPrim = new routing.Primitive(this.routingPd);
    this.ids = Memory.create(this.routingPd.queryMd('topk_ids')!, engine);
    this.weights = Memory.create(this.routingPd.queryMd('topk_weights')!, engine);
    this.slots = Memory.create(plainDesc([T * k, K], 'f32', 'ab'), engine);
    this.rowOf = Memory.create(plainDesc([T, k], 's32', 'ab'), engine);
    (this.rowOf.values as Int32Array).forEach((_, i, a) => { a[i] = i; });
    const cpd = new combine.PrimitiveDesc(engine, { tokens: T, topK: k, input: 'scattered', src: this.slots.desc, dst: plainDesc([T, K], adt, 'ab'), weighted: false });
    this.reduce = new combine.Primitive(cpd);
    // The local layer's configuration errors belong here, not inside forward() between two collectives
    // (a rank throwing there leaves the others waiting in the next exchange).
    this.localLayer(1);
  }

  /**
   * Runs the layer on this rank: `ARG.SRC` hidden `[T, K]`, `ARG.MOE_ROUTER_LOGITS` `[T, E]`, this
   * rank's `ARG.WEIGHTS` w13 `[G, K, 2I]` and `ARG.WEIGHTS_1` w2 `[G, I, K]` (plain `abc`: f32, or s8
   * with `quant: 'w8a8_dynamic'`), optional biases / scales as for `moe.layer`, `ARG.DST` `[T, K]`.
   * Resolves when this rank's output is written; every rank must call it (the all-to-alls are collective).
   * Argument errors throw before the first exchange.
   */
  async forward(strm: Stream, args: LayerArgs): Promise<void> {
    const { worldSize: P, topK: k, tokens: T, hidden: K, experts: E } = this.config;
    const G = this.localExperts;
    const hidden = args[ARG.SRC], dst = args[ARG.DST];
    if (!hidden || !dst || !args[ARG.MOE_ROUTER_LOGITS]) throw new DnnlError('invalid_arguments', 'moe.ExpertParallelRank.forward: ARG.SRC, ARG.MOE_ROUTER_LOGITS and ARG.DST are required');
    const adt = this.config.dataType ?? 'f32';
    for (const [id, name, md] of [[ARG.SRC, 'ARG.SRC', plainDesc([T, K], adt, 'ab')], [ARG.MOE_ROUTER_LOGITS, 'ARG.MOE_ROUTER_LOGITS', plainDesc([T, E], adt, 'ab')], [ARG.DST, 'ARG.DST', plainDesc([T, K], adt, 'ab')]] as const) {
      const m = args[id];
      check(m instanceof Memory && !m.isFreed && m.engine === this.engine, `moe.ExpertParallelRank.forward: ${name} must be a live Memory of the rank's engine`);
      check(m.desc.equals(md), `moe.ExpertParallelRank.forward: ${name} descriptor ${m.desc} does not match the rank's ${md}`);
    }
    this.routingPrim.execute(strm, { [ARG.SRC]: args[ARG.MOE_ROUTER_LOGITS]!, [ARG.MOE_TOPK_IDS]: this.ids, [ARG.MOE_TOPK_WEIGHTS]: this.weights, ...(args[ARG.MOE_CORRECTION_BIAS] ? { [ARG.MOE_CORRECTION_BIAS]: args[ARG.MOE_CORRECTION_BIAS] } : {}) });
    await strm.wait();
    // prepare: rows by destination rank, in (token, slot) order.
    const ids = this.ids.values as Int32Array, w = this.weights.values as Float32Array;
    const x = Float32Array.from(hidden.read());
    const perRank: number[][] = Array.from({ length: P }, () => []);
    for (let i = 0; i < T * k; i++) perRank[Math.floor(ids[i] / G)].push(i);
    const send = perRank.map((rows) => {
      const buf = new ArrayBuffer(rows.length * (META_INTS * 4 + K * 4));
      const meta = new Int32Array(buf, 0, rows.length * META_INTS), mf = new Float32Array(buf, 0, rows.length * META_INTS);
      const vals = new Float32Array(buf, rows.length * META_INTS * 4, rows.length * K);
      rows.forEach((i, r) => {
        const t = Math.floor(i / k);
        meta[r * META_INTS] = t;
        meta[r * META_INTS + 1] = i % k;
        meta[r * META_INTS + 2] = ids[i];
        mf[r * META_INTS + 3] = w[i];
        vals.set(x.subarray(t * K, t * K + K), r * K);
      });
      return new Uint8Array(buf);
    });
    // Byte views at any offset (a framed message): the row values are read as f32 / s32 words.
    const recv = (await this.allToAll(send)).map(aligned);
    // experts: received rows as single-slot tokens of a local layer.
    const counts = recv.map((b) => b.byteLength / (META_INTS * 4 + K * 4));
    check(recv.length === P && counts.every(Number.isInteger), `moe.ExpertParallelRank.forward: allToAll must return ${P} buffers of whole rows (${META_INTS * 4 + K * 4} bytes each), got ${recv.length} of ${recv.map((b) => b.byteLength).join(', ')} bytes`);
    const R = counts.reduce((a, b) => a + b, 0);
    const back = new Float32Array(R * K);
    if (R > 0) {
      const layer = this.localLayer(R);
      const ws = layer.workspace;
      const lid = ws.topkIds.values as Int32Array, lw = ws.topkWeights.values as Float32Array;
      const lx = new Float32Array(R * K);
      let r0 = 0;
      recv.forEach((b, p) => {
        const n = counts[p];
        const meta = new Int32Array(b.buffer, b.byteOffset, n * META_INTS), mf = new Float32Array(b.buffer, b.byteOffset, n * META_INTS);
        lx.set(new Float32Array(b.buffer.slice(b.byteOffset + n * META_INTS * 4, b.byteOffset + b.byteLength)), r0 * K);
        for (let r = 0; r < n; r++) {
          lid[r0 + r] = meta[r * META_INTS + 2] - this.config.rank * G;
          lw[r0 + r] = mf[r * META_INTS + 3];
        }
        r0 += n;
      });
      const lh = Memory.create(layer.pd.queryMd('hidden')!, this.engine);
      lh.write(lx);
      const largs: Record<number, Memory | undefined> = { ...args, [ARG.SRC]: lh, [ARG.DST]: undefined };
      // Up to gemm2: its f32 rows (weighted, one slot each) are what the single-rank layer reduces; the
      // local combine would round them to dataType first.
      for (const s of layer.stages) if (s.name !== 'route' && s.name !== 'combine') s.execute(strm, dropUndef(largs));
      await strm.wait();
      back.set((layer.workspace.expertOut.values as Float32Array).subarray(0, R * K));
      lh.free();
    }
    // finalize: results back to their source ranks, placed at token * topK + slot, then reduced.
    let r0 = 0;
    const reply = recv.map((b, p) => {
      const n = counts[p];
      const out = new Uint8Array(n * K * 4);
      out.set(new Uint8Array(back.buffer, r0 * K * 4, n * K * 4));
      r0 += n;
      return out;
    });
    const results = (await this.allToAll(reply)).map(aligned);
    const slots = this.slots.values as Float32Array;
    perRank.forEach((rows, q) => {
      const v = new Float32Array(results[q].buffer.slice(results[q].byteOffset, results[q].byteOffset + results[q].byteLength));
      rows.forEach((i, r) => slots.set(v.subarray(r * K, r * K + K), i * K));
    });
    this.reduce.execute(strm, { [ARG.SRC]: this.slots, [ARG.MOE_ROW_OF]: this.rowOf, [ARG.DST]: dst });
    await strm.wait();
  }

  /** The weights descriptors of the local layer (plain `[G, K, 2I]` / `[G, I, K]` unless the config gives others). */
  private localLayer(R: number): Primitive {
    let l = this.local.get(R);
    if (!l) {
      const c = this.config;
      const G = this.localExperts;
      const { rank: _r, worldSize: _w, ...rest } = c;
      void _r; void _w;
      const w13 = plainDesc([G, c.hidden, 2 * c.intermediate], c.quant === 'w8a8_dynamic' ? 's8' : 'f32', 'abc');
      const w2 = plainDesc([G, c.intermediate, c.hidden], c.quant === 'w8a8_dynamic' ? 's8' : 'f32', 'abc');
      // fused_scatter: gemm2 writes each row's weighted f32 result in row order (workspace.expertOut).
      l = new Primitive(new PrimitiveDesc(this.engine, { ...rest, tokens: R, topK: 1, experts: G, routing: {}, weights: { w13, w2 }, combine: 'fused_scatter' }));
      this.local.set(R, l);
    }
    return l;
  }
}

/** `b` itself when its offset is a multiple of 4 bytes, else a copy that is. */
function aligned(b: Uint8Array): Uint8Array {
  check(b instanceof Uint8Array, 'moe.ExpertParallelRank: allToAll must resolve to one Uint8Array per rank');
  return b.byteOffset % 4 === 0 ? b : b.slice();
}

function dropUndef(a: Record<number, Memory | undefined>): Record<number, Memory> {
  const out: Record<number, Memory> = {};
  for (const [k, v] of Object.entries(a)) if (v !== undefined) out[Number(k)] = v;
  return out;
}
