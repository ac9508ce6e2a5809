/**
 * RFC Proposal #3: `grouped_gemm`, a pointer-array grouped GEMM. Expert i has its own descriptors
 * src_i [RUNTIME_DIM_VAL, K_i], weights_i [K_i, N_i] (ab / ba / tag.any), dst_i [RUNTIME_DIM_VAL, N_i];
 * rows per expert arrive at execution in `ARG.RUNTIME_DIMS`. Numerics against the float64 reference
 * on every engine config (experts as `expertViews` of one buffer, or in separate allocations), then
 * every creation, execute-time and runtime rule, and `expertViews`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, Stream, algorithm, dt, dtBytes, grouped_gemm, memory, tag, type DataType,
} from '../src/index.js';
import { DISTRIBUTIONS, balanced, cumulative, geometricSkew, linearSkew, mulberry32, randomRouting } from './workloads.js';
import { SENTINEL, expectDnnlError, expectDnnlReject, expectMatchesReference, readLogical, writeLogical } from './helpers.js';
import { assertClose, refGroupedM } from './reference.js';
import {
  PROPOSAL_CONFIGS, RT, expectUnchanged, p2Attr, p3Args, rowBytes, runP3, runtimeRows, setupP3, type P3Case, type P3Expert,
} from './proposal_helpers.js';

/** Experts of equal K and N with the given row counts. */
const same = (sizes: readonly number[], K: number, N: number, extra: Partial<P3Expert> = {}): P3Expert[] => sizes.map((rows) => ({ K, N, rows, ...extra }));

/** The three experts of different shapes from the RFC discussion: (K, N) = (5, 7), (33, 8), (64, 1). */
const MIXED = (rows: readonly [number, number, number], cap?: readonly [number, number, number]): P3Expert[] => [
  { K: 5, N: 7, rows: rows[0], cap: cap?.[0] },
  { K: 33, N: 8, rows: rows[1], cap: cap?.[1] },
  { K: 64, N: 1, rows: rows[2], cap: cap?.[2] },
];

describe.each(PROPOSAL_CONFIGS)('Proposal #3: grouped_gemm [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: P3Case): Promise<void> => expectMatchesReference(await runP3(eng, strm, c));

  describe('numerics vs the float64 reference', () => {
    describe.each([32, 256])('expertViews of one buffer, G = %i, K = 37, N = 19, 101 tokens', (G) => {
      it.each(DISTRIBUTIONS)('%s', async (_name, gen) => {
        await run({ layout: 'views', experts: same(gen(G, 101), 37, 19), seed: G });
      });
    });

    it.each([1, 2])('random routing (seed %i), G = 64, K = 24, N = 40, 200 tokens', async (seed) => {
      await run({ layout: 'views', experts: same(randomRouting(mulberry32(seed), 64, 200), 24, 40), seed });
    });

    it('E = 1 over a view (a plain GEMM)', async () => {
      await run({ layout: 'views', experts: same([101], 37, 19) });
    });

    it('E = 1 in its own allocation, rows past M_0 keep their sentinel', async () => {
      await run({ layout: 'separate', experts: [{ K: 37, N: 19, rows: 50, cap: 64 }] });
    });

    it('E = 1 with zero rows: nothing is written', async () => {
      await run({ layout: 'separate', experts: [{ K: 5, N: 3, rows: 0, cap: 6 }] });
    });

    it('rows past the last expert of the views keep their sentinel', async () => {
      await run({ layout: 'views', experts: same(balanced(8, 90), 37, 19), totalM: 101 });
    });

    it('empty first, middle and last experts over views', async () => {
      await run({ layout: 'views', experts: same([0, 20, 13, 0, 40, 28, 0], 37, 19), totalM: 110 });
    });

    it('K = 1 and N = 1', async () => {
      await run({ layout: 'views', experts: same([0, 3, 0, 1, 2], 1, 1) });
    });

    it('groups larger than one tile (M_i > 64, N > 128, K > 256)', async () => {
      await run({ layout: 'separate', experts: [{ K: 300, N: 140, rows: 70 }, { K: 300, N: 140, rows: 0, cap: 3 }, { K: 300, N: 140, rows: 65, cap: 80 }] });
    });

    describe('experts of different K and N, separate allocations', () => {
      it('(K, N) = (5, 7), (33, 8), (64, 1)', async () => {
        await run({ layout: 'separate', experts: MIXED([9, 70, 33]) });
      });

      it('larger allocations than rows: rows past M_i keep their sentinel', async () => {
        await run({ layout: 'separate', experts: MIXED([9, 70, 33], [16, 71, 40]) });
      });

      it('an empty expert in the middle, allocated but untouched', async () => {
        await run({ layout: 'separate', experts: MIXED([4, 0, 5], [4, 12, 8]) });
      });

      it('empty first and last experts', async () => {
        await run({ layout: 'separate', experts: MIXED([0, 11, 0], [3, 11, 2]) });
      });

      it('equal shapes but separate allocations (not views)', async () => {
        await run({ layout: 'separate', experts: same([10, 0, 31, 7], 37, 19).map((e, i) => ({ ...e, cap: e.rows + i })) });
      });

      it('bf16 src/weights/dst', async () => {
        await run({ layout: 'separate', experts: MIXED([9, 70, 33], [10, 70, 35]), srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16 });
      });

      it('f16 src/weights/dst with sum + relu', async () => {
        await run({ layout: 'separate', experts: MIXED([9, 70, 33], [10, 70, 35]), srcDt: dt.f16, weiDt: dt.f16, dstDt: dt.f16, postOps: [{ kind: 'sum', scale: 0.5 }, { kind: 'relu', alpha: 0 }] });
      });

      it('packed weights (tag.any + reorder) per expert', async () => {
        await run({ layout: 'separate', experts: MIXED([9, 70, 33], [12, 70, 33]).map((e) => ({ ...e, wei: 'any' })) });
      });
    });

    describe('low precision', () => {
      it('bf16 src, weights and dst over views', async () => {
        await run({ layout: 'views', experts: same(linearSkew(8, 101), 37, 19), srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16 });
      });

      it('f16 src, weights and dst over views', async () => {
        await run({ layout: 'views', experts: same(balanced(8, 101), 37, 19), srcDt: dt.f16, weiDt: dt.f16, dstDt: dt.f16 });
      });

      it('bf16 src and dst, f32 weights, rows past the views keep their bits', async () => {
        await run({ layout: 'views', experts: same(geometricSkew(8, 30), 11, 9), totalM: 37, srcDt: dt.bf16, dstDt: dt.bf16 });
      });

      it('f16 src and dst, bf16 weights', async () => {
        await run({ layout: 'views', experts: same([0, 30, 0, 41, 30, 0], 37, 19), srcDt: dt.f16, weiDt: dt.bf16, dstDt: dt.f16 });
      });
    });

    describe('weights layouts', () => {
      it('ba weights ([N, K] storage) for every expert', async () => {
        await run({ layout: 'views', experts: same(linearSkew(6, 101), 37, 19, { wei: 'ba' }) });
      });

      it('tag.any resolves per expert: packed on kernel engines, plain ab on the reference', () => {
        const pd = new grouped_gemm.PrimitiveDesc(eng, [runtimeRows(5, dt.f32), runtimeRows(33, dt.f32)], [memory.desc([5, 7], dt.f32, tag.any), memory.desc([33, 8], dt.f32, tag.ab)], [runtimeRows(7, dt.f32), runtimeRows(8, dt.f32)], memory.desc([2], dt.s32, tag.x));
        const w0 = pd.queryMd('weights', 0)!;
        expect(w0.dims).toEqual([5, 7]);
        expect(w0.format).toBe(opts.kernels === 'none' ? 'blocked' : 'packed');
        expect(pd.queryMd('weights', 1)?.equals(memory.desc([33, 8], dt.f32, tag.ab))).toBe(true);
        expect(pd.queryMd('weights', 2)).toBeUndefined();
        expect(pd.queryMd('runtime_dims')?.equals(memory.desc([2], dt.s32, tag.x))).toBe(true);
      });

      it('packed weights over views, f32, empty experts', async () => {
        await run({ layout: 'views', experts: same([0, 20, 13, 0, 40, 28, 0, 0], 37, 19, { wei: 'any' }) });
      });

      it('packed bf16 weights with bf16 src/dst', async () => {
        await run({ layout: 'views', experts: same([10, 0, 30, 21, 0], 37, 19, { wei: 'any' }), totalM: 70, srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16 });
      });

      it('ab, ba and packed weights mixed across experts (f32)', async () => {
        const layouts = ['any', 'ab', 'ba', 'any', 'ba'] as const;
        await run({ layout: 'separate', experts: [3, 17, 0, 40, 9].map((rows, i) => ({ K: 13 + i, N: 9 + 2 * i, rows, wei: layouts[i] })) });
      });

      it.each([dt.bf16, dt.f16])('ab, ba and packed weights mixed across experts (%s weights, packed first)', async (t) => {
        const layouts = ['any', 'ab', 'ba', 'any', 'ab'] as const;
        await run({ layout: 'separate', weiDt: t, experts: [3, 17, 1, 40, 9].map((rows, i) => ({ K: 13 + i, N: 9 + 2 * i, rows, wei: layouts[i] })) });
      });

      it('plain bf16 first, then packed', async () => {
        const layouts = ['ab', 'any', 'ba'] as const;
        await run({ layout: 'separate', weiDt: dt.bf16, experts: [7, 17, 9].map((rows, i) => ({ K: 13, N: 11, rows, wei: layouts[i] })) });
      });
    });

    describe('post-ops', () => {
      it('relu', async () => {
        await run({ layout: 'views', experts: same(linearSkew(8, 101), 37, 19), postOps: [{ kind: 'relu', alpha: 0 }] });
      });

      it('linear', async () => {
        await run({ layout: 'views', experts: same(geometricSkew(8, 101), 37, 19), postOps: [{ kind: 'linear', alpha: -2, beta: 0.5 }] });
      });

      it('sum leaves rows past the last expert alone', async () => {
        await run({ layout: 'views', experts: same(geometricSkew(8, 90), 37, 19), totalM: 101, postOps: [{ kind: 'sum', scale: 0.5 }] });
      });

      it('sum + leaky relu + linear, experts of different shapes', async () => {
        await run({ layout: 'separate', experts: MIXED([9, 70, 33], [11, 72, 33]), postOps: [{ kind: 'sum', scale: 1 }, { kind: 'relu', alpha: 0.25 }, { kind: 'linear', alpha: 3, beta: -1 }] });
      });

      it('sum + relu on bf16 dst', async () => {
        await run({ layout: 'views', experts: same([5, 0, 6, 2], 9, 7), totalM: 15, dstDt: dt.bf16, postOps: [{ kind: 'sum', scale: 1 }, { kind: 'relu', alpha: 0 }] });
      });

      it('a post-op chain longer than the kernels take falls back to the reference', async () => {
        const attr = new PrimitiveAttr();
        for (let i = 0; i < 9; i++) attr.postOps.appendEltwise(algorithm.eltwise_tanh);
        const pd = new grouped_gemm.PrimitiveDesc(eng, [runtimeRows(3, dt.f32)], [memory.desc([3, 4], dt.f32, tag.ab)], [runtimeRows(4, dt.f32)], memory.desc([1], dt.s32, tag.x), attr);
        expect(pd.implInfo).toMatch(/^ref:/);
      });
    });

    it('the kernels run it on kernel engines (the reference otherwise)', () => {
      const pd = new grouped_gemm.PrimitiveDesc(eng, [runtimeRows(3, dt.f32)], [memory.desc([3, 4], dt.f32, tag.ab)], [runtimeRows(4, dt.f32)], memory.desc([1], dt.s32, tag.x));
      expect(pd.implInfo).toMatch(opts.kernels === 'none' ? /^ref:/ : /^wasm:/);
    });

    it('one primitive re-executed with new views and runtime dims follows the new routing', async () => {
      const G = 6, K = 13, N = 11, totalM = 40;
      const f = setupP3(eng, strm, { layout: 'views', experts: same(balanced(G, totalM), K, N) });
      const x = readLogical(f.srcParents[0]);
      const w = new Float64Array(G * K * N);
      f.ws.forEach((wi, g) => w.set(wi, g * K * N));
      try {
        await strm.wait();
        for (const sizes of [balanced(G, totalM), [40, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 40], [1, 2, 3, 4, 5, 6]]) {
          const used = sizes.reduce((a, b) => a + b, 0);
          writeLogical(f.dstParents[0], new Float64Array(totalM * N).fill(SENTINEL));
          const offs = cumulative(sizes);
          const srcs = grouped_gemm.expertViews(f.srcParents[0], offs), dsts = grouped_gemm.expertViews(f.dstParents[0], offs);
          (f.dims.values as Int32Array).set(sizes);
          f.prim.execute(strm, p3Args(srcs, f.weis, dsts, f.dims));
          await strm.wait();
          const got = readLogical(f.dstParents[0]);
          assertClose(got.subarray(0, used * N), refGroupedM(x, w, sizes, K, N));
          expect([...got.subarray(used * N)].every((v) => v === SENTINEL)).toBe(true);
          [...srcs, ...dsts].forEach((m) => m.free());
        }
      } finally {
        f.free();
      }
    });
  });

  describe('pd rules', () => {
    const K = 6, N = 5;
    const s = (k = K, t: DataType = dt.f32): MemoryDesc => memory.desc([RT, k], t, tag.ab);
    const w = (k = K, n = N, t: DataType = dt.f32): MemoryDesc => memory.desc([k, n], t, tag.ab);
    const d = (n = N, t: DataType = dt.f32): MemoryDesc => memory.desc([RT, n], t, tag.ab);
    const rd = (g: number): MemoryDesc => memory.desc([g], dt.s32, tag.x);
    const pd = (srcs: MemoryDesc[], weis: MemoryDesc[], dsts: MemoryDesc[], dims = rd(srcs.length), attr?: PrimitiveAttr): grouped_gemm.PrimitiveDesc =>
      new grouped_gemm.PrimitiveDesc(eng, srcs, weis, dsts, dims, attr);
    /** Two valid experts with expert 1 replaced. */
    const with1 = (which: 'src' | 'wei' | 'dst', md: MemoryDesc): grouped_gemm.PrimitiveDesc =>
      pd([s(), which === 'src' ? md : s()], [w(), which === 'wei' ? md : w()], [d(), which === 'dst' ? md : d()]);

    it('a valid problem is accepted (experts may differ in K and N)', () => {
      const p = pd([s(5), s(33), s(64)], [w(5, 7), w(33, 8), w(64, 1)], [d(7), d(8), d(1)]).problem;
      expect(p.G).toBe(3);
      expect(p.experts.map((e) => [e.K, e.N])).toEqual([[5, 7], [33, 8], [64, 1]]);
    });

    it('srcMds, weiMds and dstMds must be arrays', () => {
      expectDnnlError(() => new grouped_gemm.PrimitiveDesc(eng, s() as unknown as MemoryDesc[], [w()], [d()], rd(1)), 'invalid_arguments', 'srcMds, weiMds and dstMds must be arrays');
    });

    it('at least one expert', () => {
      expectDnnlError(() => pd([], [], [], rd(1)), 'invalid_arguments', 'at least one expert is required');
    });

    it(`at most MAX_EXPERTS = ${grouped_gemm.MAX_EXPERTS} experts`, () => {
      const n = grouped_gemm.MAX_EXPERTS + 1;
      expectDnnlError(() => pd(new Array<MemoryDesc>(n).fill(s()), new Array<MemoryDesc>(n).fill(w()), new Array<MemoryDesc>(n).fill(d())), 'invalid_arguments', `at most ${grouped_gemm.MAX_EXPERTS} experts, got ${n}`);
    });

    it('as many weights descriptors as src descriptors', () => {
      expectDnnlError(() => pd([s(), s()], [w()], [d(), d()]), 'invalid_arguments', '2 src descriptors but 1 weights descriptors');
    });

    it('as many dst descriptors as src descriptors', () => {
      expectDnnlError(() => pd([s(), s()], [w(), w()], [d(), d(), d()]), 'invalid_arguments', '2 src descriptors but 3 dst descriptors');
    });

    it('runtimeDimsMd must be a memory descriptor', () => {
      expectDnnlError(() => pd([s()], [w()], [d()], [1] as unknown as MemoryDesc), 'invalid_arguments', 'runtimeDimsMd must be a memory descriptor');
    });

    it.each([
      ['[G+1]', () => memory.desc([3], dt.s32, tag.x)],
      ['[G-1]', () => memory.desc([1], dt.s32, tag.x)],
      ['2D [1, G]', () => memory.desc([1, 2], dt.s32, tag.ab)],
    ] as const)('runtimeDimsMd must be [G]: %s', (_n, md) => {
      expectDnnlError(() => pd([s(), s()], [w(), w()], [d(), d()], md()), 'invalid_arguments', 'runtimeDimsMd must be [2], got');
    });

    it('runtimeDimsMd must be s32', () => {
      expectDnnlError(() => pd([s(), s()], [w(), w()], [d(), d()], memory.desc([2], dt.f32, tag.x)), 'invalid_arguments', 'runtimeDimsMd must be s32, got f32');
    });

    it('runtimeDimsMd must be plain (not tag.any)', () => {
      expectDnnlError(() => pd([s(), s()], [w(), w()], [d(), d()], memory.desc([2], dt.s32, tag.any)), 'invalid_arguments', 'runtimeDimsMd must be a plain descriptor');
    });

    it('attr must be a PrimitiveAttr', () => {
      expectDnnlError(() => pd([s()], [w()], [d()], rd(1), {} as PrimitiveAttr), 'invalid_arguments', 'attr must be a PrimitiveAttr');
    });

    it('the grouped-offsets attribute (Proposal #2) is rejected', () => {
      expectDnnlError(() => pd([s()], [w()], [d()], rd(1), p2Attr(1)), 'invalid_arguments', 'the grouped-offsets attribute belongs to matmul (Proposal #2)');
    });

    it('the row attributes of grouped rows are refused, not ignored; dynamic quantization runs on the wasm kernels only', () => {
      const rows = 'setGather, setScatter and setBatchedTokenCounts belong to matmul with grouped rows';
      expectDnnlError(() => pd([s()], [w()], [d()], rd(1), new PrimitiveAttr().setGather()), 'invalid_arguments', rows);
      expectDnnlError(() => pd([s()], [w()], [d()], rd(1), new PrimitiveAttr().setScatter(2)), 'invalid_arguments', rows);
      expectDnnlError(() => pd([s()], [w()], [d()], rd(1), new PrimitiveAttr().setBatchedTokenCounts()), 'invalid_arguments', rows);
      // rfcs/0006 on weight-only experts (proposal3_dynamic_int8.test.ts): never ignored, refused where no impl has it
      const dq = (): PrimitiveAttr => new PrimitiveAttr().setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.f32).setDynamicQuantization(ARG.SRC, dt.s8);
      const dqPd = (): grouped_gemm.PrimitiveDesc => pd([memory.desc([RT, 16], dt.f32, tag.ab)], [memory.desc([16, 8], dt.s8, tag.ab)], [memory.desc([RT, 8], dt.f32, tag.ab)], rd(1), dq());
      if (opts.kernels === 'none') expectDnnlError(dqPd, 'unimplemented', 'dynamic quantization (attr.setDynamicQuantization) runs on the wasm kernels only');
      else expect(dqPd().implInfo).toMatch(/-dq8$/);
      expectDnnlError(() => pd([s()], [w()], [d()], rd(1), dq()), 'unimplemented', 'attr.setDynamicQuantization: weights must be s8, u8, s4, u4 or f4_e2m1 (weight-only experts), got f32');
    });

    it('expert descriptors must be memory descriptors', () => {
      expectDnnlError(() => pd([s(), s()], [w(), {} as MemoryDesc], [d(), d()]), 'invalid_arguments', 'expert 1 descriptors must be memory descriptors');
    });

    it('expert descriptors must be plain, not grouped', () => {
      expectDnnlError(() => with1('src', memory.desc.grouped([10, K], dt.f32, 2, [RT, K])), 'invalid_arguments', 'expert 1 descriptors must be plain (one expert each)');
    });

    it('src must be 2D', () => {
      expectDnnlError(() => with1('src', memory.desc([1, RT, K], dt.f32, tag.abc)), 'invalid_arguments', 'src[1] must be 2D [M, K], got 3 dims');
    });

    it('weights must be 2D', () => {
      expectDnnlError(() => with1('wei', memory.desc([1, K, N], dt.f32, tag.abc)), 'invalid_arguments', 'weights[1] must be 2D [K, N], got 3 dims');
    });

    it('dst must be 2D', () => {
      expectDnnlError(() => with1('dst', memory.desc([RT], dt.f32, tag.a)), 'invalid_arguments', 'dst[1] must be 2D [M, N], got 1 dims');
    });

    it('src rows must be RUNTIME_DIM_VAL', () => {
      expectDnnlError(() => with1('src', memory.desc([10, K], dt.f32, tag.ab)), 'invalid_arguments', 'src[1] dims[0] must be RUNTIME_DIM_VAL (rows come from ARG.RUNTIME_DIMS)');
    });

    it('dst rows must be RUNTIME_DIM_VAL', () => {
      expectDnnlError(() => with1('dst', memory.desc([10, N], dt.f32, tag.ab)), 'invalid_arguments', 'dst[1] dims[0] must be RUNTIME_DIM_VAL (rows come from ARG.RUNTIME_DIMS)');
    });

    it.each([
      ['src K', () => pd([s(), memory.desc([RT, RT], dt.f32, tag.ab)], [w(), w()], [d(), d()])],
      ['weights N', () => pd([s(), s()], [w(), memory.desc([K, RT], dt.f32, tag.ab)], [d(), d()])],
      ['weights K', () => pd([s(), s()], [w(), memory.desc([RT, N], dt.f32, tag.ab)], [d(), d()])],
    ] as const)('K and N must be known: runtime %s', (_n, fn) => {
      expectDnnlError(fn, 'invalid_arguments', 'expert 1 K and N must be known');
    });

    it('weights K must equal src K', () => {
      expectDnnlError(() => with1('wei', w(K + 1)), 'invalid_arguments', `weights[1] dims[0] = ${K + 1} must equal src[1] K = ${K}`);
    });

    it('dst N must equal weights N', () => {
      expectDnnlError(() => with1('dst', d(N + 3)), 'invalid_arguments', `dst[1] dims[1] = ${N + 3} must equal weights[1] N = ${N}`);
    });

    it.each([
      ['tag.ba', () => memory.desc([RT, K], dt.f32, tag.ba)],
      ['tag.any', () => memory.desc([RT, K], dt.f32, tag.any)],
    ] as const)('src must be row-major: %s', (_n, md) => {
      expectDnnlError(() => with1('src', md()), 'invalid_arguments', 'src[1] must be row-major (tag.ab)');
    });

    it.each([
      ['tag.ba', () => memory.desc([RT, N], dt.f32, tag.ba)],
      ['tag.any', () => memory.desc([RT, N], dt.f32, tag.any)],
    ] as const)('dst must be row-major: %s', (_n, md) => {
      expectDnnlError(() => with1('dst', md()), 'invalid_arguments', 'dst[1] must be row-major (tag.ab)');
    });

    it('a packed weights descriptor without its layout is invalid', () => {
      const bare = new MemoryDesc({ dims: [K, N], dataType: 'f32', format: 'packed' });
      expectDnnlError(() => with1('wei', bare), 'invalid_arguments', 'weights[1] packed layout unknown');
    });

    it.each([
      ['src s8', () => pd([s(K, dt.s8), s(K, dt.s8)], [w(), w()], [d(), d()]), 'src s8 x weights f32 -> dst f32'],
      ['dst s32', () => pd([s(), s()], [w(), w()], [d(N, dt.s32), d(N, dt.s32)]), 'src f32 x weights f32 -> dst s32'],
    ] as const)('data types follow rfcs/0002 section 3: %s is unimplemented', (_n, fn, combo) => {
      const e = expectDnnlError(fn, 'unimplemented', `grouped_gemm: data type combination ${combo} is not supported`);
      expect(e.message).toContain('s8/u8 x s8/u8/s4/u4 -> f32/bf16/f16/s8/u8/s32');
    });

    it('s8 weights with f32 src are weight-only quantization (accepted)', () => {
      expect(pd([s(), s()], [w(K, N, dt.s8), w(K, N, dt.s8)], [d(), d()])).toBeInstanceOf(grouped_gemm.PrimitiveDesc);
    });

    it('all experts share the src data type', () => {
      expectDnnlError(() => with1('src', s(K, dt.bf16)), 'unimplemented', 'all experts must share the src data type');
    });

    it('all experts share the dst data type', () => {
      expectDnnlError(() => with1('dst', d(N, dt.f16)), 'unimplemented', 'all experts must share the dst data type');
    });

    it('all experts share the weights data type', () => {
      expectDnnlError(() => with1('wei', w(K, N, dt.bf16)), 'unimplemented', 'all experts must share the weights data type');
    });

    it('no implementation: a packed layout no implementation reads', () => {
      const foreign = new MemoryDesc({ dims: [K, N], dataType: 'f32', format: 'packed', packed: { name: 'f32:p16', byteSize: 4 * K * 16 } });
      const e = expectDnnlError(() => with1('wei', foreign), 'unimplemented', 'grouped_gemm: no implementation');
      expect(e.message).toContain('packed weights are read only by the wasm kernels');
    });

    it('packed weights with a post-op chain longer than the kernels take: no implementation', () => {
      const attr = new PrimitiveAttr();
      for (let i = 0; i < 9; i++) attr.postOps.appendEltwise(algorithm.eltwise_tanh);
      const packed = pd([s()], [memory.desc([K, N], dt.f32, tag.any)], [d()]).queryMd('weights')!;
      if (opts.kernels === 'none') {
        expect(packed.format).toBe('blocked'); // the reference resolves tag.any to plain
        return;
      }
      expectDnnlError(() => pd([s()], [packed], [d()], rd(1), attr), 'unimplemented', 'grouped_gemm: no implementation');
    });
  });

  describe('execute-time argument rules', () => {
    const rowsK = 4, K = 5, N = 3;
    let other: Engine;
    beforeAll(async () => {
      other = await Engine.create({ threads: 1, kernels: 'none' });
    });
    afterAll(() => other.release());

    const setup = (): ReturnType<typeof setupP3> => setupP3(eng, strm, { layout: 'views', experts: same([rowsK, 0, 2], K, N) });

    async function rejectArgs(change: (f: ReturnType<typeof setupP3>) => Record<number, Memory | undefined>, fragment: string): Promise<void> {
      const f = setup();
      try {
        await strm.wait();
        const before = f.dstParents[0].read();
        expectDnnlError(() => f.prim.execute(strm, change(f)), 'invalid_arguments', fragment);
        await strm.wait();
        expectUnchanged(before, f.dstParents[0].read());
      } finally {
        f.free();
      }
    }

    it('scales or zero points the pd was not created with are refused, not ignored', async () => {
      await rejectArgs((f) => ({ ...f.args(), [ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1)]: f.args()[ARG.RUNTIME_DIMS] }),
        'grouped_gemm.execute: ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1) was given but the pd has no weights scales for expert 1');
      await rejectArgs((f) => ({ ...f.args(), [ARG.ATTR_ZERO_POINTS | ARG.MULTIPLE_SRC]: f.args()[ARG.RUNTIME_DIMS] }),
        'grouped_gemm.execute: ARG.ATTR_ZERO_POINTS | (ARG.MULTIPLE_SRC + 0) was given but the pd has no src zero points for expert 0');
    });

    it('the stream must belong to the engine', async () => {
      const f = setup();
      try {
        await strm.wait();
        expectDnnlError(() => f.prim.execute(new Stream(other), f.args()), 'invalid_arguments', 'grouped_gemm.execute: stream belongs to another engine');
      } finally {
        f.free();
      }
    });

    it.each([
      ['ARG.MULTIPLE_SRC + 1', ARG.MULTIPLE_SRC + 1],
      ['ARG.MULTIPLE_WEIGHTS + 2', ARG.MULTIPLE_WEIGHTS + 2],
      ['ARG.MULTIPLE_DST + 0', ARG.MULTIPLE_DST],
      ['ARG.RUNTIME_DIMS', ARG.RUNTIME_DIMS],
    ] as const)('missing argument %s', async (name, id) => {
      await rejectArgs((f) => f.args({ [id]: undefined }), `grouped_gemm.execute: missing argument ${name}`);
    });

    it('an argument that is not a Memory object', async () => {
      await rejectArgs((f) => f.args({ [ARG.MULTIPLE_WEIGHTS + 1]: { desc: f.weis[1].desc } as unknown as Memory }), 'grouped_gemm.execute: ARG.MULTIPLE_WEIGHTS + 1 must be a live Memory object');
    });

    it('a freed memory object', async () => {
      await rejectArgs((f) => {
        const v = Memory.create(f.srcs[2].desc, eng, f.srcs[2].handles[0]);
        v.free();
        return f.args({ [ARG.MULTIPLE_SRC + 2]: v });
      }, 'grouped_gemm.execute: ARG.MULTIPLE_SRC + 2 must be a live Memory object');
    });

    it('a memory object of another engine', async () => {
      const foreign = Memory.create(memory.desc([64], dt.s32, tag.x), other);
      await rejectArgs((f) => f.args({ [ARG.RUNTIME_DIMS]: Memory.create(f.dims.desc, other, foreign.handles[0]) }), 'grouped_gemm.execute: ARG.RUNTIME_DIMS belongs to another engine');
      foreign.free();
    });

    it.each([
      ['src with another K', ARG.MULTIPLE_SRC + 1, () => runtimeRows(K + 1, dt.f32)],
      ['src of another data type', ARG.MULTIPLE_SRC, () => runtimeRows(K, dt.bf16)],
      ['dst with another N', ARG.MULTIPLE_DST + 2, () => runtimeRows(N + 1, dt.f32)],
      ['weights transposed', ARG.MULTIPLE_WEIGHTS + 1, () => memory.desc([K, N], dt.f32, tag.ba)],
      ['runtime dims [G+1]', ARG.RUNTIME_DIMS, () => memory.desc([4], dt.s32, tag.x)],
    ] as const)('descriptor mismatch: %s', async (_n, id, md) => {
      const name = id === ARG.RUNTIME_DIMS ? 'ARG.RUNTIME_DIMS' : id >= ARG.MULTIPLE_WEIGHTS ? `ARG.MULTIPLE_WEIGHTS + ${id - ARG.MULTIPLE_WEIGHTS}` : id >= ARG.MULTIPLE_DST ? `ARG.MULTIPLE_DST + ${id - ARG.MULTIPLE_DST}` : `ARG.MULTIPLE_SRC + ${id - ARG.MULTIPLE_SRC}`;
      const holder = Memory.create(memory.desc([64, 16], dt.f32, tag.ab), eng);
      try {
        await rejectArgs((f) => f.args({ [id]: Memory.create(md(), eng, holder.handles[0]) }), `grouped_gemm.execute: ${name} descriptor ${md()} does not match the primitive's`);
      } finally {
        holder.free();
      }
    });

    it('a view whose buffer was freed is no longer a live allocation', async () => {
      const f = setup();
      const parent = Memory.create(memory.desc([8, K], dt.f32, tag.ab), eng);
      // An interior view: its address cannot coincide with the end of another live block.
      const dangling = grouped_gemm.expertViews(parent, [0, 3, 8])[1];
      try {
        await strm.wait();
        parent.free();
        expectDnnlError(() => f.prim.execute(strm, f.args({ [ARG.MULTIPLE_SRC + 2]: dangling })), 'invalid_arguments', 'grouped_gemm.execute: ARG.MULTIPLE_SRC + 2 is no longer a live allocation of the engine');
      } finally {
        f.free();
      }
    });
  });

  describe('runtime dims rules (reported by stream.wait(), every dst untouched)', () => {
    // K = N = 16 f32: a row is 64 bytes, the heap's allocation granule, so capacities are exact.
    const K = 16, N = 16;

    async function reject(c: P3Case, dims: number[], fragment: string): Promise<void> {
      const f = setupP3(eng, strm, c);
      try {
        await strm.wait();
        (f.dims.values as Int32Array).set(dims);
        const before = f.dstParents.map((m) => m.read());
        expect(() => f.prim.execute(strm, f.args())).not.toThrow(); // runtime data: not known wrong at execute
        await expectDnnlReject(strm.wait(), 'invalid_arguments', fragment);
        f.dstParents.forEach((m, i) => expectUnchanged(before[i], m.read(), `dst parent ${i}`));
      } finally {
        f.free();
      }
    }

    const sep = (caps: number[], extra: Partial<P3Case> = {}): P3Case => ({ layout: 'separate', experts: caps.map((cap) => ({ K, N, rows: cap, cap })), ...extra });

    it('a negative row count', async () => {
      await reject(sep([3, 4, 5]), [3, -1, 5], 'ARG.RUNTIME_DIMS[1] = -1 must be non-negative');
    });

    it('a negative row count in the first expert', async () => {
      await reject(sep([3, 4, 5]), [-7, 4, 5], 'ARG.RUNTIME_DIMS[0] = -7 must be non-negative');
    });

    it('INT32_MIN rows', async () => {
      await reject(sep([3, 4, 5]), [3, 4, -0x80000000], 'ARG.RUNTIME_DIMS[2] = -2147483648 must be non-negative');
    });

    it('more rows than the separate allocation holds', async () => {
      await reject(sep([3, 4, 5]), [3, 5, 5], "ARG.RUNTIME_DIMS[1] = 5 rows do not fit expert 1's src/dst allocations (4 rows fit)");
    });

    it('more rows than the last expert allocation holds', async () => {
      await reject(sep([3, 4, 5]), [3, 4, 6], "ARG.RUNTIME_DIMS[2] = 6 rows do not fit expert 2's src/dst allocations (5 rows fit)");
    });

    it('a huge row count is caught (no out-of-bounds access)', async () => {
      await reject(sep([3, 4, 5]), [0x7fffffff, 4, 5], "ARG.RUNTIME_DIMS[0] = 2147483647 rows do not fit expert 0's src/dst allocations (3 rows fit)");
    });

    it('the capacity is the smaller of the src and dst allocations', async () => {
      const f = setupP3(eng, strm, sep([6, 6]));
      // Expert 1: src still holds 6 rows, dst is re-pointed at a 2-row allocation.
      const small = Memory.create(memory.desc([2, N], dt.f32, tag.ab), eng);
      writeLogical(small, new Float64Array(2 * N).fill(SENTINEL));
      const dst1 = Memory.create(runtimeRows(N, dt.f32), eng, small.handles[0]);
      try {
        await strm.wait();
        (f.dims.values as Int32Array).set([6, 3]);
        const before = [...f.dstParents.map((m) => m.read()), small.read()];
        f.prim.execute(strm, f.args({ [ARG.MULTIPLE_DST + 1]: dst1 }));
        await expectDnnlReject(strm.wait(), 'invalid_arguments', "ARG.RUNTIME_DIMS[1] = 3 rows do not fit expert 1's src/dst allocations (2 rows fit)");
        [...f.dstParents, small].forEach((m, i) => expectUnchanged(before[i], m.read()));
      } finally {
        [dst1, small].forEach((m) => m.free());
        f.free();
      }
    });

    it('the rows must fit from the view start to the end of the parent buffer', async () => {
      // Views at offsets [0, 3, 7] of a 10-row buffer: expert 2 may have at most 3 rows.
      await reject({ layout: 'views', experts: same([3, 4, 3], K, N) }, [3, 4, 4], "ARG.RUNTIME_DIMS[2] = 4 rows do not fit expert 2's src/dst allocations (3 rows fit)");
    });

    it('bf16 src/dst, sum post-op and packed weights: every dst untouched', async () => {
      const experts = [4, 4, 4].map((cap) => ({ K, N, rows: cap, cap, wei: 'any' as const }));
      await reject({ layout: 'separate', experts, srcDt: dt.bf16, dstDt: dt.bf16, postOps: [{ kind: 'sum', scale: 1 }] }, [4, 4, -2], 'ARG.RUNTIME_DIMS[2] = -2 must be non-negative');
    });

    it('the stream keeps working after an error; valid dims then compute', async () => {
      // Rows [3, 2, 0] in allocations of [3, 4, 5] rows: everything past them is sentinel-filled.
      const f = setupP3(eng, strm, { layout: 'separate', experts: [3, 2, 0].map((rows, i) => ({ K, N, rows, cap: 3 + i })) });
      try {
        await strm.wait();
        (f.dims.values as Int32Array).set([3, 9, 5]);
        f.prim.execute(strm, f.args());
        await expectDnnlReject(strm.wait(), 'invalid_arguments', 'rows do not fit');
        await expect(strm.wait()).resolves.toBeUndefined();
        (f.dims.values as Int32Array).set([3, 2, 0]);
        f.prim.execute(strm, f.args());
        await strm.wait();
        assertClose(readLogical(f.dstParents[1]).subarray(0, 2 * N), refGroupedM(f.xs[1].subarray(0, 2 * K), f.ws[1], [2], K, N));
        expect([...readLogical(f.dstParents[1]).subarray(2 * N)].every((v) => v === SENTINEL)).toBe(true);
        expect([...readLogical(f.dstParents[2])].every((v) => v === SENTINEL)).toBe(true);
      } finally {
        f.free();
      }
    });
  });
});

describe('grouped_gemm.expertViews', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'none' });
  });
  afterAll(() => eng.release());

  it('views are [RUNTIME_DIM_VAL, K] memory objects starting at each offset, aliasing the parent', () => {
    const T = 10, K = 3;
    const parent = Memory.create(memory.desc([T, K], dt.f32, tag.ab), eng);
    parent.write(new Array<number>(T * K).fill(0));
    const offs = [0, 2, 2, 7, 10];
    const views = grouped_gemm.expertViews(parent, offs);
    expect(views).toHaveLength(4);
    views.forEach((v, g) => {
      expect(v.desc.equals(memory.desc([RT, K], dt.f32, tag.ab))).toBe(true);
      expect(v.handles[0]).toBe(parent.handles[0] + offs[g] * rowBytes(parent));
      expect(rowBytes(parent)).toBe(K * 4);
      expect(v.engine).toBe(eng);
    });
    // Writing through a view (at its handle: a runtime-M view has no sized `values`) changes the parent.
    new Float32Array(eng.buffer, views[2].handles[0], 2 * K).set([1, 2, 3, 4, 5, 6]);
    const got = readLogical(parent);
    expect([...got.subarray(2 * K, 4 * K)]).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...got.subarray(0, 2 * K)].every((v) => v === 0)).toBe(true);
    // Writing through the parent is seen at the view's address.
    parent.values[7 * K] = 42;
    expect(new Float32Array(eng.buffer, views[3].handles[0], 1)[0]).toBe(42);
    // Freeing views never frees the parent's buffer.
    views.forEach((v) => v.free());
    expect(parent.read()[7 * K]).toBe(42);
    parent.free();
  });

  it('a runtime-M view has no sized values view', () => {
    const parent = Memory.create(memory.desc([4, 2], dt.f32, tag.ab), eng);
    const [v] = grouped_gemm.expertViews(parent, [0, 4]);
    expectDnnlError(() => v.values, 'invalid_arguments', 'size depends on runtime dims');
    parent.free();
  });

  it('views over bf16 and over grouped (Proposal #1) memory keep the data type and step by the row size', () => {
    const K = 5;
    const bf = Memory.create(memory.desc([6, K], dt.bf16, tag.ab), eng);
    const vb = grouped_gemm.expertViews(bf, [0, 1, 6]);
    expect(vb[1].desc.dataType).toBe('bf16');
    expect(vb[1].handles[0]).toBe(bf.handles[0] + K * dtBytes(dt.bf16, 1));
    const gm = Memory.create(memory.desc.grouped([6, K], dt.f32, 2, [RT, K]), eng);
    const vg = grouped_gemm.expertViews(gm, [0, 4, 6]);
    expect(vg[1].handles[0]).toBe(gm.handles[0] + 4 * K * 4);
    expect(vg[1].desc.isGrouped).toBe(false);
    [bf, gm].forEach((m) => m.free());
  });

  it.each([
    ['a negative offset', [0, -1, 10], 'offsets[1] = -1 is outside [0, 10]'],
    ['an offset past the total', [0, 11, 10], 'offsets[1] = 11 is outside [0, 10]'],
    ['a first offset past the total', [12, 12], 'offsets[0] = 12 is outside [0, 10]'],
    ['the last offset past the total', [0, 5, 11], 'offsets[2] = 11 is outside [0, 10]'],
    ['a fractional offset', [0, 2.5, 10], 'offsets[1] = 2.5 is outside [0, 10]'],
    ['a NaN offset', [0, Number.NaN, 10], 'offsets[1] = NaN is outside [0, 10]'],
  ] as const)('%s is rejected', (_n, offs, fragment) => {
    const parent = Memory.create(memory.desc([10, 4], dt.f32, tag.ab), eng);
    try {
      expectDnnlError(() => grouped_gemm.expertViews(parent, offs), 'invalid_arguments', `expertViews: ${fragment}`);
    } finally {
      parent.free();
    }
  });

  it('offsets equal to 0 and to the total are accepted (empty first and last experts)', () => {
    const parent = Memory.create(memory.desc([10, 4], dt.f32, tag.ab), eng);
    const views = grouped_gemm.expertViews(parent, [0, 0, 10, 10]);
    expect(views.map((v) => (v.handles[0] - parent.handles[0]) / 16)).toEqual([0, 0, 10]);
    parent.free();
  });

  it('needs a 2D memory', () => {
    const m = Memory.create(memory.desc([2, 3, 4], dt.f32, tag.abc), eng);
    expectDnnlError(() => grouped_gemm.expertViews(m, [0, 2]), 'invalid_arguments', 'expertViews: needs a 2D [total, K] memory');
    m.free();
  });

  it('needs contiguous rows (tag.ba is rejected)', () => {
    const m = Memory.create(memory.desc([6, 3], dt.f32, tag.ba), eng);
    expectDnnlError(() => grouped_gemm.expertViews(m, [0, 6]), 'invalid_arguments', 'expertViews: rows must be contiguous');
    m.free();
  });

  it('rejects padded rows (a [RUNTIME_DIM_VAL, K] view can only step K elements per row)', () => {
    const m = Memory.create(memory.desc([6, 3], dt.f32, [5, 1]), eng);
    expectDnnlError(() => grouped_gemm.expertViews(m, [0, 2, 6]), 'invalid_arguments', 'expertViews: rows must be contiguous (row stride 5 != K = 3)');
    m.free();
  });

  it('needs G+1 >= 2 offsets', () => {
    const m = Memory.create(memory.desc([6, 3], dt.f32, tag.ab), eng);
    expectDnnlError(() => grouped_gemm.expertViews(m, [0]), 'invalid_arguments', 'expertViews: offsets need G+1 >= 2 entries');
    m.free();
  });
});
