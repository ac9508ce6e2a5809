/**
 * Number -> code conversions: round to nearest even at every midpoint between consecutive
 * representable values (and one ulp either side, in f64 and in f32), saturation, NaN/Inf rules,
 * and a brute-force oracle (nearest value from the full code table, ties to the even code) over
 * random inputs.
 */
import { describe, expect, it } from 'vitest';
import {
  e8m0FromExponent, f32ToF4E2m1, f32ToF8E4m3, f32ToF8E5m2, f32ToS4, f32ToU4, toE8m0, toStored,
  type E8m0Rounding,
} from '../src/index.js';

const hex = (c: number): string => `0x${c.toString(16).padStart(2, '0')}`;

// ---- ulp steps -------------------------------------------------------------------------------

const f64 = new Float64Array(1);
const u64 = new BigUint64Array(f64.buffer);
/** Next double above x (x finite, >= 0). */
function nextUp(x: number): number {
  if (x === 0) return Number.MIN_VALUE;
  f64[0] = x;
  u64[0] += 1n;
  return f64[0];
}
/** Next double below x (x finite, > 0). */
function nextDown(x: number): number {
  f64[0] = x;
  u64[0] -= 1n;
  return f64[0];
}
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function nextUpF32(x: number): number {
  f32[0] = x;
  if (f32[0] !== x) throw new Error(`${x} is not an f32`);
  u32[0] += 1;
  return f32[0];
}
function nextDownF32(x: number): number {
  f32[0] = x;
  if (f32[0] !== x) throw new Error(`${x} is not an f32`);
  u32[0] -= 1;
  return f32[0];
}

// ---- formats, written from the specs -----------------------------------------------------------

interface Fmt {
  name: string;
  /** Number -> code under test. */
  enc: (x: number, saturate: boolean) => number;
  /** Positive finite values in increasing order with their codes (+0 first), from the spec. */
  values: Array<{ v: number; code: number }>;
  signBit: number;
  /** The value one ulp above max normal if the exponent range were unbounded. */
  beyondMax: number;
  /** Code of max normal. */
  maxCode: number;
  /** Code produced by non-saturating overflow for a positive value (Inf for E5M2, NaN for E4M3). */
  overflowCode: number;
  /** Non-saturating conversion exists (false for E2M1: no Inf/NaN). */
  hasNonSat: boolean;
}

/** Enumerates non-negative finite values of a sign/E/M format: subnormals, then each binade. */
function enumerate(ebits: number, mbits: number, bias: number, lastCode: number): Array<{ v: number; code: number }> {
  const out: Array<{ v: number; code: number }> = [];
  for (let code = 0; code <= lastCode; code++) {
    const E = code >> mbits;
    const m = code & ((1 << mbits) - 1);
    const v = E === 0 ? (m / 2 ** mbits) * 2 ** (1 - bias) : (1 + m / 2 ** mbits) * 2 ** (E - bias);
    out.push({ v, code });
  }
  return out;
}

const E4M3: Fmt = {
  name: 'f8_e4m3',
  enc: (x, saturate) => f32ToF8E4m3(x, { saturate }),
  values: enumerate(4, 3, 7, 0x7e),
  signBit: 0x80,
  beyondMax: 480,
  maxCode: 0x7e,
  overflowCode: 0x7f,
  hasNonSat: true,
};
const E5M2: Fmt = {
  name: 'f8_e5m2',
  enc: (x, saturate) => f32ToF8E5m2(x, { saturate }),
  values: enumerate(5, 2, 15, 0x7b),
  signBit: 0x80,
  beyondMax: 65536,
  maxCode: 0x7b,
  overflowCode: 0x7c,
  hasNonSat: true,
};
const E2M1: Fmt = {
  name: 'f4_e2m1',
  enc: (x) => f32ToF4E2m1(x),
  values: enumerate(2, 1, 1, 0x7),
  signBit: 0x8,
  beyondMax: 8,
  maxCode: 0x7,
  overflowCode: 0x7,
  hasNonSat: false,
};
const FORMATS = [E4M3, E5M2, E2M1];

/**
 * Brute-force oracle: nearest representable value by scanning the whole table; a tie goes to the
 * even code; beyond max normal, IEEE overflow (with an unbounded exponent the next value up is
 * `beyondMax`, whose code would be maxCode + 1).
 */
function oracle(f: Fmt, x: number, saturate: boolean): number {
  const a = Math.abs(x);
  const sign = x < 0 || Object.is(x, -0) ? f.signBit : 0;
  const max = f.values[f.values.length - 1].v;
  const overflow = saturate || !f.hasNonSat ? f.maxCode : f.overflowCode;
  if (a === Infinity) return sign | overflow;
  if (a > max) {
    const mid = (max + f.beyondMax) / 2;
    if (a < mid) return sign | f.maxCode;
    if (a === mid) return sign | ((f.maxCode & 1) === 0 ? f.maxCode : overflow);
    return sign | overflow;
  }
  let best = f.values[0];
  for (const cand of f.values) {
    const d = Math.abs(cand.v - a);
    const bd = Math.abs(best.v - a);
    if (d < bd || (d === bd && (cand.code & 1) === 0)) best = cand;
  }
  return sign | best.code;
}

// ---- midpoints ---------------------------------------------------------------------------------

describe.each(FORMATS)('$name: round to nearest even at every midpoint', (f) => {
  const pairs = f.values.slice(1).map((hi, i) => ({ lo: f.values[i], hi }));

  it('the value table has the expected size (tests must see every binade)', () => {
    expect(f.values.length).toBe({ f8_e4m3: 127, f8_e5m2: 124, f4_e2m1: 8 }[f.name]);
  });

  it('exact midpoints go to the even code, both signs, saturating or not', () => {
    const bad: string[] = [];
    for (const { lo, hi } of pairs) {
      const mid = (lo.v + hi.v) / 2;
      const even = (lo.code & 1) === 0 ? lo.code : hi.code;
      expect((lo.code ^ hi.code) & 1).toBe(1); // neighbours always differ in the last bit
      for (const saturate of [true, false]) {
        const p = f.enc(mid, saturate);
        const n = f.enc(-mid, saturate);
        if (p !== even) bad.push(`+${mid}: ${hex(p)} != ${hex(even)}`);
        if (n !== (even | f.signBit)) bad.push(`-${mid}: ${hex(n)} != ${hex(even | f.signBit)}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('one f64 ulp and one f32 ulp either side of a midpoint go to the nearer neighbour', () => {
    const bad: string[] = [];
    for (const { lo, hi } of pairs) {
      const mid = (lo.v + hi.v) / 2;
      expect(Math.fround(mid)).toBe(mid); // midpoints are f32 values
      const cases: Array<[number, number]> = [
        [nextDown(mid), lo.code], [nextUp(mid), hi.code],
        [nextDownF32(mid), lo.code], [nextUpF32(mid), hi.code],
      ];
      for (const [x, want] of cases) {
        for (const saturate of [true, false]) {
          if (f.enc(x, saturate) !== want) bad.push(`${x}: ${hex(f.enc(x, saturate))} != ${hex(want)}`);
          if (f.enc(-x, saturate) !== (want | f.signBit)) bad.push(`-${x}: ${hex(f.enc(-x, saturate))}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('the interval between midpoints maps to the value it contains', () => {
    for (const { lo, hi } of pairs) {
      expect(f.enc(lo.v + (hi.v - lo.v) / 4, true)).toBe(lo.code);
      expect(f.enc(hi.v - (hi.v - lo.v) / 4, true)).toBe(hi.code);
    }
  });

  it('agrees with the brute-force oracle on the midpoints and their neighbours', () => {
    const bad: string[] = [];
    for (const { lo, hi } of pairs) {
      const mid = (lo.v + hi.v) / 2;
      for (const x of [mid, nextUp(mid), nextDown(mid), lo.v, hi.v]) {
        for (const saturate of [true, false]) {
          for (const s of [x, -x]) if (f.enc(s, saturate) !== oracle(f, s, saturate)) bad.push(`${s} sat=${saturate}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });
});

describe('subnormal ranges', () => {
  it('f8_e4m3: half the min subnormal (2^-10) ties to 0, just above it gives 2^-9', () => {
    expect(f32ToF8E4m3(2 ** -10)).toBe(0x00);
    expect(f32ToF8E4m3(nextUp(2 ** -10))).toBe(0x01);
    expect(f32ToF8E4m3(nextUpF32(2 ** -10))).toBe(0x01);
    expect(f32ToF8E4m3(1.5 * 2 ** -9)).toBe(0x02); // tie between 0x01 (odd) and 0x02
    expect(f32ToF8E4m3(2.5 * 2 ** -9)).toBe(0x02); // tie between 0x02 and 0x03 (odd)
    expect(f32ToF8E4m3(7.5 * 2 ** -9)).toBe(0x08); // max subnormal 0x07 / min normal 0x08 tie -> 0x08
    expect(f32ToF8E4m3(nextDown(7.5 * 2 ** -9))).toBe(0x07);
    expect(f32ToF8E4m3(Number.MIN_VALUE)).toBe(0x00);
  });

  it('f8_e5m2: half the min subnormal (2^-17) ties to 0, 3.5 * 2^-16 ties to the min normal 0x04', () => {
    expect(f32ToF8E5m2(2 ** -17)).toBe(0x00);
    expect(f32ToF8E5m2(nextUp(2 ** -17))).toBe(0x01);
    expect(f32ToF8E5m2(3.5 * 2 ** -16)).toBe(0x04);
    expect(f32ToF8E5m2(nextDown(3.5 * 2 ** -16))).toBe(0x03);
  });

  it('f4_e2m1: 0.25 ties to 0, 0.75 ties to 1 (code 2), just above 0.25 gives 0.5', () => {
    expect(f32ToF4E2m1(0.25)).toBe(0x0);
    expect(f32ToF4E2m1(nextUp(0.25))).toBe(0x1);
    expect(f32ToF4E2m1(0.75)).toBe(0x2);
    expect(f32ToF4E2m1(nextDown(0.75))).toBe(0x1);
  });
});

// ---- saturation, Inf, NaN ----------------------------------------------------------------------

describe('f8_e4m3: saturation, Inf and NaN (OFP8 v1.0 conversion table)', () => {
  it('saturating (default): |x| > 448 and ±Inf give ±448', () => {
    for (const x of [449, 464, nextUp(464), 480, 1e6, 3.4e38, Number.MAX_VALUE, Infinity]) {
      expect(f32ToF8E4m3(x), String(x)).toBe(0x7e);
      expect(f32ToF8E4m3(-x), String(-x)).toBe(0xfe);
      expect(f32ToF8E4m3(x, { saturate: true })).toBe(0x7e);
    }
  });

  it('non-saturating: up to 464 (the tie with 480, 448 is even) rounds to 448, above it NaN with the sign of x', () => {
    const ns = { saturate: false };
    expect(f32ToF8E4m3(448, ns)).toBe(0x7e);
    expect(f32ToF8E4m3(464, ns)).toBe(0x7e);
    expect(f32ToF8E4m3(-464, ns)).toBe(0xfe);
    expect(f32ToF8E4m3(nextUp(464), ns)).toBe(0x7f);
    expect(f32ToF8E4m3(nextUpF32(464), ns)).toBe(0x7f);
    expect(f32ToF8E4m3(-nextUp(464), ns)).toBe(0xff);
    expect(f32ToF8E4m3(1e30, ns)).toBe(0x7f);
  });

  it('non-saturating: ±Inf give NaN (E4M3 has no infinity)', () => {
    expect(f32ToF8E4m3(Infinity, { saturate: false })).toBe(0x7f);
    expect(f32ToF8E4m3(-Infinity, { saturate: false })).toBe(0xff);
  });

  it('NaN gives 0x7F in both modes', () => {
    expect(f32ToF8E4m3(NaN)).toBe(0x7f);
    expect(f32ToF8E4m3(NaN, { saturate: false })).toBe(0x7f);
  });
});

describe('f8_e5m2: saturation, Inf and NaN (OFP8 v1.0 conversion table)', () => {
  it('saturating (default): |x| > 57344 and ±Inf give ±57344', () => {
    for (const x of [57345, 61439, 61440, 65536, 1e10, Number.MAX_VALUE, Infinity]) {
      expect(f32ToF8E5m2(x), String(x)).toBe(0x7b);
      expect(f32ToF8E5m2(-x), String(-x)).toBe(0xfb);
    }
  });

  it('non-saturating: IEEE overflow — 61440 ties to 2^16 (even), i.e. Inf; just below stays 57344', () => {
    const ns = { saturate: false };
    expect(f32ToF8E5m2(nextDown(61440), ns)).toBe(0x7b);
    expect(f32ToF8E5m2(nextDownF32(61440), ns)).toBe(0x7b);
    expect(f32ToF8E5m2(61440, ns)).toBe(0x7c);
    expect(f32ToF8E5m2(-61440, ns)).toBe(0xfc);
    expect(f32ToF8E5m2(1e10, ns)).toBe(0x7c);
    expect(f32ToF8E5m2(Infinity, ns)).toBe(0x7c);
    expect(f32ToF8E5m2(-Infinity, ns)).toBe(0xfc);
  });

  it('NaN gives the quiet NaN 0x7E in both modes', () => {
    expect(f32ToF8E5m2(NaN)).toBe(0x7e);
    expect(f32ToF8E5m2(NaN, { saturate: false })).toBe(0x7e);
  });
});

describe('f4_e2m1: always saturating, NaN rule', () => {
  it('|x| > 6 and ±Inf give ±6', () => {
    for (const x of [6, 6.5, 7, 7.999, 8, 100, Infinity]) {
      expect(f32ToF4E2m1(x), String(x)).toBe(0x7);
      expect(f32ToF4E2m1(-x), String(-x)).toBe(0xf);
    }
  });

  it('RNE between the last values: 5 -> 4 (even code 6), 3.5 -> 4, 2.5 -> 2', () => {
    expect(f32ToF4E2m1(5)).toBe(0x6);
    expect(f32ToF4E2m1(nextUp(5))).toBe(0x7);
    expect(f32ToF4E2m1(3.5)).toBe(0x6);
    expect(f32ToF4E2m1(2.5)).toBe(0x4);
    expect(f32ToF4E2m1(-2.5)).toBe(0xc);
  });

  it('NaN gives 0x8 (-0), the ml_dtypes choice (the MX spec leaves it implementation-defined)', () => {
    expect(f32ToF4E2m1(NaN)).toBe(0x8);
  });
});

// ---- random inputs vs oracle ---------------------------------------------------------------------

/** Small deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe.each(FORMATS)('$name: random inputs agree with the brute-force oracle', (f) => {
  it('20000 log-uniform doubles and f32s over the whole range (underflow to overflow), both modes', () => {
    const r = rng(f.name.length * 7919 + 17);
    const minSub = f.values[1].v;
    const lo = Math.log2(minSub) - 3;
    const hi = Math.log2(f.beyondMax) + 2;
    const bad: string[] = [];
    for (let i = 0; i < 20000; i++) {
      let x = 2 ** (lo + (hi - lo) * r());
      if (i & 1) x = Math.fround(x);
      if (r() < 0.5) x = -x;
      for (const saturate of [true, false]) {
        const got = f.enc(x, saturate);
        const want = oracle(f, x, saturate);
        if (got !== want && bad.length < 10) bad.push(`${x} sat=${saturate}: ${hex(got)} != ${hex(want)}`);
      }
    }
    expect(bad).toEqual([]);
  });
});

// ---- integers ------------------------------------------------------------------------------------

describe('s4 / u4: round to nearest even, saturate', () => {
  it('half-integers go to the even neighbour', () => {
    expect([-7.5, -6.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 6.5].map(f32ToS4)).toEqual([-8, -6, -2, -2, 0, 0, 2, 2, 4, 6]);
    expect([0.5, 1.5, 2.5, 13.5, 14.5].map(f32ToU4)).toEqual([0, 2, 2, 14, 14]);
    expect(f32ToS4(nextUp(2.5))).toBe(3);
    expect(f32ToS4(nextDown(1.5))).toBe(1);
    expect(f32ToS4(-nextUp(2.5))).toBe(-3);
  });

  it('saturates to [-8, 7] and [0, 15] (7.5 rounds to 8 then saturates to 7)', () => {
    expect([7.5, 8, 1e9, Infinity, -8.5, -9, -Infinity].map(f32ToS4)).toEqual([7, 7, 7, 7, -8, -8, -8]);
    expect([15.5, 16, Infinity, -0.5, -1, -Infinity].map(f32ToU4)).toEqual([15, 15, 15, 0, 0, 0]);
  });

  it('NaN gives 0', () => {
    expect(f32ToS4(NaN)).toBe(0);
    expect(f32ToU4(NaN)).toBe(0);
  });

  it('toStored uses the same rules', () => {
    expect(toStored('s4', -2.5)).toBe(-2);
    expect(toStored('s4', 100)).toBe(7);
    expect(toStored('u4', 2.5)).toBe(2);
  });
});

// ---- e8m0 ----------------------------------------------------------------------------------------

describe('e8m0: rounding modes', () => {
  const modes: E8m0Rounding[] = ['floor', 'ceil', 'rne'];

  it("default is 'floor' (OCP MX: shared exponent = floor(log2(amax)) - emax_elem)", () => {
    expect(toE8m0(3)).toBe(toE8m0(3, 'floor'));
    expect(toE8m0(3)).toBe(0x80); // 2^1
    expect(toE8m0(nextDown(2))).toBe(0x7f);
    expect(toStored('e8m0', 3)).toBe(0x80);
  });

  it('every binade: floor, ceil and nearest (tie 1.5 * 2^k goes up) around 2^k and 1.5 * 2^k', () => {
    const bad: string[] = [];
    for (let k = -127; k <= 126; k++) {
      const p = 2 ** k;
      const c = k + 127;
      const check = (x: number, mode: E8m0Rounding, want: number): void => {
        const got = toE8m0(x, mode);
        if (got !== want) bad.push(`k=${k} x=${x} ${mode}: ${hex(got)} != ${hex(want)}`);
      };
      for (const mode of modes) check(p, mode, c);
      const above = nextUp(p);
      check(above, 'floor', c);
      check(above, 'ceil', c + 1);
      check(above, 'rne', c);
      const tie = 1.5 * p;
      check(tie, 'floor', c);
      check(tie, 'ceil', c + 1);
      check(tie, 'rne', c + 1);
      check(nextDown(tie), 'rne', c);
      check(nextUp(tie), 'rne', c + 1);
      const below = nextDown(2 * p);
      check(below, 'floor', c);
      check(below, 'ceil', c + 1);
      check(below, 'rne', c + 1);
    }
    expect(bad).toEqual([]);
  });

  it('saturates finite values outside [2^-127, 2^127]', () => {
    for (const mode of modes) {
      expect(toE8m0(2 ** 127, mode)).toBe(0xfe);
      expect(toE8m0(3.4028234663852886e38, mode)).toBe(0xfe); // f32 max, ~2^128
      expect(toE8m0(Number.MAX_VALUE, mode)).toBe(0xfe);
      expect(toE8m0(2 ** -127, mode)).toBe(0x00);
      expect(toE8m0(2 ** -149, mode)).toBe(0x00); // f32 min subnormal
      expect(toE8m0(Number.MIN_VALUE, mode)).toBe(0x00);
    }
    expect(toE8m0(nextUp(2 ** 127), 'ceil')).toBe(0xfe);
    expect(toE8m0(1.5 * 2 ** 127, 'rne')).toBe(0xfe);
    expect(toE8m0(nextDown(2 ** -127), 'floor')).toBe(0x00);
  });

  it('zero -> 0x00 (smallest scale); negative, +Inf, -Inf, NaN -> NaN (0xFF)', () => {
    for (const mode of modes) {
      expect(toE8m0(0, mode)).toBe(0x00);
      expect(toE8m0(-0, mode)).toBe(0x00);
      for (const x of [-1, -(2 ** -140), -Infinity, Infinity, NaN]) expect(toE8m0(x, mode), `${x} ${mode}`).toBe(0xff);
    }
  });

  it('rejects an unknown mode', () => {
    expect(() => toE8m0(1, 'up' as E8m0Rounding)).toThrow(RangeError);
  });
});

describe('e8m0FromExponent', () => {
  it('maps e to e + 127 in [-127, 127], clamps outside, -Inf -> 0x00, +Inf / NaN -> 0xFF', () => {
    expect(e8m0FromExponent(0)).toBe(0x7f);
    expect(e8m0FromExponent(-127)).toBe(0x00);
    expect(e8m0FromExponent(127)).toBe(0xfe);
    expect(e8m0FromExponent(128)).toBe(0xfe);
    expect(e8m0FromExponent(-1000)).toBe(0x00);
    expect(e8m0FromExponent(-Infinity)).toBe(0x00);
    expect(e8m0FromExponent(Infinity)).toBe(0xff);
    expect(e8m0FromExponent(NaN)).toBe(0xff);
  });

  it('throws on a non-integer exponent', () => {
    expect(() => e8m0FromExponent(0.5)).toThrow(RangeError);
  });

  it('MX scale recipe: e8m0FromExponent(floor(log2(amax)) - emax) for FP4 (emax 2) and E4M3 (emax 8)', () => {
    // amax = 5: floor(log2 5) = 2; FP4 emax_elem = 2 -> scale 2^0; E4M3 emax_elem = 8 -> 2^-6.
    expect(e8m0FromExponent(2 - 2)).toBe(0x7f);
    expect(e8m0FromExponent(2 - 8)).toBe(0x79);
    expect(toE8m0(5)).toBe(e8m0FromExponent(2));
  });
});
