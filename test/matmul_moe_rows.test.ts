/**
 * MoE row maps of the matmul (cuDNN's GATHER / SCATTER modes, vLLM's batched format): gather-mode GEMM
 * bit-identical to permute-then-GEMM, fused scatter bit-identical to GEMM-then-scatter, batched counts
 * never touching padding rows, every runtime rule an error with nothing written; 1, 2, 3 threads.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, matmul, memory, offsets, tag,
  type DataType, type EngineOptions,
} from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { assertClose, refGroupedM, TOL_F32 } from './reference.js';
import { mulberry32, randomF32, type Rng } from './workloads.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));
async function engine(o: EngineOptions): Promise<Engine> {
  const e = await Engine.create(o);
  engines.push(e);
  return e;
}

/** A routing: each token picks k distinct experts; rows sorted by expert, then token, then slot. */
interface Routing {
  readonly T: number;
  readonly k: number;
  readonly E: number;
  readonly ids: Int32Array; // [T, k]
  readonly tokenIndex: Int32Array; // [R]
  readonly tokenKs: Int32Array;
  readonly sizes: number[];
}

function route(rng: Rng, T: number, E: number, k: number, pick?: (t: number, s: number) => number): Routing {
  const ids = new Int32Array(T * k);
  for (let t = 0; t < T; t++) {
    const used = new Set<number>();
    for (let s = 0; s < k; s++) {
      let e = pick ? pick(t, s) : Math.floor(rng() * E);
      while (used.has(e)) e = (e + 1) % E;
      used.add(e);
      ids[t * k + s] = e;
    }
  }
  const rows: [number, number, number][] = [];
  for (let t = 0; t < T; t++) for (let s = 0; s < k; s++) rows.push([ids[t * k + s], t, s]);
  rows.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  const sizes = new Array<number>(E).fill(0);
  rows.forEach(([e]) => sizes[e]++);
  return { T, k, E, ids, tokenIndex: Int32Array.from(rows, (r) => r[1]), tokenKs: Int32Array.from(rows, (r) => r[2]), sizes };
}

function s32(eng: Engine, values: ArrayLike<number>): Memory {
  const m = Memory.create(memory.desc([values.length], dt.s32, tag.a), eng);
  (m.values as Int32Array).set(Array.from(values));
  return m;
}

function f32mem(eng: Engine, dims: number[], values: ArrayLike<number>, t: DataType = 'f32'): Memory {
  const m = Memory.create(memory.desc(dims, t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc), eng);
  m.write(Float64Array.from(values));
  return m;
}

const SHAPES = [
  { name: 'skewed with empty experts', T: 37, E: 6, k: 2, K: 70, N: 44, pick: (t: number, s: number) => (s === 0 ? (t % 3) * 2 : 5 - (t % 2)) },
  { name: 'all tokens to one expert', T: 23, E: 4, k: 1, K: 33, N: 19, pick: () => 2 },
  { name: 'k = E', T: 9, E: 3, k: 3, K: 16, N: 24, pick: (_t: number, s: number) => s },
  { name: 'E = 1, T = 1', T: 1, E: 1, k: 1, K: 130, N: 9, pick: () => 0 },
  { name: 'random, tails', T: 101, E: 8, k: 3, K: 257, N: 136, pick: undefined },
] as const;

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 2T', { threads: 2, kernels: 'relaxed' }],
  ['simd128 3T', { threads: 3, kernels: 'simd128' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('matmul MoE row maps [%s]', (_name, opts) => {
  for (const sh of SHAPES) {
    it(`gather == permute then GEMM, bit for bit, and == float64 (${sh.name})`, async () => {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const rng = mulberry32(7);
      const r = route(rng, sh.T, sh.E, sh.k, sh.pick);
      const R = sh.T * sh.k, { K, N, E, T } = sh;
      const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N);
      const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
      const wei = f32mem(eng, [E, K, N], w);
      const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
      // permuted copy + plain P#1
      const permuted = new Float64Array(R * K);
      r.tokenIndex.forEach((t, i) => permuted.set(hidden.subarray(t * K, t * K + K), i * K));
      const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
      const src = Memory.create(srcMd, eng);
      src.write(permuted);
      offsets.fromSizes(r.sizes, src.offsets);
      const dstA = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd)).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dstA });
      // gather: plain [T, K] src, dst holds the partition
      const attr = new PrimitiveAttr().setGather();
      const hMd = memory.desc([T, K], dt.f32, tag.ab);
      const h = f32mem(eng, [T, K], hidden);
      const dstB = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      const pd = new matmul.PrimitiveDesc(eng, hMd, weiMd, dstMd, attr);
      expect(pd.queryMd('token_index')!.dims).toEqual([R]);
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: h, [ARG.WEIGHTS]: wei, [ARG.DST]: dstB, [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex) });
      await strm.wait();
      const a = dstA.values as Float32Array, b = dstB.values as Float32Array;
      expect(Buffer.from(b.buffer, b.byteOffset, b.byteLength).equals(Buffer.from(a.buffer, a.byteOffset, a.byteLength))).toBe(true);
      assertClose(b, refGroupedM(permuted, w, r.sizes, K, N), TOL_F32, 'gather');
    });

    it(`scatter + routing-weight binary_mul == GEMM then weight then scatter, bit for bit (${sh.name})`, async () => {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const rng = mulberry32(11);
      const r = route(rng, sh.T, sh.E, sh.k, sh.pick);
      const R = sh.T * sh.k, { K, N, E, T, k } = sh;
      const x = randomF32(rng, R * K), w = randomF32(rng, E * K * N), tw = randomF32(rng, T * k);
      const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
      const wei = f32mem(eng, [E, K, N], w);
      const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
      const src = Memory.create(srcMd, eng);
      src.write(x);
      offsets.fromSizes(r.sizes, src.offsets);
      // plain: dst routed order, weights permuted per row
      const permW = Float64Array.from(r.tokenIndex, (t, i) => tw[t * k + r.tokenKs[i]]);
      const pwMd = memory.desc([R, 1], dt.f32, tag.ab);
      const attrA = new PrimitiveAttr();
      attrA.postOps.appendBinary(algorithm.binary_mul, pwMd);
      const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
      const dstA = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attrA)).execute(strm, {
        [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dstA, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: f32mem(eng, [R, 1], permW),
      });
      // scatter: dst [T*k, N] in token order, weights [T*k, 1] indexed by the dst row
      const attrB = new PrimitiveAttr().setScatter(k);
      const twMd = memory.desc([T * k, 1], dt.f32, tag.ab);
      attrB.postOps.appendBinary(algorithm.binary_mul, twMd);
      const outMd = memory.desc([T * k, N], dt.f32, tag.ab);
      const out = Memory.create(outMd, eng);
      (out.values as Float32Array).fill(-7);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, outMd, attrB)).execute(strm, {
        [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: out, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: f32mem(eng, [T * k, 1], tw),
        [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex), [ARG.MOE_TOKEN_KS]: s32(eng, r.tokenKs),
      });
      await strm.wait();
      const a = dstA.values as Float32Array, o = out.values as Float32Array;
      for (let i = 0; i < R; i++) {
        const d = r.tokenIndex[i] * k + r.tokenKs[i];
        for (let n = 0; n < N; n++) expect(Object.is(o[d * N + n], a[i * N + n])).toBe(true);
      }
    });
  }

  it('padding rows: a gather reads zeros for index -1, a scatter skips them (dst keeps its values)', async () => {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const rng = mulberry32(3);
    const T = 5, K = 12, N = 10, E = 2, k = 1;
    // expert 0: tokens 0, 3 + 2 padding; expert 1: token 1, 2, 4 + 1 padding (block size 4)
    const ti = [0, 3, -1, -1, 1, 2, 4, -1], ks = [0, 0, -1, -1, 0, 0, 0, -1];
    const sizes = [4, 4], R = 8;
    const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N);
    const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
    const wei = f32mem(eng, [E, K, N], w);
    const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const dst = Memory.create(dstMd, eng);
    offsets.fromSizes(sizes, dst.offsets);
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, memory.desc([T, K], dt.f32, tag.ab), weiMd, dstMd, new PrimitiveAttr().setGather())).execute(strm, {
      [ARG.SRC]: f32mem(eng, [T, K], hidden), [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: s32(eng, ti),
    });
    await strm.wait();
    const y = dst.values as Float32Array;
    const permuted = new Float64Array(R * K);
    ti.forEach((t, i) => { if (t >= 0) permuted.set(hidden.subarray(t * K, t * K + K), i * K); });
    assertClose(y.subarray(0, R * N), refGroupedM(permuted, w, sizes, K, N), TOL_F32, 'gather with padding');
    // scatter the same routed rows back: padding rows must not be written
    const outMd = memory.desc([T * k, N], dt.f32, tag.ab);
    const out = Memory.create(outMd, eng);
    (out.values as Float32Array).fill(-3);
    const srcMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const w2 = randomF32(rng, E * N * N);
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, N, N], dt.f32, tag.abc), outMd, new PrimitiveAttr().setScatter(k))).execute(strm, {
      [ARG.SRC]: dst, [ARG.WEIGHTS]: f32mem(eng, [E, N, N], w2), [ARG.DST]: out, [ARG.MOE_TOKEN_INDEX]: s32(eng, ti), [ARG.MOE_TOKEN_KS]: s32(eng, ks),
    });
    await strm.wait();
    const ref = refGroupedM(Float64Array.from(y), w2, sizes, N, N);
    const o = out.values as Float32Array;
    ti.forEach((t, i) => {
      if (t < 0) return;
      for (let n = 0; n < N; n++) expect(Math.abs(o[t * N + n] - ref.value[i * N + n])).toBeLessThanOrEqual(1e-5 * (ref.mag[i * N + n] + 1e-30));
    });
  });

  it('gather with per-token int8 src scales == permuted per-row scales (integer path), bit for bit', async () => {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const rng = mulberry32(5);
    const T = 29, E = 5, k = 2, K = 66, N = 40;
    const r = route(rng, T, E, k);
    const R = T * k;
    const q = Float64Array.from({ length: T * K }, () => Math.round(rng() * 254) - 127);
    const sc = Float64Array.from({ length: T }, () => 0.01 + rng() * 0.02);
    const wq = Float64Array.from({ length: E * K * N }, () => Math.round(rng() * 254) - 127);
    const weiMd = memory.desc([E, K, N], dt.s8, tag.abc);
    const wei = Memory.create(weiMd, eng);
    wei.write(wq);
    const mk = (gather: boolean): PrimitiveAttr => {
      const a = new PrimitiveAttr().setScales(ARG.SRC, 1);
      return gather ? a.setGather() : a;
    };
    const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const srcMd = memory.desc.grouped([R, K], dt.s8, E, [RUNTIME_DIM_VAL, K]);
    const src = Memory.create(srcMd, eng);
    const perm = new Float64Array(R * K);
    r.tokenIndex.forEach((t, i) => perm.set(q.subarray(t * K, t * K + K), i * K));
    src.write(perm);
    offsets.fromSizes(r.sizes, src.offsets);
    const dstA = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const pdA = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, mk(false));
    new matmul.Primitive(pdA).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dstA, [ARG.ATTR_SCALES | ARG.SRC]: f32mem(eng, [R], Float64Array.from(r.tokenIndex, (t) => sc[t])) });
    const hMd = memory.desc([T, K], dt.s8, tag.ab);
    const h = Memory.create(hMd, eng);
    h.write(q);
    const dstB = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const pdB = new matmul.PrimitiveDesc(eng, hMd, weiMd, dstMd, mk(true));
    expect(pdB.queryMd('scales:src')!.dims).toEqual([T]);
    new matmul.Primitive(pdB).execute(strm, { [ARG.SRC]: h, [ARG.WEIGHTS]: wei, [ARG.DST]: dstB, [ARG.ATTR_SCALES | ARG.SRC]: f32mem(eng, [T], sc), [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex) });
    await strm.wait();
    expect(Array.from(dstB.values as Float32Array)).toEqual(Array.from(dstA.values as Float32Array));
  });

  it('Proposal #2 (offsets attribute) gathers and scatters too', async () => {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const rng = mulberry32(9);
    const T = 17, E = 3, k = 2, K = 20, N = 12;
    const r = route(rng, T, E, k);
    const R = T * k;
    const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N);
    const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
    const wei = f32mem(eng, [E, K, N], w);
    const offs = s32(eng, offsets.fromSizes(r.sizes));
    const attrG = new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E).setGather();
    const midMd = memory.desc([R, N], dt.f32, tag.ab);
    const mid = Memory.create(midMd, eng);
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, memory.desc([T, K], dt.f32, tag.ab), weiMd, midMd, attrG)).execute(strm, {
      [ARG.SRC]: f32mem(eng, [T, K], hidden), [ARG.WEIGHTS]: wei, [ARG.DST]: mid, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs, [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex),
    });
    const w2 = randomF32(rng, E * N * N);
    const attrS = new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E).setScatter(k);
    const outMd = memory.desc([T * k, N], dt.f32, tag.ab);
    const out = Memory.create(outMd, eng);
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, midMd, memory.desc([E, N, N], dt.f32, tag.abc), outMd, attrS)).execute(strm, {
      [ARG.SRC]: mid, [ARG.WEIGHTS]: f32mem(eng, [E, N, N], w2), [ARG.DST]: out, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs,
      [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex), [ARG.MOE_TOKEN_KS]: s32(eng, r.tokenKs),
    });
    await strm.wait();
    const perm = new Float64Array(R * K);
    r.tokenIndex.forEach((t, i) => perm.set(hidden.subarray(t * K, t * K + K), i * K));
    const y1 = refGroupedM(perm, w, r.sizes, K, N);
    assertClose(mid.values as Float32Array, y1, TOL_F32, 'P#2 gather');
    const y2 = refGroupedM(Float64Array.from(mid.values as Float32Array), w2, r.sizes, N, N);
    const o = out.values as Float32Array;
    const back = new Float32Array(R * N);
    r.tokenIndex.forEach((t, i) => back.set(o.subarray((t * k + r.tokenKs[i]) * N, (t * k + r.tokenKs[i] + 1) * N), i * N));
    assertClose(back, y2, TOL_F32, 'P#2 scatter');
  });

  it('batched format: only the first counts[g] rows of each batch are read and written', async () => {
    const eng = await engine(opts);
    const strm = new Stream(eng);
    const rng = mulberry32(13);
    const G = 4, C = 9, K = 35, N = 21;
    const counts = [3, 0, 9, 5];
    const x = randomF32(rng, G * C * K), w = randomF32(rng, G * K * N);
    for (let g = 0; g < G; g++) for (let i = counts[g]; i < C; i++) for (let kk = 0; kk < K; kk++) x[(g * C + i) * K + kk] = NaN; // never read
    const attr = new PrimitiveAttr().setBatchedTokenCounts();
    const srcMd = memory.desc([G, C, K], dt.f32, tag.abc), dstMd = memory.desc([G, C, N], dt.f32, tag.abc);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], dt.f32, tag.abc), dstMd, attr);
    expect(pd.queryMd('expert_num_tokens')!.dims).toEqual([G]);
    const dst = Memory.create(dstMd, eng);
    (dst.values as Float32Array).fill(-9);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: f32mem(eng, [G, C, K], x), [ARG.WEIGHTS]: f32mem(eng, [G, K, N], w), [ARG.DST]: dst, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(eng, counts) });
    await strm.wait();
    const y = dst.values as Float32Array;
    for (let g = 0; g < G; g++) {
      const xs = x.subarray(g * C * K, (g * C + counts[g]) * K);
      const ref = refGroupedM(xs, w.subarray(g * K * N, (g + 1) * K * N), [counts[g]], K, N);
      assertClose(y.subarray(g * C * N, (g * C + counts[g]) * N), ref, TOL_F32, `batch ${g}`);
      for (let i = counts[g] * N; i < C * N; i++) expect(y[g * C * N + i]).toBe(-9);
    }
  });

  describe('runtime rules: DnnlError from wait(), nothing written', () => {
    async function scatterCase(ti: number[], ks: number[], counts?: number[]): Promise<{ run: () => Promise<void>; untouched: () => boolean }> {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const E = 2, K = 8, N = 8, k = 2, T = 3, R = ti.length;
      const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
      const src = Memory.create(srcMd, eng);
      src.write(new Float64Array(R * K).fill(1));
      offsets.fromSizes(counts ?? [R - 1, 1], src.offsets);
      const outMd = memory.desc([T * k, N], dt.f32, tag.ab);
      const out = Memory.create(outMd, eng);
      (out.values as Float32Array).fill(-1);
      const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], dt.f32, tag.abc), outMd, new PrimitiveAttr().setScatter(k)));
      const wei = f32mem(eng, [E, K, N], new Float64Array(E * K * N).fill(0.5));
      return {
        run: async () => {
          prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: out, [ARG.MOE_TOKEN_INDEX]: s32(eng, ti), [ARG.MOE_TOKEN_KS]: s32(eng, ks) });
          await strm.wait();
        },
        untouched: () => (out.values as Float32Array).every((v) => v === -1),
      };
    }
    it('token index out of range', async () => {
      const c = await scatterCase([0, 3, 1], [0, 0, 1]);
      await expectDnnlReject(c.run(), 'invalid_arguments', 'ARG.MOE_TOKEN_INDEX[1] = 3 is out of range [-1, 3)');
      expect(c.untouched()).toBe(true);
    });
    it('slot out of range', async () => {
      const c = await scatterCase([0, 2, 1], [0, 2, 1]);
      await expectDnnlReject(c.run(), 'invalid_arguments', 'ARG.MOE_TOKEN_KS[1] = 2 is out of range [0, topK = 2)');
      expect(c.untouched()).toBe(true);
    });
    it('padding row with a slot', async () => {
      const c = await scatterCase([0, -1, 1], [0, 1, 1]);
      await expectDnnlReject(c.run(), 'invalid_arguments', 'ARG.MOE_TOKEN_KS[1] = 1 must be -1 for a padding row');
      expect(c.untouched()).toBe(true);
    });
    it('two rows scattered to one dst row', async () => {
      const c = await scatterCase([0, 1, 0], [1, 0, 1]);
      await expectDnnlReject(c.run(), 'invalid_arguments', 'routed row 2 scatters to dst row 0 * 2 + 1');
      expect(c.untouched()).toBe(true);
    });
    it('rows past the last offset are not checked (and not written)', async () => {
      const c = await scatterCase([0, 1, 99], [0, 0, 7], [1, 1]);
      await c.run();
      expect(c.untouched()).toBe(false);
    });
    it('batched counts beyond the capacity or negative', async () => {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const srcMd = memory.desc([2, 4, 8], dt.f32, tag.abc), dstMd = memory.desc([2, 4, 8], dt.f32, tag.abc);
      const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 8, 8], dt.f32, tag.abc), dstMd, new PrimitiveAttr().setBatchedTokenCounts()));
      const dst = Memory.create(dstMd, eng);
      (dst.values as Float32Array).fill(-1);
      const a = { [ARG.SRC]: f32mem(eng, [2, 4, 8], new Float64Array(64).fill(1)), [ARG.WEIGHTS]: f32mem(eng, [2, 8, 8], new Float64Array(128).fill(1)), [ARG.DST]: dst };
      prim.execute(strm, { ...a, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(eng, [2, 5]) });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_EXPERT_NUM_TOKENS[1] = 5 exceeds the batch capacity dims[1] = 4');
      prim.execute(strm, { ...a, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(eng, [-1, 2]) });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_EXPERT_NUM_TOKENS[0] = -1 must be >= 0');
      expect((dst.values as Float32Array).every((v) => v === -1)).toBe(true);
    });
  });

  describe('descriptor rules', () => {
    it('gather and scatter together, or without grouped rows, or with a bad dst', async () => {
      const eng = await engine(opts);
      const wei = memory.desc([2, 8, 4], dt.f32, tag.abc);
      const plain = (r: number, c: number): ReturnType<typeof memory.desc> => memory.desc([r, c], dt.f32, tag.ab);
      const grouped = (r: number, c: number): ReturnType<typeof memory.desc> => memory.desc.grouped([r, c], dt.f32, 2, [RUNTIME_DIM_VAL, c]);
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, plain(5, 8), wei, plain(6, 4), new PrimitiveAttr().setGather().setScatter(2)), 'unimplemented', 'gather and scatter in one matmul');
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, plain(5, 8), wei, plain(6, 4), new PrimitiveAttr().setGather()), 'invalid_arguments', 'gather needs grouped rows');
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, grouped(6, 8), wei, plain(7, 4), new PrimitiveAttr().setScatter(2)), 'invalid_arguments', 'a multiple of topK = 2');
      expectDnnlError(() => new PrimitiveAttr().setScatter(0), 'invalid_arguments', 'topK must be an integer');
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, plain(5, 8), memory.desc([8, 4], dt.f32, tag.ab), plain(5, 4), new PrimitiveAttr().setBatchedTokenCounts()), 'invalid_arguments', 'batched token counts need 3D');
    });
    it('missing token index argument', async () => {
      const eng = await engine(opts);
      const strm = new Stream(eng);
      const dstMd = memory.desc.grouped([4, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
      const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, memory.desc([3, 8], dt.f32, tag.ab), memory.desc([2, 8, 4], dt.f32, tag.abc), dstMd, new PrimitiveAttr().setGather()));
      expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: Memory.create(memory.desc([3, 8], dt.f32, tag.ab), eng), [ARG.WEIGHTS]: Memory.create(memory.desc([2, 8, 4], dt.f32, tag.abc), eng), [ARG.DST]: Memory.create(dstMd, eng) }), 'invalid_arguments', 'missing argument ARG.MOE_TOKEN_INDEX');
    });
  });
});
