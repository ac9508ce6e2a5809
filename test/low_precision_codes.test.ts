/**
 * Every code of every <= 8-bit format: decode against formulas written here from the specs (OCP
 * OFP8 v1.0 for E4M3/E5M2, OCP MX v1.0 for E2M1/E8M0) — never through the encoders — then
 * encode(decode(code)) == code for every non-NaN code.
 */
import { describe, expect, it } from 'vitest';
import {
  E8M0_NAN, F4_E2M1_MAX, F8_E4M3_MAX, F8_E4M3_NAN, F8_E5M2_INF, F8_E5M2_MAX, F8_E5M2_NAN,
  e8m0ToExponent, e8m0ToF32, f16ToF32, f32ToF4E2m1, f32ToF8E4m3, f32ToF8E5m2, f32ToS4, f32ToU4,
  f4E2m1ToF32, f8E4m3ToF32, f8E5m2ToF32, s4ToF32, toE8m0, u4ToF32,
} from '../src/index.js';

const hex = (c: number): string => `0x${c.toString(16).padStart(2, '0')}`;

/** A value that may be NaN or -0, compared with Object.is semantics (toBe). */
function same(a: number, b: number): boolean {
  return Object.is(a, b);
}

/**
 * Spec formula for a sign/exponent/mantissa code with an integer significand:
 * value = (-1)^S * sig * 2^(max(E, 1) - bias - M), sig = (E > 0 ? 2^M : 0) + mantissa.
 * Special encodings are decided by the caller.
 */
function specValue(code: number, ebits: number, mbits: number, bias: number): number {
  const bitsStr = code.toString(2).padStart(1 + ebits + mbits, '0');
  const s = bitsStr[0] === '1';
  const E = parseInt(bitsStr.slice(1, 1 + ebits), 2);
  const mant = parseInt(bitsStr.slice(1 + ebits), 2);
  const sig = (E > 0 ? 2 ** mbits : 0) + mant;
  const mag = sig * Math.pow(2, Math.max(E, 1) - bias - mbits);
  return s ? -mag : mag;
}

function specE4m3(code: number): number {
  if ((code & 0x7f) === 0x7f) return NaN; // S.1111.111
  return specValue(code, 4, 3, 7);
}

function specE5m2(code: number): number {
  const mag = code & 0x7f;
  if (mag === 0x7c) return code & 0x80 ? -Infinity : Infinity; // S.11111.00
  if (mag > 0x7c) return NaN; // S.11111.{01,10,11}
  return specValue(code, 5, 2, 15);
}

function specE2m1(code: number): number {
  return specValue(code, 2, 1, 1);
}

/** Mismatches of `decode` against `spec` over codes [0, n). */
function decodeMismatches(n: number, decode: (c: number) => number, spec: (c: number) => number): string[] {
  const bad: string[] = [];
  for (let c = 0; c < n; c++) {
    const got = decode(c);
    const want = spec(c);
    if (!same(got, want)) bad.push(`${hex(c)}: got ${got}, want ${want}`);
  }
  return bad;
}

describe('f8_e4m3: every code', () => {
  it('decodes all 256 codes as the OFP8 E4M3 formula says', () => {
    expect(decodeMismatches(256, f8E4m3ToF32, specE4m3)).toEqual([]);
  });

  it('spec table values (OFP8 v1.0 table 1)', () => {
    expect(f8E4m3ToF32(0x7e)).toBe(448); // max normal S.1111.110
    expect(f8E4m3ToF32(0xfe)).toBe(-448);
    expect(F8_E4M3_MAX).toBe(448);
    expect(f8E4m3ToF32(0x08)).toBe(2 ** -6); // min normal S.0001.000
    expect(f8E4m3ToF32(0x07)).toBe(0.875 * 2 ** -6); // max subnormal S.0000.111
    expect(f8E4m3ToF32(0x01)).toBe(2 ** -9); // min subnormal S.0000.001
    expect(f8E4m3ToF32(0x38)).toBe(1); // exponent field 7 = bias
    expect(f8E4m3ToF32(0x78)).toBe(256); // exponent field 15 holds normal numbers (no Inf)
    expect(f8E4m3ToF32(0x7d)).toBe(416);
    expect(f8E4m3ToF32(0x00)).toBe(0);
    expect(f8E4m3ToF32(0x80)).toBe(-0);
    expect(f8E4m3ToF32(0x7f)).toBeNaN();
    expect(f8E4m3ToF32(0xff)).toBeNaN();
  });

  it('exactly two NaN codes, no infinities, 126 positive finite non-zero values', () => {
    const all = Array.from({ length: 256 }, (_, c) => f8E4m3ToF32(c));
    expect(all.filter(Number.isNaN).length).toBe(2);
    expect(all.some((v) => !Number.isFinite(v) && !Number.isNaN(v))).toBe(false);
    expect(new Set(all.filter((v) => v > 0)).size).toBe(126);
  });

  it('encode(decode(code)) == code for every non-NaN code, saturating or not', () => {
    const bad: string[] = [];
    for (let c = 0; c < 256; c++) {
      if ((c & 0x7f) === 0x7f) continue;
      for (const saturate of [true, false]) {
        const got = f32ToF8E4m3(f8E4m3ToF32(c), { saturate });
        if (got !== c) bad.push(`${hex(c)} saturate=${saturate} -> ${hex(got)}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('NaN codes re-encode to the canonical NaN 0x7F', () => {
    expect(f32ToF8E4m3(f8E4m3ToF32(0x7f))).toBe(F8_E4M3_NAN);
    expect(f32ToF8E4m3(f8E4m3ToF32(0xff))).toBe(0x7f);
    expect(f32ToF8E4m3(f8E4m3ToF32(0xff), { saturate: false })).toBe(0x7f);
  });

  it('decoded values are exact in f32', () => {
    for (let c = 0; c < 256; c++) {
      const v = f8E4m3ToF32(c);
      if (!Number.isNaN(v)) expect(Math.fround(v), hex(c)).toBe(v);
    }
  });

  it('uses only the low 8 bits of a code', () => {
    expect(f8E4m3ToF32(0x17e)).toBe(448);
  });
});

describe('f8_e5m2: every code', () => {
  it('decodes all 256 codes as the OFP8 E5M2 formula says', () => {
    expect(decodeMismatches(256, f8E5m2ToF32, specE5m2)).toEqual([]);
  });

  it('is the upper byte of an IEEE half: decode(c) == f16(c << 8) for every code', () => {
    expect(decodeMismatches(256, f8E5m2ToF32, (c) => f16ToF32(c << 8))).toEqual([]);
  });

  it('spec table values (OFP8 v1.0 table 1)', () => {
    expect(f8E5m2ToF32(0x7b)).toBe(57344); // max normal S.11110.11
    expect(F8_E5M2_MAX).toBe(57344);
    expect(f8E5m2ToF32(0xfb)).toBe(-57344);
    expect(f8E5m2ToF32(0x04)).toBe(2 ** -14); // min normal
    expect(f8E5m2ToF32(0x03)).toBe(0.75 * 2 ** -14); // max subnormal
    expect(f8E5m2ToF32(0x01)).toBe(2 ** -16); // min subnormal
    expect(f8E5m2ToF32(0x3c)).toBe(1);
    expect(f8E5m2ToF32(F8_E5M2_INF)).toBe(Infinity);
    expect(f8E5m2ToF32(0xfc)).toBe(-Infinity);
    for (const c of [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]) expect(f8E5m2ToF32(c), hex(c)).toBeNaN();
    expect(f8E5m2ToF32(0x80)).toBe(-0);
  });

  it('encode(decode(code)) == code for every finite code; infinities only without saturation', () => {
    const bad: string[] = [];
    for (let c = 0; c < 256; c++) {
      const v = f8E5m2ToF32(c);
      if (Number.isNaN(v)) continue;
      for (const saturate of [true, false]) {
        const want = saturate && !Number.isFinite(v) ? (c & 0x80) | 0x7b : c;
        const got = f32ToF8E5m2(v, { saturate });
        if (got !== want) bad.push(`${hex(c)} saturate=${saturate} -> ${hex(got)}, want ${hex(want)}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('NaN codes re-encode to the canonical quiet NaN 0x7E', () => {
    for (const c of [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]) expect(f32ToF8E5m2(f8E5m2ToF32(c)), hex(c)).toBe(F8_E5M2_NAN);
    expect(F8_E5M2_NAN).toBe(0x7e);
  });
});

describe('f4_e2m1: every code', () => {
  const table = [0, 0.5, 1, 1.5, 2, 3, 4, 6];

  it('decodes all 16 codes as the OCP MX E2M1 formula says', () => {
    expect(decodeMismatches(16, f4E2m1ToF32, specE2m1)).toEqual([]);
  });

  it('matches the MX spec value list {0, 0.5, 1, 1.5, 2, 3, 4, 6} with sign', () => {
    for (let c = 0; c < 8; c++) {
      expect(f4E2m1ToF32(c), hex(c)).toBe(table[c]);
      expect(f4E2m1ToF32(c | 8), hex(c | 8)).toBe(-table[c]);
    }
    expect(f4E2m1ToF32(0x7)).toBe(6);
    expect(F4_E2M1_MAX).toBe(6);
    expect(f4E2m1ToF32(0x8)).toBe(-0);
    expect(f4E2m1ToF32(0x1)).toBe(0.5);
    expect(f4E2m1ToF32(0x17)).toBe(6); // low nibble only
  });

  it('encode(decode(code)) == code for all 16 codes (no NaN in the format)', () => {
    for (let c = 0; c < 16; c++) expect(f32ToF4E2m1(f4E2m1ToF32(c)), hex(c)).toBe(c);
  });
});

describe('s4 / u4: every code', () => {
  it('s4: nibble n decodes to n - 16 for n >= 8 (two\'s complement), and -8..7 decode to themselves', () => {
    for (let n = 0; n < 16; n++) expect(s4ToF32(n), hex(n)).toBe(n >= 8 ? n - 16 : n);
    for (let v = -8; v <= 7; v++) expect(s4ToF32(v)).toBe(v);
    expect(s4ToF32(0x8)).toBe(-8);
    expect(s4ToF32(0xf)).toBe(-1);
  });

  it('u4: nibble n decodes to n', () => {
    for (let n = 0; n < 16; n++) expect(u4ToF32(n)).toBe(n);
    expect(u4ToF32(0x1f)).toBe(15);
  });

  it('encode(decode) round trips for every value', () => {
    for (let v = -8; v <= 7; v++) expect(f32ToS4(s4ToF32(v))).toBe(v);
    for (let v = 0; v <= 15; v++) expect(f32ToU4(u4ToF32(v))).toBe(v);
  });
});

describe('e8m0: every code', () => {
  it('decodes code c to 2^(c - 127) for c < 255 and 0xFF to NaN', () => {
    const bad: string[] = [];
    for (let c = 0; c < 255; c++) {
      // 2^(c-127) built by repeated doubling/halving from 1, independent of the ** operator.
      let want = 1;
      for (let i = 127; i < c; i++) want *= 2;
      for (let i = c; i < 127; i++) want /= 2;
      if (!same(e8m0ToF32(c), want)) bad.push(`${hex(c)}: ${e8m0ToF32(c)} != ${want}`);
    }
    expect(bad).toEqual([]);
    expect(e8m0ToF32(0xff)).toBeNaN();
    expect(E8M0_NAN).toBe(0xff);
  });

  it('known values: 0x7F = 1, 0x00 = 2^-127, 0xFE = 2^127, 0x80 = 2, 0x7E = 0.5', () => {
    expect(e8m0ToF32(0x7f)).toBe(1);
    expect(e8m0ToF32(0x80)).toBe(2);
    expect(e8m0ToF32(0x7e)).toBe(0.5);
    expect(e8m0ToF32(0x00)).toBe(5.877471754111438e-39);
    expect(e8m0ToF32(0xfe)).toBe(1.7014118346046923e38);
    expect(Math.fround(e8m0ToF32(0x00))).toBe(e8m0ToF32(0x00)); // an f32 subnormal, still exact
    expect(e8m0ToExponent(0x00)).toBe(-127);
    expect(e8m0ToExponent(0xfe)).toBe(127);
    expect(e8m0ToExponent(0xff)).toBeNaN();
  });

  it('no sign and no zero: every non-NaN code decodes to a positive number', () => {
    for (let c = 0; c < 255; c++) expect(e8m0ToF32(c) > 0, hex(c)).toBe(true);
  });

  it('toE8m0(decode(c)) == c for every non-NaN code in every rounding mode; NaN -> 0xFF', () => {
    for (const mode of ['floor', 'ceil', 'rne'] as const) {
      for (let c = 0; c < 255; c++) expect(toE8m0(e8m0ToF32(c), mode), `${hex(c)} ${mode}`).toBe(c);
      expect(toE8m0(e8m0ToF32(0xff), mode)).toBe(0xff);
    }
  });
});

describe('negative zero', () => {
  it('encodes -0 to the sign-bit-only code and decodes it back to -0', () => {
    expect(f32ToF8E4m3(-0)).toBe(0x80);
    expect(f32ToF8E5m2(-0)).toBe(0x80);
    expect(f32ToF4E2m1(-0)).toBe(0x8);
    expect(f32ToF8E4m3(0)).toBe(0x00);
    expect(f32ToF8E5m2(0)).toBe(0x00);
    expect(f32ToF4E2m1(0)).toBe(0x0);
    expect(Object.is(f8E4m3ToF32(0x80), -0)).toBe(true);
    expect(Object.is(f8E5m2ToF32(0x80), -0)).toBe(true);
    expect(Object.is(f4E2m1ToF32(0x8), -0)).toBe(true);
  });

  it('integers and e8m0 have no -0: s4/u4 give +0, e8m0 gives its smallest code', () => {
    expect(Object.is(f32ToS4(-0), 0)).toBe(true);
    expect(Object.is(f32ToU4(-0), 0)).toBe(true);
    expect(Object.is(f32ToS4(-0.3), 0)).toBe(true);
    expect(toE8m0(-0)).toBe(0x00);
  });

  it('negative values that underflow keep their sign', () => {
    expect(f32ToF8E4m3(-(2 ** -11))).toBe(0x80);
    expect(f32ToF8E5m2(-(2 ** -18))).toBe(0x80);
    expect(f32ToF4E2m1(-0.2)).toBe(0x8);
    expect(f32ToF8E4m3(-Number.MIN_VALUE)).toBe(0x80);
  });
});
