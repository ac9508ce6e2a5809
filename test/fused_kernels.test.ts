/**
 * The fused kernel paths (wasm/src/gemm-fused.c, s16-gemm-3x8-wasmsimd.c, vmath.h, lowp.h) against
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
import { JOB, JOB_DT_ALL, PATH, scratchBytes } from '../src/kernels/job_layout.js';
import { TILE } from '../src/primitives/matmul/wasm_matmul.js';
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
const VMATH: ReadonlyArray<readonly [number, string, (x: number) => number, number, number, (readonly [number, number])?]> = [
  [11, 'exp', Math.exp, 1e-6, 88],
  [9, 'logistic', sigmoidD, 1e-6, 87],
  [10, 'tanh', Math.tanh, 1e-6, 50],
  [100, 'erf', erfD, 1e-6, 10],
  [8, 'swish (alpha 1.5)', (x) => x * sigmoidD(1.5 * x), 4e-6, 30],
  [7, 'gelu_tanh', (x) => x * sigmoidD(2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)), 1e-6, 3],
  [7, 'gelu_tanh (tail)', (x) => x * sigmoidD(2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)), 1e-5, 6],
  [6, 'gelu_erf', (x) => (x < -Math.SQRT2 ? 0.5 * x * erfcD(-x / Math.SQRT2) : 0.5 * x * (1 + erfD(x / Math.SQRT2))), 1e-6, 3],
  [6, 'gelu_erf (tail)', (x) => (x < -Math.SQRT2 ? 0.5 * x * erfcD(-x / Math.SQRT2) : 0.5 * x * (1 + erfD(x / Math.SQRT2))), 1e-5, 8],
  [12, 'elu (alpha 1.5)', (x) => (x > 0 ? x : 1.5 * Math.expm1(x)), 1e-6, 80],
  [13, 'sqrt', Math.sqrt, 1e-7, 1e30],
  [14, 'soft_relu', (x) => Math.log1p(Math.exp(x)), 2e-6, 80, [1, 0]],
  // the f32 rounding of alpha x, amplified by exp on the negative tail: |alpha x| 2^-24
  [14, 'soft_relu (alpha 1.5)', (x) => Math.log1p(Math.exp(1.5 * x)) / 1.5, 6e-6, 50],
  [15, 'log', Math.log, 1e-6, 1e30],
  [16, 'pow (alpha 1.5, beta 3)', (x) => 1.5 * x ** 3, 1e-6, 1e12, [1.5, 3]],
  [16, 'pow (beta -2)', (x) => x ** -2, 1e-6, 1e12, [1, -2]],
  [16, 'pow (beta 0.5)', (x) => x ** 0.5, 5e-6, 1e20, [1, 0.5]],
  [17, 'round (half to even)', (x) => x - Math.floor(x) === 0.5 ? 2 * Math.round(x / 2) : Math.round(x), 1e-9, 40],
  [18, 'mish', (x) => x * Math.tanh(x > 40 ? x : Math.log1p(Math.exp(x))), 4e-6, 30],
  [19, 'hardswish (alpha 1.5)', (x) => x * Math.min(1, Math.max(0, 1.5 * x)), 1e-6, 10],
  [20, 'hardsigmoid (alpha 0.25, beta 0.5)', (x) => Math.min(1, Math.max(0, 0.25 * x + 0.5)), 1e-6, 10, [0.25, 0.5]],
];

describe('fused kernels: vector math and codecs', () => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'simd128' });
  });
  afterAll(() => eng.release());

  it.each(VMATH.map((v) => [v[1], v] as const))('%s: relative error vs double below the bound', (_n, [code, , truth, bound, range, ab]) => {
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
      k.check_eltwise(code, ab?.[0] ?? 1.5, ab?.[1] ?? 0, inP, outP, n);
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

  it('the scratch the host allocates covers what the driver carves on every path', () => {
    const k = eng.kernels!;
    const job = eng.alloc(JOB.SIZE);
    const i32 = new Int32Array(eng.buffer, job, JOB.SIZE / 4);
    const cases = [[PATH.f32, TILE.KC, 0], [PATH.f32, TILE.KC, TILE.KC_PACKED], [PATH.f32_fused, TILE.KC, 0], [PATH.int, TILE.KC_INT, 0]] as const;
    for (const [path, kc, kcPacked] of cases) {
      for (const G of [1, 7, 64, 1000]) {
        i32.fill(0);
        i32[JOB.G / 4] = G;
        i32[JOB.mb / 4] = TILE.MB;
        i32[JOB.nb / 4] = TILE.NB;
        i32[JOB.kc / 4] = kc;
        i32[JOB.kc_packed / 4] = kcPacked;
        i32[JOB.path / 4] = path;
        const host = scratchBytes(G, TILE.MB, TILE.NB, TILE.KC, kcPacked);
        expect(k.check_scratch_bytes(job), `path ${path} G ${G} kc_packed ${kcPacked}`).toBeLessThanOrEqual(host);
        // The A block really grows with kc_packed (the test would not notice a driver that ignored it otherwise).
        if (kcPacked) expect(k.check_scratch_bytes(job)).toBeGreaterThan(scratchBytes(G, TILE.MB, TILE.NB, TILE.KC));
      }
    }
    eng.free(job);
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

  it('round is half to even; log / sqrt / pow outside their domain give what libm gives', () => {
    const k = eng.kernels!;
    const p = eng.alloc(32), q = eng.alloc(32);
    const run = (code: number, xs: readonly number[], alpha = 1, beta = 0): number[] => {
      new Float32Array(eng.buffer, p, 8).set(xs);
      k.check_eltwise(code, alpha, beta, p, q, 8);
      return Array.from(new Float32Array(eng.buffer, q, 8));
    };
    expect(run(17, [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7])).toEqual([0, 2, 2, -0, -2, -2, 4, -4]);
    const logs = run(15, [0, -1, Infinity, 1e-40, 1, Number.NaN, 2, 0.5]);
    expect(logs.slice(0, 3)).toEqual([-Infinity, NaN, Infinity]);
    expect(Math.abs(logs[3] - Math.log(Math.fround(1e-40)))).toBeLessThan(1e-4);
    expect([logs[4], logs[5]]).toEqual([0, NaN]);
    expect(logs[6]).toBeCloseTo(Math.LN2, 7);
    expect(run(13, [-1, 0, 4, Infinity, 2, 0, 0, 0]).slice(0, 4)).toEqual([NaN, 0, 2, Infinity]);
    expect(run(16, [-2, 0, 4, -1, 0, 0, 0, 0], 1, 0.5).slice(0, 4)).toEqual([NaN, 0, 2, NaN]);
    expect(run(16, [-2, 0, 3, -1, 0, 0, 0, 0], 2, 3).slice(0, 4)).toEqual([-16, 0, 54, -2]);
    expect(run(16, [-2, 0, 2, 4, 0, 0, 0, 0], 1, -1).slice(0, 4)).toEqual([-0.5, Infinity, 0.5, 0.25]);
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
    if (!wmd.equals(userWeiMd)) wei = mk(wmd); // filled by the reorder below, once the scales exist
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
  if (wei !== userWei) {
    // `+q` layouts store the weights' scales / zero points: they go to the reorder, not the matmul.
    const r: Record<number, Memory> = { [ARG.FROM]: userWei, [ARG.TO]: wei };
    const q = wei.desc.packed?.quant;
    for (const [has, base] of [[q?.scales, ARG.ATTR_SCALES], [q?.zeroPoints, ARG.ATTR_ZERO_POINTS]] as const) {
      if (!has) continue;
      r[base | ARG.WEIGHTS] = args[base | id.weights];
      delete args[base | id.weights];
    }
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, wei.desc)).execute(strm, r);
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
  const out = Float64Array.from(dst.read());
  mems.forEach((m) => m.free());
  return { out, implInfo: pd.implInfo };
}

const S8 = dt.s8, U8 = dt.u8;
const SHAPE = { sizes: [5, 0, 67, 1, 9], K: 37, N: 24 } as const;

const CASES: Case[] = [
  // int8 path
  { name: 'int: s8 x s8 -> f32, per-row src x per-column weights scales, bias', ...SHAPE, srcDt: S8, weiDt: S8, biasDt: dt.f32, scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32] } },
  { name: 'int: same, packed x8 weights', ...SHAPE, srcDt: S8, weiDt: S8, biasDt: dt.f32, packed: true, scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32] } },
  { name: 'int: u8 x s4 packed, zero points on src (per row) and weights (per column), dst s8 with scale and zp', ...SHAPE, srcDt: U8, weiDt: dt.s4, dstDt: S8, packed: true, scales: { src: [0, [], dt.bf16], weights: [1, [], dt.e8m0], dst: [0, [], dt.f32] }, zps: { src: [1, [], dt.u8], weights: [5, [], dt.s8], dst: [0, [], dt.s32] } },
  { name: 'int: s8 x u4 plain, per-tensor weights zp, dst u8', ...SHAPE, srcDt: S8, weiDt: dt.u4, dstDt: U8, zps: { weights: [0, [], dt.s32] }, scales: { weights: [0, [], dt.f16] } },
  { name: 'int: s8 x u8, src zero point out of int16 reach (compensation), s32 dst', sizes: [3, 6], K: 16, N: 10, srcDt: S8, weiDt: U8, dstDt: dt.s32, zps: { src: [1, [], dt.s32], weights: [5, [], dt.s32] }, bigSrcZp: true },
  { name: 'int: same, packed', sizes: [3, 6], K: 16, N: 10, srcDt: S8, weiDt: U8, dstDt: dt.s32, packed: true, zps: { src: [1, [], dt.s32] }, bigSrcZp: true },
  { name: 'int: odd K, N not a multiple of 8, bf16 dst', sizes: [7, 2], K: 33, N: 13, srcDt: S8, weiDt: S8, dstDt: dt.bf16, packed: true, scales: { weights: [5, [], dt.f32] } },
  { name: 'int: P2 offsets attribute, f16 dst', kind: 'P2', ...SHAPE, srcDt: S8, weiDt: S8, dstDt: dt.f16, scales: { src: [1, [], dt.f32] } },
  { name: 'int: dense 2D', kind: 'dense', sizes: [70], K: 40, N: 20, srcDt: U8, weiDt: S8, scales: { src: [1, [], dt.f32], weights: [2, [], dt.f32] }, zps: { src: [0, [], dt.s32] } },
  { name: 'int: K-blocked scales take the f32 path', ...SHAPE, srcDt: S8, weiDt: dt.s4, packed: true, scales: { src: [3, [1, 37], dt.f32], weights: [7, [1, 37, 1], dt.f8_e4m3] } },
  // f32 fused path (and the fast path with a 16-bit bias)
  { name: 'f32 fast path: f16 bias, relu', ...SHAPE, biasDt: dt.f16, ops: [{ kind: 'eltwise', alg: 'eltwise_relu', alpha: 0 }] },
  { name: 'f32: bf16 x bf16 plain weights (vector packing), per-column scales, bf16 dst', ...SHAPE, srcDt: dt.bf16, weiDt: dt.bf16, dstDt: dt.bf16, scales: { weights: [5, [], dt.f32] } },
  { name: 'f32: f32 plain weights, per-row scales, f16 bias', ...SHAPE, biasDt: dt.f16, scales: { src: [1, [], dt.f32] } },
  { name: 'f32: per-row + per-column scales + bias + swiglu halves', ...SHAPE, N: 32, biasDt: dt.f32, packed: true, scales: { src: [1, [], dt.f32], weights: [5, [], dt.f32] }, glu: ['glu_swiglu', 'halves'], tol: 2e-6 },
  { name: 'f32: swiglu halves with N/2 not a multiple of 8 (repacked panels)', ...SHAPE, N: 28, packed: true, glu: ['glu_swiglu', 'halves'], tol: 2e-6 },
  { name: 'f32: geglu_tanh interleaved, bf16 bias', ...SHAPE, N: 24, biasDt: dt.bf16, glu: ['glu_geglu_tanh', 'interleaved'], tol: 2e-6 },
  { name: 'f32: geglu_erf blocks32', ...SHAPE, N: 192, packed: true, glu: ['glu_geglu_erf', 'blocks32'], tol: 2e-6 },
  { name: 'f32: swiglu_oai halves', ...SHAPE, N: 40, glu: ['glu_swiglu_oai', 'halves'], tol: 2e-6 },
  { name: 'f32: K-blocks and 2D blocks (DeepSeek style)', ...SHAPE, K: 32, scales: { src: [3, [1, 8], dt.f32], weights: [7, [1, 8, 8], dt.e8m0] } },
  { name: 'f32: weight-only s4 with K-blocked zero points and scales', ...SHAPE, K: 32, weiDt: dt.s4, scales: { weights: [7, [1, 16, 1], dt.bf16] }, zps: { weights: [7, [1, 16, 1], dt.s8] } },
  { name: 'f32: weight-only u4 with odd N (rows start mid-byte), per-column zero points', sizes: [5, 3], K: 19, N: 13, weiDt: dt.u4, zps: { weights: [5, [], dt.u8] }, scales: { weights: [5, [], dt.f32] } },
  { name: 'f32: weight-only s4 with even N, 8-column panels decoded as vectors', sizes: [5, 30], K: 20, N: 40, weiDt: dt.s4, zps: { weights: [1, [], dt.s32] }, scales: { weights: [5, [], dt.bf16] } },
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

/** Batched dense [B, M, K] x [B|1, K, N] and variable-K [M, total_K] x [total_K, N] -> [G, M, N]. */
interface Case3 {
  readonly name: string;
  readonly kind: 'dense3' | 'gk';
  readonly B: number;
  readonly M: number;
  readonly K: number;
  readonly N: number;
  readonly weiB?: number;
  readonly srcB?: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly scales?: { readonly src?: QSpec; readonly weights?: QSpec; readonly dst?: QSpec };
  readonly zps?: { readonly src?: QSpec; readonly weights?: QSpec };
  readonly glu?: readonly [GluAlg, GluLayout];
  readonly binary?: readonly (readonly number[])[];
  readonly tol?: number;
}

async function run3(eng: Engine, c: Case3): Promise<Built> {
  const strm = new Stream(eng);
  const { B, M, K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const sdt = c.srcDt ?? dt.f32, wdt = c.weiDt ?? dt.f32, ddt = c.dstDt ?? dt.f32;
  const rng = mulberry32(B * 1000 + M * 10 + K);
  const kSizes = Array.from({ length: B }, (_, g) => (g === 1 ? 0 : K + g));
  const totalK = kSizes.reduce((a, b) => a + b, 0);
  const srcMd = c.kind === 'dense3' ? memory.desc([c.srcB ?? B, M, K], sdt, tag.abc) : memory.desc.grouped([M, totalK], sdt, B, [M, RT]);
  const weiMd = c.kind === 'dense3' ? memory.desc([c.weiB ?? B, K, N], wdt, tag.abc) : memory.desc.grouped([totalK, N], wdt, B, [RT, N]);
  const dstMd = memory.desc([B, M, Nd], ddt, tag.abc);
  const attr = new PrimitiveAttr();
  const id = { src: ARG.SRC, weights: ARG.WEIGHTS, dst: ARG.DST } as const;
  for (const a of ['src', 'weights', 'dst'] as const) {
    const sc = c.scales?.[a];
    if (sc) attr.setScales(id[a], sc[0], [...sc[1]], sc[2]);
  }
  for (const a of ['src', 'weights'] as const) {
    const z = c.zps?.[a];
    if (z) attr.setZeroPoints(id[a], z[0], [...z[1]], z[2]);
  }
  if (c.glu) attr.postOps.appendGlu(c.glu[0], c.glu[1]);
  for (const d of c.binary ?? []) attr.postOps.appendBinary('binary_add', memory.desc([...d], dt.f32, tag.abc));
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, share?: number): Memory => {
    const m = Memory.create(md, eng, share === undefined ? undefined : [undefined, share]);
    mems.push(m);
    return m;
  };
  const src = mk(srcMd);
  src.write(valuesOf(sdt, rng, src.elementCount, true));
  const wei = mk(weiMd);
  wei.write(valuesOf(wdt, rng, wei.elementCount, true));
  if (c.kind === 'gk') {
    offsets.fromSizes(kSizes, src.offsets);
    offsets.fromSizes(kSizes, wei.offsets);
  }
  const dst = mk(dstMd);
  dst.write(valuesOf('f32', rng, dst.elementCount));
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  for (const a of ['src', 'weights', 'dst'] as const) {
    for (const [k, base] of [['scales', ARG.ATTR_SCALES], ['zero_points', ARG.ATTR_ZERO_POINTS]] as const) {
      const md = pd.queryMd(`${k}:${a}`);
      if (!md) continue;
      const m = mk(md);
      m.write(k === 'scales' ? pow2(rng, m.elementCount) : valuesOf('s4', rng, m.elementCount).map((v) => Math.max(-3, Math.min(3, v))));
      args[base | id[a]] = m;
    }
  }
  (c.binary ?? []).forEach((_d, i) => {
    const pos = i + (c.glu ? 1 : 0);
    const m = mk(pd.queryMd(`binary:${pos}`)!);
    m.write(valuesOf('f32', rng, m.elementCount));
    args[ARG.ATTR_MULTIPLE_POST_OP(pos) | ARG.SRC_1] = m;
  });
  new matmul.Primitive(pd).execute(strm, args);
  await strm.wait();
  const out = Float64Array.from(dst.read());
  mems.forEach((m) => m.free());
  return { out, implInfo: pd.implInfo };
}

const CASES3: Case3[] = [
  { name: 'dense batched: s8 x s8 per-(batch,row) src and per-(batch,column) weights scales, GLU, binary [B, M, 1] + [1, 1, N/2]', kind: 'dense3', B: 3, M: 9, K: 21, N: 16,
    srcDt: S8, weiDt: S8, scales: { src: [3, [], dt.f32], weights: [5, [], dt.f32] }, zps: { src: [0, [], dt.s32] }, glu: ['glu_swiglu', 'interleaved'], binary: [[3, 9, 1], [1, 1, 8]], tol: 2e-6 },
  { name: 'dense batched, broadcast weights [1, K, N] with K-blocked scales and a zero point, per-row src scales', kind: 'dense3', B: 3, M: 7, K: 24, N: 12, weiB: 1,
    weiDt: dt.s4, scales: { src: [2, [], dt.bf16], weights: [6, [1, 8, 1], dt.f32] }, zps: { weights: [0, [], dt.s8] } },
  { name: 'dense batched, broadcast src [1, M, K] with per-(batch, row) scales over src\'s own dims', kind: 'dense3', B: 2, M: 6, K: 10, N: 8, srcB: 1,
    srcDt: S8, weiDt: dt.u8, scales: { src: [3, [], dt.f32], weights: [1, [], dt.f32], dst: [0, [], dt.f32] }, zps: { weights: [5, [], dt.u8] } },
  { name: 'variable K: u8 x s8 per-group scales and zero points, binary [G, M, N], s32 dst', kind: 'gk', B: 4, M: 6, K: 9, N: 10, srcDt: U8, weiDt: S8, dstDt: dt.s32,
    scales: { src: [0, [], dt.f32], weights: [0, [], dt.f32], dst: [0, [], dt.f32] }, zps: { src: [0, [], dt.u8], weights: [0, [], dt.s32] }, binary: [[4, 6, 10]] },
  { name: 'variable K: f32 with swiglu halves and per-group src scales', kind: 'gk', B: 3, M: 5, K: 8, N: 20, scales: { src: [0, [], dt.f32] }, glu: ['glu_swiglu', 'halves'], tol: 2e-6 },
];

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
    const ok = Object.is(got[i], want[i]) || (Number.isNaN(got[i]) && Number.isNaN(want[i])) || (tol > 0 && Math.abs(got[i] - want[i]) <= tol * Math.max(1, Math.abs(want[i])));
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

  it.each(CASES3.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const want = await run3(engines.ref, c);
    expect(want.implInfo).toBe('ref:any');
    const got1 = await run3(engines.simd, c);
    expect(got1.implInfo).toMatch(/^wasm:/);
    expect(compare(got1.out, want.out, c.tol ?? 0).slice(0, 5)).toEqual([]);
    const got2 = await run3(engines.t2, c);
    expect(compare(got2.out, got1.out, 0).slice(0, 5), 'thread count must not change a bit').toEqual([]);
  });

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

/** Random problems (fixed seed): every path, type, granularity, GLU layout and post-op mix the kernels take. */
describe('fused kernels: randomized problems, wasm (2 threads) vs reference', () => {
  const engines: Record<string, Engine> = {};
  beforeAll(async () => {
    engines.ref = await Engine.create({ threads: 1, kernels: 'none' });
    engines.wasm = await Engine.create({ threads: 2, kernels: 'simd128' });
  });
  afterAll(() => Object.values(engines).forEach((e) => e.release()));
  const R = mulberry32(2024);
  const pick = <T,>(a: readonly T[]): T => a[Math.floor(R() * a.length)];
  const cases: Case[] = [];
  for (let i = 0; i < 60; i++) {
    const intPath = R() < 0.5;
    const srcDt = intPath ? pick([dt.s8, dt.u8] as DataType[]) : pick([dt.f32, dt.bf16, dt.f16, dt.f8_e4m3, dt.f4_e2m1] as DataType[]);
    const lowf = ['f8_e4m3', 'f8_e5m2', 'f4_e2m1'].includes(srcDt);
    const weiDt = intPath ? pick([dt.s8, dt.u8, dt.s4, dt.u4] as DataType[]) : lowf ? pick([dt.f8_e4m3, dt.f8_e5m2, dt.f4_e2m1] as DataType[]) : pick([dt.f32, dt.bf16, dt.f16, dt.s8, dt.u4] as DataType[]);
    const dstDt = intPath ? pick([dt.f32, dt.bf16, dt.s8, dt.u8, dt.s32] as DataType[]) : lowf ? pick([dt.f32, dt.f8_e4m3] as DataType[]) : pick([dt.f32, dt.f16] as DataType[]);
    const G = 1 + Math.floor(R() * 5);
    const sizes = Array.from({ length: G }, () => (R() < 0.2 ? 0 : Math.floor(R() * 70)));
    const glu = R() < 0.3 ? pick([['glu_swiglu', 'halves'], ['glu_geglu_tanh', 'interleaved'], ['glu_swiglu_oai', 'blocks32']] as const) : undefined;
    const N = glu?.[1] === 'blocks32' ? 64 * (1 + Math.floor(R() * 3)) : glu ? 2 * (1 + Math.floor(R() * 40)) : 1 + Math.floor(R() * 60);
    const gK = pick([4, 8]);
    const K = gK * (1 + Math.floor(R() * 8)) + (R() < 0.3 && !lowf ? 0 : 0);
    const Kodd = R() < 0.3 ? K + 1 : K;
    const useKb = R() < 0.4;
    const KK = useKb ? K : Kodd;
    const scales: Record<string, QSpec> = {};
    const zps: Record<string, QSpec> = {};
    if (R() < 0.7) scales.src = pick([[0, [], dt.f32], [1, [], dt.bf16], ...(useKb ? [[3, [1, gK], dt.e8m0]] : [])] as QSpec[]);
    if (R() < 0.7) scales.weights = pick([[0, [], dt.f32], [1, [], dt.f16], [5, [], dt.f8_e4m3], ...(useKb ? [[7, [1, gK, 1], dt.f32]] : [])] as QSpec[]);
    if (R() < 0.3) scales.dst = [0, [], dt.f32];
    const intW = ['s8', 'u8', 's4', 'u4'].includes(weiDt);
    if (intPath && R() < 0.5) zps.src = pick([[0, [], dt.s32], [1, [], dt.s8]] as QSpec[]);
    if (intW && R() < 0.5) zps.weights = pick([[0, [], dt.s32], [1, [], dt.s8], [5, [], dt.s32], ...(useKb ? [[7, [1, gK, 1], dt.s8]] : [])] as QSpec[]);
    if (['s8', 'u8', 's32'].includes(dstDt) && R() < 0.5) zps.dst = [0, [], dt.s32];
    const ops: Op[] = [];
    const nops = Math.floor(R() * 3);
    for (let o = 0; o < nops; o++) ops.push(pick([{ kind: 'binary', alg: 'binary_mul', shape: 'M1' }, { kind: 'binary', alg: 'binary_add', shape: 'MN' }, { kind: 'binary', alg: 'binary_add', shape: 'GN' }, { kind: 'sum', scale: 2 }, { kind: 'eltwise', alg: 'eltwise_relu', alpha: 0.5 }, { kind: 'eltwise', alg: 'eltwise_clip', alpha: -7, beta: 9 }] as Op[]));
    if (ops.filter((o) => o.kind === 'sum').length > 1) ops.splice(0, ops.length);
    cases.push({ name: `#${i}`, kind: pick(['P1', 'P2'] as const), sizes, K: KK, N, srcDt, weiDt, dstDt, packed: R() < 0.5, biasDt: R() < 0.3 ? dt.f32 : undefined,
      scales, zps, glu: glu as Case['glu'], ops, tol: glu ? ({ f32: 3e-6, f16: 2.1e-3, bf16: 1.6e-2, f8_e4m3: 0.26, s8: 1, u8: 1, s32: 1 } as Record<string, number>)[dstDt] ?? 3e-6 : 0 });
  }
  it.each(cases.map((c) => [`${c.name} ${c.kind} ${c.srcDt}x${c.weiDt}->${c.dstDt}${c.glu ? ` ${c.glu.join(':')}` : ''}`, c] as const))('%s', async (_n, c) => {
    const want = await runCase(engines.ref, c);
    const got = await runCase(engines.wasm, c);
    expect(got.implInfo, JSON.stringify(c)).toMatch(/^wasm:/);
    expect(compare(got.out, want.out, c.tol ?? 0).slice(0, 3), JSON.stringify(c)).toEqual([]);
  });
});
