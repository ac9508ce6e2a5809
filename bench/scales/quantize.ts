/**
 * The tool's own quantizers (round to nearest even, exact codecs), for every granularity the RFC
 * 0002 scale table names, and the memory images the library consumes.
 *
 * An operand is viewed as a 3-D grid [A, B, C] (src: [1, total_M, K]; weights: [E, K, N]); the scale
 * of element (a, b, c) is `scales[aPart[a] + bPart[b] + cPart[c]]`, which covers per tensor, per
 * expert, per row, per column, K-blocks and 2-D blocks with one loop.
 */
import { dtBytes, encodeArray, pack4, type DataType } from '../../src/index.js';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../../src/index.js';
import { e8m0FromExponent, e8m0ToF32, f32ToF8E4m3, f8E4m3ToF32, roundHalfEven, toE8m0 } from '../../src/common/low_precision.js';
import { codec, type ElemType } from './codecs.js';

/** How one operand is quantized. */
export type SrcGran =
  | { kind: 'none' }
  | { kind: 'tensor' }
  | { kind: 'expert' }
  | { kind: 'row' }
  | { kind: 'rowblock'; gK: number };

export type WeiGran =
  | { kind: 'none' }
  | { kind: 'tensor' }
  | { kind: 'expert' }
  | { kind: 'col' }
  | { kind: 'kblock'; gK: number }
  | { kind: 'block2d'; gK: number; gN: number };

/**
 * - `absmax`: symmetric, scale = amax / max(elem), rounded to the scale data type;
 * - `asym`: integer with zero point, scale = (max - min) / (qmax - qmin), zp = RNE(-min / s) + qmin;
 * - `mx`: OCP MX v1.0, scale = 2^(floor(log2 amax) - emax_elem) in e8m0 (amax / scale can exceed
 *   the element's max, e.g. up to 511 > 448 for e4m3: the block maximum saturates);
 * - `mx-ceil`: e8m0 scale 2^ceil(log2(amax / max_elem)): never saturates, up to 1 bit of range lost;
 * - `nv`: NVFP4, per-expert (weights) / per-tensor (src) f32 global scale amax / (448 * 6) and an
 *   f8_e4m3 block scale (block amax / 6) / global.
 */
export type ScaleMethod = 'absmax' | 'asym' | 'mx' | 'mx-ceil' | 'nv';

export interface QuantSpec {
  readonly dt: ElemType;
  readonly method: ScaleMethod;
  /** Data type of the stored scales (f32 unless said otherwise; e8m0 for mx, f8_e4m3 for nv). */
  readonly scaleDt: DataType;
  /** Data type of the stored zero points (asym). */
  readonly zpDt?: DataType;
}

/** Scale (or zero-point) values as the library reads them: attribute mask/groups and a memory image. */
export interface AttrTensor {
  readonly mask: number;
  readonly groups: readonly number[];
  readonly dims: readonly number[];
  readonly dt: DataType;
  /** The memory image: dtBytes(dt, count) bytes. */
  readonly bytes: Uint8Array;
  /** Decoded values, one per stored entry. */
  readonly values: Float64Array;
}

export interface QTensor {
  readonly dt: DataType;
  /** Memory image of the values (4-bit types packed two per byte). */
  readonly bytes: Uint8Array;
  /** Element codes (the integer value for s8/s4/u8/u4), one per element; for bit-exact comparisons. */
  readonly codes: Int32Array;
  /** Dequantized values (q - zp) * s (* global for nv), in the operand's row-major layout. */
  readonly deq: Float64Array;
  readonly scales?: AttrTensor;
  readonly zeroPoints?: AttrTensor;
  /** nv: the f32 global factor per expert (weights) or for the whole tensor (src, one entry). */
  readonly global?: Float32Array;
  /** Who produced it: `tool` or the library helper's name. */
  readonly by: string;
}

interface Grid {
  readonly A: number;
  readonly B: number;
  readonly C: number;
  readonly aPart: Int32Array;
  readonly bPart: Int32Array;
  readonly cPart: Int32Array;
  readonly nScales: number;
  /** Index of the nv global factor of slab a (src: always 0). */
  readonly globalOf: (a: number) => number;
  readonly nGlobal: number;
}

const range = (n: number, f: (i: number) => number): Int32Array => Int32Array.from({ length: n }, (_, i) => f(i));

function srcGrid(totalM: number, K: number, G: number, rowExpert: Int32Array, g: SrcGran): Grid {
  const base = { A: 1, B: totalM, C: K, aPart: new Int32Array(1), globalOf: () => 0, nGlobal: 1 };
  switch (g.kind) {
    case 'none':
    case 'tensor': return { ...base, bPart: new Int32Array(totalM), cPart: new Int32Array(K), nScales: 1 };
    case 'expert': return { ...base, bPart: Int32Array.from(rowExpert), cPart: new Int32Array(K), nScales: G };
    case 'row': return { ...base, bPart: range(totalM, (m) => m), cPart: new Int32Array(K), nScales: totalM };
    case 'rowblock': {
      const kb = K / g.gK;
      return { ...base, bPart: range(totalM, (m) => m * kb), cPart: range(K, (k) => Math.floor(k / g.gK)), nScales: totalM * kb };
    }
  }
}

function weiGrid(E: number, K: number, N: number, g: WeiGran): Grid {
  const base = { A: E, B: K, C: N, globalOf: (a: number) => a, nGlobal: E };
  const zK = new Int32Array(K), zN = new Int32Array(N);
  switch (g.kind) {
    case 'none':
    case 'tensor': return { ...base, aPart: new Int32Array(E), bPart: zK, cPart: zN, nScales: 1 };
    case 'expert': return { ...base, aPart: range(E, (e) => e), bPart: zK, cPart: zN, nScales: E };
    case 'col': return { ...base, aPart: range(E, (e) => e * N), bPart: zK, cPart: range(N, (n) => n), nScales: E * N };
    case 'kblock': {
      const kb = K / g.gK;
      return { ...base, aPart: range(E, (e) => e * kb * N), bPart: range(K, (k) => Math.floor(k / g.gK) * N), cPart: range(N, (n) => n), nScales: E * kb * N };
    }
    case 'block2d': {
      const kb = K / g.gK, nb = N / g.gN;
      return { ...base, aPart: range(E, (e) => e * kb * nb), bPart: range(K, (k) => Math.floor(k / g.gK) * nb), cPart: range(N, (n) => Math.floor(n / g.gN)), nScales: E * kb * nb };
    }
  }
}

/** Attribute mask, groups and scale dims of a src granularity (RFC 0002 section 2). */
export function srcAttrShape(g: SrcGran, G: number, totalM: number, K: number): { mask: number; groups: number[]; dims: number[] } {
  switch (g.kind) {
    case 'none':
    case 'tensor':
    case 'expert': return { mask: 0, groups: [], dims: [G] };
    case 'row': return { mask: 1, groups: [], dims: [totalM] };
    case 'rowblock': return { mask: 3, groups: [1, g.gK], dims: [totalM, K / g.gK] };
  }
}

export function weiAttrShape(g: WeiGran, E: number, K: number, N: number): { mask: number; groups: number[]; dims: number[] } {
  switch (g.kind) {
    case 'none':
    case 'tensor': return { mask: 0, groups: [], dims: [1] };
    case 'expert': return { mask: 1, groups: [], dims: [E] };
    case 'col': return { mask: 5, groups: [], dims: [E, N] };
    case 'kblock': return { mask: 7, groups: [1, g.gK, 1], dims: [E, K / g.gK, N] };
    case 'block2d': return { mask: 7, groups: [1, g.gK, g.gN], dims: [E, K / g.gK, N / g.gN] };
  }
}

/** Rounds a scale to its stored type and returns [decoded value, stored code]. */
function roundScale(dt: DataType, s: number): [number, number] {
  switch (dt) {
    case 'f32': return [Math.fround(s), Math.fround(s)];
    case 'bf16': { const c = f32ToBf16(s); return [bf16ToF32(c), bf16ToF32(c)]; }
    case 'f16': { const c = f32ToF16(s); return [f16ToF32(c), f16ToF32(c)]; }
    case 'e8m0': { const c = toE8m0(s, 'floor'); return [e8m0ToF32(c), c]; }
    case 'f8_e4m3': { const c = f32ToF8E4m3(s); return [f8E4m3ToF32(c), c]; }
    default: throw new Error(`scales: unsupported scale data type ${dt}`);
  }
}

export function imageOfCodes(dt: ElemType, codes: Int32Array): Uint8Array {
  switch (dt) {
    case 's4':
    case 'u4':
    case 'f4_e2m1': return pack4(codes);
    case 's8':
    case 'u8':
    case 'f8_e4m3':
    case 'f8_e5m2': {
      const out = new Uint8Array(codes.length);
      for (let i = 0; i < codes.length; i++) out[i] = codes[i] & 0xff;
      return out;
    }
    case 'bf16':
    case 'f16': return new Uint8Array(Uint16Array.from(codes).buffer);
    case 'f32': throw new Error('scales: f32 values have no code image');
  }
}

interface QuantOut {
  codes: Int32Array;
  deq: Float64Array;
  scaleVals: Float64Array;
  scaleStored: number[];
  zp?: Float64Array;
  global?: Float32Array;
}

/** Pass 1: per-scale absolute maximum, minimum and maximum. */
function statsPass(x: ArrayLike<number>, grid: Grid, amax: Float64Array, vmin: Float64Array, vmax: Float64Array): void {
  const { A, B, C, aPart, bPart, cPart } = grid;
  for (let a = 0, i = 0; a < A; a++) {
    for (let b = 0; b < B; b++) {
      const sb = aPart[a] + bPart[b];
      for (let c = 0; c < C; c++, i++) {
        const v = x[i], si = sb + cPart[c];
        const av = v < 0 ? -v : v;
        if (av > amax[si]) amax[si] = av;
        if (v < vmin[si]) vmin[si] = v;
        if (v > vmax[si]) vmax[si] = v;
      }
    }
  }
}

/** Pass 2: q = encode(x / s), or clamp(RNE(x / s) + zp) with zero points; deq = (decode(q) - zp) * s. */
function encodePass(x: ArrayLike<number>, grid: Grid, eff: Float64Array, zp: Float64Array | undefined, enc: (v: number) => number, dec: (c: number) => number, codes: Int32Array, deq: Float64Array): void {
  const { A, B, C, aPart, bPart, cPart } = grid;
  const zero = enc(0);
  for (let a = 0, i = 0; a < A; a++) {
    for (let b = 0; b < B; b++) {
      const sb = aPart[a] + bPart[b];
      for (let c = 0; c < C; c++, i++) {
        const si = sb + cPart[c];
        const s = eff[si];
        if (s === 0) {
          codes[i] = zero;
          deq[i] = 0;
        } else if (zp) {
          const q = enc(roundHalfEven(x[i] / s) + zp[si]); // RFC 0002: clamp(RNE(x / s) + zp), integer types only
          codes[i] = q;
          deq[i] = (dec(q) - zp[si]) * s;
        } else {
          const q = enc(x[i] / s);
          codes[i] = q;
          deq[i] = dec(q) * s;
        }
      }
    }
  }
}

/** The quantizer core over a grid. */
function quantizeGrid(x: ArrayLike<number>, grid: Grid, spec: QuantSpec): QuantOut {
  const { A, B, C, aPart, bPart, cPart, nScales } = grid;
  const cd = codec(spec.dt);
  const n = A * B * C;
  const codes = new Int32Array(n);
  const deq = new Float64Array(n);
  const amax = new Float64Array(nScales);
  const vmin = new Float64Array(nScales).fill(Infinity);
  const vmax = new Float64Array(nScales).fill(-Infinity);
  statsPass(x, grid, amax, vmin, vmax);
  const scaleVals = new Float64Array(nScales);
  const scaleStored: number[] = new Array<number>(nScales);
  let zp: Float64Array | undefined;
  let global: Float32Array | undefined;
  let eff = scaleVals; // the factor an element is divided by
  switch (spec.method) {
    case 'absmax':
      for (let s = 0; s < nScales; s++) {
        const [v, st] = roundScale(spec.scaleDt, amax[s] > 0 ? amax[s] / cd.max : 1);
        scaleVals[s] = v;
        scaleStored[s] = st;
      }
      break;
    case 'asym': {
      zp = new Float64Array(nScales);
      for (let s = 0; s < nScales; s++) {
        const lo = vmin[s], hi = vmax[s]; // RFC 0002 section 5: s = (max - min) / (qmax - qmin)
        const [v, st] = roundScale(spec.scaleDt, hi > lo ? (hi - lo) / (cd.max - cd.min) : 1);
        scaleVals[s] = v;
        scaleStored[s] = st;
        zp[s] = Math.max(cd.min, Math.min(cd.max, roundHalfEven(-lo / v) + cd.min));
      }
      break;
    }
    case 'mx':
      for (let s = 0; s < nScales; s++) {
        // shared exponent = floor(log2(amax)) - emax_elem (exact floor via toE8m0), clamped to e8m0.
        const e = amax[s] > 0 ? toE8m0(amax[s], 'floor') - 127 - cd.emax : -127;
        const code = e8m0FromExponent(Math.max(-127, e));
        scaleStored[s] = code;
        scaleVals[s] = e8m0ToF32(code);
      }
      break;
    case 'mx-ceil':
      for (let s = 0; s < nScales; s++) {
        const code = amax[s] > 0 ? toE8m0(amax[s] / cd.max, 'ceil') : 0;
        scaleStored[s] = code;
        scaleVals[s] = e8m0ToF32(code);
      }
      break;
    case 'nv': {
      const gAmax = new Float64Array(grid.nGlobal);
      for (let a = 0; a < A; a++) {
        const gi = grid.globalOf(a);
        for (let b = 0; b < B; b++) {
          const sb = aPart[a] + bPart[b];
          for (let c = 0; c < C; c++) gAmax[gi] = Math.max(gAmax[gi], amax[sb + cPart[c]]);
        }
      }
      global = Float32Array.from(gAmax, (v) => (v > 0 ? v / (448 * 6) : 1));
      // The global factor of every scale block (blocks never straddle experts).
      const gOf = new Float64Array(nScales);
      for (let a = 0; a < A; a++) {
        const gv = global[grid.globalOf(a)];
        for (let b = 0; b < B; b++) {
          const sb = aPart[a] + bPart[b];
          for (let c = 0; c < C; c++) gOf[sb + cPart[c]] = gv;
        }
      }
      eff = new Float64Array(nScales);
      for (let s = 0; s < nScales; s++) {
        const code = f32ToF8E4m3(amax[s] / cd.max / gOf[s]);
        scaleStored[s] = code;
        scaleVals[s] = f8E4m3ToF32(code);
        eff[s] = scaleVals[s] * gOf[s];
      }
      break;
    }
  }
  encodePass(x, grid, eff, zp, cd.encode, cd.decode, codes, deq);
  return { codes, deq, scaleVals, scaleStored, zp, global };
}

function attrTensor(shape: { mask: number; groups: number[]; dims: number[] }, dt: DataType, stored: number[], decoded: ArrayLike<number>): AttrTensor {
  const codesDt = dt === 'e8m0' || dt === 'f8_e4m3';
  const count = shape.dims.reduce((p, d) => p * d, 1);
  if (stored.length !== count) throw new Error(`scales: ${stored.length} scale values for dims [${shape.dims.join(',')}]`);
  const bytes = codesDt ? Uint8Array.from(stored) : encodeArray(dt, stored);
  const values = new Float64Array(count);
  for (let i = 0; i < count; i++) values[i] = decoded[i % decoded.length];
  if (bytes.length !== dtBytes(dt, count)) throw new Error('scales: scale image size mismatch');
  return { ...shape, dt, bytes, values };
}

/** Unquantized operand in a plain float type (f32 / bf16 / f16). */
export function plainOperand(x: Float32Array, dt: 'f32' | 'bf16' | 'f16'): QTensor {
  const cd = codec(dt);
  const codes = new Int32Array(x.length);
  const deq = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const c = cd.encode(x[i]);
    deq[i] = cd.decode(c);
    if (dt !== 'f32') codes[i] = c;
  }
  const bytes = dt === 'f32' ? new Uint8Array(Float32Array.from(x).buffer) : imageOfCodes(dt, codes);
  return { dt, bytes, codes, deq, by: 'tool' };
}

/** Quantizes grouped src [totalM, K]. */
export function quantizeSrc(x: Float32Array, totalM: number, K: number, G: number, rowExpert: Int32Array, gran: SrcGran, spec: QuantSpec): QTensor {
  const grid = srcGrid(totalM, K, G, rowExpert, gran);
  const q = quantizeGrid(x, grid, spec);
  const shape = srcAttrShape(gran, G, totalM, K);
  let stored = q.scaleStored, decoded: ArrayLike<number> = q.scaleVals;
  if (gran.kind === 'tensor') {
    stored = new Array<number>(G).fill(q.scaleStored[0]);
    decoded = new Float64Array(G).fill(q.scaleVals[0]);
  }
  const scales = attrTensor(shape, spec.scaleDt, stored, decoded);
  const zeroPoints = q.zp ? attrTensor(shape, spec.zpDt ?? 's32', Array.from(q.zp), q.zp) : undefined;
  return { dt: spec.dt, bytes: imageOfCodes(spec.dt, q.codes), codes: q.codes, deq: q.deq, scales, zeroPoints, global: q.global, by: 'tool' };
}

/** Quantizes weights [E, K, N]. */
export function quantizeWei(x: Float32Array, E: number, K: number, N: number, gran: WeiGran, spec: QuantSpec): QTensor {
  const grid = weiGrid(E, K, N, gran);
  const q = quantizeGrid(x, grid, spec);
  const shape = weiAttrShape(gran, E, K, N);
  const scales = attrTensor(shape, spec.scaleDt, q.scaleStored, q.scaleVals);
  const zeroPoints = q.zp ? attrTensor(shape, spec.zpDt ?? 's32', Array.from(q.zp), q.zp) : undefined;
  return { dt: spec.dt, bytes: imageOfCodes(spec.dt, q.codes), codes: q.codes, deq: q.deq, scales, zeroPoints, global: q.global, by: 'tool' };
}
