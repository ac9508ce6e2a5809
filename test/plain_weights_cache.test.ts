/**
 * Issue 12: plain (`abc` / `acb`) weights are packed once per N-block per call into a per-worker cache
 * (K whole, reused by the worker's next M-blocks of the group), or per K block when K exceeds the
 * cache. Both must give exactly what packed (`tag.any`) weights give — the same kernel, the same
 * k order — at 1, 2 and 3 threads, and match the reference.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, matmul, memory, reorder, tag } from '../src/index.js';
import { attrFor, expectMatchesReference, readLogical, runGroupedM, setupGroupedM, writeLogical, type GroupedMCase } from './helpers.js';

const THREADS = [1, 2, 3] as const;

/** dst of a grouped-M case with the weights as given, then with the same weights reordered to tag.any. */
async function plainAndPacked(eng: Engine, strm: Stream, c: GroupedMCase): Promise<{ plain: Float64Array; packed: Float64Array; impl: string }> {
  const f = setupGroupedM(eng, c);
  const used = c.sizes.reduce((a, b) => a + b, 0);
  try {
    const prev = readLogical(f.dst);
    const bias = f.bias ? { [ARG.BIAS]: f.bias } : {};
    f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst, ...bias });
    await strm.wait();
    const plain = readLogical(f.dst).slice(0, used * c.N);
    writeLogical(f.dst, prev);
    const anyMd = memory.desc([c.G, c.K, c.N], f.wei.desc.dataType, tag.any);
    const attr = attrFor(c.postOps);
    const pd = f.bias
      ? new matmul.PrimitiveDesc(eng, f.src.desc, anyMd, f.bias.desc, f.dst.desc, attr)
      : new matmul.PrimitiveDesc(eng, f.src.desc, anyMd, f.dst.desc, attr);
    const packedMem = Memory.create(pd.queryMd('weights')!, eng);
    try {
      expect(packedMem.desc.format).toBe('packed');
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, f.wei.desc, packedMem.desc)).execute(strm, { [ARG.FROM]: f.wei, [ARG.TO]: packedMem });
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: packedMem, [ARG.DST]: f.dst, ...bias });
      await strm.wait();
    } finally {
      packedMem.free();
    }
    return { plain, packed: readLogical(f.dst).slice(0, used * c.N), impl: f.pd.implInfo };
  } finally {
    f.free();
  }
}

const bitsEqual = (a: Float64Array, b: Float64Array): number[] => {
  const bad: number[] = [];
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) bad.push(i);
  return bad;
};

// Groups of several 64-row M-blocks (the cache is reused), an empty group, a one-row group; N = 268:
// two full 128-column N-blocks (the cache key must tell them apart) and
// a 12-column one with a 4-column panel; K = 2100 exceeds the cache (2048) and takes the per-K-block packing.
const CASES: (GroupedMCase & { name: string })[] = [];
for (const weiTag of ['abc', 'acb'] as const)
  for (const weiDt of [dt.f32, dt.bf16])
    for (const K of [300, 2100])
      CASES.push({ name: `${weiTag} ${weiDt} K = ${K}`, G: 4, K, N: 268, sizes: [150, 0, 70, 1], weiTag, weiDt, seed: K + (weiTag === 'acb' ? 1 : 0) });

// Groups of at most one M-block (64 rows) on row-major f32 weights run as one tile over all N with K in
// chunks of whole weight rows (gemm-driver.c run_tile_rows): K odd and past several chunks, N with a
// 4-column panel, a 64-row group (exactly one M-block) beside a 65-row one (tiled), E = 1, bias and an
// eltwise post-op (the last chunk's epilogue), a dst row stride wider than N.
for (const c of [
  { name: 'row tiles: small groups, K = 301, N = 268, bias + relu', G: 5, K: 301, N: 268, sizes: [3, 64, 0, 65, 1], bias: [5, 268] as const, postOps: [{ kind: 'relu', alpha: 0.1 }] as const, seed: 11 },
  { name: 'row tiles: E = 1, 9 rows, K = 1030, N = 1412, dst row stride 1500', G: 1, K: 1030, N: 1412, sizes: [9], dstRowStride: 1500, bias: [1, 1412] as const, seed: 12 },
  { name: 'row tiles: one group takes every row (40), K = 2048, N = 200', G: 3, K: 2048, N: 200, sizes: [0, 40, 0], seed: 13 },
] satisfies (GroupedMCase & { name: string })[])
  CASES.push({ ...c, weiTag: 'abc', weiDt: dt.f32 });

describe('plain weights, packed once per call (issue 12)', () => {
  const engines: Engine[] = [];
  beforeAll(async () => {
    for (const threads of THREADS) engines.push(await Engine.create({ threads, kernels: 'simd128' }));
  });
  afterAll(() => engines.forEach((e) => e.release()));

  it.each(CASES)('$name: matches the reference; bitwise equal to packed weights; 1/2/3 threads identical', async (c) => {
    const results = [];
    for (const eng of engines) {
      const strm = new Stream(eng);
      expectMatchesReference(await runGroupedM(eng, strm, c));
      results.push(await plainAndPacked(eng, strm, c));
    }
    expect(results[0].impl).toBe('wasm:simd128:f32-gemm-4x8');
    for (const [i, r] of results.entries()) {
      expect(bitsEqual(r.plain, r.packed).slice(0, 5), `${THREADS[i]} threads: plain vs packed`).toEqual([]);
      expect(bitsEqual(r.plain, results[0].plain).slice(0, 5), `${THREADS[i]} threads vs 1`).toEqual([]);
    }
    // The result is not trivially zero (the comparison above would pass on an untouched dst too).
    expect(results[0].plain.some((v) => v !== 0)).toBe(true);
  });

  it('two calls with different weights in the same buffer: the cache is not stale across calls', async () => {
    const eng = engines[0];
    const strm = new Stream(eng);
    const c: GroupedMCase = { G: 2, K: 64, N: 16, sizes: [130, 5], seed: 3 };
    const f = setupGroupedM(eng, c);
    try {
      const args = { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst };
      f.prim.execute(strm, args);
      await strm.wait();
      const first = readLogical(f.dst).slice(0, 135 * 16);
      writeLogical(f.wei, f.w.map((v) => 2 * v));
      f.prim.execute(strm, args);
      await strm.wait();
      const second = readLogical(f.dst).slice(0, 135 * 16);
      expect(bitsEqual(second, first.map((v) => 2 * v)).slice(0, 5)).toEqual([]);
    } finally {
      f.free();
    }
  });
});
