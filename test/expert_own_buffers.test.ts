/**
 * Proposal #3 with each expert in buffers of its own (the RFC's main case): `Memory.create(md, eng,
 * undefined, { capacityBytes })` allocates a `[RUNTIME_DIM_VAL, K]` memory of that capacity on both
 * engines (it used to need a handle or a view), the rows per expert are checked against it, and the
 * result matches a float64 loop.
 */
import { describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag, type GpuEngine } from '../src/index.js';
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
    const known = memory.desc([3, 4], dt.f32, tag.ab), rule = "capacityBytes applies to a buffer whose size depends on runtime dims; this descriptor's buffer 0 has a known size (48 bytes)";
    expectDnnlError(() => Memory.create(known, eng, undefined, { capacityBytes: 8 }), 'invalid_arguments', rule);
    const buf = Memory.create(known, eng);
    expectDnnlError(() => Memory.create(known, eng, buf.handles[0] as never, { capacityBytes: 8 }), 'invalid_arguments', rule);
    buf.free();
  });
});

describe('grouped_gemm expert views: the rows are bounded by the live allocation, not only by capacityBytes (cpu)', () => {
  it('a view whose parent was freed and whose address a smaller block reuses: rows past that block are refused, its neighbour untouched', async () => {
    const eng = cpu;
    const K = 4, N = 4, R = 64, RT = RUNTIME_DIM_VAL;
    const srcMd = memory.desc([RT, K], dt.f32, tag.ab), dstMd = memory.desc([RT, N], dt.f32, tag.ab);
    const pd = new grouped_gemm.PrimitiveDesc(eng, [srcMd], [memory.desc([K, N], dt.f32, tag.ab)], [dstMd], memory.desc([1], dt.s32, tag.x));
    const prim = new grouped_gemm.Primitive(pd);
    const src = Memory.create(srcMd, eng, undefined, { capacityBytes: R * K * 4 });
    Memory.create(memory.desc([R, K], dt.f32, tag.ab), eng, src.handles[0]).write(new Float64Array(R * K).fill(1));
    const wei = Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng).write(new Float64Array(K * N).fill(1));
    const parent = Memory.create(memory.desc([R * N], dt.f32, tag.a), eng);
    const view = Memory.create(dstMd, eng, parent.handles[0], { capacityBytes: R * N * 4 });
    const rt = Memory.create(memory.desc([1], dt.s32, tag.x), eng).write([R]);
    const args = { [ARG.MULTIPLE_SRC]: src, [ARG.MULTIPLE_WEIGHTS]: wei, [ARG.MULTIPLE_DST]: view, [ARG.RUNTIME_DIMS]: rt };
    const strm = new Stream(eng);
    prim.execute(strm, args);
    await strm.wait();
    parent.free();
    const small = Memory.create(memory.desc([N], dt.f32, tag.a), eng);
    const victim = Memory.create(memory.desc([64], dt.f32, tag.a), eng).write(new Float64Array(64).fill(42));
    let refused = false;
    try {
      prim.execute(strm, args);
      await strm.wait();
    } catch (e) {
      refused = e instanceof DnnlError && (e.status === 'invalid_arguments');
    }
    expect(refused, `small block at the parent's address: ${small.handles[0] === view.handles[0]}`).toBe(true);
    expect(Array.from(victim.read())).toEqual(new Array<number>(64).fill(42));
    [src, wei, rt, small, victim].forEach((m) => m.free());
  });
});
