/**
 * f16 dst on the gpu engine: results beyond f16's range round to +-Inf (from 65520) or 65504 (below it),
 * NaN stays NaN, subnormal halves and ties round to nearest even: the cpu engine's values, element for
 * element. WGSL's `pack2x16float` is indeterminate outside the finite range (a first version stored NaN
 * for 90000 on SwiftShader), so the store rounds those itself. The decode kernel (gemv-splitk) and the
 * tiled one, which share the store.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, tag, type GpuEngine } from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';

const EDGE = [90000, -70000, 65504, 65519, 65520, -65520, 65536, 2049, 2050, 2 ** -20, 3 * 2 ** -26, 1e-9, -0, Infinity, -Infinity, Number.NaN, 1.5, -3.25];
const W = [1, -1, 0.5];

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

/** dst = src x W (K = 1) over `rows` rows cycling through EDGE, in G equal groups; the dst values and the impl. */
async function run(eng: Engine | GpuEngine, rows: number, G: number): Promise<{ got: number[]; impl: string }> {
  const N = W.length;
  const srcMd = memory.desc.grouped([rows, 1], dt.f32, G, [RUNTIME_DIM_VAL, 1]);
  const dstMd = memory.desc.grouped([rows, N], dt.f16, G, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([G, 1, N], dt.f32, tag.abc);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
  const prim = new matmul.Primitive(pd);
  const xs = Array.from({ length: rows }, (_, r) => EDGE[r % EDGE.length]);
  const ws = Array.from({ length: G }, () => W).flat();
  const offs = Array.from({ length: G + 1 }, (_, g) => Math.round((g * rows) / G));
  const strm = new Stream(eng);
  let got: number[];
  if (eng.kind === 'gpu') {
    const src = Memory.create(srcMd, eng).write(xs).writeOffsets(offs);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]), wei = Memory.create(weiMd, eng).write(ws);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    got = Array.from(await dst.read());
    for (const m of [src, dst, wei]) m.free();
  } else {
    const src = Memory.create(srcMd, eng).write(xs);
    src.offsets.set(offs);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]), wei = Memory.create(weiMd, eng).write(ws);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    got = Array.from(dst.read());
    for (const m of [src, dst, wei]) m.free();
  }
  prim.destroy();
  return { got, impl: pd.implInfo };
}

describe('gpu matmul f16 dst: overflow, NaN, subnormals and ties as on the cpu engine', () => {
  it.each([['decode rows (gemv-splitk)', EDGE.length, 3, /gemv-splitk/], ['many rows (tiled)', 4 * 64 + 5, 1, /gemm-tiled/]] as const)('%s', async (_n, rows, G, kernel) => {
    const g = await run(gpu, rows, G), c = await run(cpu, rows, G);
    expect(g.impl).toMatch(kernel);
    for (let i = 0; i < c.got.length; i++) expect(Object.is(g.got[i], c.got[i]) || (Number.isNaN(g.got[i]) && Number.isNaN(c.got[i])), `element ${i}: ${g.got[i]} vs ${c.got[i]}`).toBe(true);
    // The rounding the cpu engine applies (and so the gpu's): spelled out for the first row's column 0.
    expect(c.got.filter((_, i) => i % W.length === 0).slice(0, 12)).toEqual([Infinity, -Infinity, 65504, 65504, Infinity, -Infinity, Infinity, 2048, 2050, 2 ** -20, 2 ** -24, 0]);
  });
});
