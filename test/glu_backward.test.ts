/**
 * GLU backward (rfcs/0002 section 10): the standalone `glu_backward` primitive and the matmul
 * `glu_backward` post-op, against an independent float64 reference (test/glu_backward_reference.ts)
 * and central finite differences of the forward GLU; fused == standalone bit for bit; bitwise
 * identical on 1, 2 and 3 threads; invalid inputs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, glu_backward, matmul, memory, reorder, tag, toStored,
  type DataType, type EngineOptions, type GluAlg, type GluLayout,
} from '../src/index.js';
import { finiteDifferenceRow, forwardDotRow, gluBackwardRow, type BwdSpec } from './glu_backward_reference.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { cumulative, mulberry32, type Rng } from './workloads.js';

const RT = RUNTIME_DIM_VAL;
const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];
const ENGINES: ReadonlyArray<readonly [string, EngineOptions]> = [
  ['wasm simd128', { threads: 1, kernels: 'simd128' }],
  ['wasm relaxed', { threads: 1, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
];

/** Parameters per algorithm: a non-default alpha for swiglu, a small limit for swiglu_oai so the clamps are active. */
function specOf(alg: GluAlg, layout: GluLayout): BwdSpec {
  if (alg === 'glu_swiglu') return { alg, layout, alpha: 1.25 };
  if (alg === 'glu_swiglu_oai') return { alg, layout, alpha: 1.702, limit: 1.5 };
  return { alg, layout };
}
const opts = (s: BwdSpec): { alpha?: number; limit?: number } => ({ ...(s.alpha !== undefined ? { alpha: s.alpha } : {}), ...(s.limit !== undefined ? { limit: s.limit } : {}) });

const uniform = (rng: Rng, n: number, lo: number, hi: number): Float64Array => Float64Array.from({ length: n }, () => Math.fround(lo + (hi - lo) * rng()));

/** Values away from swiglu_oai's kinks (finite differences across a kink are meaningless). */
function awayFromKinks(v: Float64Array, limit: number): Float64Array {
  return v.map((x) => (Math.abs(Math.abs(x) - limit) < 1e-3 ? x + 3e-3 : x));
}

function bits(a: ArrayLike<number>): Uint32Array {
  return new Uint32Array(Float32Array.from(a).buffer);
}

interface StandaloneCase {
  readonly spec: BwdSpec;
  readonly R: number;
  readonly N: number;
  readonly prob: boolean;
  /** Grouped descriptors with these per-group rows (sum <= R); plain when undefined. */
  readonly sizes?: readonly number[];
  readonly dt?: DataType;
  readonly seed?: number;
}

const f64 = (m: Memory): Float64Array => Float64Array.from(m.read());

interface StandaloneRun {
  readonly h: Float64Array;
  readonly d: Float64Array;
  readonly prob: Float64Array;
  readonly dprob0: Float64Array;
  readonly dh: Float64Array;
  readonly dprob: Float64Array;
  readonly rows: number;
  readonly implInfo: string;
}

/** Exact in f32, bf16 and f16. */
const SENTINEL = 4096;

/** Runs the standalone primitive once; rows past the last offset start at SENTINEL. */
async function runStandalone(eng: Engine, c: StandaloneCase): Promise<StandaloneRun> {
  const { R, N, spec } = c;
  const rng = mulberry32(c.seed ?? 7);
  const t = c.dt ?? dt.f32;
  const h = uniform(rng, R * 2 * N, -3, 3), d = uniform(rng, R * N, -1, 1);
  const prob = uniform(rng, R, 0.1, 1), dprob0 = uniform(rng, R, -1, 1);
  const G = c.sizes?.length ?? 0;
  const md = (cols: number): MemoryDesc => (c.sizes ? memory.desc.grouped([R, cols], t, G, [RT, cols]) : memory.desc([R, cols], t, tag.ab));
  const probMd = memory.desc([R, 1], dt.f32, tag.ab);
  const pd = new glu_backward.PrimitiveDesc(eng, md(2 * N), md(N), md(2 * N), { alg: spec.alg, layout: spec.layout, ...opts(spec), ...(c.prob ? { prob: probMd } : {}) });
  const prim = new glu_backward.Primitive(pd);
  const mh = Memory.create(md(2 * N), eng), md_ = Memory.create(md(N), eng), mo = Memory.create(md(2 * N), eng);
  mh.write(h);
  md_.write(d);
  mo.write(new Float64Array(R * 2 * N).fill(SENTINEL));
  const rows = c.sizes ? cumulative(c.sizes).at(-1)! : R;
  if (c.sizes) for (const m of [mh, md_, mo]) m.offsets.set(cumulative(c.sizes));
  const mp = Memory.create(probMd, eng), mdp = Memory.create(probMd, eng);
  mp.write(prob);
  mdp.write(dprob0.map((x, r) => (r < rows ? x : SENTINEL)));
  const strm = new Stream(eng);
  prim.execute(strm, { [ARG.SRC]: mh, [ARG.DIFF_DST]: md_, [ARG.DIFF_SRC]: mo, ...(c.prob ? { [ARG.GLU_PROB]: mp, [ARG.GLU_DIFF_PROB]: mdp } : {}) });
  await strm.wait();
  // The inputs as stored (bf16 / f16 round them).
  const out = { h: f64(mh), d: f64(md_), prob, dprob0, dh: f64(mo), dprob: f64(mdp), rows, implInfo: pd.implInfo };
  for (const m of [mh, md_, mo, mp, mdp]) m.free();
  prim.destroy();
  return out;
}

/** Checks a run against the float64 reference row by row; returns the worst relative error seen. */
function checkAgainstReference(c: StandaloneCase, r: StandaloneRun, rel = 2e-5): void {
  const { N, spec } = c;
  for (let row = 0; row < c.R; row++) {
    const dh = r.dh.subarray(row * 2 * N, (row + 1) * 2 * N);
    if (row >= r.rows) {
      expect(dh.every((x) => x === SENTINEL), `row ${row} past the last offset was written`).toBe(true);
      if (c.prob) expect(r.dprob[row]).toBe(SENTINEL);
      continue;
    }
    const ref = gluBackwardRow(spec, N, r.h.subarray(row * 2 * N), r.d.subarray(row * N), c.prob ? r.prob[row] : undefined);
    for (let i = 0; i < 2 * N; i++) {
      const tol = rel * (1 + Math.abs(ref.dh[i]));
      if (Math.abs(dh[i] - ref.dh[i]) > tol) expect.fail(`${spec.alg}/${spec.layout} row ${row} col ${i}: got ${dh[i]}, reference ${ref.dh[i]}`);
    }
    if (c.prob) {
      const want = r.dprob0[row] + ref.dprob;
      const tol = rel * (1 + ref.scale + Math.abs(r.dprob0[row]));
      if (Math.abs(r.dprob[row] - want) > tol) expect.fail(`${spec.alg}/${spec.layout} row ${row} dprob: got ${r.dprob[row]}, reference ${want}`);
    } else {
      expect(r.dprob[row]).toBe(Math.fround(r.dprob0[row]));
    }
  }
}

describe('glu_backward reference oracle', () => {
  it.each(ALGS.flatMap((a) => LAYOUTS.map((l) => [a, l] as const)))('%s %s: the float64 reference equals central finite differences of the forward', (alg, layout) => {
    const spec = specOf(alg, layout);
    const N = layout === 'blocks32' ? 32 : 5;
    const rng = mulberry32(11);
    for (let row = 0; row < 2; row++) {
      const h = awayFromKinks(uniform(rng, 2 * N, -3, 3), spec.limit ?? 7), d = uniform(rng, N, -1, 1), p = 0.7;
      const ref = gluBackwardRow(spec, N, h, d, p);
      const fd = finiteDifferenceRow(spec, N, h, d, p);
      for (let i = 0; i < 2 * N; i++) expect(Math.abs(ref.dh[i] - fd[i]), `col ${i}`).toBeLessThan(1e-6 * (1 + Math.abs(fd[i])));
      expect(Math.abs(ref.dprob - forwardDotRow(spec, N, h, d))).toBeLessThan(1e-9 * (1 + ref.scale));
    }
  });
});

describe.each(ENGINES)('glu_backward standalone (%s)', (_name, options) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(options);
  });
  afterAll(() => eng.release());

  it.each(ALGS.flatMap((a) => LAYOUTS.flatMap((l) => [[a, l, true], [a, l, false]] as const)))('%s %s prob=%s: matches the float64 reference (plain, I not a multiple of 4/8)', async (alg, layout, prob) => {
    const N = layout === 'blocks32' ? 64 : 37;
    const c: StandaloneCase = { spec: specOf(alg, layout), R: 9, N, prob };
    const r = await runStandalone(eng, c);
    expect(r.implInfo).toBe(options.kernels === 'none' ? 'ref:any' : `wasm:${eng.isa}:glu-bwd`);
    checkAgainstReference(c, r);
  });

  it.each(ALGS.map((a) => [a] as const))('%s: kernel gradients agree with finite differences of the forward', async (alg) => {
    const c: StandaloneCase = { spec: specOf(alg, 'interleaved'), R: 3, N: 6, prob: true, seed: 3 };
    const r = await runStandalone(eng, c);
    for (let row = 0; row < c.R; row++) {
      const h = r.h.subarray(row * 12, row * 12 + 12);
      const fd = finiteDifferenceRow(c.spec, 6, h, r.d.subarray(row * 6), r.prob[row], 1e-5);
      const lim = c.spec.limit ?? 7;
      for (let i = 0; i < 12; i++) {
        if (Math.abs(Math.abs(h[i]) - lim) < 1e-3) continue; // a kink of the clamp
        expect(Math.abs(r.dh[row * 12 + i] - fd[i]), `row ${row} col ${i}`).toBeLessThan(1e-4 * (1 + Math.abs(fd[i])));
      }
      const dot = forwardDotRow(c.spec, 6, h, r.d.subarray(row * 6));
      expect(Math.abs(r.dprob[row] - (r.dprob0[row] + dot))).toBeLessThan(1e-5 * (1 + Math.abs(dot)));
    }
  });

  it.each([
    ['empty groups first / middle / last', [0, 3, 0, 4, 0]],
    ['one group with all rows', [0, 10, 0]],
    ['E = 1', [10]],
    ['rows past the last offset', [2, 0, 5]],
    ['every group empty', [0, 0, 0]],
  ] as const)('grouped rows: %s (only rows before the last offset are touched)', async (_n, sizes) => {
    for (const alg of ALGS) {
      const c: StandaloneCase = { spec: specOf(alg, 'halves'), R: 10, N: 13, prob: true, sizes };
      checkAgainstReference(c, await runStandalone(eng, c));
    }
  });

  it.each([['bf16'], ['f16']] as const)('%s tensors: matches the reference within the type rounding', async (t) => {
    for (const layout of LAYOUTS) {
      const c: StandaloneCase = { spec: specOf('glu_swiglu', layout), R: 5, N: layout === 'blocks32' ? 32 : 11, prob: true, dt: t };
      const r = await runStandalone(eng, c);
      checkAgainstReference(c, r, t === 'bf16' ? 8e-3 : 1e-3);
    }
  });
});

// ------------------------------------------------------------------------------------------------
// The matmul post-op

type Kind = 'P1' | 'P2' | 'dense';
type WeiLayout = 'abc' | 'acb' | 'any';

interface FusedCase {
  readonly spec: BwdSpec;
  readonly kind: Kind;
  /** Rows per group (dense: one entry). */
  readonly sizes: readonly number[];
  /** Rows of the tensors past the last offset (grouped kinds). */
  readonly extra?: number;
  readonly K: number;
  readonly N: number;
  readonly prob: boolean;
  readonly wei: WeiLayout;
  readonly seed?: number;
  readonly h13Dt?: DataType;
  readonly dstDt?: DataType;
  /** Per-expert weights scales: the GEMM then takes the fused-epilogue path (the dGLU runs on both paths). */
  readonly weiScales?: boolean;
}

interface FusedRun {
  /** Fused: dst [T, 2N] and dprob. */
  readonly dst: Float64Array;
  readonly dprob: Float64Array;
  /** Plain GEMM then the standalone primitive on its output. */
  readonly sDst: Float64Array;
  readonly sDprob: Float64Array;
  readonly rows: number;
  readonly T: number;
  readonly implInfo: string;
  /** The GEMM's own output (the GLU output's diff) and the inputs, for the reference. */
  readonly diff: Float64Array;
  readonly h: Float64Array;
  readonly prob: Float64Array;
  readonly dprob0: Float64Array;
}

async function runFused(eng: Engine, c: FusedCase): Promise<FusedRun> {
  const strm = new Stream(eng);
  const { K, N, spec, kind } = c;
  const G = kind === 'dense' ? 1 : c.sizes.length;
  const rows = c.sizes.reduce((a, b) => a + b, 0);
  const T = rows + (kind === 'dense' ? 0 : c.extra ?? 0);
  const rng = mulberry32(c.seed ?? 5);
  const ddt = c.dstDt ?? dt.f32, hdt = c.h13Dt ?? dt.f32;
  const rowsMd = (cols: number, t: DataType): MemoryDesc => (kind === 'P1' ? memory.desc.grouped([T, cols], t, G, [RT, cols]) : memory.desc([T, cols], t, tag.ab));
  const weiDims = kind === 'dense' ? [K, N] : [G, K, N];
  const userTag = kind === 'dense' ? (c.wei === 'acb' ? tag.ba : tag.ab) : c.wei === 'acb' ? tag.acb : tag.abc;
  const userWeiMd = memory.desc(weiDims, dt.f32, userTag);
  const weiReq = c.wei === 'any' ? memory.desc(weiDims, dt.f32, tag.any) : userWeiMd;
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, handles?: readonly (number | undefined)[] | number): Memory => {
    const m = Memory.create(md, eng, handles);
    mems.push(m);
    return m;
  };
  const attrPlain = new PrimitiveAttr(), attrFused = new PrimitiveAttr();
  if (kind === 'P2') for (const a of [attrPlain, attrFused]) a.setGroupedOffsets(ARG.SRC, G);
  attrFused.postOps.appendGluBackward(spec.alg, spec.layout, spec.alpha, spec.limit, { prob: c.prob, srcDataType: hdt });
  if (c.weiScales) for (const a of [attrPlain, attrFused]) a.setScales(ARG.WEIGHTS, kind === 'dense' ? 0 : 1);
  const srcMd = rowsMd(K, dt.f32);
  const pdPlain = new matmul.PrimitiveDesc(eng, srcMd, weiReq, rowsMd(N, dt.f32), attrPlain);
  const pdFused = new matmul.PrimitiveDesc(eng, srcMd, weiReq, rowsMd(2 * N, ddt), attrFused);
  const src = mk(srcMd);
  src.write(uniform(rng, T * K, -1, 1));
  const offs = cumulative(c.sizes);
  if (kind === 'P1') src.offsets.set(offs);
  const userWei = mk(userWeiMd);
  userWei.write(uniform(rng, userWei.elementCount, -0.5, 0.5));
  let wei = userWei;
  const wmd = pdFused.queryMd('weights')!;
  expect(wmd.equals(pdPlain.queryMd('weights')!)).toBe(true);
  if (!wmd.equals(userWeiMd)) {
    wei = mk(wmd);
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, wmd)).execute(strm, { [ARG.FROM]: userWei, [ARG.TO]: wei });
  }
  const share = kind === 'P1' ? [undefined, src.handles[1]] : undefined;
  const diff = mk(rowsMd(N, dt.f32), share);
  diff.write(new Float64Array(T * N).fill(SENTINEL));
  const dst = mk(rowsMd(2 * N, ddt), share);
  dst.write(new Float64Array(T * 2 * N).fill(SENTINEL));
  const h13 = mk(pdFused.queryMd('glu_backward:src')!);
  h13.write(uniform(rng, T * 2 * N, -3, 3));
  const probMd = memory.desc([T, 1], dt.f32, tag.ab);
  const prob = uniform(rng, T, 0.1, 1), dprob0 = uniform(rng, T, -1, 1);
  const mp = mk(probMd), mdp = mk(probMd), sdp = mk(probMd);
  mp.write(prob);
  mdp.write(dprob0.map((x, r) => (r < rows ? x : SENTINEL)));
  sdp.write(dprob0);
  const base: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei };
  if (c.weiScales) {
    const sm = mk(pdFused.queryMd('scales:weights')!);
    sm.write(Float64Array.from({ length: sm.elementCount }, (_, i) => [0.5, 2, 1.5, 0.25][i % 4]));
    base[ARG.ATTR_SCALES | ARG.WEIGHTS] = sm;
  }
  if (kind === 'P2') {
    const om = mk(pdPlain.queryMd('grouped_offsets')!);
    (om.values as Int32Array).set(offs);
    base[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = om;
  }
  new matmul.Primitive(pdPlain).execute(strm, { ...base, [ARG.DST]: diff });
  const po = (x: number): number => ARG.ATTR_MULTIPLE_POST_OP(0) | x;
  new matmul.Primitive(pdFused).execute(strm, {
    ...base, [ARG.DST]: dst, [po(ARG.SRC_1)]: h13, ...(c.prob ? { [po(ARG.GLU_PROB)]: mp, [po(ARG.GLU_DIFF_PROB)]: mdp } : {}),
  });
  // The standalone primitive over plain views of the GEMM output.
  const plain = (cols: number, t: DataType): MemoryDesc => memory.desc([T, cols], t, tag.ab);
  const sOut = mk(plain(2 * N, ddt));
  const spd = new glu_backward.PrimitiveDesc(eng, plain(2 * N, ddt), plain(N, dt.f32), plain(2 * N, hdt), { alg: spec.alg, layout: spec.layout, ...opts(spec), ...(c.prob ? { prob: probMd } : {}) });
  new glu_backward.Primitive(spd).execute(strm, {
    [ARG.SRC]: h13, [ARG.DIFF_DST]: mk(plain(N, dt.f32), diff.handles[0]), [ARG.DIFF_SRC]: sOut,
    ...(c.prob ? { [ARG.GLU_PROB]: mp, [ARG.GLU_DIFF_PROB]: sdp } : {}),
  });
  await strm.wait();
  const out: FusedRun = {
    dst: f64(dst), dprob: f64(mdp), sDst: f64(sOut), sDprob: f64(sdp), rows, T, implInfo: pdFused.implInfo,
    diff: f64(diff), h: f64(h13), prob, dprob0,
  };
  for (const m of mems.reverse()) m.free();
  return out;
}

/** Fused == standalone on the touched rows, bit for bit; rows past the last offset untouched. */
function expectFusedEqualsStandalone(c: FusedCase, r: FusedRun): void {
  const W = 2 * c.N;
  for (let row = 0; row < r.T; row++) {
    const f = r.dst.subarray(row * W, (row + 1) * W);
    if (row >= r.rows) {
      expect(f.every((x) => x === SENTINEL), `row ${row} past the last offset was written`).toBe(true);
      expect(r.dprob[row]).toBe(SENTINEL);
      continue;
    }
    expect(bits(f), `row ${row}`).toEqual(bits(r.sDst.subarray(row * W, (row + 1) * W)));
  }
  if (c.prob) expect(bits(r.dprob.subarray(0, r.rows))).toEqual(bits(r.sDprob.subarray(0, r.rows)));
  else expect(bits(r.dprob.subarray(0, r.rows))).toEqual(bits(r.dprob0.subarray(0, r.rows)));
}

/** The fused result against the float64 reference applied to the GEMM's own f32 output. */
function expectFusedMatchesReference(c: FusedCase, r: FusedRun, rel = 2e-5): void {
  const { N } = c;
  for (let row = 0; row < r.rows; row++) {
    const ref = gluBackwardRow(c.spec, N, r.h.subarray(row * 2 * N), r.diff.subarray(row * N), c.prob ? r.prob[row] : undefined);
    for (let i = 0; i < 2 * N; i++) {
      if (Math.abs(r.dst[row * 2 * N + i] - ref.dh[i]) > rel * (1 + Math.abs(ref.dh[i]))) expect.fail(`row ${row} col ${i}: got ${r.dst[row * 2 * N + i]}, reference ${ref.dh[i]}`);
    }
    if (c.prob) expect(Math.abs(r.dprob[row] - (r.dprob0[row] + ref.dprob))).toBeLessThan(rel * (1 + ref.scale + Math.abs(r.dprob0[row])));
  }
}

describe.each(ENGINES)('matmul glu_backward post-op (%s)', (_name, options) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(options);
  });
  afterAll(() => eng.release());
  const wasm = options.kernels !== 'none';

  it.each(ALGS.flatMap((a) => LAYOUTS.map((l) => [a, l] as const)))('%s %s: fused == plain GEMM + standalone, and the reference', async (alg, layout) => {
    for (const prob of [true, false]) {
      const c: FusedCase = { spec: specOf(alg, layout), kind: 'P1', sizes: [3, 0, 6, 1], extra: 2, K: 19, N: layout === 'blocks32' ? 64 : 37, prob, wei: 'abc' };
      const r = await runFused(eng, c);
      if (wasm) expect(r.implInfo).toMatch(/^wasm:/);
      if (wasm) expectFusedEqualsStandalone(c, r);
      expectFusedMatchesReference(c, r, wasm ? 2e-5 : 1e-6);
    }
  });

  it.each([
    ['P1', 'abc'], ['P1', 'acb'], ['P1', 'any'], ['P2', 'abc'], ['P2', 'any'], ['dense', 'ab'], ['dense', 'ba'], ['dense', 'any'],
  ] as const)('%s with %s weights: the post-op does not depend on where the weights come from', async (kind, w) => {
    const wei: WeiLayout = w === 'ab' ? 'abc' : w === 'ba' ? 'acb' : w;
    const sizes = kind === 'dense' ? [21] : [5, 0, 9, 7];
    // N = 200: two N tiles of the GEMM (128 + 72), several 64-column dprob chunks, a partial one.
    const c: FusedCase = { spec: specOf('glu_swiglu_oai', 'interleaved'), kind, sizes, extra: kind === 'dense' ? 0 : 3, K: 33, N: 200, prob: true, wei };
    const r = await runFused(eng, c);
    if (wasm) expectFusedEqualsStandalone(c, r);
    expectFusedMatchesReference(c, r, wasm ? 2e-5 : 1e-6);
  });

  it.each([['P1', 'any'], ['P2', 'abc'], ['dense', 'acb']] as const)('%s with %s weights and weights scales: the dGLU on the fused-epilogue path', async (kind, wei) => {
    const c: FusedCase = { spec: specOf('glu_geglu_erf', 'halves'), kind, sizes: kind === 'dense' ? [13] : [6, 0, 7], extra: kind === 'dense' ? 0 : 2, K: 21, N: 150, prob: true, wei, weiScales: true };
    const r = await runFused(eng, c);
    if (wasm) expect(r.implInfo).toContain('fused');
    if (wasm) expectFusedEqualsStandalone(c, r);
    expectFusedMatchesReference(c, r, wasm ? 2e-5 : 1e-6);
  });

  it.each([
    ['empty groups', [0, 4, 0, 0, 5, 0]], ['one group with all rows', [0, 0, 11]], ['E = 1', [8]], ['every group empty', [0, 0]],
  ] as const)('grouped rows: %s', async (_n, sizes) => {
    for (const kind of ['P1', 'P2'] as const) {
      const c: FusedCase = { spec: specOf('glu_geglu_tanh', 'halves'), kind, sizes, extra: 2, K: 7, N: 70, prob: true, wei: 'abc' };
      const r = await runFused(eng, c);
      if (wasm) expectFusedEqualsStandalone(c, r);
      expectFusedMatchesReference(c, r, wasm ? 2e-5 : 1e-6);
    }
  });

  it('bf16 h13 and bf16 dst: fused == standalone', async () => {
    const c: FusedCase = { spec: specOf('glu_geglu_erf', 'blocks32'), kind: 'P1', sizes: [4, 6], extra: 1, K: 12, N: 64, prob: true, wei: 'any', h13Dt: dt.bf16, dstDt: dt.bf16 };
    const r = await runFused(eng, c);
    if (wasm) expectFusedEqualsStandalone(c, r);
    expectFusedMatchesReference(c, r, 8e-3);
  });
});

describe('glu_backward: bitwise identical on 1, 2 and 3 threads', () => {
  it.each([['simd128'], ['relaxed']] as const)('%s: fused post-op and standalone', async (isa) => {
    const cases: FusedCase[] = [
      { spec: specOf('glu_swiglu', 'blocks32'), kind: 'P1', sizes: [70, 0, 130, 1, 99], extra: 5, K: 40, N: 224, prob: true, wei: 'any', seed: 21 },
      { spec: specOf('glu_swiglu_oai', 'interleaved'), kind: 'P2', sizes: [150, 150], K: 24, N: 200, prob: true, wei: 'abc', seed: 22, weiScales: true },
      { spec: specOf('glu_geglu_erf', 'halves'), kind: 'dense', sizes: [260], K: 16, N: 131, prob: true, wei: 'acb', seed: 23 },
    ];
    const results: FusedRun[][] = [];
    for (const threads of [1, 2, 3]) {
      const eng = await Engine.create({ threads, kernels: isa });
      try {
        const row: FusedRun[] = [];
        for (const c of cases) row.push(await runFused(eng, c));
        results.push(row);
      } finally {
        eng.release();
      }
    }
    cases.forEach((c, i) => {
      expectFusedEqualsStandalone(c, results[0][i]);
      for (const t of [1, 2]) {
        expect(bits(results[t][i].dst), `case ${i}, ${t + 1} threads, dst`).toEqual(bits(results[0][i].dst));
        expect(bits(results[t][i].dprob), `case ${i}, ${t + 1} threads, dprob`).toEqual(bits(results[0][i].dprob));
        expect(bits(results[t][i].sDst), `case ${i}, ${t + 1} threads, standalone`).toEqual(bits(results[0][i].sDst));
        expect(bits(results[t][i].sDprob), `case ${i}, ${t + 1} threads, standalone dprob`).toEqual(bits(results[0][i].sDprob));
      }
    });
  }, 120_000);
});

describe.each(ENGINES)('glu_backward: invalid inputs (%s)', (_name, options) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(options);
  });
  afterAll(() => eng.release());
  const f32 = (dims: number[], t: DataType = dt.f32): MemoryDesc => memory.desc(dims, t, dims.length === 3 ? tag.abc : tag.ab);
  const grp = (R: number, cols: number, G: number): MemoryDesc => memory.desc.grouped([R, cols], dt.f32, G, [RT, cols]);
  const mk = (alg: GluAlg, layout: GluLayout, ds: MemoryDesc, dd: MemoryDesc, s: MemoryDesc, o = {}): unknown => new glu_backward.PrimitiveDesc(eng, ds, dd, s, { alg, layout, ...o });

  it('standalone pd: shape, layout, type and prob rules name the argument', () => {
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([5, 4]), f32([6, 8])), 'invalid_arguments', 'diff_dst dims[0] = 5');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 8]), f32([6, 8])), 'invalid_arguments', 'diff_dst dims[1] = 8');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 10]), f32([6, 4]), f32([6, 8])), 'invalid_arguments', 'diff_src dims [6,10]');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 7]), f32([6, 3]), f32([6, 7])), 'invalid_arguments', 'src dims[1] = 7');
    expectDnnlError(() => mk('glu_swiglu', 'blocks32', f32([6, 96]), f32([6, 48]), f32([6, 96])), 'invalid_arguments', 'blocks32 needs I % 32 == 0');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 4]), f32([6, 8]), { prob: f32([6, 2]) }), 'invalid_arguments', 'prob dims [6,2]');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 4]), f32([6, 8]), { prob: f32([5, 1]) }), 'invalid_arguments', 'prob dims [5,1]');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 4]), f32([6, 8]), { prob: f32([6, 1], dt.bf16) }), 'invalid_arguments', 'prob data type bf16');
    expectDnnlError(() => mk('glu_swiglu', 'halves', grp(6, 8, 2), f32([6, 4]), grp(6, 8, 2)), 'invalid_arguments', 'all be grouped or all plain');
    expectDnnlError(() => mk('glu_swiglu', 'halves', grp(6, 8, 3), grp(6, 4, 2), grp(6, 8, 2)), 'invalid_arguments', 'diff_src group count 3');
    expectDnnlError(() => mk('glu_geglu_erf', 'halves', f32([6, 8]), f32([6, 4]), f32([6, 8]), { alpha: 2 }), 'invalid_arguments', 'alpha applies');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 4]), f32([6, 8]), { limit: 2 }), 'invalid_arguments', 'limit applies');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 4], dt.s8), f32([6, 8])), 'unimplemented', 'diff_dst data type s8');
    expectDnnlError(() => mk('glu_swiglu', 'halves', f32([6, 8]), f32([6, 4]), f32([6, 8, 1])), 'invalid_arguments', 'src must be 2D');
  });

  it('standalone execute: dprob of the wrong shape / type, missing or extra prob, overlap', () => {
    const probMd = f32([6, 1]);
    const pd = new glu_backward.PrimitiveDesc(eng, f32([6, 8]), f32([6, 4]), f32([6, 8]), { alg: 'glu_swiglu', prob: probMd });
    const prim = new glu_backward.Primitive(pd);
    const s = new Stream(eng);
    const h = Memory.create(f32([6, 8]), eng), d = Memory.create(f32([6, 4]), eng), o = Memory.create(f32([6, 8]), eng);
    const p = Memory.create(probMd, eng), dp = Memory.create(probMd, eng);
    const base = { [ARG.SRC]: h, [ARG.DIFF_DST]: d, [ARG.DIFF_SRC]: o, [ARG.GLU_PROB]: p };
    expectDnnlError(() => prim.execute(s, { ...base, [ARG.GLU_DIFF_PROB]: Memory.create(f32([6, 2]), eng) }), 'invalid_arguments', 'ARG.GLU_DIFF_PROB descriptor');
    expectDnnlError(() => prim.execute(s, { ...base, [ARG.GLU_DIFF_PROB]: Memory.create(f32([6, 1], dt.bf16), eng) }), 'invalid_arguments', 'ARG.GLU_DIFF_PROB descriptor');
    expectDnnlError(() => prim.execute(s, base), 'invalid_arguments', 'missing argument ARG.GLU_DIFF_PROB');
    expectDnnlError(() => prim.execute(s, { ...base, [ARG.GLU_DIFF_PROB]: p }), 'invalid_arguments', 'ARG.GLU_DIFF_PROB values overlap ARG.GLU_PROB');
    expectDnnlError(() => prim.execute(s, { ...base, [ARG.DIFF_SRC]: h, [ARG.GLU_DIFF_PROB]: dp }), 'invalid_arguments', 'ARG.DIFF_SRC values overlap ARG.SRC');
    const noProb = new glu_backward.Primitive(new glu_backward.PrimitiveDesc(eng, f32([6, 8]), f32([6, 4]), f32([6, 8]), { alg: 'glu_swiglu' }));
    expectDnnlError(() => noProb.execute(s, { ...base, [ARG.GLU_DIFF_PROB]: dp }), 'invalid_arguments', 'ARG.GLU_PROB was given');
  });

  it.each([
    ['a non-zero first offset', [1, 3, 6], [1, 3, 6], 'ARG.SRC offsets[0] = 1 must be 0'],
    ['decreasing offsets', [0, 4, 3], [0, 4, 3], 'ARG.SRC offsets[2] = 3 is below offsets[1] = 4'],
    ['a last offset past the rows', [0, 3, 7], [0, 3, 7], 'ARG.SRC offsets[2] = 7 exceeds the 6 rows'],
    ['diff_dst offsets that differ from src', [0, 3, 5], [0, 2, 5], 'ARG.DIFF_DST offsets[1] = 2 differ from ARG.SRC offsets[1] = 3'],
  ] as const)('standalone grouped: %s is a DnnlError at wait(), nothing written', async (_n, so, dof, msg) => {
    const pd = new glu_backward.PrimitiveDesc(eng, grp(6, 8, 2), grp(6, 4, 2), grp(6, 8, 2), { alg: 'glu_swiglu', layout: 'halves', prob: f32([6, 1]) });
    const prim = new glu_backward.Primitive(pd);
    const s = new Stream(eng);
    const h = Memory.create(grp(6, 8, 2), eng), d = Memory.create(grp(6, 4, 2), eng), o = Memory.create(grp(6, 8, 2), eng);
    const p = Memory.create(f32([6, 1]), eng), dp = Memory.create(f32([6, 1]), eng);
    h.write(new Float64Array(48).fill(0.5));
    d.write(new Float64Array(24).fill(0.25));
    o.write(new Float64Array(48).fill(SENTINEL));
    p.write(new Float64Array(6).fill(1));
    dp.write(new Float64Array(6).fill(3));
    h.offsets.set(so);
    d.offsets.set(dof);
    o.offsets.set(so);
    prim.execute(s, { [ARG.SRC]: h, [ARG.DIFF_DST]: d, [ARG.DIFF_SRC]: o, [ARG.GLU_PROB]: p, [ARG.GLU_DIFF_PROB]: dp });
    await expectDnnlReject(s.wait(), 'invalid_arguments', msg);
    expect(o.read().every((x) => x === SENTINEL)).toBe(true);
    expect(dp.read().every((x) => x === 3)).toBe(true);
  });

  it('matmul post-op: pd and execute rules name the argument', () => {
    const G = 2, T = 6, K = 4;
    const src = memory.desc.grouped([T, K], dt.f32, G, [RT, K]);
    const dstG = (cols: number): MemoryDesc => memory.desc.grouped([T, cols], dt.f32, G, [RT, cols]);
    const attr = (layout: GluLayout = 'halves', prob = true): PrimitiveAttr => {
      const a = new PrimitiveAttr();
      a.postOps.appendGluBackward('glu_swiglu', layout, undefined, undefined, { prob });
      return a;
    };
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, f32([G, K, 48]), dstG(96), attr('blocks32')), 'invalid_arguments', 'blocks32 needs N % 32 == 0');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, f32([G, K, 8]), dstG(8), attr()), 'invalid_arguments', 'must equal weights N x 2 (glu_backward');
    const a2 = attr();
    a2.postOps.appendEltwise('eltwise_relu');
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, src, f32([G, K, 8]), dstG(16), a2), 'invalid_arguments', 'must be the only post-op');
    expectDnnlError(() => new PrimitiveAttr().postOps.appendEltwise('eltwise_relu').appendGluBackward('glu_swiglu', 'halves'), 'invalid_arguments', 'glu_backward must be the only post-op');
    expectDnnlError(() => new PrimitiveAttr().postOps.appendGluBackward('glu_swiglu', 'halves', undefined, undefined, { srcDataType: dt.s8 }), 'invalid_arguments', 'srcDataType s8');
    const pd = new matmul.PrimitiveDesc(eng, src, f32([G, K, 8]), dstG(16), attr());
    expect(pd.queryMd('glu_backward:src')!.dims).toEqual([T, 16]);
    expect(pd.queryMd('glu_backward:diff_prob')!.dims).toEqual([T, 1]);
    const prim = new matmul.Primitive(pd);
    const s = new Stream(eng);
    const m = Memory.create(src, eng), w = Memory.create(f32([G, K, 8]), eng), dst = Memory.create(dstG(16), eng);
    const h = Memory.create(f32([T, 16]), eng), p = Memory.create(f32([T, 1]), eng), dp = Memory.create(f32([T, 1]), eng);
    const po = (x: number): number => ARG.ATTR_MULTIPLE_POST_OP(0) | x;
    const base = { [ARG.SRC]: m, [ARG.WEIGHTS]: w, [ARG.DST]: dst };
    expectDnnlError(() => prim.execute(s, { ...base, [po(ARG.GLU_PROB)]: p, [po(ARG.GLU_DIFF_PROB)]: dp }), 'invalid_arguments', 'missing argument ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1');
    expectDnnlError(() => prim.execute(s, { ...base, [po(ARG.SRC_1)]: h, [po(ARG.GLU_PROB)]: p, [po(ARG.GLU_DIFF_PROB)]: Memory.create(f32([T, 2]), eng) }), 'invalid_arguments', 'ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.GLU_DIFF_PROB descriptor');
    expectDnnlError(() => prim.execute(s, { ...base, [po(ARG.SRC_1)]: h, [po(ARG.GLU_PROB)]: p, [po(ARG.GLU_DIFF_PROB)]: Memory.create(f32([T, 1], dt.f16), eng) }), 'invalid_arguments', 'ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.GLU_DIFF_PROB descriptor');
    expectDnnlError(() => prim.execute(s, { ...base, [po(ARG.SRC_1)]: h, [po(ARG.GLU_PROB)]: p, [po(ARG.GLU_DIFF_PROB)]: p }), 'invalid_arguments', 'ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.GLU_DIFF_PROB values overlap');
    const noProb = new matmul.Primitive(new matmul.PrimitiveDesc(eng, src, f32([G, K, 8]), dstG(16), attr('halves', false)));
    expectDnnlError(() => noProb.execute(s, { ...base, [po(ARG.SRC_1)]: h, [po(ARG.GLU_PROB)]: p }), 'invalid_arguments', 'has no prob');
  });

  it('matmul post-op: bad offsets are a DnnlError at wait(), dst and dprob untouched', async () => {
    const G = 2, T = 6, K = 4;
    const src = memory.desc.grouped([T, K], dt.f32, G, [RT, K]);
    const dstMd = memory.desc.grouped([T, 16], dt.f32, G, [RT, 16]);
    const a = new PrimitiveAttr();
    a.postOps.appendGluBackward('glu_swiglu', 'interleaved', undefined, undefined, { prob: true });
    const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, src, f32([G, K, 8]), dstMd, a));
    const s = new Stream(eng);
    const m = Memory.create(src, eng), w = Memory.create(f32([G, K, 8]), eng), dst = Memory.create(dstMd, eng, [undefined, m.handles[1]]);
    const h = Memory.create(f32([T, 16]), eng), p = Memory.create(f32([T, 1]), eng), dp = Memory.create(f32([T, 1]), eng);
    m.write(new Float64Array(T * K).fill(1));
    w.write(new Float64Array(G * K * 8).fill(1));
    dst.write(new Float64Array(T * 16).fill(SENTINEL));
    dp.write(new Float64Array(T).fill(3));
    m.offsets.set([0, 5, 4]);
    const po = (x: number): number => ARG.ATTR_MULTIPLE_POST_OP(0) | x;
    prim.execute(s, { [ARG.SRC]: m, [ARG.WEIGHTS]: w, [ARG.DST]: dst, [po(ARG.SRC_1)]: h, [po(ARG.GLU_PROB)]: p, [po(ARG.GLU_DIFF_PROB)]: dp });
    await expectDnnlReject(s.wait(), 'invalid_arguments', 'offsets');
    expect(dst.read().every((x) => x === SENTINEL)).toBe(true);
    expect(dp.read().every((x) => x === 3)).toBe(true);
  });
});

describe.each(ENGINES.filter(([, o]) => o.kernels !== 'none'))('glu_backward uses the forward GLU values (%s)', (_name, options) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(options);
  });
  afterAll(() => eng.release());

  it.each(ALGS.flatMap((a) => LAYOUTS.map((l) => [a, l] as const)))('%s %s: dprob of a one-hot diff is the forward fused GLU output, bit for bit', async (alg, layout) => {
    const spec = specOf(alg, layout);
    const N = layout === 'blocks32' ? 64 : 24, R = N;
    const strm = new Stream(eng);
    const rng = mulberry32(99);
    // Forward: h13 x identity through the fused GLU (the GEMM is exact), dst[r, n] = act(gate) * up.
    const attr = new PrimitiveAttr();
    attr.postOps.appendGlu(alg, layout, spec.alpha, spec.limit);
    const fwd = new matmul.Primitive(new matmul.PrimitiveDesc(eng, memory.desc([R, 2 * N], dt.f32, tag.ab), memory.desc([2 * N, 2 * N], dt.f32, tag.ab), memory.desc([R, N], dt.f32, tag.ab), attr));
    const h = Memory.create(memory.desc([R, 2 * N], dt.f32, tag.ab), eng), eye = Memory.create(memory.desc([2 * N, 2 * N], dt.f32, tag.ab), eng);
    const out = Memory.create(memory.desc([R, N], dt.f32, tag.ab), eng);
    h.write(uniform(rng, R * 2 * N, -4, 4));
    eye.write(Float64Array.from({ length: 4 * N * N }, (_, i) => (Math.floor(i / (2 * N)) === i % (2 * N) ? 1 : 0)));
    fwd.execute(strm, { [ARG.SRC]: h, [ARG.WEIGHTS]: eye, [ARG.DST]: out });
    // Backward: row r has diff 1 at column r only, prob 1, dprob 0: dprob[r] = act(gate[r, r]) * up[r, r].
    const probMd = memory.desc([R, 1], dt.f32, tag.ab);
    const bwd = new glu_backward.Primitive(new glu_backward.PrimitiveDesc(eng, memory.desc([R, 2 * N], dt.f32, tag.ab), memory.desc([R, N], dt.f32, tag.ab), memory.desc([R, 2 * N], dt.f32, tag.ab), { alg, layout, ...opts(spec), prob: probMd }));
    const d = Memory.create(memory.desc([R, N], dt.f32, tag.ab), eng), dh = Memory.create(memory.desc([R, 2 * N], dt.f32, tag.ab), eng);
    const p = Memory.create(probMd, eng), dp = Memory.create(probMd, eng);
    d.write(Float64Array.from({ length: R * N }, (_, i) => (Math.floor(i / N) === i % N ? 1 : 0)));
    p.write(new Float64Array(R).fill(1));
    dp.write(new Float64Array(R));
    bwd.execute(strm, { [ARG.SRC]: h, [ARG.DIFF_DST]: d, [ARG.DIFF_SRC]: dh, [ARG.GLU_PROB]: p, [ARG.GLU_DIFF_PROB]: dp });
    await strm.wait();
    const o = out.read();
    expect(bits(dp.read())).toEqual(bits(Float64Array.from({ length: R }, (_, r) => o[r * N + r])));
    for (const m of [h, eye, out, d, dh, p, dp]) m.free();
  });
});

describe.each(ENGINES)('glu_backward end to end through GEMM2 (%s)', (_name, options) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(options);
  });
  afterAll(() => eng.release());

  it.each(ALGS.map((a) => [a] as const))('%s: d(h13) and dprob of L = <diff_out, (prob * GLU(h13)) W2> from the diff_src GEMM with W2 read as W2^T (acb view)', async (alg) => {
    const spec = specOf(alg, 'interleaved');
    const sizes = [3, 0, 2], E = 3, I = 6, K = 5, R = 5;
    const rng = mulberry32(31);
    const h = awayFromKinks(uniform(rng, R * 2 * I, -2.5, 2.5), spec.limit ?? 7), w2 = uniform(rng, E * I * K, -1, 1);
    const dout = uniform(rng, R * K, -1, 1), prob = uniform(rng, R, 0.2, 1);
    const group = (r: number): number => (r < 3 ? 0 : 2);
    // float64 loss and its finite differences
    const loss = (hh: Float64Array, pp: Float64Array): number => {
      let l = 0;
      for (let r = 0; r < R; r++) {
        const g = group(r);
        for (let n = 0; n < I; n++) {
          const a = pp[r] * forwardDotRow(spec, I, hh.subarray(r * 2 * I), Float64Array.from({ length: I }, (_, j) => (j === n ? 1 : 0)));
          for (let k = 0; k < K; k++) l += dout[r * K + k] * a * w2[(g * I + n) * K + k];
        }
      }
      return l;
    };
    const strm = new Stream(eng);
    const rowsMd = (cols: number): MemoryDesc => memory.desc.grouped([R, cols], dt.f32, E, [RT, cols]);
    const attr = new PrimitiveAttr();
    attr.postOps.appendGluBackward(alg, 'interleaved', spec.alpha, spec.limit, { prob: true });
    const w2Mem = Memory.create(memory.desc([E, I, K], dt.f32, tag.abc), eng);
    w2Mem.write(w2);
    const w2t = Memory.create(memory.desc([E, K, I], dt.f32, tag.acb), eng, w2Mem.handles[0]); // the same bytes as W2^T
    const pd = new matmul.PrimitiveDesc(eng, rowsMd(K), w2t.desc, rowsMd(2 * I), attr);
    const src = Memory.create(rowsMd(K), eng);
    src.write(dout);
    src.offsets.set(cumulative(sizes));
    const dst = Memory.create(rowsMd(2 * I), eng, [undefined, src.handles[1]]);
    const h13 = Memory.create(pd.queryMd('glu_backward:src')!, eng), p = Memory.create(pd.queryMd('glu_backward:prob')!, eng), dp = Memory.create(pd.queryMd('glu_backward:diff_prob')!, eng);
    h13.write(h);
    p.write(prob);
    dp.write(new Float64Array(R));
    const po = (x: number): number => ARG.ATTR_MULTIPLE_POST_OP(0) | x;
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: w2t, [ARG.DST]: dst, [po(ARG.SRC_1)]: h13, [po(ARG.GLU_PROB)]: p, [po(ARG.GLU_DIFF_PROB)]: dp });
    await strm.wait();
    const got = dst.read(), gotP = dp.read();
    const eps = 1e-6;
    for (let i = 0; i < R * 2 * I; i++) {
      const hp = Float64Array.from(h), hm = Float64Array.from(h);
      hp[i] += eps;
      hm[i] -= eps;
      const fd = (loss(hp, prob) - loss(hm, prob)) / (2 * eps);
      expect(Math.abs(got[i] - fd), `d(h13)[${i}]`).toBeLessThan(1e-4 * (1 + Math.abs(fd)));
    }
    for (let r = 0; r < R; r++) {
      const pp = Float64Array.from(prob), pm = Float64Array.from(prob);
      pp[r] += eps;
      pm[r] -= eps;
      const fd = (loss(h, pp) - loss(h, pm)) / (2 * eps);
      expect(Math.abs(gotP[r] - fd), `dprob[${r}]`).toBeLessThan(1e-4 * (1 + Math.abs(fd)));
    }
    for (const m of [w2t, w2Mem, src, dst, h13, p, dp]) m.free();
  });
});

describe.each(ENGINES.filter(([, o]) => o.kernels !== 'none'))('glu_backward bf16 vector paths (%s)', (_name, options) => {
  let eng: Engine;
  beforeAll(async () => {
    eng = await Engine.create(options);
  });
  afterAll(() => eng.release());

  it.each(LAYOUTS.map((l) => [l] as const))('%s: a bf16 d(h13) is the f32 result rounded to nearest even, bit for bit', async (layout) => {
    const N = layout === 'blocks32' ? 64 : 23, R = 6;
    const rng = mulberry32(77);
    const bf = (cols: number): MemoryDesc => memory.desc([R, cols], dt.bf16, tag.ab);
    const strm = new Stream(eng);
    const h = Memory.create(bf(2 * N), eng), d = Memory.create(bf(N), eng);
    h.write(uniform(rng, R * 2 * N, -3, 3));
    d.write(uniform(rng, R * N, -1, 1));
    const outs: Memory[] = [];
    for (const t of [dt.f32, dt.bf16]) {
      const md = memory.desc([R, 2 * N], t, tag.ab);
      const o = Memory.create(md, eng);
      new glu_backward.Primitive(new glu_backward.PrimitiveDesc(eng, md, bf(N), bf(2 * N), { alg: 'glu_swiglu', layout })).execute(strm, { [ARG.SRC]: h, [ARG.DIFF_DST]: d, [ARG.DIFF_SRC]: o });
      outs.push(o);
    }
    await strm.wait();
    const f = outs[0].read(), codes = outs[1].values as Uint16Array;
    expect(Array.from(codes)).toEqual(Array.from(f, (x) => toStored(dt.bf16, x)));
    for (const m of [h, d, ...outs]) m.free();
  });
});
