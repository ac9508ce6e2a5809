/**
 * Packed (tag.any-chosen) weights: host writes are refused with the way to fill them (the reorder),
 * and executing on packed weights that nothing filled is refused, naming the argument (it used to
 * compute silently with whatever the heap held).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, moe, offsets, reorder, tag,
} from '../src/index.js';
import { expectDnnlError } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
const G = 2, K = 8, N = 4, R = 6;
let eng: Engine;
beforeAll(async () => {
  eng = await Engine.create({ threads: 1, kernels: 'simd128' });
});
afterAll(() => eng.release());

function groupedMatmul(): { pd: matmul.PrimitiveDesc; args: Record<number, Memory>; user: Memory } {
  const srcMd = memory.desc.grouped([R, K], dt.f32, G, [RT, K]), dstMd = memory.desc.grouped([R, N], dt.f32, G, [RT, N]);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([G, K, N], dt.f32, tag.any), dstMd);
  const src = Memory.create(srcMd, eng);
  src.write(new Float64Array(R * K).fill(1));
  offsets.fromSizes([4, 2], src.offsets);
  const user = Memory.create(memory.desc([G, K, N], dt.f32, tag.abc), eng);
  user.write(new Float64Array(G * K * N).fill(0.5));
  return { pd, user, args: { [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(pd.queryMd('weights')!, eng), [ARG.DST]: Memory.create(dstMd, eng, [undefined, src.handles[1]]) } };
}

describe('packed weights memory', () => {
  it('write and read say it is packed and how to fill it, instead of "expected 0 values"', () => {
    const { args } = groupedMatmul();
    const w = args[ARG.WEIGHTS];
    expect(w.desc.format).toBe('packed');
    expectDnnlError(() => w.write(new Float64Array(G * K * N)), 'invalid_arguments', /^invalid_arguments: Memory\.write: .* has a packed layout \(chosen by a pd for tag\.any\): fill it with a reorder from a plain memory$/);
    expectDnnlError(() => w.read(), 'invalid_arguments', 'Memory.read: ');
  });

  it('matmul on packed weights nothing filled is refused, naming ARG.WEIGHTS; after the reorder it runs', async () => {
    const strm = new Stream(eng);
    const { pd, args, user } = groupedMatmul();
    const prim = new matmul.Primitive(pd);
    expectDnnlError(() => prim.execute(strm, args), 'invalid_arguments', 'matmul.execute: ARG.WEIGHTS is a packed weights memory that was never filled: reorder the plain weights into it first');
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, args[ARG.WEIGHTS].desc)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: args[ARG.WEIGHTS] });
    prim.execute(strm, args);
    await strm.wait();
    expect(Array.from(args[ARG.DST].read()).slice(0, N)).toEqual(new Array<number>(N).fill(K * 0.5));
    // A wrapper over the filled buffer is filled too; a fresh allocation (even at a reused address) is not.
    const wrap = Memory.create(args[ARG.WEIGHTS].desc, eng, args[ARG.WEIGHTS].handles[0]);
    prim.execute(strm, { ...args, [ARG.WEIGHTS]: wrap });
    await strm.wait();
    const h = args[ARG.WEIGHTS].handles[0];
    args[ARG.WEIGHTS].free();
    const again = Memory.create(pd.queryMd('weights')!, eng);
    expect(again.handles[0]).toBe(h);
    expectDnnlError(() => prim.execute(strm, { ...args, [ARG.WEIGHTS]: again }), 'invalid_arguments', 'ARG.WEIGHTS is a packed weights memory that was never filled');
    // Raw bytes (pre-packed panels loaded by the caller) count as filling.
    again.bytes().set(new Uint8Array(again.desc.getSize(0)));
    prim.execute(strm, { ...args, [ARG.WEIGHTS]: again });
    await strm.wait();
  });

  it('grouped_gemm and the MoE layer refuse unfilled packed weights too, naming their own argument', () => {
    const strm = new Stream(eng);
    const gpd = new grouped_gemm.PrimitiveDesc(eng, [memory.desc([RT, K], dt.f32, tag.ab)], [memory.desc([K, N], dt.f32, tag.any)], [memory.desc([RT, N], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.x));
    const rd = Memory.create(memory.desc([1], dt.s32, tag.x), eng);
    (rd.values as Int32Array)[0] = 2;
    const gargs = {
      [ARG.MULTIPLE_SRC]: grouped_gemm.expertViews(Memory.create(memory.desc([2, K], dt.f32, tag.ab), eng), [0, 2])[0], [ARG.MULTIPLE_WEIGHTS]: Memory.create(gpd.queryMd('weights', 0)!, eng),
      [ARG.MULTIPLE_DST]: grouped_gemm.expertViews(Memory.create(memory.desc([2, N], dt.f32, tag.ab), eng), [0, 2])[0], [ARG.RUNTIME_DIMS]: rd,
    };
    expectDnnlError(() => new grouped_gemm.Primitive(gpd).execute(strm, gargs), 'invalid_arguments', 'grouped_gemm.execute: ARG.MULTIPLE_WEIGHTS + 0 is a packed weights memory that was never filled');
    const lpd = new moe.layer.PrimitiveDesc(eng, { tokens: 3, hidden: K, intermediate: N, experts: G, topK: 1 });
    const m = (what: string): Memory => Memory.create(lpd.queryMd(what)!, eng);
    const largs = { [ARG.SRC]: m('hidden'), [ARG.MOE_ROUTER_LOGITS]: m('logits'), [ARG.WEIGHTS]: m('w13'), [ARG.WEIGHTS_1]: m('w2'), [ARG.DST]: m('dst') };
    expectDnnlError(() => new moe.layer.Primitive(lpd).execute(strm, largs), 'invalid_arguments', 'moe.layer.execute: ARG.WEIGHTS is a packed weights memory that was never filled');
  });
});
