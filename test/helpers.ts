/**
 * Test plumbing over the public API: logical <-> physical copies that honour strides, error
 * assertions, and runners that build, execute and reference-check one matmul case.
 */
import { expect } from 'vitest';
import {
  ARG, DnnlError, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, matmul, memory,
  type DataType, type EngineOptions, type Status,
} from '../src/index.js';
import {
  TOL_BF16, TOL_F16, TOL_F32, assertClose, refGroupedK, refGroupedM, refDense,
  type RefBias, type RefOut, type RefPostOp, type Tolerance,
} from './reference.js';
import { cumulative, mulberry32, randomF32, randomLowPrecisionExact, type Rng } from './workloads.js';

export type ErrorStatus = Exclude<Status, 'success'>;

/**
 * Every matmul test runs on each implementation family: the wasm SIMD128 and relaxed-SIMD kernels
 * (which fall back to the reference for problems they reject) and the reference alone.
 */
export const ENGINE_CONFIGS: ReadonlyArray<readonly [string, EngineOptions]> = [
  ['wasm simd128', { threads: 1, kernels: 'simd128' }],
  ['wasm relaxed', { threads: 1, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
];

/** Physical element index (into the values span) of every logical element, in row-major order. */
export function physicalIndices(dims: readonly number[], strides: readonly number[]): number[] {
  const out: number[] = [];
  const nd = dims.length;
  if (dims.some((d) => d === 0)) return out;
  const idx = new Array<number>(nd).fill(0);
  for (;;) {
    let off = 0;
    for (let d = 0; d < nd; d++) off += idx[d] * strides[d];
    out.push(off);
    let d = nd - 1;
    while (d >= 0 && ++idx[d] === dims[d]) idx[d--] = 0;
    if (d < 0) return out;
  }
}

/** Writes logical row-major values into a memory object; elements outside the logical tensor get `pad`. */
export function writeLogical(mem: Memory, logical: ArrayLike<number>, pad = Number.NaN): void {
  const phys = physicalIndices(mem.desc.dims, mem.desc.strides);
  expect(logical.length).toBe(phys.length);
  const span = new Float64Array(mem.elementCount).fill(pad);
  phys.forEach((p, i) => { span[p] = logical[i]; });
  mem.write(span);
}

/** Reads the logical row-major values of a memory object. */
export function readLogical(mem: Memory): Float64Array {
  const span = mem.read();
  return Float64Array.from(physicalIndices(mem.desc.dims, mem.desc.strides), (p) => span[p]);
}

/** Positions of the span that changed (bit-for-bit, NaN-aware) outside the `allowed` set. */
export function changedOutside(before: ArrayLike<number>, after: ArrayLike<number>, allowed: ReadonlySet<number>): number[] {
  const bad: number[] = [];
  for (let i = 0; i < before.length; i++) if (!allowed.has(i) && !Object.is(before[i], after[i])) bad.push(i);
  return bad;
}

function describeError(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/**
 * got and want as f32 bit patterns, element for element (the same length); `nonTrivial`: want must hold a
 * non-zero value too, so that a result of all zeros cannot pass by accident.
 */
export function expectF32Bits(got: Float32Array, want: Float32Array, what: string, nonTrivial = true): void {
  expect(got.length, what).toBe(want.length);
  const g = new Uint32Array(got.buffer, got.byteOffset, got.length), w = new Uint32Array(want.buffer, want.byteOffset, want.length);
  let bad = -1;
  for (let i = 0; i < g.length && bad < 0; i++) if (g[i] !== w[i]) bad = i;
  expect(bad, `${what}: first differing element ${bad}: got ${got[bad]}, want ${want[bad]}`).toBe(-1);
  if (nonTrivial) expect(want.some((v) => v !== 0), `${what}: a non-trivial result`).toBe(true);
}

/** Asserts `fn` throws a DnnlError with `status` whose message contains `fragment`. */
export function expectDnnlError(fn: () => unknown, status: ErrorStatus, fragment: string | RegExp): DnnlError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  return checkError(caught, status, fragment);
}

/** Asserts `p` rejects with a DnnlError with `status` whose message contains `fragment`. */
export async function expectDnnlReject(p: Promise<unknown>, status: ErrorStatus, fragment: string | RegExp): Promise<DnnlError> {
  let caught: unknown;
  try {
    await p;
  } catch (e) {
    caught = e;
  }
  return checkError(caught, status, fragment);
}

function checkError(caught: unknown, status: ErrorStatus, fragment: string | RegExp): DnnlError {
  if (caught === undefined) throw new Error(`expected a DnnlError(${status}) matching ${String(fragment)}, nothing was thrown`);
  if (!(caught instanceof DnnlError)) throw new Error(`expected a DnnlError(${status}), got ${describeError(caught)}`);
  expect(caught.status, caught.message).toBe(status);
  if (typeof fragment === 'string') expect(caught.message).toContain(fragment);
  else expect(caught.message).toMatch(fragment);
  return caught;
}

/** Values of a data type with no rounding on the way in (f32-exact or k/16). */
/**
 * Small integers and k/8 values in [-1, 1] (a fixed sequence per seed): exact in every storage type and
 * in any f32 summation order of a short dot product, so a result's error is its own type's rounding.
 */
export function exactValues(n: number, seed: number): Float64Array {
  const out = new Float64Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s >>> 24) % 17 - 8) / 8;
  }
  return out;
}

export function randomFor(t: DataType, rng: Rng, n: number): Float64Array {
  // float types only: integer memories would round these values, and a reference on the raw ones be wrong
  if (t !== 'f32' && t !== 'bf16' && t !== 'f16') throw new Error(`randomFor: ${t} is not f32 / bf16 / f16`);
  return t === 'f32' ? randomF32(rng, n) : randomLowPrecisionExact(rng, n);
}

export function toleranceFor(t: DataType): Tolerance {
  return t === 'bf16' ? TOL_BF16 : t === 'f16' ? TOL_F16 : TOL_F32;
}

export function attrFor(ops: readonly RefPostOp[] | undefined): PrimitiveAttr {
  const attr = new PrimitiveAttr();
  for (const op of ops ?? []) {
    if (op.kind === 'relu') attr.postOps.appendEltwise(algorithm.eltwise_relu, op.alpha, 0);
    else if (op.kind === 'linear') attr.postOps.appendEltwise(algorithm.eltwise_linear, op.alpha, op.beta);
    else if (op.kind === 'sum') attr.postOps.appendSum(op.scale);
    else if ('beta' in op) attr.postOps.appendEltwise(algorithm[`eltwise_${op.kind}`], op.alpha, op.beta);
    else if ('alpha' in op) attr.postOps.appendEltwise(algorithm[`eltwise_${op.kind}`], op.alpha);
    else attr.postOps.appendEltwise(algorithm[`eltwise_${op.kind}`]);
  }
  return attr;
}

/** Strides [rowStride, 1] for a 2D tensor, or the dense default. */
function rowStrides(cols: number, rowStride: number | undefined): number[] | undefined {
  return rowStride === undefined ? undefined : [rowStride, 1];
}

export const SENTINEL = 12345;

// ---------------------------------------------------------------------------------------------------
// Grouped matmul, variable M: grouped src [total_M, K] x weights [G, K, N] -> grouped dst [total_M, N].

export interface GroupedMCase {
  readonly G: number;
  readonly K: number;
  readonly N: number;
  readonly sizes: readonly number[];
  /** Rows allocated (the descriptors' total_M); rows past sum(sizes) must stay untouched. */
  readonly totalM?: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly biasDt?: DataType;
  readonly weiTag?: 'abc' | 'acb';
  readonly srcRowStride?: number;
  readonly dstRowStride?: number;
  /** Bias dims: [G|1, N|1]. */
  readonly bias?: readonly [number, number];
  readonly postOps?: readonly RefPostOp[];
  /** 'shared': dst reuses src's offsets buffer; 'separate': dst has its own, equal buffer. */
  readonly offsets?: 'shared' | 'separate';
  /** Per-group groupedDims (host-known sizes) instead of [RUNTIME_DIM_VAL, K]. */
  readonly perGroup?: boolean;
  readonly seed?: number;
}

export interface CaseRun {
  /** Logical dst values the reference covers. */
  readonly got: Float64Array;
  readonly ref: RefOut;
  readonly tol: Tolerance;
  /** Span positions of dst that changed but lie outside the computed region (must be empty). */
  readonly strayWrites: number[];
}

export interface GroupedMFixture {
  readonly pd: matmul.PrimitiveDesc;
  readonly prim: matmul.Primitive;
  readonly src: Memory;
  readonly wei: Memory;
  readonly dst: Memory;
  readonly bias: Memory | undefined;
  readonly x: Float64Array;
  readonly w: Float64Array;
  readonly b: RefBias | undefined;
  readonly totalM: number;
  free(): void;
}

function groupedDimsFor(sizes: readonly number[], inner: number, perGroup: boolean | undefined, varDim: 0 | 1): number[] {
  if (!perGroup) return varDim === 0 ? [RUNTIME_DIM_VAL, inner] : [inner, RUNTIME_DIM_VAL];
  return sizes.flatMap((s) => (varDim === 0 ? [s, inner] : [inner, s]));
}

/** Builds descriptors, primitive and memory objects for a grouped-M case (inputs written, dst sentinel-filled). */
export function setupGroupedM(eng: Engine, c: GroupedMCase): GroupedMFixture {
  const rng = mulberry32(c.seed ?? 1);
  const { G, K, N, sizes } = c;
  const used = sizes.reduce((a, b) => a + b, 0);
  const totalM = c.totalM ?? used;
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32, biasDt = c.biasDt ?? dt.f32;
  const srcMd = memory.desc.grouped([totalM, K], srcDt, G, groupedDimsFor(sizes, K, c.perGroup, 0), dt.s32, rowStrides(K, c.srcRowStride));
  const dstMd = memory.desc.grouped([totalM, N], dstDt, G, groupedDimsFor(sizes, N, c.perGroup, 0), dt.s32, rowStrides(N, c.dstRowStride));
  const weiMd = memory.desc([G, K, N], weiDt, c.weiTag ?? 'abc');
  const biasMd = c.bias ? memory.desc([...c.bias], biasDt, 'ab') : undefined;
  const attr = attrFor(c.postOps);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);

  const src = Memory.create(srcMd, eng);
  const dst = c.offsets === 'shared' ? Memory.create(dstMd, eng, [undefined, src.handles[1]]) : Memory.create(dstMd, eng);
  const wei = Memory.create(weiMd, eng);
  const bias = biasMd ? Memory.create(biasMd, eng) : undefined;

  const x = randomFor(srcDt, rng, totalM * K);
  const w = randomFor(weiDt, rng, G * K * N);
  writeLogical(src, x);
  writeLogical(wei, w);
  let b: RefBias | undefined;
  if (bias && c.bias) {
    b = { dims: [...c.bias], data: randomFor(biasDt, rng, c.bias[0] * c.bias[1]) };
    writeLogical(bias, b.data);
  }
  const offs = cumulative(sizes);
  src.offsets.set(offs);
  if (c.offsets !== 'shared') dst.offsets.set(offs);
  // Rows to be computed get random "previous" values (read by a sum post-op); the rest a sentinel.
  const prev = randomFor(dstDt, rng, totalM * N);
  prev.fill(SENTINEL, used * N);
  writeLogical(dst, prev);
  return {
    pd, prim, src, wei, dst, bias, x, w, b, totalM,
    free: () => [src, wei, dst, bias].forEach((m) => m?.free()),
  };
}

/** Runs a grouped-M case end to end and returns what the test needs to assert. */
export async function runGroupedM(eng: Engine, strm: Stream, c: GroupedMCase): Promise<CaseRun> {
  const f = setupGroupedM(eng, c);
  try {
    const used = c.sizes.reduce((a, b) => a + b, 0);
    const before = f.dst.read();
    const prevLogical = readLogical(f.dst).subarray(0, used * c.N);
    f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst, ...(f.bias ? { [ARG.BIAS]: f.bias } : {}) });
    await strm.wait();
    const after = f.dst.read();
    const ref = refGroupedM(f.x, f.w, c.sizes, c.K, c.N, { bias: f.b, postOps: c.postOps, prevDst: prevLogical });
    const got = readLogical(f.dst).subarray(0, used * c.N);
    const computed = new Set(physicalIndices([used, c.N], f.dst.desc.strides));
    return { got, ref, tol: toleranceFor(c.dstDt ?? dt.f32), strayWrites: changedOutside(before, after, computed) };
  } finally {
    f.free();
  }
}

// ---------------------------------------------------------------------------------------------------
// Grouped matmul, variable K: grouped src [M, total_K] x grouped weights [total_K, N] -> dense [G, M, N].

export interface GroupedKCase {
  readonly G: number;
  readonly M: number;
  readonly N: number;
  readonly sizes: readonly number[];
  readonly totalK?: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly srcRowStride?: number;
  readonly weiRowStride?: number;
  /** Bias dims: [G|1, M|1, N|1]. */
  readonly bias?: readonly [number, number, number];
  readonly postOps?: readonly RefPostOp[];
  readonly offsets?: 'shared' | 'separate';
  readonly perGroup?: boolean;
  readonly seed?: number;
}

export interface GroupedKFixture {
  readonly prim: matmul.Primitive;
  readonly src: Memory;
  readonly wei: Memory;
  readonly dst: Memory;
  readonly bias: Memory | undefined;
  readonly x: Float64Array;
  readonly w: Float64Array;
  readonly b: RefBias | undefined;
  readonly totalK: number;
  free(): void;
}

export function setupGroupedK(eng: Engine, c: GroupedKCase): GroupedKFixture {
  const rng = mulberry32(c.seed ?? 2);
  const { G, M, N, sizes } = c;
  const used = sizes.reduce((a, b) => a + b, 0);
  const totalK = c.totalK ?? used;
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const srcMd = memory.desc.grouped([M, totalK], srcDt, G, groupedDimsFor(sizes, M, c.perGroup, 1), dt.s32, rowStrides(totalK, c.srcRowStride));
  const weiMd = memory.desc.grouped([totalK, N], weiDt, G, groupedDimsFor(sizes, N, c.perGroup, 0), dt.s32, rowStrides(N, c.weiRowStride));
  const dstMd = memory.desc([G, M, N], dstDt, 'abc');
  const biasMd = c.bias ? memory.desc([...c.bias], dt.f32, 'abc') : undefined;
  const attr = attrFor(c.postOps);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  const src = Memory.create(srcMd, eng);
  const wei = c.offsets === 'shared' ? Memory.create(weiMd, eng, [undefined, src.handles[1]]) : Memory.create(weiMd, eng);
  const dst = Memory.create(dstMd, eng);
  const bias = biasMd ? Memory.create(biasMd, eng) : undefined;
  const x = randomFor(srcDt, rng, M * totalK);
  const w = randomFor(weiDt, rng, totalK * N);
  writeLogical(src, x);
  writeLogical(wei, w);
  let b: RefBias | undefined;
  if (bias && c.bias) {
    b = { dims: [...c.bias], data: randomFor(dt.f32, rng, c.bias[0] * c.bias[1] * c.bias[2]) };
    writeLogical(bias, b.data);
  }
  const offs = cumulative(sizes);
  src.offsets.set(offs);
  if (c.offsets !== 'shared') wei.offsets.set(offs);
  writeLogical(dst, randomFor(dstDt, rng, G * M * N));
  return { prim, src, wei, dst, bias, x, w, b, totalK, free: () => [src, wei, dst, bias].forEach((m) => m?.free()) };
}

export async function runGroupedK(eng: Engine, strm: Stream, c: GroupedKCase): Promise<CaseRun> {
  const f = setupGroupedK(eng, c);
  try {
    const prev = readLogical(f.dst);
    f.prim.execute(strm, { [ARG.SRC]: f.src, [ARG.WEIGHTS]: f.wei, [ARG.DST]: f.dst, ...(f.bias ? { [ARG.BIAS]: f.bias } : {}) });
    await strm.wait();
    // The reference takes the logical [M, total_K] src and [total_K, N] weights.
    const ref = refGroupedK(f.x, f.w, c.sizes, c.M, c.N, { bias: f.b, postOps: c.postOps, prevDst: prev });
    return { got: readLogical(f.dst), ref, tol: toleranceFor(c.dstDt ?? dt.f32), strayWrites: [] };
  } finally {
    f.free();
  }
}

// ---------------------------------------------------------------------------------------------------
// Dense matmul.

export interface DenseCase {
  readonly srcDims: readonly number[];
  readonly weiDims: readonly number[];
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  /** A tag or explicit strides for each tensor (default row-major). */
  readonly srcLayout?: string | readonly number[];
  readonly weiLayout?: string | readonly number[];
  readonly dstLayout?: string | readonly number[];
  readonly bias?: readonly number[];
  readonly postOps?: readonly RefPostOp[];
  readonly seed?: number;
}

const rowMajor = (n: number): string => 'abcdefghijkl'.slice(0, n);

export async function runDense(eng: Engine, strm: Stream, c: DenseCase): Promise<CaseRun> {
  const rng = mulberry32(c.seed ?? 3);
  const nd = c.srcDims.length;
  const batch = c.srcDims.slice(0, nd - 2).map((b, i) => (b === 1 ? c.weiDims[i] : b));
  const dstDims = [...batch, c.srcDims[nd - 2], c.weiDims[nd - 1]];
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const srcMd = memory.desc(c.srcDims, srcDt, c.srcLayout ?? rowMajor(nd));
  const weiMd = memory.desc(c.weiDims, weiDt, c.weiLayout ?? rowMajor(nd));
  const dstMd = memory.desc(dstDims, dstDt, c.dstLayout ?? rowMajor(nd));
  const biasMd = c.bias ? memory.desc(c.bias, dt.f32, rowMajor(nd)) : undefined;
  const attr = attrFor(c.postOps);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc): Memory => {
    const m = Memory.create(md, eng);
    mems.push(m);
    return m;
  };
  try {
    const src = mk(srcMd), wei = mk(weiMd), dst = mk(dstMd);
    const bias = biasMd ? mk(biasMd) : undefined;
    const count = (d: readonly number[]): number => d.reduce((a, b) => a * b, 1);
    const x = randomFor(srcDt, rng, count(c.srcDims));
    const w = randomFor(weiDt, rng, count(c.weiDims));
    writeLogical(src, x);
    writeLogical(wei, w);
    let b: RefBias | undefined;
    if (bias && c.bias) {
      b = { dims: [...c.bias], data: randomFor(dt.f32, rng, count(c.bias)) };
      writeLogical(bias, b.data);
    }
    writeLogical(dst, randomFor(dstDt, rng, count(dstDims)), SENTINEL);
    const before = dst.read();
    const prev = readLogical(dst);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, ...(bias ? { [ARG.BIAS]: bias } : {}) });
    await strm.wait();
    const ref = refDense(x, c.srcDims, w, c.weiDims, { bias: b, postOps: c.postOps, prevDst: prev });
    expect(ref.dims).toEqual(dstDims);
    const computed = new Set(physicalIndices(dstDims, dst.desc.strides));
    return { got: readLogical(dst), ref, tol: toleranceFor(dstDt), strayWrites: changedOutside(before, dst.read(), computed) };
  } finally {
    mems.forEach((m) => m.free());
  }
}

/** The standard assertion for a case: every element within tolerance, nothing written elsewhere. */
export function expectMatchesReference(r: CaseRun, what = 'dst'): void {
  assertClose(r.got, r.ref, r.tol, what);
  expect(r.strayWrites, `${what}: writes outside the computed region`).toEqual([]);
}
