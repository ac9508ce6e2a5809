import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, Stream, dt, matmul, memory, tag } from '../src/index.js';
import { ENGINE_CONFIGS, expectDnnlReject, readLogical, setupGroupedM, writeLogical } from './helpers.js';
import { assertClose, refDense, refGroupedM } from './reference.js';
import { mulberry32, randomF32 } from './workloads.js';

describe.each(ENGINE_CONFIGS)('Stream [%s]', (_engine, opts) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(opts);
  });
  afterAll(() => eng.release());

  it('wait() with nothing queued resolves; a new stream is not busy', async () => {
    const s = new Stream(eng);
    expect(s.engine).toBe(eng);
    expect(s.busy).toBe(false);
    await expect(s.wait()).resolves.toBeUndefined();
    await expect(s.wait()).resolves.toBeUndefined();
  });

  it('work runs in order: the second matmul reads what the first wrote', async () => {
    const s = new Stream(eng);
    const rng = mulberry32(21);
    const [M, K, H, N] = [6, 5, 7, 4];
    const md = (d: number[]) => memory.desc(d, dt.f32, tag.ab);
    const x = Memory.create(md([M, K]), eng), w1 = Memory.create(md([K, H]), eng), h = Memory.create(md([M, H]), eng);
    const w2 = Memory.create(md([H, N]), eng), y = Memory.create(md([M, N]), eng);
    const xv = randomF32(rng, M * K), w1v = randomF32(rng, K * H), w2v = randomF32(rng, H * N);
    writeLogical(x, xv);
    writeLogical(w1, w1v);
    writeLogical(w2, w2v);
    h.write(new Array<number>(M * H).fill(Number.NaN));
    const p1 = new matmul.Primitive(new matmul.PrimitiveDesc(eng, md([M, K]), md([K, H]), md([M, H])));
    const p2 = new matmul.Primitive(new matmul.PrimitiveDesc(eng, md([M, H]), md([H, N]), md([M, N])));
    p1.execute(s, { [ARG.SRC]: x, [ARG.WEIGHTS]: w1, [ARG.DST]: h });
    p2.execute(s, { [ARG.SRC]: h, [ARG.WEIGHTS]: w2, [ARG.DST]: y });
    await s.wait();
    expect(s.busy).toBe(false);
    const hRef = refDense(xv, [M, K], w1v, [K, H]);
    assertClose(readLogical(h), hRef);
    // Feed the reference the f32 h the library produced (the second product starts from it).
    assertClose(readLogical(y), refDense(readLogical(h), [M, H], w2v, [H, N]));
    [x, w1, h, w2, y].forEach((m) => m.free());
  });

  it('a runtime error is reported once, by the next wait(), as the same DnnlError', async () => {
    const s = new Stream(eng);
    const f = setupGroupedM(eng, { G: 2, K: 3, N: 2, sizes: [1, 2], offsets: 'shared' });
    f.src.offsets.set([0, 2, 1]);
    f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    const e = await expectDnnlReject(s.wait(), 'invalid_arguments', 'non-decreasing');
    expect(e).toBeInstanceOf(DnnlError);
    expect(e.name).toBe('DnnlError');
    expect(e.message.startsWith('invalid_arguments: ')).toBe(true);
    await expect(s.wait()).resolves.toBeUndefined();
    f.free();
  });

  it('errors are per stream: another stream on the same engine is unaffected', async () => {
    const bad = new Stream(eng), good = new Stream(eng);
    const f = setupGroupedM(eng, { G: 2, K: 3, N: 2, sizes: [1, 2], offsets: 'shared' });
    const g = setupGroupedM(eng, { G: 2, K: 3, N: 2, sizes: [1, 2], offsets: 'shared', seed: 9 });
    f.src.offsets.set([0, 1, 7]);
    f.prim.execute(bad, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    g.prim.execute(good, { [ARG.SRC]: g.src, [ARG.WEIGHTS]: g.wei, [ARG.DST]: g.dst });
    await expect(good.wait()).resolves.toBeUndefined();
    assertClose(readLogical(g.dst), refGroupedM(g.x, g.w, [1, 2], 3, 2));
    await expectDnnlReject(bad.wait(), 'invalid_arguments', 'exceeds the total extent 3');
    f.free();
    g.free();
  });

  it('an argument error throws from execute and leaves the stream clean', async () => {
    const s = new Stream(eng);
    const f = setupGroupedM(eng, { G: 2, K: 3, N: 2, sizes: [1, 2] });
    expect(() => f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.DST]: f.dst })).toThrow(DnnlError);
    expect(s.busy).toBe(false);
    await expect(s.wait()).resolves.toBeUndefined();
    f.free();
  });

  it('many executions queued before one wait all complete', async () => {
    const s = new Stream(eng);
    const fs = [0, 1, 2, 3, 4].map((i) => setupGroupedM(eng, { G: 3, K: 5, N: 4, sizes: [i, 2, 4 - i], seed: 40 + i }));
    for (const f of fs) f.prim.execute(s, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst });
    await s.wait();
    fs.forEach((f, i) => assertClose(readLogical(f.dst), refGroupedM(f.x, f.w, [i, 2, 4 - i], 5, 4)));
    fs.forEach((f) => f.free());
  });
});
