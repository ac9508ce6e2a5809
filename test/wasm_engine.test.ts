/**
 * The wasm engine: results independent of the thread count (bitwise), packed weights equal to plain
 * ones, every ISA against the float64 reference on MoE-shaped problems, and recovery from a worker
 * that throws or dies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, offsets, reorder, tag } from '../src/index.js';
import { CMD } from '../src/runtime/control_block.js';
import { TOL_F32, assertClose, refGroupedM } from './reference.js';
import { allFirst, allLast, geometricSkew, mulberry32, randomF32 } from './workloads.js';

interface Case {
  name: string;
  sizes: number[];
  K: number;
  N: number;
}

const CASES: Case[] = [
  { name: 'geometric skew, K and N off-tile', sizes: geometricSkew(9, 301), K: 261, N: 133 },
  { name: 'all tokens in the last of 32 experts', sizes: allLast(32, 70), K: 64, N: 72 },
  { name: 'all tokens in the first of 256 experts', sizes: allFirst(256, 67), K: 19, N: 9 },
  { name: 'decode: 1-2 rows over many experts', sizes: Array.from({ length: 64 }, (_, i) => (i % 5 === 0 ? 1 + (i % 2) : 0)), K: 300, N: 200 },
  { name: 'E = 1, tall', sizes: [333], K: 520, N: 17 },
];

async function runGroupedM(eng: Engine, c: Case, packed: boolean, x: Float64Array, w: Float64Array): Promise<Float64Array> {
  const strm = new Stream(eng);
  const E = c.sizes.length, T = c.sizes.reduce((a, b) => a + b, 0);
  const srcMd = memory.desc.grouped([T, c.K], dt.f32, E, [RUNTIME_DIM_VAL, c.K]);
  const dstMd = memory.desc.grouped([T, c.N], dt.f32, E, [RUNTIME_DIM_VAL, c.N]);
  const userMd = memory.desc([E, c.K, c.N], dt.f32, tag.abc);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, packed ? memory.desc([E, c.K, c.N], dt.f32, tag.any) : userMd, dstMd);
  expect(pd.implInfo).toMatch(/^wasm:/);
  const src = Memory.create(srcMd, eng).write(x);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  offsets.fromSizes(c.sizes, src.offsets);
  const user = Memory.create(userMd, eng).write(w);
  let wei = user;
  if (packed) {
    wei = Memory.create(pd.queryMd('weights')!, eng);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMd, wei.desc)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei });
  }
  new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  await strm.wait();
  const out = Float64Array.from(dst.read());
  for (const m of [src, dst, user, wei]) m.free();
  return out;
}

describe('wasm engine', () => {
  const engines: Record<string, Engine> = {};
  beforeAll(async () => {
    engines.t1 = await Engine.create({ threads: 1, kernels: 'simd128' });
    engines.t2 = await Engine.create({ threads: 2, kernels: 'simd128' });
    engines.t3 = await Engine.create({ threads: 3, kernels: 'simd128' });
    engines.r2 = await Engine.create({ threads: 2, kernels: 'relaxed' });
  });
  afterAll(() => Object.values(engines).forEach((e) => e.release()));

  for (const c of CASES) {
    it(`${c.name}: matches the reference, bitwise equal across 1/2/3 threads and packed/plain`, async () => {
      const rng = mulberry32(c.K * 31 + c.N);
      const T = c.sizes.reduce((a, b) => a + b, 0);
      const x = randomF32(rng, T * c.K);
      const w = randomF32(rng, c.sizes.length * c.K * c.N);
      const base = await runGroupedM(engines.t1, c, false, x, w);
      assertClose(base, refGroupedM(x, w, c.sizes, c.K, c.N), TOL_F32);
      for (const [name, packed] of [['t2', false], ['t3', false], ['t1', true], ['t2', true]] as const) {
        const other = await runGroupedM(engines[name], c, packed, x, w);
        expect(Buffer.from(other.buffer).equals(Buffer.from(base.buffer)), `${name} packed=${packed}`).toBe(true);
      }
      // The FMA build rounds differently but must be as accurate.
      assertClose(await runGroupedM(engines.r2, c, true, x, w), refGroupedM(x, w, c.sizes, c.K, c.N), TOL_F32);
    });
  }

  it('reports ISA and thread count in implInfo and engine fields', () => {
    expect(engines.t2.threads).toBe(2);
    expect(engines.t2.isa).toBe('simd128');
    expect(engines.r2.isa).toBe('relaxed');
  });
});

describe('worker failures', () => {
  for (const kind of ['throws', 'dies'] as const) {
    it(`a worker that ${kind} rejects stream.wait() with runtime_error and the engine stays usable`, async () => {
      const eng = await Engine.create({ threads: 2, kernels: 'simd128' });
      const strm = new Stream(eng);
      strm.enqueue(() => eng.pool!.run(() => 0, kind === 'throws' ? CMD.THROW : CMD.DIE));
      const err = await strm.wait().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DnnlError);
      expect((err as DnnlError).status).toBe('runtime_error');
      expect((err as DnnlError).message).toMatch(kind === 'throws' ? /injected failure in worker/ : /exited with code 3/);
      // Afterwards a real job runs correctly on a restarted pool.
      const c: Case = { name: 'after failure', sizes: [3, 0, 5], K: 11, N: 13 };
      const rng = mulberry32(5);
      const x = randomF32(rng, 8 * 11), w = randomF32(rng, 3 * 11 * 13);
      assertClose(await runGroupedM(eng, c, false, x, w), refGroupedM(x, w, c.sizes, c.K, c.N), TOL_F32);
      eng.release();
    });
  }
});

describe('pd.implInfo names the kernel path a problem takes', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'simd128' });
  });
  afterAll(() => eng.release());

  const info = (srcDt: 's8' | 'f32', weiDt: 's8' | 's4' | 'f32', scaled: boolean, weiTag: 'any' | 'abc' = 'any'): string => {
    const attr = new PrimitiveAttr();
    if (scaled) attr.setScales(ARG.WEIGHTS, 0, [], dt.f32);
    const src = memory.desc.grouped([10, 16], srcDt, 2, [RUNTIME_DIM_VAL, 16]);
    const d = memory.desc.grouped([10, 8], dt.f32, 2, [RUNTIME_DIM_VAL, 8]);
    return new matmul.PrimitiveDesc(eng, src, memory.desc([2, 16, 8], weiDt, tag[weiTag]), d, attr).implInfo;
  };

  it('f32 without scales: the fast path', () => expect(info('f32', 'f32', false)).toBe('wasm:simd128:f32-gemm-4x8'));
  it('f32 with weight scales: the fused epilogue path', () => expect(info('f32', 'f32', true)).toBe('wasm:simd128:f32-gemm-4x8-fused'));
  it('s8 x s8 packed (x8:p8): the integer kernel on the code panels', () => expect(info('s8', 's8', true)).toBe('wasm:simd128:s16-gemm-3x8-w8'));
  it('s8 x s4 packed (x4:p8k2): the integer kernel on the 4-bit panels', () => expect(info('s8', 's4', true)).toBe('wasm:simd128:s16-gemm-3x8-w4'));
  it('s8 x s8 plain: the integer kernel on per-tile int16 panels', () => expect(info('s8', 's8', true, 'abc')).toBe('wasm:simd128:s16-gemm-3x8'));
  it('P3 grouped_gemm reports its path the same way', () => {
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.MULTIPLE_WEIGHTS, 0, [], dt.f32);
    const s = memory.desc([RUNTIME_DIM_VAL, 16], dt.s8, tag.ab), d = memory.desc([RUNTIME_DIM_VAL, 8], dt.f32, tag.ab);
    const pd = new grouped_gemm.PrimitiveDesc(eng, [s, s], [memory.desc([16, 8], dt.s8, tag.any), memory.desc([16, 8], dt.s8, tag.any)], [d, d], memory.desc([2], dt.s32, tag.x), attr);
    expect(pd.implInfo).toBe('wasm:simd128:s16-gemm-3x8-w8');
  });
});
