/**
 * Proposal #3 (`grouped_gemm`) with rfcs/0002 fusions on the gpu engine (SwiftShader in CI): per-expert
 * scales and zero points, integer / fp8 / fp4 weights and activations, binary post-ops (shared and
 * per-expert src1), sum and the fused GLU, against quant_helpers.ts's independent float64 expectation,
 * bit for bit where the inputs make every intermediate exact. The same cases as quant_fusion.test.ts's
 * cpu P#3 section, plus empty experts, one expert taking every row, E = 1 and K / N past one tile.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ARG, DnnlError, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, memory, tag, type GluAlg, type GluLayout, type GpuEngine, type GpuMemory, type MemoryDesc } from '../src/index.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { expectBitwise, expectClose, P3_F32_SCALE_CASES, runP3Q, type P3QCase } from './quant_helpers.js';

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });

/** Expert 1 holds no rows and no buffer rows (zero-size bindings); rows past M_i keep their values. */
const EXPERTS = [{ K: 8, N: 6, rows: 3, cap: 4 }, { K: 4, N: 6, rows: 0, cap: 0 }, { K: 16, N: 6, rows: 2 }] as const;

/**
 * Runs a case and checks which kernel each expert took: gemv-splitk for a capacity of 1 to
 * gemvDenseMaxRows rows (decode), gemm-tiled otherwise or with the decode kernel off (the pipelines the
 * primitive asks the engine for; the engine caches them, the calls still come).
 */
async function run(c: P3QCase): Promise<ReturnType<typeof runP3Q>> {
  const spy = vi.spyOn(eng, 'pipeline');
  try {
    const o = await runP3Q(eng, strm, c);
    expect(o.pd.implInfo).toBe('webgpu:gemm-tiled|gemv-splitk+expert-dims');
    const keys = spy.mock.calls.map((a) => a[0]);
    const caps = c.experts.map((e) => e.cap ?? e.rows);
    // The GEMV reads float or 8-bit integer src (fp8 / fp4 src take gemm-tiled).
    const small = (n: number): boolean => gpuKernelTuning.gemv && ['f32', 'f16', 'bf16', 's8', 'u8'].includes(c.srcDt ?? 'f32') && n <= gpuKernelTuning.gemvDenseMaxRows;
    const gemv = caps.some((n) => n >= 1 && small(n));
    const tiled = caps.some((n) => n >= 1 && !small(n));
    expect(keys.some((k) => k.startsWith('gemv-splitk-main'))).toBe(gemv);
    expect(keys.some((k) => k.startsWith('gemm-tiled'))).toBe(tiled);
    return o;
  } finally {
    spy.mockRestore();
  }
}

/** Each kernel an expert of few rows can take: the decode GEMV (the default), and gemm-tiled with it off. */
const KERNELS = [['gemv-splitk for small capacities', true], ['gemm-tiled for every expert', false]] as const;
const useKernel = (gemv: boolean): void => {
  beforeAll(() => { gpuKernelTuning.gemv = gemv; });
  afterAll(() => { gpuKernelTuning.gemv = true; });
};

describe.each(KERNELS)('gpu grouped_gemm: scales and zero points (%s)', (_k, gemv) => {
  useKernel(gemv);
  it.each(P3_F32_SCALE_CASES)('f32: %s', async (_n, c) => {
    expectBitwise(await run({ experts: EXPERTS, ...c }));
  });

  it.each([
    ['s8 x s8 -> s32 with src / weights zero points', { srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, zps: { src: { kind: 'tensor', dt: dt.s8 }, weights: { kind: 'col' } } }],
    ['u8 x s4 -> s8 with per-row / per-column scales and a dst scale', { srcDt: dt.u8, weiDt: dt.s4, dstDt: dt.s8, scales: { src: { kind: 'row' }, weights: { kind: 'col' }, dst: { kind: 'tensor' } }, zps: { weights: { kind: 'tensor', dt: dt.s4 } } }],
    ['f16 x u4 -> f32 weight-only, K-block f16 scales, u4 zero points', { srcDt: dt.f16, weiDt: dt.u4, scales: { weights: { kind: 4, dt: dt.f16 } }, zps: { weights: { kind: 'col', dt: dt.u4 } } }],
    ['f32 x s8 -> bf16 weight-only per column', { weiDt: dt.s8, dstDt: dt.bf16, scales: { weights: { kind: 'col' } } }],
    ['f8_e4m3 x f8_e4m3 -> bf16', { srcDt: dt.f8_e4m3, weiDt: dt.f8_e4m3, dstDt: dt.bf16, scales: { src: { kind: 'tensor', dt: dt.e8m0 }, weights: { kind: 'col', dt: dt.e8m0 } } }],
    ['f4_e2m1 x f4_e2m1 -> f32 (NVFP4-style f8_e4m3 K-block scales)', { srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, scales: { weights: { kind: 4, dt: dt.f8_e4m3 }, dst: { kind: 'tensor' } } }],
  ] as const)('%s', async (_n, c) => {
    expectBitwise(await run({ experts: EXPERTS, ...c }));
  });

  it('s8 x s8 -> s32 over the full code range, the same src memory for every expert', async () => {
    const same = [{ K: 8, N: 6, rows: 3, cap: 4 }, { K: 8, N: 6, rows: 3, cap: 4 }, { K: 8, N: 6, rows: 2, cap: 4 }];
    expectBitwise(await run({ experts: same, sharedSrc: true, srcDt: dt.s8, weiDt: dt.s8, dstDt: dt.s32, zps: { src: { kind: 'tensor', dt: dt.s8 } }, fullRange: true }));
  });

  it('shapes: K and N past one tile, an expert of more than 16 rows, E = 1, one expert taking every row', async () => {
    const q = { weiDt: dt.u4, scales: { weights: { kind: 8 } }, zps: { weights: { kind: 'col', dt: dt.u4 } } } as const;
    expectBitwise(await run({ experts: [{ K: 40, N: 70, rows: 19, cap: 21 }, { K: 24, N: 130, rows: 5 }], ...q }));
    expectBitwise(await run({ experts: [{ K: 16, N: 66, rows: 33, cap: 40 }], ...q }));
    expectBitwise(await run({ experts: [{ K: 8, N: 6, rows: 0, cap: 2 }, { K: 8, N: 6, rows: 7 }, { K: 8, N: 6, rows: 0 }], ...q }));
  });
});

describe('gpu grouped_gemm: experts of more rows than one gemv tile (gemvDenseMaxRows 32: tiles of 8 rows)', () => {
  let saved = 0;
  beforeAll(() => { saved = gpuKernelTuning.gemvDenseMaxRows; gpuKernelTuning.gemvDenseMaxRows = 32; });
  afterAll(() => { gpuKernelTuning.gemvDenseMaxRows = saved; });

  it('capacities 20 and 32, runtime rows 17 and 0, 9 of 10: tiles of 8 rows, those past M_i idle', async () => {
    expectBitwise(await run({ experts: [{ K: 24, N: 70, rows: 17, cap: 20 }, { K: 24, N: 70, rows: 0, cap: 32 }, { K: 8, N: 70, rows: 9, cap: 10 }], weiDt: dt.s8, scales: { weights: { kind: 'col' } }, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'row_n' }] }));
  });
});

describe('gpu grouped_gemm: attr.setExpertScales', () => {
  it('scales on some experts only (no every-expert setting): the others take none', async () => {
    const K = 5, N = 3, rows = [2, 3, 1], G = 3;
    const rt = (c: number): MemoryDesc => memory.desc([RUNTIME_DIM_VAL, c], dt.f32, tag.ab);
    const attr = new PrimitiveAttr().setExpertScales(ARG.MULTIPLE_WEIGHTS, 1, 0).setExpertScales(ARG.MULTIPLE_SRC, 2, 1);
    const pd = new grouped_gemm.PrimitiveDesc(eng, rows.map(() => rt(K)), rows.map(() => memory.desc([K, N], dt.f32, tag.ab)), rows.map(() => rt(N)), memory.desc([G], dt.s32, tag.x), attr);
    const prim = new grouped_gemm.Primitive(pd);
    const mems: GpuMemory[] = [];
    const mk = (md: MemoryDesc, b?: GPUBuffer): GpuMemory => { const m = Memory.create(md, eng, b); mems.push(m); return m; };
    const args: Record<number, GpuMemory> = { [ARG.RUNTIME_DIMS]: mk(memory.desc([G], dt.s32, tag.x)).write(rows) };
    const dsts: GpuMemory[] = [];
    try {
      for (let i = 0; i < G; i++) {
        args[ARG.MULTIPLE_SRC + i] = mk(rt(K), mk(memory.desc([rows[i], K], dt.f32, tag.ab)).write(new Array<number>(rows[i] * K).fill(1)).buffers[0]);
        const d = mk(memory.desc([rows[i], N], dt.f32, tag.ab));
        dsts.push(d);
        args[ARG.MULTIPLE_DST + i] = mk(rt(N), d.buffers[0]);
        args[ARG.MULTIPLE_WEIGHTS + i] = mk(memory.desc([K, N], dt.f32, tag.ab)).write(new Array<number>(K * N).fill(1));
      }
      args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1)] = mk(pd.queryMd('scales:weights', 1)!).write([4]);
      args[ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 2)] = mk(pd.queryMd('scales:src', 2)!, mk(memory.desc([1], dt.f32, tag.a)).write([0.5]).buffers[0]);
      prim.execute(strm, args);
      await strm.wait();
      expect(Array.from(await dsts[0].read())).toEqual(new Array<number>(2 * N).fill(K));
      expect(Array.from(await dsts[1].read())).toEqual(new Array<number>(3 * N).fill(4 * K));
      expect(Array.from(await dsts[2].read())).toEqual(new Array<number>(N).fill(0.5 * K));
    } finally {
      prim.destroy();
      mems.forEach((m) => m.free());
    }
  });
});

describe('gpu grouped_gemm: dispatch grids', () => {
  it('an expert of large capacity takes the indirect grid of its runtime rows, small ones the direct grid of their capacity', async () => {
    // 600000 rows of capacity: 9375 tiles of 64, past the direct bound; 70 rows run.
    const o = await run({ experts: [{ K: 1, N: 1, rows: 70, cap: 600000 }, { K: 8, N: 6, rows: 3, cap: 200 }, { K: 4, N: 6, rows: 0, cap: 9 }], weiDt: dt.s8, scales: { weights: { kind: 'col' } } });
    expectBitwise(o);
  });
});

describe.each(KERNELS)('gpu grouped_gemm: binary, sum and the fused GLU (%s)', (_k, gemv) => {
  useKernel(gemv);
  it.each([dt.bf16, dt.f16, dt.s8, dt.u8, dt.s32])('binary src1 %s: shared [1, N] mul, per-row [RT, N] add', async (t) => {
    expectBitwise(await run({ experts: EXPERTS, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'shared_n', dt: t }, { kind: 'binary', alg: 'binary_add', shape: 'row_n', dt: t }] }));
  });

  it.each(['shared_1', 'shared_n', 'row_1', 'row_n'] as const)('binary src1 %s, then sum', async (shape) => {
    expectBitwise(await run({ experts: EXPERTS, ops: [{ kind: 'binary', alg: 'binary_mul', shape }, { kind: 'binary', alg: 'binary_add', shape }, { kind: 'sum', scale: 0.5 }] }));
  });

  const GLU: readonly (readonly [GluLayout, GluAlg])[] = [
    ['halves', 'glu_swiglu'], ['interleaved', 'glu_swiglu'], ['blocks32', 'glu_swiglu'],
    ['interleaved', 'glu_geglu_erf'], ['halves', 'glu_geglu_tanh'], ['blocks32', 'glu_swiglu_oai'],
  ];
  it.each(GLU)('GLU layout %s, %s, with per-column weight scales and a per-row binary', async (layout, alg) => {
    const N = layout === 'blocks32' ? 64 : 6;
    expectClose(await run({ experts: [{ K: 8, N, rows: 3 }, { K: 4, N, rows: 1, cap: 3 }, { K: 4, N, rows: 0, cap: 0 }], glu: { alg, layout }, scales: { weights: { kind: 'col' } }, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'row_1' }] }));
  });

  it('GLU over u4 weights, N past one tile', async () => {
    expectClose(await run({ experts: [{ K: 16, N: 140, rows: 5 }, { K: 16, N: 140, rows: 18, cap: 20 }], weiDt: dt.u4, glu: { alg: 'glu_swiglu', layout: 'interleaved' }, scales: { weights: { kind: 'col' } } }));
  });

  it('a second run gives the same bits', async () => {
    const c: P3QCase = { experts: EXPERTS, weiDt: dt.s4, scales: { weights: { kind: 4 } }, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'row_n' }] };
    const a = await run(c), b = await run(c);
    expect(Array.from(a.got)).toEqual(Array.from(b.got));
  });
});

describe('gpu grouped_gemm: several rows rules broken at once', () => {
  /**
   * Expert e has src / dst of `sd[e]` rows, a per-row src scale of `scale[e]` rows and a per-row binary
   * src1 of `bin[e]` rows (K = 4, N = 2); returns the error `rows` raise on `engine`.
   */
  async function errorOf(engine: Engine | GpuEngine, sd: number[], scale: number[], bin: number[], rows: number[]): Promise<string> {
    const G = sd.length;
    const attr = new PrimitiveAttr().setScales(ARG.MULTIPLE_SRC, 1, [], dt.f32);
    attr.postOps.appendBinary('binary_add', memory.desc([RUNTIME_DIM_VAL, 1], dt.f32, tag.ab));
    const rt = (c: number): MemoryDesc => memory.desc([RUNTIME_DIM_VAL, c], dt.f32, tag.ab);
    const pd = new grouped_gemm.PrimitiveDesc(engine as GpuEngine, sd.map(() => rt(4)), sd.map(() => memory.desc([4, 2], dt.f32, tag.ab)), sd.map(() => rt(2)), memory.desc([G], dt.s32, tag.x), attr);
    const prim = new grouped_gemm.Primitive(pd);
    const mems: (Memory | GpuMemory)[] = [];
    const mk = (md: MemoryDesc, over?: Memory | GpuMemory): Memory | GpuMemory => {
      const m = over ? Memory.create(md, engine as GpuEngine, over.handles[0] as GPUBuffer) : Memory.create(md, engine as GpuEngine);
      mems.push(m);
      return m;
    };
    // A runtime-rows view over a plain memory of exactly `n` rows (its capacity on either engine).
    const rowsOf = (md: MemoryDesc, n: number, cols: number): Memory | GpuMemory => mk(md, mk(memory.desc(cols ? [n, cols] : [n], dt.f32, cols ? tag.ab : tag.a)));
    const args: Record<number, Memory | GpuMemory> = { [ARG.RUNTIME_DIMS]: mk(memory.desc([G], dt.s32, tag.x)) };
    for (let i = 0; i < G; i++) {
      args[ARG.MULTIPLE_SRC + i] = rowsOf(rt(4), sd[i], 4);
      args[ARG.MULTIPLE_DST + i] = rowsOf(rt(2), sd[i], 2);
      args[ARG.MULTIPLE_WEIGHTS + i] = mk(memory.desc([4, 2], dt.f32, tag.ab));
      args[ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)] = rowsOf(pd.queryMd('scales:src', i)!, scale[i], 0);
      args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + i)] = rowsOf(pd.queryMd('binary:0', i)!, bin[i], 1);
    }
    const st = new Stream(engine as GpuEngine);
    try {
      (args[ARG.RUNTIME_DIMS] as GpuMemory).write(rows);
      await st.wait();
      prim.execute(st, args as Record<number, GpuMemory>);
      await st.wait();
      return 'no error';
    } catch (e) {
      return e instanceof DnnlError ? e.message : String(e);
    } finally {
      prim.destroy();
      mems.forEach((m) => m.free());
    }
  }

  let cpu: Engine;
  beforeAll(async () => { cpu = await Engine.create({ threads: 1 }); });
  afterAll(() => cpu?.release());

  it.each([
    ['expert 0 past its scale, expert 1 past its src / dst: src / dst first', [4, 2], [3, 4], [4, 4], [4, 3]],
    ['expert 1 past its scale and its binary src1: scales before binary', [4, 4], [4, 1], [4, 2], [2, 3]],
    ['expert 1 past its scale, expert 0 past its binary src1: scales of every expert first', [4, 4], [4, 1], [1, 4], [3, 3]],
    ['negative rows of expert 1 beside expert 0 past its scale', [4, 4], [1, 4], [4, 4], [3, -1]],
  ] as const)('%s: the gpu names what the cpu names', async (_n, sd, scale, bin, rows) => {
    const want = await errorOf(cpu, [...sd], [...scale], [...bin], [...rows]);
    expect(want).toMatch(/^invalid_arguments: ARG.RUNTIME_DIMS/);
    expect(await errorOf(eng, [...sd], [...scale], [...bin], [...rows])).toBe(want);
  });
});

describe('gpu grouped_gemm: fusion rules', () => {
  it('more fusion operands than the device binds per stage is unimplemented, naming the limit', () => {
    const limit = eng.device.limits.maxStorageBuffersPerShaderStage;
    const attr = new PrimitiveAttr();
    // src, weights and dst take 3 storage bindings: one more binary src1 than fits.
    for (let i = 0; i < limit - 2; i++) attr.postOps.appendBinary('binary_add', memory.desc([RUNTIME_DIM_VAL, 4], dt.f32, tag.ab));
    expectDnnlError(() => new grouped_gemm.PrimitiveDesc(eng, [memory.desc([RUNTIME_DIM_VAL, 4], dt.f32, tag.ab)], [memory.desc([4, 4], dt.f32, tag.ab)],
      [memory.desc([RUNTIME_DIM_VAL, 4], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.x), attr), 'unimplemented', `beyond the device's maxStorageBuffersPerShaderStage ${limit}`);
  });

  it('per-row scales and binary src1 holding fewer rows than M_i: DnnlError at wait naming the memory (the cpu engine\'s message), nothing written', async () => {
    const attr = new PrimitiveAttr().setScales(ARG.MULTIPLE_SRC, 1, [], dt.f32);
    attr.postOps.appendBinary('binary_add', memory.desc([RUNTIME_DIM_VAL, 1], dt.f32, tag.ab));
    const rows = (cols: number): MemoryDesc => memory.desc([RUNTIME_DIM_VAL, cols], dt.f32, tag.ab);
    const pd = new grouped_gemm.PrimitiveDesc(eng, [rows(4), rows(4)], [memory.desc([4, 2], dt.f32, tag.ab), memory.desc([4, 2], dt.f32, tag.ab)], [rows(2), rows(2)], memory.desc([2], dt.s32, tag.x), attr);
    const prim = new grouped_gemm.Primitive(pd);
    const mems: GpuMemory[] = [];
    const buffers: GPUBuffer[] = [];
    /** The f32 values of a caller's buffer (a runtime-rows memory has no host-known element count). */
    const valuesOf = async (m: GpuMemory): Promise<number[]> => Array.from(new Float32Array((await m.readBytes(0)).slice().buffer));
    /** A memory of `md` over a caller's f32 buffer of exactly `dims` (the capacity the device checks), filled with `fill`. */
    const over = (md: MemoryDesc, dims: number[], fill: number): GpuMemory => {
      const vals = new Float32Array(dims.reduce((a, b) => a * b, 1)).fill(fill);
      const b = eng.device.createBuffer({ size: vals.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
      eng.device.queue.writeBuffer(b, 0, vals);
      const m = Memory.create(md, eng, b);
      buffers.push(b);
      mems.push(m);
      return m;
    };
    const args: Record<number, GpuMemory> = {};
    for (let i = 0; i < 2; i++) {
      args[ARG.MULTIPLE_SRC + i] = over(rows(4), [3, 4], 1);
      args[ARG.MULTIPLE_DST + i] = over(rows(2), [3, 2], -7);
      args[ARG.MULTIPLE_WEIGHTS + i] = over(memory.desc([4, 2], dt.f32, tag.ab), [4, 2], 1);
      args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + i)] = over(pd.queryMd('binary:0', i)!, [i === 1 ? 1 : 3, 1], 0.5);
      args[ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)] = over(pd.queryMd('scales:src', i)!, [i === 1 ? 2 : 3], 2);
    }
    const dims = Memory.create(memory.desc([2], dt.s32, tag.x), eng);
    mems.push(dims);
    try {
      dims.write([3, 3]);
      prim.execute(strm, { ...args, [ARG.RUNTIME_DIMS]: dims });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.RUNTIME_DIMS[1] = 3 rows do not fit ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 1) (2 rows fit)');
      expect(await valuesOf(args[ARG.MULTIPLE_DST])).toEqual(new Array<number>(6).fill(-7));
      await expect(args[ARG.MULTIPLE_DST].read()).rejects.toThrow('Memory.read: size depends on runtime dims');
      dims.write([3, 2]);
      prim.execute(strm, { ...args, [ARG.RUNTIME_DIMS]: dims });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.RUNTIME_DIMS[1] = 2 rows do not fit ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + 1) (1 rows fit)');
      dims.write([3, 1]);
      prim.execute(strm, { ...args, [ARG.RUNTIME_DIMS]: dims });
      await strm.wait();
      // 4 x (1 x 1) x 2 (src scale) + 0.5
      expect(await valuesOf(args[ARG.MULTIPLE_DST])).toEqual(new Array<number>(6).fill(8.5));
      expect(await valuesOf(args[ARG.MULTIPLE_DST + 1])).toEqual([8.5, 8.5, -7, -7, -7, -7]);
      // A view over the engine's own [2] memory holds 2 rows, not the 4 of its 16-byte buffer.
      const two = Memory.create(memory.desc([2], dt.f32, tag.a), eng).write([2, 2]);
      mems.push(two);
      const view = Memory.create(pd.queryMd('scales:src', 1)!, eng, two.buffers[0]);
      mems.push(view);
      args[ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + 1)] = over(pd.queryMd('binary:0', 1)!, [3, 1], 0.5);
      dims.write([3, 3]);
      prim.execute(strm, { ...args, [ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 1)]: view, [ARG.RUNTIME_DIMS]: dims });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.RUNTIME_DIMS[1] = 3 rows do not fit ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 1) (2 rows fit)');
    } finally {
      prim.destroy();
      mems.forEach((m) => m.free());
      buffers.forEach((b) => b.destroy());
    }
  });
});
