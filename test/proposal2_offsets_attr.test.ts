/**
 * RFC Proposal #2: `new PrimitiveAttr().setGroupedOffsets(ARG.SRC, G, dt.s32)` on a matmul with plain
 * 2D src [total_M, K] / dst [total_M, N] and weights [G, K, N]; the G+1 offsets are a 1D s32 memory
 * (`pd.queryMd('grouped_offsets')`) passed as `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`. Numerics against
 * the float64 reference on every engine config, then every creation, execute-time and runtime rule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, Stream, algorithm, dt, matmul, memory, tag, type DataType } from '../src/index.js';
import { DISTRIBUTIONS, balanced, geometricSkew, linearSkew, mulberry32, randomRouting } from './workloads.js';
import { SENTINEL, expectDnnlError, expectDnnlReject, expectMatchesReference, readLogical, writeLogical } from './helpers.js';
import { assertClose, refGroupedM } from './reference.js';
import { PROPOSAL_CONFIGS, RT, expectUnchanged, p2Attr, runP2, setupP2, type P2Case } from './proposal_helpers.js';

const OFFS_ARG = ARG.ATTR_GROUPED_OFFSETS | ARG.SRC;
const OFFS_NAME = 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC';

describe('PrimitiveAttr.setGroupedOffsets (Proposal #2 attribute rules)', () => {
  it('records the argument, group count and offsets type; the attribute is no longer default', () => {
    const attr = new PrimitiveAttr();
    expect(attr.groupedOffsets).toBeUndefined();
    expect(attr.isDefault).toBe(true);
    expect(attr.setGroupedOffsets(ARG.SRC, 8, dt.s32)).toBe(attr);
    expect(attr.groupedOffsets).toEqual({ arg: ARG.SRC, groupCount: 8, offsetsDt: 's32' });
    expect(attr.isDefault).toBe(false);
    expect(attr.toString()).toContain('attr-grouped-offsets:src:g8:s32');
  });

  it('the offsets type defaults to s32', () => {
    expect(new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 3).groupedOffsets?.offsetsDt).toBe('s32');
  });

  it.each([
    ['ARG.DST', ARG.DST],
    ['ARG.WEIGHTS', ARG.WEIGHTS],
    ['ARG.BIAS', ARG.BIAS],
  ] as const)('only ARG.SRC can carry grouped offsets: %s is rejected', (_n, arg) => {
    expectDnnlError(() => new PrimitiveAttr().setGroupedOffsets(arg, 4, dt.s32), 'invalid_arguments', `only ARG.SRC can carry grouped offsets, got arg ${arg}`);
  });

  it.each([0, -1, 2.5, 2 ** 31, Number.NaN])('groupCount %s is rejected', (g) => {
    expectDnnlError(() => new PrimitiveAttr().setGroupedOffsets(ARG.SRC, g, dt.s32), 'invalid_arguments', `groupCount must be a positive int32, got ${g}`);
  });

  it('the largest int32 group count is accepted', () => {
    expect(new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 0x7fffffff).groupedOffsets?.groupCount).toBe(0x7fffffff);
  });

  it('an unknown offsets data type is invalid', () => {
    expectDnnlError(() => new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 4, 's64' as DataType), 'invalid_arguments', "unknown offsets data type 's64'");
  });

  it.each([dt.s8, dt.f32, dt.u8])('offsets data type %s is unimplemented (s32 only)', (t) => {
    expectDnnlError(() => new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 4, t), 'unimplemented', `offsetsDt must be s32, got ${t}`);
  });

  it('a rejected call leaves an earlier setting in place', () => {
    const attr = new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 5);
    expectDnnlError(() => attr.setGroupedOffsets(ARG.SRC, 0), 'invalid_arguments', 'groupCount');
    expect(attr.groupedOffsets?.groupCount).toBe(5);
  });
});

describe.each(PROPOSAL_CONFIGS)('Proposal #2: matmul with the grouped-offsets attribute [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: P2Case): Promise<void> => expectMatchesReference(await runP2(eng, strm, c));

  describe('numerics vs the float64 reference', () => {
    describe.each([32, 256])('G = %i, K = 37, N = 19, total_M = 101', (G) => {
      it.each(DISTRIBUTIONS)('%s', async (_name, gen) => {
        await run({ G, K: 37, N: 19, sizes: gen(G, 101), seed: G });
      });
    });

    it.each([1, 2])('random routing (seed %i), G = 64, K = 24, N = 40, 200 tokens', async (seed) => {
      await run({ G: 64, K: 24, N: 40, sizes: randomRouting(mulberry32(seed), 64, 200), seed });
    });

    it('E = 1 (one expert is a plain GEMM)', async () => {
      await run({ G: 1, K: 37, N: 19, sizes: [101] });
    });

    it('E = 1 with zero tokens: the whole dst keeps its sentinel', async () => {
      await run({ G: 1, K: 5, N: 3, sizes: [0], totalM: 6 });
    });

    it('all experts empty: nothing is written', async () => {
      await run({ G: 16, K: 7, N: 5, sizes: new Array<number>(16).fill(0), totalM: 9 });
    });

    it('rows past the last offset keep their sentinel', async () => {
      await run({ G: 8, K: 37, N: 19, sizes: balanced(8, 90), totalM: 101 });
    });

    it('K = 37, N = 19 with empty first, middle and last experts', async () => {
      await run({ G: 7, K: 37, N: 19, sizes: [0, 20, 13, 0, 40, 28, 0], totalM: 110 });
    });

    it('K = 1 and N = 1', async () => {
      await run({ G: 5, K: 1, N: 1, sizes: [0, 3, 0, 1, 2] });
    });

    it('acb weights ([G, N, K] storage)', async () => {
      await run({ G: 16, K: 37, N: 19, sizes: linearSkew(16, 101), wei: 'acb' });
    });

    it('groups larger than one tile (M_g > 64, N > 128, K > 256)', async () => {
      await run({ G: 3, K: 300, N: 140, sizes: [70, 0, 65], totalM: 140 });
    });

    describe('low precision', () => {
      it('bf16 src, weights and dst', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16 });
      });

      it('f16 src, weights and dst', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: balanced(8, 101), srcDt: dt.f16, weiDt: dt.f16, dstDt: dt.f16 });
      });

      it('bf16 src and dst, f32 weights, rows past the last offset keep their bits', async () => {
        await run({ G: 8, K: 11, N: 9, sizes: geometricSkew(8, 30), totalM: 37, srcDt: dt.bf16, dstDt: dt.bf16 });
      });

      it('f16 src and dst, bf16 weights, empty first and last experts', async () => {
        await run({ G: 6, K: 37, N: 19, sizes: [0, 30, 0, 41, 30, 0], srcDt: dt.f16, weiDt: dt.bf16, dstDt: dt.f16 });
      });
    });

    describe('packed weights (tag.any + reorder)', () => {
      it('the pd resolves tag.any; the layout is packed on kernel engines and plain on the reference', () => {
        const G = 4, K = 37, N = 19;
        const pd = new matmul.PrimitiveDesc(eng, memory.desc([50, K], dt.f32, tag.ab), memory.desc([G, K, N], dt.f32, tag.any), memory.desc([50, N], dt.f32, tag.ab), p2Attr(G));
        const w = pd.queryMd('weights')!;
        expect(w.dims).toEqual([G, K, N]);
        expect(w.format).toBe(opts.kernels === 'none' ? 'blocked' : 'packed');
      });

      it('f32, K = 37, N = 19', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: [0, 20, 13, 0, 40, 28, 0, 0], wei: 'any' });
      });

      it('bf16 weights, bf16 src/dst, rows past the last offset', async () => {
        await run({ G: 5, K: 37, N: 19, sizes: [10, 0, 30, 21, 0], totalM: 70, srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16, wei: 'any' });
      });

      it('packed, all tokens in the last expert, G = 32', async () => {
        await run({ G: 32, K: 37, N: 19, sizes: DISTRIBUTIONS[7][1](32, 101), wei: 'any' });
      });

      it('packed with relu and a sum post-op', async () => {
        await run({ G: 4, K: 37, N: 19, sizes: [30, 0, 40, 31], wei: 'any', postOps: [{ kind: 'sum', scale: 0.5 }, { kind: 'relu', alpha: 0 }] });
      });
    });

    describe('bias', () => {
      it.each([
        ['[G, N]', [6, 19]],
        ['[1, N]', [1, 19]],
        ['[G, 1]', [6, 1]],
      ] as const)('bias %s', async (_n, bias) => {
        await run({ G: 6, K: 37, N: 19, sizes: [20, 0, 31, 7, 0, 43], totalM: 110, bias });
      });
    });

    describe('post-ops', () => {
      it('relu', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), postOps: [{ kind: 'relu', alpha: 0 }] });
      });

      it('linear', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: geometricSkew(8, 101), postOps: [{ kind: 'linear', alpha: -2, beta: 0.5 }] });
      });

      it('sum leaves rows past the last offset alone', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: geometricSkew(8, 90), totalM: 101, postOps: [{ kind: 'sum', scale: 0.5 }] });
      });

      it('sum + leaky relu + linear with bias', async () => {
        await run({ G: 8, K: 37, N: 19, sizes: linearSkew(8, 101), bias: [8, 19], postOps: [{ kind: 'sum', scale: 1 }, { kind: 'relu', alpha: 0.25 }, { kind: 'linear', alpha: 3, beta: -1 }] });
      });

      it('sum + relu on bf16 dst', async () => {
        await run({ G: 4, K: 9, N: 7, sizes: [5, 0, 6, 2], totalM: 15, dstDt: dt.bf16, postOps: [{ kind: 'sum', scale: 1 }, { kind: 'relu', alpha: 0 }] });
      });
    });

    it('the offsets descriptor is pd.queryMd("grouped_offsets") = [G+1] s32 tag.x; matmuls without the attribute have none', () => {
      const G = 6;
      const pd = new matmul.PrimitiveDesc(eng, memory.desc([9, 4], dt.f32, tag.ab), memory.desc([G, 4, 3], dt.f32, tag.abc), memory.desc([9, 3], dt.f32, tag.ab), p2Attr(G));
      const md = pd.queryMd('grouped_offsets');
      expect(md?.equals(memory.desc([G + 1], dt.s32, tag.x))).toBe(true);
      expect(pd.queryMd('src')?.isGrouped).toBe(false);
      const dense = new matmul.PrimitiveDesc(eng, memory.desc([9, 4], dt.f32, tag.ab), memory.desc([4, 3], dt.f32, tag.ab), memory.desc([9, 3], dt.f32, tag.ab));
      expect(dense.queryMd('grouped_offsets')).toBeUndefined();
    });

    it('re-executing one primitive with new offsets recomputes with the new routing', async () => {
      const G = 6, K = 13, N = 11, totalM = 40;
      const f = setupP2(eng, strm, { G, K, N, sizes: balanced(G, totalM) });
      try {
        for (const sizes of [balanced(G, totalM), [40, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 40], [1, 2, 3, 4, 5, 6]]) {
          const used = sizes.reduce((a, b) => a + b, 0);
          writeLogical(f.dst, new Float64Array(totalM * N).fill(SENTINEL));
          let acc = 0;
          (f.offs.values as Int32Array).set([0, ...sizes.map((s) => (acc += s))]);
          f.prim.execute(strm, f.args());
          await strm.wait();
          const got = readLogical(f.dst);
          assertClose(got.subarray(0, used * N), refGroupedM(f.x, f.w, sizes, K, N));
          expect([...got.subarray(used * N)].every((v) => v === SENTINEL)).toBe(true);
        }
      } finally {
        f.free();
      }
    });
  });

  describe('pd rules (initOffsetsAttr)', () => {
    const G = 4, M = 10, K = 6, N = 5;
    const src = memory.desc([M, K], dt.f32, tag.ab);
    const wei = memory.desc([G, K, N], dt.f32, tag.abc);
    const dst = memory.desc([M, N], dt.f32, tag.ab);
    const pd = (s = src, w = wei, d = dst, attr = p2Attr(G)): matmul.PrimitiveDesc => new matmul.PrimitiveDesc(eng, s, w, d, attr);

    it('a valid problem is accepted as grouped_m with offsets from the attribute', () => {
      const p = pd().problem;
      expect(p.kind).toBe('grouped_m');
      expect(p.offsetsFrom).toBe('attr');
      expect([p.G, p.M, p.K, p.N]).toEqual([G, M, K, N]);
    });

    it('the kernels run it on kernel engines (the reference otherwise)', () => {
      expect(pd().implInfo).toMatch(opts.kernels === 'none' ? /^ref:/ : /^wasm:/);
    });

    it('post-op chains longer than the kernels take (8 after a GLU) fall back to the reference', () => {
      const attr = p2Attr(G);
      for (let i = 0; i < 9; i++) attr.postOps.appendEltwise(algorithm.eltwise_tanh);
      expect(pd(src, wei, dst, attr).implInfo).toMatch(/^ref:/);
    });

    it('grouped (Proposal #1) src/dst plus the attribute: use one or the other', () => {
      const gs = memory.desc.grouped([M, K], dt.f32, G, [RT, K]);
      const gd = memory.desc.grouped([M, N], dt.f32, G, [RT, N]);
      expectDnnlError(() => pd(gs, wei, gd), 'invalid_arguments', 'grouped-offsets attribute needs plain src and dst, not grouped descriptors');
    });

    it('src must be 2D', () => {
      expectDnnlError(() => pd(memory.desc([1, M, K], dt.f32, tag.abc)), 'invalid_arguments', 'with grouped offsets, src must be 2D [total_M, K], got 3 dims');
    });

    it('dst must be 2D', () => {
      expectDnnlError(() => pd(src, wei, memory.desc([1, M, N], dt.f32, tag.abc)), 'invalid_arguments', 'with grouped offsets, dst must be 2D [total_M, N], got 3 dims');
    });

    it('weights must be 3D [G, K, N]', () => {
      expectDnnlError(() => pd(src, memory.desc([K, N], dt.f32, tag.ab)), 'invalid_arguments', 'with grouped offsets, weights must be 3D [G, K, N], got 2 dims');
    });

    it("the attribute's group count must equal weights dims[0]", () => {
      expectDnnlError(() => pd(src, wei, dst, p2Attr(G + 1)), 'invalid_arguments', `grouped-offsets group count ${G + 1} must equal weights dims[0] = ${G}`);
    });

    it('weights dims[1] must equal src K', () => {
      expectDnnlError(() => pd(src, memory.desc([G, K + 1, N], dt.f32, tag.abc)), 'invalid_arguments', `weights dims[1] = ${K + 1} must equal src K = ${K}`);
    });

    it('dst rows must equal src rows', () => {
      expectDnnlError(() => pd(src, wei, memory.desc([M + 1, N], dt.f32, tag.ab)), 'invalid_arguments', `dst dims[0] = ${M + 1} must equal src total rows ${M}`);
    });

    it('dst columns must equal weights N', () => {
      expectDnnlError(() => pd(src, wei, memory.desc([M, N + 2], dt.f32, tag.ab)), 'invalid_arguments', `dst dims[1] = ${N + 2} must equal weights N = ${N}`);
    });

    it('bias must be 2D [G, N]', () => {
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, wei, memory.desc([G, 1, N], dt.f32, tag.abc), dst, p2Attr(G)), 'invalid_arguments', `bias must have 2 dims [${G},${N}]`);
    });

    it('bias dims must be G|1 and N|1', () => {
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, wei, memory.desc([G, N + 1], dt.f32, tag.ab), dst, p2Attr(G)), 'invalid_arguments', `bias dims[1] = ${N + 1} must equal ${N} or be 1`);
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, wei, memory.desc([2, N], dt.f32, tag.ab), dst, p2Attr(G)), 'invalid_arguments', `bias dims[0] = 2 must equal ${G} or be 1`);
    });
  });

  describe('execute-time argument rules', () => {
    const G = 3, K = 4, N = 6;

    it('the offsets argument is required', async () => {
      const f = setupP2(eng, strm, { G, K, N, sizes: [2, 3, 4] });
      try {
        await strm.wait();
        const before = f.dst.read();
        expectDnnlError(() => f.prim.execute(strm, f.args({ [OFFS_ARG]: undefined })), 'invalid_arguments', `matmul.execute: missing argument ${OFFS_NAME}`);
        await strm.wait();
        expectUnchanged(before, f.dst.read());
      } finally {
        f.free();
      }
    });

    it.each([
      ['[G] instead of [G+1]', () => memory.desc([G], dt.s32, tag.x)],
      ['[G+2]', () => memory.desc([G + 2], dt.s32, tag.x)],
      ['f32 instead of s32', () => memory.desc([G + 1], dt.f32, tag.x)],
      ['2D [1, G+1]', () => memory.desc([1, G + 1], dt.s32, tag.ab)],
    ] as const)('the offsets descriptor must match queryMd("grouped_offsets"): %s', async (_n, md) => {
      const f = setupP2(eng, strm, { G, K, N, sizes: [2, 3, 4] });
      const bad = Memory.create(md(), eng);
      try {
        await strm.wait();
        expectDnnlError(() => f.prim.execute(strm, f.args({ [OFFS_ARG]: bad })), 'invalid_arguments', `matmul.execute: ${OFFS_NAME} descriptor ${bad.desc} does not match the primitive's`);
      } finally {
        bad.free();
        f.free();
      }
    });

    it('freed offsets memory is rejected', async () => {
      const f = setupP2(eng, strm, { G, K, N, sizes: [2, 3, 4] });
      try {
        await strm.wait();
        f.offs.free();
        expectDnnlError(() => f.prim.execute(strm, f.args()), 'invalid_arguments', `${OFFS_NAME} was freed`);
      } finally {
        f.free();
      }
    });

    it('offsets memory of another engine is rejected', async () => {
      const other = await Engine.create({ threads: 1, kernels: 'none' });
      const f = setupP2(eng, strm, { G, K, N, sizes: [2, 3, 4] });
      try {
        await strm.wait();
        const foreign = Memory.create(f.offs.desc, other);
        expectDnnlError(() => f.prim.execute(strm, f.args({ [OFFS_ARG]: foreign })), 'invalid_arguments', `${OFFS_NAME} belongs to another engine`);
      } finally {
        f.free();
        other.release();
      }
    });

    it('src, weights and dst are still required', async () => {
      const f = setupP2(eng, strm, { G, K, N, sizes: [2, 3, 4] });
      try {
        await strm.wait();
        expectDnnlError(() => f.prim.execute(strm, f.args({ [ARG.SRC]: undefined })), 'invalid_arguments', 'missing argument ARG.SRC');
        expectDnnlError(() => f.prim.execute(strm, f.args({ [ARG.DST]: undefined })), 'invalid_arguments', 'missing argument ARG.DST');
      } finally {
        f.free();
      }
    });
  });

  describe('runtime offsets rules (reported by stream.wait(), dst untouched)', () => {
    const G = 3, K = 4, N = 6, TOTAL = 10;
    const SIZES = [2, 3, 4]; // offsets [0, 2, 5, 9]: row 9 stays unrouted

    async function reject(offs: number[], fragment: string, c: Partial<P2Case> = {}): Promise<void> {
      const f = setupP2(eng, strm, { G, K, N, sizes: SIZES, totalM: TOTAL, ...c });
      try {
        await strm.wait();
        (f.offs.values as Int32Array).set(offs);
        const before = f.dst.read();
        expect(() => f.prim.execute(strm, f.args())).not.toThrow(); // runtime data: not known wrong at execute
        const e = await expectDnnlReject(strm.wait(), 'invalid_arguments', fragment);
        expect(e.message).toContain(OFFS_NAME);
        expectUnchanged(before, f.dst.read());
      } finally {
        f.free();
      }
    }

    it('offsets[0] must be 0', async () => {
      await reject([1, 2, 5, 9], `${OFFS_NAME} offsets[0] must be 0, got 1`);
    });

    it('offsets must be non-decreasing', async () => {
      await reject([0, 5, 3, 9], `${OFFS_NAME} offsets must be non-decreasing: offsets[2] = 3 < offsets[1] = 5`);
    });

    it('a negative offset is a decrease', async () => {
      await reject([0, -1, 5, 9], `${OFFS_NAME} offsets must be non-decreasing: offsets[1] = -1 < offsets[0] = 0`);
    });

    it('the last offset must not exceed total_M', async () => {
      await reject([0, 2, 5, 11], `${OFFS_NAME} offsets[3] = 11 exceeds the total extent 10 of dims[0]`);
    });

    it('a huge last offset is caught (no out-of-bounds write)', async () => {
      await reject([0, 2, 5, 0x7fffffff], `${OFFS_NAME} offsets[3] = 2147483647 exceeds the total extent 10`);
    });

    it('with a sum post-op, bf16 dst and packed weights, dst is still untouched', async () => {
      await reject([0, 6, 5, 9], `${OFFS_NAME} offsets must be non-decreasing: offsets[2] = 5 < offsets[1] = 6`, { dstDt: dt.bf16, wei: 'any', postOps: [{ kind: 'sum', scale: 1 }] });
    });

    it('the stream keeps working after an error; the next wait resolves', async () => {
      const f = setupP2(eng, strm, { G, K, N, sizes: SIZES, totalM: TOTAL });
      try {
        await strm.wait();
        (f.offs.values as Int32Array).set([0, 9, 5, 9]);
        f.prim.execute(strm, f.args());
        await expectDnnlReject(strm.wait(), 'invalid_arguments', 'non-decreasing');
        await expect(strm.wait()).resolves.toBeUndefined();
        (f.offs.values as Int32Array).set([0, 2, 5, 9]);
        f.prim.execute(strm, f.args());
        await strm.wait();
        assertClose(readLogical(f.dst).subarray(0, 9 * N), refGroupedM(f.x, f.w, SIZES, K, N));
      } finally {
        f.free();
      }
    });

  });
});
