import { describe, expect, it } from 'vitest';
import {
  TOL_BF16, TOL_F32, assertClose, mat, matmulF64, mismatches, refDense, refGroupedK, refGroupedM,
} from './reference.js';
import { mulberry32, randomF32 } from './workloads.js';

describe('reference (self-checks of the oracle)', () => {
  it('matmulF64 computes a hand-checked 2x3 * 3x2 product and its magnitude', () => {
    const a = mat(2, 3, (r, c) => [[1, -2, 3], [0, 4, -1]][r][c]);
    const b = mat(3, 2, (r, c) => [[2, 1], [1, -1], [0, 5]][r][c]);
    const { value, mag } = matmulF64(a, b);
    expect([...value.data]).toEqual([0, 18, 4, -9]);
    expect([...mag.data]).toEqual([4, 18, 4, 9]);
  });

  it('refGroupedM uses expert g weights for rows offs[g]..offs[g+1] and skips empty experts', () => {
    // G = 3, K = 1, N = 1: y[r] = x[r] * w[g(r)].
    const x = Float64Array.from([1, 2, 3, 4]);
    const w = Float64Array.from([10, 100, 1000]);
    const r = refGroupedM(x, w, [1, 0, 3], 1, 1);
    expect([...r.value]).toEqual([10, 2000, 3000, 4000]);
  });

  it('refGroupedM adds a broadcast bias and applies post-ops in order', () => {
    const x = Float64Array.from([1, -3]);
    const w = Float64Array.from([1, 1]);
    const r = refGroupedM(x, w, [1, 1], 1, 1, {
      bias: { dims: [2, 1], data: Float64Array.from([0.5, -0.5]) },
      postOps: [{ kind: 'relu', alpha: 0.1 }, { kind: 'sum', scale: 2 }],
      prevDst: Float64Array.from([1, 1]),
    });
    expect(r.value[0]).toBeCloseTo(1.5 + 2, 12);
    expect(r.value[1]).toBeCloseTo(-0.35 + 2, 12);
  });

  it('refGroupedK contracts each group over its own columns; empty groups give zeros plus bias', () => {
    // M = 1, N = 1, columns [a | b c]: group 0 = x0*w0, group 1 empty, group 2 = x1*w1 + x2*w2.
    const x = Float64Array.from([2, 3, 4]);
    const w = Float64Array.from([5, 6, 7]);
    const r = refGroupedK(x, w, [1, 0, 2], 1, 1, { bias: { dims: [1, 1, 1], data: Float64Array.from([0.25]) } });
    expect([...r.value]).toEqual([10.25, 0.25, 46.25]);
  });

  it('refDense broadcasts batch dims of extent 1', () => {
    const x = Float64Array.from([1, 2]); // [1, 1, 2]
    const w = Float64Array.from([1, 1, 2, 2, 3, 3]); // [3, 2, 1]
    const r = refDense(x, [1, 1, 2], w, [3, 2, 1]);
    expect(r.dims).toEqual([3, 1, 1]);
    expect([...r.value]).toEqual([3, 6, 9]);
  });

  it('the comparator accepts the exact result and f32 rounding of it', () => {
    const rng = mulberry32(7);
    const a = mat(5, 37, () => rng() * 2 - 1), b = mat(37, 19, () => rng() * 2 - 1);
    const c = matmulF64(a, b);
    const ref = { value: c.value.data, mag: c.mag.data };
    expect(mismatches(c.value.data, ref, TOL_F32)).toEqual([]);
    expect(mismatches(Float32Array.from(c.value.data), ref, TOL_F32)).toEqual([]);
  });

  it('NEGATIVE: the comparator catches a single wrong element (1e-3 relative), and only that one', () => {
    const rng = mulberry32(11);
    const a = mat(7, 37, () => rng() * 2 - 1), b = mat(37, 19, () => rng() * 2 - 1);
    const c = matmulF64(a, b);
    const ref = { value: c.value.data, mag: c.mag.data };
    const got = Float32Array.from(c.value.data);
    const bad = 3 * 19 + 11;
    got[bad] += 1e-3 * ref.mag[bad];
    const found = mismatches(got, ref, TOL_F32);
    expect(found.map((m) => m.index)).toEqual([bad]);
    expect(() => assertClose(got, ref, TOL_F32)).toThrow(/1 of 133 elements out of tolerance: \[68\]/);
  });

  it('NEGATIVE: the comparator catches a NaN and an accumulation that dropped one k term', () => {
    const rng = mulberry32(12);
    const K = 37;
    const a = mat(1, K, () => rng() * 2 - 1), b = mat(K, 1, () => rng() * 2 - 1);
    const c = matmulF64(a, b);
    const ref = { value: c.value.data, mag: c.mag.data };
    const dropped = c.value.data[0] - a.data[K - 1] * b.data[K - 1];
    expect(mismatches([dropped], ref, TOL_F32)).toHaveLength(1);
    expect(mismatches([Number.NaN], ref, TOL_F32)).toHaveLength(1);
  });

  it('NEGATIVE: the comparator catches rows computed with the wrong expert', () => {
    const rng = mulberry32(13);
    const G = 4, K = 37, N = 19, sizes = [3, 5, 0, 4];
    const x = randomF32(rng, 12 * K), w = randomF32(rng, G * K * N);
    const ref = refGroupedM(x, w, sizes, K, N);
    const swapped = refGroupedM(x, w, [3, 5, 1, 3], K, N); // row 8 uses expert 2 instead of 3
    const bad = mismatches(swapped.value, ref, TOL_F32);
    expect(bad.length).toBeGreaterThan(0);
    expect(bad.every((m) => Math.floor(m.index / N) === 8)).toBe(true);
  });

  it('NEGATIVE: even the bf16 tolerance rejects a 2-ulp error', () => {
    const ref = { value: Float64Array.from([1]), mag: Float64Array.from([1]) };
    expect(mismatches([1 + 2 ** -6], ref, TOL_BF16)).toHaveLength(1);
    expect(mismatches([1 + 2 ** -8], ref, TOL_BF16)).toHaveLength(0);
  });
});
