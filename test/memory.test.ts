import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Engine, Memory, RUNTIME_DIM_VAL, bf16ToF32, dt, f16ToF32, f32ToBf16, f32ToF16, memory, tag,
} from '../src/index.js';
import { expectDnnlError } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
let eng: Engine;
beforeAll(async () => {
  eng = await Engine.create({ threads: 1 });
});
afterAll(() => eng.release());

describe('Memory: creation and buffers', () => {
  it('plain desc: one 64-byte aligned buffer of getSize() bytes', () => {
    const md = memory.desc([5, 7], dt.f32, tag.ab);
    const m = Memory.create(md, eng);
    expect(m.handles).toHaveLength(1);
    expect(m.handles[0] % 64).toBe(0);
    expect(m.values).toBeInstanceOf(Float32Array);
    expect(m.values.length).toBe(35);
    expect(m.bytes().length).toBe(140);
    expect(m.desc).toBe(md);
    expect(m.engine).toBe(eng);
    m.free();
  });

  it('grouped desc: two buffers (values, offsets), offsets has G + 1 int32 entries', () => {
    const md = memory.desc.grouped([101, 37], dt.f32, 32, [RT, 37]);
    const m = Memory.create(md, eng);
    expect(m.handles).toHaveLength(2);
    expect(m.handles[0]).not.toBe(m.handles[1]);
    expect(m.offsets).toBeInstanceOf(Int32Array);
    expect(m.offsets.length).toBe(33);
    expect(m.values.length).toBe(101 * 37);
    expect(m.bytes(1).length).toBe(33 * 4);
    expect(m.offsets.byteOffset).toBe(m.handles[1]);
    m.free();
  });

  it('per-group desc fills its allocated offsets from the group sizes', () => {
    const md = memory.desc.grouped([10, 4], dt.f32, 4, [3, 4, 0, 4, 7, 4, 0, 4]);
    const m = Memory.create(md, eng);
    expect([...m.offsets]).toEqual([0, 3, 3, 10, 10]);
    m.free();
  });

  it('shared host-known desc fills offsets too', () => {
    const m = Memory.create(memory.desc.grouped([12, 2], dt.f32, 3, [4, 2]), eng);
    expect([...m.offsets]).toEqual([0, 4, 8, 12]);
    m.free();
  });

  it('per-group desc with a caller offsets handle leaves that buffer alone', () => {
    const md = memory.desc.grouped([10, 4], dt.f32, 2, [3, 4, 7, 4]);
    const owner = Memory.create(md, eng);
    owner.offsets.set([0, 5, 10]);
    const m = Memory.create(md, eng, [undefined, owner.handles[1]]);
    expect(m.handles[1]).toBe(owner.handles[1]);
    expect([...m.offsets]).toEqual([0, 5, 10]);
    m.free();
    owner.free();
  });

  it('a single handle for a grouped desc wraps the values and allocates the offsets', () => {
    const md = memory.desc.grouped([6, 2], dt.f32, 2, [RT, 2]);
    const owner = Memory.create(memory.desc([6, 2], dt.f32, tag.ab), eng);
    const m = Memory.create(md, eng, owner.handles[0]);
    expect(m.handles[0]).toBe(owner.handles[0]);
    expect(m.handles[1] % 64).toBe(0);
    m.free();
    owner.free();
  });

  it('handles reuse: two memory objects over one buffer see each other\'s writes', () => {
    const md = memory.desc([4, 4], dt.f32, tag.ab);
    const a = Memory.create(md, eng);
    const b = Memory.create(md, eng, a.handles[0]);
    a.write(Array.from({ length: 16 }, (_, i) => i));
    expect([...b.read()]).toEqual(Array.from({ length: 16 }, (_, i) => i));
    b.values[3] = -1;
    expect(a.values[3]).toBe(-1);
    b.free();
    a.free();
  });

  it('a handle may point inside a larger live allocation (sub-buffer)', () => {
    const h = eng.alloc(4096);
    const m = Memory.create(memory.desc([16], dt.f32, tag.x), eng, h + 1024);
    m.write(new Array<number>(16).fill(2));
    expect(new Float32Array(eng.buffer, h + 1024, 16).every((v) => v === 2)).toBe(true);
    m.free();
    eng.free(h);
  });

  it('free() of a wrapper does not release the borrowed buffer; free() twice is a no-op', () => {
    const md = memory.desc([8], dt.f32, tag.x);
    const owner = Memory.create(md, eng);
    const used = eng.heap.usedBytes;
    const w = Memory.create(md, eng, owner.handles[0]);
    w.free();
    w.free();
    expect(w.isFreed).toBe(true);
    expect(eng.heap.usedBytes).toBe(used);
    expect(eng.heap.isLive(owner.handles[0])).toBe(true);
    owner.free();
    expect(eng.heap.isLive(owner.handles[0])).toBe(false);
  });

  it('free() releases both owned buffers of a grouped memory', () => {
    const before = eng.heap.usedBytes;
    const m = Memory.create(memory.desc.grouped([9, 3], dt.f32, 3, [RT, 3]), eng);
    expect(eng.heap.usedBytes).toBeGreaterThan(before);
    m.free();
    expect(eng.heap.usedBytes).toBe(before);
  });

  it('a failing create releases what it had already allocated', () => {
    const before = eng.heap.usedBytes;
    const md = memory.desc.grouped([9, 3], dt.f32, 3, [RT, 3]);
    expect(() => Memory.create(md, eng, [undefined, 0x7fff0000])).toThrow(/does not lie inside a live allocation/);
    expect(eng.heap.usedBytes).toBe(before);
  });

  it('a runtime-size desc can wrap a caller buffer', () => {
    const h = eng.alloc(256);
    const m = Memory.create(memory.desc([RT, 4], dt.f32, tag.ab), eng, h);
    expect(m.handles[0]).toBe(h);
    m.free();
    eng.free(h);
  });

  it('zero-element memory gets a (minimum) allocation and an empty view', () => {
    const m = Memory.create(memory.desc.grouped([0, 5], dt.f32, 2, [RT, 5]), eng);
    expect(m.values.length).toBe(0);
    expect(m.offsets.length).toBe(3);
    m.free();
  });
});

describe('Memory: write / read conversions', () => {
  it('f32 round trips exactly', () => {
    const m = Memory.create(memory.desc([3], dt.f32, tag.x), eng);
    m.write([1.5, -0.1, 3e38]);
    expect([...m.read()]).toEqual([1.5, Math.fround(-0.1), Math.fround(3e38)]);
    m.free();
  });

  it('bf16 stores round-to-nearest-even bits and decodes them', () => {
    const m = Memory.create(memory.desc([4], dt.bf16, tag.x), eng);
    expect(m.values).toBeInstanceOf(Uint16Array);
    m.write([1, -2.5, 1 + 2 ** -8, 1 + 3 * 2 ** -8]);
    expect([...m.values]).toEqual([0x3f80, 0xc020, 0x3f80, 0x3f82]);
    expect([...m.read()]).toEqual([1, -2.5, 1, 1 + 2 ** -6]);
    m.free();
  });

  it('f16 stores round-to-nearest-even bits and decodes them', () => {
    const m = Memory.create(memory.desc([4], dt.f16, tag.x), eng);
    m.write([1, -2, 65504, 2 ** -24]);
    expect([...m.values]).toEqual([0x3c00, 0xc000, 0x7bff, 0x0001]);
    expect([...m.read()]).toEqual([1, -2, 65504, 2 ** -24]);
    m.free();
  });

  it('s8 / u8 / s32 round and saturate', () => {
    const s8 = Memory.create(memory.desc([4], dt.s8, tag.x), eng);
    s8.write([1.4, -200, 200, -1.6]);
    expect([...s8.read()]).toEqual([1, -128, 127, -2]);
    const u8 = Memory.create(memory.desc([3], dt.u8, tag.x), eng);
    u8.write([-3, 300, 7.6]);
    expect([...u8.read()]).toEqual([0, 255, 8]);
    const s32 = Memory.create(memory.desc([2], dt.s32, tag.x), eng);
    s32.write([7, -9]);
    expect([...s32.read()]).toEqual([7, -9]);
    [s8, u8, s32].forEach((m) => m.free());
  });

  it('exported converters agree with the stored bits', () => {
    expect(f32ToBf16(1)).toBe(0x3f80);
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(Number.isNaN(bf16ToF32(f32ToBf16(Number.NaN)))).toBe(true);
    expect(f32ToF16(1e6)).toBe(0x7c00);
    expect(f16ToF32(0x7c00)).toBe(Infinity);
    expect(f16ToF32(f32ToF16(-0.333251953125))).toBe(-0.333251953125);
    expect(f32ToF16(2 ** -26)).toBe(0);
  });

  it('write and read cover the whole span, padding included', () => {
    const m = Memory.create(memory.desc([2, 3], dt.f32, [5, 1]), eng);
    expect(m.values.length).toBe(8);
    m.write([0, 1, 2, 9, 9, 3, 4, 5]);
    expect([...m.read()]).toEqual([0, 1, 2, 9, 9, 3, 4, 5]);
    m.free();
  });
  it('read returns the natural array of each data type, decoded values for the float codes', () => {
    const cases: [keyof typeof dt, number[], new (n: number) => ArrayLike<number>][] = [
      ['f32', [1.5, -0.25], Float32Array], ['s32', [7, -2147483648], Int32Array], ['s8', [-128, 127], Int8Array],
      ['u8', [0, 255], Uint8Array], ['s4', [-8, 7, 3], Int8Array], ['u4', [15, 0, 9], Uint8Array],
      ['bf16', [1.5, -2], Float32Array], ['f16', [65504, 2 ** -24], Float32Array], ['f8_e4m3', [448, -0.015625], Float32Array],
      ['f8_e5m2', [57344, 2 ** -16], Float32Array], ['f4_e2m1', [6, -0.5, 1], Float32Array], ['e8m0', [2 ** -127, 2 ** 127], Float32Array],
    ];
    for (const [t, vals, Want] of cases) {
      const m = Memory.create(memory.desc([vals.length], dt[t], tag.x), eng);
      m.write(vals);
      const r = m.read();
      expect(r, t).toBeInstanceOf(Want);
      expect([...r], t).toEqual(vals);
      r[0] = 3; // a copy: the memory keeps its values
      expect([...m.read()], t).toEqual(vals);
      m.free();
    }
  });
});

describe('Memory: one test per invalid-argument rule', () => {
  it('cannot create memory for a tag.any descriptor', () => {
    expectDnnlError(() => Memory.create(memory.desc([2, 2], dt.f32, tag.any), eng), 'invalid_arguments', "Memory.create: cannot create memory for a 'tag.any' descriptor");
  });

  it('no more handles than buffers', () => {
    const h = eng.alloc(64);
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.x), eng, [h, h]), 'invalid_arguments', 'Memory.create: 1 buffer(s) expected, got 2 handles');
    expectDnnlError(() => Memory.create(memory.desc.grouped([4, 1], dt.f32, 1, [RT, 1]), eng, [h, h, h]), 'invalid_arguments', '2 buffer(s) expected, got 3 handles');
    eng.free(h);
  });

  it('a runtime-size buffer needs a handle', () => {
    expectDnnlError(() => Memory.create(memory.desc([RT, 4], dt.f32, tag.ab), eng), 'invalid_arguments', 'Memory.create: buffer 0 size depends on runtime dims; pass a handle');
  });

  it('a handle must be a positive integer address', () => {
    const md = memory.desc([4], dt.f32, tag.x);
    expectDnnlError(() => Memory.create(md, eng, 0), 'invalid_arguments', 'Memory.create: handle 0 must be a positive heap address, got 0');
    expectDnnlError(() => Memory.create(md, eng, -64), 'invalid_arguments', 'handle 0 must be a positive heap address, got -64');
    expectDnnlError(() => Memory.create(md, eng, 64.5), 'invalid_arguments', 'handle 0 must be a positive heap address, got 64.5');
    const g = memory.desc.grouped([4, 1], dt.f32, 2, [RT, 1]);
    expectDnnlError(() => Memory.create(g, eng, [undefined, Number.NaN]), 'invalid_arguments', 'handle 1 must be a positive heap address, got NaN');
  });

  it('a handle must be aligned to its element size', () => {
    const h = eng.alloc(256);
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.x), eng, h + 2), 'invalid_arguments', 'must be aligned to 4 bytes');
    expectDnnlError(() => Memory.create(memory.desc([4], dt.bf16, tag.x), eng, h + 1), 'invalid_arguments', 'must be aligned to 2 bytes');
    expect(() => Memory.create(memory.desc([4], dt.bf16, tag.x), eng, h + 2).free()).not.toThrow();
    expect(() => Memory.create(memory.desc([4], dt.s8, tag.x), eng, h + 3).free()).not.toThrow();
    const g = memory.desc.grouped([4, 1], dt.s8, 2, [RT, 1]);
    expectDnnlError(() => Memory.create(g, eng, [h + 1, h + 66]), 'invalid_arguments', 'handle 1 (0x');
    expectDnnlError(() => Memory.create(g, eng, [h + 1, h + 66]), 'invalid_arguments', 'must be aligned to 4 bytes');
    eng.free(h);
  });

  it('a handle must lie inside a live allocation of this engine', () => {
    const md = memory.desc([16], dt.f32, tag.x);
    expectDnnlError(() => Memory.create(md, eng, 0x7ff00000), 'invalid_arguments', 'does not lie inside a live allocation of this engine');
    // Below the heap base (reserved for kernel statics).
    expectDnnlError(() => Memory.create(md, eng, 64), 'invalid_arguments', 'handle 0 [0x40, +64) does not lie inside a live allocation');
  });

  it('the buffer must fit inside the allocation the handle points into', () => {
    const h = eng.alloc(64);
    expectDnnlError(() => Memory.create(memory.desc([17], dt.f32, tag.x), eng, h), 'invalid_arguments', '+68) does not lie inside a live allocation');
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.x), eng, h + 56), 'invalid_arguments', 'does not lie inside a live allocation');
    expect(() => Memory.create(memory.desc([16], dt.f32, tag.x), eng, h).free()).not.toThrow();
    eng.free(h);
  });

  it('a freed allocation is not a valid handle', () => {
    const h = eng.alloc(64);
    eng.free(h);
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.x), eng, h), 'invalid_arguments', 'does not lie inside a live allocation');
  });

  it('a handle from another engine is rejected', async () => {
    const other = await Engine.create({ threads: 1 });
    const far = other.alloc(8 << 20); // reaches beyond anything this test file allocates in `eng`
    expectDnnlError(() => Memory.create(memory.desc([4], dt.f32, tag.x), eng, far + (6 << 20)), 'invalid_arguments', 'does not lie inside a live allocation of this engine');
    other.release();
  });

  it('use after free: values, offsets, bytes, read and write', () => {
    const m = Memory.create(memory.desc.grouped([4, 1], dt.f32, 2, [RT, 1]), eng);
    m.free();
    expectDnnlError(() => m.values, 'invalid_arguments', 'Memory.values: memory object used after free()');
    expectDnnlError(() => m.offsets, 'invalid_arguments', 'Memory.offsets: memory object used after free()');
    expectDnnlError(() => m.bytes(), 'invalid_arguments', 'Memory.bytes: memory object used after free()');
    expectDnnlError(() => m.read(), 'invalid_arguments', 'used after free()');
    expectDnnlError(() => m.write([1, 2, 3, 4]), 'invalid_arguments', 'used after free()');
  });

  it('offsets exist only for grouped memory', () => {
    const m = Memory.create(memory.desc([4], dt.f32, tag.x), eng);
    expectDnnlError(() => m.offsets, 'invalid_arguments', 'Memory.offsets: only grouped memory has an offsets buffer');
    expectDnnlError(() => m.bytes(1), 'invalid_arguments', 'getSize: buffer 1 (offsets) exists only for grouped descriptors');
    m.free();
  });

  it('bytes() of a runtime-size buffer is unknown', () => {
    const h = eng.alloc(256);
    const m = Memory.create(memory.desc([RT, 4], dt.f32, tag.ab), eng, h);
    expectDnnlError(() => m.bytes(), 'invalid_arguments', 'Memory.bytes: size depends on runtime dims');
    m.free();
    eng.free(h);
  });

  it('values (and read/write) of a runtime-size buffer are unknown', () => {
    const h = eng.alloc(256);
    const m = Memory.create(memory.desc([RT, 4], dt.f32, tag.ab), eng, h);
    expectDnnlError(() => m.values, 'invalid_arguments', 'Memory.values: size depends on runtime dims');
    expectDnnlError(() => m.read(), 'invalid_arguments', 'size depends on runtime dims');
    m.free();
    eng.free(h);
  });

  it('engine free of an already freed block is a double free', () => {
    const h = eng.alloc(64);
    eng.free(h);
    expectDnnlError(() => eng.free(h), 'invalid_arguments', `free: 0x${h.toString(16)} is not a live allocation of this engine`);
  });

  it('write needs exactly the span length', () => {
    const m = Memory.create(memory.desc([3, 4], dt.f32, tag.ab), eng);
    expectDnnlError(() => m.write(new Array<number>(11).fill(0)), 'invalid_arguments', 'Memory.write: expected 12 values, got 11');
    m.free();
  });
});
