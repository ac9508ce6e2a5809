import { describe, expect, it } from 'vitest';
import { RUNTIME_DIM_VAL, RUNTIME_SIZE_VAL, dt, memory, tag, type DataType, type Dims } from '../src/index.js';
import { expectDnnlError } from './helpers.js';

describe('memory.desc (plain descriptors)', () => {
  it('row-major tags give dense strides and sizes', () => {
    const md = memory.desc([4, 37, 19], dt.f32, tag.abc);
    expect(md.format).toBe('blocked');
    expect(md.strides).toEqual([37 * 19, 19, 1]);
    expect(md.getSize()).toBe(4 * 37 * 19 * 4);
    expect(md.bufferCount).toBe(1);
    expect(md.isGrouped).toBe(false);
    expect(md.grouped).toBeUndefined();
    expect(md.formatTag).toBe('abc');
    expect(md.toString()).toBe('f32::blocked:abc::f0 4x37x19');
  });

  it('permuted tags: acb stores [G, N, K]; ba is column-major', () => {
    expect(memory.desc([4, 37, 19], dt.f32, tag.acb).strides).toEqual([37 * 19, 1, 37]);
    expect(memory.desc([37, 19], dt.f32, tag.ba).strides).toEqual([1, 37]);
    expect(memory.desc([37, 19], dt.f32, tag.ba).formatTag).toBe('ba');
    expect(memory.desc([5], dt.f32, tag.x).strides).toEqual([1]);
  });

  it('16-bit and 8-bit types size correctly', () => {
    expect(memory.desc([3, 5], dt.bf16, tag.ab).getSize()).toBe(30);
    expect(memory.desc([3, 5], dt.f16, tag.ab).getSize()).toBe(30);
    expect(memory.desc([3, 5], dt.s8, tag.ab).getSize()).toBe(15);
    expect(memory.desc([3, 5], dt.u8, tag.ab).getSize()).toBe(15);
    expect(memory.desc([3, 5], dt.s32, tag.ab).getSize()).toBe(60);
  });

  it('explicit strides with padding: size is the span, tag is undefined', () => {
    const md = memory.desc([31, 37], dt.f32, [41, 1]);
    expect(md.spanElems).toBe(30 * 41 + 37);
    expect(md.nelems).toBe(31 * 37);
    expect(md.getSize()).toBe((30 * 41 + 37) * 4);
    expect(md.formatTag).toBeUndefined();
  });

  it('explicit dense strides equal the tag', () => {
    expect(memory.desc([31, 37], dt.f32, [37, 1]).equals(memory.desc([31, 37], dt.f32, tag.ab))).toBe(true);
    expect(memory.desc([31, 37], dt.f32, [1, 31]).equals(memory.desc([31, 37], dt.f32, tag.ba))).toBe(true);
    expect(memory.desc([31, 37], dt.f32, tag.ab).equals(memory.desc([31, 37], dt.f32, tag.ba))).toBe(false);
  });

  it('tag.any has no layout and size 0', () => {
    const md = memory.desc([4, 5], dt.f32, tag.any);
    expect(md.format).toBe('any');
    expect(md.getSize()).toBe(0);
    expect(md.formatTag).toBe('any');
  });

  it('runtime dims give RUNTIME_SIZE_VAL', () => {
    const md = memory.desc([RUNTIME_DIM_VAL, 5], dt.f32, tag.ab);
    expect(md.hasRuntimeDims).toBe(true);
    expect(md.getSize()).toBe(RUNTIME_SIZE_VAL);
    expect(md.toString()).toContain('*x5');
  });

  it('a zero dim gives size 0', () => {
    expect(memory.desc([0, 5], dt.f32, tag.ab).getSize()).toBe(0);
  });

  it('memory.dataType / formatTag / Desc aliases are exposed', () => {
    expect(memory.dataType.bf16).toBe('bf16');
    expect(memory.formatTag.acb).toBe('acb');
    expect(memory.desc([2], dt.f32, tag.a)).toBeInstanceOf(memory.Desc);
  });
});

describe('memory.desc: one test per invalid-argument rule', () => {
  const bad = (dims: unknown, dataType: unknown, layout: unknown) => () => memory.desc(dims as Dims, dataType as DataType, layout as string);

  it('dims must be an array', () => {
    expectDnnlError(bad(5, dt.f32, 'a'), 'invalid_arguments', 'memory.desc: dims must be an array');
  });

  it('a format tag or strides is required (a JavaScript caller leaving it out got a TypeError)', () => {
    expectDnnlError(bad([2, 3], dt.f32, undefined), 'invalid_arguments', 'memory.desc: a format tag (e.g. tag.ab, tag.any) or an array of strides is required, got undefined');
    expectDnnlError(bad([2, 3], dt.f32, 7), 'invalid_arguments', 'memory.desc: a format tag (e.g. tag.ab, tag.any) or an array of strides is required, got 7');
  });

  it('number of dims in [1, 12]', () => {
    expectDnnlError(bad([], dt.f32, 'a'), 'invalid_arguments', 'number of dims must be in [1, 12], got 0');
    expectDnnlError(bad(new Array(13).fill(1), dt.f32, 'abcdefghijklm'), 'invalid_arguments', 'number of dims must be in [1, 12], got 13');
  });

  it('dims must be non-negative integers', () => {
    expectDnnlError(bad([3, -1], dt.f32, 'ab'), 'invalid_arguments', 'memory.desc: dims[1] must be a non-negative integer, got -1');
    expectDnnlError(bad([3, Number.NaN], dt.f32, 'ab'), 'invalid_arguments', 'dims[1] must be a non-negative integer, got NaN');
  });

  it('data type must be known', () => {
    expectDnnlError(bad([3, 4], 'fp8', 'ab'), 'invalid_arguments', "memory.desc: unknown data type 'fp8'");
  });

  it('format tag must be a permutation of the dims', () => {
    expectDnnlError(bad([3, 4], dt.f32, 'abc'), 'invalid_arguments', "format tag 'abc' does not match 2 dimension(s)");
    expectDnnlError(bad([3, 4], dt.f32, 'aa'), 'invalid_arguments', "format tag 'aa' does not match 2 dimension(s)");
    expectDnnlError(bad([3, 4], dt.f32, 'ac'), 'invalid_arguments', "format tag 'ac' does not match 2 dimension(s)");
  });

  it('explicit strides need fully known dims', () => {
    expectDnnlError(bad([RUNTIME_DIM_VAL, 4], dt.f32, [4, 1]), 'invalid_arguments', 'explicit strides need fully known dims');
  });

  it('strides must have one entry per dim', () => {
    expectDnnlError(bad([3, 4], dt.f32, [4, 1, 1]), 'invalid_arguments', 'memory.desc: strides must have 2 entries, got 3');
  });

  it('strides must be non-negative integers', () => {
    expectDnnlError(bad([3, 4], dt.f32, [4.5, 1]), 'invalid_arguments', 'strides[0] must be a non-negative integer, got 4.5');
  });

  it('strides must not alias elements', () => {
    expectDnnlError(bad([3, 4], dt.f32, [2, 1]), 'invalid_arguments', 'strides [2,1] make elements of dims [3,4] overlap');
    expectDnnlError(bad([3, 4], dt.f32, [0, 1]), 'invalid_arguments', 'make elements of dims [3,4] overlap');
  });

  it('getSize: buffer 1 exists only for grouped descriptors', () => {
    expectDnnlError(() => memory.desc([3, 4], dt.f32, 'ab').getSize(1), 'invalid_arguments', 'getSize: buffer 1 (offsets) exists only for grouped descriptors');
  });

  it('getSize: buffer index must be 0 or 1', () => {
    expectDnnlError(() => memory.desc.grouped([3, 4], dt.f32, 1, [RUNTIME_DIM_VAL, 4]).getSize(2), 'invalid_arguments', 'getSize: buffer index must be 0 or 1, got 2');
  });
});
