/**
 * A representative subset on a multi-threaded engine (threads > 1: worker pool, asynchronous
 * stream). The full matrix runs with threads = 1 in the other files.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Stream, dt } from '../src/index.js';
import { expectDnnlReject, expectMatchesReference, readLogical, runDense, runGroupedK, runGroupedM, setupGroupedM } from './helpers.js';
import { assertClose, refGroupedM } from './reference.js';
import { DISTRIBUTIONS } from './workloads.js';

describe('matmul on a 3-thread engine', () => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 3 });
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  it.each(DISTRIBUTIONS)('grouped M, G = 32: %s', async (_n, gen) => {
    expectMatchesReference(await runGroupedM(eng, strm, { G: 32, K: 37, N: 19, sizes: gen(32, 101), totalM: 110, offsets: 'shared' }));
  });

  it('grouped M, G = 256, padded, acb, bias, bf16 dst', async () => {
    expectMatchesReference(await runGroupedM(eng, strm, { G: 256, K: 37, N: 19, sizes: DISTRIBUTIONS[2][1](256, 101), srcRowStride: 40, dstRowStride: 21, weiTag: 'acb', bias: [256, 19], dstDt: dt.bf16 }));
  });

  it('grouped M spanning several tiles', async () => {
    expectMatchesReference(await runGroupedM(eng, strm, { G: 3, K: 300, N: 140, sizes: [70, 0, 130], postOps: [{ kind: 'sum', scale: 1 }, { kind: 'relu', alpha: 0 }] }));
  });

  it('grouped K', async () => {
    expectMatchesReference(await runGroupedK(eng, strm, { G: 8, M: 70, N: 19, sizes: [0, 40, 3, 0, 200, 1, 0, 56], bias: [8, 1, 19] }));
  });

  it('dense batched', async () => {
    expectMatchesReference(await runDense(eng, strm, { srcDims: [3, 70, 37], weiDims: [1, 37, 140] }));
  });

  it('bad offsets reject from wait() and leave dst untouched', async () => {
    const f = setupGroupedM(eng, { G: 3, K: 4, N: 6, sizes: [2, 3, 4], totalM: 10, offsets: 'shared' });
    f.src.offsets.set([0, 2, 5, 11]);
    const before = f.dst.read();
    f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src offsets[3] = 11 exceeds the total extent 10 of dims[0]');
    const after = f.dst.read();
    expect(after.every((v, i) => Object.is(v, before[i]))).toBe(true);
    f.free();
  });

  it('work queued back to back completes before wait() resolves', async () => {
    const fs = [1, 2, 3, 4].map((i) => setupGroupedM(eng, { G: 4, K: 9, N: 33, sizes: [i, 0, 5, 2 * i], seed: i }));
    for (const f of fs) f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    expect(strm.busy).toBe(true);
    await strm.wait();
    expect(strm.busy).toBe(false);
    fs.forEach((f, j) => assertClose(readLogical(f.dst), refGroupedM(f.x, f.w, [j + 1, 0, 5, 2 * (j + 1)], 9, 33)));
    fs.forEach((f) => f.free());
  });
});
