import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, GpuEngine, GpuMemory, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag, type DataType,
} from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';
import { assertClose, refDense, refGroupedK, refGroupedM, type RefPostOp } from './reference.js';
import { attrFor, toleranceFor, exactValues } from './helpers.js';

let eng: GpuEngine;
beforeAll(async () => {
  eng = await gpuEngine();
});
afterAll(() => eng?.release());

interface GroupedCase {
  readonly name: string;
  readonly sizes: readonly number[];
  readonly K: number;
  readonly N: number;
  /** Rows allocated; rows past the last offset must stay untouched. */
  readonly totalM?: number;
  readonly dt?: DataType;
  readonly bias?: boolean;
  readonly postOps?: readonly RefPostOp[];
  readonly separateOffsets?: boolean;
  readonly weiTag?: 'abc' | 'acb';
}

const SENTINEL = 7.5;

async function runGroupedM(c: GroupedCase, via: 'desc' | 'attr' = 'desc'): Promise<{ got: Float32Array; implInfo: string }> {
  const G = c.sizes.length, { K, N } = c;
  const rows = c.sizes.reduce((a, b) => a + b, 0);
  const totalM = c.totalM ?? rows;
  const t = c.dt ?? 'f32';
  const weiMd = memory.desc([G, K, N], t, c.weiTag === 'acb' ? tag.acb : tag.abc);
  const biasMd = c.bias ? memory.desc([G, N], t, tag.ab) : undefined;
  const attr = attrFor(c.postOps);
  let srcMd, dstMd;
  if (via === 'desc') {
    srcMd = memory.desc.grouped([totalM, K], t, G, [RUNTIME_DIM_VAL, K]);
    dstMd = memory.desc.grouped([totalM, N], t, G, [RUNTIME_DIM_VAL, N]);
  } else {
    attr.setGroupedOffsets(ARG.SRC, G, dt.s32);
    srcMd = memory.desc([totalM, K], t, tag.ab);
    dstMd = memory.desc([totalM, N], t, tag.ab);
  }
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  const x = exactValues(totalM * K, 1), w = exactValues(G * K * N, 2), b = exactValues(G * N, 3);
  const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng);
  src.write(x);
  // acb stores [g][n][k]: write the logical [g][k][n] values at their physical places.
  if (c.weiTag === 'acb') {
    const phys = new Float64Array(G * K * N);
    for (let g = 0; g < G; g++) for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) phys[(g * N + n) * K + k] = w[(g * K + k) * N + n];
    wei.write(phys);
  } else wei.write(w);
  const offs = offsets.fromSizes(c.sizes);
  const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei };
  let dst: GpuMemory;
  if (via === 'desc') {
    src.writeOffsets(offs);
    dst = c.separateOffsets ? Memory.create(dstMd, eng) : Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    if (c.separateOffsets) dst.writeOffsets(offs);
  } else {
    dst = Memory.create(dstMd, eng);
    const o = Memory.create(pd.queryMd('grouped_offsets')!, eng);
    o.write(offs);
    args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = o;
  }
  dst.write(new Float64Array(totalM * N).fill(SENTINEL));
  args[ARG.DST] = dst;
  if (biasMd) {
    const bm = Memory.create(biasMd, eng);
    bm.write(b);
    args[ARG.BIAS] = bm;
  }
  const strm = new Stream(eng);
  prim.execute(strm, args);
  await strm.wait();
  const got = (await dst.read()) as Float32Array;
  const ref = refGroupedM(x, w, c.sizes, K, N, { bias: c.bias ? { dims: [G, N], data: b } : undefined, postOps: c.postOps });
  assertClose(got.subarray(0, rows * N), ref, toleranceFor(t), c.name);
  for (let i = rows * N; i < totalM * N; i++) if (got[i] !== SENTINEL) throw new Error(`${c.name}: row ${Math.floor(i / N)} past the last offset was written`);
  return { got: Float32Array.from(got), implInfo: pd.implInfo };
}

describe('gpu engine: grouped matmul, variable M (Proposal #1, offsets on the device)', () => {
  const cases: GroupedCase[] = [
    { name: 'empty expert, K and N not multiples of the tile', sizes: [5, 0, 20], K: 37, N: 70 },
    { name: 'E = 1', sizes: [13], K: 16, N: 64 },
    { name: 'one expert takes every row, rows left past the end', sizes: [0, 0, 30, 0], K: 9, N: 33, totalM: 41 },
    { name: 'every expert empty', sizes: [0, 0, 0], K: 8, N: 8, totalM: 4 },
    { name: 'bias + relu(alpha) + linear', sizes: [3, 17, 1], K: 21, N: 65, bias: true, postOps: [{ kind: 'relu', alpha: 0.25 }, { kind: 'linear', alpha: 2, beta: -1 }] },
    { name: 'clip, tanh, logistic', sizes: [6, 6], K: 12, N: 20, postOps: [{ kind: 'clip', alpha: -0.5, beta: 1.5 }, { kind: 'tanh' }, { kind: 'logistic' }] },
    { name: 'acb weights, dst offsets in their own buffer', sizes: [4, 9, 0, 2], K: 19, N: 23, weiTag: 'acb', separateOffsets: true },
    { name: 'f16 storage', sizes: [7, 0, 12], K: 24, N: 40, dt: 'f16', bias: true },
    { name: 'bf16 storage, odd N', sizes: [3, 10], K: 30, N: 35, dt: 'bf16' },
    { name: 'many rows per group (128x128 tiles)', sizes: [300], K: 20, N: 600 },
    { name: '40 experts, mean 2 rows (decode-like)', sizes: Array.from({ length: 40 }, (_, i) => (i * 7) % 5), K: 64, N: 96 },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const { implInfo } = await runGroupedM(c);
      // The gpu engine never falls back to the reference or the cpu kernels.
      expect(implInfo).toMatch(/^webgpu:/);
    });
  }

  it('a second run gives the same bits', async () => {
    const c: GroupedCase = { name: 'repeat', sizes: [9, 31, 0, 5], K: 77, N: 50 };
    const a = await runGroupedM(c), b = await runGroupedM(c);
    expect(Buffer.from(a.got.buffer).equals(Buffer.from(b.got.buffer))).toBe(true);
  });

  it('Proposal #2 (offsets as an attribute argument) gives the bits of Proposal #1', async () => {
    const c: GroupedCase = { name: 'p2', sizes: [4, 0, 11, 6], K: 33, N: 45 };
    const p1 = await runGroupedM(c, 'desc'), p2 = await runGroupedM(c, 'attr');
    expect(Buffer.from(p1.got.buffer).equals(Buffer.from(p2.got.buffer))).toBe(true);
  });
});

describe('gpu engine: runtime offsets are validated on the device and reported at wait()', () => {
  const G = 3, K = 8, N = 16, M = 12;
  async function withOffsets(srcOffs: number[], dstOffs?: number[]): Promise<{ err: unknown; dst: Float32Array }> {
    const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const src = Memory.create(srcMd, eng).write(exactValues(M * K, 4)).writeOffsets(srcOffs);
    const wei = Memory.create(weiMd, eng).write(exactValues(G * K * N, 5));
    const dst = dstOffs ? Memory.create(dstMd, eng).writeOffsets(dstOffs) : Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    dst.write(new Float64Array(M * N).fill(SENTINEL));
    const strm = new Stream(eng);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    const err = await strm.wait().then(() => undefined, (e: unknown) => e);
    return { err, dst: (await dst.read()) as Float32Array };
  }
  const bad: [string, number[], number[] | undefined, RegExp][] = [
    ['offsets[0] != 0', [1, 2, 3, 4], undefined, /src offsets\[0\] must be 0, got 1/],
    ['decreasing', [0, 5, 3, 9], undefined, /non-decreasing: offsets\[2\] = 3 < offsets\[1\] = 5/],
    ['past the rows', [0, 4, 8, 13], undefined, /offsets\[3\] = 13 exceeds the total extent 12/],
    ['src and dst offsets differ', [0, 4, 8, 12], [0, 4, 7, 12], /dst offsets must equal src offsets: dst offsets\[2\] = 7/],
  ];
  for (const [name, so, dO, msg] of bad) {
    it(`${name}: invalid_arguments at wait(), dst untouched`, async () => {
      const { err, dst } = await withOffsets(so, dO);
      expect(err).toBeInstanceOf(DnnlError);
      expect((err as DnnlError).status).toBe('invalid_arguments');
      expect((err as DnnlError).message).toMatch(msg);
      expect(dst.every((v) => v === SENTINEL)).toBe(true);
    });
  }

  it('the stream goes on after an error: the next good run succeeds', async () => {
    expect((await withOffsets([0, 5, 3, 9])).err).toBeInstanceOf(DnnlError);
    expect((await withOffsets([0, 5, 5, 9])).err).toBeUndefined();
  });

  it('the GEMM reads offsets written by earlier device work, never a host copy', async () => {
    // The host writes garbage offsets; a device copy queued before the matmul puts the right ones in
    // place. Only a GEMM that reads the offsets on the device, when it runs, sees the right ones.
    const sizes = [3, 0, 7], rows = 10;
    const srcMd = memory.desc.grouped([rows, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([rows, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const x = exactValues(rows * K, 6), w = exactValues(G * K * N, 7);
    const src = Memory.create(srcMd, eng).write(x).writeOffsets([0, 99, -5, 1000]);
    const wei = Memory.create(weiMd, eng).write(w);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const good = eng.device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    eng.device.queue.writeBuffer(good, 0, Int32Array.from(offsets.fromSizes(sizes)));
    const enc = eng.device.createCommandEncoder();
    enc.copyBufferToBuffer(good, 0, src.handles[1], 0, 16);
    eng.device.queue.submit([enc.finish()]);
    // Any host read-back (mapAsync) between execute and the GEMM would show here.
    const proto = Object.getPrototypeOf(src.handles[0]) as { mapAsync: (...a: unknown[]) => Promise<void> };
    const mapAsync = proto.mapAsync;
    let maps = 0;
    proto.mapAsync = function (this: GPUBuffer, ...a: unknown[]) { maps++; return mapAsync.apply(this, a); };
    const strm = new Stream(eng);
    try {
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      expect(maps).toBe(0);
    } finally {
      proto.mapAsync = mapAsync;
    }
    await strm.wait();
    const got = (await dst.read()) as Float32Array;
    assertClose(got, refGroupedM(x, w, sizes, K, N), toleranceFor('f32'), 'device-written offsets');
    good.destroy();
  });
});

describe('gpu engine: dense and grouped-K matmul', () => {
  it('dense 2D with a row-broadcast bias and gelu_erf-free chain', async () => {
    const M = 19, K = 45, N = 67;
    const srcMd = memory.desc([M, K], dt.f32, tag.ab), weiMd = memory.desc([K, N], dt.f32, tag.ab), dstMd = memory.desc([M, N], dt.f32, tag.ab);
    const biasMd = memory.desc([1, N], dt.f32, tag.ab);
    const ops: RefPostOp[] = [{ kind: 'square' }, { kind: 'abs' }];
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attrFor(ops));
    const x = exactValues(M * K, 8), w = exactValues(K * N, 9), b = exactValues(N, 10);
    const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(w), bias = Memory.create(biasMd, eng).write(b);
    const dst = Memory.create(dstMd, eng);
    const strm = new Stream(eng);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.BIAS]: bias, [ARG.DST]: dst });
    await strm.wait();
    assertClose(await dst.read(), refDense(x, [M, K], w, [K, N], { bias: { dims: [1, N], data: b }, postOps: ops }), toleranceFor('f32'), 'dense');
  });

  it('dense 3D batched, weights broadcast over the batch', async () => {
    const B = 3, M = 5, K = 17, N = 20;
    const srcMd = memory.desc([B, M, K], dt.f32, tag.abc), weiMd = memory.desc([1, K, N], dt.f32, tag.abc), dstMd = memory.desc([B, M, N], dt.f32, tag.abc);
    const x = exactValues(B * M * K, 11), w = exactValues(K * N, 12);
    const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(w), dst = Memory.create(dstMd, eng);
    const strm = new Stream(eng);
    new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd)).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    assertClose(await dst.read(), refDense(x, [B, M, K], w, [1, K, N]), toleranceFor('f32'), 'batched');
  });

  it('grouped K (weight-gradient shape), an empty group writes zeros', async () => {
    const sizes = [6, 0, 11], M = 7, N = 9, G = sizes.length, totalK = 17;
    const srcMd = memory.desc.grouped([M, totalK], dt.f32, G, [M, RUNTIME_DIM_VAL]);
    const weiMd = memory.desc.grouped([totalK, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const dstMd = memory.desc([G, M, N], dt.f32, tag.abc);
    const x = exactValues(M * totalK, 13), w = exactValues(totalK * N, 14);
    const src = Memory.create(srcMd, eng).write(x).writeOffsets(offsets.fromSizes(sizes));
    const wei = Memory.create(weiMd, eng, [undefined, src.handles[1]]).write(w);
    const dst = Memory.create(dstMd, eng).write(new Float64Array(G * M * N).fill(SENTINEL));
    const strm = new Stream(eng);
    const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
    expect(pd.implInfo).toMatch(/^webgpu:/);
    const prim = new matmul.Primitive(pd);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
    assertClose(await dst.read(), refGroupedK(x, w, sizes, M, N), toleranceFor('f32'), 'grouped K');
    // Bad offsets after that good run (its K ranges still in the schedule): an error at wait, nothing written.
    dst.write(new Float64Array(G * M * N).fill(SENTINEL));
    src.writeOffsets([0, 9, 4, 17]);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await expect(strm.wait()).rejects.toThrow('offsets must be non-decreasing');
    expect(Array.from(await dst.read()).every((v) => v === SENTINEL)).toBe(true);
  });
});

describe('gpu engine: a src / dst whose last dim has extent 1 takes any column stride (as on the cpu engine)', () => {
  // [B, M, 1] acb has strides [M, 1, M]: the column stride moves no address, the layout is the row-major one.
  const cases: readonly { name: string; src: [number[], string]; wei: [number[], string]; dst: [number[], string] }[] = [
    { name: 'src acb, K = 1, 70 rows (gemm-tiled)', src: [[2, 70, 1], tag.acb], wei: [[2, 1, 24], tag.abc], dst: [[2, 70, 24], tag.abc] },
    { name: 'src acb, K = 1, 5 rows (gemv)', src: [[2, 5, 1], tag.acb], wei: [[2, 1, 12], tag.abc], dst: [[2, 5, 12], tag.abc] },
    { name: 'src ba, K = 1 (2D)', src: [[9, 1], tag.ba], wei: [[1, 8], tag.ab], dst: [[9, 8], tag.ab] },
    { name: 'dst acb, N = 1, 70 rows', src: [[2, 70, 9], tag.abc], wei: [[2, 9, 1], tag.abc], dst: [[2, 70, 1], tag.acb] },
  ];
  it.each(cases)('$name: float64 reference and the cpu engine\'s bits', async ({ src: [sd, st], wei: [wd, wt], dst: [dd, dtg] }) => {
    const { Engine } = await import('../src/index.js');
    const cpu = await Engine.create({ threads: 1 });
    try {
      const sMd = memory.desc(sd, dt.f32, st), wMd = memory.desc(wd, dt.f32, wt), dMd = memory.desc(dd, dt.f32, dtg);
      // The stride of the extent-1 dim is not 1, so this is the case the gpu used to refuse.
      expect(sMd.strides[sd.length - 1] !== 1 || dMd.strides[dd.length - 1] !== 1).toBe(true);
      const size = (d: number[]): number => d.reduce((a, b) => a * b, 1);
      // With the extent-1 dim last, the elements lie in row-major order: write / read are the logical values.
      const x = exactValues(size(sd), 11), w = exactValues(size(wd), 12);
      const out: Float32Array[] = [];
      for (const e of [eng, cpu] as const) {
        const pd = new matmul.PrimitiveDesc(e, sMd, wMd, dMd);
        if (e === eng) expect(pd.implInfo).toMatch(/^webgpu:/);
        const strm = new Stream(e);
        const src = Memory.create(sMd, e).write(x), wei = Memory.create(wMd, e).write(w), dst = Memory.create(dMd, e).write(new Float64Array(size(dd)).fill(SENTINEL));
        new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
        await strm.wait();
        out.push(Float32Array.from(await dst.read()));
      }
      assertClose(out[0], refDense(x, sd, w, wd), toleranceFor('f32'), 'gpu');
      expect(Array.from(out[0])).toEqual(Array.from(out[1]));
    } finally {
      cpu.release();
    }
  });
});

describe('gpu engine: what it refuses', () => {
  it('a problem without a gpu kernel is unimplemented, never run by the reference', () => {
    // A column-major src: the cpu engine runs it, the gpu engine has no kernel for it yet.
    const md = (d: number[], t: string = tag.ab): ReturnType<typeof memory.desc> => memory.desc(d, dt.f32, t);
    expect(() => new matmul.PrimitiveDesc(eng, md([6, 4], tag.ba), md([4, 5]), md([6, 5]))).toThrow(/unimplemented.*gpu engine.*unit column strides/);
    // K = 2 acb: the column stride (3) matters; the reason names the argument, its dim and its stride.
    expect(() => new matmul.PrimitiveDesc(eng, md([2, 3, 2], tag.acb), md([2, 2, 4], tag.abc), md([2, 3, 4], tag.abc)))
      .toThrow('src and dst need unit column strides on the gpu engine: src dims[2] = 2 has stride 3 (reorder it to a row-major layout first; the stride of a dim of extent 1 does not matter)');
  });

  it('cpu memory on a gpu primitive is refused', async () => {
    const md = memory.desc([2, 2], dt.f32, tag.ab);
    const { Engine } = await import('../src/index.js');
    const cpu = await Engine.create({ threads: 1 });
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, md, md, md));
    const strm = new Stream(eng);
    expect(() => prim.execute(strm, { [ARG.SRC]: Memory.create(md, cpu), [ARG.WEIGHTS]: Memory.create(md, eng), [ARG.DST]: Memory.create(md, eng) })).toThrow(/ARG.SRC belongs to another engine/);
    cpu.release();
  });

  it('memory of a released engine is refused', async () => {
    const e2 = await gpuEngine();
    const m = Memory.create(memory.desc([2], dt.f32, tag.a), e2);
    e2.release();
    expect(() => m.write([1, 2])).toThrow(/engine: used after release\(\)/);
  });

  it('a wait after release() with work pending resolves, never a lost device (the engine destroys its own device after that work; test/release_pending.test.ts)', async () => {
    const e2 = await gpuEngine();
    const md = memory.desc([4, 4], dt.f32, tag.ab);
    const [a, w, d] = [0, 1, 2].map(() => Memory.create(md, e2).write(new Float64Array(16).fill(1)));
    const strm = new Stream(e2);
    new matmul.Primitive(new matmul.PrimitiveDesc(e2, md, md, md)).execute(strm, { [ARG.SRC]: a, [ARG.WEIGHTS]: w, [ARG.DST]: d });
    e2.release();
    await strm.wait();
    expect(() => d.write(new Float64Array(16))).toThrow(/engine: used after release\(\)/);
  });
});

describe('gpu engine: pass profiling', () => {
  it('setProfiling(true) times each compute pass with GPU timestamps, read at wait(); results unchanged; off again, nothing is timed', async () => {
    expect(eng.caps.timestampQuery).toBe(true); // SwiftShader and the H200 both have it: a missing feature is a failure here
    const M = 7, K = 13, N = 9;
    const srcMd = memory.desc([M, K], dt.f32, tag.ab), weiMd = memory.desc([K, N], dt.f32, tag.ab), dstMd = memory.desc([M, N], dt.f32, tag.ab);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const x = exactValues(M * K, 61), w = exactValues(K * N, 62);
    const src = Memory.create(srcMd, eng).write(x), wei = Memory.create(weiMd, eng).write(w);
    const d1 = Memory.create(dstMd, eng), d2 = Memory.create(dstMd, eng);
    const strm = new Stream(eng);
    await strm.wait();
    eng.setProfiling(true);
    try {
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: d1 });
      strm.submit(); // two batches before one wait: both timed
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: d2 });
      await strm.wait();
      const prof = eng.takeProfile();
      expect(prof.map((t) => t.label)).toEqual(['matmul', 'matmul']);
      for (const t of prof) expect(Number.isFinite(t.ms) && t.ms >= 0).toBe(true);
      expect(eng.takeProfile()).toEqual([]);
    } finally {
      eng.setProfiling(false);
    }
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: d1 });
    await strm.wait();
    expect(eng.takeProfile()).toEqual([]);
    const ref = refDense(x, [M, K], w, [K, N], {});
    assertClose(await d1.read(), ref, toleranceFor('f32'), 'profiled run');
    assertClose(await d2.read(), ref, toleranceFor('f32'), 'second batch');
  });
});

describe('gpu engine: options', () => {
  it('Engine.create({ kind: "gpu" }) refuses unknown option keys, naming the valid ones', async () => {
    const { Engine } = await import('../src/index.js');
    await expect(Engine.create({ kind: 'gpu', powerPreferance: 'low-power' } as never)).rejects.toThrow(/Engine.create: unknown option 'powerPreferance'.*valid options: kind, device, powerPreference/);
  });
});

describe('gpu engine: errors outside a recorded batch', () => {
  it('a WebGPU error no scope catches is a DnnlError at the next wait, then the stream goes on', async () => {
    const strm = new Stream(eng);
    // No batch is open: nothing of the engine's scopes wraps this invalid buffer.
    eng.device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.STORAGE });
    await eng.device.queue.onSubmittedWorkDone();
    const err = await strm.wait().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(DnnlError);
    expect((err as DnnlError).status).toBe('runtime_error');
    expect((err as DnnlError).message).toMatch(/outside any recorded batch: .*MapRead/);
    await strm.wait();
  });
});

describe('gpu engine: WebGPU errors inside a batch', () => {
  /** Records a batch whose submit raises a validation error (a copy of 6 bytes: sizes must be multiples of 4). */
  const badCopy = (e: GpuEngine): void => {
    const a = e.createBuffer(16, 'test a'), b = e.createBuffer(16, 'test b');
    e.encode('bad copy', (enc) => enc.copyBufferToBuffer(a, 0, b, 0, 6));
  };
  /** Records a batch that raises a validation error while it is open (a bind group of the wrong layout). */
  const badGroup = (e: GpuEngine): void => {
    const code = '@group(0) @binding(0) var<storage, read_write> x: array<u32>; @compute @workgroup_size(1) fn main() { x[0] = 1u; }';
    const pipe = e.pipeline('test one binding', () => code);
    e.computePass('bad group', () => {
      e.device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [] });
    });
  };
  const expectBatchError = async (e: GpuEngine, label: string): Promise<void> => {
    const strm = new Stream(e);
    const err = await strm.wait().then(() => undefined, (x: unknown) => x);
    expect(err).toBeInstanceOf(DnnlError);
    expect((err as DnnlError).status).toBe('runtime_error');
    expect((err as DnnlError).message).toMatch(new RegExp(`^runtime_error: ${label}: WebGPU error: `));
    // The stream goes on.
    await strm.wait();
  };

  it('an error raised at submit or while the batch is open is a DnnlError at the next wait naming what the batch recorded; the stream goes on', async () => {
    badCopy(eng);
    await expectBatchError(eng, 'bad copy');
    badGroup(eng);
    await expectBatchError(eng, 'bad group');
  });

  it("the same on a caller's device, and the caller's own uncaptured-error listeners never see the engine's errors", async () => {
    const { Engine } = await import('../src/index.js');
    const mine = (await Engine.create({ kind: 'gpu', device: eng.device })) as GpuEngine;
    let seen = 0;
    const count = (): void => void seen++;
    eng.device.addEventListener('uncapturederror', count);
    try {
      badCopy(mine);
      await expectBatchError(mine, 'bad copy');
      badGroup(mine);
      await expectBatchError(mine, 'bad group');
    } finally {
      eng.device.removeEventListener('uncapturederror', count);
      mine.release();
    }
    expect(seen).toBe(0);
  });
});

describe('gpu engine: one submit per batch', () => {
  it('primitives recorded between waits reach the queue in one submit; host writes between them stay in order', async () => {
    const M = 7, K = 13, N = 9;
    const srcMd = memory.desc([M, K], dt.f32, tag.ab), weiMd = memory.desc([K, N], dt.f32, tag.ab), dstMd = memory.desc([M, N], dt.f32, tag.ab);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const x1 = exactValues(M * K, 41), x2 = exactValues(M * K, 42), w = exactValues(K * N, 43);
    const src = Memory.create(srcMd, eng), wei = Memory.create(weiMd, eng).write(w);
    const d1 = Memory.create(dstMd, eng), d2 = Memory.create(dstMd, eng);
    const strm = new Stream(eng);
    await strm.wait();
    const queue = eng.device.queue as { submit: (cbs: GPUCommandBuffer[]) => void };
    const submit = queue.submit;
    let submits = 0;
    queue.submit = function (this: GPUQueue, cbs: GPUCommandBuffer[]) { submits++; submit.call(this, cbs); };
    try {
      src.write(x1);
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: d1 });
      src.write(x2); // must not overtake the first matmul, which is recorded but not yet submitted
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: d2 });
      expect(submits).toBe(0);
      strm.submit();
      expect(submits).toBe(1);
    } finally {
      queue.submit = submit;
    }
    await strm.wait();
    assertClose(await d1.read(), refDense(x1, [M, K], w, [K, N], {}), toleranceFor('f32'), 'first (old src)');
    assertClose(await d2.read(), refDense(x2, [M, K], w, [K, N], {}), toleranceFor('f32'), 'second (new src)');
  });

  it('executing again on the same memory creates no bind group, no buffer and no staged write; the wait reads the status slots in the same submit', async () => {
    const G = 4, K = 10, N = 70, M = 9, sizes = [3, 0, 6, 0];
    const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const x = exactValues(M * K, 51), w = exactValues(G * K * N, 52);
    const src = Memory.create(srcMd, eng).write(x).writeOffsets(offsets.fromSizes(sizes));
    const wei = Memory.create(weiMd, eng).write(w);
    const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
    const strm = new Stream(eng);
    const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    prim.execute(strm, args);
    prim.execute(strm, args);
    await strm.wait();
    type Counted = 'createBindGroup' | 'createBuffer' | 'submit' | 'writeBuffer';
    const dev = eng.device as unknown as Record<Counted, (...a: unknown[]) => unknown>;
    const queue = eng.device.queue as unknown as Record<Counted, (...a: unknown[]) => unknown>;
    const counts = { createBindGroup: 0, createBuffer: 0, submit: 0, writeBuffer: 0 };
    const saved = [[dev, 'createBindGroup'], [dev, 'createBuffer'], [queue, 'submit'], [queue, 'writeBuffer']] as const;
    const originals = saved.map(([o, k]) => o[k]);
    for (const [o, k] of saved) {
      const f = o[k];
      o[k] = function (this: unknown, ...a: unknown[]) { counts[k]++; return f.apply(this, a); };
    }
    try {
      for (let r = 0; r < 3; r++) {
        dst.write(new Float64Array(M * N).fill(SENTINEL));
        counts.writeBuffer = 0;
        prim.execute(strm, args);
        prim.execute(strm, args);
        await strm.wait();
      }
    } finally {
      saved.forEach(([o, k], i) => { o[k] = originals[i]; });
    }
    // No params write (queue or staging arena: the arena would be a createBuffer), one submit per wait.
    expect(counts).toEqual({ createBindGroup: 0, createBuffer: 0, submit: 3, writeBuffer: 0 });
    assertClose(await dst.read(), refGroupedM(x, w, sizes, K, N), toleranceFor('f32'), 'after re-executions');
  });

  it('each execution of a batch has its own status slot: the second execution\'s bad offsets are its error, named its way; the first writes its dst', async () => {
    // The first execution (Proposal #2) names its offsets ARG.ATTR_GROUPED_OFFSETS: had both shared one
    // slot, the first decoder would report the second's violation under that name.
    const G = 3, K = 8, N = 16, M = 12;
    const weiMd = memory.desc([G, K, N], dt.f32, tag.abc);
    const a2 = attrFor(undefined);
    a2.setGroupedOffsets(ARG.SRC, G, dt.s32);
    const plainSrc = memory.desc([M, K], dt.f32, tag.ab), plainDst = memory.desc([M, N], dt.f32, tag.ab);
    const pd2 = new matmul.PrimitiveDesc(eng, plainSrc, weiMd, plainDst, a2);
    const p2 = new matmul.Primitive(pd2);
    const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
    const p1 = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd));
    const x = exactValues(M * K, 53), w = exactValues(G * K * N, 54);
    const wei = Memory.create(weiMd, eng).write(w);
    const s2 = Memory.create(plainSrc, eng).write(x), d2 = Memory.create(plainDst, eng);
    const o2 = Memory.create(pd2.queryMd('grouped_offsets')!, eng).write([0, 4, 4, 12]);
    const bad = Memory.create(srcMd, eng).write(x).writeOffsets([0, 5, 3, 12]);
    const d1 = Memory.create(dstMd, eng, [undefined, bad.handles[1]]);
    d1.write(new Float64Array(M * N).fill(SENTINEL));
    const strm = new Stream(eng);
    p2.execute(strm, { [ARG.SRC]: s2, [ARG.WEIGHTS]: wei, [ARG.DST]: d2, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: o2 });
    p1.execute(strm, { [ARG.SRC]: bad, [ARG.WEIGHTS]: wei, [ARG.DST]: d1 });
    const err = await strm.wait().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(DnnlError);
    expect((err as DnnlError).message).toMatch(/offsets\[2\] = 3 < offsets\[1\] = 5/);
    expect((err as DnnlError).message).not.toMatch(/ATTR_GROUPED_OFFSETS/);
    assertClose(await d2.read(), refGroupedM(x, w, [4, 0, 8], K, N), toleranceFor('f32'), 'good execution');
    expect((await d1.read()).every((v) => v === SENTINEL)).toBe(true);
  });
});
