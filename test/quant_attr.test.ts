/**
 * rfcs/0002 API surface: scales / zero-point attributes and getters, binary and GLU post-ops, the
 * verbose strings, argument names, the values descriptors the primitive descriptors expose, and
 * Memory.write / read of 4-bit and integer types.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, PostOps, PrimitiveAttr, algorithm, binaryAlgorithm, dt, eltwiseAlgorithm, gluAlgorithm, grouped_gemm, matmul, memory, tag,
} from '../src/index.js';
import { argName } from '../src/primitives/args.js';
import { RT } from './quant_helpers.js';

describe('PrimitiveAttr scales and zero points', () => {
  it('setScales / setScalesMask / setZeroPoints store mask, groups and data type; getters return them', () => {
    const a = new PrimitiveAttr();
    expect(a.isDefault).toBe(true);
    a.setScales(ARG.SRC, 3, [1, 32], dt.e8m0).setScalesMask(ARG.DST, 0).setZeroPoints(ARG.WEIGHTS, 7, [1, 128, 1], dt.u4);
    expect(a.isDefault).toBe(false);
    expect(a.getScales(ARG.SRC)).toEqual({ mask: 3, groups: [1, 32], dataType: 'e8m0' });
    expect(a.getScales(ARG.DST)).toEqual({ mask: 0, groups: [], dataType: 'f32' });
    expect(a.getScales(ARG.WEIGHTS)).toBeUndefined();
    expect(a.getZeroPoints(ARG.WEIGHTS)).toEqual({ mask: 7, groups: [1, 128, 1], dataType: 'u4' });
    expect(a.getZeroPoints(ARG.SRC)).toBeUndefined();
    expect(a.scalesArgs).toEqual([ARG.SRC, ARG.DST]);
    expect(a.zeroPointsArgs).toEqual([ARG.WEIGHTS]);
    expect(new PrimitiveAttr().setZeroPoints(ARG.SRC, 0).getZeroPoints(ARG.SRC)?.dataType).toBe('s32');
  });

  it('setting an argument again replaces it; the stored groups are a frozen copy', () => {
    const groups = [1, 16];
    const a = new PrimitiveAttr().setScales(ARG.SRC, 3, groups).setScales(ARG.SRC, 1);
    groups[1] = 99;
    expect(a.getScales(ARG.SRC)).toEqual({ mask: 1, groups: [], dataType: 'f32' });
    expect(Object.isFrozen(new PrimitiveAttr().setScales(ARG.SRC, 3, [1, 8]).getScales(ARG.SRC)?.groups)).toBe(true);
  });

  it('grouped_gemm ids: ARG.MULTIPLE_SRC / _WEIGHTS / _DST mean every expert', () => {
    const a = new PrimitiveAttr().setScales(ARG.MULTIPLE_SRC, 1).setScales(ARG.MULTIPLE_WEIGHTS, 2).setZeroPoints(ARG.MULTIPLE_DST, 0);
    expect(a.toString()).toBe('attr-scales:msrc:1:f32+mwei:2:f32 attr-zero-points:mdst:0:s32');
  });

  it('verbose: scales, zero points, offsets and post-ops in a fixed order', () => {
    const a = new PrimitiveAttr().setScales(ARG.WEIGHTS, 7, [1, 32, 1], dt.e8m0).setScales(ARG.SRC, 1).setZeroPoints(ARG.SRC, 0, [], dt.u8).setGroupedOffsets(ARG.SRC, 4);
    a.postOps.appendGlu(algorithm.glu_swiglu_oai, 'interleaved').appendBinary(algorithm.binary_mul, memory.desc([10, 1], dt.f32, tag.ab)).appendSum(0.5);
    expect(a.toString()).toBe('attr-scales:wei:7:e8m0:1x32x1+src:1:f32 attr-zero-points:src:0:u8 attr-grouped-offsets:src:g4:s32 attr-post-ops:glu_swiglu_oai:interleaved:1.702:7+binary_mul:f32:10x1+sum:0.5');
  });
});

describe('PostOps: binary and GLU', () => {
  it('algorithm names: eltwise, binary and glu families, all in `algorithm`', () => {
    expect(Object.keys(binaryAlgorithm)).toEqual(['binary_mul', 'binary_add']);
    expect(Object.keys(gluAlgorithm)).toEqual(['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai']);
    expect(algorithm.binary_add).toBe('binary_add');
    expect(algorithm.glu_geglu_tanh).toBe('glu_geglu_tanh');
    expect(algorithm.eltwise_relu).toBe(eltwiseAlgorithm.eltwise_relu);
    expect(() => new PostOps().appendEltwise(algorithm.binary_mul as never)).toThrow(/unknown algorithm 'binary_mul'/);
  });

  it('entries, defaults and the glu getter', () => {
    const src1 = memory.desc.grouped([8, 4], dt.f32, 2, [RT, 4]);
    const ops = new PostOps().appendGlu('glu_swiglu', 'halves').appendBinary('binary_add', src1);
    expect(ops.glu).toEqual({ kind: 'glu', alg: 'glu_swiglu', layout: 'halves', alpha: 1, limit: 0 });
    expect(ops.entries[1]).toEqual({ kind: 'binary', alg: 'binary_add', src1 });
    expect(new PostOps().appendGlu('glu_swiglu_oai', 'blocks32').glu).toEqual({ kind: 'glu', alg: 'glu_swiglu_oai', layout: 'blocks32', alpha: 1.702, limit: 7 });
    expect(new PostOps().appendGlu('glu_swiglu_oai', 'halves', 1, 3).glu).toMatchObject({ alpha: 1, limit: 3 });
    expect(new PostOps().appendGlu('glu_geglu_erf', 'interleaved').glu).toMatchObject({ alpha: 0, limit: 0 });
    expect(new PostOps().appendEltwise('eltwise_relu').glu).toBeUndefined();
    expect(ops.toString()).toBe('glu_swiglu:halves:1+binary_add:f32:grouped:8x4');
    expect(new PostOps().appendGlu('glu_geglu_erf', 'interleaved').appendBinary('binary_mul', memory.desc([RT, 1], dt.f32, tag.ab)).toString()).toBe('glu_geglu_erf:interleaved+binary_mul:f32:*x1');
  });
});

describe('argument names', () => {
  it.each([
    [ARG.ATTR_SCALES | ARG.SRC, 'ARG.ATTR_SCALES | ARG.SRC'],
    [ARG.ATTR_SCALES | ARG.WEIGHTS, 'ARG.ATTR_SCALES | ARG.WEIGHTS'],
    [ARG.ATTR_SCALES | ARG.DST, 'ARG.ATTR_SCALES | ARG.DST'],
    [ARG.ATTR_ZERO_POINTS | ARG.SRC, 'ARG.ATTR_ZERO_POINTS | ARG.SRC'],
    [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS, 'ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS'],
    [ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 5), 'ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + 5)'],
    [ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1023), 'ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1023)'],
    [ARG.ATTR_ZERO_POINTS | (ARG.MULTIPLE_DST + 0), 'ARG.ATTR_ZERO_POINTS | (ARG.MULTIPLE_DST + 0)'],
    [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1, 'ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1'],
    [ARG.ATTR_MULTIPLE_POST_OP(31) | ARG.SRC_1, 'ARG.ATTR_MULTIPLE_POST_OP(31) | ARG.SRC_1'],
    [ARG.ATTR_MULTIPLE_POST_OP(2) | (ARG.MULTIPLE_SRC + 7), 'ARG.ATTR_MULTIPLE_POST_OP(2) | (ARG.MULTIPLE_SRC + 7)'],
    [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC, 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC'],
  ] as const)('%i is %s', (id, name) => {
    expect(argName(id)).toBe(name);
  });

  it('the id ranges do not collide', () => {
    const ids = new Set<number>();
    for (let i = 0; i < 1024; i++) {
      for (const base of [ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS, ARG.MULTIPLE_DST]) {
        ids.add(ARG.ATTR_SCALES | (base + i));
        ids.add(ARG.ATTR_ZERO_POINTS | (base + i));
      }
      ids.add(ARG.ATTR_MULTIPLE_POST_OP(0) | (ARG.MULTIPLE_SRC + i));
    }
    for (const a of [ARG.SRC, ARG.WEIGHTS, ARG.DST]) {
      ids.add(ARG.ATTR_SCALES | a);
      ids.add(ARG.ATTR_ZERO_POINTS | a);
    }
    ids.add(ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1);
    expect(ids.size).toBe(1024 * 7 + 7);
  });
});

describe('values descriptors exposed by the primitive descriptors', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'none' });
  });
  afterAll(() => eng.release());

  it('matmul P#1: scales:*, zero_points:*, scales:src:grouped, binary:i', () => {
    const src = memory.desc.grouped([10, 64], dt.u8, 4, [2, 64, 3, 64, 0, 64, 5, 64]);
    const dst = memory.desc.grouped([10, 8], dt.f32, 4, [2, 8, 3, 8, 0, 8, 5, 8]);
    const a = new PrimitiveAttr().setScales(ARG.SRC, 3, [1, 32], dt.e8m0).setScales(ARG.WEIGHTS, 7, [1, 32, 2], dt.f8_e4m3).setScales(ARG.DST, 0)
      .setZeroPoints(ARG.SRC, 1, [], dt.u8).setZeroPoints(ARG.WEIGHTS, 5, [], dt.s4);
    a.postOps.appendGlu('glu_swiglu', 'interleaved').appendEltwise('eltwise_relu').appendBinary('binary_mul', memory.desc([4, 1], dt.f32, tag.ab));
    const pd = new matmul.PrimitiveDesc(eng, src, memory.desc([4, 64, 16], dt.s4, tag.abc), dst, a);
    const s = (q: Parameters<typeof pd.queryMd>[0]): string => String(pd.queryMd(q));
    expect(s('scales:src')).toBe('e8m0::blocked:ab::f0 10x2');
    expect(s('scales:src:grouped')).toBe('e8m0::grouped:ab:g4:var_dim0:offs_s32::f0 10x2');
    expect(pd.queryMd('scales:src:grouped')?.grouped?.groupSizes).toEqual([2, 3, 0, 5]);
    expect(s('scales:weights')).toBe('f8_e4m3::blocked:abc::f0 4x2x8');
    expect(s('scales:dst')).toBe('f32::blocked:a::f0 4');
    expect(s('zero_points:src')).toBe('u8::blocked:a::f0 10');
    expect(s('zero_points:src:grouped')).toBe('u8::grouped:a:g4:var_dim0:offs_s32::f0 10');
    expect(s('zero_points:weights')).toBe('s4::blocked:ab::f0 4x16');
    expect(pd.queryMd('zero_points:dst')).toBeUndefined();
    expect(s('binary:2')).toBe('f32::blocked:ab::f0 4x1');
    expect(pd.queryMd('binary:1')).toBeUndefined();
    expect(pd.problem.dstN).toBe(8);
    expect(pd.problem.fusion.binary[0]).toMatchObject({ position: 2, alg: 'binary_mul', perExpert: false, map: { gStride: 1, strides: [0, 0] } });
    expect(pd.problem.fusion.scales.weights?.map).toEqual({ gStride: 0, strides: [16, 8, 1], blocks: [1, 32, 2] });
  });

  it('matmul P#2 and dense: no grouped alternative; plain oneDNN shapes', () => {
    const p2 = new matmul.PrimitiveDesc(eng, memory.desc([10, 8], dt.s8, tag.ab), memory.desc([2, 8, 4], dt.s8, tag.abc), memory.desc([10, 4], dt.s32, tag.ab), new PrimitiveAttr().setScales(ARG.SRC, 1).setGroupedOffsets(ARG.SRC, 2));
    expect(String(p2.queryMd('scales:src'))).toBe('f32::blocked:a::f0 10');
    expect(p2.queryMd('scales:src:grouped')).toBeUndefined();
    const dense = new matmul.PrimitiveDesc(eng, memory.desc([5, 8], dt.f32, tag.ab), memory.desc([8, 6], dt.u4, tag.ab), memory.desc([5, 6], dt.f32, tag.ab), new PrimitiveAttr().setScales(ARG.WEIGHTS, 2).setZeroPoints(ARG.WEIGHTS, 3, [4, 1], dt.u4));
    expect(String(dense.queryMd('scales:weights'))).toBe('f32::blocked:a::f0 6');
    expect(String(dense.queryMd('zero_points:weights'))).toBe('u4::blocked:ab::f0 2x6');
  });

  it('grouped_gemm: per-expert descriptors (runtime rows for per-row values)', () => {
    const a = new PrimitiveAttr().setScales(ARG.MULTIPLE_SRC, 1).setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.bf16).setScales(ARG.MULTIPLE_DST, 0);
    const pd = new grouped_gemm.PrimitiveDesc(eng, [memory.desc([RT, 4], dt.s8, tag.ab), memory.desc([RT, 8], dt.s8, tag.ab)],
      [memory.desc([4, 6], dt.s8, tag.ab), memory.desc([8, 2], dt.s8, tag.ab)], [memory.desc([RT, 6], dt.f32, tag.ab), memory.desc([RT, 2], dt.f32, tag.ab)],
      memory.desc([2], dt.s32, tag.x), a);
    expect(String(pd.queryMd('scales:src', 0))).toBe('f32::blocked:a::f0 *');
    expect(String(pd.queryMd('scales:weights', 0))).toBe('bf16::blocked:a::f0 6');
    expect(String(pd.queryMd('scales:weights', 1))).toBe('bf16::blocked:a::f0 2');
    expect(String(pd.queryMd('scales:dst', 1))).toBe('f32::blocked:a::f0 1');
    expect(pd.queryMd('zero_points:src', 0)).toBeUndefined();
    expect(pd.queryMd('scales:src', 2)).toBeUndefined();
  });
});

describe('Memory.write / read: logical values for every type', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'none' });
  });
  afterAll(() => eng.release());

  it.each([
    ['s4', [-8, -1, 0, 7, 3], [0xf8, 0x70, 0x03]],
    ['u4', [0, 15, 9, 1, 2], [0xf0, 0x19, 0x02]],
    ['f4_e2m1', [6, -0.5, 1, 0, -6], [0x97, 0x02, 0x0f]],
  ] as const)('%s: write encodes and packs two per byte, read decodes; elementCount counts elements', (t, vals, bytes) => {
    const m = Memory.create(memory.desc([5], t, tag.x), eng);
    expect(m.elementCount).toBe(5);
    expect(m.values.length).toBe(3);
    m.write(vals);
    expect(Array.from(m.values)).toEqual(bytes);
    expect(Array.from(m.read())).toEqual(vals);
    m.free();
  });

  it('4-bit writes round (RNE) and saturate; counts are checked in elements', () => {
    const s4 = Memory.create(memory.desc([2, 3], dt.s4, tag.ab), eng);
    s4.write([2.5, 3.5, -9, 100, -0.5, 1.49]);
    expect(Array.from(s4.read())).toEqual([2, 4, -8, 7, 0, 1]);
    expect(() => s4.write([1, 2, 3])).toThrow(/Memory.write: expected 6 values, got 3/);
    const f4 = Memory.create(memory.desc([4], dt.f4_e2m1, tag.x), eng);
    f4.write([0.25, 0.75, 5, 7]);
    expect(Array.from(f4.read())).toEqual([0, 1, 4, 6]);
    [s4, f4].forEach((m) => m.free());
  });

  it('strided 4-bit layouts: padding elements are part of the span', () => {
    const m = Memory.create(memory.desc([2, 3], dt.u4, [4, 1]), eng);
    expect(m.elementCount).toBe(7);
    m.write([1, 2, 3, 0, 4, 5, 6]);
    expect(Array.from(m.read())).toEqual([1, 2, 3, 0, 4, 5, 6]);
    m.free();
  });

  it('8-bit low-precision types take values too (fp8 saturating, e8m0 rounded down)', () => {
    const m = Memory.create(memory.desc([3], dt.f8_e4m3, tag.x), eng).write([1.5, 1000, -0.0625]);
    expect(Array.from(m.read())).toEqual([1.5, 448, -0.0625]);
    const e = Memory.create(memory.desc([3], dt.e8m0, tag.x), eng).write([0.25, 3, 1]);
    expect(Array.from(e.read())).toEqual([0.25, 2, 1]);
    [m, e].forEach((x) => x.free());
  });

  it('integers round half to even (was: half away from zero) and saturate; NaN stores 0', () => {
    const s8 = Memory.create(memory.desc([7], dt.s8, tag.x), eng).write([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300]);
    expect(Array.from(s8.read())).toEqual([0, 2, 2, 0, -2, -2, 127]);
    const u8 = Memory.create(memory.desc([4], dt.u8, tag.x), eng).write([0.5, 254.5, -3, Number.NaN]);
    expect(Array.from(u8.read())).toEqual([0, 254, 0, 0]);
    const s32 = Memory.create(memory.desc([4], dt.s32, tag.x), eng).write([2.5, -3.5, 3e9, -3e9]);
    expect(Array.from(s32.read())).toEqual([2, -4, 2147483647, -2147483648]);
    [s8, u8, s32].forEach((x) => x.free());
  });
});

describe('grouped_gemm.expertViews with 4-bit types', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'none' });
  });
  afterAll(() => eng.release());

  it('even rows: views start at the packed byte of their first row; odd rows are unimplemented', () => {
    const m = Memory.create(memory.desc([5, 4], dt.f4_e2m1, tag.ab), eng).write(Array.from({ length: 20 }, (_, i) => [0, 0.5, 1, 1.5, 2, 3, 4, 6][i % 8]));
    const views = grouped_gemm.expertViews(m, [0, 2, 5]);
    expect(views[1].handles[0]).toBe(m.handles[0] + 4);
    expect(views[1].capacityBytes).toBe(6);
    const odd = Memory.create(memory.desc([4, 3], dt.s4, tag.ab), eng);
    expect(() => grouped_gemm.expertViews(odd, [0, 1, 4])).toThrow(/s4 rows of 3 elements do not start on byte boundaries/);
    [...views, m, odd].forEach((x) => x.free());
  });
});
