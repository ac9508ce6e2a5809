import { describe, expect, it } from 'vitest';
import {
  DISTRIBUTIONS, allFirst, allLast, apportion, balanced, cumulative, emptyFirst, emptyLast, emptyMiddle, geometricSkew,
  linearSkew, mulberry32, randomRouting,
} from './workloads.js';

describe('workloads (self-checks of the generators)', () => {
  it('mulberry32 is deterministic per seed and stays in [0, 1)', () => {
    const a = mulberry32(42), b = mulberry32(42), c = mulberry32(43);
    const xa = Array.from({ length: 1000 }, a);
    expect(Array.from({ length: 1000 }, b)).toEqual(xa);
    expect(Array.from({ length: 1000 }, c)).not.toEqual(xa);
    expect(xa.every((v) => v >= 0 && v < 1)).toBe(true);
  });

  it.each(DISTRIBUTIONS)('%s sums to the total for G = 2, 32 and 256', (_name, gen) => {
    for (const G of [2, 32, 256]) {
      for (const total of [0, 1, 101, 1000]) {
        const s = gen(G, total);
        expect(s).toHaveLength(G);
        expect(s.every((v) => Number.isInteger(v) && v >= 0)).toBe(true);
        expect(s.reduce((x, y) => x + y, 0)).toBe(total);
      }
    }
  });

  it('shapes are what their names say', () => {
    expect(balanced(4, 10)).toEqual([3, 3, 2, 2]);
    expect(linearSkew(4, 100)).toEqual([10, 20, 30, 40]);
    expect(geometricSkew(3, 70)).toEqual([40, 20, 10]);
    expect(emptyFirst(4, 9)[0]).toBe(0);
    expect(emptyLast(4, 9)[3]).toBe(0);
    expect(emptyMiddle(5, 9)[2]).toBe(0);
    expect(allFirst(3, 7)).toEqual([7, 0, 0]);
    expect(allLast(3, 7)).toEqual([0, 0, 7]);
    expect(apportion(5, [1, 0, 1])).toEqual([3, 0, 2]);
    const r = randomRouting(mulberry32(1), 8, 50);
    expect(r.reduce((x, y) => x + y, 0)).toBe(50);
    expect(cumulative([2, 0, 3])).toEqual([0, 2, 2, 5]);
  });
});
