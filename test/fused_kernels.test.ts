/**
 * The fused kernel paths (wasm/src/gemm-fused.c, s16-gemm-4x8-wasmsimd.c, vmath.h, lowp.h) against
 * the reference implementation run on a kernel-less engine with the same inputs:
 *  - the vector math (exp, logistic, tanh, erf, GELUs) against double-precision truth;
 *  - every element codec the kernels use (decoders exhaustively, dst encoders on hard values);
 *  - whole problems on every path (f32, f32 fused, int8) with integer data and power-of-two scales:
 *    results must be bit-identical to the reference, on 1 and 2 threads, plain and packed weights.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, offsets, reorder, tag,
  toStored, fromStored, type BinaryAlg, type DataType, type EltwiseAlg, type GluAlg, type GluLayout,
} from '../src/index.js';
import { JOB_DT_ALL } from '../src/runtime/job_layout.js';
import { mulberry32, type Rng } from './workloads.js';

const RT = RUNTIME_DIM_VAL;

// ------------------------------------------------------------------------------------------------
// Double-precision truth for the vector math

function erfcD(a: number): number {
  if (a < 2.5) return 1 - erfD(a);
  let f = 0;
  for (let n = 80; n >= 1; n--) f = n / 2 / (a + f);
  return Math.exp(-a * a) / Math.sqrt(Math.PI) / (a + f);
}

function erfD(x: number): number {
  const a = Math.abs(x);
  let r: number;
  if (a < 2.5) {
    let term = a, sum = a;
    for (let n = 1; n < 200; n++) {
      term *= (-a * a) / n;
      const t = term / (2 * n + 1);
      sum += t;
      if (Math.abs(t) < 1e-18 * Math.abs(sum)) break;
    }
    r = (2 / Math.sqrt(Math.PI)) * sum;
  } else {
    r = 1 - erfcD(a);
  }
  return x < 0 ? -r : r;
}

const sigmoidD = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));

/**
 * job eltwise code -> [name, truth, relative bound over |x| <= range, range]. The elementary functions
 * are within 1e-6; the composites inherit the f32 rounding of their inner argument (relative error
 * about |d log f / d log arg| * 2^-24, e.g. 2 z^2 2^-24 for erfc(z)), hence their ranges and bounds.
 */
const VMATH: ReadonlyArray<readonly [number, string, (x: number) => number, number, number]> = [
  [11, 'exp', Math.exp, 1e-6, 88],
  [9, 'logistic', sigmoidD, 1e-6, 87],
  [10, 'tanh', Math.tanh, 1e-6, 50],
  [100, 'erf', erfD, 1e-6, 10],
  [8, 'swish (alpha 1.5)', (x) => x * sigmoidD(1.5 * x), 4e-6, 30],
  [7, 'gelu_tanh', (x) => x * sigmoidD(2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)), 1e-6, 3],
  [7, 'gelu_tanh (tail)', (x) => x * sigmoidD(2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)), 1e-5, 6],
  [6, 'gelu_erf', (x) => (x < -Math.SQRT2 ? 0.5 * x * erfcD(-x / Math.SQRT2) : 0.5 * x * (1 + erfD(x / Math.SQRT2))), 1e-6, 3],
  [6, 'gelu_erf (tail)', (x) => (x < -Math.SQRT2 ? 0.5 * x * erfcD(-x / Math.SQRT2) : 0.5 * x * (1 + erfD(x / Math.SQRT2))), 1e-5, 8],
];

describe('fused kernels: vector math and codecs', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'simd128' });
  });
  afterAll(() => eng.release());

  it.each(VMATH.map((v) => [v[1], v] as const))('%s: relative error vs double below the bound', (_n, [code, , truth, bound, range]) => {
    const k = eng.kernels!;
    const n = 1 << 15;
    const inP = eng.alloc(n * 4), outP = eng.alloc(n * 4);
    const rng = mulberry32(code);
    let worst = 0, at = 0;
    for (let round = 0; round < 4; round++) {
      const xs = new Float32Array(eng.buffer, inP, n);
      for (let i = 0; i < n; i++) {
        const u = rng();
        xs[i] = round % 2 ? (u - 0.5) * 2 * range : (rng() < 0.5 ? -1 : 1) * Math.min(range, 2 ** (-20 + 27 * u));
      }
      k.check_eltwise(code, 1.5, 0, inP, outP, n);
      const ys = new Float32Array(eng.buffer, outP, n);
      for (let i = 0; i < n; i++) {
        const t = truth(xs[i]);
        if (!Number.isFinite(t) || Math.abs(t) < 1.2e-38 || Math.abs(t) > 3.4e38) continue;
        const e = Math.abs(ys[i] - t) / Math.abs(t);
        if (e > worst) { worst = e; at = xs[i]; }
      }
    }
    expect(worst, `worst at x = ${at}`).toBeLessThan(bound);
    eng.free(inP);
    eng.free(outP);
  });

  it('exp saturates to Inf / 0 and keeps NaN', () => {
    const k = eng.kernels!;
    const p = eng.alloc(16), q = eng.alloc(16);
    new Float32Array(eng.buffer, p, 4).set([89, -104, Number.NaN, 0]);
    k.check_eltwise(11, 0, 0, p, q, 4);
    expect(Array.from(new Float32Array(eng.buffer, q, 4))).toEqual([Infinity, 0, NaN, 1]);
    eng.free(p);
    eng.free(q);
  });

  it.each(['s8', 'u8', 's4', 'u4', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1', 'e8m0', 'bf16', 'f16', 's32'] as const)('decoder %s matches the TypeScript codec on every code', (t) => {
    const k = eng.kernels!;
    const four = t === 's4' || t === 'u4' || t === 'f4_e2m1';
    const count = t === 'bf16' || t === 'f16' ? 65536 : t === 's32' ? 4096 : four ? 16 : 256;
    const bytes = t === 'bf16' || t === 'f16' ? 2 : t === 's32' ? 4 : 1;
    const inP = eng.alloc(count * bytes), outP = eng.alloc(count * 4);
    const raw = new Uint8Array(eng.buffer, inP, count * bytes);
    const codes: number[] = [];
    for (let c = 0; c < count; c++) {
      const code = t === 's32' ? (c - 2048) * 1048573 : c;
      codes.push(code);
      if (four) raw[c >> 1] = c & 1 ? (raw[c >> 1] & 0xf) | (c << 4) : c;
      else if (bytes === 2) new Uint16Array(eng.buffer, inP, count)[c] = c;
      else if (bytes === 4) new Int32Array(eng.buffer, inP, count)[c] = code;
      else raw[c] = c;
    }
    k.check_decode(JOB_DT_ALL[t], inP, outP, count);
    const got = new Float32Array(eng.buffer, outP, count);
    for (let c = 0; c < count; c++) {
      const want = t === 's8' ? (codes[c] << 24) >> 24 : t === 's32' ? Math.fround(codes[c]) : fromStored(t, codes[c]);
      expect(Object.is(got[c], Math.fround(want)) || (Number.isNaN(got[c]) && Number.isNaN(want)), `${t} code ${c}: ${got[c]} vs ${want}`).toBe(true);
    }
    eng.free(inP);
    eng.free(outP);
  });

  it.each(['s8', 'u8', 's32', 'f8_e4m3', 'f8_e5m2', 'bf16', 'f16'] as const)('dst encoder %s: round to nearest even and saturation as toStored', (t) => {
    const k = eng.kernels!;
    const rng = mulberry32(7);
    const vals: number[] = [0, -0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, 128, -128.5, -129, 254.5, 255.5, 256, 300, -300,
      448, 464, 465, 480, 57344, 61440, 1e10, -1e10, 2147483520, 2147483648, -2147483648, -2147483904, Infinity, -Infinity, NaN,
      1e-3, 2 ** -10, 2 ** -17, 2 ** -16, 3 * 2 ** -18, 2 ** -9, 2 ** -10, 1.25 * 2 ** -9, 0.1, -0.1, 1 / 3];
    for (let i = 0; i < 4000; i++) vals.push(Math.fround((rng() - 0.5) * 2 ** (rng() * 40 - 20)));
    const n = vals.length;
    const bytes = t === 's32' ? 4 : t === 'bf16' || t === 'f16' ? 2 : 1;
    const inP = eng.alloc(n * 4), outP = eng.alloc(n * bytes);
    new Float32Array(eng.buffer, inP, n).set(vals);
    k.check_encode(JOB_DT_ALL[t], inP, outP, n);
    const out = t === 's32' ? new Int32Array(eng.buffer, outP, n) : t === 's8' ? new Int8Array(eng.buffer, outP, n) : bytes === 2 ? new Uint16Array(eng.buffer, outP, n) : new Uint8Array(eng.buffer, outP, n);
    for (let i = 0; i < n; i++) {
      const x = Math.fround(vals[i]);
      const want = toStored(t, x);
      if (Number.isNaN(x) && (t === 'bf16' || t === 'f16')) continue; // NaN payloads: any quiet NaN
      expect(out[i], `${t}(${x})`).toBe(t === 's8' ? (want << 24) >> 24 : t === 's32' ? want | 0 : want);
    }
    eng.free(inP);
    eng.free(outP);
  });
});

// ------------------------------------------------------------------------------------------------
// Whole problems: wasm against the reference, same inputs

type QSpec = readonly [mask: number, groups: readonly number[], dataType: DataType];
type Op =
  | { readonly kind: 'eltwise'; readonly alg: EltwiseAlg; readonly alpha?: number; readonly beta?: number }
  | { readonly kind: 'sum'; readonly scale: number }
  | { readonly kind: 'binary'; readonly alg: BinaryAlg; readonly shape: 'MN' | 'M1' | 'G1' | 'GN' | 'G1N' | 'gMN' | 'gM1' };

interface Case {
  readonly name: string;
  readonly kind?: 'P1' | 'P2' | 'dense';
  readonly G?: number;
  readonly sizes?: readonly number[];
  readonly K: number;
  readonly N: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly biasDt?: DataType;
  readonly packed?: boolean;
  readonly scales?: { readonly src?: QSpec; readonly weights?: QSpec; readonly dst?: QSpec };
  readonly zps?: { readonly src?: QSpec; readonly weights?: QSpec; readonly dst?: QSpec };
  readonly bigSrcZp?: boolean;
  readonly glu?: readonly [GluAlg, GluLayout];
  readonly ops?: readonly Op[];
  /** Relative tolerance (0: bit-identical). */
  readonly tol?: number;
}

/** Exact small values of a type. */
function valuesOf(t: DataType, rng: Rng, n: number, small = false): number[] {
  const r = (lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    switch (t) {
      case 's8': out.push(small ? r(-4, 4) : r(-128, 127)); break;
      case 'u8': out.push(small ? r(0, 6) : r(0, 255)); break;
      case 's4': out.push(r(-8, 7)); break;
      case 'u4': out.push(r(0, 15)); break;
      case 's32': out.push(r(-5, 5)); break;
      case 'f4_e2m1': out.push([0, 0.5, 1, 1.5, 2, 3, 4, 6][r(0, 7)] * (rng() < 0.5 ? -1 : 1)); break;
      case 'f8_e4m3':
      case 'f8_e5m2': out.push(r(-12, 12) / 4); break;
      default: out.push(r(-8, 8) / 2); break;
    }
  }
  return out;
}

const pow2 = (rng: Rng, n: number): number[] => Array.from({ length: n }, () => 2 ** Math.floor(rng() * 5 - 2));

interface Built {
  readonly out: Float64Array;
  readonly implInfo: string;
}

async function runCase(eng: Engine, c: Case): Promise<Built> {
  const strm = new Stream(eng);
  const kind = c.kind ?? 'P1';
  const G = kind === 'dense' ? 1 : (c.G ?? c.sizes!.length);
  const sizes = c.sizes ?? [5];
  const T = sizes.reduce((a, b) => a + b, 0) + (kind === 'dense' ? 0 : 2);
  const { K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const sdt = c.srcDt ?? dt.f32, wdt = c.weiDt ?? dt.f32, ddt = c.dstDt ?? dt.f32;
  const rng = mulberry32(K * 131 + N * 7 + T);
  const srcMd = kind === 'P1' ? memory.desc.grouped([T, K], sdt, G, [RT, K]) : memory.desc([T, K], sdt, tag.ab);
  const dstMd = kind === 'P1' ? memory.desc.grouped([T, Nd], ddt, G, [RT, Nd]) : memory.desc([T, Nd], ddt, tag.ab);
  const weiDims = kind === 'dense' ? [K, N] : [G, K, N];
  const userWeiMd = memory.desc(weiDims, wdt, kind === 'dense' ? tag.ab : tag.abc);
  const biasMd = c.biasDt ? memory.desc(kind === 'dense' ? [1, N] : [G, N], c.biasDt, tag.ab) : undefined;
  const attr = new PrimitiveAttr();
  if (kind === 'P2') attr.setGroupedOffsets(ARG.SRC, G);
  const id = { src: ARG.SRC, weights: ARG.WEIGHTS, dst: ARG.DST } as const;
  for (const a of ['src', 'weights', 'dst'] as const) {
    const s = c.scales?.[a];
    if (s) attr.setScales(id[a], s[0], [...s[1]], s[2]);
    const z = c.zps?.[a];
    if (z) attr.setZeroPoints(id[a], z[0], [...z[1]], z[2]);
  }
  if (c.glu) attr.postOps.appendGlu(c.glu[0], c.glu[1]);
  const binShape = (s: Extract<Op, { kind: 'binary' }>['shape']): MemoryDesc => {
    switch (s) {
      case 'MN': return memory.desc([T, Nd], dt.f32, tag.ab);
      case 'M1': return memory.desc([T, 1], dt.f32, tag.ab);
      case 'G1': return memory.desc([G, 1], dt.f32, tag.ab);
      case 'GN': return memory.desc([G, Nd], dt.f32, tag.ab);
      case 'G1N': return memory.desc([G, 1, Nd], dt.f32, tag.abc);
      case 'gMN': return memory.desc.grouped([T, Nd], dt.f32, G, [RT, Nd]);
      case 'gM1': return memory.desc.grouped([T, 1], dt.f32, G, [RT, 1]);
    }
  };
  for (const op of c.ops ?? []) {
    if (op.kind === 'eltwise') attr.postOps.appendEltwise(op.alg, op.alpha ?? 0, op.beta ?? 0);
    else if (op.kind === 'sum') attr.postOps.appendSum(op.scale);
    else attr.postOps.appendBinary(op.alg, binShape(op.shape));
  }
  const weiReq = c.packed ? memory.desc(weiDims, wdt, tag.any) : userWeiMd;
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiReq, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiReq, dstMd, attr);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, share?: number): Memory => {
    const m = Memory.create(md, eng, share === undefined ? undefined : [undefined, share]);
    mems.push(m);
    return m;
  };
  const src = mk(srcMd);
  src.write(valuesOf(sdt, rng, src.elementCount, !!c.zps?.src));
  let offsMem: Memory | undefined;
  if (kind === 'P1') offsets.fromSizes(sizes, src.offsets);
  const dst = mk(dstMd, kind === 'P1' ? src.handles[1] : undefined);
  dst.write(valuesOf(ddt === 'f32' || ddt === 'bf16' || ddt === 'f16' ? 'f32' : ddt === 'u8' ? 'u8' : 's32', rng, dst.elementCount, true));
  const userWei = mk(userWeiMd);
  userWei.write(valuesOf(wdt, rng, userWei.elementCount, true));
  let wei = userWei;
  if (c.packed) {
    const wmd = pd.queryMd('weights')!;
    if (!wmd.equals(userWeiMd)) {
      wei = mk(wmd);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, wmd)).execute(strm, { [ARG.FROM]: userWei, [ARG.TO]: wei });
    }
  }
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (kind === 'P2') {
    offsMem = mk(pd.queryMd('grouped_offsets')!);
    offsets.fromSizes(sizes, offsMem.values as Int32Array);
    args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = offsMem;
  }
  if (biasMd) {
    const b = mk(biasMd);
    b.write(valuesOf('f32', rng, b.elementCount));
    args[ARG.BIAS] = b;
  }
  for (const a of ['src', 'weights', 'dst'] as const) {
    for (const [k, base] of [['scales', ARG.ATTR_SCALES], ['zero_points', ARG.ATTR_ZERO_POINTS]] as const) {
      const md = pd.queryMd(`${k}:${a}`);
      if (!md) continue;
      const m = mk(md);
      const zdt = (k === 'scales' ? c.scales : c.zps)![a]![2];
      if (k === 'scales') m.write(pow2(rng, m.elementCount));
      else if (c.bigSrcZp && a === 'src') m.write(Array.from({ length: m.elementCount }, (_, i) => (i % 2 ? 40000 : -3)));
      else m.write(valuesOf(zdt === 'u8' || zdt === 'u4' ? 'u4' : 's4', rng, m.elementCount).map((v) => (zdt === 'u8' || zdt === 'u4' ? v % 5 : Math.max(-3, Math.min(3, v)))));
      args[base | id[a]] = m;
    }
  }
  (c.ops ?? []).forEach((op, i) => {
    if (op.kind !== 'binary') return;
    const md = pd.queryMd(`binary:${i + (c.glu ? 1 : 0)}`)!;
    const m = mk(md, md.isGrouped ? src.handles[1] : undefined);
    m.write(valuesOf('f32', rng, m.elementCount));
    args[ARG.ATTR_MULTIPLE_POST_OP(i + (c.glu ? 1 : 0)) | ARG.SRC_1] = m;
  });
  new matmul.Primitive(pd).execute(strm, args);
  await strm.wait();
  const out = dst.read();
  mems.forEach((m) => m.free());
  return { out, implInfo: pd.implInfo };
}

const S8 = dt.s8, U8 = dt.u8;
const SHAPE = { sizes: [5, 0, 67, 1, 9], K: 37, N: 24 } as const;

const CASES: Case[] = [
  // int8 path
  { name: 'int: s8 x s8 -> f32, per-row src x per-column weights scales, bias', ...SHAPE, srcDt: S8, weiDt: S8, biasDt: dt.f32, scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32] } },
  { name: 'int: same, packed s16 weights', ...SHAPE, srcDt: S8, weiDt: S8, biasDt: dt.f32, packed: true, scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32] } },
  { name: 'int: u8 x s4 packed, zero points on src (per row) and weights (per column), dst s8 with scale and zp', ...SHAPE, srcDt: U8, weiDt: dt.s4, dstDt: S8, packed: true, scales: { src: [0, [], dt.bf16], weights: [1, [], dt.e8m0], dst: [0, [], dt.f32] }, zps: { src: [1, [], dt.u8], weights: [5, [], dt.s8], dst: [0, [], dt.s32] } },
  { name: 'int: s8 x u4 plain, per-tensor weights zp, dst u8', ...SHAPE, srcDt: S8, weiDt: dt.u4, dstDt: U8, zps: { weights: [0, [], dt.s32] }, scales: { weights: [0, [], dt.f16] } },
  { name: 'int: s8 x u8, src zero point out of int16 reach (compensation), s32 dst', sizes: [3, 6], K: 16, N: 10, srcDt: S8, weiDt: U8, dstDt: dt.s32, zps: { src: [1, [], dt.s32], weights: [5, [], dt.s32] }, bigSrcZp: true },
  { name: 'int: same, packed', sizes: [3, 6], K: 16, N: 10, srcDt: S8, weiDt: U8, dstDt: dt.s32, packed: true, zps: { src: [1, [], dt.s32] }, bigSrcZp: true },
  { name: 'int: odd K, N not a multiple of 8, bf16 dst', sizes: [7, 2], K: 33, N: 13, srcDt: S8, weiDt: S8, dstDt: dt.bf16, packed: true, scales: { weights: [5, [], dt.f32] } },
  { name: 'int: P2 offsets attribute, f16 dst', kind: 'P2', ...SHAPE, srcDt: S8, weiDt: S8, dstDt: dt.f16, scales: { src: [1, [], dt.f32] } },
  { name: 'int: dense 2D', kind: 'dense', sizes: [70], K: 40, N: 20, srcDt: U8, weiDt: S8, scales: { src: [1, [], dt.f32], weights: [2, [], dt.f32] }, zps: { src: [0, [], dt.s32] } },
  { name: 'int: K-blocked scales take the f32 path', ...SHAPE, srcDt: S8, weiDt: dt.s4, packed: true, scales: { src: [3, [1, 37], dt.f32], weights: [7, [1, 37, 1], dt.f8_e4m3] } },
  // f32 fused path
  { name: 'f32: per-row + per-column scales + bias + swiglu halves', ...SHAPE, N: 32, biasDt: dt.f32, packed: true, scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32] }, glu: ['glu_swiglu', 'halves'], tol: 2e-6 },
  { name: 'f32: swiglu halves with N/2 not a multiple of 8 (repacked panels)', ...SHAPE, N: 28, packed: true, glu: ['glu_swiglu', 'halves'], tol: 2e-6 },
  { name: 'f32: geglu_tanh interleaved, bf16 bias', ...SHAPE, N: 24, biasDt: dt.bf16, glu: ['glu_geglu_tanh', 'interleaved'], tol: 2e-6 },
  { name: 'f32: geglu_erf blocks32', ...SHAPE, N: 192, packed: true, glu: ['glu_geglu_erf', 'blocks32'], tol: 2e-6 },
  { name: 'f32: swiglu_oai halves', ...SHAPE, N: 40, glu: ['glu_swiglu_oai', 'halves'], tol: 2e-6 },
  { name: 'f32: K-blocks and 2D blocks (DeepSeek style)', ...SHAPE, K: 32, scales: { src: [3, [1, 8], dt.f32], weights: [7, [1, 8, 8], dt.e8m0] } },
  { name: 'f32: weight-only s4 with K-blocked zero points and scales', ...SHAPE, K: 32, weiDt: dt.s4, scales: { weights: [7, [1, 16, 1], dt.bf16] }, zps: { weights: [7, [1, 16, 1], dt.s8] } },
  { name: 'f32: weight-only u8 per column, bf16 src, f16 dst', ...SHAPE, srcDt: dt.bf16, weiDt: U8, dstDt: dt.f16, zps: { weights: [5, [], dt.u8] }, scales: { weights: [5, [], dt.f32] } },
  { name: 'f32: MXFP8 (f8_e4m3 x f8_e5m2, e8m0 per 32)', sizes: [4, 9], K: 64, N: 16, srcDt: dt.f8_e4m3, weiDt: dt.f8_e5m2, scales: { src: [3, [1, 32], dt.e8m0], weights: [7, [1, 32, 1], dt.e8m0] } },
  { name: 'f32: MXFP4 to f8_e4m3 dst', sizes: [4, 9], K: 64, N: 16, srcDt: dt.f4_e2m1, weiDt: dt.f4_e2m1, dstDt: dt.f8_e4m3, scales: { src: [3, [1, 32], dt.e8m0], weights: [7, [1, 32, 1], dt.e8m0], dst: [0, [], dt.f32] } },
  { name: 'f32: binary mul/add of every shape, sum, eltwise chain', ...SHAPE, ops: [
    { kind: 'binary', alg: 'binary_mul', shape: 'M1' }, { kind: 'sum', scale: 0.5 }, { kind: 'binary', alg: 'binary_add', shape: 'MN' },
    { kind: 'binary', alg: 'binary_mul', shape: 'G1' }, { kind: 'binary', alg: 'binary_add', shape: 'GN' }, { kind: 'binary', alg: 'binary_add', shape: 'G1N' },
    { kind: 'eltwise', alg: 'eltwise_clip', alpha: -20, beta: 40 }, { kind: 'eltwise', alg: 'eltwise_relu', alpha: 0.25 }] },
  { name: 'f32: grouped binary src1 (P1 partition)', ...SHAPE, ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'gM1' }, { kind: 'binary', alg: 'binary_add', shape: 'gMN' }] },
  { name: 'f32: transcendental eltwise chain', ...SHAPE, ops: [
    { kind: 'eltwise', alg: 'eltwise_linear', alpha: 0.125, beta: 0 }, { kind: 'eltwise', alg: 'eltwise_gelu_erf' }, { kind: 'eltwise', alg: 'eltwise_swish', alpha: 1.5 },
    { kind: 'eltwise', alg: 'eltwise_tanh' }, { kind: 'eltwise', alg: 'eltwise_logistic' }, { kind: 'eltwise', alg: 'eltwise_exp' }, { kind: 'eltwise', alg: 'eltwise_gelu_tanh' }], tol: 1e-5 },
  { name: 'int: swiglu halves with routing weights (binary mul [total_M, 1]) and dst scale, packed', ...SHAPE, N: 48, srcDt: S8, weiDt: S8, packed: true, biasDt: dt.f32,
    scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32], dst: [0, [], dt.f32] }, glu: ['glu_swiglu', 'halves'], ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'M1' }], tol: 2e-6 },
  { name: 'int: P2 + sum + s8 dst', kind: 'P2', ...SHAPE, srcDt: S8, weiDt: S8, dstDt: S8, scales: { weights: [5, [], dt.f32], dst: [0, [], dt.f32] }, ops: [{ kind: 'sum', scale: 1 }] },
];

/** Proposal #3: per-expert memories; per-row values and routing weights as per-expert runtime-row memories. */
async function runP3(eng: Engine, c: Case): Promise<Built> {
  const strm = new Stream(eng);
  const sizes = c.sizes!, G = sizes.length, { K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const sdt = c.srcDt ?? dt.f32, wdt = c.weiDt ?? dt.f32, ddt = c.dstDt ?? dt.f32;
  const rng = mulberry32(K * 31 + N);
  const attr = new PrimitiveAttr();
  const id = { src: ARG.MULTIPLE_SRC, weights: ARG.MULTIPLE_WEIGHTS, dst: ARG.MULTIPLE_DST } as const;
  for (const a of ['src', 'weights', 'dst'] as const) {
    const s = c.scales?.[a];
    if (s) attr.setScales(id[a], s[0], [...s[1]], s[2]);
    const z = c.zps?.[a];
    if (z) attr.setZeroPoints(id[a], z[0], [...z[1]], z[2]);
  }
  if (c.glu) attr.postOps.appendGlu(c.glu[0], c.glu[1]);
  for (const op of c.ops ?? []) {
    if (op.kind === 'eltwise') attr.postOps.appendEltwise(op.alg, op.alpha ?? 0, op.beta ?? 0);
    else if (op.kind === 'sum') attr.postOps.appendSum(op.scale);
    else attr.postOps.appendBinary(op.alg, op.shape === 'M1' ? memory.desc([RT, 1], dt.f32, tag.ab) : memory.desc([1, Nd], dt.f32, tag.ab));
  }
  const srcMds = sizes.map(() => memory.desc([RT, K], sdt, tag.ab)), dstMds = sizes.map(() => memory.desc([RT, Nd], ddt, tag.ab));
  const userMds = sizes.map(() => memory.desc([K, N], wdt, tag.ab));
  const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, c.packed ? sizes.map(() => memory.desc([K, N], wdt, tag.any)) : userMds, dstMds, memory.desc([G], dt.s32, tag.x), attr);
  const mems: Memory[] = [];
  const plain = (dims: number[], t: DataType, small = true): Memory => {
    const m = Memory.create(memory.desc(dims, t, 'ab'.slice(0, dims.length)), eng);
    m.write(t === 'f32' && !small ? pow2(rng, m.elementCount) : valuesOf(t, rng, m.elementCount, small));
    mems.push(m);
    return m;
  };
  const rtView = (md: MemoryDesc, p: Memory): Memory => {
    const m = Memory.create(md, eng, p.handles[0]);
    mems.push(m);
    return m;
  };
  const args: Record<number, Memory> = {};
  const dsts: Memory[] = [];
  for (let i = 0; i < G; i++) {
    args[ARG.MULTIPLE_SRC + i] = rtView(srcMds[i], plain([sizes[i] + 1, K], sdt));
    const d = plain([sizes[i] + 1, Nd], ddt === 'f32' ? 'f32' : 's32');
    dsts.push(d);
    args[ARG.MULTIPLE_DST + i] = rtView(dstMds[i], d);
    const user = plain([K, N], wdt);
    let wei = user;
    const wmd = pd.queryMd('weights', i)!;
    if (c.packed && !wmd.equals(userMds[i])) {
      wei = Memory.create(wmd, eng);
      mems.push(wei);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMds[i], wmd)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei });
    }
    args[ARG.MULTIPLE_WEIGHTS + i] = wei;
    for (const a of ['src', 'weights', 'dst'] as const) {
      for (const [k, base] of [['scales', ARG.ATTR_SCALES], ['zero_points', ARG.ATTR_ZERO_POINTS]] as const) {
        const md = pd.queryMd(`${k}:${a}`, i);
        if (!md) continue;
        const dims = md.dims.map((d) => (d === RT ? sizes[i] + 1 : d));
        const m = plain(dims, md.dataType, k !== 'scales');
        args[base | (id[a] + i)] = md.hasRuntimeDims ? rtView(md, m) : m;
      }
    }
  }
  (c.ops ?? []).forEach((op, j) => {
    if (op.kind !== 'binary') return;
    const pos = j + (c.glu ? 1 : 0);
    if (op.shape === 'M1') for (let i = 0; i < G; i++) args[ARG.ATTR_MULTIPLE_POST_OP(pos) | (ARG.MULTIPLE_SRC + i)] = rtView(pd.queryMd(`binary:${pos}`, i)!, plain([sizes[i] + 1, 1], dt.f32));
    else args[ARG.ATTR_MULTIPLE_POST_OP(pos) | ARG.SRC_1] = plain([1, Nd], dt.f32);
  });
  const dims = Memory.create(memory.desc([G], dt.s32, tag.x), eng);
  mems.push(dims);
  (dims.values as Int32Array).set(sizes);
  args[ARG.RUNTIME_DIMS] = dims;
  new grouped_gemm.Primitive(pd).execute(strm, args);
  await strm.wait();
  const parts = dsts.map((d) => d.read());
  const out = new Float64Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  mems.forEach((m) => m.free());
  return { out, implInfo: pd.implInfo };
}

const P3_CASES: Case[] = [
  { name: 'P3 int: s8 x s8 packed, per-row src and per-column weights scales, swiglu halves, routing weights', sizes: [3, 0, 9, 1], K: 20, N: 32, srcDt: S8, weiDt: S8, packed: true,
    scales: { src: [1, [], dt.f32], weights: [2, [], dt.f32] }, glu: ['glu_swiglu', 'halves'], ops: [{ kind: 'binary', alg: 'binary_mul', shape: 'M1' }], tol: 2e-6 },
  { name: 'P3 int: u8 x u4 plain, zero points, s8 dst', sizes: [5, 2, 7], K: 17, N: 12, srcDt: U8, weiDt: dt.u4, dstDt: S8,
    scales: { src: [0, [], dt.f32], weights: [0, [], dt.e8m0], dst: [0, [], dt.f32] }, zps: { src: [1, [], dt.s32], weights: [2, [], dt.s8] } },
  { name: 'P3 f32: K-block weights scales (fp8 e4m3) + shared [1, N] binary add', sizes: [4, 6], K: 32, N: 16, weiDt: dt.f8_e4m3, srcDt: dt.f8_e4m3,
    scales: { src: [3, [1, 16], dt.f32], weights: [3, [16, 1], dt.e8m0] }, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'GN' }] },
];

function compare(got: Float64Array, want: Float64Array, tol: number): string[] {
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++) {
    const ok = tol === 0 ? Object.is(got[i], want[i]) || (Number.isNaN(got[i]) && Number.isNaN(want[i])) : Math.abs(got[i] - want[i]) <= tol * Math.max(1, Math.abs(want[i]));
    if (!ok) bad.push(`[${i}] got ${got[i]} want ${want[i]}`);
  }
  return bad;
}

describe('fused kernels: whole problems, wasm vs reference', () => {
  const engines: Record<string, Engine> = {};
  beforeAll(async () => {
    engines.ref = await Engine.create({ threads: 1, kernels: 'none' });
    engines.simd = await Engine.create({ threads: 1, kernels: 'simd128' });
    engines.relaxed = await Engine.create({ threads: 1, kernels: 'relaxed' });
    engines.t2 = await Engine.create({ threads: 2, kernels: 'simd128' });
  });
  afterAll(() => Object.values(engines).forEach((e) => e.release()));

  it.each(P3_CASES.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const want = await runP3(engines.ref, c);
    expect(want.implInfo).toBe('ref:any');
    const got1 = await runP3(engines.simd, c);
    expect(got1.implInfo).toMatch(/^wasm:/);
    expect(compare(got1.out, want.out, c.tol ?? 0).slice(0, 5)).toEqual([]);
    const got2 = await runP3(engines.t2, c);
    expect(compare(got2.out, got1.out, 0).slice(0, 5), 'thread count must not change a bit').toEqual([]);
  });

  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const want = await runCase(engines.ref, c);
    expect(want.implInfo).toBe('ref:any');
    const got1 = await runCase(engines.simd, c);
    expect(got1.implInfo).toMatch(/^wasm:/);
    expect(compare(got1.out, want.out, c.tol ?? 0).slice(0, 5)).toEqual([]);
    const got2 = await runCase(engines.t2, c);
    expect(compare(got2.out, got1.out, 0).slice(0, 5), 'thread count must not change a bit').toEqual([]);
    const got3 = await runCase(engines.relaxed, c);
    expect(compare(got3.out, want.out, c.tol ?? 0).slice(0, 5)).toEqual([]);
  });
});


