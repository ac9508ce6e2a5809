/**
 * Proposal #3 with each expert in buffers of its own (the RFC's main case): `Memory.create(md, eng,
 * undefined, { capacityBytes })` allocates a `[RUNTIME_DIM_VAL, K]` memory of that capacity on both
 * engines (it used to need a handle or a view), the rows per expert are checked against it, and the
 * result matches a float64 loop.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag, type GpuEngine } from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

describe.each(['cpu', 'gpu'] as const)('grouped_gemm experts in buffers of their own (%s engine)', (kind) => {
  it('{ capacityBytes } allocates each expert; rows within it run, rows beyond it are refused at wait', async () => {
    const eng = (kind === 'gpu' ? gpu : cpu) as Engine;
    const K = 5, N = 3, cap = [2, 0, 3], rows = [2, 0, 1];
    const srcMds = cap.map(() => memory.desc([RUNTIME_DIM_VAL, K], dt.f32, tag.ab)), dstMds = cap.map(() => memory.desc([RUNTIME_DIM_VAL, N], dt.f32, tag.ab));
    const weiMds = cap.map(() => memory.desc([K, N], dt.f32, tag.ab));
    const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, memory.desc([3], dt.s32, tag.x));
    expect(pd.implInfo).toMatch(kind === 'gpu' ? /^webgpu/ : /^wasm/);
    const x = (e: number, r: number, k: number): number => (e + 1) * 0.5 + r - k * 0.25, w = (e: number, k: number, n: number): number => e - k + n * 0.5;
    const args: Record<number, Memory> = {}, dsts: Memory[] = [];
    cap.forEach((c, e) => {
      const src = Memory.create(srcMds[e], eng, undefined, { capacityBytes: c * K * 4 });
      // the values through a plain [c, K] memory over the same buffer
      if (c > 0) Memory.create(memory.desc([c, K], dt.f32, tag.ab), eng, src.handles[0]).write(Float64Array.from({ length: c * K }, (_, i) => x(e, Math.floor(i / K), i % K)));
      args[ARG.MULTIPLE_SRC + e] = src;
      args[ARG.MULTIPLE_WEIGHTS + e] = Memory.create(weiMds[e], eng).write(Float64Array.from({ length: K * N }, (_, i) => w(e, Math.floor(i / N), i % N)));
      dsts.push(args[ARG.MULTIPLE_DST + e] = Memory.create(dstMds[e], eng, undefined, { capacityBytes: c * N * 4 }));
    });
    const dims = args[ARG.RUNTIME_DIMS] = Memory.create(memory.desc([3], dt.s32, tag.x), eng).write(rows);
    const strm = new Stream(eng);
    const prim = new grouped_gemm.Primitive(pd);
    prim.execute(strm, args);
    await strm.wait();
    for (const [e, m] of rows.entries()) {
      if (m === 0) continue;
      const got = await Memory.create(memory.desc([m, N], dt.f32, tag.ab), eng, dsts[e].handles[0]).read();
      const want = Array.from({ length: m * N }, (_, i) => { let s = 0; for (let k = 0; k < K; k++) s += x(e, Math.floor(i / N), k) * w(e, k, i % N); return s; });
      expect(Array.from(got), `expert ${e}`).toEqual(want);
    }
    dims.write([3, 0, 1]);
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', "ARG.RUNTIME_DIMS[0] = 3 rows do not fit expert 0's src/dst allocations (2 rows fit)");
  });

  it('a runtime-rows memory needs a handle or { capacityBytes }', () => {
    const eng = (kind === 'gpu' ? gpu : cpu) as Engine;
    const md = memory.desc([RUNTIME_DIM_VAL, 4], dt.f32, tag.ab);
    expectDnnlError(() => Memory.create(md, eng), 'invalid_arguments', 'buffer 0 size depends on runtime dims; pass a');
    expectDnnlError(() => Memory.create(md, eng), 'invalid_arguments', 'or { capacityBytes } to allocate that many bytes');
    expectDnnlError(() => Memory.create(md, eng, undefined, { capacityBytes: -4 }), 'invalid_arguments', 'capacityBytes must be a non-negative integer, got -4');
    // a descriptor of known size has nothing for capacityBytes to size
    expectDnnlError(() => Memory.create(memory.desc([3, 4], dt.f32, tag.ab), eng, undefined, { capacityBytes: 8 }), 'invalid_arguments', "capacityBytes without handle 0 sizes a buffer whose size depends on runtime dims; this descriptor's buffer 0 has a known size (48 bytes)");
  });
});
