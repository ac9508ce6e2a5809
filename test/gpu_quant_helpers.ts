/**
 * The rfcs/0002 runners of quant_helpers.ts on the gpu engine: the same cases (GMCase, DenseCase), the
 * same independent float64 expectation (expectElement), with GpuMemory (asynchronous reads, offsets
 * written to the device) instead of cpu memory.
 */
import { expect } from 'vitest';
import { ARG, GpuEngine, GpuMemory, Memory, MemoryDesc, Stream, dt, matmul, memory, tag } from '../src/index.js';
import {
  RT, attrOf, binaryTensor, convert, expectElement, scaleValues, tensorValues, zpValues,
  type Expectation, type GMCase, type DenseCase, type Lookup, type Outcome, type Sizes, type TestOp,
} from './quant_helpers.js';
import { cumulative, mulberry32, type Rng } from './workloads.js';

const QUANT_ID = { src: ARG.SRC, weights: ARG.WEIGHTS, dst: ARG.DST } as const;


/** Scales / zero points of a case: memories in `args`, lookups for the expectation. */
function quantArgs(eng: GpuEngine, pd: matmul.PrimitiveDesc, c: Pick<GMCase, 'scales' | 'zps'>, S: Sizes, rng: Rng, args: Record<number, GpuMemory>, mk: (md: MemoryDesc) => GpuMemory): Partial<Record<string, Lookup>> {
  const look: Partial<Record<string, Lookup>> = {};
  for (const [kind, base, tbl] of [['s', ARG.ATTR_SCALES, c.scales], ['z', ARG.ATTR_ZERO_POINTS, c.zps]] as const) {
    for (const a of ['src', 'weights', 'dst'] as const) {
      const q = tbl?.[a];
      if (!q) continue;
      const qdt = q.dt ?? (kind === 's' ? dt.f32 : dt.s32);
      const dims = q.gran.dims(S);
      const count = dims.reduce((u, v) => u * v, 1);
      const vals = kind === 's' ? scaleValues(qdt, rng, count) : zpValues(qdt, rng, count);
      const md = memory.desc(dims, qdt, 'abc'.slice(0, dims.length));
      expect(pd.queryMd(`${kind === 's' ? 'scales' : 'zero_points'}:${a}`)?.equals(md)).toBe(true);
      args[base | QUANT_ID[a]] = mk(md).write(vals);
      look[kind + a] = (g, i, j) => vals[q.gran.index(S, g, i, j)];
    }
  }
  void eng;
  return look;
}

/** Grouped M on the gpu engine (P#1 grouped descriptors or P#2 offsets attribute); plain abc weights. */
export async function runGpuGM(eng: GpuEngine, strm: Stream, c: GMCase): Promise<Outcome> {
  const rng = mulberry32(c.seed ?? 7);
  const { G, K, N, sizes } = c;
  const used = sizes.reduce((a, b) => a + b, 0);
  const M = c.totalM ?? used;
  const Nd = c.glu ? N / 2 : N;
  const S: Sizes = { G, M, K, N, Nd };
  const p2 = c.proposal === 'P2';
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const offs = cumulative(sizes);
  const groupOf = (r: number): number => { let g = 0; while (r >= offs[g + 1]) g++; return g; };
  const srcMd = p2 ? memory.desc([M, K], srcDt, tag.ab) : memory.desc.grouped([M, K], srcDt, G, [RT, K]);
  const dstMd = p2 ? memory.desc([M, Nd], dstDt, tag.ab) : memory.desc.grouped([M, Nd], dstDt, G, [RT, Nd]);
  const weiMd = memory.desc([G, K, N], weiDt, tag.abc);
  const biasMd = c.bias ? memory.desc([G, N], dt.f32, tag.ab) : undefined;
  const bins = (c.ops ?? []).map((op) => (op.kind === 'binary' ? binaryTensor(op.shape, S, rng, op.dt) : undefined));
  const attr = attrOf(c, bins.map((b) => b?.md));
  if (p2) attr.setGroupedOffsets(ARG.SRC, G);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  expect(pd.implInfo).toMatch(/^webgpu/);
  const prim = new matmul.Primitive(pd);
  const mems: GpuMemory[] = [];
  const mk = (md: MemoryDesc, handles?: (GPUBuffer | undefined)[]): GpuMemory => { const m = Memory.create(md, eng, handles); mems.push(m); return m; };
  try {
    const x = tensorValues(srcDt, rng, M * K, c.fullRange), w = tensorValues(weiDt, rng, G * K * N, c.fullRange);
    const src = mk(srcMd).write(x);
    const wei = mk(weiMd).write(w);
    const dst = p2 ? mk(dstMd) : mk(dstMd, [undefined, src.handles[1]]);
    const prev = tensorValues(dstDt, rng, M * Nd);
    dst.write(prev);
    const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    if (p2) args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = mk(pd.queryMd('grouped_offsets')!).write(offs);
    else src.writeOffsets(offs);
    const b = c.bias ? tensorValues(dt.f32, rng, G * N) : undefined;
    if (biasMd && b) args[ARG.BIAS] = mk(biasMd).write(b);
    const look = quantArgs(eng, pd, c, S, rng, args, (md) => mk(md));
    bins.forEach((t, i) => {
      if (!t) return;
      expect(pd.queryMd(`binary:${i + (c.glu ? 1 : 0)}`)?.equals(t.md)).toBe(true);
      // A grouped src1 shares src's offsets buffer (P#1).
      args[ARG.ATTR_MULTIPLE_POST_OP(i + (c.glu ? 1 : 0)) | ARG.SRC_1] = mk(t.md, t.md.isGrouped ? [undefined, src.handles[1]] : undefined).write(t.values);
    });
    prim.execute(strm, args);
    await strm.wait();
    const e: Expectation = {
      N, dstDt, glu: c.glu,
      x: (r, k) => x[r * K + k],
      w: (g, k, n) => w[(g * K + k) * N + n],
      ss: look.ssrc, zs: look.zsrc, sw: look.sweights, zw: look.zweights, sd: look.sdst, zd: look.zdst,
      bias: b ? (g, _r, n) => b[g * N + n] : undefined,
      ops: (c.ops ?? []).map((op, i) => ({ ...op, at: bins[i]?.at })),
      prev: (r, n) => prev[r * Nd + n],
    };
    const ks = Array.from({ length: K }, (_, k) => k);
    const want = new Float64Array(used * Nd);
    for (let r = 0; r < used; r++) for (let n = 0; n < Nd; n++) want[r * Nd + n] = expectElement(e, groupOf(r), r, n, ks);
    const all = await dst.read();
    for (let i = used * Nd; i < M * Nd; i++) expect(Object.is(all[i], convert(dstDt, prev[i])), `row ${Math.floor(i / Nd)} past the last offset was written`).toBe(true);
    return { got: Float64Array.from(all.slice(0, used * Nd)), want, pd };
  } finally {
    mems.forEach((m) => m.free());
    prim.destroy();
  }
}

/** Dense 2D on the gpu engine: src [M, K] x weights [K, N] -> dst [M, Nd]; binary src1 [M|1, Nd|1]. */
export async function runGpuDense(eng: GpuEngine, strm: Stream, c: DenseCase): Promise<Outcome> {
  const rng = mulberry32(c.seed ?? 9);
  const { M, K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const S: Sizes = { G: 1, M, K, N, Nd };
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const srcMd = memory.desc([M, K], srcDt, tag.ab), weiMd = memory.desc([K, N], weiDt, tag.ab), dstMd = memory.desc([M, Nd], dstDt, tag.ab);
  const biasMd = c.bias ? memory.desc([1, N], dt.f32, tag.ab) : undefined;
  const bins = (c.ops ?? []).map((op) => {
    if (op.kind !== 'binary_dense') return undefined;
    const [r, n] = op.dims;
    const v = Float64Array.from({ length: r * n }, () => [-2, -1, 0.5, 1, 2][Math.floor(rng() * 5)]);
    return { md: memory.desc([r, n], dt.f32, tag.ab), values: v, at: (_g: number, rr: number, nn: number) => v[(r === 1 ? 0 : rr) * n + (n === 1 ? 0 : nn)] };
  });
  const ops: TestOp[] = (c.ops ?? []).map((op) => (op.kind === 'binary_dense' ? { kind: 'binary', alg: op.alg, shape: 'row_n' } : op));
  const attr = attrOf({ ...c, ops }, bins.map((b) => b?.md));
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  expect(pd.implInfo).toMatch(/^webgpu/);
  const prim = new matmul.Primitive(pd);
  const mems: GpuMemory[] = [];
  const mk = (md: MemoryDesc): GpuMemory => { const m = Memory.create(md, eng); mems.push(m); return m; };
  try {
    const x = tensorValues(srcDt, rng, M * K), w = tensorValues(weiDt, rng, K * N), prev = tensorValues(dstDt, rng, M * Nd);
    const dst = mk(dstMd).write(prev);
    const args: Record<number, GpuMemory> = { [ARG.SRC]: mk(srcMd).write(x), [ARG.WEIGHTS]: mk(weiMd).write(w), [ARG.DST]: dst };
    const b = c.bias ? tensorValues(dt.f32, rng, N) : undefined;
    if (biasMd && b) args[ARG.BIAS] = mk(biasMd).write(b);
    const look = quantArgs(eng, pd, c, S, rng, args, mk);
    bins.forEach((t, i) => {
      if (t) args[ARG.ATTR_MULTIPLE_POST_OP(i + (c.glu ? 1 : 0)) | ARG.SRC_1] = mk(t.md).write(t.values);
    });
    prim.execute(strm, args);
    await strm.wait();
    const e: Expectation = {
      N, dstDt, glu: c.glu,
      x: (r, k) => x[r * K + k],
      w: (_g, k, n) => w[k * N + n],
      ss: look.ssrc, zs: look.zsrc, sw: look.sweights, zw: look.zweights, sd: look.sdst, zd: look.zdst,
      bias: b ? (_g, _r, n) => b[n] : undefined,
      ops: ops.map((op, i) => ({ ...op, at: bins[i]?.at })),
      prev: (r, n) => prev[r * Nd + n],
    };
    const ks = Array.from({ length: K }, (_, k) => k);
    const want = new Float64Array(M * Nd);
    for (let r = 0; r < M; r++) for (let n = 0; n < Nd; n++) want[r * Nd + n] = expectElement(e, 0, r, n, ks);
    return { got: Float64Array.from(await dst.read()), want, pd };
  } finally {
    mems.forEach((m) => m.free());
    prim.destroy();
  }
}
