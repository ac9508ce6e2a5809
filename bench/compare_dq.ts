/**
 * `npm run compare` rows with dynamic int8 activations (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`, `:dq`,
 * rfcs/0006): the examples' three proposals (examples/p1-grouped-memory.ts, p2-offsets-attr.ts,
 * p3-pointer-array.ts) on int8 / int4 weight-only experts with per-column scales or, the `k32` formats, scales
 * per 32-K block and column. Each takes the user's `[E, K, N]` abc weights and `[E, N]` (`[E, K / 32, N]`) scales
 * and puts them into the layout its pd picks (packed panels with their scales: the reorder is part of the user
 * code, and its output part of the extra heap).
 * User code sits between `// user-code-begin <name>` and `// user-code-end <name>`, counted as the examples'.
 * The per-step code repeats the examples' on purpose: it is the user code whose lines and objects are counted.
 */
import { ARG, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, dt, grouped_gemm, matmul, memory, offsets, reorder, tag, type DataType, type Engine, type Stream } from '../src/index.js';
import type { MoeShape, ProposalRunner } from '../examples/proposals_harness.js';
import { fillRandom } from './timing.js';
import { VARIANTS } from './quant_bench.js';

/** Integer weights: s8 / s4 codes with per-column scales, or (`kBlock`) f32 scales per `kBlock` rows of K and column. */
export interface QuantWeightsFormat {
  readonly wdt: DataType;
  readonly kBlock?: number;
}

/**
 * The compare's integer weights formats, named and built as bench/quant_bench.ts's weight-only variants of the
 * same names (`w4k32`: MatMulNBits-style block 32); `<name>:dq` runs one with dynamic int8 activations.
 */
export const QUANT_WEIGHTS_FORMATS: Readonly<Record<string, QuantWeightsFormat>> = Object.fromEntries(['w8', 'w4', 'w4k32', 'w8k32'].map((name) => {
  const v = VARIANTS.find((x) => x.name === name)!;
  if (v.kBlock && v.kBlock.dt !== dt.f32) throw new Error(`compare: ${name}'s K-block scales are ${v.kBlock.dt}; the compare writes f32 scales`);
  return [name, { wdt: v.wei!, ...(v.kBlock ? { kBlock: v.kBlock.k } : {}) }];
}));

/**
 * The integer formats' weights, shared by both engines' compares: integer codes [E, K, N] (s8: -127..127, s4: -7..7)
 * and per-column scales [E, N], or [E, K / kBlock, N] (s4's 16x larger, so all formats give outputs of one magnitude).
 */
export function dqWeightsData(E: number, K: number, N: number, { wdt, kBlock }: QuantWeightsFormat): { codes: Float32Array; scales: Float32Array } {
  const codes = new Float32Array(E * K * N);
  fillRandom(codes, 9, wdt === dt.s4 ? 14 : 254);
  codes.forEach((v, i) => (codes[i] = Math.round(v)));
  const scales = new Float32Array(E * (kBlock ? K / kBlock : 1) * N);
  fillRandom(scales, 6, 1e-3);
  scales.forEach((v, i) => (scales[i] = (wdt === dt.s4 ? 16 : 1) * (2e-4 + Math.abs(v))));
  return { codes, scales };
}

/**
 * A proposal on `weights` ([E, K, N] s8 / s4 abc) with per-column `scales` ([E, N], expert-major) or, with
 * `kBlock`, scales per `kBlock` rows of K and column ([E, K / kBlock, N]).
 */
export type DqFactory = (eng: Engine, strm: Stream, shape: MoeShape, weights: Memory, scales: Float32Array, kBlock?: number) => ProposalRunner;

/** Proposal #1 `:dq`: the grouped src / dst of examples/p1-grouped-memory.ts, weights packed once. */
export const createP1Dq: DqFactory = (eng, strm, { E, K, N, capacity }, weights, scales, kBlock) => {
  // user-code-begin p1
  const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8).setScales(ARG.WEIGHTS, kBlock ? 7 : 5, kBlock ? [1, kBlock, 1] : []);
  const srcMd = memory.desc.grouped([capacity, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([capacity, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], weights.desc.dataType, tag.any), dstMd, attr);
  const wei = Memory.create(pd.queryMd('weights')!, eng); // packed panels holding their scales
  const sc = Memory.create(pd.queryMd('scales:weights')!, eng).write(scales);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, weights.desc, wei.desc)).execute(strm, { [ARG.FROM]: weights, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc });
  const mm = new matmul.Primitive(pd);
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  const step = (sizes: readonly number[]): void => {
    offsets.fromSizes(sizes, src.offsets);
    mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  };
  // user-code-end p1
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};

/** Proposal #2 `:dq`: plain src / dst and the offsets attribute of examples/p2-offsets-attr.ts. */
export const createP2Dq: DqFactory = (eng, strm, { E, K, N, capacity }, weights, scales, kBlock) => {
  // user-code-begin p2
  const attr = new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E, dt.s32).setDynamicQuantization(ARG.SRC, dt.s8).setScales(ARG.WEIGHTS, kBlock ? 7 : 5, kBlock ? [1, kBlock, 1] : []);
  const srcMd = memory.desc([capacity, K], dt.f32, tag.ab);
  const dstMd = memory.desc([capacity, N], dt.f32, tag.ab);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], weights.desc.dataType, tag.any), dstMd, attr);
  const wei = Memory.create(pd.queryMd('weights')!, eng);
  const sc = Memory.create(pd.queryMd('scales:weights')!, eng).write(scales);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, weights.desc, wei.desc)).execute(strm, { [ARG.FROM]: weights, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc });
  const mm = new matmul.Primitive(pd);
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng);
  const offs = Memory.create(memory.desc([E + 1], dt.s32, tag.x), eng);
  const step = (sizes: readonly number[]): void => {
    offsets.fromSizes(sizes, offs.values as Int32Array);
    mm.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs });
  };
  // user-code-end p2
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};

/** Proposal #3 `:dq`: examples/p3-pointer-array.ts's per-step expert views; every expert's weights packed on their own. */
export const createP3Dq: DqFactory = (eng, strm, { E, K, N, capacity }, weights, scales, kBlock) => {
  // user-code-begin p3
  const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8).setScales(ARG.MULTIPLE_WEIGHTS, kBlock ? 3 : 2, kBlock ? [kBlock, 1] : []);
  const wdt = weights.desc.dataType;
  const srcMds = Array.from({ length: E }, () => memory.desc([RUNTIME_DIM_VAL, K], dt.f32, tag.ab));
  const userMds = Array.from({ length: E }, () => memory.desc([K, N], wdt, tag.ab));
  const dstMds = Array.from({ length: E }, () => memory.desc([RUNTIME_DIM_VAL, N], dt.f32, tag.ab));
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, Array.from({ length: E }, () => memory.desc([K, N], wdt, tag.any)), dstMds, dimsMd, attr);
  const gemm = new grouped_gemm.Primitive(pd);
  const wei = userMds.map((md, i) => {
    const user = Memory.create(md, eng, weights.handles[0] + i * md.getSize());
    const w = Memory.create(pd.queryMd('weights', i)!, eng);
    const sc = Memory.create(pd.queryMd('scales:weights', i)!, eng).write(scales.subarray(i * scales.length / E, (i + 1) * scales.length / E));
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, md, w.desc)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: w, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc });
    return w;
  });
  const src = Memory.create(memory.desc([capacity, K], dt.f32, tag.ab), eng);
  const dst = Memory.create(memory.desc([capacity, N], dt.f32, tag.ab), eng);
  const dims = Memory.create(dimsMd, eng);
  const step = (sizes: readonly number[]): void => {
    const offs = offsets.fromSizes(sizes);
    const srcViews = grouped_gemm.expertViews(src, offs);
    const dstViews = grouped_gemm.expertViews(dst, offs);
    (dims.values as Int32Array).set(sizes);
    const args: Record<number, Memory> = { [ARG.RUNTIME_DIMS]: dims };
    for (let i = 0; i < E; i++) {
      args[ARG.MULTIPLE_SRC + i] = srcViews[i];
      args[ARG.MULTIPLE_WEIGHTS + i] = wei[i];
      args[ARG.MULTIPLE_DST + i] = dstViews[i];
    }
    gemm.execute(strm, args);
  };
  // user-code-end p3
  return { srcValues: src.values as Float32Array, dstValues: dst.values as Float32Array, step };
};
