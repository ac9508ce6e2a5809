/**
 * Regression: expert views are bounded by their own slice, even at the very end of the parent buffer;
 * a memory over a whole allocation by the bytes that allocation asked for, not by the allocator's
 * 64-byte block (its padding is no memory's: 3 rows of 5 f32 once "fit" a 40-byte [2, 5] buffer).
 */
import { describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag } from '../src/index.js';

describe('grouped_gemm expert views', () => {
  for (const kernels of ['simd128', 'none'] as const) {
    it(`a view at the end of its parent rejects rows beyond its slice (${kernels})`, async () => {
      const eng = await Engine.create({ threads: 1, kernels });
      const strm = new Stream(eng);
      const K = 16, N = 16, T = 10;
      const src = Memory.create(memory.desc([T, K], dt.f32, tag.ab), eng).write(new Float32Array(T * K).fill(1));
      const dst = Memory.create(memory.desc([T, N], dt.f32, tag.ab), eng);
      const weights = [0, 1].map(() => Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng).write(new Float32Array(K * N).fill(2)));
      const guard = new Float32Array(weights[0].values as Float32Array);
      const offs = [0, 10, 10];
      const sv = grouped_gemm.expertViews(src, offs), dv = grouped_gemm.expertViews(dst, offs);
      const dims = Memory.create(memory.desc([2], dt.s32, tag.x), eng).write([10, 3]);
      const pd = new grouped_gemm.PrimitiveDesc(eng, sv.map((m) => m.desc), weights.map((m) => m.desc), dv.map((m) => m.desc), dims.desc);
      const args: Record<number, Memory> = { [ARG.RUNTIME_DIMS]: dims };
      for (let i = 0; i < 2; i++) Object.assign(args, { [ARG.MULTIPLE_SRC + i]: sv[i], [ARG.MULTIPLE_WEIGHTS + i]: weights[i], [ARG.MULTIPLE_DST + i]: dv[i] });
      new grouped_gemm.Primitive(pd).execute(strm, args);
      const err = await strm.wait().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DnnlError);
      expect((err as DnnlError).message).toContain('ARG.RUNTIME_DIMS[1] = 3 rows do not fit');
      expect(Array.from(weights[0].values as Float32Array)).toEqual(Array.from(guard));
      expect(memory.desc([RUNTIME_DIM_VAL, K], dt.f32, tag.ab).equals(sv[1].desc)).toBe(true);
      eng.release();
    });
  }

  for (const kernels of ['simd128', 'none'] as const) {
    it(`a runtime-rows memory over a whole buffer rejects rows past its bytes, within the block's padding (${kernels})`, async () => {
      const eng = await Engine.create({ threads: 1, kernels });
      const strm = new Stream(eng);
      const K = 5, N = 3;
      const srcMd = memory.desc([RUNTIME_DIM_VAL, K], dt.f32, tag.ab), dstMd = memory.desc([RUNTIME_DIM_VAL, N], dt.f32, tag.ab);
      const sp = Memory.create(memory.desc([2, K], dt.f32, tag.ab), eng).write(new Float32Array(2 * K).fill(1));
      const dp = Memory.create(memory.desc([2, N], dt.f32, tag.ab), eng);
      const wei = Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng).write(new Float32Array(K * N).fill(1));
      const dims = Memory.create(memory.desc([1], dt.s32, tag.x), eng);
      const pd = new grouped_gemm.PrimitiveDesc(eng, [srcMd], [wei.desc], [dstMd], dims.desc);
      const prim = new grouped_gemm.Primitive(pd);
      const args = { [ARG.MULTIPLE_SRC]: Memory.create(srcMd, eng, sp.handles[0]), [ARG.MULTIPLE_WEIGHTS]: wei, [ARG.MULTIPLE_DST]: Memory.create(dstMd, eng, dp.handles[0]), [ARG.RUNTIME_DIMS]: dims };
      dims.write([3]);
      prim.execute(strm, args);
      const err = await strm.wait().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DnnlError);
      expect((err as DnnlError).message).toContain("ARG.RUNTIME_DIMS[0] = 3 rows do not fit expert 0's src/dst allocations (2 rows fit)");
      dims.write([2]);
      prim.execute(strm, args);
      await strm.wait();
      expect(Array.from(dp.read())).toEqual(new Array(2 * N).fill(K));
      eng.release();
    });
  }

  it('views of a buffer that is no longer a live allocation are refused, naming the first such view', async () => {
    const eng = await Engine.create({ threads: 1, kernels: 'none' });
    const md = memory.desc([4, 8], dt.f32, tag.ab);
    const owner = Memory.create(md, eng);
    const wrapper = Memory.create(md, eng, owner.handles[0]);
    const views = grouped_gemm.expertViews(wrapper, [0, 1, 4]);
    expect(views.map((v) => [v.handles[0] - owner.handles[0], v.capacityBytes])).toEqual([[0, 32], [32, 96]]);
    owner.free();
    expect(() => grouped_gemm.expertViews(wrapper, [0, 1, 4])).toThrow(/Memory.create: handle 0 \[0x[0-9a-f]+, \+0\) does not lie inside a live allocation of this engine/);
    eng.release();
  });
});
