/**
 * Proposal #3 with per-expert scale granularity (issue 18): experts whose weights use different scale
 * groupings in one `grouped_gemm` — expert 0 per column, expert 1 K-blocked, expert 2 per tensor —
 * through `attr.setExpertScales`. Against a float64 product of the dequantized weights written here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, Stream, dt, grouped_gemm, matmul, memory, tag } from '../src/index.js';
import { expectDnnlError } from './helpers.js';
import { PROPOSAL_CONFIGS, runtimeRows } from './proposal_helpers.js';
import { mulberry32 } from './workloads.js';

describe.each(PROPOSAL_CONFIGS)('grouped_gemm: per-expert scale granularity [%s]', (_n, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  it('expert 0 per-column, expert 1 K-blocked (32 x 1), expert 2 per-tensor, one empty expert; s8 weights, f32 src', async () => {
    const K = 64, N = 9, rows = [3, 5, 0, 4], G = rows.length, gK = 32;
    const rng = mulberry32(7);
    const attr = new PrimitiveAttr().setScales(ARG.MULTIPLE_WEIGHTS, 0); // every expert: per tensor ...
    attr.setExpertScales(ARG.MULTIPLE_WEIGHTS, 0, 2); // ... except expert 0: per column
    attr.setExpertScales(ARG.MULTIPLE_WEIGHTS, 1, 3, [gK, 1]); // and expert 1: K blocks of 32 per column
    const srcMds = rows.map(() => runtimeRows(K, dt.f32)), dstMds = rows.map(() => runtimeRows(N, dt.f32));
    const weiMds = rows.map(() => memory.desc([K, N], dt.s8, tag.ab));
    const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, memory.desc([G], dt.s32, tag.x), attr);
    expect(pd.queryMd('scales:weights', 0)!.dims).toEqual([N]);
    expect(pd.queryMd('scales:weights', 1)!.dims).toEqual([K / gK, N]);
    expect(pd.queryMd('scales:weights', 2)!.dims).toEqual([1]);
    const mems: Memory[] = [];
    const mk = (md: Parameters<typeof Memory.create>[0]): Memory => { const m = Memory.create(md, eng); mems.push(m); return m; };
    const args: Record<number, Memory> = {};
    const x: Float64Array[] = [], w: Float64Array[] = [], s: Float64Array[] = [], dsts: Memory[] = [];
    for (let i = 0; i < G; i++) {
      const cap = Math.max(rows[i], 1);
      x.push(Float64Array.from({ length: rows[i] * K }, () => Math.fround(rng() * 2 - 1)));
      w.push(Float64Array.from({ length: K * N }, () => Math.round((rng() * 2 - 1) * 127)));
      const smd = pd.queryMd('scales:weights', i)!;
      s.push(Float64Array.from({ length: smd.dims.reduce((a, b) => a * b, 1) }, () => Math.fround(0.001 + 0.01 * rng())));
      const src = mk(memory.desc([cap, K], dt.f32, tag.ab)), dst = mk(memory.desc([cap, N], dt.f32, tag.ab));
      src.write(Float64Array.from({ length: cap * K }, (_, j) => x[i][j] ?? 0));
      dst.write(new Array(cap * N).fill(5));
      dsts.push(dst);
      args[ARG.MULTIPLE_SRC + i] = Memory.create(srcMds[i], eng, src.handles[0]);
      args[ARG.MULTIPLE_DST + i] = Memory.create(dstMds[i], eng, dst.handles[0]);
      args[ARG.MULTIPLE_WEIGHTS + i] = mk(weiMds[i]).write(w[i]);
      args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + i)] = mk(smd).write(s[i]);
    }
    args[ARG.RUNTIME_DIMS] = mk(memory.desc([G], dt.s32, tag.x)).write(rows);
    new grouped_gemm.Primitive(pd).execute(strm, args);
    await strm.wait();
    const scaleOf = (i: number, k: number, n: number): number => (i === 0 ? s[0][n] : i === 1 ? s[1][Math.floor(k / gK) * N + n] : s[i][0]);
    for (let i = 0; i < G; i++) {
      const got = dsts[i].read();
      for (let r = 0; r < rows[i]; r++) {
        for (let n = 0; n < N; n++) {
          let want = 0;
          for (let k = 0; k < K; k++) want += x[i][r * K + k] * w[i][k * N + n] * scaleOf(i, k, n);
          expect(Math.abs(got[r * N + n] - want), `expert ${i} row ${r} col ${n}`).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(want)));
        }
      }
    }
    // The kernels take one scale layout for all experts: the pd says so and runs the reference.
    expect(pd.implInfo).toMatch(/^ref:/);
    for (let i = 0; i < G; i++) { args[ARG.MULTIPLE_SRC + i].free(); args[ARG.MULTIPLE_DST + i].free(); }
    mems.forEach((m) => { if (!m.isFreed) m.free(); });
  });

  it('scales on some experts only (no every-expert setting): the others take none', async () => {
    const K = 5, N = 3, rows = [2, 3, 1], G = 3;
    const attr = new PrimitiveAttr().setExpertScales(ARG.MULTIPLE_WEIGHTS, 1, 0).setExpertScales(ARG.MULTIPLE_SRC, 2, 1);
    const pd = new grouped_gemm.PrimitiveDesc(eng, rows.map(() => runtimeRows(K, dt.f32)), rows.map(() => memory.desc([K, N], dt.f32, tag.ab)), rows.map(() => runtimeRows(N, dt.f32)), memory.desc([G], dt.s32, tag.x), attr);
    expect(pd.queryMd('scales:weights', 0)).toBeUndefined();
    expect(pd.queryMd('scales:weights', 1)!.dims).toEqual([1]);
    expect(pd.queryMd('scales:src', 2)!.dims[0]).toBeLessThan(0);
    const mems: Memory[] = [];
    const mk = (md: Parameters<typeof Memory.create>[0], h?: number): Memory => { const m = Memory.create(md, eng, h); mems.push(m); return m; };
    const args: Record<number, Memory> = { [ARG.RUNTIME_DIMS]: mk(memory.desc([G], dt.s32, tag.x)).write(rows) };
    const dsts: Memory[] = [];
    for (let i = 0; i < G; i++) {
      args[ARG.MULTIPLE_SRC + i] = mk(runtimeRows(K, dt.f32), mk(memory.desc([rows[i], K], dt.f32, tag.ab)).write(new Array(rows[i] * K).fill(1)).handles[0]);
      const d = mk(memory.desc([rows[i], N], dt.f32, tag.ab));
      dsts.push(d);
      args[ARG.MULTIPLE_DST + i] = mk(runtimeRows(N, dt.f32), d.handles[0]);
      args[ARG.MULTIPLE_WEIGHTS + i] = mk(memory.desc([K, N], dt.f32, tag.ab)).write(new Array(K * N).fill(1));
    }
    args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1)] = mk(pd.queryMd('scales:weights', 1)!).write([4]);
    // Per row of expert 2's runtime rows: a view over one value.
    args[ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 2)] = mk(pd.queryMd('scales:src', 2)!, mk(memory.desc([1], dt.f32, tag.a)).write([0.5]).handles[0]);
    new grouped_gemm.Primitive(pd).execute(strm, args);
    await strm.wait();
    expect(Array.from(dsts[0].read())).toEqual(new Array(2 * N).fill(K));
    expect(Array.from(dsts[1].read())).toEqual(new Array(3 * N).fill(4 * K));
    expect(Array.from(dsts[2].read())).toEqual(new Array(N).fill(0.5 * K));
    mems.reverse().forEach((m) => { if (!m.isFreed) m.free(); });
  });

  it('rules: the expert must exist, the arg must be a MULTIPLE_* id, matmul refuses it', () => {
    const pdOf = (attr: PrimitiveAttr): unknown => new grouped_gemm.PrimitiveDesc(eng, [runtimeRows(4, dt.f32)], [memory.desc([4, 3], dt.s8, tag.ab)], [runtimeRows(3, dt.f32)], memory.desc([1], dt.s32, tag.x), attr);
    expectDnnlError(() => pdOf(new PrimitiveAttr().setExpertScales(ARG.MULTIPLE_WEIGHTS, 1, 2)), 'invalid_arguments', 'attr.setExpertScales names expert 1, but there are 1 experts');
    expectDnnlError(() => new PrimitiveAttr().setExpertScales(ARG.WEIGHTS, 0, 2), 'invalid_arguments', 'attr.setExpertScales: arg must be ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS or ARG.MULTIPLE_DST');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([2, 4], dt.f32, tag.ab), memory.desc([4, 3], dt.s8, tag.ab), memory.desc([2, 3], dt.f32, tag.ab), new PrimitiveAttr().setExpertScales(ARG.MULTIPLE_WEIGHTS, 0, 2)), 'invalid_arguments', 'attr.setExpertScales belongs to grouped_gemm');
  });
});
