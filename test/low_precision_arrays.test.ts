/**
 * The registry side of the low-precision types: dt names, sizes, views, single-element
 * toStored/fromStored, 4-bit packing, and whole-array encode/decode as little-endian bytes.
 */
import { describe, expect, it } from 'vitest';
import {
  decodeArray, dt, dtBits, dtBytes, encodeArray, f32ToF8E4m3, f8E4m3ToF32, f8E5m2ToF32, fromStored, getNibble,
  isLowPrecisionType, isSubByteType, pack4, packedBytes4, setNibble, toStored, unpack4, type DataType,
} from '../src/index.js';
import { isDataType, isFloatType, makeView } from '../src/common/data_type.js';
import { expectDnnlError } from './helpers.js';

const LOW: DataType[] = ['s4', 'u4', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1', 'e8m0'];
const FOUR: DataType[] = ['s4', 'u4', 'f4_e2m1'];
const EIGHT: DataType[] = ['f8_e4m3', 'f8_e5m2', 'e8m0'];

describe('registry', () => {
  it('dt has the oneDNN names of the new types', () => {
    expect(dt.s4).toBe('s4');
    expect(dt.u4).toBe('u4');
    expect(dt.f8_e4m3).toBe('f8_e4m3');
    expect(dt.f8_e5m2).toBe('f8_e5m2');
    expect(dt.f4_e2m1).toBe('f4_e2m1');
    expect(dt.e8m0).toBe('e8m0');
    for (const t of LOW) expect(isDataType(t), t).toBe(true);
    expect(isDataType('f8')).toBe(false);
  });

  it('dtBits: 4 for s4/u4/f4_e2m1, 8 for f8_e4m3/f8_e5m2/e8m0; existing types unchanged', () => {
    for (const t of FOUR) expect(dtBits(t), t).toBe(4);
    for (const t of EIGHT) expect(dtBits(t), t).toBe(8);
    expect([dtBits('f32'), dtBits('bf16'), dtBits('f16'), dtBits('s8'), dtBits('u8'), dtBits('s32')]).toEqual([32, 16, 16, 8, 8, 32]);
  });

  it('dtBytes(t, n) = ceil(n * bits / 8)', () => {
    for (const t of FOUR) expect([0, 1, 2, 3, 7, 8, 1001].map((n) => dtBytes(t, n)), t).toEqual([0, 1, 1, 2, 4, 4, 501]);
    for (const t of EIGHT) expect([0, 1, 7].map((n) => dtBytes(t, n)), t).toEqual([0, 1, 7]);
    expect(dtBytes('f32', 3)).toBe(12);
    expect(packedBytes4(5)).toBe(3);
  });

  it('classification helpers', () => {
    for (const t of LOW) expect(isLowPrecisionType(t), t).toBe(true);
    for (const t of ['f32', 'bf16', 'f16', 's8', 'u8', 's32'] as const) expect(isLowPrecisionType(t), t).toBe(false);
    expect(FOUR.every(isSubByteType)).toBe(true);
    expect([...EIGHT, 'f32', 's8', 'undef'].some((t) => isSubByteType(t as DataType))).toBe(false);
    expect(LOW.some(isFloatType)).toBe(false); // isFloatType keeps meaning the f32/bf16/f16 compute types
  });

  it('makeView: a Uint8Array of the raw bytes, ceil(n/2) for 4-bit types', () => {
    const buf = new ArrayBuffer(64);
    for (const t of FOUR) {
      const v = makeView(t, buf, 8, 5);
      expect(v).toBeInstanceOf(Uint8Array);
      expect(v.length, t).toBe(3);
      expect(v.byteOffset).toBe(8);
      expect(v.buffer).toBe(buf);
    }
    for (const t of EIGHT) {
      const v = makeView(t, buf, 3, 5);
      expect(v).toBeInstanceOf(Uint8Array);
      expect(v.length, t).toBe(5);
    }
  });
});

describe('toStored / fromStored: single element codes', () => {
  it('f8 and e8m0 use byte codes, with the default rules (saturate, floor)', () => {
    expect(toStored('f8_e4m3', 448)).toBe(0x7e);
    expect(toStored('f8_e4m3', 1e6)).toBe(0x7e);
    expect(toStored('f8_e4m3', -(2 ** -9))).toBe(0x81);
    expect(toStored('f8_e5m2', 57344)).toBe(0x7b);
    expect(toStored('f8_e5m2', Infinity)).toBe(0x7b);
    expect(toStored('e8m0', 1)).toBe(0x7f);
    expect(toStored('e8m0', 0.75)).toBe(0x7e);
    expect(fromStored('f8_e4m3', 0x7e)).toBe(448);
    expect(fromStored('f8_e4m3', 0x08)).toBe(2 ** -6);
    expect(fromStored('f8_e5m2', 0x7c)).toBe(Infinity);
    expect(fromStored('e8m0', 0x80)).toBe(2);
    expect(fromStored('e8m0', 0xff)).toBeNaN();
  });

  it('4-bit types use element codes, not packed bytes', () => {
    expect(toStored('f4_e2m1', 6)).toBe(0x7);
    expect(toStored('f4_e2m1', -0.5)).toBe(0x9);
    expect(toStored('s4', -1)).toBe(-1);
    expect(toStored('u4', 15)).toBe(15);
    expect(fromStored('f4_e2m1', 0x7)).toBe(6);
    expect(fromStored('f4_e2m1', 0xd)).toBe(-3);
    expect(fromStored('s4', -8)).toBe(-8);
    expect(fromStored('s4', 0xf)).toBe(-1);
    expect(fromStored('u4', 9)).toBe(9);
  });

  it('round trip through every code', () => {
    for (let c = 0; c < 256; c++) {
      for (const t of ['f8_e4m3', 'f8_e5m2'] as const) {
        const v = fromStored(t, c);
        if (Number.isFinite(v)) expect(toStored(t, v), `${t} ${c}`).toBe(c);
      }
      if (c < 255) expect(toStored('e8m0', fromStored('e8m0', c))).toBe(c);
    }
    for (let c = 0; c < 16; c++) expect(toStored('f4_e2m1', fromStored('f4_e2m1', c))).toBe(c);
  });

  it('existing types are unchanged', () => {
    expect(toStored('bf16', 1)).toBe(0x3f80);
    expect(toStored('f16', 1)).toBe(0x3c00);
    expect(toStored('s8', 200)).toBe(127);
    expect(fromStored('f32', 1.5)).toBe(1.5);
  });
});

describe('pack4 / unpack4', () => {
  it('element 2i in the low nibble, 2i+1 in the high nibble; odd count pads with 0', () => {
    expect([...pack4([0x1, 0x2, 0x3])]).toEqual([0x21, 0x03]);
    expect([...pack4([0xa, 0xb, 0xc, 0xd])]).toEqual([0xba, 0xdc]);
    expect([...pack4([0xf])]).toEqual([0x0f]);
    expect(pack4([]).length).toBe(0);
  });

  it('s4 values are stored in two\'s complement', () => {
    expect([...pack4([-1, 7, -8])]).toEqual([0x7f, 0x08]);
    expect([...unpack4(new Uint8Array([0x7f, 0x08]), 3, true)]).toEqual([-1, 7, -8]);
    expect([...unpack4(new Uint8Array([0x7f, 0x08]), 3, false)]).toEqual([15, 7, 8]);
  });

  it('unpack4 returns Int8Array (signed) or Uint8Array (unsigned)', () => {
    expect(unpack4(new Uint8Array([0x12]), 2, true)).toBeInstanceOf(Int8Array);
    expect(unpack4(new Uint8Array([0x12]), 2, false)).toBeInstanceOf(Uint8Array);
  });

  it('round trips random codes for every count 0..33 (odd counts included), signed and unsigned', () => {
    let seed = 12345;
    const next = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16;
    for (let n = 0; n <= 33; n++) {
      const u = Array.from({ length: n }, () => next() & 0xf);
      const s = u.map((x) => (x >= 8 ? x - 16 : x));
      const pu = pack4(u);
      const ps = pack4(s);
      expect(pu.length).toBe(Math.ceil(n / 2));
      expect([...ps]).toEqual([...pu]);
      expect([...unpack4(pu, n, false)]).toEqual(u);
      expect([...unpack4(ps, n, true)]).toEqual(s);
      if (n & 1) expect(pu[pu.length - 1] >> 4, `padding nibble, n=${n}`).toBe(0);
      for (let i = 0; i < n; i++) expect(getNibble(pu, i)).toBe(u[i]);
    }
  });

  it('pack4 into a given buffer writes ceil(n/2) bytes and leaves the rest untouched', () => {
    const out = new Uint8Array([0xee, 0xee, 0xee, 0xee]);
    expect(pack4([1, 2, 3], out)).toBe(out);
    expect([...out]).toEqual([0x21, 0x03, 0xee, 0xee]);
    expect(() => pack4([1, 2, 3], new Uint8Array(1))).toThrow(RangeError);
  });

  it('unpack4 checks the byte count and the element count', () => {
    expect(() => unpack4(new Uint8Array(1), 3, false)).toThrow(RangeError);
    expect(() => unpack4(new Uint8Array(1), -1, false)).toThrow(RangeError);
    expect(unpack4(new Uint8Array([0xff]), 1, false)[0]).toBe(0xf); // padding nibble ignored
  });

  it('setNibble writes one element and keeps its neighbour', () => {
    const b = new Uint8Array([0x21, 0x03]);
    setNibble(b, 1, 0xa);
    setNibble(b, 2, -1);
    setNibble(b, 3, 0x5);
    expect([...b]).toEqual([0xa1, 0x5f]);
  });
});

describe('encodeArray / decodeArray', () => {
  it('f32, bf16, f16 as little-endian bytes', () => {
    expect([...encodeArray('f32', [1, -2])]).toEqual([0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]);
    expect([...encodeArray('bf16', [1, -2])]).toEqual([0x80, 0x3f, 0x00, 0xc0]);
    expect([...encodeArray('f16', [1, 65504])]).toEqual([0x00, 0x3c, 0xff, 0x7b]);
    expect([...decodeArray('f32', new Uint8Array([0x00, 0x00, 0x80, 0x3f]), 1)]).toEqual([1]);
    expect([...decodeArray('bf16', new Uint8Array([0x80, 0x3f, 0x00, 0xc0]), 2)]).toEqual([1, -2]);
    expect([...decodeArray('f16', new Uint8Array([0x00, 0x3c, 0xff, 0x7b]), 2)]).toEqual([1, 65504]);
  });

  it('integers: s8/u8 one byte, s32 little-endian', () => {
    expect([...encodeArray('s8', [-1, 300])]).toEqual([0xff, 0x7f]);
    expect([...encodeArray('u8', [255, -3])]).toEqual([0xff, 0x00]);
    expect([...encodeArray('s32', [-2])]).toEqual([0xfe, 0xff, 0xff, 0xff]);
    expect([...decodeArray('s8', new Uint8Array([0xff, 0x7f]), 2)]).toEqual([-1, 127]);
    expect([...decodeArray('s32', new Uint8Array([0xfe, 0xff, 0xff, 0xff]), 1)]).toEqual([-2]);
  });

  it('f8 and e8m0: one code per byte, options pass through', () => {
    expect([...encodeArray('f8_e4m3', [448, 2 ** -6, 2 ** -9, 1000, -0])]).toEqual([0x7e, 0x08, 0x01, 0x7e, 0x80]);
    expect([...encodeArray('f8_e4m3', [1000, Infinity], { saturate: false })]).toEqual([0x7f, 0x7f]);
    expect([...encodeArray('f8_e5m2', [57344, 1e9, NaN])]).toEqual([0x7b, 0x7b, 0x7e]);
    expect([...encodeArray('f8_e5m2', [1e9], { saturate: false })]).toEqual([0x7c]);
    expect([...encodeArray('e8m0', [1, 3, 0, -1])]).toEqual([0x7f, 0x80, 0x00, 0xff]);
    expect([...encodeArray('e8m0', [3], { e8m0Rounding: 'ceil' })]).toEqual([0x81]);
    expect([...encodeArray('e8m0', [3], { e8m0Rounding: 'rne' })]).toEqual([0x81]);
  });

  it('4-bit types are packed two per byte', () => {
    expect([...encodeArray('s4', [-1, 7, -8])]).toEqual([0x7f, 0x08]);
    expect([...encodeArray('u4', [1, 2, 3])]).toEqual([0x21, 0x03]);
    expect([...encodeArray('f4_e2m1', [6, -0.5, 1])]).toEqual([0x97, 0x02]);
    expect([...decodeArray('f4_e2m1', new Uint8Array([0x97, 0x02]), 3)]).toEqual([6, -0.5, 1]);
    expect([...decodeArray('s4', new Uint8Array([0x7f, 0x08]), 3)]).toEqual([-1, 7, -8]);
    expect([...decodeArray('u4', new Uint8Array([0x7f, 0x08]), 3)]).toEqual([15, 7, 8]);
  });

  it('round trips every representable value of every low-precision type, odd counts included', () => {
    const valuesOf = (t: DataType): number[] => {
      const n = dtBits(t) === 4 ? 16 : 256;
      const out: number[] = [];
      for (let c = 0; c < n; c++) {
        const v = fromStored(t, t === 's4' ? ((c ^ 8) - 8) : c);
        if (Number.isFinite(v) && !out.some((o) => Object.is(o, v))) out.push(v);
      }
      return out;
    };
    for (const t of LOW) {
      const vals = valuesOf(t);
      for (const n of [vals.length, vals.length - 1]) {
        const src = vals.slice(0, n);
        const bytes = encodeArray(t, src);
        expect(bytes.length, t).toBe(dtBytes(t, n));
        const back = decodeArray(t, bytes, n);
        expect(back.length).toBe(n);
        for (let i = 0; i < n; i++) expect(Object.is(back[i], src[i]), `${t}[${i}] ${back[i]} != ${src[i]}`).toBe(true);
      }
    }
  });

  it('NaN codes decode to NaN', () => {
    const d = decodeArray('f8_e4m3', new Uint8Array([0x7f, 0xff]), 2);
    expect(Number.isNaN(d[0]) && Number.isNaN(d[1])).toBe(true);
    expect(decodeArray('f8_e5m2', new Uint8Array([0x7d]), 1)[0]).toBeNaN();
    expect(decodeArray('e8m0', new Uint8Array([0xff]), 1)[0]).toBeNaN();
  });

  it('decodeArray honours the byte offset of a subarray', () => {
    const bytes = new Uint8Array([0xaa, 0x00, 0x00, 0x80, 0x3f]).subarray(1);
    expect([...decodeArray('f32', bytes, 1)]).toEqual([1]);
    const packed = new Uint8Array([0xaa, 0x21, 0x03]).subarray(1);
    expect([...decodeArray('u4', packed, 3)]).toEqual([1, 2, 3]);
  });

  it('decodeArray rejects too few bytes or a bad count; undef and unknown types have no encoding (DnnlError)', () => {
    expectDnnlError(() => decodeArray('s4', new Uint8Array(1), 3), 'invalid_arguments', 'decodeArray: 3 s4 elements need 2 bytes, got 1');
    expectDnnlError(() => decodeArray('f32', new Uint8Array(7), 2), 'invalid_arguments', 'decodeArray: 2 f32 elements need 8 bytes');
    expectDnnlError(() => decodeArray('f8_e4m3', new Uint8Array(1), 1.5), 'invalid_arguments', 'decodeArray: count must be a non-negative integer, got 1.5');
    expectDnnlError(() => encodeArray('undef', [1]), 'invalid_arguments', "encodeArray: unknown data type 'undef'");
    expectDnnlError(() => encodeArray('f64' as DataType, [1]), 'invalid_arguments', "encodeArray: unknown data type 'f64' (one of f32, bf16");
    expectDnnlError(() => decodeArray('undef', new Uint8Array(0), 0), 'invalid_arguments', "decodeArray: unknown data type 'undef'");
  });

  it('agrees with the scalar codecs element by element', () => {
    const xs = [0.1, -3.3, 500, 1e-4, 2 ** -9 * 1.5, 7.77, -0];
    const e4 = encodeArray('f8_e4m3', xs);
    xs.forEach((x, i) => expect(e4[i]).toBe(f32ToF8E4m3(x)));
    const d = decodeArray('f8_e4m3', e4, xs.length);
    xs.forEach((_, i) => expect(Object.is(d[i], f8E4m3ToF32(e4[i]))).toBe(true));
    expect(decodeArray('f8_e5m2', new Uint8Array([0x7b]), 1)[0]).toBe(f8E5m2ToF32(0x7b));
  });
});
