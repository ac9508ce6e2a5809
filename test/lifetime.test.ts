/**
 * Lifetime rules (issue 11): an idle engine never keeps Node alive, workers that fail to start reject
 * Engine.create (no hang), frees during in-flight work are deferred, primitives give their memory back
 * (destroy, Symbol.dispose, FinalizationRegistry), `await using` releases the engine.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, offsets, tag } from '../src/index.js';
import { setWorkerUrlForTesting } from '../src/runtime/worker_pool.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

function groupedMatmul(eng: Engine, E = 4, K = 64, N = 48, R = 40): { prim: matmul.Primitive; src: Memory; wei: Memory; dstMd: ReturnType<typeof memory.desc> } {
  const srcMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
  const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
  const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
  src.write(new Float64Array(R * K).fill(1));
  wei.write(new Float64Array(E * K * N).fill(0.25));
  offsets.fromSizes([R - 10, 0, 4, 6], src.offsets);
  return { prim, src, wei, dstMd };
}

describe('engine lifetime', () => {
  it('a child process running the README example exits by itself', () => {
    const script = fileURLToPath(new URL('./fixtures/readme_example.mjs', import.meta.url));
    const t0 = Date.now();
    const r = spawnSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.signal, `killed: the process hung (stderr: ${r.stderr})`).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('dst[0] = 32');
    expect(Date.now() - t0).toBeLessThan(15_000);
  });

  it('workers that fail to load reject Engine.create with the cause; a start past the bound times out', async () => {
    const prev = setWorkerUrlForTesting(new URL('./fixtures/missing_worker.js', import.meta.url));
    try {
      await expectDnnlReject(Engine.create({ threads: 2, kernels: 'simd128' }), 'runtime_error', /worker \d .*(Cannot find|not found|ERR_MODULE_NOT_FOUND|exited)/i);
    } finally {
      setWorkerUrlForTesting(prev);
    }
    await expectDnnlReject(Engine.create({ threads: 2, kernels: 'simd128', startTimeoutMs: 1 }), 'runtime_error', 'not ready within 1 ms');
    const eng = await Engine.create({ threads: 2, kernels: 'simd128' }); // the pool still starts afterwards
    engines.push(eng);
    expect(eng.threads).toBe(2);
  });

  it('await using releases the engine at the end of the block', async () => {
    let seen: Engine | undefined;
    {
      await using eng = await Engine.create({ threads: 2, kernels: 'simd128' });
      seen = eng;
      expect(eng.isReleased).toBe(false);
    }
    expect(seen.isReleased).toBe(true);
  });

  for (const threads of [1, 2]) {
    it(`free during an in-flight job is deferred: a new allocation is not overwritten (${threads} threads)`, async () => {
      const eng = await Engine.create({ threads, kernels: 'simd128' });
      engines.push(eng);
      const strm = new Stream(eng);
      const { prim, src, wei, dstMd } = groupedMatmul(eng);
      const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      dst.free();
      const fresh = Memory.create(memory.desc([40, 48], dt.f32, tag.ab), eng);
      (fresh.values as Float32Array).fill(-1);
      await strm.wait();
      expect((fresh.values as Float32Array).every((v) => v === -1)).toBe(true);
      // once idle, the deferred block is back: the heap returns to where it was
      const before = eng.heap.usedBytes;
      fresh.free();
      expect(eng.heap.usedBytes).toBeLessThan(before);
    });
  }

  it('10,000 pd + primitive creations and 10,000 create/free cycles leave the heap where it started', async () => {
    const eng = await Engine.create({ threads: 1, kernels: 'simd128' });
    engines.push(eng);
    const strm = new Stream(eng);
    const { src, wei, dstMd } = groupedMatmul(eng);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    // warm up: the engine's kernel scratch is allocated once and kept
    groupedMatmul(eng).prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    const start = eng.heap.usedBytes;
    const srcMd = src.desc, weiMd = wei.desc;
    for (let i = 0; i < 10_000; i++) {
      using prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
      if (i % 2500 === 0) {
        prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
        await strm.wait();
      }
    }
    expect(eng.heap.usedBytes).toBe(start);
    for (let i = 0; i < 10_000; i++) Memory.create(i % 2 ? srcMd : memory.desc([i % 97 + 1, 33], dt.f32, tag.ab), eng).free();
    expect(eng.heap.usedBytes).toBe(start);
    // MoE primitives and a whole layer too
    for (let i = 0; i < 200; i++) {
      const l = new moe.layer.Primitive(new moe.layer.PrimitiveDesc(eng, { tokens: 8, hidden: 16, intermediate: 8, experts: 4, topK: 2 }));
      l.destroy();
    }
    expect(eng.heap.usedBytes).toBe(start);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, new PrimitiveAttr()));
    prim.destroy();
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst }), 'invalid_arguments', 'primitive used after destroy()');
  });

  it('primitives dropped without destroy() give their memory back when collected (FinalizationRegistry)', async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    expect(gc, 'vitest runs with --expose-gc (vitest.config.ts)').toBeTypeOf('function');
    const eng = await Engine.create({ threads: 1, kernels: 'simd128' });
    engines.push(eng);
    const kept = groupedMatmul(eng);
    const { src, wei, dstMd } = kept;
    const start = eng.heap.usedBytes;
    (() => {
      for (let i = 0; i < 500; i++) new matmul.Primitive(new matmul.PrimitiveDesc(eng, src.desc, wei.desc, dstMd));
    })();
    expect(eng.heap.usedBytes).toBeGreaterThan(start);
    for (let i = 0; i < 20 && eng.heap.usedBytes > start; i++) {
      gc!();
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(eng.heap.usedBytes).toBe(start);
    kept.prim.destroy(); // kept alive (and its job in the heap) until here
  });
});
