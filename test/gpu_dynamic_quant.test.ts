/**
 * dynamic_quant on the gpu engine (SwiftShader in CI): the cpu engine's codes and scales bit for bit
 * (the kernel divides in integer arithmetic on the f32 bits, so no tolerance is needed), against the
 * float64 model of the cpu tests and quant.perTokenInt8: f32 / bf16 / f16 src, cols not a multiple of
 * 4 (codes of two rows in one u32 word), zero rows, exact ties at every scale, subnormal values and a
 * subnormal scale, values near the f32 maximum; grouped src (offsets read on the device, rows at or
 * past the last one untouched), NaN / infinite rows and bad offsets raised at wait(); a second run
 * gives the same bits.
 */
import { describe, expect, it } from 'vitest';
import {
  ARG, Engine, GpuEngine, Memory, RUNTIME_DIM_VAL, Stream, dt, dynamic_quant, memory, quant, tag, type DataType, type MemoryDesc,
} from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { mulberry32, randomF32 } from './workloads.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

/** Independent float64 model of symmetric per-row int8 quantization (the cpu tests' model). */
function refQuant(x: ArrayLike<number>, rows: number, K: number): { q: number[]; s: number[] } {
  const q: number[] = [], s: number[] = [];
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[r * K + k]));
    const sc = amax > 0 ? Math.fround(amax / 127) : 1;
    s.push(sc);
    for (let k = 0; k < K; k++) {
      const v = x[r * K + k] / sc;
      const f = Math.floor(v), d = v - f;
      const rne = d > 0.5 ? f + 1 : d < 0.5 ? f : f % 2 === 0 ? f : f + 1;
      q.push(Math.max(-128, Math.min(127, rne)));
    }
  }
  return { q, s };
}

interface Out { q: Int8Array; s: Float32Array }

async function runGpu(srcMd: MemoryDesc, x: ArrayLike<number>, runs = 1): Promise<{ outs: Out[]; stored: Float64Array }> {
  const dstMd = memory.desc(srcMd.dims.slice(), dt.s8, tag.ab);
  const pd = new dynamic_quant.PrimitiveDesc(gpu, srcMd, dstMd);
  expect(pd.implInfo).toBe('webgpu:quant-rows-s8');
  const prim = new dynamic_quant.Primitive(pd);
  const strm = new Stream(gpu);
  const src = Memory.create(srcMd, gpu).write(x);
  const outs: Out[] = [];
  for (let i = 0; i < runs; i++) {
    const dst = Memory.create(dstMd, gpu), sc = Memory.create(pd.queryMd('scales'), gpu);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sc });
    await strm.wait();
    outs.push({ q: Int8Array.from(await dst.read()), s: Float32Array.from(await sc.read()) });
  }
  return { outs, stored: Float64Array.from(await src.read()) };
}

async function runCpu(srcMd: MemoryDesc, x: ArrayLike<number>): Promise<Out> {
  const dstMd = memory.desc(srcMd.dims.slice(), dt.s8, tag.ab);
  const pd = new dynamic_quant.PrimitiveDesc(cpu, srcMd, dstMd);
  const strm = new Stream(cpu);
  const src = Memory.create(srcMd, cpu);
  src.write(x);
  const dst = Memory.create(dstMd, cpu), sc = Memory.create(pd.queryMd('scales'), cpu);
  new dynamic_quant.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sc });
  await strm.wait();
  return { q: Int8Array.from(dst.values as Int8Array), s: Float32Array.from(sc.values as Float32Array) };
}

const bitsOf = (s: Float32Array): number[] => Array.from(new Uint32Array(s.buffer, s.byteOffset, s.length));

async function expectSameAsCpu(rows: number, K: number, t: DataType, x: ArrayLike<number>): Promise<void> {
  const srcMd = memory.desc([rows, K], t, tag.ab);
  const { outs, stored } = await runGpu(srcMd, x, 2);
  const [g] = outs;
  const c = await runCpu(srcMd, x);
  expect(Array.from(g.q), 'codes vs the cpu engine').toEqual(Array.from(c.q));
  expect(bitsOf(g.s), 'scale bits vs the cpu engine').toEqual(bitsOf(c.s));
  const ref = refQuant(stored, rows, K);
  expect(Array.from(g.q), 'codes vs float64').toEqual(ref.q);
  expect(Array.from(g.s), 'scales vs float64').toEqual(ref.s);
  expect(Array.from(g.q), 'quant.perTokenInt8').toEqual(Array.from(quant.perTokenInt8(stored, [rows, K]).values));
  expect(Array.from(outs[1].q), 'second run codes').toEqual(Array.from(g.q));
  expect(bitsOf(outs[1].s), 'second run scales').toEqual(bitsOf(g.s));
}

describe('dynamic_quant on the gpu engine', () => {
  it.each([[37, 67, dt.f32], [5, 3, dt.bf16], [1, 1, dt.f32], [9, 128, dt.f16], [3, 300, dt.f32], [4, 5, dt.f16]] as const)(
    '%i x %i %s: random rows, a zero row, exact ties', async (rows, K, t) => {
      const x = randomF32(mulberry32(rows * K), rows * K);
      for (let k = 0; k < K; k++) x[(2 % rows) * K + k] = 0; // a zero row
      if (K > 2) { x[0] = 127; x[1] = 0.5; x[2] = 1.5; } // exact ties: s = 1
      await expectSameAsCpu(rows, K, t, x);
    });

  it('ties at scales other than 1, and the largest codes (|x| = amax)', async () => {
    const rows = 6, K = 40;
    const x = new Float64Array(rows * K);
    const scales = [3, 0.375, 1.25, 2 ** -20, 7, 1e30 / 127];
    for (let r = 0; r < rows; r++) {
      const s = Math.fround(scales[r]);
      x[r * K] = Math.fround(127 * s);
      for (let k = 1; k < K; k++) x[r * K + k] = Math.fround((k % 2 ? 1 : -1) * (k / 2 - 0.5 + (k % 3 === 0 ? 0.25 : 0)) * s);
    }
    await expectSameAsCpu(rows, K, dt.f32, x);
  });

  it('subnormal values, a subnormal scale, values near the f32 maximum', async () => {
    const K = 9, tiny = 2 ** -149;
    const x = [
      1e-3, 3 * tiny, -5 * tiny, 2 ** -127, -(2 ** -130), 0.5e-3, 1e-40, -1e-39, 0,
      100 * tiny * 127, 37 * tiny, -(2 ** 23) * tiny, 12345 * tiny, -99 * tiny, 1, 2, 3, 4, // row 1: amax subnormal-scale row? row 1 holds 1..4 too
      3.4e38, -3.4e38, 1e38, -2e37, 1, -1, 5e36, 3.3e38, 0,
    ].slice(0, 3 * K);
    // Row 1 with a subnormal scale: only subnormal / tiny values.
    for (let k = 0; k < K; k++) x[K + k] = [127 * 1000 * tiny, 37 * tiny, -(2 ** 20) * tiny, 12345 * tiny, -99 * tiny, 500 * tiny, -63500 * tiny, 2 ** -140, -(2 ** -141)][k];
    await expectSameAsCpu(3, K, dt.f32, x.map((v) => Math.fround(v)));
  });

  it('f16 subnormal halves and bf16 extremes', async () => {
    await expectSameAsCpu(2, 6, dt.f16, [2 ** -24, -(2 ** -20), 3 * 2 ** -24, 0, 2 ** -14, -(2 ** -15), 65504, -65504, 1, -2, 0.5, 1000]);
    await expectSameAsCpu(2, 4, dt.bf16, [3e38, -1e38, 1e-38, 0, 2 ** -130, -(2 ** -128), 1, 2 ** -133]);
  });

  it('grouped src: only rows up to the last offset; NaN / infinity (lowest row reported) and bad offsets are errors', async () => {
    const strm = new Stream(gpu);
    const R = 10, K = 8;
    const srcMd = memory.desc.grouped([R, K], dt.f32, 3, [RUNTIME_DIM_VAL, K]);
    const dstMd = memory.desc([R, K], dt.s8, tag.ab);
    const prim = new dynamic_quant.Primitive(new dynamic_quant.PrimitiveDesc(gpu, srcMd, dstMd));
    const x = randomF32(mulberry32(1), R * K);
    x.fill(NaN, 6 * K); // rows past the last offset: never read
    const src = Memory.create(srcMd, gpu).write(x);
    src.writeOffsets([0, 2, 2, 6]);
    const dst = Memory.create(dstMd, gpu).write(new Array<number>(R * K).fill(99)), sc = Memory.create(memory.desc([R], dt.f32, tag.a), gpu).write(new Array<number>(R).fill(-1));
    const args = { [ARG.SRC]: src, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sc };
    prim.execute(strm, args);
    await strm.wait();
    const q = Array.from(await dst.read());
    expect(q.slice(0, 6 * K)).toEqual(refQuant(x, 6, K).q);
    expect(q.slice(6 * K).every((v) => v === 99)).toBe(true);
    expect(Array.from(await sc.read()).slice(6)).toEqual([-1, -1, -1, -1]);
    src.writeOffsets([0, 2, 2, 9]);
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'dynamic_quant.execute: src row 6 has a NaN or infinite value');
    const x2 = Float64Array.from(x);
    x2[3 * K + 5] = Infinity;
    src.write(x2);
    prim.execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src row 3 has a NaN or infinite value');
    const q2 = Array.from(await dst.read());
    expect(q2.slice(3 * K, 4 * K), 'the bad row is not written').toEqual(q.slice(3 * K, 4 * K));
    for (const [offs, msg] of [[[0, 2, 2, 11], 'src offsets[3] = 11 must be in [0, 10]'], [[0, 2, 2, -3], 'src offsets[3] = -3 must be in [0, 10]']] as const) {
      dst.write(new Array<number>(R * K).fill(99));
      src.writeOffsets(offs);
      prim.execute(strm, args);
      await expectDnnlReject(strm.wait(), 'invalid_arguments', msg);
      expect(Array.from(await dst.read()).every((v) => v === 99), 'nothing written').toBe(true);
    }
    src.writeOffsets([0, 0, 0, 0]);
    prim.execute(strm, args);
    await strm.wait();
    expect(Array.from(await dst.read()).every((v) => v === 99), 'no rows: nothing written').toBe(true);
  });

  it('2051 rows (the grid holds 1024 rows per y step)', async () => {
    const rows = 2051, K = 2;
    const x = randomF32(mulberry32(4), rows * K);
    x[(rows - 1) * K] = 127;
    x[(rows - 1) * K + 1] = -0.5;
    await expectSameAsCpu(rows, K, dt.f32, x);
  });

  it('descriptor rules and argument checks', () => {
    const dstMd = memory.desc([10, 8], dt.s8, tag.ab);
    expectDnnlError(() => new dynamic_quant.PrimitiveDesc(gpu, memory.desc([4, 4], dt.s8, tag.ab), dstMd), 'unimplemented', 'src data type s8');
    expectDnnlError(() => new dynamic_quant.PrimitiveDesc(gpu, memory.desc([4, 4], dt.f32, tag.ab), dstMd), 'invalid_arguments', 'dst dims [10,8] must equal src dims [4,4]');
    const pd = new dynamic_quant.PrimitiveDesc(gpu, memory.desc([10, 8], dt.f32, tag.ab), dstMd);
    const prim = new dynamic_quant.Primitive(pd), strm = new Stream(gpu);
    const src = Memory.create(pd.queryMd('src'), gpu), dst = Memory.create(dstMd, gpu);
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst }), 'invalid_arguments', 'missing argument ARG.ATTR_SCALES | ARG.DST');
    const sc = Memory.create(pd.queryMd('scales'), gpu, dst.buffers[0]);
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.DST]: sc }), 'invalid_arguments', 'overlap');
  });
});
