/**
 * Tensors larger than one storage binding on the gpu engine. WebGPU cannot lower a device's
 * maxStorageBufferBindingSize below its 128 MiB default, so the test engine plans its kernels for a
 * 16 KiB binding (GpuEngine.limitBindingSize, internal): small shapes then take the split into windows
 * (experts / batches x row ranges, bindings at aligned offsets). Every binding the engine creates is
 * checked against that bound, the split must really happen, and the results must be the bits of the
 * same problem on an engine that binds whole buffers (and match the float64 reference).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, GpuEngine, GpuMemory, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, grouped_gemm, matmul, memory, offsets, tag,
  type DataType, type MemoryDesc,
} from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';
import { expectDnnlError, expectDnnlReject, toleranceFor } from './helpers.js';
import { expectBitwise, expectClose, expectSameBits, runP3Q, type P3QCase } from './quant_helpers.js';
import { assertClose, refDense, refGroupedM, TOL_F32 } from './reference.js';
import { mulberry32, randomF32 } from './workloads.js';

const LIMIT = 16384;
let whole: GpuEngine;
let small: GpuEngine;
/** Bindings made on `small`'s device: the largest one, and how many were ranges (offset / size given). */
const seen = { largest: 0, ranges: 0 };
beforeAll(async () => {
  whole = await gpuEngine();
  small = await gpuEngine();
  small.limitBindingSize(LIMIT);
  const dev = small.device;
  const create = dev.createBindGroup.bind(dev);
  dev.createBindGroup = (d: GPUBindGroupDescriptor): GPUBindGroup => {
    for (const e of d.entries) {
      const r = e.resource as GPUBufferBinding;
      // The engine's status slots (16 KiB, whatever the tensors) are not a tensor.
      if (!r.buffer || r.buffer.label === 'groupdnn status slots') continue;
      const size = r.size ?? r.buffer.size - (r.offset ?? 0);
      seen.largest = Math.max(seen.largest, size);
      if (r.size !== undefined) seen.ranges++;
    }
    return create(d);
  };
});
afterAll(() => {
  whole?.release();
  small?.release();
});

const plain = (dims: number[], t: DataType = 'f32'): MemoryDesc => memory.desc(dims, t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc);
const grouped = (rows: number, cols: number, G: number, t: DataType = 'f32'): MemoryDesc => memory.desc.grouped([rows, cols], t, G, [RUNTIME_DIM_VAL, cols]);
const s32 = (eng: GpuEngine, v: ArrayLike<number>): GpuMemory => Memory.create(memory.desc([v.length], dt.s32, tag.a), eng).write(v);

/**
 * Runs `body` on both engines: the split one must bind ranges (never more than LIMIT bytes) and give
 * the whole-buffer engine's bits.
 */
async function bothBits(body: (eng: GpuEngine) => Promise<Float32Array>): Promise<Float32Array> {
  const ref = await body(whole);
  seen.largest = 0;
  seen.ranges = 0;
  const got = await body(small);
  expect(seen.ranges, 'the split engine bound buffer ranges').toBeGreaterThan(0);
  expect(seen.largest, 'no binding larger than the limit').toBeLessThanOrEqual(LIMIT);
  expect(Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(Buffer.from(ref.buffer, ref.byteOffset, ref.byteLength)), 'split == whole, bit for bit').toBe(true);
  return got;
}

async function readF32(m: GpuMemory): Promise<Float32Array> {
  return Float32Array.from(await m.read());
}

describe('gpu matmul: tensors larger than one storage binding (16 KiB test bound)', () => {
  it('grouped M (P#1): weights, src and dst split by experts and rows; an empty expert, K and N off the tile', async () => {
    const sizes = [10, 0, 80, 30], E = 4, M = 120, K = 40, N = 60;
    const rng = mulberry32(1);
    const x = randomF32(rng, M * K), w = randomF32(rng, E * K * N);
    const got = await bothBits(async (eng) => {
      const src = Memory.create(grouped(M, K, E), eng).write(x).writeOffsets(offsets.fromSizes(sizes));
      const dst = Memory.create(grouped(M, N, E), eng, [undefined, src.handles[1]]);
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, grouped(M, K, E), plain([E, K, N]), grouped(M, N, E))).execute(strm, {
        [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(plain([E, K, N]), eng).write(w), [ARG.DST]: dst,
      });
      await strm.wait();
      return readF32(dst);
    });
    assertClose(got, refGroupedM(x, w, sizes, K, N), TOL_F32, 'grouped M split');
  });

  it('bf16 src, weights and dst (two values per word): aligned offsets keep their lanes', async () => {
    const sizes = [33, 7, 0, 50, 40, 30, 20, 20], E = 8, M = 200, K = 48, N = 64;
    const rng = mulberry32(2);
    const q = (n: number): Float64Array => Float64Array.from({ length: n }, () => Math.round((rng() - 0.5) * 16) / 8);
    const x = q(M * K), w = q(E * K * N);
    const got = await bothBits(async (eng) => {
      const src = Memory.create(grouped(M, K, E, 'bf16'), eng).write(x).writeOffsets(offsets.fromSizes(sizes));
      const dst = Memory.create(grouped(M, N, E, 'bf16'), eng, [undefined, src.handles[1]]);
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, grouped(M, K, E, 'bf16'), plain([E, K, N], 'bf16'), grouped(M, N, E, 'bf16'))).execute(strm, {
        [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(plain([E, K, N], 'bf16'), eng).write(w), [ARG.DST]: dst,
      });
      await strm.wait();
      return readF32(dst);
    });
    assertClose(got, refGroupedM(x, w, sizes, K, N), toleranceFor('bf16'), 'bf16 split');
  });

  it('gather: the token rows bound whole, weights and the routed dst split', async () => {
    const T = 60, E = 4, k = 2, K = 40, N = 60, R = T * k;
    const rng = mulberry32(3);
    const ti = Int32Array.from({ length: R }, (_, i) => (i * 7) % T);
    const sizes = [24, 0, 60, 36];
    const hidden = randomF32(rng, T * K), w = randomF32(rng, E * K * N);
    const got = await bothBits(async (eng) => {
      const dst = Memory.create(grouped(R, N, E), eng).writeOffsets(offsets.fromSizes(sizes));
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([T, K]), plain([E, K, N]), grouped(R, N, E), new PrimitiveAttr().setGather())).execute(strm, {
        [ARG.SRC]: Memory.create(plain([T, K]), eng).write(hidden), [ARG.WEIGHTS]: Memory.create(plain([E, K, N]), eng).write(w), [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: s32(eng, ti),
      });
      await strm.wait();
      return readF32(dst);
    });
    const perm = new Float64Array(R * K);
    ti.forEach((t, i) => perm.set(hidden.subarray(t * K, t * K + K), i * K));
    assertClose(got, refGroupedM(perm, w, sizes, K, N), TOL_F32, 'gather split');
  });

  it('scatter with the routing-weight binary_mul: the token-order dst bound whole, src and weights split', async () => {
    const T = 40, E = 4, k = 2, K = 64, N = 48, R = T * k;
    const rng = mulberry32(4);
    const ti = Int32Array.from({ length: R }, (_, i) => i >> 1), ks = Int32Array.from({ length: R }, (_, i) => i & 1);
    const sizes = [20, 20, 0, 40];
    const x = randomF32(rng, R * K), w = randomF32(rng, E * K * N), tw = randomF32(rng, T * k);
    const got = await bothBits(async (eng) => {
      const src = Memory.create(grouped(R, K, E), eng).write(x).writeOffsets(offsets.fromSizes(sizes));
      const attr = new PrimitiveAttr().setScatter(k);
      attr.postOps.appendBinary(algorithm.binary_mul, plain([T * k, 1]));
      const out = Memory.create(plain([T * k, N]), eng);
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, grouped(R, K, E), plain([E, K, N]), plain([T * k, N]), attr)).execute(strm, {
        [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(plain([E, K, N]), eng).write(w), [ARG.DST]: out,
        [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: Memory.create(plain([T * k, 1]), eng).write(tw), [ARG.MOE_TOKEN_INDEX]: s32(eng, ti), [ARG.MOE_TOKEN_KS]: s32(eng, ks),
      });
      await strm.wait();
      return readF32(out);
    });
    // Routed row i lands on dst row ti[i] * k + ks[i] = i here.
    const ref = refGroupedM(x, w, sizes, K, N);
    for (let i = 0; i < R * N; i++) { ref.value[i] *= tw[Math.floor(i / N)]; ref.mag[i] *= Math.abs(tw[Math.floor(i / N)]); }
    assertClose(got, ref, TOL_F32, 'scatter split');
  });

  it('zero-filled ungrouped rows and an expert map (P#2), with a per-expert bias', async () => {
    const E = 3, M = 140, K = 32, N = 40, offs = [6, 30, 30, 61, 80, 100, 130], map = [2, 0, 2, 1, 1, 0];
    const rng = mulberry32(5);
    const x = randomF32(rng, M * K), w = randomF32(rng, E * K * N), bias = randomF32(rng, E * N);
    const got = await bothBits(async (eng) => {
      const attr = new PrimitiveAttr().setGroupedOffsets(ARG.SRC, map.length).setExpertMap().setZeroFillUngroupedRows();
      const dst = Memory.create(plain([M, N]), eng).write(new Float64Array(M * N).fill(-3));
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([M, K]), plain([E, K, N]), plain([E, N]), plain([M, N]), attr)).execute(strm, {
        [ARG.SRC]: Memory.create(plain([M, K]), eng).write(x), [ARG.WEIGHTS]: Memory.create(plain([E, K, N]), eng).write(w), [ARG.BIAS]: Memory.create(plain([E, N]), eng).write(bias),
        [ARG.DST]: dst, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: s32(eng, offs), [ARG.MOE_EXPERT_MAP]: s32(eng, map),
      });
      await strm.wait();
      return readF32(dst);
    });
    const wg = new Float64Array(map.length * K * N), bg = new Float64Array(map.length * N);
    map.forEach((e, g) => { wg.set(w.subarray(e * K * N, (e + 1) * K * N), g * K * N); bg.set(bias.subarray(e * N, (e + 1) * N), g * N); });
    const sizes = offs.slice(1).map((o, i) => o - offs[i]);
    assertClose(got.subarray(6 * N, 130 * N), refGroupedM(x.subarray(6 * K), wg, sizes, K, N, { bias: { dims: [map.length, N], data: bg } }), TOL_F32, 'mapped split');
    expect(Array.from(got.subarray(0, 6 * N)).every((v) => v === 0) && Array.from(got.subarray(130 * N)).every((v) => v === 0)).toBe(true);
  });

  it('dense 2D split by rows, and batched token counts split by batches and rows', async () => {
    const rng = mulberry32(6);
    const M = 300, K = 16, N = 16;
    const x = randomF32(rng, M * K), w = randomF32(rng, K * N);
    const got = await bothBits(async (eng) => {
      const dst = Memory.create(plain([M, N]), eng);
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([M, K]), plain([K, N]), plain([M, N]))).execute(strm, {
        [ARG.SRC]: Memory.create(plain([M, K]), eng).write(x), [ARG.WEIGHTS]: Memory.create(plain([K, N]), eng).write(w), [ARG.DST]: dst,
      });
      await strm.wait();
      return readF32(dst);
    });
    assertClose(got, refDense(x, [M, K], w, [K, N]), TOL_F32, 'dense split');
    const G = 3, C = 100, counts = [100, 0, 37];
    const xb = randomF32(rng, G * C * K), wb = randomF32(rng, G * K * N);
    const gotB = await bothBits(async (eng) => {
      const dst = Memory.create(plain([G, C, N]), eng).write(new Float64Array(G * C * N).fill(-3));
      const strm = new Stream(eng);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, plain([G, C, K]), plain([G, K, N]), plain([G, C, N]), new PrimitiveAttr().setBatchedTokenCounts())).execute(strm, {
        [ARG.SRC]: Memory.create(plain([G, C, K]), eng).write(xb), [ARG.WEIGHTS]: Memory.create(plain([G, K, N]), eng).write(wb), [ARG.DST]: dst,
        [ARG.MOE_EXPERT_NUM_TOKENS]: s32(eng, counts),
      });
      await strm.wait();
      return readF32(dst);
    });
    for (let g = 0; g < G; g++) {
      const ref = refGroupedM(xb.subarray(g * C * K), wb.subarray(g * K * N, (g + 1) * K * N), [counts[g]], K, N);
      assertClose(gotB.subarray(g * C * N, (g * C + counts[g]) * N), ref, TOL_F32, `batch ${g}`);
      expect(Array.from(gotB.subarray((g * C + counts[g]) * N, (g + 1) * C * N)).every((v) => v === -3)).toBe(true);
    }
  });

  it('what cannot be split is refused at pd creation, naming the binding limit', () => {
    // One expert's weights (80 x 80 f32 = 25600 bytes) exceed the 16 KiB binding.
    expectDnnlError(() => new matmul.PrimitiveDesc(small, grouped(8, 80, 2), plain([2, 80, 80]), grouped(8, 80, 2)), 'unimplemented', /does not fit one storage binding \(maxStorageBufferBindingSize 16384 bytes\)/);
    // The whole-buffer engine runs it.
    expect(new matmul.PrimitiveDesc(whole, grouped(8, 80, 2), plain([2, 80, 80]), grouped(8, 80, 2)).implInfo).toMatch(/^webgpu:/);
  });
});

describe('gpu grouped_gemm (P#3): an expert larger than one storage binding (16 KiB test bound)', () => {
  /** Runs the case on both engines: the split one binds ranges no larger than the limit and gives the whole-buffer engine's bits. */
  async function bothP3(c: P3QCase): Promise<Awaited<ReturnType<typeof runP3Q>>> {
    const ref = await runP3Q(whole, new Stream(whole), c);
    seen.largest = 0;
    seen.ranges = 0;
    const got = await runP3Q(small, new Stream(small), c);
    expect(seen.ranges, 'the split engine bound buffer ranges').toBeGreaterThan(0);
    expect(seen.largest, 'no binding larger than the limit').toBeLessThanOrEqual(LIMIT);
    expectSameBits(got, ref, 'split == whole');
    return got;
  }

  it('f32 src / dst split into row windows beside experts that fit; per-row src scales, per-column weight scales, an empty expert', async () => {
    // Expert 0: src 100 x 64 f32 = 25600 bytes and dst 100 x 48 = 19200 bytes, past the 16 KiB binding.
    const o = await bothP3({
      experts: [{ K: 64, N: 48, rows: 97, cap: 100 }, { K: 8, N: 6, rows: 3, cap: 5 }, { K: 64, N: 48, rows: 0, cap: 70 }],
      scales: { src: { kind: 'row' }, weights: { kind: 'col' } },
    });
    expectBitwise(o);
  });

  it('u4 weights with K-block scales, bf16 dst (two values a word), a shared binary and sum: windows of 64-row tiles', async () => {
    expectBitwise(await bothP3({
      experts: [{ K: 48, N: 96, rows: 150, cap: 160 }, { K: 32, N: 96, rows: 7 }],
      weiDt: dt.u4, dstDt: dt.bf16, scales: { weights: { kind: 16 } }, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'shared_n' }, { kind: 'sum', scale: 0.5 }],
    }));
  });

  it('the fused GLU over split rows', async () => {
    expectClose(await bothP3({ experts: [{ K: 32, N: 96, rows: 90, cap: 99 }], glu: { alg: 'glu_swiglu', layout: 'interleaved' }, scales: { weights: { kind: 'col' } } }));
  });

  const rowsMd = (cols: number, t: DataType = dt.f32): MemoryDesc => memory.desc([RUNTIME_DIM_VAL, cols], t, tag.ab);
  /** A runtime-rows memory over a fresh buffer of `rows` rows. */
  const rowsOf = (eng: GpuEngine, cols: number, rows: number, md = rowsMd(cols)): GpuMemory =>
    Memory.create(md, eng, Memory.create(cols === 1 && md.ndims === 1 ? plain([rows]) : plain([rows, cols]), eng).handles[0]);

  it('runtime rows past a split expert\'s capacity are still found on the device', async () => {
    const pd = new grouped_gemm.PrimitiveDesc(small, [rowsMd(64)], [plain([64, 48])], [rowsMd(48)], memory.desc([1], dt.s32, tag.x));
    const prim = new grouped_gemm.Primitive(pd);
    const strm = new Stream(small);
    prim.execute(strm, { [ARG.MULTIPLE_SRC]: rowsOf(small, 64, 100), [ARG.MULTIPLE_WEIGHTS]: Memory.create(plain([64, 48]), small), [ARG.MULTIPLE_DST]: rowsOf(small, 48, 100), [ARG.RUNTIME_DIMS]: s32(small, [101]) });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', "ARG.RUNTIME_DIMS[0] = 101 rows do not fit expert 0's src/dst allocations (100 rows fit)");
    prim.destroy();
  });

  it('what cannot be split is refused: weights past one binding at pd creation, a per-row binary src1 past one binding at execute', () => {
    expectDnnlError(() => new grouped_gemm.PrimitiveDesc(small, [rowsMd(80)], [plain([80, 80])], [rowsMd(80)], memory.desc([1], dt.s32, tag.x)), 'unimplemented',
      "expert 0's weights (25600 bytes) do not fit one storage binding (maxStorageBufferBindingSize 16384 bytes)");
    const attr = new PrimitiveAttr();
    attr.postOps.appendBinary(algorithm.binary_add, rowsMd(48));
    const prim = new grouped_gemm.Primitive(new grouped_gemm.PrimitiveDesc(small, [rowsMd(64)], [plain([64, 48])], [rowsMd(48)], memory.desc([1], dt.s32, tag.x), attr));
    expectDnnlError(() => prim.execute(new Stream(small), {
      [ARG.MULTIPLE_SRC]: rowsOf(small, 64, 100), [ARG.MULTIPLE_WEIGHTS]: Memory.create(plain([64, 48]), small), [ARG.MULTIPLE_DST]: rowsOf(small, 48, 100), [ARG.RUNTIME_DIMS]: s32(small, [90]),
      [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.MULTIPLE_SRC]: rowsOf(small, 48, 100),
    }), 'unimplemented', 'grouped_gemm: expert 0: a scales, zero points or binary src1 buffer of 19200 bytes is larger than one storage binding (maxStorageBufferBindingSize 16384 bytes)');
    prim.destroy();
  });
});
