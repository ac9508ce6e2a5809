/**
 * The matmul's MoE row modes on the gpu engine (cuDNN's gather / scatter / none-with-zero-fill modes,
 * vLLM's batched format, cuDNN's batched offsets through a group -> expert map), each checked against
 * the float64 reference and the cpu engine on the same inputs; every runtime rule is found on the
 * device and raised at wait() with the cpu's message, with nothing written.
 */
import { describe, expect, it } from 'vitest';
import {
  ARG, Engine, GpuEngine, GpuMemory, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, matmul, memory, offsets, tag,
  type MemoryDesc,
} from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { expectDnnlReject } from './helpers.js';
import { assertClose, refGroupedM, TOL_F32, type RefOut } from './reference.js';
import { mulberry32, randomF32, type Rng } from './workloads.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

type AnyEngine = Engine | GpuEngine;
type AnyMemory = Memory | GpuMemory;

function mk(eng: AnyEngine, md: MemoryDesc, values?: ArrayLike<number>, offsetsOf?: AnyMemory): AnyMemory {
  const m = offsetsOf ? Memory.create(md, eng as Engine, [undefined, offsetsOf.handles[1] as number]) : Memory.create(md, eng);
  if (values) m.write(values);
  return m;
}

function writeOffsets(m: AnyMemory, offs: ArrayLike<number>): void {
  if (m instanceof GpuMemory) m.writeOffsets(offs);
  else m.offsets.set(Array.from(offs));
}

async function read(m: AnyMemory): Promise<Float64Array> {
  return Float64Array.from(await Promise.resolve(m.read()));
}

const s32 = (eng: AnyEngine, v: ArrayLike<number>): AnyMemory => mk(eng, memory.desc([v.length], dt.s32, tag.a), v);
const plain = (dims: number[]): MemoryDesc => memory.desc(dims, dt.f32, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc);
const grouped = (rows: number, cols: number, G: number): MemoryDesc => memory.desc.grouped([rows, cols], dt.f32, G, [RUNTIME_DIM_VAL, cols]);

/** Runs `body` on the gpu and the cpu engine; returns both results. */
async function both(body: (eng: AnyEngine, strm: Stream) => Promise<Float64Array>): Promise<{ g: Float64Array; c: Float64Array }> {
  const g = await body(gpu, new Stream(gpu));
  const c = await body(cpu, new Stream(cpu));
  return { g, c };
}

/** gpu and cpu agree with the float64 reference (rows where `want` is given) and with each other (everywhere else, e.g. sentinels). */
function agree(r: { g: Float64Array; c: Float64Array }, ref: RefOut, rowOf: (i: number) => number | undefined, N: number, what: string): void {
  const idx: number[] = [];
  for (let i = 0; i < r.g.length; i++) {
    const row = rowOf(Math.floor(i / N));
    if (row === undefined) expect(r.g[i], `${what}: element ${i} outside the result`).toBe(r.c[i]);
    else idx.push(i);
  }
  const pick = (a: Float64Array): Float64Array => Float64Array.from(idx, (i) => a[i]);
  const refPick = { value: Float64Array.from(idx, (i) => ref.value[rowOf(Math.floor(i / N))! * N + (i % N)]), mag: Float64Array.from(idx, (i) => ref.mag[rowOf(Math.floor(i / N))! * N + (i % N)]) };
  assertClose(pick(r.g), refPick, TOL_F32, `${what} (gpu)`);
  assertClose(pick(r.c), refPick, TOL_F32, `${what} (cpu)`);
}

/** A routing: each token picks k distinct experts; rows sorted by expert, then token, then slot. */
interface Routing {
  readonly tokenIndex: Int32Array;
  readonly tokenKs: Int32Array;
  readonly sizes: number[];
}

function route(rng: Rng, T: number, E: number, k: number, pick?: (t: number, s: number) => number): Routing {
  const rows: [number, number, number][] = [];
  for (let t = 0; t < T; t++) {
    const used = new Set<number>();
    for (let s = 0; s < k; s++) {
      let e = pick ? pick(t, s) : Math.floor(rng() * E);
      while (used.has(e)) e = (e + 1) % E;
      used.add(e);
      rows.push([e, t, s]);
    }
  }
  rows.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  const sizes = new Array<number>(E).fill(0);
  rows.forEach(([e]) => sizes[e]++);
  return { tokenIndex: Int32Array.from(rows, (r) => r[1]), tokenKs: Int32Array.from(rows, (r) => r[2]), sizes };
}

const SHAPES = [
  { name: 'skewed with empty experts', T: 21, E: 6, k: 2, K: 37, N: 44, pick: (t: number, s: number) => (s === 0 ? (t % 3) * 2 : 5 - (t % 2)) },
  { name: 'all tokens to one expert', T: 23, E: 4, k: 1, K: 33, N: 19, pick: () => 2 },
  { name: 'E = 1, T = 1', T: 1, E: 1, k: 1, K: 70, N: 9, pick: () => 0 },
  { name: 'random, K and N not multiples of the tile', T: 45, E: 8, k: 3, K: 67, N: 70, pick: undefined },
] as const;

const SENT = -7;

describe('gpu matmul: gather (cuDNN GATHER mode, ARG.MOE_TOKEN_INDEX)', () => {
  for (const sh of SHAPES) {
    it(`== permute then GEMM bit for bit on the gpu, == float64 and the cpu engine (${sh.name})`, async () => {
      const rng = mulberry32(7);
      const r = route(rng, sh.T, sh.E, sh.k, sh.pick);
      const R = sh.T * sh.k, { K, N, E, T } = sh;
      const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N);
      const permuted = new Float64Array(R * K);
      r.tokenIndex.forEach((t, i) => permuted.set(hidden.subarray(t * K, t * K + K), i * K));
      const offs = offsets.fromSizes(r.sizes);
      let plainGpu: Float64Array | undefined;
      const impls: string[] = [];
      const res = await both(async (eng, strm) => {
        const wei = mk(eng, plain([E, K, N]), w);
        const src = mk(eng, grouped(R, K, E), permuted);
        writeOffsets(src, offs);
        const dstA = mk(eng, grouped(R, N, E), undefined, src);
        const plainPd = new matmul.PrimitiveDesc(eng, grouped(R, K, E), plain([E, K, N]), grouped(R, N, E));
        if (eng === gpu) impls.push(plainPd.implInfo);
        new matmul.Primitive(plainPd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dstA });
        const dstB = mk(eng, grouped(R, N, E), undefined, src);
        const pd = new matmul.PrimitiveDesc(eng, plain([T, K]), plain([E, K, N]), grouped(R, N, E), new PrimitiveAttr().setGather());
        if (eng === gpu) expect(pd.implInfo).toMatch(/^webgpu:.*(grouped|inline)-schedule/);
        if (eng === gpu) impls.push(pd.implInfo);
        new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: mk(eng, plain([T, K]), hidden), [ARG.WEIGHTS]: wei, [ARG.DST]: dstB, [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex) });
        await strm.wait();
        if (eng === gpu) plainGpu = await read(dstA);
        return read(dstB);
      });
      // The same kernel gives the same bits; the permuted GEMM may take the decode kernel (gemv-splitk,
      // another summation order) when its groups are short, and then agrees within the float64 bound.
      const kernel = (i: string): string => i.replace(/^webgpu:/, '').split(/[-+:]/)[0];
      if (kernel(impls[0]) === kernel(impls[1])) expect(Buffer.from(res.g.buffer).equals(Buffer.from(plainGpu!.buffer)), impls.join(' vs ')).toBe(true);
      else agree({ ...res, g: plainGpu! }, refGroupedM(permuted, w, r.sizes, K, N), (row) => row, N, 'permuted GEMM');
      agree(res, refGroupedM(permuted, w, r.sizes, K, N), (row) => row, N, 'gather');
    });
  }

  it('padding rows (index -1) read zeros; with per-token s8 src scales (integer path) too', async () => {
    const rng = mulberry32(3);
    const T = 5, K = 12, N = 10, E = 2;
    const ti = [0, 3, -1, -1, 1, 2, 4, -1], sizes = [4, 4], R = 8;
    const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N);
    const permuted = new Float64Array(R * K);
    ti.forEach((t, i) => { if (t >= 0) permuted.set(hidden.subarray(t * K, t * K + K), i * K); });
    const res = await both(async (eng, strm) => {
      const dst = mk(eng, grouped(R, N, E));
      writeOffsets(dst, offsets.fromSizes(sizes));
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([T, K]), plain([E, K, N]), grouped(R, N, E), new PrimitiveAttr().setGather())).execute(strm, {
        [ARG.SRC]: mk(eng, plain([T, K]), hidden), [ARG.WEIGHTS]: mk(eng, plain([E, K, N]), w), [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: s32(eng, ti),
      });
      await strm.wait();
      return read(dst);
    });
    agree(res, refGroupedM(permuted, w, sizes, K, N), (row) => row, N, 'gather with padding');
    // s8 tokens with one scale per token, s8 weights: the scale follows the gathered token.
    const q = Float64Array.from({ length: T * K }, () => Math.round(rng() * 254) - 127);
    const sc = Float64Array.from({ length: T }, () => 0.01 + rng() * 0.02);
    const wq = Float64Array.from({ length: E * K * N }, () => Math.round(rng() * 254) - 127);
    const deq = new Float64Array(R * K);
    ti.forEach((t, i) => { if (t >= 0) for (let kk = 0; kk < K; kk++) deq[i * K + kk] = q[t * K + kk] * sc[t]; });
    const res8 = await both(async (eng, strm) => {
      const dst = mk(eng, grouped(R, N, E));
      writeOffsets(dst, offsets.fromSizes(sizes));
      const attr = new PrimitiveAttr().setScales(ARG.SRC, 1).setGather();
      const pd = new matmul.PrimitiveDesc(eng, memory.desc([T, K], dt.s8, tag.ab), memory.desc([E, K, N], dt.s8, tag.abc), grouped(R, N, E), attr);
      expect(pd.queryMd('scales:src')!.dims).toEqual([T]);
      new matmul.Primitive(pd).execute(strm, {
        [ARG.SRC]: mk(eng, memory.desc([T, K], dt.s8, tag.ab), q), [ARG.WEIGHTS]: mk(eng, memory.desc([E, K, N], dt.s8, tag.abc), wq), [ARG.DST]: dst,
        [ARG.ATTR_SCALES | ARG.SRC]: mk(eng, plain([T]), sc), [ARG.MOE_TOKEN_INDEX]: s32(eng, ti),
      });
      await strm.wait();
      return read(dst);
    });
    agree(res8, refGroupedM(deq, wq, sizes, K, N), (row) => row, N, 's8 gather with per-token scales');
  });
});

describe('gpu matmul: scatter (cuDNN SCATTER mode, dst row = token * topK + slot)', () => {
  for (const sh of SHAPES) {
    it(`with the routing-weight binary_mul == float64 and the cpu engine; rows never routed untouched (${sh.name})`, async () => {
      const rng = mulberry32(11);
      const r = route(rng, sh.T, sh.E, sh.k, sh.pick);
      const R = sh.T * sh.k, { K, N, E, T, k } = sh;
      const x = randomF32(rng, R * K), w = randomF32(rng, E * K * N), tw = randomF32(rng, T * k);
      // Drop the last routed row (offsets end before it): its dst row must keep the sentinel.
      const sizes = [...r.sizes];
      const last = sizes.findLastIndex((s) => s > 0);
      sizes[last]--;
      const res = await both(async (eng, strm) => {
        const src = mk(eng, grouped(R, K, E), x);
        writeOffsets(src, offsets.fromSizes(sizes));
        const attr = new PrimitiveAttr().setScatter(k);
        attr.postOps.appendBinary(algorithm.binary_mul, plain([T * k, 1]));
        const out = mk(eng, plain([T * k, N]), new Float64Array(T * k * N).fill(SENT));
        new matmul.Primitive(new matmul.PrimitiveDesc(eng, grouped(R, K, E), plain([E, K, N]), plain([T * k, N]), attr)).execute(strm, {
          [ARG.SRC]: src, [ARG.WEIGHTS]: mk(eng, plain([E, K, N]), w), [ARG.DST]: out, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: mk(eng, plain([T * k, 1]), tw),
          [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex), [ARG.MOE_TOKEN_KS]: s32(eng, r.tokenKs),
        });
        await strm.wait();
        return read(out);
      });
      const routed = sizes.reduce((a, b) => a + b, 0);
      const ref = refGroupedM(x, w, sizes, K, N);
      // dst row d holds routed row i times the routing weight of (token, slot).
      const rowOf = new Map<number, number>();
      for (let i = 0; i < routed; i++) rowOf.set(r.tokenIndex[i] * k + r.tokenKs[i], i);
      for (const [d, i] of rowOf) for (let n = 0; n < N; n++) { ref.value[i * N + n] *= tw[d]; ref.mag[i * N + n] *= Math.abs(tw[d]); }
      agree(res, ref, (d) => rowOf.get(d), N, 'scatter');
      if (R > routed) {
        const d = r.tokenIndex[routed] * k + r.tokenKs[routed];
        expect(res.g.subarray(d * N, d * N + N).every((v) => v === SENT)).toBe(true);
      }
    });
  }

  it('padding rows (index -1, slot -1) are not written', async () => {
    const rng = mulberry32(4);
    const T = 5, K = 10, N = 10, E = 2, k = 1;
    const ti = [0, 3, -1, -1, 1, 2, 4, -1], ks = [0, 0, -1, -1, 0, 0, 0, -1], sizes = [4, 4], R = 8;
    const x = randomF32(rng, R * K), w = randomF32(rng, E * K * N);
    const res = await both(async (eng, strm) => {
      const src = mk(eng, grouped(R, K, E), x);
      writeOffsets(src, offsets.fromSizes(sizes));
      const out = mk(eng, plain([T * k, N]), new Float64Array(T * N).fill(SENT));
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, grouped(R, K, E), plain([E, K, N]), plain([T * k, N]), new PrimitiveAttr().setScatter(k))).execute(strm, {
        [ARG.SRC]: src, [ARG.WEIGHTS]: mk(eng, plain([E, K, N]), w), [ARG.DST]: out, [ARG.MOE_TOKEN_INDEX]: s32(eng, ti), [ARG.MOE_TOKEN_KS]: s32(eng, ks),
      });
      await strm.wait();
      return read(out);
    });
    const rowOf = new Map<number, number>();
    ti.forEach((t, i) => { if (t >= 0) rowOf.set(t * k + ks[i], i); });
    agree(res, refGroupedM(x, w, sizes, K, N), (d) => rowOf.get(d), N, 'scatter with padding');
  });

  it('Proposal #2 (offsets attribute): gather then scatter', async () => {
    const rng = mulberry32(9);
    const T = 17, E = 3, k = 2, K = 20, N = 12;
    const r = route(rng, T, E, k);
    const R = T * k;
    const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N), w2 = randomF32(rng, E * N * N);
    const offs = offsets.fromSizes(r.sizes);
    let mids: Float64Array[] = [];
    const res = await both(async (eng, strm) => {
      const o = s32(eng, offs);
      const mid = mk(eng, plain([R, N]));
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([T, K]), plain([E, K, N]), plain([R, N]), new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E).setGather())).execute(strm, {
        [ARG.SRC]: mk(eng, plain([T, K]), hidden), [ARG.WEIGHTS]: mk(eng, plain([E, K, N]), w), [ARG.DST]: mid, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: o, [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex),
      });
      const out = mk(eng, plain([T * k, N]));
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([R, N]), plain([E, N, N]), plain([T * k, N]), new PrimitiveAttr().setGroupedOffsets(ARG.SRC, E).setScatter(k))).execute(strm, {
        [ARG.SRC]: mid, [ARG.WEIGHTS]: mk(eng, plain([E, N, N]), w2), [ARG.DST]: out, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: o,
        [ARG.MOE_TOKEN_INDEX]: s32(eng, r.tokenIndex), [ARG.MOE_TOKEN_KS]: s32(eng, r.tokenKs),
      });
      await strm.wait();
      mids.push(await read(mid));
      return read(out);
    });
    const perm = new Float64Array(R * K);
    r.tokenIndex.forEach((t, i) => perm.set(hidden.subarray(t * K, t * K + K), i * K));
    agree({ g: mids[0], c: mids[1] }, refGroupedM(perm, w, r.sizes, K, N), (row) => row, N, 'P#2 gather');
    const rowOf = new Map<number, number>();
    r.tokenIndex.forEach((t, i) => rowOf.set(t * k + r.tokenKs[i], i));
    agree(res, refGroupedM(mids[0], w2, r.sizes, N, N), (d) => rowOf.get(d), N, 'P#2 scatter');
    mids = [];
  });
});

describe('gpu matmul: batched token counts (ARG.MOE_EXPERT_NUM_TOKENS)', () => {
  it('only the first counts[g] rows of each batch are read and written (an empty batch, a full one)', async () => {
    const rng = mulberry32(13);
    const G = 4, C = 9, K = 35, N = 21;
    const counts = [3, 0, 9, 5];
    const x = randomF32(rng, G * C * K), w = randomF32(rng, G * K * N);
    for (let g = 0; g < G; g++) for (let i = counts[g]; i < C; i++) for (let kk = 0; kk < K; kk++) x[(g * C + i) * K + kk] = NaN; // never read
    const res = await both(async (eng, strm) => {
      const pd = new matmul.PrimitiveDesc(eng, plain([G, C, K]), plain([G, K, N]), plain([G, C, N]), new PrimitiveAttr().setBatchedTokenCounts());
      expect(pd.queryMd('expert_num_tokens')!.dims).toEqual([G]);
      const dst = mk(eng, plain([G, C, N]), new Float64Array(G * C * N).fill(SENT));
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: mk(eng, plain([G, C, K]), x), [ARG.WEIGHTS]: mk(eng, plain([G, K, N]), w), [ARG.DST]: dst, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(eng, counts) });
      await strm.wait();
      return read(dst);
    });
    // The valid rows of each batch, packed: batch g's row i is grouped row start[g] + i.
    const packed = new Float64Array(counts.reduce((a, b) => a + b, 0) * K);
    let at = 0;
    counts.forEach((c, g) => { packed.set(x.subarray(g * C * K, (g * C + c) * K), at * K); at += c; });
    const start = offsets.fromSizes(counts);
    agree(res, refGroupedM(packed, w, counts, K, N), (row) => {
      const g = Math.floor(row / C), i = row % C;
      return i < counts[g] ? start[g] + i : undefined;
    }, N, 'batched');
    expect(res.g.filter((v) => v === SENT).length).toBe((G * C - 17) * N);
  });
});

describe('gpu matmul: zero-filled ungrouped rows (attr.setZeroFillUngroupedRows, cuDNN none mode)', () => {
  const cases = [
    { name: 'offsets [3, 3, 7] of 12 rows: rows 0-2 and 7-11 zero, an empty expert', M: 12, K: 13, N: 10, offs: [3, 3, 7], via: 'P1' },
    { name: 'P#2, rows on both sides, one expert', M: 11, K: 9, N: 12, offs: [2, 9], via: 'P2' },
    { name: 'every row in no group', M: 6, K: 5, N: 3, offs: [4, 4, 4], via: 'P1' },
    { name: 'E = 1 with offsets [0, M] (nothing to fill), tall M', M: 70, K: 5, N: 70, offs: [0, 70], via: 'P1' },
  ] as const;
  for (const c of cases) {
    it(c.name, async () => {
      const rng = mulberry32(21);
      const E = c.offs.length - 1, { M, K, N } = c;
      const x = randomF32(rng, M * K), w = randomF32(rng, E * K * N);
      const res = await both(async (eng, strm) => {
        const attr = new PrimitiveAttr().setZeroFillUngroupedRows();
        if (c.via === 'P2') attr.setGroupedOffsets(ARG.SRC, E);
        const srcMd = c.via === 'P1' ? grouped(M, K, E) : plain([M, K]), dstMd = c.via === 'P1' ? grouped(M, N, E) : plain([M, N]);
        const src = mk(eng, srcMd, x);
        const dst = c.via === 'P1' ? mk(eng, dstMd, undefined, src) : mk(eng, dstMd);
        dst.write(new Float64Array(M * N).fill(SENT));
        const args: Record<number, AnyMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(eng, plain([E, K, N]), w), [ARG.DST]: dst };
        if (c.via === 'P1') writeOffsets(src, c.offs);
        else args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = s32(eng, c.offs);
        new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, plain([E, K, N]), dstMd, attr)).execute(strm, args);
        await strm.wait();
        return read(dst);
      });
      const sizes = c.offs.slice(1).map((o, i) => o - c.offs[i]);
      const r0 = c.offs[0], r1 = c.offs[E];
      agree(res, refGroupedM(x.subarray(r0 * K), w, sizes, K, N), (row) => (row >= r0 && row < r1 ? row - r0 : undefined), N, 'zero fill');
      for (let row = 0; row < M; row++) if (row < r0 || row >= r1) expect(Array.from(res.g.subarray(row * N, row * N + N)), `row ${row}`).toEqual(new Array<number>(N).fill(0));
    });
  }

  it('with a GLU (N / 2 dst columns) and bf16 dst: zeros in the dst columns only', async () => {
    const rng = mulberry32(22);
    const M = 11, K = 9, N = 12, offs = [2, 9];
    const x = randomF32(rng, M * K), w = randomF32(rng, K * N);
    const attr = new PrimitiveAttr().setZeroFillUngroupedRows();
    attr.postOps.appendGlu(algorithm.glu_swiglu, 'interleaved');
    const dstMd = memory.desc.grouped([M, N / 2], dt.bf16, 1, [RUNTIME_DIM_VAL, N / 2]);
    const res = await both(async (eng, strm) => {
      const src = mk(eng, grouped(M, K, 1), x);
      writeOffsets(src, offs);
      const dst = mk(eng, dstMd, new Float64Array(M * N / 2).fill(SENT), src);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, grouped(M, K, 1), plain([1, K, N]), dstMd, attr)).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(eng, plain([1, K, N]), w), [ARG.DST]: dst });
      await strm.wait();
      return read(dst);
    });
    for (let i = 0; i < res.g.length; i++) {
      const row = Math.floor(i / (N / 2));
      if (row < 2 || row >= 9) expect(res.g[i]).toBe(0);
      else expect(Math.abs(res.g[i] - res.c[i])).toBeLessThanOrEqual(2 ** -7 * (1 + Math.abs(res.c[i])));
    }
  });
});

describe('gpu matmul: groups mapped to experts (attr.setExpertMap, ARG.MOE_EXPERT_MAP)', () => {
  const cases = [
    { name: '6 groups over 3 experts, bias per expert', M: 13, K: 11, N: 9, offs: [0, 2, 2, 5, 9, 12, 13], E: 3, map: [0, 1, 2, 0, 1, 2], via: 'P1', zf: false },
    { name: 'E = 1: every group on the one expert', M: 9, K: 6, N: 4, offs: [0, 3, 3, 9], E: 1, map: [0, 0, 0], via: 'P1', zf: false },
    { name: 'P#2, an arbitrary map, zero-filled leading and trailing rows', M: 9, K: 6, N: 4, offs: [1, 3, 3, 8], E: 4, map: [3, 0, 3], via: 'P2', zf: true },
  ] as const;
  for (const c of cases) {
    it(c.name, async () => {
      const rng = mulberry32(31);
      const G = c.map.length, { M, K, N, E } = c;
      const x = randomF32(rng, M * K), w = randomF32(rng, E * K * N), bias = randomF32(rng, E * N);
      const res = await both(async (eng, strm) => {
        const attr = new PrimitiveAttr().setExpertMap();
        if (c.zf) attr.setZeroFillUngroupedRows();
        if (c.via === 'P2') attr.setGroupedOffsets(ARG.SRC, G);
        const srcMd = c.via === 'P1' ? grouped(M, K, G) : plain([M, K]), dstMd = c.via === 'P1' ? grouped(M, N, G) : plain([M, N]);
        const src = mk(eng, srcMd, x);
        const dst = c.via === 'P1' ? mk(eng, dstMd, undefined, src) : mk(eng, dstMd);
        dst.write(new Float64Array(M * N).fill(SENT));
        const pd = new matmul.PrimitiveDesc(eng, srcMd, plain([E, K, N]), plain([E, N]), dstMd, attr);
        expect(pd.queryMd('expert_map')!.dims).toEqual([G]);
        const args: Record<number, AnyMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(eng, plain([E, K, N]), w), [ARG.BIAS]: mk(eng, plain([E, N]), bias), [ARG.DST]: dst, [ARG.MOE_EXPERT_MAP]: s32(eng, c.map) };
        if (c.via === 'P1') writeOffsets(src, c.offs);
        else args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = s32(eng, c.offs);
        new matmul.Primitive(pd).execute(strm, args);
        await strm.wait();
        return read(dst);
      });
      // Reference: group g as its own expert with expert map[g]'s weights and bias.
      const wg = new Float64Array(G * K * N), bg = new Float64Array(G * N);
      c.map.forEach((e, g) => { wg.set(w.subarray(e * K * N, (e + 1) * K * N), g * K * N); bg.set(bias.subarray(e * N, (e + 1) * N), g * N); });
      const sizes = c.offs.slice(1).map((o, i) => o - c.offs[i]);
      const r0 = c.offs[0], r1 = c.offs[c.offs.length - 1];
      agree(res, refGroupedM(x.subarray(r0 * K), wg, sizes, K, N, { bias: { dims: [G, N], data: bg } }), (row) => (row >= r0 && row < r1 ? row - r0 : undefined), N, 'expert map');
      if (c.zf) for (const row of [0, 8]) expect(Array.from(res.g.subarray(row * N, row * N + N))).toEqual(new Array<number>(N).fill(0));
    });
  }
});

describe('gpu matmul: runtime rules of the row modes, found on the device: DnnlError at wait(), nothing written', () => {
  async function scatterCase(ti: number[], ks: number[], sizes?: number[]): Promise<{ err: unknown; untouched: boolean }> {
    const strm = new Stream(gpu);
    const E = 2, K = 8, N = 8, k = 2, T = 3, R = ti.length;
    const src = mk(gpu, grouped(R, K, E), new Float64Array(R * K).fill(1));
    writeOffsets(src, offsets.fromSizes(sizes ?? [R - 1, 1]));
    const out = mk(gpu, plain([T * k, N]), new Float64Array(T * k * N).fill(-1));
    new matmul.Primitive(new matmul.PrimitiveDesc(gpu, grouped(R, K, E), plain([E, K, N]), plain([T * k, N]), new PrimitiveAttr().setScatter(k))).execute(strm, {
      [ARG.SRC]: src, [ARG.WEIGHTS]: mk(gpu, plain([E, K, N]), new Float64Array(E * K * N).fill(0.5)), [ARG.DST]: out,
      [ARG.MOE_TOKEN_INDEX]: s32(gpu, ti), [ARG.MOE_TOKEN_KS]: s32(gpu, ks),
    });
    const err = await strm.wait().then(() => undefined, (e: unknown) => e);
    return { err, untouched: (await read(out)).every((v) => v === -1) };
  }
  const scatterBad: [string, number[], number[], string][] = [
    ['token index out of range', [0, 3, 1], [0, 0, 1], 'matmul.execute: ARG.MOE_TOKEN_INDEX[1] = 3 is out of range [-1, 3)'],
    ['token index below -1', [0, 1, -2], [0, 0, 1], 'ARG.MOE_TOKEN_INDEX[2] = -2 is out of range [-1, 3)'],
    ['slot out of range', [0, 2, 1], [0, 2, 1], 'ARG.MOE_TOKEN_KS[1] = 2 is out of range [0, topK = 2)'],
    ['padding row with a slot', [0, -1, 1], [0, 1, 1], 'ARG.MOE_TOKEN_KS[1] = 1 must be -1 for a padding row'],
    ['two rows scattered to one dst row', [0, 1, 0], [1, 0, 1], 'routed row 2 scatters to dst row 0 * 2 + 1'],
    ['the first bad row wins (a duplicate before an index error)', [2, 2, 9], [1, 1, 0], 'routed row 1 scatters to dst row 2 * 2 + 1'],
  ];
  for (const [name, ti, ks, msg] of scatterBad) {
    it(name, async () => {
      const c = await scatterCase(ti, ks);
      await expectDnnlReject(Promise.reject(c.err), 'invalid_arguments', msg);
      expect(c.untouched).toBe(true);
    });
  }
  it('rows past the last offset are not checked (and not written)', async () => {
    const c = await scatterCase([0, 1, 99], [0, 0, 7], [1, 1]);
    expect(c.err).toBeUndefined();
    expect(c.untouched).toBe(false);
  });
  it('a gather index past the tokens', async () => {
    const strm = new Stream(gpu);
    const dst = mk(gpu, grouped(4, 4, 2), new Float64Array(16).fill(-1));
    writeOffsets(dst, [0, 2, 4]);
    new matmul.Primitive(new matmul.PrimitiveDesc(gpu, plain([3, 8]), plain([2, 8, 4]), grouped(4, 4, 2), new PrimitiveAttr().setGather())).execute(strm, {
      [ARG.SRC]: mk(gpu, plain([3, 8]), new Float64Array(24).fill(1)), [ARG.WEIGHTS]: mk(gpu, plain([2, 8, 4]), new Float64Array(64).fill(1)), [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: s32(gpu, [0, 1, 2, 3]),
    });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_TOKEN_INDEX[3] = 3 is out of range [-1, 3)');
    expect((await read(dst)).every((v) => v === -1)).toBe(true);
  });
  it('batched counts beyond the capacity or negative', async () => {
    const strm = new Stream(gpu);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(gpu, plain([2, 4, 8]), plain([2, 8, 8]), plain([2, 4, 8]), new PrimitiveAttr().setBatchedTokenCounts()));
    const dst = mk(gpu, plain([2, 4, 8]), new Float64Array(64).fill(-1));
    const a = { [ARG.SRC]: mk(gpu, plain([2, 4, 8]), new Float64Array(64).fill(1)), [ARG.WEIGHTS]: mk(gpu, plain([2, 8, 8]), new Float64Array(128).fill(1)), [ARG.DST]: dst };
    prim.execute(strm, { ...a, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(gpu, [2, 5]) });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_EXPERT_NUM_TOKENS[1] = 5 exceeds the batch capacity dims[1] = 4');
    prim.execute(strm, { ...a, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(gpu, [-1, 2]) });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_EXPERT_NUM_TOKENS[0] = -1 must be >= 0');
    expect((await read(dst)).every((v) => v === -1)).toBe(true);
    // After a good run (its counts still in the schedule), a bad one computes nothing either.
    prim.execute(strm, { ...a, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(gpu, [4, 4]) });
    await strm.wait();
    expect((await read(dst)).every((v) => v === 8)).toBe(true);
    dst.write(new Float64Array(64).fill(-1));
    prim.execute(strm, { ...a, [ARG.MOE_EXPERT_NUM_TOKENS]: s32(gpu, [4, 9]) });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_EXPERT_NUM_TOKENS[1] = 9 exceeds the batch capacity dims[1] = 4');
    expect((await read(dst)).every((v) => v === -1)).toBe(true);
  });
  it('an expert map entry outside [0, E), after the offsets rules', async () => {
    const strm = new Stream(gpu);
    const srcMd = grouped(6, 4, 3), dstMd = grouped(6, 5, 3);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(gpu, srcMd, plain([2, 4, 5]), dstMd, new PrimitiveAttr().setExpertMap()));
    const src = mk(gpu, srcMd, new Float64Array(24).fill(1));
    const dst = mk(gpu, dstMd, new Float64Array(30).fill(-1), src);
    const run = (offs: number[], map: number[]): Promise<void> => {
      writeOffsets(src, offs);
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(gpu, plain([2, 4, 5]), new Float64Array(40).fill(1)), [ARG.DST]: dst, [ARG.MOE_EXPERT_MAP]: s32(gpu, map) });
      return strm.wait();
    };
    await expectDnnlReject(run([0, 2, 4, 6], [0, 2, 1]), 'invalid_arguments', 'matmul.execute: ARG.MOE_EXPERT_MAP[1] = 2 is out of range [0, experts = 2)');
    await expectDnnlReject(run([0, 2, 4, 6], [0, 1, -1]), 'invalid_arguments', 'ARG.MOE_EXPERT_MAP[2] = -1 is out of range [0, experts = 2)');
    await expectDnnlReject(run([0, 4, 2, 6], [0, 2, 1]), 'invalid_arguments', 'src offsets must be non-decreasing: offsets[2] = 2 < offsets[1] = 4');
    expect((await read(dst)).every((v) => v === -1)).toBe(true);
  });
  it('offsets[0] > 0 needs attr.setZeroFillUngroupedRows; a negative offsets[0] is refused with it', async () => {
    const strm = new Stream(gpu);
    const run = async (attr: PrimitiveAttr, offs: number[]): Promise<Float64Array> => {
      const src = mk(gpu, grouped(6, 4, 2), new Float64Array(24).fill(1));
      writeOffsets(src, offs);
      const dst = mk(gpu, grouped(6, 5, 2), new Float64Array(30).fill(-1), src);
      new matmul.Primitive(new matmul.PrimitiveDesc(gpu, grouped(6, 4, 2), plain([2, 4, 5]), grouped(6, 5, 2), attr)).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(gpu, plain([2, 4, 5]), new Float64Array(40).fill(1)), [ARG.DST]: dst });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', offs[0] > 0 ? 'src offsets[0] must be 0, got 1 (attr.setZeroFillUngroupedRows lets the first group start later)' : 'src offsets[0] must be 0, got -1');
      return read(dst);
    };
    expect((await run(new PrimitiveAttr(), [1, 3, 6])).every((v) => v === -1)).toBe(true);
    expect((await run(new PrimitiveAttr().setZeroFillUngroupedRows(), [-1, 3, 6])).every((v) => v === -1)).toBe(true);
  });
});
