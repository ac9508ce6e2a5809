import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Stream } from '../src/index.js';
import { DISTRIBUTIONS, balanced, geometricSkew, linearSkew, mulberry32, randomRouting } from './workloads.js';
import { ENGINE_CONFIGS, expectMatchesReference, readLogical, runGroupedK, setupGroupedK, writeLogical, type GroupedKCase } from './helpers.js';
import { assertClose, refGroupedK } from './reference.js';

describe.each(ENGINE_CONFIGS)('matmul grouped variable K: [M, total_K] x [total_K, N] -> [G, M, N] [%s]', (_engine, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: GroupedKCase): Promise<void> => expectMatchesReference(await runGroupedK(eng, strm, c));

  describe.each([32, 256])('G = %i, M = 7, N = 19, total_K = 101', (G) => {
    it.each(DISTRIBUTIONS)('%s', async (_name, gen) => {
      await run({ G, M: 7, N: 19, sizes: gen(G, 101), seed: G + 1 });
    });
  });

  it('random routing, G = 16, M = 13, N = 11, 150 tokens', async () => {
    await run({ G: 16, M: 13, N: 11, sizes: randomRouting(mulberry32(9), 16, 150) });
  });

  it('E = 1', async () => {
    await run({ G: 1, M: 9, N: 19, sizes: [101] });
  });

  it('M = 1 and N = 1', async () => {
    await run({ G: 6, M: 1, N: 1, sizes: [0, 4, 0, 9, 1, 0] });
  });

  it('groups of a single column (K = 1 each)', async () => {
    await run({ G: 10, M: 5, N: 3, sizes: new Array<number>(10).fill(1) });
  });

  it('an empty group writes zeros over whatever dst held', async () => {
    const r = await runGroupedK(eng, strm, { G: 4, M: 3, N: 5, sizes: [0, 7, 0, 0] });
    expectMatchesReference(r);
    const per = 3 * 5;
    for (const g of [0, 2, 3]) expect([...r.got.subarray(g * per, (g + 1) * per)]).toEqual(new Array<number>(per).fill(0));
  });

  it('all groups empty: dst is all zeros', async () => {
    const r = await runGroupedK(eng, strm, { G: 3, M: 2, N: 2, sizes: [0, 0, 0], totalK: 5 });
    expectMatchesReference(r);
    expect([...r.got]).toEqual(new Array<number>(12).fill(0));
  });

  it('an empty group writes the bias', async () => {
    await run({ G: 4, M: 3, N: 5, sizes: [0, 7, 0, 2], bias: [4, 3, 5] });
  });

  it.each([
    ['[G, M, N]', [5, 7, 19]],
    ['[G, 1, N]', [5, 1, 19]],
    ['[1, 1, N]', [1, 1, 19]],
    ['[1, M, 1]', [1, 7, 1]],
    ['[G, 1, 1]', [5, 1, 1]],
  ] as const)('bias %s', async (_name, bias) => {
    await run({ G: 5, M: 7, N: 19, sizes: [30, 0, 21, 50, 0], bias });
  });

  it('columns past the last offset are ignored (total_K larger than the routed tokens)', async () => {
    await run({ G: 8, M: 7, N: 19, sizes: balanced(8, 90), totalK: 101 });
  });

  it('strided (padded) src and weights', async () => {
    await run({ G: 8, M: 7, N: 19, sizes: linearSkew(8, 101), srcRowStride: 105, weiRowStride: 23 });
  });

  it('shared offsets buffer between src and weights', async () => {
    await run({ G: 32, M: 7, N: 19, sizes: geometricSkew(32, 101), offsets: 'shared' });
  });

  it('separate but equal offsets buffers', async () => {
    await run({ G: 32, M: 7, N: 19, sizes: geometricSkew(32, 101), offsets: 'separate' });
  });

  it('per-group (host-known) groupedDims', async () => {
    await run({ G: 4, M: 7, N: 19, sizes: [20, 0, 70, 11], perGroup: true });
  });

  it('bf16 inputs and dst', async () => {
    await run({ G: 8, M: 7, N: 19, sizes: linearSkew(8, 101), srcDt: 'bf16', weiDt: 'bf16', dstDt: 'bf16' });
  });

  it('f16 inputs, f32 dst', async () => {
    await run({ G: 8, M: 7, N: 19, sizes: linearSkew(8, 101), srcDt: 'f16', weiDt: 'f16' });
  });

  it('f32 inputs, f16 dst', async () => {
    await run({ G: 8, M: 7, N: 19, sizes: geometricSkew(8, 101), dstDt: 'f16' });
  });

  it('post-ops: bias + relu + sum', async () => {
    await run({ G: 5, M: 7, N: 19, sizes: [30, 0, 21, 50, 0], bias: [5, 1, 19], postOps: [{ kind: 'relu', alpha: 0 }, { kind: 'sum', scale: -1.5 }] });
  });

  it('re-executing with new offsets follows the new grouping', async () => {
    const G = 4, M = 5, N = 6, totalK = 20;
    const f = setupGroupedK(eng, { G, M, N, sizes: balanced(G, totalK), offsets: 'shared' });
    try {
      for (const sizes of [[20, 0, 0, 0], [0, 0, 0, 20], [3, 0, 17, 0], [0, 0, 0, 0]]) {
        writeLogical(f.dst, new Float64Array(G * M * N).fill(777));
        let acc = 0;
        f.src.offsets.set([0, ...sizes.map((s) => (acc += s))]);
        f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
        await strm.wait();
        assertClose(readLogical(f.dst), refGroupedK(f.x, f.w, sizes, M, N));
      }
    } finally {
      f.free();
    }
  });

  it('M = 0 is a no-op', async () => {
    await run({ G: 3, M: 0, N: 5, sizes: [2, 0, 3] });
  });

  it('groups larger than one K block (K_g > 256, M > 64, N > 128)', async () => {
    await run({ G: 3, M: 70, N: 140, sizes: [270, 0, 65], totalK: 340 });
  });
});
