import { describe, expect, it } from 'vitest';
import { offsets } from '../src/index.js';
import { expectDnnlError } from './helpers.js';
import { DISTRIBUTIONS, cumulative, mulberry32, randomRouting } from './workloads.js';

const arr = (a: ArrayLike<number>): number[] => Array.from(a);

describe('offsets converters: round trips', () => {
  const cases: Array<[string, number[]]> = [
    ['G = 1', [7]],
    ['G = 1, empty', [0]],
    ['empty first', [0, 3, 4]],
    ['empty last', [3, 4, 0]],
    ['empty middle', [3, 0, 4]],
    ['all empty', [0, 0, 0, 0]],
    ['all in the first', [9, 0, 0]],
    ['all in the last', [0, 0, 9]],
    ['G = 0', []],
  ];

  it.each(cases)('sizes <-> offsets (%s)', (_n, sizes) => {
    const offs = offsets.fromSizes(sizes);
    expect(offs).toBeInstanceOf(Int32Array);
    expect(arr(offs)).toEqual(cumulative(sizes));
    expect(arr(offsets.toSizes(offs))).toEqual(sizes);
  });

  it.each(cases)('ends <-> offsets (%s)', (_n, sizes) => {
    const ends = cumulative(sizes).slice(1);
    const offs = offsets.fromEnds(ends);
    expect(arr(offs)).toEqual(cumulative(sizes));
    expect(arr(offsets.toEnds(offs))).toEqual(ends);
  });

  it.each(cases.filter(([, s]) => s.length > 0))('starts <-> offsets (%s)', (_n, sizes) => {
    const full = cumulative(sizes);
    const starts = full.slice(0, -1);
    const total = full[full.length - 1];
    const offs = offsets.fromStarts(starts, total);
    expect(arr(offs)).toEqual(full);
    expect(arr(offsets.toStarts(offs))).toEqual(starts);
    expect(offs[offs.length - 1]).toBe(total);
  });

  it('starts with a total past the last start (rows after the last expert are its own)', () => {
    expect(arr(offsets.fromStarts([0, 2, 2], 10))).toEqual([0, 2, 2, 10]);
  });

  it.each(DISTRIBUTIONS)('all three conventions agree for %s (G = 32 and 256)', (_n, gen) => {
    for (const G of [32, 256]) {
      const sizes = gen(G, 101);
      const a = offsets.fromSizes(sizes);
      const b = offsets.fromEnds(offsets.toEnds(a));
      const c = offsets.fromStarts(offsets.toStarts(a), a[G]);
      expect(arr(b)).toEqual(arr(a));
      expect(arr(c)).toEqual(arr(a));
      expect(arr(offsets.toSizes(c))).toEqual(sizes);
    }
  });

  it('random routing round trips', () => {
    const rng = mulberry32(3);
    for (let t = 0; t < 20; t++) {
      const sizes = randomRouting(rng, 1 + Math.floor(rng() * 64), Math.floor(rng() * 500));
      expect(arr(offsets.toSizes(offsets.fromSizes(sizes)))).toEqual(sizes);
    }
  });

  it('converters write into `out` (e.g. a memory offsets view) and return it', () => {
    const out = new Int32Array(4).fill(-7);
    expect(offsets.fromSizes([1, 2, 3], out)).toBe(out);
    expect(arr(out)).toEqual([0, 1, 3, 6]);
    expect(offsets.fromEnds([4, 4, 5], out)).toBe(out);
    expect(arr(out)).toEqual([0, 4, 4, 5]);
    expect(offsets.fromStarts([0, 1, 1], 8, out)).toBe(out);
    expect(arr(out)).toEqual([0, 1, 1, 8]);
  });

  it('an input sharing out\'s buffer (converted in place) is read before out is written', () => {
    // sizes written into the first G entries of an offsets view, then converted in place: was [0, 0, 0, 0]
    const o = new Int32Array([3, 4, 5, 0]);
    expect(Array.from(offsets.fromSizes(o.subarray(0, 3), o))).toEqual([0, 3, 7, 12]);
    const o2 = new Int32Array([0, 3, 4, 5]);
    expect(Array.from(offsets.fromSizes(o2.subarray(1), o2))).toEqual([0, 3, 7, 12]);
    const e = new Int32Array([3, 7, 12, 0]);
    expect(Array.from(offsets.fromEnds(e.subarray(0, 3), e))).toEqual([0, 3, 7, 12]);
    const st = new Int32Array([9, 0, 3, 7]);
    expect(Array.from(offsets.fromStarts(st.subarray(1), 12, st))).toEqual([0, 3, 7, 12]);
  });

  it('accepts plain arrays and typed arrays as input', () => {
    expect(arr(offsets.toSizes(Int32Array.from([0, 2, 5])))).toEqual([2, 3]);
    expect(arr(offsets.fromSizes(Uint8Array.from([2, 3])))).toEqual([0, 2, 5]);
  });

  it('sizes up to 2^31-1 in total are fine', () => {
    expect(arr(offsets.fromSizes([2 ** 30, 2 ** 30 - 1]))).toEqual([0, 2 ** 30, 2 ** 31 - 1]);
  });

  it('validate accepts canonical offsets, with and without a total', () => {
    expect(() => offsets.validate([0, 2, 2, 5])).not.toThrow();
    expect(() => offsets.validate([0, 2, 2, 5], 5)).not.toThrow();
    expect(() => offsets.validate([0, 2, 2, 5], 9)).not.toThrow();
    expect(() => offsets.validate([0])).not.toThrow();
  });
});

describe('offsets converters: invalid input (one test per rule)', () => {
  it('fromSizes: entries must be integers in [0, 2^31-1]', () => {
    expectDnnlError(() => offsets.fromSizes([1, -1]), 'invalid_arguments', 'offsets.fromSizes: sizes[1] must be an integer in [0, 2^31-1], got -1');
    expectDnnlError(() => offsets.fromSizes([1.5]), 'invalid_arguments', 'sizes[0] must be an integer in [0, 2^31-1], got 1.5');
    expectDnnlError(() => offsets.fromSizes([2 ** 31]), 'invalid_arguments', 'sizes[0] must be an integer in [0, 2^31-1]');
    expectDnnlError(() => offsets.fromSizes([Number.NaN]), 'invalid_arguments', 'sizes[0] must be an integer');
  });

  it('fromSizes: the running sum must fit in int32', () => {
    expectDnnlError(() => offsets.fromSizes([2 ** 30, 2 ** 30]), 'invalid_arguments', 'offsets.fromSizes: the sum of sizes exceeds 2^31-1 at sizes[1]');
  });

  it('fromSizes / fromEnds / fromStarts: out must have exactly G + 1 entries', () => {
    for (const n of [3, 5]) {
      const out = new Int32Array(n).fill(9);
      expectDnnlError(() => offsets.fromSizes([1, 2, 3], out), 'invalid_arguments', `offsets.fromSizes: out has ${n} entries, must have exactly 4`);
      expectDnnlError(() => offsets.fromEnds([1, 2, 3], out), 'invalid_arguments', `offsets.fromEnds: out has ${n} entries, must have exactly 4`);
      expectDnnlError(() => offsets.fromStarts([0, 2, 3], 4, out), 'invalid_arguments', `offsets.fromStarts: out has ${n} entries, must have exactly 4`);
      expect(arr(out), 'out untouched').toEqual(new Array<number>(n).fill(9));
    }
  });

  it('fromSizes into a memory offsets view of more groups is refused (no stale total for the matmul)', () => {
    const view = new Int32Array(6); // G = 5 groups
    expectDnnlError(() => offsets.fromSizes([4, 4], view), 'invalid_arguments', 'offsets.fromSizes: out has 6 entries, must have exactly 3');
  });

  it('out must be an Int32Array', () => {
    expectDnnlError(() => offsets.fromSizes([1], [0, 0] as unknown as Int32Array), 'invalid_arguments', 'offsets.fromSizes: out must be an Int32Array');
  });

  it('invalid input leaves `out` untouched', () => {
    const out = Int32Array.from([9, 9, 9, 9]);
    expect(() => offsets.fromSizes([1, -2, 3], out)).toThrow();
    expect(() => offsets.fromEnds([1, 3, 2], out)).toThrow();
    expect(() => offsets.fromStarts([0, 3, 2], 5, out)).toThrow();
    expect(arr(out)).toEqual([9, 9, 9, 9]);
  });

  it('fromEnds: entries must be integers in [0, 2^31-1]', () => {
    expectDnnlError(() => offsets.fromEnds([-3]), 'invalid_arguments', 'offsets.fromEnds: ends[0] must be an integer in [0, 2^31-1], got -3');
  });

  it('fromEnds: ends must be non-decreasing', () => {
    expectDnnlError(() => offsets.fromEnds([4, 6, 5]), 'invalid_arguments', 'offsets.fromEnds: ends must be non-decreasing: ends[2] = 5 < ends[1] = 6');
  });

  it('fromStarts: total must be an integer in [0, 2^31-1]', () => {
    expectDnnlError(() => offsets.fromStarts([0, 1], -1), 'invalid_arguments', 'offsets.fromStarts: total[0] must be an integer in [0, 2^31-1], got -1');
  });

  it('fromStarts: entries must be integers in [0, 2^31-1]', () => {
    expectDnnlError(() => offsets.fromStarts([0, 1.25], 3), 'invalid_arguments', 'starts[1] must be an integer in [0, 2^31-1], got 1.25');
  });

  it('fromStarts: starts[0] must be 0', () => {
    expectDnnlError(() => offsets.fromStarts([1, 2], 3), 'invalid_arguments', 'offsets.fromStarts: starts[0] must be 0, got 1');
  });

  it('fromStarts: starts must be non-decreasing', () => {
    expectDnnlError(() => offsets.fromStarts([0, 3, 2], 5), 'invalid_arguments', 'starts must be non-decreasing: starts[2] = 2 < starts[1] = 3');
  });

  it('fromStarts: the last start must not exceed the total', () => {
    expectDnnlError(() => offsets.fromStarts([0, 3, 6], 5), 'invalid_arguments', 'offsets.fromStarts: starts[2] = 6 exceeds total 5');
  });

  it('fromStarts: with no groups the total must be 0 (the result must be valid offsets)', () => {
    expect(arr(offsets.fromStarts([], 0))).toEqual([0]);
    expectDnnlError(() => offsets.fromStarts([], 5), 'invalid_arguments', 'offsets.fromStarts: with no starts (G = 0) total must be 0, got 5');
  });

  it('validate: needs at least one entry', () => {
    expectDnnlError(() => offsets.validate([]), 'invalid_arguments', 'offsets: needs at least one entry');
  });

  it('validate: offsets[0] must be 0', () => {
    expectDnnlError(() => offsets.validate([1, 2]), 'invalid_arguments', 'offsets[0] must be 0, got 1');
  });

  it('validate: entries must be integers in [0, 2^31-1]', () => {
    expectDnnlError(() => offsets.validate([0, 2.5]), 'invalid_arguments', 'offsets[1] must be an integer in [0, 2^31-1], got 2.5');
  });

  it('validate: offsets must be non-decreasing', () => {
    expectDnnlError(() => offsets.validate([0, 4, 3]), 'invalid_arguments', 'offsets must be non-decreasing: offsets[2] = 3 < offsets[1] = 4');
  });

  it('validate: the last offset must not exceed the total', () => {
    expectDnnlError(() => offsets.validate([0, 4, 6], 5), 'invalid_arguments', 'offsets[2] = 6 exceeds the total extent 5');
  });

  it('validate: a custom name appears in the message', () => {
    expectDnnlError(() => offsets.validate([3], undefined, 'src offsets'), 'invalid_arguments', 'src offsets[0] must be 0, got 3');
  });

  it('toSizes / toEnds / toStarts validate their input and name themselves', () => {
    expectDnnlError(() => offsets.toSizes([0, 3, 1]), 'invalid_arguments', 'offsets.toSizes: offsets must be non-decreasing');
    expectDnnlError(() => offsets.toEnds([2, 3]), 'invalid_arguments', 'offsets.toEnds: offsets[0] must be 0, got 2');
    expectDnnlError(() => offsets.toStarts([]), 'invalid_arguments', 'offsets.toStarts: offsets: needs at least one entry');
    expectDnnlError(() => offsets.toSizes([0, -1]), 'invalid_arguments', 'offsets.toSizes: offsets[1] must be an integer');
  });
});
