/**
 * One MoE layer over int weight codes with f32 scales (per column, or in K blocks of `blk`), as the quantized
 * layer tests build it: codes and scales reordered into the layer's packed `tag.any` weights, one execution.
 * Shared by moe_layer_dynamic_int8.test.ts and relaxed_accumulation.test.ts.
 */
import { ARG, type Engine, Memory, type Stream, dt, memory, moe, reorder, tag, type DataType } from '../src/index.js';

export interface QuantLayerCase {
  readonly T: number;
  readonly K: number;
  readonly I: number;
  readonly E: number;
  readonly topK: number;
  readonly wdt: DataType;
  /** K block of the scales (rows of w13 / w2 per scale); 0: one scale per expert and column. */
  readonly blk: number;
  /** Codes [E, K, 2I] / [E, I, K] and their scales ([E, K / blk, 2I] / [E, I / blk, K], or [E, 2I] / [E, K]). */
  readonly c13: ArrayLike<number>;
  readonly c2: ArrayLike<number>;
  readonly s13: ArrayLike<number>;
  readonly s2: ArrayLike<number>;
  readonly hidden: ArrayLike<number>;
  readonly logits: ArrayLike<number>;
  /** The option under test (dynamicQuantization, accumulationMode). */
  readonly options?: Partial<moe.layer.LayerConfig>;
}

export interface QuantLayerRun {
  readonly out: Float32Array;
  readonly ids: Int32Array;
  readonly weights: Float32Array;
  /** The two routed GEMMs' implInfo. */
  readonly impl: string[];
  /** The packed w13 descriptor. */
  readonly w13: string;
}

export async function runQuantLayer(eng: Engine, strm: Stream, c: QuantLayerCase): Promise<QuantLayerRun> {
  const { T, K, I, E, topK, wdt, blk } = c;
  const scales = blk ? { mask: 7, groups: [1, blk, 1] } : { mask: 5 };
  const pd = new moe.layer.PrimitiveDesc(eng, {
    tokens: T, hidden: K, intermediate: I, experts: E, topK, routing: { renormalize: true }, glu: { alg: 'glu_swiglu', layout: 'halves' },
    weights: { w13: memory.desc([E, K, 2 * I], wdt, tag.any), w2: memory.desc([E, I, K], wdt, tag.any) },
    weightScales: { w13: scales, w2: scales }, ...c.options,
  });
  const plain = (dims: number[], v: ArrayLike<number>, t: DataType = dt.f32): Memory =>
    Memory.create(memory.desc(dims, t, dims.length === 3 ? tag.abc : tag.ab), eng).write(v);
  const W13 = Memory.create(pd.queryMd('w13')!, eng), W2 = Memory.create(pd.queryMd('w2')!, eng);
  const sdims = (R: number, C: number): number[] => (blk ? [E, R / blk, C] : [E, C]);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, memory.desc([E, K, 2 * I], wdt, tag.abc), W13.desc)).execute(strm, { [ARG.FROM]: plain([E, K, 2 * I], c.c13, wdt), [ARG.TO]: W13, [ARG.ATTR_SCALES | ARG.WEIGHTS]: plain(sdims(K, 2 * I), c.s13) });
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, memory.desc([E, I, K], wdt, tag.abc), W2.desc)).execute(strm, { [ARG.FROM]: plain([E, I, K], c.c2, wdt), [ARG.TO]: W2, [ARG.ATTR_SCALES | ARG.WEIGHTS]: plain(sdims(I, K), c.s2) });
  const out = Memory.create(pd.queryMd('dst')!, eng);
  const prim = new moe.layer.Primitive(pd);
  prim.execute(strm, { [ARG.SRC]: plain([T, K], c.hidden), [ARG.MOE_ROUTER_LOGITS]: plain([T, E], c.logits), [ARG.WEIGHTS]: W13, [ARG.WEIGHTS_1]: W2, [ARG.DST]: out });
  await strm.wait();
  return {
    out: Float32Array.from(out.values as Float32Array),
    ids: Int32Array.from(prim.workspace.topkIds.values as Int32Array),
    weights: Float32Array.from(prim.workspace.topkWeights.values as Float32Array),
    impl: [pd.gemm1.implInfo, pd.gemm2.implInfo],
    w13: pd.queryMd('w13')!.toString(),
  };
}
