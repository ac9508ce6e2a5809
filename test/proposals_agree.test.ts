/**
 * The three RFC proposals run on one kernel core, so for the same data they must give bit-identical
 * results on the same engine: P1 (grouped memory descriptors), P2 (plain memory + grouped-offsets
 * attribute) and P3 (grouped_gemm over `expertViews` of the P2 buffers). Each case writes one set of
 * inputs, runs all three, and compares the raw stored bits of the whole dst span (sentinel rows past
 * the last offset included).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, dtBytes, grouped_gemm, matmul, memory, tag, type DataType,
} from '../src/index.js';
import { SENTINEL, attrFor, randomFor, readLogical, toleranceFor, writeLogical } from './helpers.js';
import { assertClose, refGroupedM, type RefPostOp } from './reference.js';
import {
  allFirst, allLast, balanced, cumulative, emptyFirst, emptyLast, emptyMiddle, geometricSkew, linearSkew, mulberry32, randomRouting,
} from './workloads.js';
import { PROPOSAL_CONFIGS, p2Attr, p3Args, rawBits, reorderInto, runtimeRows } from './proposal_helpers.js';

interface Variant {
  readonly srcDt: DataType;
  readonly weiDt: DataType;
  readonly dstDt: DataType;
  /** Weights as tag.any (packed on kernel engines), filled by reorders. */
  readonly packed: boolean;
  readonly postOps: readonly RefPostOp[];
}

const VARIANTS: ReadonlyArray<readonly [string, Variant]> = [
  ['f32', { srcDt: dt.f32, weiDt: dt.f32, dstDt: dt.f32, packed: false, postOps: [] }],
  ['f32, packed weights', { srcDt: dt.f32, weiDt: dt.f32, dstDt: dt.f32, packed: true, postOps: [] }],
  ['bf16, sum + relu', { srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16, packed: false, postOps: [{ kind: 'sum', scale: 0.5 }, { kind: 'relu', alpha: 0 }] }],
  ['f16, packed weights, linear', { srcDt: dt.f16, weiDt: dt.f16, dstDt: dt.f16, packed: true, postOps: [{ kind: 'linear', alpha: -1.5, beta: 0.25 }] }],
];

/** Routings: [name, G, K, N, sizes, total_M]. */
const ROUTINGS: ReadonlyArray<readonly [string, number, number, number, number[], number]> = [
  ['balanced, G = 8', 8, 37, 19, balanced(8, 101), 101],
  ['empty first expert, G = 8, rows past the last offset', 8, 37, 19, emptyFirst(8, 90), 101],
  ['empty middle expert, G = 9', 9, 37, 19, emptyMiddle(9, 101), 101],
  ['empty last expert, G = 8', 8, 37, 19, emptyLast(8, 101), 101],
  ['all tokens in the first expert, G = 32', 32, 37, 19, allFirst(32, 101), 101],
  ['all tokens in the last expert, G = 256', 256, 37, 19, allLast(256, 101), 101],
  ['linear skew, G = 256', 256, 37, 19, linearSkew(256, 101), 110],
  ['geometric skew, G = 16, K = 300, N = 140 (several tiles)', 16, 300, 140, geometricSkew(16, 150), 150],
  ['random routing, G = 64, K = 24, N = 40', 64, 24, 40, randomRouting(mulberry32(7), 64, 200), 200],
  ['E = 1', 1, 37, 19, [101], 101],
];

function firstBitDifference(a: readonly number[], b: readonly number[]): string | undefined {
  if (a.length !== b.length) return `lengths ${a.length} vs ${b.length}`;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return `element ${i}: ${a[i]} vs ${b[i]}`;
  return undefined;
}

describe.each(PROPOSAL_CONFIGS)('Proposals #1, #2 and #3 give bit-identical results [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  describe.each(VARIANTS)('%s', (_v, v) => {
    it.each(ROUTINGS)('%s', async (_r, G, K, N, sizes, totalM) => {
      const rng = mulberry32(G * 1000 + K);
      const used = sizes.reduce((a, b) => a + b, 0);
      const offs = cumulative(sizes);
      const x = randomFor(v.srcDt, rng, totalM * K);
      const w = randomFor(v.weiDt, rng, G * K * N);
      const prev = randomFor(v.dstDt, rng, totalM * N);
      prev.fill(SENTINEL, used * N);
      const mems: Memory[] = [];
      const keep = <T extends Memory>(m: T): T => (mems.push(m), m);
      try {
        const weiMd = memory.desc([G, K, N], v.weiDt, v.packed ? tag.any : tag.abc);
        const wPlain = keep(Memory.create(memory.desc([G, K, N], v.weiDt, tag.abc), eng));
        writeLogical(wPlain, w);

        // P1: grouped memory descriptors; dst shares src's offsets buffer.
        const src1Md = memory.desc.grouped([totalM, K], v.srcDt, G, [RUNTIME_DIM_VAL, K]);
        const dst1Md = memory.desc.grouped([totalM, N], v.dstDt, G, [RUNTIME_DIM_VAL, N]);
        const pd1 = new matmul.PrimitiveDesc(eng, src1Md, weiMd, dst1Md, attrFor(v.postOps));
        const wei = v.packed ? keep(reorderInto(eng, strm, wPlain, pd1.queryMd('weights')!)) : wPlain;
        const src1 = keep(Memory.create(src1Md, eng));
        const dst1 = keep(Memory.create(dst1Md, eng, [undefined, src1.handles[1]]));
        writeLogical(src1, x);
        writeLogical(dst1, prev);
        src1.offsets.set(offs);
        const before1 = readLogical(dst1);

        // P2: plain memory and the grouped-offsets attribute; same weights memory.
        const src2Md = memory.desc([totalM, K], v.srcDt, tag.ab), dst2Md = memory.desc([totalM, N], v.dstDt, tag.ab);
        const pd2 = new matmul.PrimitiveDesc(eng, src2Md, weiMd, dst2Md, p2Attr(G, v.postOps));
        expect(pd2.queryMd('weights')?.equals(wei.desc)).toBe(true);
        const src2 = keep(Memory.create(src2Md, eng));
        const dst2 = keep(Memory.create(dst2Md, eng));
        const offs2 = keep(Memory.create(pd2.queryMd('grouped_offsets')!, eng));
        writeLogical(src2, x);
        writeLogical(dst2, prev);
        (offs2.values as Int32Array).set(offs);

        // P3: views over the P2 src and dst; per-expert weights are views of the plain [G, K, N]
        // buffer (or, packed, reorders of those views into the layout the pd picked).
        const pd3 = new grouped_gemm.PrimitiveDesc(
          eng,
          sizes.map(() => runtimeRows(K, v.srcDt)),
          sizes.map(() => memory.desc([K, N], v.weiDt, v.packed ? tag.any : tag.ab)),
          sizes.map(() => runtimeRows(N, v.dstDt)),
          memory.desc([G], dt.s32, tag.x),
          attrFor(v.postOps),
        );
        const wBytes = K * N * dtBytes(v.weiDt, 1);
        const wViews = sizes.map((_s, g) => keep(Memory.create(memory.desc([K, N], v.weiDt, tag.ab), eng, wPlain.handles[0] + g * wBytes)));
        const weis = v.packed ? wViews.map((m, g) => keep(reorderInto(eng, strm, m, pd3.queryMd('weights', g)!))) : wViews;
        const srcs = grouped_gemm.expertViews(src2, offs).map(keep);
        const dsts = grouped_gemm.expertViews(dst2, offs).map(keep);
        const dims = keep(Memory.create(memory.desc([G], dt.s32, tag.x), eng));
        (dims.values as Int32Array).set(sizes);

        // The same implementation family runs all three.
        expect(pd2.implInfo).toBe(pd1.implInfo);
        expect(pd3.implInfo).toBe(pd1.implInfo);
        expect(pd1.implInfo).toMatch(opts.kernels === 'none' ? /^ref:/ : /^wasm:/);

        new matmul.Primitive(pd1).execute(strm, { [ARG.SRC]: src1, [ARG.WEIGHTS]: wei, [ARG.DST]: dst1 });
        new matmul.Primitive(pd2).execute(strm, { [ARG.SRC]: src2, [ARG.WEIGHTS]: wei, [ARG.DST]: dst2, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs2 });
        await strm.wait();
        const p1 = rawBits(dst1), p2 = rawBits(dst2);
        writeLogical(dst2, prev); // P3 writes through views of the P2 dst: restore the inputs of a sum
        new grouped_gemm.Primitive(pd3).execute(strm, p3Args(srcs, weis, dsts, dims));
        await strm.wait();
        const p3 = rawBits(dst2);

        expect(firstBitDifference(p1, p2), 'P1 vs P2').toBeUndefined();
        expect(firstBitDifference(p1, p3), 'P1 vs P3').toBeUndefined();
        // Not trivially equal: the shared result is the right one, and unrouted rows kept their sentinel.
        const got = readLogical(dst1);
        assertClose(got.subarray(0, used * N), refGroupedM(x, w, sizes, K, N, { postOps: v.postOps, prevDst: prev.subarray(0, used * N) }), toleranceFor(v.dstDt));
        expect([...got.subarray(used * N)]).toEqual([...before1.subarray(used * N)]);
      } finally {
        mems.forEach((m) => m.free());
      }
    });
  });
});
