import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, dt, matmul, memory, tag } from '../src/index.js';
import { ENGINE_CONFIGS, expectMatchesReference, readLogical, runDense, writeLogical, type DenseCase } from './helpers.js';
import { assertClose, refDense } from './reference.js';
import { mulberry32, randomF32 } from './workloads.js';

describe.each(ENGINE_CONFIGS)('matmul dense [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: DenseCase): Promise<void> => expectMatchesReference(await runDense(eng, strm, c));

  it('2D, sizes that are multiples of nothing (101x37 * 37x19)', async () => {
    await run({ srcDims: [101, 37], weiDims: [37, 19] });
  });

  it('2D with M = 1, K = 1, N = 1 corners', async () => {
    await run({ srcDims: [1, 37], weiDims: [37, 19] });
    await run({ srcDims: [101, 1], weiDims: [1, 19] });
    await run({ srcDims: [101, 37], weiDims: [37, 1] });
    await run({ srcDims: [1, 1], weiDims: [1, 1] });
  });

  it('3D batched', async () => {
    await run({ srcDims: [3, 17, 37], weiDims: [3, 37, 19] });
  });

  it('3D with src broadcast over the batch', async () => {
    await run({ srcDims: [1, 17, 37], weiDims: [4, 37, 19] });
  });

  it('3D with weights broadcast over the batch', async () => {
    await run({ srcDims: [4, 17, 37], weiDims: [1, 37, 19] });
  });

  it('4D with broadcast on different batch dims', async () => {
    await run({ srcDims: [2, 1, 5, 7], weiDims: [1, 3, 7, 4] });
  });

  it('transposed weights (ba) and transposed src (ba)', async () => {
    await run({ srcDims: [23, 37], weiDims: [37, 19], weiLayout: tag.ba, srcLayout: tag.ba });
  });

  it('acb weights in 3D', async () => {
    await run({ srcDims: [3, 17, 37], weiDims: [3, 37, 19], weiLayout: tag.acb });
  });

  it('padded src and dst via explicit strides', async () => {
    await run({ srcDims: [31, 37], weiDims: [37, 19], srcLayout: [41, 1], dstLayout: [25, 1] });
  });

  it('padded 3D src with a batch stride gap', async () => {
    await run({ srcDims: [2, 9, 10], weiDims: [2, 10, 3], srcLayout: [100, 11, 1] });
  });

  it.each([
    ['[M, N]', [23, 19]],
    ['[1, N]', [1, 19]],
    ['[M, 1]', [23, 1]],
    ['[1, 1]', [1, 1]],
  ] as const)('2D bias %s', async (_n, bias) => {
    await run({ srcDims: [23, 37], weiDims: [37, 19], bias });
  });

  it('3D bias [1, 1, N] with batch broadcast', async () => {
    await run({ srcDims: [1, 17, 37], weiDims: [4, 37, 19], bias: [1, 1, 19] });
  });

  it('bf16 everything', async () => {
    await run({ srcDims: [23, 37], weiDims: [37, 19], srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16 });
  });

  it('f16 everything', async () => {
    await run({ srcDims: [23, 37], weiDims: [37, 19], srcDt: dt.f16, weiDt: dt.f16, dstDt: dt.f16 });
  });

  it('post-ops: linear then relu then sum', async () => {
    await run({ srcDims: [23, 37], weiDims: [37, 19], bias: [1, 19], postOps: [{ kind: 'linear', alpha: 3, beta: -0.25 }, { kind: 'relu', alpha: 0 }, { kind: 'sum', scale: 2 }] });
  });

  it('tag.any dst resolves to row-major and queryMd reports it', async () => {
    const srcMd = memory.desc([5, 6], dt.f32, tag.ab);
    const weiMd = memory.desc([6, 4], dt.f32, tag.ab);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, memory.desc([5, 4], dt.f32, tag.any));
    const dstMd = pd.queryMd('dst');
    expect(dstMd?.format).toBe('blocked');
    expect(dstMd?.formatTag).toBe('ab');
    expect(pd.queryMd('bias')).toBeUndefined();
    if (!dstMd) return;
    const rng = mulberry32(1);
    const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng), dst = Memory.create(dstMd, eng);
    const x = randomF32(rng, 30), w = randomF32(rng, 24);
    writeLogical(src, x);
    writeLogical(wei, w);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    assertClose(readLogical(dst), refDense(x, [5, 6], w, [6, 4]));
    [src, wei, dst].forEach((m) => m.free());
  });

  it('K = 0: dst is zero (plus bias)', async () => {
    await run({ srcDims: [3, 0], weiDims: [0, 5] });
    await run({ srcDims: [3, 0], weiDims: [0, 5], bias: [1, 5] });
  });

  it('M = 0 and N = 0 write nothing', async () => {
    await run({ srcDims: [0, 4], weiDims: [4, 5] });
    await run({ srcDims: [3, 4], weiDims: [4, 0] });
  });

  it('a zero batch broadcast against 1 is an empty batch', async () => {
    await run({ srcDims: [0, 3, 4], weiDims: [1, 4, 5] });
  });

  it('larger than one tile in every dim (M > 64, N > 128, K > 256)', async () => {
    await run({ srcDims: [130, 300], weiDims: [300, 140] });
  });

  it('src broadcast over the batch with acb weights and a per-batch bias', async () => {
    await run({ srcDims: [1, 5, 9], weiDims: [3, 9, 10], weiLayout: tag.acb, bias: [3, 1, 10] });
  });

  it('bias varying only along the batch', async () => {
    await run({ srcDims: [3, 5, 9], weiDims: [3, 9, 10], bias: [3, 1, 1] });
  });

  it('bias varying along M in a batched problem', async () => {
    await run({ srcDims: [3, 5, 9], weiDims: [3, 9, 10], bias: [1, 5, 10] });
  });
});
