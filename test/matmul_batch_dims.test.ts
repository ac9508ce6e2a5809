import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, matmul, memory } from '../src/index.js';
import { BATCH_CASES, expectGluBitsOf3D, runBatchCase } from './batch_dims_cases.js';
import { randomFor } from './helpers.js';
import { mulberry32 } from './workloads.js';
import { splitBatch } from '../src/primitives/matmul/batch_dims.js';

/** Dense matmul with more than one batch dim on the cpu engine: the wasm kernels run it, never the reference. */
describe.each([
  ['wasm simd128, 1 thread', { threads: 1, kernels: 'simd128' as const }],
  ['wasm relaxed, 2 threads', { threads: 2, kernels: 'relaxed' as const }],
])('matmul with more than one batch dim [%s]', (_name, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  it.each(BATCH_CASES.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const { implInfo } = await runBatchCase(eng, strm, c);
    expect(implInfo).toMatch(/^wasm:/);
  });

  it('the same bits as the 3D matmuls of each outer index (src broadcast on dim 0: two launches)', async () => {
    const four = await runBatchCase(eng, strm, { name: '4D', src: [1, 3, 5, 7], wei: [2, 3, 7, 9] });
    // Each outer index b0 is the 3D matmul src [3, 5, 7] x weights[b0] [3, 7, 9] of the same values.
    const M = 5, N = 9;
    for (let b0 = 0; b0 < 2; b0++) {
      const three = await runSlice(eng, strm, b0);
      expect(Array.from(four.got.subarray(b0 * 3 * M * N, (b0 + 1) * 3 * M * N))).toEqual(Array.from(three));
    }
  });

  it('a GLU: the bits of the 3D matmuls (one collapsed batch, and two launches)', async () => {
    await expectGluBitsOf3D(eng, strm);
  });

  it.each([
    ['column-major src per batch (abdc)', { srcTag: 'abdc' }],
    ['column-major dst per batch (abdc) with broadcast src (launches)', { dstTag: 'abdc', src: [2, 1, 5, 7] }],
    ['src batch-major inside (cdab)', { srcTag: 'cdab' }],
  ] as const)('non-unit column strides (the gpu engine refuses them): %s', async (_n, o) => {
    const { implInfo } = await runBatchCase(eng, strm, { name: _n, src: [2, 3, 5, 7], wei: [2, 3, 7, 9], ...o });
    expect(implInfo).toMatch(/^wasm:/);
  });

  it('implInfo names the launches of a batch that does not collapse', async () => {
    const { implInfo } = await runBatchCase(eng, strm, { name: 'launches', src: [2, 1, 5, 7], wei: [2, 3, 7, 9] });
    expect(implInfo).toMatch(/^wasm:.*\+2-batch-launches$/);
    expect((await runBatchCase(eng, strm, { name: 'one', src: [2, 3, 5, 7], wei: [2, 3, 7, 9] })).implInfo).not.toMatch(/launches/);
  });

  it('tag.any weights resolve to plain row-major with more than one batch dim', () => {
    const pd = new matmul.PrimitiveDesc(eng, memory.desc([2, 3, 5, 7], dt.f32, 'abcd'), memory.desc([2, 3, 7, 9], dt.f32, 'any'), memory.desc([2, 3, 5, 9], dt.f32, 'abcd'));
    expect(pd.queryMd('weights')!.format).toBe('blocked');
    expect(pd.queryMd('weights')!.strides).toEqual([189, 63, 9, 1]);
    expect(pd.implInfo).toMatch(/^wasm:/);
  });
});

/** The 3D matmul of outer index b0 of the two-launch case above, with the values runBatchCase generated. */
async function runSlice(eng: Engine, strm: Stream, b0: number): Promise<Float64Array> {
  const rng = mulberry32(7);
  const x = randomFor(dt.f32, rng, 3 * 5 * 7), w = randomFor(dt.f32, rng, 2 * 3 * 7 * 9);
  const srcMd = memory.desc([3, 5, 7], dt.f32, 'abc'), weiMd = memory.desc([3, 7, 9], dt.f32, 'abc'), dstMd = memory.desc([3, 5, 9], dt.f32, 'abc');
  const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
  const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(w.subarray(b0 * 189, (b0 + 1) * 189)), dst = Memory.create(dstMd, eng);
  prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  await strm.wait();
  const out = Float64Array.from(dst.read());
  [src, wei, dst].forEach((m) => m.free());
  return out;
}

describe('batch dims: which dims collapse into the kernels\' batch, how many launches the rest take', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1 });
  });
  afterAll(() => eng.release());

  const plan = (src: number[], wei: number[], tags: { src?: string; dst?: string } = {}): { batch: readonly number[]; launches: number; offsets: number[] } => {
    const nd = src.length, r = 'abcdefgh'.slice(0, nd);
    const dstDims = [...src.slice(0, nd - 2).map((b, i) => (b === 1 ? wei[i] : b)), src[nd - 2], wei[nd - 1]];
    const pd = new matmul.PrimitiveDesc(eng, memory.desc(src, dt.f32, tags.src ?? r), memory.desc(wei, dt.f32, r), memory.desc(dstDims, dt.f32, tags.dst ?? r));
    const s = splitBatch(pd.problem);
    if (s === undefined || typeof s === 'string') throw new Error(`no split: ${s}`);
    return { batch: s.inner.batch, launches: s.outer.length, offsets: s.outer.map((o) => o.src) };
  };

  it('full batch dims collapse into one', () => {
    expect(plan([2, 3, 5, 7], [2, 3, 7, 9])).toMatchObject({ batch: [6], launches: 1 });
    expect(plan([2, 2, 3, 4, 6], [2, 2, 3, 6, 5])).toMatchObject({ batch: [12], launches: 1 });
  });

  it('an operand broadcast over every batch dim still collapses; dims of 1 take no part', () => {
    expect(plan([1, 1, 5, 7], [2, 3, 7, 9])).toMatchObject({ batch: [6], launches: 1 });
    expect(plan([2, 1, 5, 7], [2, 1, 7, 9])).toMatchObject({ batch: [2], launches: 1 });
    expect(plan([1, 1, 5, 7], [1, 1, 7, 9])).toMatchObject({ batch: [1], launches: 1 });
  });

  it('a broadcast on one of two dims: the larger dim is the kernels\' batch, the other the launches', () => {
    expect(plan([1, 3, 5, 7], [2, 3, 7, 9])).toMatchObject({ batch: [3], launches: 2, offsets: [0, 0] });
    expect(plan([2, 1, 5, 7], [2, 3, 7, 9])).toMatchObject({ batch: [3], launches: 2, offsets: [0, 35] });
    expect(plan([2, 1, 2, 3, 4], [2, 3, 2, 4, 6])).toMatchObject({ batch: [3], launches: 4 });
  });

  it('swapped batch strides in src: two runs', () => {
    expect(plan([2, 3, 5, 7], [2, 3, 7, 9], { src: 'bacd' })).toMatchObject({ batch: [3], launches: 2, offsets: [0, 35] });
  });
});

describe('batch dims: an empty batch dim', () => {
  it('takes no launch: nothing runs', async () => {
    const eng = await Engine.create({ threads: 1 });
    try {
      const srcMd = memory.desc([2, 0, 5, 7], dt.f32, 'abcd'), weiMd = memory.desc([1, 1, 7, 9], dt.f32, 'abcd'), dstMd = memory.desc([2, 0, 5, 9], dt.f32, 'abcd');
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
      expect(pd.implInfo).toMatch(/^wasm:/);
      const s = splitBatch(pd.problem);
      expect(s !== undefined && typeof s !== 'string' && s.outer.length).toBe(0);
      const strm = new Stream(eng);
      const [src, wei, dst] = [srcMd, weiMd, dstMd].map((md) => Memory.create(md, eng));
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      await strm.wait();
    } finally {
      eng.release();
    }
  });
});
