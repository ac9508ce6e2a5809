/**
 * `eng.release()` while work enqueued on one of its streams is still pending, the same on both engine
 * kinds (as oneDNN's reference-counted engines and PyTorch's stream-aware allocator: a resource that
 * queued work still uses stays alive until that work is done): nothing new may use the engine, the
 * pending work still runs to the end, and `stream.wait()` resolves, or rejects with that work's own
 * errors (bad runtime offsets), as it would have without the release. The results are checked where
 * they can still be read: a cpu memory read directly (cpu engine), a download enqueued before the release
 * into a live cpu engine's memory (gpu engine: its own memories refuse every use after release).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, GpuEngine, GpuMemory, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, reorder, tag } from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';
import { exactValues, expectDnnlError, expectDnnlReject } from './helpers.js';
import { assertClose, refDense, TOL_F32 } from './reference.js';

const reader: Engine[] = [];
afterAll(() => reader.forEach((e) => e.release()));

const ENGINES = [
  ['cpu, 1 thread', () => Engine.create({ threads: 1 })],
  ['cpu, 2 threads (the work runs on the workers after release())', () => Engine.create({ threads: 2, kernels: 'simd128' })],
  ['cpu, reference', () => Engine.create({ threads: 1, kernels: 'none' })],
  ['gpu', () => gpuEngine()],
] as const;

describe.each(ENGINES)('release() with stream work pending [%s]', (_name, create) => {
  it('the pending work runs to the end and wait() resolves; nothing new is accepted; a later wait() resolves', async () => {
    const eng: Engine | GpuEngine = await create();
    const M = 9, K = 16, N = 12;
    const sMd = memory.desc([M, K], dt.f32, tag.ab), wMd = memory.desc([K, N], dt.f32, tag.ab), dMd = memory.desc([M, N], dt.f32, tag.ab);
    const x = exactValues(M * K, 5), w = exactValues(K * N, 6);
    const src = Memory.create(sMd, eng).write(x), wei = Memory.create(wMd, eng).write(w), dst = Memory.create(dMd, eng).write(new Float64Array(M * N).fill(-1));
    const strm = new Stream(eng);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, sMd, wMd, dMd));
    // Twice, the second reading the first one's output (dst -> src): both must have run for the values below.
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    const sq = memory.desc([M, M], dt.f32, tag.ab), sqOut = memory.desc([M, N], dt.f32, tag.ab);
    const eye = Memory.create(sq, eng).write(Float64Array.from({ length: M * M }, (_, i) => (i % (M + 1) === 0 ? 2 : 0)));
    const out = Memory.create(sqOut, eng).write(new Float64Array(M * N).fill(-1));
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, sq, dMd, sqOut)).execute(strm, { [ARG.SRC]: eye, [ARG.WEIGHTS]: dst, [ARG.DST]: out });
    let host: Memory | undefined;
    if (eng.kind === 'gpu') {
      const cpu = await Engine.create({ threads: 1 });
      reader.push(cpu);
      host = Memory.create(sqOut, cpu);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, sqOut, cpu, sqOut)).execute(strm, { [ARG.FROM]: out, [ARG.TO]: host });
    }
    const pool = eng.kind === 'gpu' ? undefined : eng.pool;
    eng.release();
    expect(eng.isReleased).toBe(true);
    // The workers stop once the pending work is done (they used to be stopped at once, then restarted by it).
    expect(pool?.running ?? false).toBe(pool !== undefined);
    expectDnnlError(() => new Stream(eng), 'invalid_arguments', 'engine: used after release()');
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst }), 'invalid_arguments', 'engine: used after release()');
    await strm.wait();
    const ref = refDense(x, [M, K], w, [K, N]);
    const want = { value: ref.value.map((v) => 2 * v), mag: ref.mag.map((v) => 2 * v) };
    // (host is set for the gpu engine, whose own memories refuse every use after release)
    const got = host ? host.read() : out instanceof GpuMemory ? await out.read() : out.read();
    assertClose(got, want, TOL_F32, 'the work enqueued before release()');
    expect(pool?.running ?? false).toBe(false);
    await strm.wait();
  });

  it('errors of the pending work are still reported by wait(), not as a use after release', async () => {
    const eng: Engine | GpuEngine = await create();
    const G = 3, K = 8, N = 4, R = 7;
    const sMd = memory.desc.grouped([R, K], dt.f32, G, [RUNTIME_DIM_VAL, K]), dMd = memory.desc.grouped([R, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const wMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const src = Memory.create(sMd, eng).write(exactValues(R * K, 7));
    const bad = [0, 5, 2, 7];
    const dst = src instanceof GpuMemory ? Memory.create(dMd, src.engine, [undefined, src.writeOffsets(bad).buffers[1]]) : Memory.create(dMd, src.engine, [undefined, src.handles[1]]);
    if (!(src instanceof GpuMemory)) src.offsets.set(bad);
    const wei = Memory.create(wMd, eng).write(exactValues(G * K * N, 8));
    const strm = new Stream(eng);
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, sMd, wMd, dMd)).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    eng.release();
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src offsets must be non-decreasing: offsets[2] = 2 < offsets[1] = 5');
    await strm.wait();
  });
});
