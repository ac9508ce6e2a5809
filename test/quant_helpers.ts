/**
 * Test plumbing for rfcs/0002 (quantization and fusion). The expected values are computed here,
 * independently of the library: granularities are written out from the spec's table (values tensor
 * shape + index), conversions (RNE, saturation, bf16/f16/fp8 rounding) and activations are
 * re-implemented, and inputs are integers / few-bit dyadic numbers with power-of-two (or 3-bit) scales,
 * so every intermediate is exact in float64 and f32 and results can be compared bit for bit.
 */
import { expect } from 'vitest';
import {
  ARG, Engine, GpuMemory, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm, matmul, memory, reorder, tag,
  type AccumulationMode, type BinaryAlg, type DataType, type EltwiseAlg, type GluAlg, type GluLayout, type GpuEngine,
} from '../src/index.js';
import { cumulative, mulberry32, type Rng } from './workloads.js';

export const RT = RUNTIME_DIM_VAL;

// ---------------------------------------------------------------------------------------------------
// Independent numerics.

/** Round half to even. */
export function rne(x: number): number {
  const n = Math.floor(x);
  const f = x - n;
  return f > 0.5 || (f === 0.5 && n % 2 !== 0) ? n + 1 : n;
}

/** floor(log2(a)) exactly, a > 0. */
function ilog2(a: number): number {
  let e = Math.floor(Math.log2(a));
  while (2 ** e > a) e--;
  while (2 ** (e + 1) <= a) e++;
  return e;
}

/**
 * RNE rounding of a number to a binary float with `mbits` stored mantissa bits, normal exponents
 * from `emin`, largest finite `max`; beyond max: `sat` gives ±max, otherwise ±Infinity.
 */
export function roundFloat(x: number, mbits: number, emin: number, max: number, sat: boolean): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  const a = Math.abs(x);
  const e = Math.max(ilog2(a), emin);
  const ulp = 2 ** (e - mbits);
  let v = rne(a / ulp) * ulp;
  if (v > max) v = sat ? max : Infinity;
  return x < 0 ? -v : v;
}

/** The value an f32 result becomes when stored as `t` (the library computes in f32, then converts). */
export function convert(t: DataType, x: number): number {
  const f = Math.fround(x);
  switch (t) {
    case 'f32': return f;
    case 'bf16': return roundFloat(f, 7, -126, 3.3895313892515355e38, false);
    case 'f16': return roundFloat(f, 10, -14, 65504, false);
    case 'f8_e4m3': return roundFloat(f, 3, -6, 448, true);
    case 'f8_e5m2': return roundFloat(f, 2, -14, 57344, true);
    case 's8': return Math.max(-128, Math.min(127, rne(f)));
    case 'u8': return Math.max(0, Math.min(255, rne(f)));
    case 's32': return Math.max(-2147483648, Math.min(2147483647, rne(f)));
    default: throw new Error(`convert: ${t}`);
  }
}

/** erf by Simpson integration of 2/sqrt(pi) exp(-t^2) (~1e-13), independent of the library's A&S formula. */
export function erf(x: number): number {
  const a = Math.min(Math.abs(x), 7);
  const n = 4000, h = a / n;
  let s = 1 + Math.exp(-a * a);
  for (let i = 1; i < n; i++) s += (i % 2 ? 4 : 2) * Math.exp(-((i * h) * (i * h)));
  const v = ((2 / Math.sqrt(Math.PI)) * s * h) / 3;
  return x < 0 ? -v : v;
}

const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));
const geluErf = (x: number): number => 0.5 * x * (1 + erf(x / Math.SQRT2));
const geluTanh = (x: number): number => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));

export interface GluSpec {
  readonly alg: GluAlg;
  readonly layout: GluLayout;
  readonly alpha?: number;
  readonly limit?: number;
}

/** The spec's GLU: gate/up columns of dst column n, then act(gate) * up. */
export function gluExpected(spec: GluSpec, N: number, n: number, col: (c: number) => number): number {
  const [gc, uc] = spec.layout === 'halves' ? [n, N / 2 + n] : spec.layout === 'interleaved' ? [2 * n, 2 * n + 1] : [64 * Math.floor(n / 32) + (n % 32), 64 * Math.floor(n / 32) + (n % 32) + 32];
  const gate = col(gc), up = col(uc);
  switch (spec.alg) {
    case 'glu_swiglu': return gate * sigmoid((spec.alpha ?? 1) * gate) * up;
    case 'glu_geglu_erf': return geluErf(gate) * up;
    case 'glu_geglu_tanh': return geluTanh(gate) * up;
    case 'glu_swiglu_oai': {
      const alpha = spec.alpha ?? 1.702, limit = spec.limit ?? 7;
      const g = Math.min(gate, limit), u = Math.max(-limit, Math.min(limit, up));
      return g * sigmoid(alpha * g) * (u + 1);
    }
  }
}

/** Eltwise post-ops with exact (non-transcendental) semantics used in the bitwise tests. */
export const ELTWISE: Partial<Record<EltwiseAlg, (x: number, a: number, b: number) => number>> = {
  eltwise_relu: (x, a) => (x > 0 ? x : a * x),
  eltwise_linear: (x, a, b) => a * x + b,
  eltwise_clip: (x, a, b) => Math.min(b, Math.max(a, x)),
  eltwise_abs: (x) => Math.abs(x),
  eltwise_square: (x) => x * x,
};

// ---------------------------------------------------------------------------------------------------
// Value generators (every value exact in its type; small so sums stay exact in f32).

const pick = (rng: Rng, xs: readonly number[]): number => xs[Math.floor(rng() * xs.length)];
const ints = (lo: number, hi: number): number[] => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
const FP_SMALL = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6];

/** `full`: s8 / u8 over their whole range (integer sums stay exact in an s32 dst, not in f32). */
export function tensorValues(t: DataType, rng: Rng, n: number, full = false): Float64Array {
  const set =
    t === 's8' ? (full ? ints(-128, 127) : ints(-6, 6)) : t === 'u8' ? (full ? ints(0, 255) : ints(0, 12)) : t === 's4' ? ints(-8, 7) : t === 'u4' ? ints(0, 15) : t === 's32' ? ints(-40, 40) :
    t === 'f8_e4m3' || t === 'f8_e5m2' || t === 'f4_e2m1' ? FP_SMALL : ints(-8, 8).map((v) => v / 2);
  return Float64Array.from({ length: n }, () => pick(rng, set));
}

export function scaleValues(t: DataType, rng: Rng, n: number): Float64Array {
  const set = t === 'e8m0' ? [0.25, 0.5, 1, 2, 4] : t === 'f8_e4m3' ? [0.375, 0.5, 0.75, 1, 1.5, 2, 3] : [0.25, 0.5, 1, 1.5, 2, 4];
  return Float64Array.from({ length: n }, () => pick(rng, set));
}

export function zpValues(t: DataType, rng: Rng, n: number): Float64Array {
  const set = t === 'u8' || t === 'u4' ? ints(0, 3) : ints(-3, 3);
  return Float64Array.from({ length: n }, () => pick(rng, set));
}

// ---------------------------------------------------------------------------------------------------
// Granularities, written out from rfcs/0002 section 2 (values tensor dims and the element index).

export interface Sizes {
  readonly G: number;
  /** src rows (total_M, or M of a dense / variable-K problem). */
  readonly M: number;
  readonly K: number;
  /** GEMM columns. */
  readonly N: number;
  /** dst columns (N / 2 with a GLU). */
  readonly Nd: number;
}

/** `index(s, g, a, b)`: (a, b) = (row, k) for src, (k, n) for weights, (row, n) for dst; rows absolute. */
export interface Granularity {
  readonly name: string;
  readonly mask: number;
  readonly groups: readonly number[];
  dims(s: Sizes): number[];
  index(s: Sizes, g: number, a: number, b: number): number;
}

const gran = (name: string, mask: number, groups: number[], dims: Granularity['dims'], index: Granularity['index']): Granularity => ({ name, mask, groups, dims, index });

/** Grouped M (P#1 / P#2): src [total_M, K], weights [G, K, N], dst [total_M, N]. */
export const GM = {
  src: {
    expert: gran('src per expert (mask 0, [G])', 0, [], (s) => [s.G], (_s, g) => g),
    row: gran('src per row (mask 1, [total_M])', 1, [], (s) => [s.M], (_s, _g, r) => r),
    rowK: (gK: number) => gran(`src per row x K-block ${gK} (mask 3, [total_M, K/${gK}])`, 3, [1, gK], (s) => [s.M, s.K / gK], (s, _g, r, k) => r * (s.K / gK) + Math.floor(k / gK)),
  },
  weights: {
    tensor: gran('weights per tensor (mask 0, [1])', 0, [], () => [1], () => 0),
    expert: gran('weights per expert (mask 1, [G])', 1, [], (s) => [s.G], (_s, g) => g),
    expertCol: gran('weights per expert column (mask 5, [G, N])', 5, [], (s) => [s.G, s.N], (s, g, _k, n) => g * s.N + n),
    kBlock: (gK: number) => gran(`weights K-blocks ${gK} (mask 7, [G, K/${gK}, N])`, 7, [1, gK, 1], (s) => [s.G, s.K / gK, s.N], (s, g, k, n) => (g * (s.K / gK) + Math.floor(k / gK)) * s.N + n),
    block2d: (gK: number, gN: number) => gran(`weights ${gK}x${gN} blocks (mask 7, [G, K/${gK}, N/${gN}])`, 7, [1, gK, gN], (s) => [s.G, s.K / gK, s.N / gN], (s, g, k, n) => (g * (s.K / gK) + Math.floor(k / gK)) * (s.N / gN) + Math.floor(n / gN)),
  },
  dst: {
    expert: gran('dst per expert (mask 0, [G])', 0, [], (s) => [s.G], (_s, g) => g),
  },
};

/** Dense 2D (oneDNN's rule): src [M, K], weights [K, N], dst [M, N]. */
export const DENSE = {
  src: {
    tensor: gran('src per tensor (mask 0, [1])', 0, [], () => [1], () => 0),
    row: gran('src per row (mask 1, [M])', 1, [], (s) => [s.M], (_s, _g, r) => r),
    rowK: (gK: number) => gran(`src per row x K-block ${gK} (mask 3, [M, K/${gK}])`, 3, [1, gK], (s) => [s.M, s.K / gK], (s, _g, r, k) => r * (s.K / gK) + Math.floor(k / gK)),
    kOnly: (gK: number) => gran(`src K-blocks ${gK} shared by rows (mask 2, [K/${gK}])`, 2, [1, gK], (s) => [s.K / gK], (_s, _g, _r, k) => Math.floor(k / gK)),
  },
  weights: {
    tensor: gran('weights per tensor (mask 0, [1])', 0, [], () => [1], () => 0),
    col: gran('weights per column (mask 2, [N])', 2, [], (s) => [s.N], (_s, _g, _k, n) => n),
    kBlock: (gK: number) => gran(`weights K-blocks ${gK} (mask 3, [K/${gK}, N])`, 3, [gK, 1], (s) => [s.K / gK, s.N], (s, _g, k, n) => Math.floor(k / gK) * s.N + n),
    block2d: (gK: number, gN: number) => gran(`weights ${gK}x${gN} blocks (mask 3, [K/${gK}, N/${gN}])`, 3, [gK, gN], (s) => [s.K / gK, s.N / gN], (s, _g, k, n) => Math.floor(k / gK) * (s.N / gN) + Math.floor(n / gN)),
  },
  dst: {
    tensor: gran('dst per tensor (mask 0, [1])', 0, [], () => [1], () => 0),
    col: gran('dst per column (mask 2, [N])', 2, [], (s) => [s.Nd], (_s, _g, _r, n) => n),
    row: gran('dst per row (mask 1, [M])', 1, [], (s) => [s.M], (_s, _g, r) => r),
  },
};

// ---------------------------------------------------------------------------------------------------
// Post-ops as the tests describe them.

/** Binary src1 shapes for grouped M (rfcs/0002 section 4). */
export type BinaryShape = 'row_n' | 'row_1' | 'row_n_grouped' | 'row_1_grouped' | 'expert_1' | 'expert_n' | 'expert3_1' | 'expert3_n';

export type TestOp =
  | { readonly kind: 'eltwise'; readonly alg: EltwiseAlg; readonly alpha?: number; readonly beta?: number }
  | { readonly kind: 'sum'; readonly scale: number }
  /** `dt`: src1's data type (default f32). */
  | { readonly kind: 'binary'; readonly alg: BinaryAlg; readonly shape: BinaryShape; readonly dt?: DataType };

interface BinaryTensor {
  readonly md: MemoryDesc;
  readonly values: Float64Array;
  at(g: number, r: number, n: number): number;
}

/** src1 values exact in its type: halves for the float types, integers (>= 0 for u8) otherwise. */
export function binaryValueSet(t: DataType): readonly number[] {
  return t === 'u8' ? [1, 2, 3] : t === 's8' || t === 's32' ? [-2, -1, 1, 2] : [-2, -1, -0.5, 0.5, 1, 1.5, 2];
}

export function binaryTensor(shape: BinaryShape, s: Sizes, rng: Rng, t: DataType = dt.f32): BinaryTensor {
  const { G, M, Nd } = s;
  const set = binaryValueSet(t);
  const vals = (n: number): Float64Array => Float64Array.from({ length: n }, () => pick(rng, set));
  switch (shape) {
    case 'row_n': { const v = vals(M * Nd); return { md: memory.desc([M, Nd], t, tag.ab), values: v, at: (_g, r, n) => v[r * Nd + n] }; }
    case 'row_1': { const v = vals(M); return { md: memory.desc([M, 1], t, tag.ab), values: v, at: (_g, r) => v[r] }; }
    case 'row_n_grouped': { const v = vals(M * Nd); return { md: memory.desc.grouped([M, Nd], t, G, [RT, Nd]), values: v, at: (_g, r, n) => v[r * Nd + n] }; }
    case 'row_1_grouped': { const v = vals(M); return { md: memory.desc.grouped([M, 1], t, G, [RT, 1]), values: v, at: (_g, r) => v[r] }; }
    case 'expert_1': { const v = vals(G); return { md: memory.desc([G, 1], t, tag.ab), values: v, at: (g) => v[g] }; }
    case 'expert_n': { const v = vals(G * Nd); return { md: memory.desc([G, Nd], t, tag.ab), values: v, at: (g, _r, n) => v[g * Nd + n] }; }
    case 'expert3_1': { const v = vals(G); return { md: memory.desc([G, 1, 1], t, tag.abc), values: v, at: (g) => v[g] }; }
    case 'expert3_n': { const v = vals(G * Nd); return { md: memory.desc([G, 1, Nd], t, tag.abc), values: v, at: (g, _r, n) => v[g * Nd + n] }; }
  }
}

// ---------------------------------------------------------------------------------------------------
// The expected computation (rfcs/0002 section 1), one output element at a time.

export type Lookup = (g: number, a: number, b: number) => number;

export interface Expectation {
  readonly N: number;
  readonly x: (r: number, k: number) => number;
  readonly w: (g: number, k: number, n: number) => number;
  readonly ss?: Lookup;
  readonly zs?: Lookup;
  readonly sw?: Lookup;
  readonly zw?: Lookup;
  readonly sd?: Lookup;
  readonly zd?: Lookup;
  readonly bias?: (g: number, r: number, c: number) => number;
  readonly glu?: GluSpec;
  /** Post-ops after the GLU; binary ops read `at(g, r, n)`, sum reads `prev(r, n)`. */
  readonly ops: readonly (TestOp & { at?: (g: number, r: number, n: number) => number })[];
  readonly prev: (r: number, n: number) => number;
  readonly dstDt: DataType;
}

/** dst element (row r of group g, column n) with the contraction over `ks`; returns the stored value (or the f64 value before rounding when `raw`). */
export function expectElement(e: Expectation, g: number, r: number, n: number, ks: readonly number[]): number {
  const col = (c: number): number => {
    let acc = 0;
    for (const k of ks) {
      const a = (e.x(r, k) - (e.zs ? e.zs(g, r, k) : 0)) * (e.ss ? e.ss(g, r, k) : 1);
      const b = (e.w(g, k, c) - (e.zw ? e.zw(g, k, c) : 0)) * (e.sw ? e.sw(g, k, c) : 1);
      acc += a * b;
    }
    return Math.fround(acc + (e.bias ? e.bias(g, r, c) : 0));
  };
  let v = e.glu ? gluExpected(e.glu, e.N, n, col) : col(n);
  for (const op of e.ops) {
    if (op.kind === 'eltwise') v = ELTWISE[op.alg]!(v, op.alpha ?? 0, op.beta ?? 0);
    else if (op.kind === 'sum') v += op.scale * e.prev(r, n);
    else v = op.alg === 'binary_mul' ? v * op.at!(g, r, n) : v + op.at!(g, r, n);
  }
  if (e.sd) v /= e.sd(g, r, n);
  if (e.zd) v += e.zd(g, r, n);
  return convert(e.dstDt, v);
}

// ---------------------------------------------------------------------------------------------------
// Grouped M runner (P#1 grouped descriptors, P#2 offsets attribute).

export interface QSpec {
  readonly gran: Granularity;
  readonly dt?: DataType;
}

export interface GMCase {
  readonly proposal?: 'P1' | 'P2';
  readonly G: number;
  readonly K: number;
  readonly N: number;
  readonly sizes: readonly number[];
  readonly totalM?: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly scales?: { readonly src?: QSpec; readonly weights?: QSpec; readonly dst?: QSpec };
  readonly zps?: { readonly src?: QSpec; readonly weights?: QSpec; readonly dst?: QSpec };
  /** P#1: pass per-row src scales / zero points as grouped descriptors sharing src's offsets. */
  readonly groupedRowValues?: boolean;
  readonly bias?: boolean;
  readonly glu?: GluSpec;
  readonly ops?: readonly TestOp[];
  /**
   * Weights `tag.any`: the pd picks the (packed) layout and a reorder fills it from plain weights (with
   * the weights' scales / zero points when the layout embeds them, `+q`). `'runtime'`: the packed
   * layout of a pd without weights scales (x8 / x4 codes only), scales / zero points at execution.
   */
  readonly packed?: boolean | 'runtime';
  /** src and weights over the whole s8 / u8 range (tensorValues `full`). */
  readonly fullRange?: boolean;
  readonly seed?: number;
  /** attr.setAccumulationMode (rfcs/0007). */
  readonly accumulationMode?: AccumulationMode;
}

/** Moves the weights' scales / zero points (`ARG.ATTR_* | id`) from the matmul args to the reorder args when `to` embeds them. */
function reorderInto(eng: Engine, strm: Stream, plain: Memory, to: Memory, args: Record<number, Memory>, id: number): void {
  const r: Record<number, Memory> = { [ARG.FROM]: plain, [ARG.TO]: to };
  const q = to.desc.packed?.quant;
  for (const [base, has] of [[ARG.ATTR_SCALES, q?.scales], [ARG.ATTR_ZERO_POINTS, q?.zeroPoints]] as const) {
    if (!has) continue;
    r[base | ARG.WEIGHTS] = args[base | id];
    delete args[base | id];
  }
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, to.desc)).execute(strm, r);
}

export interface Outcome {
  readonly got: Float64Array;
  readonly want: Float64Array;
  readonly pd: { implInfo: string };
}

const QUANT_ID = { src: ARG.SRC, weights: ARG.WEIGHTS, dst: ARG.DST } as const;
type QA = keyof typeof QUANT_ID;

export function attrOf(c: { scales?: GMCase['scales']; zps?: GMCase['zps']; glu?: GluSpec; ops?: readonly TestOp[] }, binMds: readonly (MemoryDesc | undefined)[], ids: Record<QA, number> = QUANT_ID): PrimitiveAttr {
  const attr = new PrimitiveAttr();
  for (const a of ['src', 'weights', 'dst'] as const) {
    const s = c.scales?.[a];
    if (s) attr.setScales(ids[a], s.gran.mask, [...s.gran.groups], s.dt ?? dt.f32);
    const z = c.zps?.[a];
    if (z) attr.setZeroPoints(ids[a], z.gran.mask, [...z.gran.groups], z.dt ?? dt.s32);
  }
  if (c.glu) attr.postOps.appendGlu(c.glu.alg, c.glu.layout, c.glu.alpha, c.glu.limit);
  (c.ops ?? []).forEach((op, i) => {
    if (op.kind === 'eltwise') attr.postOps.appendEltwise(op.alg, op.alpha ?? 0, op.beta ?? 0);
    else if (op.kind === 'sum') attr.postOps.appendSum(op.scale);
    else attr.postOps.appendBinary(op.alg, binMds[i]!);
  });
  return attr;
}

/** Builds, runs and checks one grouped-M case; returns dst (rows actually computed) and the expectation. */
export async function runGM(eng: Engine, strm: Stream, c: GMCase): Promise<Outcome> {
  const rng = mulberry32(c.seed ?? 7);
  const { G, K, N, sizes } = c;
  const used = sizes.reduce((a, b) => a + b, 0);
  const M = c.totalM ?? used;
  const Nd = c.glu ? N / 2 : N;
  const S: Sizes = { G, M, K, N, Nd };
  const p2 = c.proposal === 'P2';
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const offs = cumulative(sizes);
  const groupOf = (r: number): number => { let g = 0; while (r >= offs[g + 1]) g++; return g; };

  const srcMd = p2 ? memory.desc([M, K], srcDt, tag.ab) : memory.desc.grouped([M, K], srcDt, G, [RT, K]);
  const dstMd = p2 ? memory.desc([M, Nd], dstDt, tag.ab) : memory.desc.grouped([M, Nd], dstDt, G, [RT, Nd]);
  const plainWeiMd = memory.desc([G, K, N], weiDt, tag.abc);
  // 'runtime': the codes-only packed layout, taken from a pd without weights scales.
  const codesOnly = (): MemoryDesc => new matmul.PrimitiveDesc(eng, memory.desc.grouped([1, K], dt.f32, G, [RT, K]), memory.desc([G, K, N], weiDt, tag.any), memory.desc.grouped([1, N], dt.f32, G, [RT, N])).queryMd('weights')!;
  const weiMd = c.packed === 'runtime' ? codesOnly() : c.packed ? memory.desc([G, K, N], weiDt, tag.any) : plainWeiMd;
  const biasMd = c.bias ? memory.desc([G, N], dt.f32, tag.ab) : undefined;
  const bins = (c.ops ?? []).map((op) => (op.kind === 'binary' ? binaryTensor(op.shape, S, rng, op.dt) : undefined));
  const attr = attrOf(c, bins.map((b) => b?.md));
  if (p2) attr.setGroupedOffsets(ARG.SRC, G);
  if (c.accumulationMode) attr.setAccumulationMode(c.accumulationMode);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);

  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, handles?: (number | undefined)[]): Memory => { const m = Memory.create(md, eng, handles); mems.push(m); return m; };
  try {
    const x = tensorValues(srcDt, rng, M * K, c.fullRange), w = tensorValues(weiDt, rng, G * K * N, c.fullRange);
    const src = mk(srcMd).write(x);
    const plainWei = mk(plainWeiMd).write(w);
    let wei = plainWei;
    if (c.packed) {
      wei = mk(pd.queryMd('weights')!);
      expect(wei.desc.format, 'the pd picks a layout').not.toBe('any');
    }
    const dst = p2 ? mk(dstMd) : mk(dstMd, [undefined, src.handles[1]]);
    const prev = tensorValues(dstDt, rng, M * Nd);
    dst.write(prev);
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    if (p2) {
      const o = mk(pd.queryMd('grouped_offsets')!);
      (o.values as Int32Array).set(offs);
      args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = o;
    } else {
      src.offsets.set(offs);
    }
    const b = c.bias ? tensorValues(dt.f32, rng, G * N) : undefined;
    if (biasMd && b) args[ARG.BIAS] = mk(biasMd).write(b);
    const look: Partial<Record<string, Lookup>> = {};
    for (const [kind, base, tbl] of [['s', ARG.ATTR_SCALES, c.scales], ['z', ARG.ATTR_ZERO_POINTS, c.zps]] as const) {
      for (const a of ['src', 'weights', 'dst'] as const) {
        const q = tbl?.[a];
        if (!q) continue;
        const qdt = q.dt ?? (kind === 's' ? dt.f32 : dt.s32);
        const dims = q.gran.dims(S);
        const vals = kind === 's' ? scaleValues(qdt, rng, dims.reduce((u, v) => u * v, 1)) : zpValues(qdt, rng, dims.reduce((u, v) => u * v, 1));
        // The values tensor exactly as the spec's table describes it (row-major dims, plain or grouped).
        const perRow = a === 'src' && (q.gran.mask & 1) === 1;
        const md = c.groupedRowValues && perRow ? memory.desc.grouped(dims, qdt, G, dims.length === 1 ? [RT] : [RT, dims[1]]) : memory.desc(dims, qdt, 'abc'.slice(0, dims.length));
        const query = `${kind === 's' ? 'scales' : 'zero_points'}:${a}${c.groupedRowValues && perRow ? ':grouped' : ''}` as const;
        expect(pd.queryMd(query as Parameters<typeof pd.queryMd>[0])?.equals(md), `${query} descriptor`).toBe(true);
        const m = c.groupedRowValues && perRow ? mk(md, [undefined, src.handles[1]]) : mk(md);
        m.write(vals);
        args[base | QUANT_ID[a]] = m;
        look[kind + a] = (g, i, j) => vals[q.gran.index(S, g, i, j)];
      }
    }
    bins.forEach((t, i) => {
      if (!t) return;
      expect(pd.queryMd(`binary:${i + (c.glu ? 1 : 0)}`)?.equals(t.md)).toBe(true);
      const m = t.md.isGrouped ? mk(t.md, [undefined, src.handles[1]]) : mk(t.md);
      m.write(t.values);
      args[ARG.ATTR_MULTIPLE_POST_OP(i + (c.glu ? 1 : 0)) | ARG.SRC_1] = m;
    });
    if (c.packed) reorderInto(eng, strm, plainWei, wei, args, ARG.WEIGHTS);
    prim.execute(strm, args);
    await strm.wait();

    const e: Expectation = {
      N, dstDt, glu: c.glu,
      x: (r, k) => x[r * K + k],
      w: (g, k, n) => w[(g * K + k) * N + n],
      ss: look.ssrc, zs: look.zsrc, sw: look.sweights, zw: look.zweights, sd: look.sdst, zd: look.zdst,
      bias: b ? (g, _r, n) => b[g * N + n] : undefined,
      ops: (c.ops ?? []).map((op, i) => ({ ...op, at: bins[i]?.at })),
      prev: (r, n) => prev[r * Nd + n],
    };
    const ks = Array.from({ length: K }, (_, k) => k);
    const want = new Float64Array(used * Nd);
    for (let r = 0; r < used; r++) for (let n = 0; n < Nd; n++) want[r * Nd + n] = expectElement(e, groupOf(r), r, n, ks);
    const all = Float64Array.from(dst.read());
    // Rows past the last offset are not written.
    for (let i = used * Nd; i < M * Nd; i++) expect(Object.is(all[i], convert(dstDt, prev[i])), `row ${Math.floor(i / Nd)} past the last offset was written`).toBe(true);
    return { got: all.slice(0, used * Nd), want, pd };
  } finally {
    mems.forEach((m) => m.free());
  }
}

// ---------------------------------------------------------------------------------------------------
// Dense 2D runner: src [M, K] x weights [K, N] -> dst [M, Nd].

export interface DenseCase {
  readonly M: number;
  readonly K: number;
  readonly N: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly scales?: GMCase['scales'];
  readonly zps?: GMCase['zps'];
  readonly bias?: boolean;
  readonly glu?: GluSpec;
  /** Binary ops here take a src1 of dims [M|1, Nd|1]. */
  readonly ops?: readonly (TestOp | { readonly kind: 'binary_dense'; readonly alg: BinaryAlg; readonly dims: readonly [number, number] })[];
  readonly seed?: number;
}

export async function runDense(eng: Engine, strm: Stream, c: DenseCase): Promise<Outcome> {
  const rng = mulberry32(c.seed ?? 9);
  const { M, K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const S: Sizes = { G: 1, M, K, N, Nd };
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const srcMd = memory.desc([M, K], srcDt, tag.ab), weiMd = memory.desc([K, N], weiDt, tag.ab), dstMd = memory.desc([M, Nd], dstDt, tag.ab);
  const biasMd = c.bias ? memory.desc([1, N], dt.f32, tag.ab) : undefined;
  const bins = (c.ops ?? []).map((op) => {
    if (op.kind !== 'binary_dense') return undefined;
    const [r, n] = op.dims;
    const v = Float64Array.from({ length: r * n }, () => pick(rng, [-2, -1, 0.5, 1, 2]));
    return { md: memory.desc([r, n], dt.f32, tag.ab), values: v, at: (_g: number, rr: number, nn: number) => v[(r === 1 ? 0 : rr) * n + (n === 1 ? 0 : nn)] };
  });
  const ops: TestOp[] = (c.ops ?? []).map((op) => (op.kind === 'binary_dense' ? { kind: 'binary', alg: op.alg, shape: 'row_n' } : op));
  const attr = attrOf({ ...c, ops }, bins.map((b) => b?.md));
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc): Memory => { const m = Memory.create(md, eng); mems.push(m); return m; };
  try {
    const x = tensorValues(srcDt, rng, M * K), w = tensorValues(weiDt, rng, K * N), prev = tensorValues(dstDt, rng, M * Nd);
    const args: Record<number, Memory> = { [ARG.SRC]: mk(srcMd).write(x), [ARG.WEIGHTS]: mk(weiMd).write(w), [ARG.DST]: mk(dstMd).write(prev) };
    const b = c.bias ? tensorValues(dt.f32, rng, N) : undefined;
    if (biasMd && b) args[ARG.BIAS] = mk(biasMd).write(b);
    const look: Partial<Record<string, Lookup>> = {};
    for (const [kind, base, tbl] of [['s', ARG.ATTR_SCALES, c.scales], ['z', ARG.ATTR_ZERO_POINTS, c.zps]] as const) {
      for (const a of ['src', 'weights', 'dst'] as const) {
        const q = tbl?.[a];
        if (!q) continue;
        const qdt = q.dt ?? (kind === 's' ? dt.f32 : dt.s32);
        const dims = q.gran.dims(S);
        const count = dims.reduce((u, v) => u * v, 1);
        const vals = kind === 's' ? scaleValues(qdt, rng, count) : zpValues(qdt, rng, count);
        const md = memory.desc(dims, qdt, 'abc'.slice(0, dims.length));
        expect(pd.queryMd(`${kind === 's' ? 'scales' : 'zero_points'}:${a}`)?.equals(md)).toBe(true);
        args[base | QUANT_ID[a]] = mk(md).write(vals);
        look[kind + a] = (g, i, j) => vals[q.gran.index(S, g, i, j)];
      }
    }
    bins.forEach((t, i) => {
      if (t) args[ARG.ATTR_MULTIPLE_POST_OP(i + (c.glu ? 1 : 0)) | ARG.SRC_1] = mk(t.md).write(t.values);
    });
    prim.execute(strm, args);
    await strm.wait();
    const e: Expectation = {
      N, dstDt, glu: c.glu,
      x: (r, k) => x[r * K + k],
      w: (_g, k, n) => w[k * N + n],
      ss: look.ssrc, zs: look.zsrc, sw: look.sweights, zw: look.zweights, sd: look.sdst, zd: look.zdst,
      bias: b ? (_g, _r, n) => b[n] : undefined,
      ops: ops.map((op, i) => ({ ...op, at: bins[i]?.at })),
      prev: (r, n) => prev[r * Nd + n],
    };
    const ks = Array.from({ length: K }, (_, k) => k);
    const want = new Float64Array(M * Nd);
    for (let r = 0; r < M; r++) for (let n = 0; n < Nd; n++) want[r * Nd + n] = expectElement(e, 0, r, n, ks);
    return { got: Float64Array.from((args[ARG.DST] as Memory).read()), want, pd };
  } finally {
    mems.forEach((m) => m.free());
  }
}

// ---------------------------------------------------------------------------------------------------
// Proposal #3 runner: expert i: src [M_i, K_i] x weights [K_i, N_i] -> dst [M_i, N_i(/2)].

export interface P3QCase {
  readonly experts: readonly { readonly K: number; readonly N: number; readonly rows: number; readonly cap?: number }[];
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  /** 'tensor' | 'row' for src, 'tensor' | 'col' | kBlock gK for weights, 'tensor' for dst. */
  readonly scales?: { readonly src?: { kind: 'tensor' | 'row'; dt?: DataType }; readonly weights?: { kind: 'tensor' | 'col' | number; dt?: DataType }; readonly dst?: { kind: 'tensor'; dt?: DataType } };
  readonly zps?: { readonly src?: { kind: 'tensor'; dt?: DataType }; readonly weights?: { kind: 'tensor' | 'col'; dt?: DataType } };
  readonly glu?: GluSpec;
  /** Binary src1: 'shared_1' [1,1], 'shared_n' [1,N], 'row_1' [RT,1] per expert, 'row_n' [RT,N] per expert. */
  readonly ops?: readonly (Exclude<TestOp, { kind: 'binary' }> | { readonly kind: 'binary'; readonly alg: BinaryAlg; readonly shape: 'shared_1' | 'shared_n' | 'row_1' | 'row_n'; readonly dt?: DataType })[];
  /** Every expert reads expert 0's src memory (same K, rows and cap): the same tokens for all. */
  readonly sharedSrc?: boolean;
  /** Weights `tag.any`: each expert's pd-chosen (packed) layout, filled by a reorder from plain weights; `'runtime'` as in GMCase. */
  readonly packed?: boolean | 'runtime';
  /** src and weights over the whole s8 / u8 range (tensorValues `full`). */
  readonly fullRange?: boolean;
  readonly seed?: number;
}

/** f32 P#3 scale settings every engine's P#3 tests run (name, the case's scales). */
export const P3_F32_SCALE_CASES = [
  ['src per tensor, weights per tensor, dst per tensor', { scales: { src: { kind: 'tensor' }, weights: { kind: 'tensor' }, dst: { kind: 'tensor' } } }],
  ['src per row (runtime [M_i] memories), weights per column', { scales: { src: { kind: 'row' }, weights: { kind: 'col' } } }],
  ['weights K-blocks of 4 ([K_i/4, N_i])', { scales: { weights: { kind: 4 } } }],
  ['e8m0 / f8_e4m3 / bf16 scale types', { scales: { src: { kind: 'row', dt: dt.e8m0 }, weights: { kind: 'col', dt: dt.f8_e4m3 }, dst: { kind: 'tensor', dt: dt.bf16 } } }],
] as const satisfies readonly (readonly [string, Pick<P3QCase, 'scales'>])[];

const P3_ID = { src: ARG.MULTIPLE_SRC, weights: ARG.MULTIPLE_WEIGHTS, dst: ARG.MULTIPLE_DST } as const;

type AnyMemory = Memory | GpuMemory;

/** A memory on either engine kind, over `handle` (a cpu heap address or a GPUBuffer) when given. */
function createOn(md: MemoryDesc, eng: Engine | GpuEngine, handle?: number | GPUBuffer): AnyMemory {
  return eng.kind === 'gpu' ? Memory.create(md, eng, handle as GPUBuffer | undefined) : Memory.create(md, eng, handle as number | undefined);
}

/** Proposal #3 with rfcs/0002 fusions on either engine kind (packed weights: cpu only). */
export async function runP3Q(eng: Engine | GpuEngine, strm: Stream, c: P3QCase): Promise<Outcome> {
  const rng = mulberry32(c.seed ?? 5);
  const E = c.experts.length;
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const nd = (N: number): number => (c.glu ? N / 2 : N);
  const attr = new PrimitiveAttr();
  const sMask = { tensor: 0, row: 1, col: 2 } as const;
  if (c.scales?.src) attr.setScales(ARG.MULTIPLE_SRC, sMask[c.scales.src.kind], [], c.scales.src.dt ?? dt.f32);
  if (c.scales?.weights) {
    const k = c.scales.weights.kind;
    if (typeof k === 'number') attr.setScales(ARG.MULTIPLE_WEIGHTS, 3, [k, 1], c.scales.weights.dt ?? dt.f32);
    else attr.setScales(ARG.MULTIPLE_WEIGHTS, sMask[k], [], c.scales.weights.dt ?? dt.f32);
  }
  if (c.scales?.dst) attr.setScales(ARG.MULTIPLE_DST, 0, [], c.scales.dst.dt ?? dt.f32);
  if (c.zps?.src) attr.setZeroPoints(ARG.MULTIPLE_SRC, 0, [], c.zps.src.dt ?? dt.s32);
  if (c.zps?.weights) attr.setZeroPoints(ARG.MULTIPLE_WEIGHTS, sMask[c.zps.weights.kind], [], c.zps.weights.dt ?? dt.s32);
  if (c.glu) attr.postOps.appendGlu(c.glu.alg, c.glu.layout, c.glu.alpha, c.glu.limit);
  const N0 = nd(c.experts[0].N);
  const binMd = (shape: string, t: DataType = dt.f32): MemoryDesc =>
    shape === 'shared_1' ? memory.desc([1, 1], t, tag.ab) : shape === 'shared_n' ? memory.desc([1, N0], t, tag.ab) :
    shape === 'row_1' ? memory.desc([RT, 1], t, tag.ab) : memory.desc([RT, N0], t, tag.ab);
  for (const op of c.ops ?? []) {
    if (op.kind === 'eltwise') attr.postOps.appendEltwise(op.alg, op.alpha ?? 0, op.beta ?? 0);
    else if (op.kind === 'sum') attr.postOps.appendSum(op.scale);
    else attr.postOps.appendBinary(op.alg, binMd(op.shape, op.dt));
  }
  const srcMds = c.experts.map((e) => memory.desc([RT, e.K], srcDt, tag.ab));
  const dstMds = c.experts.map((e) => memory.desc([RT, nd(e.N)], dstDt, tag.ab));
  const plainWeiMds = c.experts.map((e) => memory.desc([e.K, e.N], weiDt, tag.ab));
  const cpu = (): Engine => { if (eng.kind === 'gpu') throw new Error('runP3Q: packed weights are a cpu engine case'); return eng; };
  const codesOnly = (K: number, N: number): MemoryDesc => new matmul.PrimitiveDesc(cpu(), memory.desc([1, K], dt.f32, tag.ab), memory.desc([K, N], weiDt, tag.any), memory.desc([1, N], dt.f32, tag.ab)).queryMd('weights')!;
  const weiMds = c.packed === 'runtime' ? c.experts.map((e) => codesOnly(e.K, e.N)) : c.packed ? c.experts.map((e) => memory.desc([e.K, e.N], weiDt, tag.any)) : plainWeiMds;
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, dimsMd, attr);
  const prim = new grouped_gemm.Primitive(pd);
  const mems: AnyMemory[] = [];
  const mk = (md: MemoryDesc, h?: number | GPUBuffer): AnyMemory => { const m = createOn(md, eng, h); mems.push(m); return m; };
  /** A runtime-rows memory over a fresh plain allocation of `cap` rows. */
  const rowsMem = (md: MemoryDesc, cap: number, values: Float64Array): AnyMemory => {
    const plain = mk(memory.desc(md.ndims === 2 ? [cap, md.dims[1]] : [cap], md.dataType, md.ndims === 2 ? tag.ab : tag.a)).write(values);
    return mk(md, plain.handles[0]);
  };
  try {
    const args: Record<number, AnyMemory> = {};
    const exps: Expectation[] = [];
    const prevs: Float64Array[] = [];
    const dstPlain: AnyMemory[] = [];
    /** Values of the shared (`[1, 1|N]`) src1 tensors, by op index: written once, read by every expert. */
    const sharedVals: (Float64Array | undefined)[] = [];
    let x0: Float64Array = new Float64Array(0);
    c.experts.forEach((e, i) => {
      const cap = e.cap ?? e.rows;
      const Nd = nd(e.N);
      const own = tensorValues(srcDt, rng, cap * e.K, c.fullRange), w = tensorValues(weiDt, rng, e.K * e.N, c.fullRange), prev = tensorValues(dstDt, rng, cap * Nd);
      const x = c.sharedSrc && i > 0 ? x0 : own;
      args[ARG.MULTIPLE_SRC + i] = c.sharedSrc && i > 0 ? args[ARG.MULTIPLE_SRC] : rowsMem(srcMds[i], cap, x);
      if (i === 0) x0 = x;
      const dp = mk(memory.desc([cap, Nd], dstDt, tag.ab)).write(prev);
      dstPlain.push(dp);
      prevs.push(prev);
      args[ARG.MULTIPLE_DST + i] = mk(dstMds[i], dp.handles[0]);
      let plainW: AnyMemory | undefined;
      if (c.packed) {
        plainW = mk(plainWeiMds[i]).write(w);
        const pw = mk(pd.queryMd('weights', i)!);
        expect(pw.desc.format, 'the pd picks a layout').toBe('packed');
        args[ARG.MULTIPLE_WEIGHTS + i] = pw;
      } else args[ARG.MULTIPLE_WEIGHTS + i] = mk(weiMds[i]).write(w);
      const look: Partial<Record<string, Lookup>> = {};
      const put = (key: string, base: number, a: 'src' | 'weights' | 'dst', md: MemoryDesc, vals: Float64Array, index: (r: number, b: number) => number, perRow: boolean): void => {
        expect(pd.queryMd(`${base === ARG.ATTR_SCALES ? 'scales' : 'zero_points'}:${a}`, i)?.equals(md), `${key} desc of expert ${i}`).toBe(true);
        args[base | (P3_ID[a] + i)] = perRow ? rowsMem(md, cap, vals) : mk(md).write(vals);
        look[key] = (_g, r, b) => vals[index(r, b)];
      };
      const sS = c.scales?.src, sW = c.scales?.weights, sD = c.scales?.dst, zS = c.zps?.src, zW = c.zps?.weights;
      if (sS?.kind === 'tensor') put('ss', ARG.ATTR_SCALES, 'src', memory.desc([1], sS.dt ?? dt.f32, tag.a), scaleValues(sS.dt ?? dt.f32, rng, 1), () => 0, false);
      if (sS?.kind === 'row') put('ss', ARG.ATTR_SCALES, 'src', memory.desc([RT], sS.dt ?? dt.f32, tag.a), scaleValues(sS.dt ?? dt.f32, rng, cap), (r) => r, true);
      if (sW?.kind === 'tensor') put('sw', ARG.ATTR_SCALES, 'weights', memory.desc([1], sW.dt ?? dt.f32, tag.a), scaleValues(sW.dt ?? dt.f32, rng, 1), () => 0, false);
      if (sW?.kind === 'col') put('sw', ARG.ATTR_SCALES, 'weights', memory.desc([e.N], sW.dt ?? dt.f32, tag.a), scaleValues(sW.dt ?? dt.f32, rng, e.N), (_k, n) => n, false);
      if (typeof sW?.kind === 'number') {
        const gK = sW.kind;
        put('sw', ARG.ATTR_SCALES, 'weights', memory.desc([e.K / gK, e.N], sW.dt ?? dt.f32, tag.ab), scaleValues(sW.dt ?? dt.f32, rng, (e.K / gK) * e.N), (k, n) => Math.floor(k / gK) * e.N + n, false);
      }
      if (sD) put('sd', ARG.ATTR_SCALES, 'dst', memory.desc([1], sD.dt ?? dt.f32, tag.a), scaleValues(sD.dt ?? dt.f32, rng, 1), () => 0, false);
      if (zS) put('zs', ARG.ATTR_ZERO_POINTS, 'src', memory.desc([1], zS.dt ?? dt.s32, tag.a), zpValues(zS.dt ?? dt.s32, rng, 1), () => 0, false);
      if (zW?.kind === 'tensor') put('zw', ARG.ATTR_ZERO_POINTS, 'weights', memory.desc([1], zW.dt ?? dt.s32, tag.a), zpValues(zW.dt ?? dt.s32, rng, 1), () => 0, false);
      if (zW?.kind === 'col') put('zw', ARG.ATTR_ZERO_POINTS, 'weights', memory.desc([e.N], zW.dt ?? dt.s32, tag.a), zpValues(zW.dt ?? dt.s32, rng, e.N), (_k, n) => n, false);
      if (plainW) reorderInto(cpu(), strm, plainW as Memory, args[ARG.MULTIPLE_WEIGHTS + i] as Memory, args as Record<number, Memory>, ARG.MULTIPLE_WEIGHTS + i);
      const ops = (c.ops ?? []).map((op, j) => {
        if (op.kind !== 'binary') return op;
        const pos = j + (c.glu ? 1 : 0);
        const md = binMd(op.shape, op.dt);
        const perRow = op.shape === 'row_1' || op.shape === 'row_n';
        const cols = op.shape.endsWith('_n') ? Nd : 1;
        const vals = Float64Array.from({ length: (perRow ? cap : 1) * cols }, () => pick(rng, op.dt ? binaryValueSet(op.dt) : [-2, -1, 0.5, 1, 2]));
        let v: Float64Array = vals;
        if (perRow) args[ARG.ATTR_MULTIPLE_POST_OP(pos) | (ARG.MULTIPLE_SRC + i)] = rowsMem(md, cap, vals);
        else if (i === 0) args[ARG.ATTR_MULTIPLE_POST_OP(pos) | ARG.SRC_1] = mk(md).write(vals);
        else v = sharedVals[j]!;
        if (i === 0 && !perRow) sharedVals[j] = vals;
        return { kind: 'binary' as const, alg: op.alg, shape: 'row_n' as BinaryShape, at: (_g: number, r: number, n: number) => v[(perRow ? r : 0) * cols + (cols === 1 ? 0 : n)] };
      });
      exps.push({
        N: e.N, dstDt, glu: c.glu,
        x: (r, k) => x[r * e.K + k], w: (_g, k, n) => w[k * e.N + n],
        ss: look.ss, zs: look.zs, sw: look.sw, zw: look.zw, sd: look.sd,
        ops, prev: (r, n) => prev[r * Nd + n],
      });
    });
    args[ARG.RUNTIME_DIMS] = mk(dimsMd).write(c.experts.map((e) => e.rows));
    prim.execute(strm, args);
    await strm.wait();
    const got: number[] = [], want: number[] = [];
    for (const [i, e] of c.experts.entries()) {
      const Nd = nd(e.N);
      const all = await dstPlain[i].read();
      const ks = Array.from({ length: e.K }, (_, k) => k);
      for (let r = 0; r < e.rows; r++) for (let n = 0; n < Nd; n++) {
        got.push(all[r * Nd + n]);
        want.push(expectElement(exps[i], 0, r, n, ks));
      }
      for (let j = e.rows * Nd; j < all.length; j++) expect(Object.is(all[j], convert(dstDt, prevs[i][j])), `expert ${i} row past M written`).toBe(true);
    }
    return { got: Float64Array.from(got), want: Float64Array.from(want), pd };
  } finally {
    mems.forEach((m) => m.free());
    prim.destroy();
  }
}

/** Bitwise equality of every element (NaN-aware), listing the first mismatches. */
/** Two outcomes bit for bit (NaN payloads aside: Object.is), reporting the first differing elements. */
export function expectSameBits(a: Outcome, b: Outcome, what: string): void {
  expect(a.got.length, what).toBe(b.got.length);
  const bad: number[] = [];
  for (let i = 0; i < a.got.length; i++) if (!Object.is(a.got[i], b.got[i])) bad.push(i);
  expect(bad.slice(0, 5), `${what}: ${bad.length} elements differ`).toEqual([]);
}

export function expectBitwise(o: Outcome, what = 'dst'): void {
  expect(o.got.length, `${what}: element count`).toBe(o.want.length);
  const bad: string[] = [];
  for (let i = 0; i < o.got.length; i++) if (!Object.is(o.got[i], o.want[i])) bad.push(`[${i}] got ${o.got[i]} want ${o.want[i]}`);
  expect(bad.slice(0, 6), `${what}: ${bad.length} of ${o.got.length} elements differ`).toEqual([]);
}

/** |got - want| <= rel * |want| + abs for every element (transcendental post-ops). */
export function expectClose(o: Outcome, rel = 2e-6, abs = 1e-5, what = 'dst'): void {
  expect(o.got.length).toBe(o.want.length);
  const bad: string[] = [];
  for (let i = 0; i < o.got.length; i++) {
    const err = Math.abs(o.got[i] - o.want[i]);
    if (!(err <= rel * Math.abs(o.want[i]) + abs)) bad.push(`[${i}] got ${o.got[i]} want ${o.want[i]}`);
  }
  expect(bad.slice(0, 6), `${what}: ${bad.length} of ${o.got.length} elements out of tolerance`).toEqual([]);
}

/**
 * The engines the quantization tests run on: a wasm engine (whatever implementation it picks for a
 * quantized problem — the kernels, or the reference they fall back to — must match the spec) and the
 * reference alone.
 */
export const QUANT_ENGINES = [
  ['wasm simd128', { threads: 1, kernels: 'simd128' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const;
