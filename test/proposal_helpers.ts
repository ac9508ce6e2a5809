/**
 * Test plumbing for RFC Proposal #2 (matmul with the grouped-offsets attribute: plain 2D src/dst,
 * offsets passed as `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`) and Proposal #3 (`grouped_gemm`: one
 * src/weights/dst per expert, rows per expert in `ARG.RUNTIME_DIMS`). Builders write seeded inputs,
 * sentinel-fill every dst row that must not be computed, and runners return a `CaseRun` checked
 * against the independent float64 reference (`refGroupedM`, one expert at a time for Proposal #3).
 */
import { expect } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, dtBytes, grouped_gemm, matmul, memory, reorder, tag,
  type DataType, type EngineOptions,
} from '../src/index.js';
import {
  ENGINE_CONFIGS, SENTINEL, attrFor, changedOutside, physicalIndices, randomFor, readLogical, toleranceFor, writeLogical, type CaseRun,
} from './helpers.js';
import { refGroupedM, type RefBias, type RefOut, type RefPostOp } from './reference.js';
import { cumulative, mulberry32 } from './workloads.js';

export const RT = RUNTIME_DIM_VAL;

/** Every engine config of the suite plus a 2-thread engine (worker pool, asynchronous stream). */
export const PROPOSAL_CONFIGS: ReadonlyArray<readonly [string, EngineOptions]> = [
  ...ENGINE_CONFIGS,
  ['wasm simd128, 2 threads', { threads: 2, kernels: 'simd128' }],
];

export type Args = Record<number, Memory>;

/** Copies a memory object's raw stored values (bits for bf16/f16). */
export function rawBits(m: Memory): number[] {
  return Array.from(m.values as ArrayLike<number>);
}

/** Asserts no element of the span changed (bit-for-bit, NaN-aware). */
export function expectUnchanged(before: ArrayLike<number>, after: ArrayLike<number>, what = 'dst'): void {
  expect(changedOutside(before, after, new Set()), `${what}: elements written despite the error`).toEqual([]);
}

/** Runs plain [K, N] (or [G, K, N]) weights through a reorder into the layout a pd chose. */
export function reorderInto(eng: Engine, strm: Stream, plain: Memory, target: MemoryDesc): Memory {
  const out = Memory.create(target, eng);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, target)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: out });
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Proposal #2: plain src [total_M, K] x weights [G, K, N] -> plain dst [total_M, N], offsets attribute.

export interface P2Case {
  readonly G: number;
  readonly K: number;
  readonly N: number;
  readonly sizes: readonly number[];
  /** Rows of src/dst (default sum(sizes)); rows past the last offset must stay untouched. */
  readonly totalM?: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  /** Weights layout: plain abc / acb, or tag.any (the pd's choice, filled by a reorder). */
  readonly wei?: 'abc' | 'acb' | 'any';
  readonly bias?: readonly [number, number];
  readonly postOps?: readonly RefPostOp[];
  readonly seed?: number;
}

export interface P2Fixture {
  readonly pd: matmul.PrimitiveDesc;
  readonly prim: matmul.Primitive;
  readonly src: Memory;
  readonly wei: Memory;
  readonly dst: Memory;
  readonly offs: Memory;
  readonly bias: Memory | undefined;
  readonly x: Float64Array;
  readonly w: Float64Array;
  readonly b: RefBias | undefined;
  readonly totalM: number;
  args(overrides?: Record<number, Memory | undefined>): Record<number, Memory | undefined>;
  free(): void;
}

export function p2Attr(G: number, postOps?: readonly RefPostOp[]): PrimitiveAttr {
  return attrFor(postOps).setGroupedOffsets(ARG.SRC, G, dt.s32);
}

/** Builds a Proposal #2 case: inputs written, offsets set, rows past the last offset sentinel-filled. */
export function setupP2(eng: Engine, strm: Stream, c: P2Case): P2Fixture {
  const rng = mulberry32(c.seed ?? 11);
  const { G, K, N, sizes } = c;
  const used = sizes.reduce((a, b) => a + b, 0);
  const totalM = c.totalM ?? used;
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const srcMd = memory.desc([totalM, K], srcDt, tag.ab);
  const dstMd = memory.desc([totalM, N], dstDt, tag.ab);
  const weiMd = memory.desc([G, K, N], weiDt, c.wei === 'any' ? tag.any : c.wei ?? tag.abc);
  const biasMd = c.bias ? memory.desc([...c.bias], dt.f32, tag.ab) : undefined;
  const attr = p2Attr(G, c.postOps);
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  const offsMd = pd.queryMd('grouped_offsets');
  if (!offsMd) throw new Error("queryMd('grouped_offsets') returned nothing");

  const x = randomFor(srcDt, rng, totalM * K);
  const w = randomFor(weiDt, rng, G * K * N);
  const src = Memory.create(srcMd, eng);
  const dst = Memory.create(dstMd, eng);
  const offs = Memory.create(offsMd, eng);
  const temps: Memory[] = [];
  writeLogical(src, x);
  let wei: Memory;
  if (c.wei === 'any') {
    const plain = Memory.create(memory.desc([G, K, N], weiDt, tag.abc), eng);
    writeLogical(plain, w);
    wei = reorderInto(eng, strm, plain, pd.queryMd('weights')!);
    temps.push(plain); // freed with the fixture: the reorder may run later (asynchronous stream)
  } else {
    wei = Memory.create(weiMd, eng);
    writeLogical(wei, w);
  }
  const bias = biasMd ? Memory.create(biasMd, eng) : undefined;
  let b: RefBias | undefined;
  if (bias && c.bias) {
    b = { dims: [...c.bias], data: randomFor(dt.f32, rng, c.bias[0] * c.bias[1]) };
    writeLogical(bias, b.data);
  }
  (offs.values as Int32Array).set(cumulative(sizes));
  const prev = randomFor(dstDt, rng, totalM * N);
  prev.fill(SENTINEL, used * N);
  writeLogical(dst, prev);
  const base = (): Record<number, Memory | undefined> => ({
    [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs, ...(bias ? { [ARG.BIAS]: bias } : {}),
  });
  return {
    pd, prim, src, wei, dst, offs, bias, x, w, b, totalM,
    args: (overrides = {}) => ({ ...base(), ...overrides }),
    free: () => [src, wei, dst, offs, bias, ...temps].forEach((m) => m?.free()),
  };
}

export async function runP2(eng: Engine, strm: Stream, c: P2Case): Promise<CaseRun> {
  const f = setupP2(eng, strm, c);
  try {
    await strm.wait(); // the weights reorder, if any
    const used = c.sizes.reduce((a, b) => a + b, 0);
    const before = f.dst.read();
    const prevLogical = readLogical(f.dst).subarray(0, used * c.N);
    f.prim.execute(strm, f.args());
    await strm.wait();
    const ref = refGroupedM(f.x, f.w, c.sizes, c.K, c.N, { bias: f.b, postOps: c.postOps, prevDst: prevLogical });
    const got = readLogical(f.dst).subarray(0, used * c.N);
    const computed = new Set(physicalIndices([used, c.N], f.dst.desc.strides));
    return { got, ref, tol: toleranceFor(c.dstDt ?? dt.f32), strayWrites: changedOutside(before, f.dst.read(), computed) };
  } finally {
    f.free();
  }
}

// ---------------------------------------------------------------------------------------------------
// Proposal #3: grouped_gemm, expert i: src_i [M_i, K_i] x wei_i [K_i, N_i] -> dst_i [M_i, N_i].

export interface P3Expert {
  readonly K: number;
  readonly N: number;
  /** M_i, passed in ARG.RUNTIME_DIMS. */
  readonly rows: number;
  /** Rows allocated for this expert's src and dst ('separate' layout; default `rows`). */
  readonly cap?: number;
  readonly wei?: 'ab' | 'ba' | 'any';
}

export interface P3Case {
  readonly experts: readonly P3Expert[];
  /**
   * 'views': one contiguous [total, K] src and [total, N] dst, experts are `expertViews` over them
   * (all experts share K and N); 'separate': every expert has its own src and dst allocations.
   */
  readonly layout: 'views' | 'separate';
  /** 'views' only: rows of the contiguous buffers (default sum of rows). */
  readonly totalM?: number;
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly postOps?: readonly RefPostOp[];
  readonly seed?: number;
}

export interface P3Fixture {
  readonly pd: grouped_gemm.PrimitiveDesc;
  readonly prim: grouped_gemm.Primitive;
  /** Plain memory objects owning the src / dst values (one for 'views', one per expert for 'separate'). */
  readonly srcParents: readonly Memory[];
  readonly dstParents: readonly Memory[];
  /** The runtime-M `[RUNTIME_DIM_VAL, K_i]` / `[RUNTIME_DIM_VAL, N_i]` memory objects passed to execute. */
  readonly srcs: readonly Memory[];
  readonly weis: readonly Memory[];
  readonly dsts: readonly Memory[];
  readonly dims: Memory;
  /** Logical inputs per expert: src rows [M_i, K_i] and weights [K_i, N_i]. */
  readonly xs: readonly Float64Array[];
  readonly ws: readonly Float64Array[];
  args(overrides?: Record<number, Memory | undefined>): Record<number, Memory | undefined>;
  free(): void;
}

/** Argument map of a grouped_gemm execution. */
export function p3Args(srcs: readonly Memory[], weis: readonly Memory[], dsts: readonly Memory[], dims: Memory): Args {
  const a: Args = { [ARG.RUNTIME_DIMS]: dims };
  srcs.forEach((m, i) => { a[ARG.MULTIPLE_SRC + i] = m; });
  weis.forEach((m, i) => { a[ARG.MULTIPLE_WEIGHTS + i] = m; });
  dsts.forEach((m, i) => { a[ARG.MULTIPLE_DST + i] = m; });
  return a;
}

/** Descriptor of a runtime-M row-major [RUNTIME_DIM_VAL, cols] expert tensor. */
export const runtimeRows = (cols: number, t: DataType): MemoryDesc => memory.desc([RT, cols], t, tag.ab);

export function setupP3(eng: Engine, strm: Stream, c: P3Case): P3Fixture {
  const rng = mulberry32(c.seed ?? 13);
  const E = c.experts.length;
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const rows = c.experts.map((e) => e.rows);
  const used = rows.reduce((a, b) => a + b, 0);
  const srcMds = c.experts.map((e) => runtimeRows(e.K, srcDt));
  const dstMds = c.experts.map((e) => runtimeRows(e.N, dstDt));
  const weiMds = c.experts.map((e) => memory.desc([e.K, e.N], weiDt, e.wei === 'any' ? tag.any : e.wei ?? tag.ab));
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, dimsMd, attrFor(c.postOps));
  const prim = new grouped_gemm.Primitive(pd);

  const xs: Float64Array[] = [], ws: Float64Array[] = [], temps: Memory[] = [];
  const srcParents: Memory[] = [], dstParents: Memory[] = [], srcs: Memory[] = [], dsts: Memory[] = [], weis: Memory[] = [];
  if (c.layout === 'views') {
    const { K, N } = c.experts[0];
    if (!c.experts.every((e) => e.K === K && e.N === N && e.cap === undefined)) throw new Error("setupP3: 'views' needs equal K and N");
    const totalM = c.totalM ?? used;
    const sp = Memory.create(memory.desc([totalM, K], srcDt, tag.ab), eng);
    const dp = Memory.create(memory.desc([totalM, N], dstDt, tag.ab), eng);
    const x = randomFor(srcDt, rng, totalM * K);
    writeLogical(sp, x);
    const prev = randomFor(dstDt, rng, totalM * N);
    prev.fill(SENTINEL, used * N);
    writeLogical(dp, prev);
    const offs = cumulative(rows);
    srcs.push(...grouped_gemm.expertViews(sp, offs));
    dsts.push(...grouped_gemm.expertViews(dp, offs));
    rows.forEach((m, i) => xs.push(x.slice(offs[i] * K, (offs[i] + m) * K)));
    srcParents.push(sp);
    dstParents.push(dp);
  } else {
    c.experts.forEach((e) => {
      const cap = e.cap ?? e.rows;
      const sp = Memory.create(memory.desc([cap, e.K], srcDt, tag.ab), eng);
      const dp = Memory.create(memory.desc([cap, e.N], dstDt, tag.ab), eng);
      const x = randomFor(srcDt, rng, cap * e.K);
      writeLogical(sp, x);
      const prev = randomFor(dstDt, rng, cap * e.N);
      prev.fill(SENTINEL, e.rows * e.N);
      writeLogical(dp, prev);
      srcs.push(Memory.create(runtimeRows(e.K, srcDt), eng, sp.handles[0]));
      dsts.push(Memory.create(runtimeRows(e.N, dstDt), eng, dp.handles[0]));
      xs.push(x.slice(0, e.rows * e.K));
      srcParents.push(sp);
      dstParents.push(dp);
    });
  }
  c.experts.forEach((e, i) => {
    const w = randomFor(weiDt, rng, e.K * e.N);
    ws.push(w);
    if (e.wei === 'any') {
      const plain = Memory.create(memory.desc([e.K, e.N], weiDt, tag.ab), eng);
      writeLogical(plain, w);
      weis.push(reorderInto(eng, strm, plain, pd.queryMd('weights', i)!));
      temps.push(plain);
    } else {
      const m = Memory.create(weiMds[i], eng);
      writeLogical(m, w);
      weis.push(m);
    }
  });
  const dims = Memory.create(dimsMd, eng);
  (dims.values as Int32Array).set(rows);
  return {
    pd, prim, srcParents, dstParents, srcs, weis, dsts, dims, xs, ws,
    args: (overrides = {}) => ({ ...p3Args(srcs, weis, dsts, dims), ...overrides }),
    free: () => [...srcs, ...dsts, ...weis, ...srcParents, ...dstParents, dims, ...temps].forEach((m) => m.free()),
  };
}

function concatRef(parts: readonly RefOut[]): RefOut {
  const n = parts.reduce((a, p) => a + p.value.length, 0);
  const value = new Float64Array(n), mag = new Float64Array(n);
  let o = 0;
  for (const p of parts) {
    value.set(p.value, o);
    mag.set(p.mag, o);
    o += p.value.length;
  }
  return { value, mag };
}

/** Logical [rows, cols] starting at `row0` of a plain 2D memory. */
function logicalRows(m: Memory, row0: number, rows: number): Float64Array {
  const cols = m.desc.dims[1];
  return readLogical(m).slice(row0 * cols, (row0 + rows) * cols);
}

/** Runs a Proposal #3 case end to end: every expert against `refGroupedM` for a single group. */
export async function runP3(eng: Engine, strm: Stream, c: P3Case): Promise<CaseRun> {
  const f = setupP3(eng, strm, c);
  try {
    await strm.wait(); // weight reorders
    const rows = c.experts.map((e) => e.rows);
    const offs = c.layout === 'views' ? cumulative(rows) : rows.map(() => 0);
    const parentOf = (i: number): Memory => f.dstParents[c.layout === 'views' ? 0 : i];
    const before = f.dstParents.map((m) => m.read());
    const prev = c.experts.map((e, i) => logicalRows(parentOf(i), offs[i], e.rows));
    f.prim.execute(strm, f.args());
    await strm.wait();
    const refs = c.experts.map((e, i) => refGroupedM(f.xs[i], f.ws[i], [e.rows], e.K, e.N, { postOps: c.postOps, prevDst: prev[i] }));
    const gots = c.experts.map((e, i) => logicalRows(parentOf(i), offs[i], e.rows));
    const got = new Float64Array(gots.reduce((a, g) => a + g.length, 0));
    gots.reduce((o, g) => (got.set(g, o), o + g.length), 0);
    const stray: number[] = [];
    f.dstParents.forEach((p, j) => {
      const computed = new Set<number>();
      c.experts.forEach((e, i) => {
        if (parentOf(i) !== p) return;
        for (const q of physicalIndices([e.rows, e.N], p.desc.strides)) computed.add(q + offs[i] * p.desc.strides[0]);
      });
      // Encode (parent, position) so a stray write names both.
      for (const q of changedOutside(before[j], p.read(), computed)) stray.push(j * 1e9 + q);
    });
    return { got, ref: concatRef(refs), tol: toleranceFor(c.dstDt ?? dt.f32), strayWrites: stray };
  } finally {
    f.free();
  }
}

/** Byte size of one row of a plain 2D memory. */
export const rowBytes = (m: Memory): number => m.desc.strides[0] * dtBytes(m.desc.dataType, 1);
