import { describe, expect, it } from 'vitest';
import { MemoryDesc, RUNTIME_DIM_VAL, dt, memory, type DataType, type Dims } from '../src/index.js';
import { expectDnnlError } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
const grouped = memory.desc.grouped;

describe('memory.desc.grouped: valid descriptors', () => {
  it('shared [RUNTIME, K]: variable rows (the RFC src/dst)', () => {
    const md = grouped([101, 37], dt.f32, 32, [RT, 37]);
    expect(md).toBeInstanceOf(MemoryDesc);
    expect(md.isGrouped).toBe(true);
    expect(md.format).toBe('grouped');
    expect(md.dims).toEqual([101, 37]);
    expect(md.dataType).toBe('f32');
    expect(md.strides).toEqual([37, 1]);
    expect(md.grouped).toEqual({ groupCount: 32, variableDim: 0, groupSizes: undefined, offsetsDt: 's32' });
    expect(md.bufferCount).toBe(2);
    expect(md.hasRuntimeDims).toBe(false);
    expect(md.nelems).toBe(101 * 37);
    expect(md.getSize(0)).toBe(101 * 37 * 4);
    expect(md.getSize(1)).toBe(33 * 4);
    expect(md.getSize()).toBe(md.getSize(0));
    expect(md.formatTag).toBe('ab');
    expect(md.toString()).toBe('f32::grouped:ab:g32:var_dim0:offs_s32::f0 101x37');
  });

  it('shared [M, RUNTIME]: variable columns (the variable-K src)', () => {
    const md = grouped([7, 101], dt.bf16, 8, [7, RT]);
    expect(md.grouped?.variableDim).toBe(1);
    expect(md.grouped?.groupSizes).toBeUndefined();
    expect(md.getSize(0)).toBe(7 * 101 * 2);
    expect(md.getSize(1)).toBe(9 * 4);
    expect(md.toString()).toContain('var_dim1');
  });

  it('1D [total_M] with [RUNTIME] (per-row scales)', () => {
    const md = grouped([101], dt.f32, 4, [RT]);
    expect(md.grouped?.variableDim).toBe(0);
    expect(md.strides).toEqual([1]);
    expect(md.getSize(0)).toBe(404);
  });

  it('offsets data type defaults to s32 and s32 is accepted explicitly', () => {
    expect(grouped([4, 2], dt.f32, 2, [RT, 2]).grouped?.offsetsDt).toBe('s32');
    expect(grouped([4, 2], dt.f32, 2, [RT, 2], dt.s32).grouped?.offsetsDt).toBe('s32');
  });

  it('shared host-known uniform groups: [M, K] x G partitions [G*M, K]', () => {
    const md = grouped([12, 5], dt.f32, 3, [4, 5]);
    expect(md.grouped?.variableDim).toBe(0);
    expect(md.grouped?.groupSizes).toEqual([4, 4, 4]);
  });

  it('shared host-known uniform groups along columns', () => {
    const md = grouped([5, 12], dt.f32, 3, [5, 4]);
    expect(md.grouped?.variableDim).toBe(1);
    expect(md.grouped?.groupSizes).toEqual([4, 4, 4]);
  });

  it('per-group [M0, K, M1, K, ...] with an empty group', () => {
    const md = grouped([10, 4], dt.f32, 3, [3, 4, 0, 4, 7, 4]);
    expect(md.grouped?.variableDim).toBe(0);
    expect(md.grouped?.groupSizes).toEqual([3, 0, 7]);
  });

  it('per-group along columns [M, K0, M, K1, ...]', () => {
    const md = grouped([4, 10], dt.f32, 3, [4, 3, 4, 0, 4, 7]);
    expect(md.grouped?.variableDim).toBe(1);
    expect(md.grouped?.groupSizes).toEqual([3, 0, 7]);
  });

  it('G = 1 with known dims is the per-group form', () => {
    const md = grouped([5, 3], dt.f32, 1, [5, 3]);
    expect(md.grouped?.groupSizes).toEqual([5]);
    expect(md.grouped?.variableDim).toBe(0);
  });

  it('G = 1 with a runtime entry is the shared form', () => {
    expect(grouped([5, 3], dt.f32, 1, [RT, 3]).grouped?.groupSizes).toBeUndefined();
  });

  it('G = 256 with more groups than rows', () => {
    const md = grouped([101, 37], dt.f32, 256, [RT, 37]);
    expect(md.getSize(1)).toBe(257 * 4);
  });

  it('zero total rows', () => {
    const md = grouped([0, 37], dt.f32, 4, [RT, 37]);
    expect(md.getSize(0)).toBe(0);
    expect(md.spanElems).toBe(0);
  });

  it('explicit padded strides: size covers the padding', () => {
    const md = grouped([101, 37], dt.f32, 8, [RT, 37], dt.s32, [40, 1]);
    expect(md.strides).toEqual([40, 1]);
    expect(md.spanElems).toBe(100 * 40 + 37);
    expect(md.getSize(0)).toBe((100 * 40 + 37) * 4);
    expect(md.formatTag).toBeUndefined();
    expect(md.toString()).toContain('strides_40_1');
  });

  it('equals compares dims, type, strides and grouping', () => {
    const a = grouped([10, 4], dt.f32, 2, [RT, 4]);
    expect(a.equals(grouped([10, 4], dt.f32, 2, [RT, 4]))).toBe(true);
    expect(a.equals(grouped([10, 4], dt.f32, 2, [RT, 4], dt.s32, [4, 1]))).toBe(true);
    expect(a.equals(grouped([10, 4], dt.f32, 5, [RT, 4]))).toBe(false);
    expect(a.equals(grouped([10, 4], dt.bf16, 2, [RT, 4]))).toBe(false);
    expect(a.equals(grouped([10, 4], dt.f32, 2, [RT, 4], dt.s32, [5, 1]))).toBe(false);
    expect(a.equals(grouped([10, 4], dt.f32, 2, [5, 4, 5, 4]))).toBe(false);
    expect(a.equals(memory.desc([10, 4], dt.f32, 'ab'))).toBe(false);
    const p = grouped([10, 4], dt.f32, 2, [3, 4, 7, 4]);
    expect(p.equals(grouped([10, 4], dt.f32, 2, [3, 4, 7, 4]))).toBe(true);
    expect(p.equals(grouped([10, 4], dt.f32, 2, [7, 4, 3, 4]))).toBe(false);
  });

  it('is immutable, and does not alias the caller arrays', () => {
    const dims = [10, 4];
    const gd = [3, 4, 7, 4];
    const md = grouped(dims, dt.f32, 2, gd);
    dims[0] = 99;
    gd[0] = 99;
    expect(md.dims).toEqual([10, 4]);
    expect(md.grouped?.groupSizes).toEqual([3, 7]);
    expect(Object.isFrozen(md)).toBe(true);
    expect(Object.isFrozen(md.dims)).toBe(true);
    expect(Object.isFrozen(md.grouped?.groupSizes)).toBe(true);
  });
});

describe('memory.desc.grouped: one test per invalid-argument rule', () => {
  const bad = (dims: unknown, dataType: unknown, g: number, gd: unknown, offsDt?: unknown, strides?: Dims) =>
    () => grouped(dims as Dims, dataType as DataType, g, gd as Dims, offsDt as DataType | undefined, strides);

  it('dims must be an array', () => {
    expectDnnlError(bad('10x4', dt.f32, 2, [RT, 4]), 'invalid_arguments', 'memory.desc.grouped: dims must be an array');
  });

  it('number of dims in [1, 12]', () => {
    expectDnnlError(bad([], dt.f32, 2, [RT, 4]), 'invalid_arguments', 'number of dims must be in [1, 12], got 0');
  });

  it('dims must not be RUNTIME_DIM_VAL (the total is known at creation)', () => {
    expectDnnlError(bad([RT, 4], dt.f32, 2, [RT, 4]), 'invalid_arguments', 'dims[0] must not be RUNTIME_DIM_VAL here');
  });

  it('dims must be non-negative integers', () => {
    expectDnnlError(bad([10, -4], dt.f32, 2, [RT, 4]), 'invalid_arguments', 'dims[1] must be a non-negative integer, got -4');
    expectDnnlError(bad([10.5, 4], dt.f32, 2, [RT, 4]), 'invalid_arguments', 'dims[0] must be a non-negative integer, got 10.5');
  });

  it('data type must be known', () => {
    expectDnnlError(bad([10, 4], 'f64', 2, [RT, 4]), 'invalid_arguments', "memory.desc.grouped: unknown data type 'f64'");
    expectDnnlError(bad([10, 4], 'undef', 2, [RT, 4]), 'invalid_arguments', "unknown data type 'undef'");
  });

  it('offsets data type must be known', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, 4], 'i64'), 'invalid_arguments', "offsetsDt: unknown data type 'i64'");
  });

  it('dims must have 1 or 2 entries', () => {
    expectDnnlError(bad([2, 3, 4], dt.f32, 2, [RT, 3, 4]), 'invalid_arguments', 'dims must have 1 or 2 entries, got 3');
  });

  it('groupCount must be a positive integer', () => {
    expectDnnlError(bad([10, 4], dt.f32, 0, [RT, 4]), 'invalid_arguments', 'groupCount must be a positive integer, got 0');
    expectDnnlError(bad([10, 4], dt.f32, -2, [RT, 4]), 'invalid_arguments', 'groupCount must be a positive integer, got -2');
    expectDnnlError(bad([10, 4], dt.f32, 1.5, [RT, 4]), 'invalid_arguments', 'groupCount must be a positive integer, got 1.5');
  });

  it('groupCount must fit in int32', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2 ** 31, [RT, 4]), 'invalid_arguments', 'groupCount must fit in int32');
  });

  it('groupedDims must be an array', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, 4), 'invalid_arguments', 'groupedDims must be an array');
  });

  it('groupedDims must have nd (shared) or nd * G (per group) entries', () => {
    expectDnnlError(bad([10, 4], dt.f32, 3, [RT, 4, 4]), 'invalid_arguments', 'groupedDims must have 2 (shared) or 6 (per group) entries, got 3');
  });

  it('offsets data type other than s32 is unimplemented', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, 4], dt.s8), 'unimplemented', 'offsetsDt must be s32, got s8');
  });

  it('dims must fit in int32 offsets', () => {
    expectDnnlError(bad([2 ** 31, 1], dt.f32, 2, [RT, 1]), 'invalid_arguments', 'dims must fit in int32 offsets');
  });

  it('strides must have one entry per dim', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, 4], dt.s32, [4]), 'invalid_arguments', 'memory.desc.grouped: strides must have 2 entries, got 1');
  });

  it('strides must be non-negative integers', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, 4], dt.s32, [4, -1]), 'invalid_arguments', 'strides[1] must be a non-negative integer, got -1');
  });

  it('strides must not make elements overlap (row stride < K)', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, 4], dt.s32, [3, 1]), 'invalid_arguments', 'strides [3,1] make elements of dims [10,4] overlap');
  });

  it('shared: at most one RUNTIME_DIM_VAL entry', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, RT]), 'invalid_arguments', 'at most one shared groupedDims entry may be RUNTIME_DIM_VAL');
  });

  it('shared: entries are non-negative integers or RUNTIME_DIM_VAL', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, -4]), 'invalid_arguments', 'groupedDims[1] must be a non-negative integer or RUNTIME_DIM_VAL, got -4');
  });

  it('shared: the fixed entries must equal dims', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [RT, 5]), 'invalid_arguments', 'groupedDims[1] = 5 must equal dims[1] = 4 (only dim 0 varies)');
  });

  it('shared, host-known: G groups of groupedDims must partition dims', () => {
    expectDnnlError(bad([10, 4], dt.f32, 3, [3, 4]), 'invalid_arguments', 'shared groupedDims [3,4] x 3 groups do not partition dims [10,4]');
  });

  it('per-group: entries must be non-negative integers (no RUNTIME_DIM_VAL)', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [3, 4, RT, 4]), 'invalid_arguments', 'per-group groupedDims[2] must be a non-negative integer');
  });

  it('per-group: sizes must sum to the total', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [3, 4, 6, 4]), 'invalid_arguments', 'per-group groupedDims must keep all dims but one equal to dims [10,4]');
  });

  it('per-group: the fixed dim must match dims in every group', () => {
    expectDnnlError(bad([10, 4], dt.f32, 2, [3, 4, 7, 5]), 'invalid_arguments', 'per-group groupedDims must keep all dims but one equal');
  });
});
