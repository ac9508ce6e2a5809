/**
 * Fast element encoders for the scales tool, built from (and checked against) the library's exact
 * codecs in src/common/low_precision.ts: round to nearest, ties to even, saturating.
 *
 * The minifloat encoders read the binade from the float64 exponent bits, scale by the binade's
 * quantum (exact), round half to even and assemble the code; decoding uses a table filled by the
 * library codec. `selfTest()` compares every encoder with the library codec on every code, every tie
 * between neighbours, values next to the ties, saturation and random values.
 */
import {
  bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, type DataType,
} from '../../src/index.js';
import {
  f32ToF4E2m1, f32ToF8E4m3, f32ToF8E5m2, f4E2m1ToF32, f8E4m3ToF32, f8E5m2ToF32, roundHalfEven,
} from '../../src/common/low_precision.js';

/** Element types the tool quantizes to. */
export type ElemType = 'f32' | 'bf16' | 'f16' | 's8' | 'u8' | 's4' | 'u4' | 'f8_e4m3' | 'f8_e5m2' | 'f4_e2m1';

/** An encoder: number -> code (the element's bit pattern / integer value) and back. */
export interface Codec {
  readonly dt: ElemType;
  /** Largest finite magnitude (integers: the largest positive value). */
  readonly max: number;
  /** Smallest value (integers). */
  readonly min: number;
  /** For minifloats: the exponent of the largest binade (OCP MX `emax_elem`). */
  readonly emax: number;
  encode(x: number): number;
  decode(code: number): number;
}

interface MiniSpec {
  readonly dt: 'f8_e4m3' | 'f8_e5m2' | 'f4_e2m1';
  readonly mbits: number;
  readonly bias: number;
  readonly maxCode: number;
  readonly signBit: number;
  readonly emax: number;
  readonly dec: (c: number) => number;
  readonly ref: (x: number) => number;
}

const MINI: Record<MiniSpec['dt'], MiniSpec> = {
  f8_e4m3: { dt: 'f8_e4m3', mbits: 3, bias: 7, maxCode: 0x7e, signBit: 0x80, emax: 8, dec: f8E4m3ToF32, ref: (x) => f32ToF8E4m3(x) },
  f8_e5m2: { dt: 'f8_e5m2', mbits: 2, bias: 15, maxCode: 0x7b, signBit: 0x80, emax: 15, dec: f8E5m2ToF32, ref: (x) => f32ToF8E5m2(x) },
  f4_e2m1: { dt: 'f4_e2m1', mbits: 1, bias: 1, maxCode: 0x7, signBit: 0x8, emax: 2, dec: f4E2m1ToF32, ref: (x) => f32ToF4E2m1(x) },
};

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

function miniCodec(s: MiniSpec): Codec {
  const table = new Float64Array(2 * s.signBit);
  for (let c = 0; c < table.length; c++) table[c] = s.dec(c);
  const maxv = table[s.maxCode];
  const top = s.maxCode;
  const { mbits, bias } = s;
  const emin = 1 - bias;
  // 2^-(e - mbits) for every binade exponent e the encoder can meet.
  const lo = emin, hi = s.emax + 1;
  const invQ = new Float64Array(hi - lo + 1);
  for (let e = lo; e <= hi; e++) invQ[e - lo] = 2 ** -(e - mbits);
  return {
    dt: s.dt,
    max: maxv,
    min: -maxv,
    emax: s.emax,
    encode(x: number): number {
      if (x !== x) return s.ref(x);
      const neg = x < 0 || (x === 0 && 1 / x < 0);
      const a = neg ? -x : x;
      const sign = neg ? s.signBit : 0;
      if (a >= maxv) return sign | top; // saturating (the range check also keeps e <= emax)
      if (a === 0) return sign;
      f64[0] = a;
      let e = ((u32[1] >>> 20) & 0x7ff) - 1023; // floor(log2 a) for a normal double
      if (e < emin) e = emin;
      const r = a * invQ[e - lo]; // exact: a power-of-two scaling, r < 2^(mbits+1)
      let n = Math.floor(r);
      const f = r - n;
      if (f > 0.5 || (f === 0.5 && (n & 1) === 1)) n += 1;
      // ((e + bias - 1) << mbits) + n also handles the carry into the next binade and the subnormals.
      return sign | (((e - emin) << mbits) + n);
    },
    decode: (code: number): number => table[code & (2 * s.signBit - 1)],
  };
}

function intCodec(dt: 's8' | 'u8' | 's4' | 'u4'): Codec {
  const [min, max] = dt === 's8' ? [-128, 127] : dt === 'u8' ? [0, 255] : dt === 's4' ? [-8, 7] : [0, 15];
  return {
    dt,
    max,
    min,
    emax: 0,
    encode(x: number): number {
      if (x !== x) return 0;
      const r = roundHalfEven(x);
      return r < min ? min : r > max ? max : r;
    },
    decode: (code: number): number => code,
  };
}

function floatCodec(dt: 'f32' | 'bf16' | 'f16'): Codec {
  if (dt === 'f32') return { dt, max: 3.4028234663852886e38, min: -3.4028234663852886e38, emax: 127, encode: Math.fround, decode: (c) => c };
  if (dt === 'bf16') return { dt, max: 3.3895313892515355e38, min: -3.3895313892515355e38, emax: 127, encode: f32ToBf16, decode: bf16ToF32 };
  return { dt, max: 65504, min: -65504, emax: 15, encode: f32ToF16, decode: f16ToF32 };
}

const cache = new Map<ElemType, Codec>();

export function codec(dt: ElemType): Codec {
  let c = cache.get(dt);
  if (!c) {
    c = dt === 'f8_e4m3' || dt === 'f8_e5m2' || dt === 'f4_e2m1' ? miniCodec(MINI[dt])
      : dt === 'f32' || dt === 'bf16' || dt === 'f16' ? floatCodec(dt)
        : intCodec(dt);
    cache.set(dt, c);
  }
  return c;
}

export function isElemType(t: DataType): t is ElemType {
  return ['f32', 'bf16', 'f16', 's8', 'u8', 's4', 'u4', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1'].includes(t);
}

/**
 * Checks the fast minifloat encoders against the library codecs: every value, every midpoint
 * between neighbours (ties), values just around them, beyond the max, and random values over
 * many binades. Returns the number of values checked; throws on the first disagreement.
 */
export function selfTest(seed = 1): number {
  let n = 0;
  let state = seed >>> 0 || 1;
  const rand = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
  for (const s of Object.values(MINI)) {
    const c = codec(s.dt);
    const probe = (x: number): void => {
      n++;
      const want = s.ref(x), got = c.encode(x);
      if (want !== got) throw new Error(`scales: fast ${s.dt} encoder disagrees with the library codec at ${x}: ${got} vs ${want}`);
    };
    for (let code = 0; code <= s.maxCode; code++) {
      const v = s.dec(code);
      for (const sg of [1, -1]) {
        probe(sg * v);
        if (code < s.maxCode) {
          const mid = (v + s.dec(code + 1)) / 2;
          for (const x of [mid, mid * (1 - 2 ** -40), mid * (1 + 2 ** -40)]) probe(sg * x);
        }
      }
    }
    for (const x of [c.max * 1.01, c.max * 1.5, 1e30, Infinity, -Infinity, 0, -0, 1e-30, -1e-30]) probe(x);
    for (let i = 0; i < 20000; i++) probe((rand() - 0.5) * 2 ** (Math.floor(rand() * 40) - 20));
  }
  return n;
}
